/* archive.c — random access to a complete .ckpz file: the trailer at the end locates
 * the index, whose seek table gives every chunk's position and original offset, so any
 * byte range of the original is decoded without reading the rest: one entry to a writer
 * (ckpz -l, --extract), or many ranges straight into the caller's memory in parallel
 * (ckpz_archive_read, for bindings that load each tensor into storage allocated once at
 * its final size, with no whole-file buffer); and a file held in memory is restored with
 * every chunk decoded straight into its place, in parallel and without copies
 * (archive_restore.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "codec/codec.h"
#include "codec/workmem.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/pipeline.h"
#include "container/base.h"
#include "formats/pickle.h"
#include "io/io.h"
#include "transforms/auto.h"
#include "transforms/planes.h"
#include "transforms/predict.h"

void ckpz_archive_close(ckpz_archive *a)
{
    if (!a) return;
    if (!a->kept) ctr_entries_free(a->e, a->ne);
    if (a->optim_st) pkl_storages_free(a->optim_st); /* ckpz_archive_read_optim's (archive_optim.c) */
    free(a->optim_st);
    free(a->optim);
    free(a->c);
    free(a->compressed);
    free(a->chunk_off);
    free(a);
}

ckpz_error archive_open(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, struct workmem *given,
                        ckpz_archive **out)
{
    ctx_clear(ctx);
    *out = NULL;
    ckpz_params p; /* with the hooks in effect (io_resolve) */
    ckpz_source in;
    ckpz_sink none;
    ckpz_error err = io_resolve(ctx, params, src, NULL, &p, &in, &none);
    if (err) return err;
    ckpz_pread_fn pr = in.pread;
    void *opaque = in.opaque;
    uint64_t file_size = in.size;
    if (!pr) return ctx_fail(ctx, CKPZ_ERR_PARAM, "random access needs a source with pread");
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
    a->index_offset = t.index_offset;
    a->flags = ctr_file_flags(&h);
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
    struct workmem *wm = given ? given : workmem_take(ctx); /* the entry lists' coder kept by the context */
    err = ctr_index_read_kept(ctx, workmem_lists(wm), given ? &given->entries : NULL, ib, (size_t)t.index_len,
                              t.index_offset, t.original_size, p.mem_limit, a->flags, &a->e, &a->ne, &a->kept, &a->c,
                              &a->nc);
    if (!given) workmem_keep(ctx, wm);
    if (err) goto fail;
    for (size_t i = 0; i < a->ne; i++) /* a based entry starts inside the base */
        if ((a->e[i].flags & CTR_ENTRY_BASED) && a->e[i].base_offset > a->base.size) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: entry %zu ('%.100s') refers past the end of the base", i,
                           a->e[i].name);
            goto fail;
        }
    if (!(a->compressed = calloc(a->ne ? a->ne : 1, sizeof *a->compressed)) ||
        !(a->chunk_off = malloc((a->nc + 1) * sizeof *a->chunk_off))) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* The index read checked that the chunks tile the original in order. An entry's
     * compressed size is its chunks' frames; the entries of a group share their one
     * chunk's frame by their lengths, the owner taking what rounding leaves. */
    uint64_t at = 0;
    for (size_t k = 0; k < a->nc; k++) {
        a->chunk_off[k] = at;
        at += a->c[k].raw_len;
    }
    a->chunk_off[a->nc] = t.original_size;
    uint64_t shared = 0; /* of the current group's frame, given to its packed entries so far */
    size_t o = 0;        /* the owner of the group entry i is in (found once a group, not once an entry) */
    for (size_t i = 0; i < a->ne; i++) {
        const ctr_entry *e = &a->e[i];
        if (e->flags & CTR_ENTRY_PACKED) {
            if (o <= i) o = i + 1; /* the owner: the index read checked that there is one */
            while (a->e[o].flags & CTR_ENTRY_PACKED) o++;
            const ctr_chunkrec *r = &a->c[a->e[o].first_chunk];
            a->compressed[i] = (uint64_t)((double)r->frame_len * (double)e->length / (double)r->raw_len);
            shared += a->compressed[i];
            continue;
        }
        for (uint64_t k = e->first_chunk; k < e->first_chunk + e->nchunks; k++) a->compressed[i] += a->c[k].frame_len;
        a->compressed[i] -= shared < a->compressed[i] ? shared : a->compressed[i];
        shared = 0;
    }
    a->threads = p.threads;
    a->progress = p.progress;
    a->progress_opaque = p.progress_opaque;
    a->pr = pr;
    a->opaque = opaque;
    a->mem_limit = p.mem_limit;
    a->info = (ckpz_archive_info){sizeof a->info,  h.version, (ckpz_input_format)h.format,
                                  t.original_size, file_size, h.chunk_size,
                                  t.content_crc,   a->ne,     a->nc,
                                  h.lossy};
    free(ib);
    *out = a;
    return CKPZ_OK;
fail:
    free(ib);
    ckpz_archive_close(a);
    return err;
}

ckpz_error ckpz_archive_open_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, ckpz_archive **out)
{
    return archive_open(ctx, params, src, NULL, out);
}

ckpz_error ckpz_archive_get_info(const ckpz_archive *a, ckpz_archive_info *info)
{
    if (OUT_CHECK(NULL, info, "ckpz_archive_info")) return CKPZ_ERR_PARAM;
    OUT_GIVE(info, &a->info);
    return CKPZ_OK;
}

ckpz_error ckpz_archive_get_base(const ckpz_archive *a, ckpz_base_info *info)
{
    if (OUT_CHECK(NULL, info, "ckpz_base_info")) return CKPZ_ERR_PARAM;
    ckpz_base_info mine;
    base_info_fill(a->based ? &a->base : NULL, &mine);
    OUT_GIVE(info, &mine);
    return CKPZ_OK;
}

static void entry_fill(const ckpz_archive *a, uint64_t i, ckpz_entry *out)
{
    const ctr_entry *e = &a->e[i];
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
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
    if (e->dtype != CKPZ_DTYPE_NONE)
        out->role = auto_role_name(auto_role_of(e->name, (ckpz_dtype)e->dtype, e->ndim, e->shape, &out->role_why));
    if (a->optim && a->optim[i]) {
        out->beta2 = a->optim[i]->beta2;
        out->beta2_from = a->optim[i]->beta2 > 0 ? a->optim[i]->from : NULL;
        out->lr = a->optim[i]->lr;
        out->lr_from = a->optim[i]->lr > 0 ? a->optim[i]->from : NULL;
    }
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
}

ckpz_error ckpz_archive_entry(const ckpz_archive *a, uint64_t i, ckpz_entry *e)
{
    if (OUT_CHECK(NULL, e, "ckpz_entry")) return CKPZ_ERR_PARAM;
    if (i >= a->ne) return CKPZ_ERR_NOT_FOUND;
    ckpz_entry mine;
    entry_fill(a, i, &mine);
    OUT_GIVE(e, &mine);
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

/* archive.h */
ckpz_error chunk_base(ckpz_ctx *msg, const ckpz_archive *a, uint64_t k, uint32_t owner, const uint8_t **base,
                      uint8_t **image)
{
    const ctr_entry *e = &a->e[owner], *g = e;
    uint64_t len = a->c[k].raw_len, group;
    *base = NULL;
    *image = NULL;
    int gathered = (a->flags & CTR_FILE_GBASE) && a->chunk_off[k] < e->offset; /* its group's chunk */
    while (gathered && g > a->e && (g[-1].flags & CTR_ENTRY_PACKED)) g--;
    int based = 0;
    for (const ctr_entry *x = g; x <= e; x++) based |= x->flags & CTR_ENTRY_BASED;
    if (!based && !gathered) return CKPZ_OK;
    if (based && !a->base_bytes) {
        ckpz_params p;
        ckpz_params_init(&p);
        return base_verify(msg, &a->base, &p); /* the message names the base */
    }
    if (gathered) {
        if (len > a->info.chunk_size) return CKPZ_OK;
        if (!(*image = malloc((size_t)len))) return ctx_fail(msg, CKPZ_ERR_NOMEM, "out of memory");
        if (!base_group_image(g, (size_t)(e - g) + 1, a->base_bytes, a->base.size, len, *image, &group)) *base = *image;
        return CKPZ_OK;
    }
    if (a->chunk_off[k] < e->offset) return CKPZ_OK; /* a group's chunk without feature 4 */
    uint64_t rel = a->chunk_off[k] - e->offset;
    uint64_t avail = a->base.size - e->base_offset; /* base_offset <= size: checked at open */
    if (rel <= avail && len <= avail - rel) *base = a->base_bytes + e->base_offset + rel;
    return CKPZ_OK;
}

static const char *entry_name(const ctr_entry *e) { return e->dtype != CKPZ_DTYPE_NONE ? e->name : "(opaque bytes)"; }

/* "chunk K (tensor 'NAME')", or for a group's chunk "chunk K (tensors 'A' to 'NAME'
 * (packed))": how messages name chunk k of entry e (its owner). */
static void chunk_where(char *buf, size_t size, const ckpz_archive *a, uint64_t k, const ctr_entry *e)
{
    const ctr_entry *first = e;
    while (first > a->e && (first[-1].flags & CTR_ENTRY_PACKED)) first--;
    if (first < e)
        snprintf(buf, size, "chunk %llu (tensors '%.60s' to '%.60s' (packed))", (unsigned long long)k,
                 entry_name(first), entry_name(e));
    else snprintf(buf, size, "chunk %llu (tensor '%.100s')", (unsigned long long)k, entry_name(e));
}

/* archive.h */
ckpz_error decode_indexed(ckpz_ctx *msg, const ckpz_archive *a, uint64_t k, uint32_t entry_no, const uint8_t *frame,
                          const uint8_t *base, ent_ctx *ec, uint8_t *planes, uint8_t *out, int stream,
                          const uint8_t **result, uint32_t *raw_crc)
{
    const ctr_chunkrec *r = &a->c[k];
    const ctr_entry *e = &a->e[entry_no];
    char where[160], why[160];
    ctr_chunk h;
    ckpz_error err;
    chunk_where(where, sizeof where, a, k, e);
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
        err = chunk_decode_to(ec, &h, (ckpz_dtype)e->dtype, frame + CTR_FRAME_SIZE, base, planes, out, stream, why,
                              sizeof why);
        *result = out;
    }
    if (err) return ctx_fail(msg, err, "%s: %s", where, why);
    *raw_crc = h.raw_crc;
    return CKPZ_OK;
}

void ckpz_archive_chunk(const ckpz_archive *a, uint64_t i, uint64_t *offset, uint64_t *length)
{
    if (i > a->nc) i = a->nc;
    *offset = a->chunk_off[i];
    *length = i < a->nc ? a->chunk_off[i + 1] - a->chunk_off[i] : 0;
}

/* The chunk that holds original byte `off` (< original size). */
static uint64_t chunk_at(const ckpz_archive *a, uint64_t off)
{
    uint64_t lo = 0, hi = a->nc; /* chunk_off[lo] <= off < chunk_off[hi] */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a->chunk_off[mid] <= off) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* The entry that owns chunk k: the last one whose chunks start at or before k (empty
 * entries own none and start where the next one does). */
static uint32_t entry_of(const ckpz_archive *a, uint64_t k)
{
    size_t lo = 0, hi = a->ne; /* e[lo].first_chunk <= k < e[hi].first_chunk */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->e[mid].first_chunk <= k) lo = mid;
        else hi = mid;
    }
    return (uint32_t)lo;
}

ckpz_error ckpz_archive_extract(ckpz_ctx *ctx, ckpz_archive *a, uint64_t i, ckpz_write_fn wr, void *opaque)
{
    ctx_clear(ctx);
    if (i >= a->ne) return ctx_fail(ctx, CKPZ_ERR_NOT_FOUND, "no entry %llu", (unsigned long long)i);
    const ctr_entry *e = &a->e[i];
    size_t cs = a->info.chunk_size, fbound = chunk_frame_bound(cs);
    struct workmem *wm = workmem_take(ctx); /* scratch and buffers kept by the context */
    uint8_t *frame = NULL, *raw = NULL, *image = NULL;
    chunk_scratch *s = NULL;
    ckpz_error err = CKPZ_OK;
    uint64_t rel = 0;
    if (wm && !workmem_scratch(wm, 1, cs, a->info.lossy ? CHUNK_SCRATCH_DECODE_LOSSY : 0)) {
        s = wm->scratch;
        size_t bchunk = workmem_buffers(wm, cs);
        workmem_lend(wm, 0, &raw, &frame);
        if (!frame) frame = malloc(workmem_out_bound(bchunk));
        if (!raw) raw = malloc(bchunk);
    }
    if (!frame || !raw || !s) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* The chunks that hold the entry's bytes: its own, or for an entry of a group the
     * group's one chunk, of which it keeps its part. */
    for (uint64_t k = e->length ? chunk_at(a, e->offset) : a->nc; k < a->nc && a->chunk_off[k] < e->offset + e->length;
         k++) {
        const ctr_chunkrec *r = &a->c[k];
        const uint32_t owner = entry_of(a, k);
        const uint8_t *base, *result;
        uint32_t crc;
        free(image);
        if (r->frame_len > fbound || a->pr(a->opaque, frame, r->frame_len, r->frame_offset) != 0) {
            char where[160];
            chunk_where(where, sizeof where, a, k, &a->e[owner]);
            err = ctx_fail(ctx, r->frame_len > fbound ? CKPZ_ERR_CORRUPT : CKPZ_ERR_READ, "%s: %s", where,
                           r->frame_len > fbound ? "frame too large" : "read error");
            goto out;
        }
        if ((err = chunk_base(ctx, a, k, owner, &base, &image)) ||
            (err = decode_indexed(ctx, a, k, owner, frame, base, s->ec[0], s->planes[0], raw, 0, &result, &crc)))
            goto out;
        uint64_t skip = e->offset > a->chunk_off[k] ? e->offset - a->chunk_off[k] : 0;
        uint64_t n = r->raw_len - skip;
        if (n > e->length - rel) n = e->length - rel;
        if (wr(opaque, result + skip, (size_t)n) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_WRITE, "write error");
            goto out;
        }
        rel += n;
    }
out:
    free(image);
    if (wm) workmem_return(wm, 0, raw, frame);
    else free(raw), free(frame);
    workmem_keep(ctx, wm);
    return err;
}

/* ---- byte ranges into the caller's memory ---- */

/* One chunk for one span (a chunk two spans share is decoded once for each). */
typedef struct sjob {
    const ckpz_span *span;
    uint64_t chunk;
    uint32_t entry_no;
    const uint8_t *base;
    uint8_t *image;      /* the base image chunk_base gathered for it, or NULL */
    uint8_t *frame;      /* chunk_frame_bound(chunk_size) bytes, read on the calling thread */
    ckpz_error err;      /* set before submission when the frame or the base is missing */
    struct ckpz_ctx msg; /* workers must not write the caller's context */
} sjob;

typedef struct sstate {
    const ckpz_archive *a;
    chunk_scratch *scratch;
    uint8_t **raw; /* per worker, chunk_size bytes: a chunk that sticks out of its span is
                      decoded here and its part copied out at once, so the buffer is free
                      again before the job retires (NULL when no chunk sticks out) */
} sstate;

/* The part of chunk k inside span s, in original offsets. */
static void span_overlap(const ckpz_archive *a, const ckpz_span *s, uint64_t k, uint64_t *lo, uint64_t *hi)
{
    uint64_t off = a->chunk_off[k], end = a->chunk_off[k + 1], send = s->offset + s->length;
    *lo = off > s->offset ? off : s->offset;
    *hi = end < send ? end : send;
}

static void span_job(void *v, int worker, void *arg)
{
    sjob *j = v;
    const sstate *st = arg;
    if (j->err) return;
    const ckpz_archive *a = st->a;
    uint64_t off = a->chunk_off[j->chunk], lo, hi;
    span_overlap(a, j->span, j->chunk, &lo, &hi);
    uint8_t *dst = (uint8_t *)j->span->dst + (lo - j->span->offset);
    /* A chunk wholly inside its span is decoded in place. Otherwise raw[worker] holds at
     * most chunk_size bytes: enough, since only copy frames (which decode nothing into
     * it) may be longer, and decode_indexed refuses any other frame whose length
     * differs from the seek table's or exceeds the chunk size before it writes. */
    uint8_t *out = lo == off && hi == a->chunk_off[j->chunk + 1] ? dst : st->raw[worker];
    const uint8_t *result;
    uint32_t crc;
    j->err = decode_indexed(&j->msg, a, j->chunk, j->entry_no, j->frame, j->base, st->scratch->ec[worker],
                            st->scratch->planes[worker], out, 0, &result, &crc);
    if (!j->err && result + (lo - off) != dst) memcpy(dst, result + (lo - off), hi - lo);
}

static int span_cmp(const void *x, const void *y)
{
    const ckpz_span *s = *(const ckpz_span *const *)x, *t = *(const ckpz_span *const *)y;
    return s->offset < t->offset ? -1 : s->offset > t->offset;
}

ckpz_error ckpz_archive_read(ckpz_ctx *ctx, ckpz_archive *a, const ckpz_span *spans, size_t n)
{
    ctx_clear(ctx);
    uint64_t size = a->info.original_size, total = 0, njobs = 0;
    size_t ns = 0;
    int straddle = 0;
    if (n && !spans) return ctx_fail(ctx, CKPZ_ERR_PARAM, "%zu spans but no array", n);
    for (size_t i = 0; i < n; i++) {
        const ckpz_span *s = &spans[i];
        if (s->offset > size || s->length > size - s->offset)
            return ctx_fail(ctx, CKPZ_ERR_PARAM,
                            "span %zu (offset %llu, %llu bytes) ends past the original's %llu bytes", i,
                            (unsigned long long)s->offset, (unsigned long long)s->length, (unsigned long long)size);
        if (s->length && !s->dst)
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "span %zu (offset %llu, %llu bytes) has no destination", i,
                            (unsigned long long)s->offset, (unsigned long long)s->length);
        if (!s->length) continue;
        uint64_t k0 = chunk_at(a, s->offset), k1 = chunk_at(a, s->offset + s->length - 1);
        njobs += k1 - k0 + 1;
        straddle |= a->chunk_off[k0] != s->offset || a->chunk_off[k1 + 1] != s->offset + s->length;
        total += s->length;
        ns++;
    }
    if (!ns) return CKPZ_OK;
    /* Spans are taken in original order so that the file is read front to back, which
     * read-ahead rewards; nothing else depends on the order. */
    const ckpz_span **sp = malloc(ns * sizeof *sp);
    int workers = a->threads - 1;
    if ((uint64_t)workers >= njobs) workers = (int)(njobs - 1); /* no idle threads for a small read */
    size_t depth = pipeline_depth(workers + 1), used = 0;
    if (depth > njobs) depth = (size_t)njobs;
    size_t cs = a->info.chunk_size, fbound = chunk_frame_bound(cs);
    struct workmem *wm = workmem_take(ctx); /* the coders' scratch kept by the context */
    sstate st = {a,
                 wm && !workmem_scratch(wm, workers + 1, cs, a->info.lossy ? CHUNK_SCRATCH_DECODE_LOSSY : 0)
                     ? wm->scratch
                     : NULL,
                 straddle ? calloc((size_t)workers + 1, sizeof(uint8_t *)) : NULL};
    sjob *jobs = calloc(depth, sizeof *jobs), *j;
    uint8_t **lent = calloc(depth, sizeof *lent); /* slot i's raw buffer, borrowed with its frame */
    pipeline *pl = NULL;
    ckpz_error err = CKPZ_OK;
    if (!sp || !st.scratch || !jobs || !lent || (straddle && !st.raw)) goto nomem;
    /* The frames and straddle buffers are the context's job buffers: a caller reading
     * piece by piece (ckpz_mpi's restore, a loader's tensors) faults them in once, not
     * a few MB per call. workers + 1 <= depth, so slot w's raw serves worker w. */
    size_t bchunk = workmem_buffers(wm, cs), fcap = workmem_out_bound(bchunk);
    for (size_t i = 0; i < depth; i++) {
        workmem_lend(wm, i, &lent[i], &jobs[i].frame);
        if (!jobs[i].frame && !(jobs[i].frame = malloc(fcap))) goto nomem;
    }
    for (int w = 0; straddle && w <= workers; w++)
        if (!(st.raw[w] = lent[w] ? lent[w] : (lent[w] = malloc(bchunk)))) goto nomem;
    for (size_t i = 0, m = 0; i < n; i++)
        if (spans[i].length) sp[m++] = &spans[i];
    qsort(sp, ns, sizeof *sp, span_cmp);
    if (!(pl = pipeline_create(workers, depth, span_job, &st))) goto nomem;

    /* As in the whole-file restore: submit in order, retire the oldest when every slot is
     * busy, and at the end until none is pending. A frame that cannot be read (or a base
     * that is missing) ends the submissions and fails when its job retires, after the
     * chunks before it: the error reported is always the first in order. */
    size_t si = 0;
    uint64_t k = chunk_at(a, sp[0]->offset), done = 0;
    uint32_t ei = entry_of(a, k);
    int more = 1;
    for (;;) {
        if (more && used < depth) {
            j = &jobs[used++];
        } else {
            if (!(j = pipeline_retire(pl))) break;
            if (j->err) {
                err = ctx_fail(ctx, j->err, "%s", j->msg.msg);
                goto out;
            }
            uint64_t lo, hi;
            span_overlap(a, j->span, j->chunk, &lo, &hi);
            done += hi - lo;
            if (a->progress && a->progress(a->progress_opaque, done, total)) {
                err = ctx_fail(ctx, CKPZ_ERR_ABORTED, "aborted");
                goto out;
            }
            if (!more) continue;
        }
        const ctr_chunkrec *r = &a->c[k];
        const ctr_entry *e = &a->e[ei];
        free(j->image);
        *j = (sjob){.span = sp[si], .chunk = k, .entry_no = ei, .frame = j->frame};
        if (!(j->err = chunk_base(&j->msg, a, k, ei, &j->base, &j->image)) &&
            (r->frame_len > fbound || a->pr(a->opaque, j->frame, r->frame_len, r->frame_offset) != 0)) {
            char where[160];
            chunk_where(where, sizeof where, a, k, e);
            j->err = ctx_fail(&j->msg, r->frame_len > fbound ? CKPZ_ERR_CORRUPT : CKPZ_ERR_READ, "%s: %s", where,
                              r->frame_len > fbound ? "frame too large" : "read error");
        }
        if (j->err) more = 0;
        pipeline_submit(pl, j);
        if (!more) continue;
        if (a->chunk_off[++k] >= sp[si]->offset + sp[si]->length) { /* next span */
            if (++si == ns) {
                more = 0;
            } else {
                k = chunk_at(a, sp[si]->offset);
                ei = entry_of(a, k);
            }
        } else {
            while (k >= a->e[ei].first_chunk + a->e[ei].nchunks) ei++;
        }
    }
    goto out;
nomem:
    err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
out:
    pipeline_destroy(pl);
    for (size_t i = 0; jobs && i < depth; i++) {
        if (wm) workmem_return(wm, i, lent ? lent[i] : NULL, jobs[i].frame);
        else free(jobs[i].frame), free(lent ? lent[i] : NULL);
        free(jobs[i].image);
    }
    free(lent);
    free(st.raw);
    free(jobs);
    free(sp);
    workmem_keep(ctx, wm);
    return err;
}
