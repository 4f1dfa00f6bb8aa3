/* compress.c — the serial compression path: the planner (plan.c) describes the input
 * and cuts it into chunks, workers code each chunk (encode.c over transforms/ and
 * entropy/), and the calling thread writes frames in order and finally the index and
 * trailer (encode.c's writer over container/). The calling thread alternates between
 * planning (reading) the next chunk and writing finished ones, so input, coding and
 * output overlap; at most `depth` chunks are in memory. split.c drives the same three
 * parts for a compression split over processes. */
#include <stdlib.h>
#include <string.h>

#include "codec/encode.h"
#include "codec/workmem.h"
#include "common/pipeline.h"
#include "io/io.h"

/* Where job j's frame was coded: room the sink lent, else its own buffer. */
#define JOB_FRAME(j) ((j)->lent ? (j)->lent : (j)->out)

static ckpz_error compress_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                              ckpz_stats *stats, io_pumps *x)
{
    ctx_clear(ctx);
    ckpz_params p; /* with the hooks in effect (io_resolve) */
    ckpz_source in;
    ckpz_sink out;
    if (stats && OUT_CHECK(ctx, stats, "ckpz_stats")) return CKPZ_ERR_PARAM;
    ckpz_error err = io_resolve(ctx, params, src, dst, &p, &in, &out);
    if (err) return err;
    io_pump_begin(x, &p, &out, workmem_out_bound(p.chunk_size)); /* joined by the caller, always */
    uint64_t size_hint = in.size;
    if (!in.read || !out.write) return ctx_fail(ctx, CKPZ_ERR_PARAM, "missing read or write callback");
    const char *missing = ent_choice_missing(p.codec);
    if (missing) return ctx_fail(ctx, CKPZ_ERR_PARAM, "codec %s: %s", ckpz_codec_name(p.codec), missing);

    /* A source over memory (ckpz_source_mem, or ckpz_mem_read as a callback) is not copied
     * into the jobs' buffers: the chunker passes over its bytes (io_source_view's skip)
     * and each job reads its chunk where it lies, at the input's in_off. The copy cost
     * ~11% of the compression CPU of ckpz_compress_buffer on FP32 weights. A lossy
     * policy reads the tensors ahead through the planner: it keeps the copy. */
    ptrdiff_t (*skip)(void *opaque, size_t n) = NULL;
    const uint8_t *view = io_source_view(&in, &skip); /* taken before planning reads any of it */
    /* the context's working memory from the start: the planner's buffers are in it */
    struct workmem *wm = workmem_take(ctx);
    plan_keep *keep = wm ? &wm->plan : NULL;
    planner pl;
    if ((err = planner_init(&pl, ctx, &p, in.read, in.opaque, size_hint, NULL, keep))) {
        planner_free(&pl, keep);
        workmem_keep(ctx, wm);
        return err;
    }
    /* A thread for every two chunks of the input and every 2 MiB at most: starting one
     * and handing it work costs about what coding a chunk does (on 2 cores, 2 threads
     * on a 2 MiB input ran at 0.87-0.94x of one; on 8 MiB at 1.2x), so inputs of one or
     * two chunks start none. */
    if (size_hint != CKPZ_SIZE_UNKNOWN) {
        uint64_t unit = 2 * (uint64_t)p.chunk_size > (2u << 20) ? 2 * (uint64_t)p.chunk_size : (2u << 20);
        uint64_t most = size_hint / unit + (size_hint % unit != 0) + (size_hint == 0);
        if ((uint64_t)p.threads > most) p.threads = (int)most;
    }
    int workers = p.threads - 1; /* the calling thread codes too */
    size_t depth = pipeline_depth(p.threads), used_jobs = 0;
    int lossy = policy_lossy(pl.pol); /* a policy of levels alone writes a lossless file */
    if (lossy) view = NULL;
    else if (view) pl.ch.skip = skip;
    int defer = p.base && p.patch;    /* the base's CRC from the chunks, patched in at the end */
    workers_state ws = {p.level, NULL, defer, p.codec};
    cjob *jobs = calloc(depth, sizeof *jobs), *j, **freed = calloc(depth, sizeof *freed);
    size_t nfree = 0; /* jobs retired early (freed[]), free for the next chunks */
    size_t bchunk = p.chunk_size, fbound = 0;
    pipeline *pline = NULL;
    /* Lossless, without a base: each chunk coded straight into room the sink lends
     * (writer_room: a sink in memory, the pump of an fd sink or of the CLI's output), so
     * its frame is written without a copy; the copy cost ~11% of ckpz_compress_buffer's
     * CPU on FP32 weights. A base's copy frames and a lossy plan's values are known only
     * after coding: those keep the job's buffer, as does a chunk the sink lends no room
     * for. Serial, the room may be the sink's next bytes (CKPZ_LEND_NEXT): the chunk's
     * entry frame is written first (writer_lead); with threads, only a sink that lends
     * rooms written back in any order lends (io_sink_lend). */
    writer w;
    writer_init(&w, ctx, &p, &pl, size_hint, out.write, out.opaque, defer);
    if (!lossy && !p.base) w.lend = io_sink_lend(&out, &w.lend_opaque, !workers);
    /* Every chunk stored (CKPZ_LEVEL_STORE, no policy to give one a level, no base to
     * copy from): each is read where its frame in the job's buffer holds its bytes
     * (CHUNK_STORED_AT), so that a frame the sink lends no room for (a pipe's) is
     * written with no copy of ours, as a plain copy of the file would be; into lent
     * room it is copied as its CRC is taken. A stored chunk's coding is that CRC (and at
     * most that copy): the calling thread does it at once (pipeline_submit_here), where
     * the bytes are in cache, rather than hand it to another core. */
    int stored = p.level == CKPZ_LEVEL_STORE && !p.policy && !p.base, in_frame = stored && !view;

    if (!wm || !jobs || !freed ||
        workmem_scratch(wm, workers + 1, p.chunk_size, lossy ? CHUNK_SCRATCH_ENCODE_LOSSY : 0))
        goto nomem;
    ws.scratch = wm->scratch;
    w.ec = workmem_lists(wm); /* NULL: the writer makes its own */
    bchunk = workmem_buffers(wm, p.chunk_size);
    fbound = workmem_out_bound(bchunk);
    for (size_t i = 0; i < depth; i++) workmem_lend(wm, i, &jobs[i].raw, &jobs[i].out);
    if (!(pline = pipeline_create(workers, depth, encode_job, &ws))) goto nomem;
    if ((err = writer_start(&w, lossy))) goto fail;

    for (;;) {
        if (nfree) {
            j = freed[--nfree];
        } else if (used_jobs < depth) {
            j = &jobs[used_jobs++];
            if ((!view && !in_frame && !j->raw && !(j->raw = malloc(bchunk))) ||
                (!j->out && !(j->out = malloc(fbound))))
                goto nomem;
        } else {
            j = pipeline_retire(pline);
            if ((err = writer_emit(&w, &j->d, &j->r, JOB_FRAME(j)))) goto fail;
        }
        int end;
        if ((err = planner_next(&pl, &j->d, view ? NULL : in_frame ? j->out + CHUNK_STORED_AT : j->raw, &end)))
            goto fail;
        if (end) break;
        j->src = view ? view + j->d.in_off : in_frame ? j->out + CHUNK_STORED_AT : NULL;
        if ((err = planner_base(&pl, &j->d, &j->image, &j->base))) goto fail;
        j->lent = NULL;
        if (w.lend && j->d.raw_len) { /* an empty chunk writes no frame: nothing lent */
            if (!workers && (err = writer_lead(&w, &j->d))) goto fail;
            j->lent = writer_room(&w, workmem_out_bound(j->d.raw_len));
        }
        if (!stored) {
            pipeline_submit(pline, j);
            continue;
        }
        pipeline_submit_here(pline, j);
        while ((j = pipeline_retire_done(pline))) { /* written while in cache */
            if ((err = writer_emit(&w, &j->d, &j->r, JOB_FRAME(j)))) goto fail;
            freed[nfree++] = j;
        }
    }
    while ((j = pipeline_retire(pline)))
        if ((err = writer_emit(&w, &j->d, &j->r, JOB_FRAME(j)))) goto fail;
    if ((err = planner_end(&pl)) || (err = writer_end(&w))) goto fail;
    if (defer) {
        const uint8_t *bf;
        size_t bl;
        if ((err = writer_base_frame(&w, &bf, &bl))) goto fail;
        if (p.patch(p.patch_opaque, bf, bl, CTR_HEADER_SIZE) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_WRITE, "write error rewriting the base frame");
            goto fail;
        }
    }
    if (stats) {
        ckpz_stats st = {sizeof st, w.original, w.pos, pl.tensor_bytes, pl.tensors, w.nc, pl.segs.format};
        OUT_GIVE(stats, &st);
    }
    goto done;
nomem:
    err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
fail:
done:
    pipeline_destroy(pline);
    for (size_t i = 0; jobs && i < depth; i++) {
        if (wm) workmem_return(wm, i, jobs[i].raw, jobs[i].out);
        else free(jobs[i].raw), free(jobs[i].out);
        free(jobs[i].image);
    }
    free(jobs);
    free(freed);
    writer_free(&w); /* before its entry lists' coder goes back */
    planner_free(&pl, keep);
    workmem_keep(ctx, wm);
    return err;
}

ckpz_error ckpz_compress_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                            ckpz_stats *stats)
{
    io_pumps x = {0};
    ckpz_error err = compress_io(ctx, params, src, dst, stats, &x);
    return io_pump_end(ctx, &x, err);
}
