/* archive.c — random access to a complete .ckpz file: the trailer at the end locates
 * the index, whose seek table gives every chunk's position, so one tensor is decoded
 * without reading the others (ckpz -l, --extract), and a file held in memory is restored
 * with every chunk decoded straight into its place, in parallel and without copies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "base.h"
#include "codec.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/pipeline.h"
#include "transforms/planes.h"
#include "transforms/predict.h"

struct ckpz_archive {
    ckpz_pread_fn pr;
    void *opaque;
    ckpz_archive_info info;
    size_t mem_limit;
    ctr_entry *e;
    size_t ne;
    ctr_chunkrec *c;
    size_t nc;
    uint64_t *compressed; /* per entry */
    uint64_t data_start;  /* offset of the first entry frame */
    int based;            /* a delta file */
    unsigned flags;       /* CTR_FILE_BASED, CTR_FILE_LOSSY */
    ctr_base base;
    const uint8_t *base_bytes; /* the caller's base, checked; NULL when not given */
};

void ckpz_archive_close(ckpz_archive *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->ne; i++) ctr_entry_clear(&a->e[i]);
    free(a->e);
    free(a->c);
    free(a->compressed);
    free(a);
}

ckpz_error ckpz_archive_open(ckpz_ctx *ctx, const ckpz_params *params, ckpz_pread_fn pr, void *opaque,
                             uint64_t file_size, ckpz_archive **out)
{
    ctx_clear(ctx);
    *out = NULL;
    ckpz_params p;
    ckpz_error err = params_resolve(ctx, params, &p);
    if (err) return err;
    uint8_t hb[CTR_HEADER_SIZE], tb[CTR_TRAILER_SIZE];
    ctr_header h;
    ctr_trailer t;
    if (file_size < 8 || pr(opaque, hb, 8, 0) != 0 || memcmp(hb, ctr_magic, 8) != 0)
        return ctx_fail(ctx, CKPZ_ERR_NOT_CKPZ, "not a ckpz file");
    if (file_size < CTR_HEADER_SIZE + 24 + CTR_TRAILER_SIZE)
        return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated (%llu bytes)", (unsigned long long)file_size);
    if (pr(opaque, hb, sizeof hb, 0) != 0 || pr(opaque, tb, sizeof tb, file_size - CTR_TRAILER_SIZE) != 0)
        return ctx_fail(ctx, CKPZ_ERR_READ, "read error");
    if ((err = ctr_header_read(ctx, hb, &h)) || (err = ctr_trailer_read(ctx, tb, file_size, &t))) return err;
    if (t.index_len > p.mem_limit) return ctx_fail(ctx, CKPZ_ERR_LIMIT, "index larger than the memory limit");
    if (chunk_frame_bound(h.chunk_size) > p.mem_limit)
        return ctx_fail(ctx, CKPZ_ERR_LIMIT, "chunk size %u needs buffers larger than the memory limit (%zu bytes)",
                        h.chunk_size, p.mem_limit);
    uint8_t *ib = malloc((size_t)t.index_len);
    ckpz_archive *a = calloc(1, sizeof *a);
    if (!ib || !a) {
        free(ib);
        free(a);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    if (pr(opaque, ib, (size_t)t.index_len, t.index_offset) != 0) {
        err = ctx_fail(ctx, CKPZ_ERR_READ, "read error in the index");
        goto fail;
    }
    if (crc32c(0, ib, (size_t)t.index_len) != t.index_crc) {
        err = ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "index checksum mismatch");
        goto fail;
    }
    a->data_start = CTR_HEADER_SIZE;
    a->flags = (h.based ? CTR_FILE_BASED : 0u) | (h.lossy ? CTR_FILE_LOSSY : 0u);
    if ((a->based = h.based)) {
        uint8_t bb[12 + CTR_BASE_FIXED + CTR_MAX_BASE_NAME];
        size_t n = sizeof bb, used;
        if (n > t.index_offset - CTR_HEADER_SIZE) n = (size_t)(t.index_offset - CTR_HEADER_SIZE);
        if (pr(opaque, bb, n, CTR_HEADER_SIZE) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_READ, "read error in the base frame");
            goto fail;
        }
        if ((err = ctr_base_frame_read(ctx, bb, n, &a->base, &used))) goto fail;
        a->data_start += used;
        if (p.base) {
            if ((err = base_verify(ctx, &a->base, &p))) goto fail;
            a->base_bytes = p.base;
        }
    }
    if ((err = ctr_index_read(ctx, ib, (size_t)t.index_len, t.index_offset, t.original_size, p.mem_limit, a->flags,
                              &a->e, &a->ne, &a->c, &a->nc)))
        goto fail;
    for (size_t i = 0; i < a->ne; i++) /* a based entry starts inside the base */
        if ((a->e[i].flags & CTR_ENTRY_BASED) && a->e[i].base_offset > a->base.size) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: entry %zu ('%.100s') refers past the end of the base", i,
                           a->e[i].name);
            goto fail;
        }
    if (!(a->compressed = calloc(a->ne ? a->ne : 1, sizeof *a->compressed))) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < a->ne; i++)
        for (uint64_t k = 0; k < a->e[i].nchunks; k++) a->compressed[i] += a->c[a->e[i].first_chunk + k].frame_len;
    a->pr = pr;
    a->opaque = opaque;
    a->mem_limit = p.mem_limit;
    a->info = (ckpz_archive_info){h.version, (ckpz_input_format)h.format, t.original_size, file_size,
                                  h.chunk_size, t.content_crc, a->ne, a->nc, h.lossy};
    free(ib);
    *out = a;
    return CKPZ_OK;
fail:
    free(ib);
    ckpz_archive_close(a);
    return err;
}

void ckpz_archive_get_info(const ckpz_archive *a, ckpz_archive_info *info) { *info = a->info; }

void ckpz_archive_get_base(const ckpz_archive *a, ckpz_base_info *info)
{
    base_info_fill(a->based ? &a->base : NULL, info);
}

ckpz_error ckpz_archive_entry(const ckpz_archive *a, uint64_t i, ckpz_entry *out)
{
    if (i >= a->ne) return CKPZ_ERR_NOT_FOUND;
    const ctr_entry *e = &a->e[i];
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype = (ckpz_dtype)e->dtype;
    out->ndim = e->ndim;
    out->shape = e->shape;
    out->offset = e->offset;
    out->length = e->length;
    out->compressed = a->compressed[i];
    out->chunks = e->nchunks;
    out->based = (e->flags & CTR_ENTRY_BASED) != 0;
    out->base_offset = e->base_offset;
    if (e->flags & CTR_ENTRY_LOSSY) {
        const ctr_lossy *l = &e->lossy;
        out->lossy = 1;
        out->lossy_mode = quant_mode_name(l->mode);
        out->lossy_bound = l->bound;
        out->abs_bound = l->abs_bound;
        out->exceptions = l->exceptions;
        out->changed = l->changed;
        out->frozen = l->frozen;
        double n = l->n ? (double)l->n : 1;
        out->mae = l->sum_abs / n;
        out->rmse = sqrt(l->sum_sq / n);
        out->max_error = l->max_abs;
        double range = l->vmax > l->vmin ? l->vmax - l->vmin : 0;
        out->psnr = out->rmse > 0 && range > 0 ? 20 * log10(range / out->rmse) : INFINITY;
    }
    return CKPZ_OK;
}

ckpz_error ckpz_archive_find(ckpz_ctx *ctx, const ckpz_archive *a, const char *name, uint64_t *index)
{
    ctx_clear(ctx);
    for (size_t i = 0; i < a->ne; i++)
        if (a->e[i].dtype != CKPZ_DTYPE_NONE && !strcmp(a->e[i].name, name)) {
            *index = i;
            return CKPZ_OK;
        }
    return ctx_fail(ctx, CKPZ_ERR_NOT_FOUND, "no tensor named '%s'", name);
}

/* The base's bytes for the chunk of len bytes that starts `rel` bytes into entry e (NULL
 * when the entry has no base or the base ends first); CKPZ_ERR_BASE when the caller gave
 * no base. */
static ckpz_error chunk_base(ckpz_ctx *msg, const ckpz_archive *a, const ctr_entry *e, uint64_t rel, uint64_t len,
                             const uint8_t **base)
{
    *base = NULL;
    if (!(e->flags & CTR_ENTRY_BASED)) return CKPZ_OK;
    if (!a->base_bytes) {
        ckpz_params p;
        ckpz_params_init(&p);
        return base_verify(msg, &a->base, &p); /* the message names the base */
    }
    uint64_t avail = a->base.size - e->base_offset; /* base_offset <= size: checked at open */
    if (rel <= avail && len <= avail - rel) *base = a->base_bytes + e->base_offset + rel;
    return CKPZ_OK;
}

/* Checks chunk k's frame (read into `frame`) against the seek table and decodes it into
 * out; *result is out, or the base's bytes for a copy frame. Messages go to msg, naming
 * the chunk and its tensor. */
static ckpz_error decode_indexed(ckpz_ctx *msg, const ckpz_archive *a, uint64_t k, uint32_t entry_no,
                                 const uint8_t *frame, const uint8_t *base, ent_ctx *ec, uint8_t *planes,
                                 uint8_t *out, const uint8_t **result, uint32_t *raw_crc)
{
    const ctr_chunkrec *r = &a->c[k];
    const ctr_entry *e = &a->e[entry_no];
    char where[160], why[160];
    ctr_chunk h;
    ckpz_error err;
    snprintf(where, sizeof where, "chunk %llu (tensor '%.100s')", (unsigned long long)k,
             e->dtype != CKPZ_DTYPE_NONE ? e->name : "(opaque bytes)");
    size_t fbound = chunk_frame_bound(a->info.chunk_size);
    if ((err = ctr_chunk_read(msg, frame, a->info.chunk_size, fbound - CTR_FRAME_SIZE, where, &h))) return err;
    if (h.entry != entry_no || h.raw_len != r->raw_len || CTR_FRAME_SIZE + h.payload_len != r->frame_len)
        return ctx_fail(msg, CKPZ_ERR_CORRUPT, "%s: does not match the seek table", where);
    if (h.xf == XF_QUANT && !(e->flags & CTR_ENTRY_LOSSY))
        return ctx_fail(msg, CKPZ_ERR_CORRUPT, "%s: lossy chunk in a lossless entry", where);
    if (h.pred == PRED_COPY) {
        err = chunk_copy_check(&h, base, why, sizeof why);
        *result = base;
    } else {
        err = chunk_decode(ec, &h, (ckpz_dtype)e->dtype, frame + CTR_FRAME_SIZE, base, planes, out, why, sizeof why);
        *result = out;
    }
    if (err) return ctx_fail(msg, err, "%s: %s", where, why);
    *raw_crc = h.raw_crc;
    return CKPZ_OK;
}

ckpz_error ckpz_archive_extract(ckpz_ctx *ctx, ckpz_archive *a, uint64_t i, ckpz_write_fn wr, void *opaque)
{
    ctx_clear(ctx);
    if (i >= a->ne) return ctx_fail(ctx, CKPZ_ERR_NOT_FOUND, "no entry %llu", (unsigned long long)i);
    const ctr_entry *e = &a->e[i];
    size_t cs = a->info.chunk_size, fbound = chunk_frame_bound(cs);
    uint8_t *frame = malloc(fbound), *raw = malloc(cs);
    chunk_scratch *s = chunk_scratch_create(1, cs, a->info.lossy ? CHUNK_SCRATCH_DECODE_LOSSY : 0);
    ckpz_error err = CKPZ_OK;
    uint64_t rel = 0;
    if (!frame || !raw || !s) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (uint64_t k = e->first_chunk; k < e->first_chunk + e->nchunks; k++) {
        const ctr_chunkrec *r = &a->c[k];
        const uint8_t *base, *result;
        uint32_t crc;
        if (r->frame_len > fbound || a->pr(a->opaque, frame, r->frame_len, r->frame_offset) != 0) {
            err = ctx_fail(ctx, r->frame_len > fbound ? CKPZ_ERR_CORRUPT : CKPZ_ERR_READ,
                           "chunk %llu (tensor '%.100s'): %s", (unsigned long long)k, e->name,
                           r->frame_len > fbound ? "frame too large" : "read error");
            goto out;
        }
        if ((err = chunk_base(ctx, a, e, rel, r->raw_len, &base)) ||
            (err = decode_indexed(ctx, a, k, (uint32_t)i, frame, base, s->ec[0], s->planes[0], raw, &result, &crc)))
            goto out;
        if (wr(opaque, result, r->raw_len) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_WRITE, "write error");
            goto out;
        }
        rel += r->raw_len;
    }
out:
    free(frame);
    free(raw);
    chunk_scratch_free(s);
    return err;
}

/* ---- whole-file restore from memory ---- */

typedef struct memfile {
    const uint8_t *p;
    size_t n;
} memfile;

static int mem_pread(void *v, void *buf, size_t n, uint64_t off)
{
    const memfile *m = v;
    if (off > m->n || n > m->n - off) return -1;
    memcpy(buf, m->p + off, n);
    return 0;
}

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
} rstate;

static void restore_job(void *v, int worker, void *arg)
{
    rjob *j = v;
    const rstate *st = arg;
    j->msg.msg[0] = 0;
    const ckpz_archive *a = st->a;
    const ctr_entry *e = &a->e[j->entry_no];
    uint8_t *out = st->dst + st->raw_off[j->chunk];
    const uint8_t *base, *result;
    j->err = chunk_base(&j->msg, a, e, st->raw_off[j->chunk] - e->offset, a->c[j->chunk].raw_len, &base);
    if (!j->err)
        j->err = decode_indexed(&j->msg, a, j->chunk, j->entry_no, st->src + a->c[j->chunk].frame_offset, base,
                                st->scratch->ec[worker], st->scratch->planes[worker], out, &result, &j->raw_crc);
    if (!j->err && result != out) memcpy(out, result, a->c[j->chunk].raw_len);
}

/* The frames must lie in file order exactly as the index says: each entry's frame (equal
 * to its index record), then its chunks, back to back, up to the index. */
static ckpz_error check_layout(ckpz_ctx *ctx, const ckpz_archive *a, const uint8_t *src, uint64_t index_offset,
                               uint64_t *raw_off)
{
    uint64_t pos = a->data_start, at = 0;
    for (size_t i = 0; i < a->ne; i++) {
        const ctr_entry *e = &a->e[i];
        if (index_offset - pos < 12 || ld32(src + pos) != CTR_TAG_ENTRY)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu missing at byte %llu", i, (unsigned long long)pos);
        uint32_t blen = ld32(src + pos + 4);
        if (blen < 16 || blen > index_offset - pos - 12)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu: invalid length %u", i, blen);
        if (crc32c(0, src + pos, 8 + (size_t)blen) != ld32(src + pos + 8 + blen))
            return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "entry frame %zu: checksum mismatch", i);
        ctr_entry f;
        size_t used;
        ckpz_error err = ctr_entry_read(ctx, src + pos + 8, blen, 0, a->flags, &f, &used);
        if (err) return err;
        int same = used == blen && f.offset == e->offset && f.dtype == e->dtype && f.ndim == e->ndim &&
                   f.flags == e->flags && f.base_offset == e->base_offset &&
                   f.name_len == e->name_len && !memcmp(f.name, e->name, f.name_len) &&
                   !memcmp(f.shape, e->shape, 8 * (size_t)f.ndim);
        ctr_entry_clear(&f);
        if (!same) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu does not match the index", i);
        pos += 12 + (uint64_t)blen;
        for (uint64_t k = e->first_chunk; k < e->first_chunk + e->nchunks; k++) {
            if (a->c[k].frame_offset != pos)
                return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "chunk %llu is not where the index says",
                                (unsigned long long)k);
            raw_off[k] = at;
            at += a->c[k].raw_len;
            pos += a->c[k].frame_len;
        }
    }
    if (pos != index_offset) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "unindexed bytes before the index");
    return CKPZ_OK;
}

ckpz_error archive_restore_memory(ckpz_ctx *ctx, const ckpz_params *params, const uint8_t *src, size_t src_size,
                                  uint8_t *dst, size_t dst_size)
{
    ckpz_params p;
    ckpz_error err = params_resolve(ctx, params, &p);
    if (err) return err;
    memfile m = {src, src_size};
    ckpz_archive *a;
    if ((err = ckpz_archive_open(ctx, &p, mem_pread, &m, src_size, &a))) return err;
    if (a->info.original_size != dst_size) {
        err = ctx_fail(ctx, CKPZ_ERR_PARAM, "destination buffer holds %zu bytes, the original has %llu", dst_size,
                       (unsigned long long)a->info.original_size);
        ckpz_archive_close(a);
        return err;
    }
    if (a->based && !a->base_bytes) {
        err = base_verify(ctx, &a->base, &p); /* no base given: the message names the one needed */
        ckpz_archive_close(a);
        return err;
    }
    int workers = p.threads - 1;
    size_t depth = workers ? (size_t)p.threads * 3 : 1, used = 0;
    uint64_t index_offset = src_size - CTR_TRAILER_SIZE - ld64(src + src_size - CTR_TRAILER_SIZE + 8);
    uint64_t *raw_off = malloc((a->nc ? a->nc : 1) * sizeof *raw_off);
    rstate st = {a, src, dst, raw_off, chunk_scratch_create(workers + 1, a->info.chunk_size, a->info.lossy ? CHUNK_SCRATCH_DECODE_LOSSY : 0)};
    rjob *jobs = calloc(depth, sizeof *jobs), *j;
    pipeline *pl = NULL;
    uint32_t content_crc = 0;
    uint64_t done = 0;
    if (!raw_off || !st.scratch || !jobs) goto nomem;
    if ((err = check_layout(ctx, a, src, index_offset, raw_off))) goto out;
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
    chunk_scratch_free(st.scratch);
    free(jobs);
    free(raw_off);
    ckpz_archive_close(a);
    return err;
}
