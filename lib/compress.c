/* compress.c — the compression path, wiring the stages: formats/ describe the input,
 * the chunker cuts it, workers run each chunk through transforms/ and entropy/
 * (codec.c), and the calling thread writes frames in order and finally the index and
 * trailer (container/). The calling thread alternates between reading the next chunk
 * and writing finished ones, so input, coding and output overlap; at most `depth`
 * chunks are in memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "codec.h"
#include "common/crc32c.h"
#include "common/grow.h"
#include "common/pipeline.h"
#include "formats/match.h"
#include "io/io.h"
#include "transforms/policy.h"
#include "workmem.h"

enum { GROUP_SMALL = 1, GROUP_LEADS = 2 }; /* small entries alone; leading a larger owner */

typedef struct cjob {
    int new_entry;  /* entry frames precede this chunk: those of first_entry..entry */
    uint32_t first_entry;
    int group;      /* the chunk holds a group (GROUP_*): entries first_entry..entry-1 are packed */
    size_t group_len; /* while a group is gathered: bytes of its entries before the last */
    uint32_t entry;
    ckpz_dtype dtype;
    uint8_t *raw;
    size_t raw_len; /* 0: an empty tensor's entry, no chunk */
    const uint8_t *base; /* the base's bytes for this chunk, or NULL */
    int copy;       /* equal to the base's bytes: no frame of its own */
    int lossy;      /* coded with `plan` */
    quant_plan plan;
    uint64_t elem0; /* first element of the chunk in its tensor */
    quant_stats st; /* lossy: the chunk's errors */
    uint8_t *out;
    size_t out_len;
    uint32_t raw_crc; /* of the bytes the chunk restores */
    uint64_t base_off; /* of base in the base's original */
    uint32_t base_crc; /* of the base's raw_len bytes at base (when the base CRC is deferred) */
} cjob;

typedef struct workers_state {
    int level;
    chunk_scratch *scratch; /* one set per thread that codes */
    int defer_base_crc;     /* jobs take the CRC of the base bytes they read */
    ckpz_codec codec;       /* the planes' coder (ckpz_params.codec) */
} workers_state;

static void compress_job(void *v, int worker, void *arg)
{
    cjob *j = v;
    workers_state *ws = arg;
    j->copy = 0;
    if (!j->raw_len) return;
    if (j->base && !memcmp(j->raw, j->base, j->raw_len)) {
        j->copy = 1;
        j->raw_crc = j->base_crc = crc32c(0, j->raw, j->raw_len);
        return;
    }
    int level = j->plan.spec.level ? j->plan.spec.level : ws->level; /* a policy's level */
    ent_ctx_set_codec(ws->scratch->ec[worker], ws->codec); /* the contexts outlive the call */
    if (j->lossy) {
        /* the lossy coder reads the base in passes of its own: the CRC is taken here */
        if (ws->defer_base_crc && j->base) j->base_crc = crc32c(0, j->base, j->raw_len);
        const uint8_t *restored;
        quant_stats_init(&j->st);
        j->out_len = chunk_encode_lossy(ws->scratch, worker, level, &j->plan, j->dtype, j->entry, j->elem0, j->raw,
                                        j->raw_len, j->plan.spec.no_base ? NULL : j->base, j->out, &j->raw_crc,
                                        &restored, &j->st);
    } else if (j->group == GROUP_SMALL && j->dtype != CKPZ_DTYPE_NONE) {
        /* A group mixes tensors (and opaque bytes) whose elements need not line up with
         * the chunk's: coded as its largest dtype and as bytes, the smaller kept. Such
         * groups are small (PACK_GROUP) and a small share of any checkpoint, so the second
         * coding is cheap. A group that leads a larger owner is coded as the owner. */
        ent_ctx *ec = ws->scratch->ec[worker];
        uint8_t *planes = ws->scratch->planes[worker];
        size_t as_bytes = chunk_encode(ec, level, CKPZ_DTYPE_NONE, j->entry, j->raw, j->raw_len, NULL, planes,
                                       j->out, &j->raw_crc, NULL);
        j->out_len = chunk_encode(ec, level, j->dtype, j->entry, j->raw, j->raw_len, NULL, planes, j->out,
                                  &j->raw_crc, NULL);
        if (as_bytes < j->out_len)
            j->out_len = chunk_encode(ec, level, CKPZ_DTYPE_NONE, j->entry, j->raw, j->raw_len, NULL, planes, j->out,
                                      &j->raw_crc, NULL);
    } else {
        j->out_len = chunk_encode(ws->scratch->ec[worker], level, j->dtype, j->entry, j->raw, j->raw_len, j->base,
                                  ws->scratch->planes[worker], j->out, &j->raw_crc,
                                  ws->defer_base_crc ? &j->base_crc : NULL);
    }
    /* See workmem_out_bound (workmem.c). Lossy frames never get here (at most CTR_FRAME_SIZE + n: the
     * lossy coder falls back to lossless coding, which can, when that would be larger),
     * so the chunk restores its original bytes either way. */
    if (j->out_len > chunk_frame_bound(j->raw_len))
        j->out_len = chunk_encode(ws->scratch->ec[worker], level, CKPZ_DTYPE_NONE, j->entry, j->raw, j->raw_len,
                                  NULL, ws->scratch->planes[worker], j->out, &j->raw_crc, NULL);
}

/* What the calling thread keeps while writing: output position, index tables, the
 * running content checksum. */
typedef struct base_span {
    uint64_t off, len;
    uint32_t crc;
} base_span;

typedef struct writer {
    ckpz_ctx *ctx;
    const ckpz_params *p;
    uint64_t size_hint;
    ckpz_write_fn wr;
    void *opaque;
    uint64_t pos, original;
    uint32_t content_crc;
    ctr_entry *e;
    quant_stats *qs; /* per entry: the errors of its lossy chunks */
    size_t ne, cap_e, cap_qs;
    ctr_chunkrec *c;
    size_t nc, cap_c;
    uint64_t copy_len; /* a run of chunks equal to the base's, not yet written */
    uint32_t copy_entry, copy_crc;
    int spans_on;      /* deferred base CRC: the base's bytes the chunks read, and their CRCs */
    base_span *spans;
    size_t nspans, cap_spans;
} writer;

static ckpz_error put(writer *w, const void *p, size_t n)
{
    if (n && w->wr(w->opaque, p, n) != 0)
        return ctx_fail(w->ctx, CKPZ_ERR_WRITE, "write error after %llu bytes of output", (unsigned long long)w->pos);
    w->pos += n;
    return CKPZ_OK;
}

/* Writes a chunk frame of entry `entry` and records it in the seek table. */
static ckpz_error put_frame(writer *w, uint32_t entry, const uint8_t *frame, size_t len, uint64_t raw_len)
{
    if (grow_array((void **)&w->c, &w->cap_c, w->nc + 1, sizeof *w->c))
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    w->c[w->nc++] = (ctr_chunkrec){w->pos, (uint32_t)raw_len, (uint32_t)len};
    w->e[entry].nchunks++;
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

/* Writes a finished job: its entry frame if it starts an entry, then its chunk frame.
 * Consecutive chunks of an entry equal to the base's become one copy frame. */
static ckpz_error emit(writer *w, cjob *j)
{
    ckpz_error err;
    if (j->new_entry) {
        uint8_t buf[8 + CTR_ENTRY_MAX + 4];
        if ((err = flush_copy(w))) return err;
        for (uint32_t i = j->first_entry; i <= j->entry; i++) {
            ctr_entry *e = &w->e[i];
            e->first_chunk = w->nc;
            ctr_entry_frame_write(buf, e);
            if ((err = put(w, buf, ctr_entry_frame_size(e)))) return err;
        }
    }
    if (j->raw_len && j->lossy && !j->out_len && !j->copy)
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory coding tensor '%.100s'", w->e[j->entry].name);
    if (j->raw_len && j->lossy) {
        if (j->copy) w->qs[j->entry].n += j->raw_len / ckpz_dtype_size(j->dtype);
        else quant_stats_add(&w->qs[j->entry], &j->st);
    }
    if (j->raw_len) {
        if (j->copy) {
            if (w->copy_len + j->raw_len > UINT32_MAX && (err = flush_copy(w))) return err;
            w->copy_entry = j->entry;
            w->copy_crc = crc32c_combine(w->copy_crc, j->raw_crc, j->raw_len);
            w->copy_len += j->raw_len;
        } else if ((err = flush_copy(w)) || (err = put_frame(w, j->entry, j->out, j->out_len, j->raw_len))) {
            return err;
        }
        w->content_crc = crc32c_combine(w->content_crc, j->raw_crc, j->raw_len);
        w->original += j->raw_len;
        if (w->spans_on && j->base) {
            if (w->nspans == w->cap_spans) {
                size_t nc = w->cap_spans ? 2 * w->cap_spans : 256;
                base_span *ns = realloc(w->spans, nc * sizeof *ns);
                if (!ns) return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
                w->spans = ns;
                w->cap_spans = nc;
            }
            w->spans[w->nspans++] = (base_span){j->base_off, j->raw_len, j->base_crc};
        }
        if (w->p->progress && w->p->progress(w->p->progress_opaque, w->original, w->size_hint))
            return ctx_fail(w->ctx, CKPZ_ERR_ABORTED, "aborted");
    }
    return CKPZ_OK;
}

static int span_cmp(const void *a, const void *b)
{
    const base_span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The base's CRC-32C from the spans the chunks read (their CRCs, taken while the bytes
 * were in cache) and the bytes between them, in the base's order. Spans that overlap
 * (never seen: tensors match one base tensor each) make it read the whole base. */
static ckpz_error base_crc_from_spans(writer *w, const void *base, size_t size, uint32_t *crc)
{
    const uint8_t *b = base;
    if (w->nspans) qsort(w->spans, w->nspans, sizeof *w->spans, span_cmp); /* none: the base was never read */
    uint32_t c = 0;
    uint64_t pos = 0;
    for (size_t i = 0; i < w->nspans; i++) {
        const base_span *s = &w->spans[i];
        if (s->off < pos || s->len > size - s->off) {
            *crc = crc32c(0, b, size);
            return CKPZ_OK;
        }
        if (s->off > pos) c = crc32c(c, b + pos, (size_t)(s->off - pos));
        c = crc32c_combine(c, s->crc, s->len);
        pos = s->off + s->len;
    }
    if (pos < size) c = crc32c(c, b + pos, (size_t)(size - pos));
    *crc = c;
    return CKPZ_OK;
}

/* Appends the entry of segment s, at `off` in the input and coded against the base's
 * segment m (NULL: none), to the writer's table. What describing the entries and chunks
 * takes (the input's segment list, the entry and chunk tables, the index they become)
 * grows with the input's tensor count, not its size, so it is counted, in *table_bytes,
 * against the memory limit as a whole. */
static ckpz_error add_entry(writer *w, const fmt_segment *s, uint64_t off, const fmt_segment *m,
                            uint64_t *table_bytes)
{
    if (grow_array((void **)&w->e, &w->cap_e, w->ne + 1, sizeof *w->e) ||
        grow_array((void **)&w->qs, &w->cap_qs, w->ne + 1, sizeof *w->qs))
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    if (w->ne >= UINT32_MAX) return ctx_fail(w->ctx, CKPZ_ERR_LIMIT, "more than 2^32 entries");
    quant_stats_init(&w->qs[w->ne]);
    ctr_entry *e = &w->e[w->ne++];
    memset(e, 0, sizeof *e);
    e->dtype = (uint8_t)s->dtype;
    e->name = s->name ? s->name : "";
    size_t nl = strlen(e->name);
    e->name_len = (uint16_t)(nl > CTR_MAX_NAME ? CTR_MAX_NAME : nl);
    e->ndim = s->ndim <= CTR_MAX_NDIM ? s->ndim : 0;
    e->shape = e->ndim ? s->shape : NULL;
    e->offset = off;
    if (m) {
        e->flags = CTR_ENTRY_BASED;
        e->base_offset = m->offset;
    }
    *table_bytes += sizeof(fmt_segment) + nl + 1 + 8 * (uint64_t)s->ndim + sizeof *w->e + sizeof *w->qs +
                    ctr_entry_size(e, 1);
    if (*table_bytes > w->p->mem_limit)
        return ctx_fail(w->ctx, CKPZ_ERR_LIMIT,
                        "the first %zu entries (up to tensor '%.100s') already take more memory to describe than the "
                        "memory limit allows (%.1f MiB; ckpz --memory raises it)",
                        w->ne, e->name, (double)w->p->mem_limit / (1 << 20));
    return CKPZ_OK;
}

/* Packed entries (doc/format.md): entries of at most PACK_MAX bytes share a chunk, at most
 * PACK_GROUP bytes of them; a group of at most PACK_LEAD bytes of tensors of one dtype
 * also leads a larger tensor of that dtype after it. A chunk costs its frame, a
 * descriptor a plane and each coded plane's own overhead (rANS states, tables: a few
 * hundred bytes), which a tensor of a few KiB does not pay back; but statistics shared
 * with another tensor cost in proportion to the bytes shared, so only a little leads a
 * large tensor, and no opaque bytes: measured on the samples/ files, small torch.save
 * files and the corpus' full checkpoints (leading limits 0.25-4 KiB, packing limits
 * 1-16 KiB), these values were never larger than any other; leading 12 KiB groups made
 * files 0.1-0.3% larger, and zip headers leading storages made a torch.save file 0.01%
 * larger than not leading at all. */
#define PACK_MAX (16u << 10)
#define PACK_GROUP (64u << 10)
#define PACK_LEAD (2u << 10)
_Static_assert(PACK_GROUP <= CKPZ_CHUNK_MIN, "a group must fit any chunk");

/* Whether segment s, whose first n bytes were read (its entry e), may start a group:
 * known, small and whole, lossless, not coded against the base. The entries of a group
 * must also share a level (a policy's rules may give levels). */
static int packable(const fmt_segment *s, size_t n, const ctr_entry *e, const quant_spec *q)
{
    return s->length != FMT_LEN_OPEN && s->length >= 1 && s->length <= PACK_MAX && n == s->length &&
           q->mode == QM_NONE && (!e || !(e->flags & (CTR_ENTRY_BASED | CTR_ENTRY_LOSSY)));
}

/* Whether the n entries are all tensors of dtype dt. */
static int all_of_dtype(const ctr_entry *e, size_t n, ckpz_dtype dt)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].dtype != dt) return 0;
    return 1;
}

/* The dtype a group's chunk is coded as first: the one that holds most of its bytes. */
static ckpz_dtype group_dtype(const ctr_entry *e, size_t n)
{
    uint64_t bytes[CKPZ_DTYPE_COUNT_] = {0};
    ckpz_dtype best = CKPZ_DTYPE_NONE;
    for (size_t i = 0; i < n; i++) {
        bytes[e[i].dtype] += e[i].length;
        if (bytes[e[i].dtype] > bytes[best]) best = (ckpz_dtype)e[i].dtype;
    }
    return best;
}

/* Completes a lossy entry's plan. Modes that depend on the whole tensor (rel: its value
 * range; pruning: the magnitude below which the chosen share of values lies) read the
 * rest of the entry ahead into *whole (its first n bytes are in first), within the
 * memory limit; the caller then hands out chunks from there. */
static ckpz_error plan_entry(ckpz_ctx *ctx, const ckpz_params *p, chunker *ch, const fmt_segment *s,
                             const uint8_t *first, size_t n, const uint8_t *base, uint64_t base_avail,
                             quant_plan *plan, uint8_t **whole, size_t *whole_len)
{
    const quant_spec *q = &plan->spec;
    unsigned es = ckpz_dtype_size(s->dtype);
    *whole_len = 0;
    quant_plan_shape(plan, s->ndim, s->shape);
    if (q->mode == QM_CREL && (!base || q->no_base)) { /* nothing to be relative to */
        plan->spec.mode = QM_NONE;
        return CKPZ_OK;
    }
    if (q->mode != QM_REL && q->mode != QM_CREL && !(q->prune > 0)) return CKPZ_OK;
    const uint8_t *all = first;
    size_t len = n;
    if (s->length > n) {
        if (s->length > p->mem_limit)
            return ctx_fail(ctx, CKPZ_ERR_LIMIT,
                            "tensor '%.100s' (%llu bytes) is larger than the memory limit, which %s needs whole",
                            s->name, (unsigned long long)s->length, q->mode == QM_ABS ? "prune" : quant_mode_name(q->mode));
        uint8_t *buf = realloc(*whole, (size_t)s->length);
        if (!buf) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading tensor '%.100s'", s->name);
        *whole = buf;
        memcpy(buf, first, n);
        while (len < s->length) {
            size_t got;
            const fmt_segment *s2;
            ch_event ev = chunker_next(ch, buf + len, &got, &s2);
            if (ev == CH_NOMEM) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
            if (ev == CH_ERROR) return ctx_fail(ctx, CKPZ_ERR_READ, "read error in tensor '%.100s'", s->name);
            if (ev == CH_DATA && s2) return ctx_fail(ctx, CKPZ_ERR_INTERNAL, "tensor '%.100s' ended early", s->name);
            if (ev != CH_DATA || got == 0) break; /* the input ended inside the tensor */
            len += got;
        }
        *whole_len = len;
        all = buf;
    }
    const uint8_t *b = base && len <= base_avail && !q->no_base ? base : NULL;
    if (q->mode == QM_REL) {
        double lo = INFINITY, hi = -INFINITY;
        quant_scan(s->dtype, all, len - len % es, &lo, &hi);
        plan->abs_bound = hi > lo ? q->bound * (hi - lo) : 0;
    }
    if (q->mode == QM_CREL) {
        /* a bound relative to the update itself: without a base there is none */
        plan->abs_bound = b ? q->bound * quant_change_rms(s->dtype, all, b, len - len % es) : 0;
        if (!b) plan->spec.mode = QM_NONE;
    }
    if (q->prune > 0) plan->prune_thr = quant_prune_threshold(s->dtype, all, b, len - len % es, q->prune);
    return CKPZ_OK;
}

ckpz_error ckpz_compress_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                            ckpz_stats *stats)
{
    ctx_clear(ctx);
    ckpz_params p; /* with the hooks in effect (io_resolve) */
    ckpz_source in;
    ckpz_sink out;
    ckpz_error err = io_resolve(ctx, params, src, dst, &p, &in, &out);
    if (err) return err;
    ckpz_read_fn rd = in.read;
    void *rd_opaque = in.opaque;
    uint64_t size_hint = in.size;
    ckpz_write_fn wr = out.write;
    void *wr_opaque = out.opaque;
    if (!rd || !wr) return ctx_fail(ctx, CKPZ_ERR_PARAM, "missing read or write callback");
    const char *missing = ent_choice_missing(p.codec);
    if (missing) return ctx_fail(ctx, CKPZ_ERR_PARAM, "codec %s: %s", ckpz_codec_name(p.codec), missing);

    uint8_t *idx = NULL;
    chunker ch;
    fmt_list segs = {0};
    fmt_request rq = {p.format, p.raw_dtype, p.raw_ndim, p.raw_shape};
    char why[256] = "";
    chunker_init(&ch, &segs, p.chunk_size, rd, rd_opaque);
    fmt_status fs = chunker_describe(&ch, &rq, size_hint, why, sizeof why);
    if (fs != FMT_DONE) {
        chunker_free(&ch);
        return fmt_fail(ctx, fs, &rq, why);
    }

    policy *pol = NULL;
    if (p.policy) {
        if (!(pol = policy_parse(p.policy, p.max_mae, why, sizeof why))) {
            fmt_list_free(&segs);
            chunker_free(&ch);
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "%s", why);
        }
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
    size_t depth = workers ? (size_t)p.threads * 3 : 1, used_jobs = 0;
    int lossy = policy_lossy(pol); /* a policy of levels alone writes a lossless file */
    int defer = p.base && p.patch; /* the base's CRC from the chunks, patched in at the end */
    struct workmem *wm = workmem_take(ctx);
    workers_state ws = {p.level, NULL, defer, p.codec};
    cjob *jobs = calloc(depth, sizeof *jobs), *j;
    size_t bchunk = p.chunk_size, fbound = 0;
    pipeline *pl = NULL;
    writer w = {ctx, &p, size_hint, wr, wr_opaque, 0, 0, 0, NULL, NULL, 0, 0, 0, NULL, 0, 0, 0, 0, 0, defer, NULL, 0, 0};
    ctr_base bhead = {0};
    uint8_t bframe[12 + CTR_BASE_FIXED + CTR_MAX_BASE_NAME];
    uint64_t tensor_bytes = 0, tensors = 0;
    uint64_t table_bytes = 0; /* see add_entry */
    base_index bidx = {0};
    const uint8_t *entry_base = NULL; /* the base's bytes for the current entry's next chunk */
    uint64_t entry_avail = 0;         /* bytes of them the base has */
    quant_plan plan = {0};            /* the current entry's lossy coding (mode 0: lossless) */
    uint8_t *whole = NULL;            /* a lossy entry read ahead to plan it (whole[0..whole_len)) */
    size_t whole_len = 0, whole_pos = 0;

    if (!wm || !jobs || workmem_scratch(wm, workers + 1, p.chunk_size, lossy ? CHUNK_SCRATCH_ENCODE_LOSSY : 0))
        goto nomem;
    ws.scratch = wm->scratch;
    bchunk = workmem_buffers(wm, p.chunk_size);
    fbound = workmem_out_bound(bchunk);
    for (size_t i = 0; i < depth; i++) workmem_lend(wm, i, &jobs[i].raw, &jobs[i].out);
    if (!(pl = pipeline_create(workers, depth, compress_job, &ws))) goto nomem;

    uint8_t hdr[CTR_HEADER_SIZE];
    ctr_header_write(hdr, &(ctr_header){(uint32_t)p.chunk_size, (uint8_t)segs.format, p.base != NULL, lossy != 0, 1, 0});
    if ((err = put(&w, hdr, sizeof hdr))) goto fail;
    if (p.base) {
        if (base_index_build(p.base, p.base_size, &rq, &bidx)) goto nomem;
        bhead = (ctr_base){p.base_size, defer ? 0 : crc32c(0, p.base, p.base_size), p.base_depth + 1, 0, ""};
        size_t nl = p.base_name ? strlen(p.base_name) : 0;
        bhead.name_len = (uint16_t)(nl > CTR_MAX_BASE_NAME ? CTR_MAX_BASE_NAME : nl);
        memcpy(bhead.name, p.base_name ? p.base_name : "", bhead.name_len);
        ctr_base_frame_write(bframe, &bhead);
        if ((err = put(&w, bframe, ctr_base_frame_size(&bhead)))) goto fail;
    }

    for (;;) {
        if (used_jobs < depth) {
            j = &jobs[used_jobs++];
            if ((!j->raw && !(j->raw = malloc(bchunk))) || (!j->out && !(j->out = malloc(fbound)))) goto nomem;
        } else {
            j = pipeline_retire(pl);
            if ((err = emit(&w, j))) goto fail;
        }
        const fmt_segment *s = NULL;
        size_t n;
        ch_event ev = CH_DATA;
        if (whole_pos < whole_len) { /* the rest of an entry read ahead */
            n = whole_len - whole_pos < p.chunk_size ? whole_len - whole_pos : p.chunk_size;
            memcpy(j->raw, whole + whole_pos, n);
            whole_pos += n;
        } else {
            ev = chunker_next(&ch, j->raw, &n, &s);
        }
        if (ev == CH_ERROR) {
            err = ctx_fail(ctx, CKPZ_ERR_READ, "read error after %llu bytes", (unsigned long long)ch.consumed);
            goto fail;
        }
        if (ev == CH_NOMEM) goto nomem;
        if (ev == CH_END) break;
        table_bytes += 2 * sizeof(ctr_chunkrec); /* its record, and its line in the index */
        j->new_entry = s != NULL;
        j->first_entry = (uint32_t)w.ne;
        j->group = 0;
        j->group_len = 0;
        if (s) {
            const fmt_segment *m = p.base ? base_index_match(&bidx, s, ch.consumed - n) : NULL;
            if ((err = add_entry(&w, s, ch.consumed - n, m, &table_bytes))) goto fail;
            ctr_entry *e = &w.e[w.ne - 1];
            if (s->dtype != CKPZ_DTYPE_NONE) tensors++;
            entry_base = m ? (const uint8_t *)p.base + m->offset : NULL;
            entry_avail = m ? (m->length == FMT_LEN_OPEN ? p.base_size - m->offset : m->length) : 0;
            memset(&plan, 0, sizeof plan);
            plan.spec = policy_match(pol, s->name, s->dtype, s->ndim);
            if (plan.spec.mode != QM_NONE && s->length != FMT_LEN_OPEN) {
                if ((err = plan_entry(ctx, &p, &ch, s, j->raw, n, entry_base, entry_avail, &plan, &whole,
                                      &whole_len)))
                    goto fail;
                whole_pos = n;
            }
            if (plan.spec.mode != QM_NONE && s->length != FMT_LEN_OPEN) {
                e->flags |= CTR_ENTRY_LOSSY;
                e->lossy = (ctr_lossy){plan.spec.mode, plan.spec.bits, plan.spec.sym, plan.spec.per_row, plan.group,
                                       plan.spec.bound, plan.abs_bound, plan.prune_thr, 0, 0, 0, 0, 0, 0, 0, 0, 0};
            } else {
                plan.spec.mode = QM_NONE;
            }
            /* A small whole entry: the small entries after it join its chunk, each taken
             * whole, until one would not fit; that one, whatever its size, owns the group
             * and goes on in the chunk when it can (doc/format.md "Packed entries"). */
            if (packable(s, n, e, &plan.spec)) {
                size_t used = n;
                int head_tensor = s->dtype != CKPZ_DTYPE_NONE; /* s moves when the list grows */
                for (;;) {
                    const fmt_segment *t;
                    size_t got;
                    ev = chunker_peek(&ch, &t);
                    if (ev != CH_DATA || !t || t->length == FMT_LEN_OPEN || t->length == 0) break;
                    quant_spec q = policy_match(pol, t->name, t->dtype, t->ndim);
                    if (q.mode != QM_NONE || q.level != plan.spec.level ||
                        (p.base && base_index_match(&bidx, t, ch.consumed)))
                        break;
                    int small = t->length <= PACK_MAX && t->length <= PACK_GROUP - used;
                    if (!small && (used > PACK_LEAD || used % ckpz_dtype_size(t->dtype) ||
                                   !all_of_dtype(w.e + j->first_entry, w.ne - j->first_entry, t->dtype)))
                        break;
                    uint64_t off = ch.consumed;
                    ev = chunker_take(&ch, j->raw + used, small ? (size_t)t->length : p.chunk_size - used, &got);
                    if (ev != CH_DATA || !got) break;
                    w.e[w.ne - 1].flags |= CTR_ENTRY_PACKED; /* the entry before owns the group no more */
                    w.e[w.ne - 1].length = used - j->group_len;
                    j->group_len = used;
                    if ((err = add_entry(&w, t, off, NULL, &table_bytes))) goto fail;
                    if (t->dtype != CKPZ_DTYPE_NONE) tensors++, tensor_bytes += got;
                    used += got;
                    j->group = small ? GROUP_SMALL : GROUP_LEADS;
                    if (!small) break; /* the owner: its rest comes in the next chunks */
                }
                if (ev == CH_ERROR) {
                    err = ctx_fail(ctx, CKPZ_ERR_READ, "read error after %llu bytes", (unsigned long long)ch.consumed);
                    goto fail;
                }
                if (ev == CH_NOMEM) goto nomem;
                if (j->group) {
                    /* the packed entries' bytes were counted as they came; the owner's
                     * are the rest */
                    if (head_tensor) tensor_bytes += n;
                    w.e[w.ne - 1].length = used - j->group_len;
                    n = used;
                }
            }
        }
        ctr_entry *e = &w.e[w.ne - 1];
        j->entry = (uint32_t)(w.ne - 1);
        j->dtype = j->group == GROUP_SMALL ? group_dtype(w.e + j->first_entry, w.ne - j->first_entry)
                                           : (ckpz_dtype)e->dtype;
        j->raw_len = n;
        j->base = entry_base && n <= entry_avail ? entry_base : NULL; /* the base may end first (open tails) */
        j->base_off = j->base ? (uint64_t)(j->base - (const uint8_t *)p.base) : 0;
        j->lossy = plan.spec.mode != QM_NONE;
        j->plan = plan;
        j->elem0 = e->length / ckpz_dtype_size(j->dtype);
        if (n && !j->group) {
            e->length += n;
            if (entry_base) {
                entry_base += n;
                entry_avail -= n < entry_avail ? n : entry_avail;
            }
            if (e->dtype != CKPZ_DTYPE_NONE) tensor_bytes += n;
        }
        pipeline_submit(pl, j);
    }
    while ((j = pipeline_retire(pl)))
        if ((err = emit(&w, j))) goto fail;
    if ((err = flush_copy(&w))) goto fail;
    if (segs.format == CKPZ_INPUT_RAW && p.raw_ndim && w.original != fmt_raw_bytes(&rq)) { /* size was unknown */
        fmt_raw_mismatch(&rq, w.original, why, sizeof why);
        err = fmt_fail(ctx, FMT_ERROR, &rq, why);
        goto fail;
    }

    for (size_t i = 0; i < w.ne; i++) { /* the errors go into the index */
        ctr_lossy *l = &w.e[i].lossy;
        const quant_stats *q = &w.qs[i];
        if (!(w.e[i].flags & CTR_ENTRY_LOSSY)) continue;
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
    size_t isz = ctr_index_size(w.e, w.ne, w.nc);
    if (!(idx = malloc(isz))) goto nomem;
    ctr_index_write(idx, w.e, w.ne, w.c, w.nc);
    uint8_t trb[CTR_TRAILER_SIZE];
    ctr_trailer_write(trb, &(ctr_trailer){w.pos, isz, w.original, w.content_crc, crc32c(0, idx, isz)});
    if ((err = put(&w, idx, isz)) || (err = put(&w, trb, sizeof trb))) goto fail;
    if (defer) {
        if ((err = base_crc_from_spans(&w, p.base, p.base_size, &bhead.crc))) goto fail;
        ctr_base_frame_write(bframe, &bhead);
        if (p.patch(p.patch_opaque, bframe, ctr_base_frame_size(&bhead), CTR_HEADER_SIZE) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_WRITE, "write error rewriting the base frame");
            goto fail;
        }
    }
    if (stats) {
        stats->original_bytes = w.original;
        stats->compressed_bytes = w.pos;
        stats->tensor_bytes = tensor_bytes;
        stats->tensors = tensors;
        stats->chunks = w.nc;
        stats->format = segs.format;
    }
    goto done;
nomem:
    err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
fail:
done:
    pipeline_destroy(pl);
    for (size_t i = 0; jobs && i < depth; i++) {
        if (wm) workmem_return(wm, i, jobs[i].raw, jobs[i].out);
        else free(jobs[i].raw), free(jobs[i].out);
    }
    free(jobs);
    workmem_keep(ctx, wm);
    base_index_free(&bidx);
    policy_free(pol);
    free(whole);
    free(w.e); /* names and shapes belong to segs */
    free(w.qs);
    free(w.c);
    free(w.spans);
    free(idx);
    chunker_free(&ch);
    fmt_list_free(&segs);
    return err;
}
