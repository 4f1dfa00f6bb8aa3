/* decompress.c — the sequential decompression path: the reader (codec/decode.c) takes a
 * .ckpz stream's frames front to back, so it works from a pipe; workers decode each chunk
 * (decode_job over codec/codec.c), and the calling thread writes the chunks' bytes in
 * order and finally checks the index and trailer (the reader again). The calling thread
 * alternates between reading the next chunk frame and writing decoded ones, so input,
 * decoding and output overlap; at most `depth` chunks are in memory. A sink that lends
 * room (ckpz_sink_lender: the library's fd sink written behind, the CLI's output) has
 * each chunk decoded straight into it, so writing it behind costs no copy; a copy
 * frame, or a chunk the sink lends no room for, is written from the decoder's buffer. */
#include <stdlib.h>

#include "codec/decode.h"
#include "codec/workmem.h"
#include "common/bytes.h"
#include "common/pipeline.h"
#include "io/io.h"
#include "transforms/ids.h"

static ckpz_error decompress_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                                ckpz_stats *stats, io_pumps *x)
{
    ctx_clear(ctx);
    ckpz_params p; /* with the hooks in effect (io_resolve) */
    ckpz_source in;
    ckpz_sink out;
    if (stats && OUT_CHECK(ctx, stats, "ckpz_stats")) return CKPZ_ERR_PARAM;
    ckpz_error err = io_resolve(ctx, params, src, dst, &p, &in, &out);
    if (err) return err;
    io_pump_begin(x, &p, &out, 0); /* joined by the caller, whatever this returns */
    if (!in.read) return ctx_fail(ctx, CKPZ_ERR_PARAM, "missing read callback");

    void *lop = NULL; /* a sink that lends: chunks decoded into its room */
    ckpz_lend_fn lend = io_sink_lend(&out, &lop, p.threads <= 1); /* serial: one at a time */
    reader d;
    reader_init(&d, ctx, &p, in.read, in.opaque, out.write, out.opaque);
    if ((err = reader_start(&d, &p))) return err;
    const ctr_header h = d.h;

    int workers = p.threads - 1; /* the calling thread codes too */
    size_t depth = pipeline_depth(p.threads), used_jobs = 0;
    d.max_payload = chunk_frame_bound(h.chunk_size) - CTR_FRAME_SIZE;
    if (d.max_payload + CTR_FRAME_SIZE > p.mem_limit)
        return ctx_fail(ctx, CKPZ_ERR_LIMIT, "chunk size %u needs buffers larger than the memory limit (%zu bytes)",
                        h.chunk_size, p.mem_limit);
    struct workmem *wm = workmem_take(ctx); /* scratch and job buffers kept by the context */
    d.lists = workmem_lists(wm);
    djob *jobs = calloc(depth, sizeof *jobs), *j, **freed = calloc(depth, sizeof *freed);
    size_t nfree = 0; /* jobs retired early (freed[]), free for the next chunks */
    pipeline *pl = NULL;
    size_t bchunk = 0;
    if (!wm || !jobs || !freed ||
        workmem_scratch(wm, workers + 1, h.chunk_size, h.lossy ? CHUNK_SCRATCH_DECODE_LOSSY : 0))
        goto nomem;
    bchunk = workmem_buffers(wm, h.chunk_size);
    for (size_t i = 0; i < depth; i++) workmem_lend(wm, i, &jobs[i].raw, &jobs[i].payload);
    if (!(pl = pipeline_create(workers, depth, decode_job, wm->scratch))) goto nomem;

    for (;;) {
        uint8_t fb[CTR_FRAME_SIZE];
        if ((err = reader_exact(&d, fb, 4, "a frame tag"))) goto fail;
        uint32_t tag = ld32(fb);
        if (tag == CTR_TAG_INDEX) break;
        if (tag == CTR_TAG_ENTRY || tag == CTR_TAG_LIST) {
            if ((err = reader_entry(&d, fb))) goto fail;
            continue;
        }
        if (tag != CTR_TAG_CHUNK) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "unknown frame tag at byte %llu (after chunk %llu)",
                           (unsigned long long)(d.in_pos - 4), (unsigned long long)d.chunk_no);
            goto fail;
        }
        if (nfree) {
            j = freed[--nfree];
        } else if (used_jobs < depth) {
            j = &jobs[used_jobs++];
            if ((!j->payload && !(j->payload = malloc(workmem_out_bound(bchunk)))) ||
                (!j->raw && !(j->raw = malloc(bchunk))))
                goto nomem;
        } else {
            j = pipeline_retire(pl);
            if ((err = reader_emit(&d, j))) goto fail;
        }
        if ((err = reader_chunk(&d, fb, j))) goto fail;
        /* a copy frame's bytes are the base's, written from there; NULL: into raw */
        j->lent = lend && j->h.pred != PRED_COPY ? lend(lop, j->h.raw_len) : NULL;
        /* a copy frame or a stored chunk is a checksum (and at most a copy): cheaper here,
         * where its bytes are in cache, than on another core */
        if (j->h.pred == PRED_COPY || chunk_is_stored(&j->h, j->payload)) {
            pipeline_submit_here(pl, j);
            /* written while its bytes are in cache, not after depth - 1 more chunks */
            while ((j = pipeline_retire_done(pl))) {
                if ((err = reader_emit(&d, j))) goto fail;
                freed[nfree++] = j;
            }
        } else {
            pipeline_submit(pl, j);
        }
    }
    while ((j = pipeline_retire(pl)))
        if ((err = reader_emit(&d, j))) goto fail;
    if ((err = reader_end(&d))) goto fail;
    if (stats) {
        ckpz_stats st = {.struct_size = sizeof st,
                         .original_bytes = d.original,
                         .compressed_bytes = d.in_pos,
                         .chunks = d.nc,
                         .format = (ckpz_input_format)h.format};
        for (size_t i = 0; i < d.ne; i++)
            if (d.e[i].dtype != CKPZ_DTYPE_NONE) st.tensors++;
        OUT_GIVE(stats, &st);
    }
    goto done;
nomem:
    err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
fail:
done:
    pipeline_destroy(pl);
    for (size_t i = 0; jobs && i < depth; i++) {
        if (wm) workmem_return(wm, i, jobs[i].raw, jobs[i].payload);
        else free(jobs[i].raw), free(jobs[i].payload);
        free(jobs[i].image);
    }
    free(jobs);
    free(freed);
    workmem_keep(ctx, wm);
    reader_free(&d);
    return err;
}

ckpz_error ckpz_decompress_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                              ckpz_stats *stats)
{
    io_pumps x = {0};
    ckpz_error err = decompress_io(ctx, params, src, dst, stats, &x);
    return io_pump_end(ctx, &x, err);
}
