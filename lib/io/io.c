/* io.c — sources and sinks (include/ckpz.h): their set-up, what a call makes of the
 * ones it is given, and the entry points of bare callbacks (ckpz_compress_stream,
 * ckpz_decompress_stream, ckpz_archive_open) expressed as a source and a sink.
 *
 * The hooks that are a property of an end (a sink that can seek can be patched; the
 * work on a source reports progress) used to be fields of ckpz_params. They live with
 * the ends now, so that a new transport is one adapter filling a source or a sink; the
 * old fields stay in ckpz_params (its layout never changes) and are honoured where the
 * source or sink leaves the hook unset, which is how the callback entry points keep
 * their behaviour.
 */
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

/* The ends of a callback call: a source of rd (size bytes), a sink of wr. */
static void ends(ckpz_source *s, ckpz_sink *k, ckpz_read_fn rd, void *rd_opaque, uint64_t size, ckpz_write_fn wr,
                 void *wr_opaque)
{
    ckpz_source_init(s);
    s->read = rd;
    s->opaque = rd_opaque;
    s->size = size;
    ckpz_sink_init(k);
    k->write = wr;
    k->opaque = wr_opaque;
}

ckpz_error ckpz_compress_stream(ckpz_ctx *ctx, const ckpz_params *params, ckpz_read_fn rd, void *rd_opaque,
                                uint64_t size_hint, ckpz_write_fn wr, void *wr_opaque, ckpz_stats *stats)
{
    ckpz_source s;
    ckpz_sink k;
    ends(&s, &k, rd, rd_opaque, size_hint, wr, wr_opaque);
    return ckpz_compress_io(ctx, params, &s, &k, stats);
}

ckpz_error ckpz_decompress_stream(ckpz_ctx *ctx, const ckpz_params *params, ckpz_read_fn rd, void *rd_opaque,
                                  ckpz_write_fn wr, void *wr_opaque, ckpz_stats *stats)
{
    ckpz_source s;
    ckpz_sink k;
    ends(&s, &k, rd, rd_opaque, CKPZ_SIZE_UNKNOWN, wr, wr_opaque);
    return ckpz_decompress_io(ctx, params, &s, &k, stats);
}

ckpz_error ckpz_archive_open(ckpz_ctx *ctx, const ckpz_params *params, ckpz_pread_fn pr, void *pr_opaque,
                             uint64_t file_size, ckpz_archive **out)
{
    ckpz_source s;
    ckpz_source_init(&s);
    s.pread = pr;
    s.opaque = pr_opaque;
    s.size = file_size;
    return ckpz_archive_open_io(ctx, params, &s, out);
}
