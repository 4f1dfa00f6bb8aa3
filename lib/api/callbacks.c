/* callbacks.c — the entry points of bare callbacks (ckpz_compress_stream,
 * ckpz_decompress_stream, ckpz_archive_open) expressed as a source and a sink and handed
 * to the stages' source-and-sink calls. The ends' set-up is in ends.c.
 */
#include "io/io.h"

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
