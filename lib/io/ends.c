/* ends.c — sources and sinks (include/ckpz.h): their set-up and what a call makes of the
 * ones it is given (io_resolve).
 *
 * The hooks that are a property of an end (a sink that can seek can be patched; the
 * work on a source reports progress) used to be fields of ckpz_params. They live with
 * the ends now, so that a new transport is one adapter filling a source or a sink; the
 * old fields stay in ckpz_params (its layout never changes) and are honoured where the
 * source or sink leaves the hook unset, which is how the callback entry points keep
 * their behaviour. This file uses nothing above it: the entry points (api/compress.c,
 * api/decompress.c, api/archive.c) and the adapters (mem.c, fd.c) call it, and the
 * callback entry points (api/callbacks.c) call the former, so keeping the two apart keeps
 * the call graph free of circles.
 */
#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL /* ckpz_lender */
#endif
#include <stddef.h>
#include <string.h>

#include "io/io.h"

void ckpz_source_init(ckpz_source *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->size = CKPZ_SIZE_UNKNOWN;
}

void ckpz_sink_init(ckpz_sink *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
}

/* The caller's struct of struct_size bytes (from an older or this header) into *out,
 * whose later fields keep the defaults *out had. */
static int take(void *out, size_t out_size, const void *in, size_t in_size, size_t min_size)
{
    if (in_size < min_size || in_size > out_size) return -1;
    memcpy(out, in, in_size);
    memcpy(out, &out_size, sizeof out_size); /* struct_size comes first in both */
    return 0;
}

ckpz_error io_resolve(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                      ckpz_params *p, ckpz_source *s, ckpz_sink *k)
{
    ckpz_error err = params_resolve(ctx, params, p);
    if (err) return err;
    ckpz_source_init(s);
    ckpz_sink_init(k);
    /* the first versions' sizes: a caller built against them may pass no less */
    if (src && take(s, sizeof *s, src, src->struct_size, offsetof(ckpz_source, progress_opaque) + sizeof(void *)))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_source not initialised with ckpz_source_init");
    if (dst && take(k, sizeof *k, dst, dst->struct_size, offsetof(ckpz_sink, opaque) + sizeof(void *)))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_sink not initialised with ckpz_sink_init");
    if (s->progress) {
        p->progress = s->progress;
        p->progress_opaque = s->progress_opaque;
    }
    if (k->patch) {
        p->patch = k->patch;
        p->patch_opaque = k->opaque;
    }
    return CKPZ_OK;
}

void ckpz_sink_lender(ckpz_sink *s, ckpz_lender *l)
{
    ckpz_sink_init(s);
    s->write = ckpz_lender_write;
    s->patch = l->patch ? ckpz_lender_patch : NULL;
    s->opaque = l;
}

int ckpz_lender_write(void *lender, const void *buf, size_t n)
{
    ckpz_lender *l = lender;
    return l->write(l->opaque, buf, n);
}

int ckpz_lender_patch(void *lender, const void *buf, size_t n, uint64_t off)
{
    ckpz_lender *l = lender;
    return l->patch(l->opaque, buf, n, off);
}
