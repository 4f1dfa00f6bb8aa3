/* encode.c — see encode.h. */
#include "encode.h"

#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/dtype.h"
#include "common/grow.h"
#include "repeats.h"

/* Text headers of at least this many bytes are coded with LZ's fastest level. */
#define TEXT_FAST_MIN (64u * 1024)

/* Codes chunk j as dtype `as` into out (chunk_encode_as: as another float class than
 * its owner's, against a base with xor or no predictor). */
static size_t code_as(const cjob *j, ent_ctx *ec, uint8_t *planes, int level, ckpz_dtype as, uint8_t *out,
                      uint32_t *raw_crc, uint32_t *base_crc)
{
    const plan_chunk *d = &j->d;
    const uint8_t *raw = j->src ? j->src : j->raw;
    return chunk_encode_as(ec, level, as, d->entry_dtype, d->entry, raw, d->raw_len, j->base, planes, out, raw_crc,
                           base_crc);
}

void encode_job(void *v, int worker, void *arg)
{
    cjob *j = v;
    const plan_chunk *d = &j->d;
    chunk_result *r = &j->r;
    workers_state *ws = arg;
    const uint8_t *raw = j->src ? j->src : j->raw;
    uint8_t *out = j->lent ? j->lent : j->out;
    r->copy = 0;
    r->abs_bound = d->plan.abs_bound;
    r->prune_thr = d->plan.prune_thr;
    if (!d->raw_len) return;
    if (j->base && !memcmp(raw, j->base, d->raw_len)) {
        r->copy = 1;
        r->raw_crc = r->base_crc = crc32c(0, raw, d->raw_len);
        return;
    }
    int level = d->plan.spec.level ? d->plan.spec.level : ws->level; /* a policy's level */
    ent_ctx_set_codec(ws->scratch->ec[worker], ws->codec); /* the contexts outlive the call */
    if (d->lossy) {
        /* the lossy coder reads the base in passes of its own: the CRC is taken here */
        if (ws->defer_base_crc && j->base) r->base_crc = crc32c(0, j->base, d->raw_len);
        const uint8_t *restored;
        quant_stats_init(&r->st);
        r->out_len = chunk_encode_lossy(ws->scratch, worker, level, &d->plan, d->dtype, d->entry, d->elem0, raw,
                                        d->raw_len, d->plan.spec.no_base ? NULL : j->base, out, &r->raw_crc, &restored,
                                        &r->st);
    } else if (d->group == GROUP_SMALL && d->dtype != CKPZ_DTYPE_NONE &&
               (!d->uniform || group_repeats(raw, d->raw_len) >= REPEATS_LIKELY)) {
        /* A group mixes tensors (and opaque bytes) whose elements need not line up with
         * the chunk's: coded as its largest dtype and as bytes, the smaller kept. A group
         * of 16 KiB or more of whole tensors of one dtype (d->uniform) is coded as that
         * dtype only unless a sample finds repeated blocks (tensors repeated whole, which
         * LZ on the bytes finds): its planes' tables are paid back, and as bytes it was
         * never the smaller on the corpus (the 64 KiB groups of 4,800 small FP32 tensors:
         * 11% larger), while the second coding took a third of that file's compression
         * time. Smaller groups pay more for the planes' tables: as bytes, 2.3 KiB groups
         * of BF16 weights coded 7% smaller (4.6 KiB of FP32: 6% larger). A group that
         * leads a larger owner is coded as the owner. Either way against the group's
         * base image where it has one (d->gathered). */
        ent_ctx *ec = ws->scratch->ec[worker];
        uint8_t *planes = ws->scratch->planes[worker];
        size_t as_bytes = code_as(j, ec, planes, level, CKPZ_DTYPE_NONE, out, &r->raw_crc, NULL);
        r->out_len = code_as(j, ec, planes, level, d->dtype, out, &r->raw_crc, NULL);
        if (as_bytes < r->out_len) r->out_len = code_as(j, ec, planes, level, CKPZ_DTYPE_NONE, out, &r->raw_crc, NULL);
    } else if (d->text && !j->base && d->raw_len >= TEXT_FAST_MIN) {
        /* A large text header (a safetensors JSON header): zstd at its fastest level, not
         * the level 6 that a sample's repeats ask for. On the corpus' header of 4,800
         * small tensors (447 KB) it cost 831 bytes more and took a fifth of the file's
         * compression time less; a pickle, whose repeats level 6 codes a quarter smaller,
         * is not marked text. A header of a few hundred tensors (~5 KB) takes microseconds
         * either way and level 1 coded it ~25 bytes larger: it is coded as before. */
        r->out_len = chunk_encode_text(ws->scratch->ec[worker], level, d->entry, raw, d->raw_len,
                                       ws->scratch->planes[worker], out, &r->raw_crc, ws->codec == CKPZ_CODEC_AUTO);
    } else if (!j->base && ws->codec == CKPZ_CODEC_AUTO) {
        r->out_len = chunk_encode_alone(ws->scratch->ec[worker], level, d->dtype, d->entry, raw, d->raw_len,
                                        ws->scratch->planes[worker], out, &r->raw_crc);
    } else {
        r->out_len = code_as(j, ws->scratch->ec[worker], ws->scratch->planes[worker], level, d->dtype, out, &r->raw_crc,
                             ws->defer_base_crc ? &r->base_crc : NULL);
    }
    /* See workmem_out_bound (workmem.c). Lossy frames never get here (at most CTR_FRAME_SIZE + n: the
     * lossy coder falls back to lossless coding, which can, when that would be larger),
     * so the chunk restores its original bytes either way. */
    if (r->out_len > chunk_frame_bound(d->raw_len))
        r->out_len = chunk_encode(ws->scratch->ec[worker], level, CKPZ_DTYPE_NONE, d->entry, raw, d->raw_len, NULL,
                                  ws->scratch->planes[worker], out, &r->raw_crc, NULL);
}

void writer_init(writer *w, ckpz_ctx *ctx, const ckpz_params *p, planner *pl, uint64_t size_hint, ckpz_write_fn wr,
                 void *opaque, int defer_base_crc)
{
    memset(w, 0, sizeof *w);
    w->ctx = ctx;
    w->p = p;
    w->pl = pl;
    w->size_hint = size_hint;
    w->wr = wr;
    w->opaque = opaque;
    w->spans_on = defer_base_crc;
}

void writer_free(writer *w)
{
    free(w->qs);
    free(w->c);
    free(w->spans);
    if (w->own_ec) ent_ctx_free(w->ec);
    w->qs = NULL, w->c = NULL, w->spans = NULL, w->ec = NULL, w->own_ec = 0;
}

uint8_t *writer_room(writer *w, size_t n) { return w->lend && !w->mute ? w->lend(w->lend_opaque, n) : NULL; }

static ckpz_error put(writer *w, const void *p, size_t n)
{
    if (n && !w->mute) {
        if (w->wr(w->opaque, p, n) != 0) /* from room lent (writer_room): the sink takes it */
            return ctx_fail(w->ctx, CKPZ_ERR_WRITE, "write error after %llu bytes of output",
                            (unsigned long long)w->pos);
    }
    w->pos += n;
    return CKPZ_OK;
}

ckpz_error writer_start(writer *w, int lossy)
{
    const ckpz_params *p = w->p;
    uint8_t hdr[CTR_HEADER_SIZE];
    ctr_header_write(hdr, &(ctr_header){.chunk_size = (uint32_t)p->chunk_size,
                                        .format = (uint8_t)w->pl->segs.format,
                                        .based = p->base != NULL,
                                        .lossy = lossy != 0,
                                        .packed = 1,
                                        .coded = 1,
                                        .gbase = w->pl->gbase});
    ckpz_error err = put(w, hdr, sizeof hdr);
    if (err || !p->base) return err;
    ctr_base *b = &w->bhead;
    *b = (ctr_base){p->base_size, w->spans_on ? 0 : crc32c(0, p->base, p->base_size), p->base_depth + 1, 0, ""};
    size_t nl = p->base_name ? strlen(p->base_name) : 0;
    b->name_len = (uint16_t)(nl > CTR_MAX_BASE_NAME ? CTR_MAX_BASE_NAME : nl);
    memcpy(b->name, p->base_name ? p->base_name : "", b->name_len);
    ctr_base_frame_write(w->bframe, b);
    return put(w, w->bframe, ctr_base_frame_size(b));
}

/* Writes a chunk frame of entry `entry` and records it in the seek table. */
static ckpz_error put_frame(writer *w, uint32_t entry, const uint8_t *frame, size_t len, uint64_t raw_len)
{
    if (grow_array((void **)&w->c, &w->cap_c, w->nc + 1, sizeof *w->c))
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    w->c[w->nc++] = (ctr_chunkrec){w->pos, (uint32_t)raw_len, (uint32_t)len};
    w->pl->e[entry].nchunks++;
    return put(w, frame, len);
}

/* Writes the pending run of copied chunks as one copy frame. */
static ckpz_error flush_copy(writer *w)
{
    if (!w->copy_len) return CKPZ_OK;
    uint8_t frame[CTR_FRAME_SIZE];
    chunk_copy_frame(w->copy_entry, w->copy_len, w->copy_crc, frame);
    ckpz_error err = put_frame(w, w->copy_entry, frame, sizeof frame, w->copy_len);
    w->copy_len = 0;
    w->copy_crc = 0;
    return err;
}

/* Room in w->qs for `need` entries' error statistics. Only lossy entries' are kept and
 * read, so a file without lossy entries never grows the array: growing it by doubling
 * copied (and faulted in) ~600 KB of untouched statistics a call for 4,800 lossless
 * tensors. */
static ckpz_error stats_room(writer *w, size_t need)
{
    if (grow_array((void **)&w->qs, &w->cap_qs, need, sizeof *w->qs))
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    return CKPZ_OK;
}

/* One frame names the entries that start at chunk d: a group and its owner, or one. A
 * lossy entry's plan comes with its chunk's result r (planned without the values). */
static ckpz_error put_entries(writer *w, const plan_chunk *d, const chunk_result *r)
{
    ckpz_error err;
    ctr_entry *ents = w->pl->e;
    if ((err = flush_copy(w))) return err;
    for (uint32_t i = d->first_entry; i <= d->entry; i++) {
        ctr_entry *e = &ents[i];
        if (e->flags & CTR_ENTRY_LOSSY) {
            if ((err = stats_room(w, d->entry + 1))) return err;
            quant_stats_init(&w->qs[i]);
            e->lossy.abs_bound = r->abs_bound;
            e->lossy.prune_thr = r->prune_thr;
        }
        e->first_chunk = w->nc;
    }
    uint8_t *fr;
    size_t len;
    if (!w->ec && !(w->own_ec = (w->ec = ent_ctx_create()) != NULL))
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    if ((err = ctr_list_frame_write(w->ctx, w->ec, ents + d->first_entry, d->entry - d->first_entry + 1, &fr, &len)))
        return err;
    err = put(w, fr, len);
    free(fr);
    return err;
}

ckpz_error writer_lead(writer *w, const plan_chunk *d)
{
    if (!d->new_entry || d->lossy) return CKPZ_OK;
    ckpz_error err = put_entries(w, d, NULL);
    w->led = !err;
    return err;
}

/* Its entry frame if it starts an entry, then its chunk frame. Consecutive chunks of an
 * entry equal to the base's become one copy frame. */
ckpz_error writer_emit(writer *w, const plan_chunk *d, const chunk_result *r, const uint8_t *out)
{
    ckpz_error err;
    ctr_entry *ents = w->pl->e;
    if (d->new_entry && !w->led && (err = put_entries(w, d, r))) return err;
    w->led = 0;
    if (d->raw_len && d->lossy && !r->out_len && !r->copy)
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory coding tensor '%.100s'", ents[d->entry].name);
    if (d->raw_len && d->lossy) {
        if ((err = stats_room(w, d->entry + 1))) return err;
        if (r->copy) w->qs[d->entry].n += d->raw_len / ckpz_dtype_size(d->dtype);
        else quant_stats_add(&w->qs[d->entry], &r->st);
    }
    if (!d->raw_len) return CKPZ_OK;
    if (r->copy) {
        if (w->copy_len + d->raw_len > UINT32_MAX && (err = flush_copy(w))) return err;
        w->copy_entry = d->entry;
        w->copy_crc = crc32c_combine(w->copy_crc, r->raw_crc, d->raw_len);
        w->copy_len += d->raw_len;
    } else if ((err = flush_copy(w)) || (err = put_frame(w, d->entry, out, r->out_len, d->raw_len))) {
        return err;
    }
    w->content_crc = crc32c_combine(w->content_crc, r->raw_crc, d->raw_len);
    w->original += d->raw_len;
    if (w->spans_on && d->has_base && !d->gathered) { /* a group's image is no one span */
        if (w->nspans == w->cap_spans) {
            size_t nc = w->cap_spans ? 2 * w->cap_spans : 256;
            base_span *ns = realloc(w->spans, nc * sizeof *ns);
            if (!ns) return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
            w->spans = ns;
            w->cap_spans = nc;
        }
        w->spans[w->nspans++] = (base_span){d->base_off, d->raw_len, r->base_crc};
    }
    if (w->p->progress && w->p->progress(w->p->progress_opaque, w->original, w->size_hint))
        return ctx_fail(w->ctx, CKPZ_ERR_ABORTED, "aborted");
    return CKPZ_OK;
}

ckpz_error writer_end(writer *w)
{
    ckpz_error err;
    if ((err = flush_copy(w))) return err;
    ctr_entry *ents = w->pl->e;
    size_t ne = w->pl->ne;
    for (size_t i = 0; i < ne; i++) { /* the errors go into the index */
        ctr_lossy *l = &ents[i].lossy;
        if (!(ents[i].flags & CTR_ENTRY_LOSSY)) continue;
        if ((err = stats_room(w, ne))) return err;
        const quant_stats *q = &w->qs[i];
        l->n = q->n;
        l->exceptions = q->exceptions;
        l->changed = q->changed;
        l->frozen = q->frozen;
        l->sum_abs = q->sum_abs;
        l->sum_sq = q->sum_sq;
        l->max_abs = q->max_abs;
        l->vmin = q->vmin <= q->vmax ? q->vmin : 0;
        l->vmax = q->vmin <= q->vmax ? q->vmax : 0;
    }
    size_t isz;
    uint8_t *idx;
    if ((err = ctr_index_encode(w->ctx, w->ec, ents, ne, w->c, w->nc, &idx, &isz))) return err;
    uint8_t trb[CTR_TRAILER_SIZE];
    ctr_trailer_write(trb, &(ctr_trailer){w->pos, isz, w->original, w->content_crc, crc32c(0, idx, isz)});
    if (!(err = put(w, idx, isz))) err = put(w, trb, sizeof trb);
    free(idx);
    return err;
}

static int span_cmp(const void *a, const void *b)
{
    const base_span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The base's CRC-32C from the spans the chunks read (their CRCs, taken while the bytes
 * were in cache) and the bytes between them, in the base's order. Spans that overlap
 * (never seen: tensors match one base tensor each) make it read the whole base. */
static uint32_t base_crc_from_spans(writer *w, const void *base, size_t size)
{
    const uint8_t *b = base;
    if (w->nspans) qsort(w->spans, w->nspans, sizeof *w->spans, span_cmp); /* none: the base was never read */
    uint32_t c = 0;
    uint64_t pos = 0;
    for (size_t i = 0; i < w->nspans; i++) {
        const base_span *s = &w->spans[i];
        if (s->off < pos || s->len > size - s->off) return crc32c(0, b, size);
        if (s->off > pos) c = crc32c(c, b + pos, (size_t)(s->off - pos));
        c = crc32c_combine(c, s->crc, s->len);
        pos = s->off + s->len;
    }
    if (pos < size) c = crc32c(c, b + pos, (size_t)(size - pos));
    return c;
}

ckpz_error writer_base_frame(writer *w, const uint8_t **frame, size_t *len)
{
    w->bhead.crc = base_crc_from_spans(w, w->p->base, w->p->base_size);
    ctr_base_frame_write(w->bframe, &w->bhead);
    *frame = w->bframe;
    *len = ctr_base_frame_size(&w->bhead);
    return CKPZ_OK;
}
