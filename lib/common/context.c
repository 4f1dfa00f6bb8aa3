/* context.c — version, error names, a context's messages and parameter defaults. A
 * context's creation and release live with the working memory it keeps (workmem.c), so
 * that this file, which every stage calls to report an error, calls none of them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ctx.h"

unsigned ckpz_version_number(void) { return CKPZ_VERSION_NUMBER; }
const char *ckpz_version_string(void) { return CKPZ_VERSION_STRING; }

const char *ckpz_error_name(ckpz_error code)
{
    switch (code) {
#define CKPZ_X_CASE(name, num, text) \
    case name: return text;
        CKPZ_ERROR_LIST(CKPZ_X_CASE)
#undef CKPZ_X_CASE
    }
    return "unknown error code";
}

const char *ckpz_ctx_message(const ckpz_ctx *ctx) { return ctx ? ctx->msg : ""; }

ckpz_error ckpz_ctx_report(ckpz_ctx *ctx, ckpz_error code, const char *msg)
{
    if (ctx) snprintf(ctx->msg, sizeof ctx->msg, "%s", msg ? msg : "");
    return code;
}

void ctx_clear(ckpz_ctx *ctx)
{
    if (ctx) ctx->msg[0] = 0;
}

ckpz_error ctx_fail(ckpz_ctx *ctx, ckpz_error code, const char *fmt, ...)
{
    if (ctx && !ctx->msg[0]) { /* the first, innermost message is the informative one */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

int out_check(ckpz_ctx *ctx, const void *out, size_t full, const char *type)
{
    size_t have;
    memcpy(&have, out, sizeof have);
    if (have >= sizeof have && have <= full) return 0;
    if (have == 0) ctx_fail(ctx, CKPZ_ERR_PARAM, "%s.struct_size is 0: set it to sizeof(%s)", type, type);
    else
        ctx_fail(ctx, CKPZ_ERR_PARAM, "%s.struct_size %zu is not a size of it this library fills (%zu to %zu)%s", type,
                 have, sizeof have, full, have > full ? ": the program's ckpz.h is newer than the library" : "");
    return -1;
}

void out_give(void *out, const void *mine, size_t full)
{
    size_t have;
    memcpy(&have, out, sizeof have);
    if (have > full) have = full;
    if (have > sizeof have) memcpy((char *)out + sizeof have, (const char *)mine + sizeof have, have - sizeof have);
}

void ckpz_params_init(ckpz_params *p)
{
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->level = CKPZ_LEVEL_DEFAULT;
    p->format = CKPZ_INPUT_AUTO;
    p->raw_dtype = CKPZ_DTYPE_NONE;
}

int raw_shape_check(ckpz_ctx *ctx, ckpz_input_format f, ckpz_dtype t, uint32_t ndim, const uint64_t *shape)
{
    const char *bad = NULL;
    uint64_t n = ckpz_dtype_size(t);
    if (f != CKPZ_INPUT_RAW && f != CKPZ_INPUT_AUTO) bad = "it applies to raw input only";
    else if (t == CKPZ_DTYPE_NONE) bad = "it needs the element type (raw_dtype)";
    else if (ndim > 64 || !shape) bad = "it has 1 to 64 dimensions"; /* the container's limit */
    for (uint32_t d = 0; !bad && d < ndim; d++) {
        if (shape[d] == 0 || n > (UINT64_MAX - 1) / shape[d])
            bad = shape[d] ? "it holds more than 2^64 bytes" : "a dimension is 0";
        n *= shape[d];
    }
    if (!bad) return 0;
    ctx_fail(ctx, CKPZ_ERR_PARAM, "raw shape: %s", bad);
    return -1;
}

ckpz_error params_resolve(ckpz_ctx *ctx, const ckpz_params *in, ckpz_params *out)
{
    ckpz_params_init(out);
    if (in) {
        if (in->struct_size < offsetof(ckpz_params, progress_opaque) + sizeof(void *) || in->struct_size > sizeof *out)
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_params not initialised with ckpz_params_init");
        memcpy(out, in, in->struct_size);
        out->struct_size = sizeof *out;
    }
    if ((out->level < CKPZ_LEVEL_MIN && out->level != CKPZ_LEVEL_STORE) || out->level > CKPZ_LEVEL_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "level %d out of range %d..%d", out->level, CKPZ_LEVEL_MIN,
                        CKPZ_LEVEL_MAX);
    if (out->threads < 0) return ctx_fail(ctx, CKPZ_ERR_PARAM, "negative thread count");
    if (out->threads == 0) {
        /* sysconf reads /sys on every call (tens of microseconds, a third of coding a
         * 64 KiB buffer): once per process; racing threads store the same value. */
        static int cores;
        int n = __atomic_load_n(&cores, __ATOMIC_RELAXED);
        if (n <= 0) {
            long c = sysconf(_SC_NPROCESSORS_ONLN);
            n = c > 0 ? (int)(c < 4096 ? c : 4096) : 1;
            __atomic_store_n(&cores, n, __ATOMIC_RELAXED);
        }
        out->threads = n;
    }
    if (out->threads > 256) out->threads = 256;
    if (out->chunk_size == 0) out->chunk_size = CKPZ_DEFAULT_CHUNK;
    if (out->chunk_size < CKPZ_CHUNK_MIN || out->chunk_size > CKPZ_CHUNK_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "chunk size %zu out of range %u..%u", out->chunk_size, CKPZ_CHUNK_MIN,
                        CKPZ_CHUNK_MAX);
    out->chunk_size &= ~(size_t)7; /* a whole number of elements of every dtype */
    if ((unsigned)out->format >= CKPZ_INPUT_COUNT_) return ctx_fail(ctx, CKPZ_ERR_PARAM, "unknown input format");
    if ((unsigned)out->raw_dtype >= CKPZ_DTYPE_COUNT_) return ctx_fail(ctx, CKPZ_ERR_PARAM, "unknown dtype");
    if (out->raw_ndim && raw_shape_check(ctx, out->format, out->raw_dtype, out->raw_ndim, out->raw_shape))
        return CKPZ_ERR_PARAM;
    if ((unsigned)out->codec >= CKPZ_CODEC_COUNT_) return ctx_fail(ctx, CKPZ_ERR_PARAM, "unknown codec choice");
    if (out->mem_limit == 0) out->mem_limit = CKPZ_DEFAULT_MEM_LIMIT;
    if (!out->base && out->base_size) return ctx_fail(ctx, CKPZ_ERR_PARAM, "base size given without a base");
    if (out->base_depth >= UINT32_MAX - 1) return ctx_fail(ctx, CKPZ_ERR_PARAM, "base depth out of range");
    return CKPZ_OK;
}
