/* archive_restore.c — a whole .ckpz file held in memory, restored through its index:
 * every frame checked against the index first (ckpz_archive_check_frames), then each
 * chunk decoded straight into its place in the caller's buffer, in parallel, without
 * copies (archive_restore_memory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "codec/codec.h"
#include "codec/workmem.h"
#include "common/crc32c.h"
#include "common/pipeline.h"
#include "container/base.h"
#include "io/io.h"

/* ---- whole-file restore from memory ---- */

typedef struct rjob {
    uint64_t chunk;
    uint32_t entry_no;
    uint32_t raw_crc;
    ckpz_error err;
    struct ckpz_ctx msg; /* workers must not write the caller's context */
} rjob;

typedef struct rstate {
    const ckpz_archive *a;
    const uint8_t *src;
    uint8_t *dst;
    const uint64_t *raw_off;
    chunk_scratch *scratch;
    int stream; /* dst written with streaming stores (STREAM_FROM) */
} rstate;

/* Originals from this size on are restored with streaming stores (chunk_decode_to): a
 * destination past twice a core's L2 cannot stay in it for whoever reads it next, and
 * plain stores to memory just handed out wait for every line to be read in first. A
 * step300 BF16 file (20.6 MB) restored by ckpz.decompress took about 9% less CPU time. */
#define STREAM_FROM (4u << 20)

static void restore_job(void *v, int worker, void *arg)
{
    rjob *j = v;
    const rstate *st = arg;
    j->msg.msg[0] = 0;
    const ckpz_archive *a = st->a;
    uint8_t *out = st->dst + st->raw_off[j->chunk];
    const uint8_t *base, *result;
    uint8_t *image;
    j->err = chunk_base(&j->msg, a, j->chunk, j->entry_no, &base, &image);
    if (!j->err)
        j->err = decode_indexed(&j->msg, a, j->chunk, j->entry_no, st->src + a->c[j->chunk].frame_offset, base,
                                st->scratch->ec[worker], st->scratch->planes[worker], out, st->stream, &result,
                                &j->raw_crc);
    if (!j->err && result != out) memcpy(out, result, a->c[j->chunk].raw_len);
    free(image);
}

/* The frames must lie in file order exactly as the index says: each entry frame (its
 * entries equal to their index records, all but the last owning no chunk), then the
 * last one's chunks, back to back, up to the index. The entry frames are read here (the
 * only reader of them besides the sequential decoder, whose checks they share:
 * ctr_eframe_len/_read); chunk frames only by where the seek table puts them, since
 * reading one means decoding it, and that checks it. */
static ckpz_error check_eframe(ckpz_ctx *ctx, ent_ctx *ec, const ckpz_archive *a, size_t *i, uint64_t *pos,
                               uint64_t end, uint8_t **fr, size_t *cap)
{
    uint8_t hb[8];
    uint32_t blen;
    ckpz_error err;
    if (*pos > end || end - *pos < 12)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu missing at byte %llu", *i, (unsigned long long)*pos);
    if (a->pr(a->opaque, hb, sizeof hb, *pos) != 0)
        return ctx_fail(ctx, CKPZ_ERR_READ, "entry frame %zu at byte %llu: read error", *i, (unsigned long long)*pos);
    if ((err = ctr_eframe_len(ctx, hb, end - *pos, a->flags, a->mem_limit, *i, *pos, &blen))) return err;
    if (12 + (size_t)blen > *cap) {
        uint8_t *nf = realloc(*fr, 12 + (size_t)blen);
        if (!nf) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        *fr = nf;
        *cap = 12 + (size_t)blen;
    }
    memcpy(*fr, hb, sizeof hb);
    if (a->pr(a->opaque, *fr + 8, (size_t)blen + 4, *pos + 8) != 0)
        return ctx_fail(ctx, CKPZ_ERR_READ, "entry frame %zu at byte %llu: read error", *i, (unsigned long long)*pos);
    size_t n;
    int same;
    err = ctr_eframe_same(ctx, ec, *fr, blen, a->flags, a->mem_limit, *i, *pos, &a->e[*i], a->ne - *i, &n, &same);
    if (err) return err;
    for (size_t k = 0; same && k + 1 < n; k++) same = a->e[*i + k].nchunks == 0;
    if (!same)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu at byte %llu does not match the index", *i,
                        (unsigned long long)*pos);
    *i += n - 1; /* the frame's last entry: its chunks follow */
    *pos += 12 + (uint64_t)blen;
    return CKPZ_OK;
}

/* ckpz_archive_check_frames, the entry lists decoded with ec (NULL: their own). */
static ckpz_error check_frames(ckpz_ctx *ctx, ent_ctx *ec, const ckpz_archive *a)
{
    uint64_t pos = a->data_start, end = a->index_offset;
    uint8_t *fr = NULL;
    size_t cap = 0;
    ckpz_error err = CKPZ_OK;
    for (size_t i = 0; i < a->ne && !err; i++) {
        if ((err = check_eframe(ctx, ec, a, &i, &pos, end, &fr, &cap))) break;
        const ctr_entry *e = &a->e[i];
        for (uint64_t k = e->first_chunk; k < e->first_chunk + e->nchunks; k++) {
            if (a->c[k].frame_offset != pos) {
                err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "chunk %llu is not where the index says (byte %llu)",
                               (unsigned long long)k, (unsigned long long)pos);
                break;
            }
            pos += a->c[k].frame_len;
        }
    }
    if (!err && pos != end)
        err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "unindexed bytes before the index (bytes %llu..%llu)",
                       (unsigned long long)pos, (unsigned long long)end);
    free(fr);
    return err;
}

ckpz_error ckpz_archive_check_frames(ckpz_ctx *ctx, const ckpz_archive *a)
{
    ctx_clear(ctx);
    struct workmem *wm = workmem_take(ctx);
    ckpz_error err = check_frames(ctx, workmem_lists(wm), a);
    workmem_keep(ctx, wm);
    return err;
}

ckpz_error archive_restore_memory(ckpz_ctx *ctx, const ckpz_params *params, const uint8_t *src, size_t src_size,
                                  uint8_t *dst, size_t dst_size)
{
    ckpz_params p;
    ckpz_error err = params_resolve(ctx, params, &p);
    if (err) return err;
    ckpz_mem m = {.data = (void *)src, .size = src_size};
    ckpz_source in;
    ckpz_source_mem(&in, &m);
    ckpz_archive *a = NULL;
    rjob *jobs = NULL, *j;
    pipeline *pl = NULL;
    /* the coders' scratch, the lists' coder and the index's entries kept by the context */
    struct workmem *wm = workmem_take(ctx);
    if ((err = archive_open(ctx, &p, &in, wm, &a))) goto out;
    if (a->info.original_size != dst_size) {
        err = ctx_fail(ctx, CKPZ_ERR_PARAM, "destination buffer holds %zu bytes, the original has %llu", dst_size,
                       (unsigned long long)a->info.original_size);
        goto out;
    }
    if (a->based && !a->base_bytes) {
        err = base_verify(ctx, &a->base, &p); /* no base given: the message names the one needed */
        goto out;
    }
    int workers = p.threads - 1;
    size_t depth = pipeline_depth(p.threads), used = 0;
    rstate st = {a,
                 src,
                 dst,
                 a->chunk_off,
                 wm && !workmem_scratch(wm, workers + 1, a->info.chunk_size,
                                        a->info.lossy ? CHUNK_SCRATCH_DECODE_LOSSY : 0)
                     ? wm->scratch
                     : NULL,
                 dst_size >= STREAM_FROM};
    jobs = calloc(depth, sizeof *jobs);
    uint32_t content_crc = 0;
    uint64_t done = 0;
    if (!st.scratch || !jobs) goto nomem;
    if ((err = check_frames(ctx, workmem_lists(wm), a))) goto out;
    if (!(pl = pipeline_create(workers, depth, restore_job, &st))) goto nomem;
    /* Submit chunks in order; retire (oldest first) whenever every job slot is busy, and
     * at the end until none is pending. */
    for (uint64_t next = 0, i = 0; next < a->nc || pipeline_pending(pl);) {
        if (next < a->nc && used < depth) {
            j = &jobs[used++];
        } else {
            j = pipeline_retire(pl);
            if (j->err) {
                err = ctx_fail(ctx, j->err, "%s", j->msg.msg);
                goto out;
            }
            uint32_t len = a->c[j->chunk].raw_len;
            content_crc = crc32c_combine(content_crc, j->raw_crc, len);
            done += len;
            if (p.progress && p.progress(p.progress_opaque, done, a->info.original_size)) {
                err = ctx_fail(ctx, CKPZ_ERR_ABORTED, "aborted");
                goto out;
            }
        }
        if (next < a->nc) {
            while (next >= a->e[i].first_chunk + a->e[i].nchunks) i++;
            j->chunk = next++;
            j->entry_no = (uint32_t)i;
            pipeline_submit(pl, j);
        }
    }
    if (content_crc != a->info.content_checksum)
        err = ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "content checksum mismatch (expected %08x, got %08x)",
                       a->info.content_checksum, content_crc);
    goto out;
nomem:
    err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
out:
    pipeline_destroy(pl);
    free(jobs);
    ckpz_archive_close(a); /* before wm goes back: its entries may be wm's */
    workmem_keep(ctx, wm);
    return err;
}
