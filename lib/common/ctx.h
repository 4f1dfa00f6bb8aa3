/* ctx.h — the library context (errors with context) shared by every stage. A failing
 * call records one message naming what failed (file section, chunk, tensor) so that the
 * CLI can print it as is; codes stay the fixed public enum. */
#ifndef CKPZ_CTX_H
#define CKPZ_CTX_H

#include "ckpz.h"

struct workmem; /* workmem.h: working memory kept between calls */

struct ckpz_ctx {
    char msg[512];
    struct workmem *wm; /* NULL until the first call that codes chunks */
};

/* Records the message (printf format) and returns code, for `return ctx_fail(...)`. */
ckpz_error ctx_fail(ckpz_ctx *ctx, ckpz_error code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ctx_clear(ckpz_ctx *ctx);

/* A raw shape (ckpz_params.raw_ndim, raw_shape) for format f and element type t: 0, or
 * -1 with the reason recorded in ctx. */
int raw_shape_check(ckpz_ctx *ctx, ckpz_input_format f, ckpz_dtype t, uint32_t ndim, const uint64_t *shape);

/* Output structs of the caller's (ckpz.h: they start with struct_size, which the caller
 * sets). out_check: 0 when out's struct_size is one this library can fill (from
 * sizeof(size_t) up to full, its own sizeof), else -1 with a message naming `type` in
 * ctx (which may be NULL). out_give: the library's complete struct `mine` (full bytes)
 * into out as far as out's struct_size reaches, out's struct_size kept. Check before the
 * work, give after it. OUT_CHECK / OUT_GIVE take the struct's type from the pointer. */
int out_check(ckpz_ctx *ctx, const void *out, size_t full, const char *type);
void out_give(void *out, const void *mine, size_t full);
#define OUT_CHECK(ctx, out, type) out_check(ctx, out, sizeof *(out), type)
#define OUT_GIVE(out, mine) out_give(out, mine, sizeof *(out))

/* Effective parameters: defaults filled in, values clamped or rejected. */
ckpz_error params_resolve(ckpz_ctx *ctx, const ckpz_params *in, ckpz_params *out);

#define CKPZ_DEFAULT_CHUNK (1u << 20)
#define CKPZ_DEFAULT_MEM_LIMIT ((size_t)1 << 30)

#endif
