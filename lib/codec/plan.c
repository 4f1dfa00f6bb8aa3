/* plan.c — see plan.h. The decisions are those compress.c always took, moved here
 * unchanged so that every encoder takes them from one place: chunks never straddle
 * entries, small entries are packed (doc/format.md "Packed entries"), entries match the
 * base's by name, a policy gives each tensor its coding, and a lossy tensor whose plan
 * depends on all its values is read ahead whole. */
#include "plan.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "container/base.h"

/* Appends the entry of segment s, at `off` in the input and coded against the base's
 * segment m (NULL: none). What describing the entries and chunks takes (the input's
 * segment list, the entry and chunk tables, the index they become) grows with the
 * input's tensor count, not its size, so it is counted, in table_bytes, against the
 * memory limit as a whole. */
static ckpz_error add_entry(planner *pl, const fmt_segment *s, uint64_t off, const fmt_segment *m)
{
    if (grow_array((void **)&pl->e, &pl->cap_e, pl->ne + 1, sizeof *pl->e))
        return ctx_fail(pl->ctx, CKPZ_ERR_NOMEM, "out of memory");
    if (pl->ne >= UINT32_MAX) return ctx_fail(pl->ctx, CKPZ_ERR_LIMIT, "more than 2^32 entries");
    ctr_entry *e = &pl->e[pl->ne++];
    /* all but the lossy fields, which are set whole where the entry is lossy (below, or
     * in planner_next) and read only there: clearing the whole entry (176 bytes) took
     * a string store's start-up per entry, ~2% of compressing 4,800 small tensors */
    memset(e, 0, offsetof(ctr_entry, lossy));
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
    /* quant_stats: the writer's per entry */
    pl->table_bytes += sizeof(fmt_segment) + nl + 1 + 8 * (uint64_t)s->ndim + sizeof *pl->e + sizeof(quant_stats) +
                       ctr_entry_size(e, 1);
    if (pl->table_bytes > pl->p->mem_limit)
        return ctx_fail(pl->ctx, CKPZ_ERR_LIMIT,
                        "the first %zu entries (up to tensor '%.100s') already take more memory to describe than the "
                        "memory limit allows (%.1f MiB; ckpz --memory raises it)",
                        pl->ne, e->name, (double)pl->p->mem_limit / (1 << 20));
    return CKPZ_OK;
}

/* Packed entries (doc/format.md): entries of at most PACK_MAX bytes share a chunk, at most
 * PACK_GROUP bytes of them (PACK_GROUP_ONE of tensors of one dtype); a group of at most
 * PACK_LEAD bytes of tensors of one dtype also leads a larger tensor of that dtype after
 * it. A chunk costs its frame, a descriptor a plane and each coded plane's own overhead
 * (rANS states, tables: a few hundred bytes), which a tensor of a few KiB does not pay
 * back; but statistics shared with another tensor cost in proportion to the bytes shared,
 * so only a little leads a large tensor, and no opaque bytes: measured on the samples/
 * files, small torch.save files and the corpus' full checkpoints (leading limits 0.25-4
 * KiB, packing limits 1-16 KiB), these values were never larger than any other; leading 12
 * KiB groups made files 0.1-0.3% larger, and zip headers leading storages made a
 * torch.save file 0.01% larger than not leading at all. Groups of tensors of one dtype may
 * grow to PACK_GROUP_ONE bytes: planes of 64 KiB and more, which the entropy stage stores
 * unseen when random (mantissas, from a sample) or codes with a context where that pays
 * (exponents); on 4,800 small FP32 tensors (the corpus' extra_small_tensors) the file came
 * out 0.9% smaller than in 64 KiB groups (1.519x -> 1.532x; 256 KiB: 1.524x, 1 MiB:
 * 1.529x) and compressed ~12% faster. Mixed groups (torch.save's zip headers between small
 * storages) stay within PACK_GROUP: larger, they made the step-300 full.pt ~400 bytes
 * larger. Either way at most the chunk size. */
#define PACK_MAX (16u << 10)
#define PACK_GROUP (64u << 10)
#define PACK_GROUP_ONE ((size_t)512 << 10)
#define PACK_LEAD (2u << 10)
_Static_assert(PACK_GROUP <= CKPZ_CHUNK_MIN, "a mixed group must fit any chunk");

/* Whether segment s, whose first n bytes were read (its entry e), may start a group:
 * known, small and whole, lossless, and not coded against the base unless based_ok (it
 * was chosen to be packed with its counterpart: feature 4). The entries of a group must
 * also share a level (a policy's rules may give levels). */
static int packable(const fmt_segment *s, size_t n, const ctr_entry *e, const quant_spec *q, int based_ok)
{
    unsigned never = CTR_ENTRY_LOSSY | (based_ok ? 0u : CTR_ENTRY_BASED);
    return s->length != FMT_LEN_OPEN && s->length >= 1 && s->length <= PACK_MAX && n == s->length &&
           q->mode == QM_NONE && (!e || !(e->flags & never));
}

static ckpz_error read_failed(planner *pl)
{
    return ctx_fail(pl->ctx, CKPZ_ERR_READ, "read error after %llu bytes", (unsigned long long)pl->ch.consumed);
}

/* The bytes of the base's segment m (an open one runs to the base's end). */
static uint64_t base_len(const ckpz_params *p, const fmt_segment *m)
{
    return m->length == FMT_LEN_OPEN ? p->base_size - m->offset : m->length;
}

/* The current entry's counterpart in the base, m (NULL: none), for the chunks' predictors. */
static void entry_base_set(planner *pl, const fmt_segment *m)
{
    pl->entry_base = m ? (const uint8_t *)pl->p->base + m->offset : NULL;
    pl->entry_avail = m ? base_len(pl->p, m) : 0;
}

/* Packed or coded against the base (doc/format.md "Small entries in a delta file"): a
 * small lossless entry that matches one of the base's costs, coded against it, a chunk
 * of its own (a copy frame when its bytes are the base's) and its delta, and it splits
 * the group its neighbours would share; packed, about its bytes (coded stand-alone,
 * beside the others). The estimate, in bytes: against the base DELTA_COPY for the same
 * bytes, else DELTA_FRAME and the delta's bits (delta_bits); packed, PACK_SIXTEENTHS/16
 * per byte. Measured on the quick resume-test families' step files (--lossy=auto against
 * the previous restored step, -3 against the previous step and against themselves), a
 * file of 4,800 small tensors against a copy of itself and its next AdamW step, the
 * bf16 delta pair of tests/data/compat and the corpus' step 280 -> 300 pairs: copies at
 * 130-160 and frames at 400-500 were never larger than other values; copies at 68-100
 * left 64-124 B zip records coded against the base (a CNN's identical file 7.7 KB
 * instead of 5.7), 200 packed identical 192 B bf16 norm weights (~155 B each where a
 * copy costs 32 B), and frames at 100-300 kept 1 KiB weights coded against the base,
 * each splitting a group (4,800 tensors: 5-22% larger). */
#define DELTA_COPY 130u
#define DELTA_FRAME 400u
#define PACK_SIXTEENTHS 14u

/* The bits a delta of the n bytes cur against b is estimated to take: per element of es
 * bytes (little-endian integers) that differs, the bits of the difference and two. */
static uint64_t delta_bits(const uint8_t *cur, const uint8_t *b, size_t n, unsigned es)
{
    uint64_t bits = 0;
    for (size_t i = 0; i + es <= n; i += es) {
        uint64_t x = 0, y = 0;
        for (unsigned k = 0; k < es; k++) {
            x |= (uint64_t)cur[i + k] << 8 * k;
            y |= (uint64_t)b[i + k] << 8 * k;
        }
        if (x != y) bits += 2 + 64 - (uint64_t)__builtin_clzll(x > y ? x - y : y - x);
    }
    return bits;
}

/* Whether segment t, the next to be read, is packed (*pack 1, or 2 with its counterpart
 * in its group's base image: feature 4) rather than coded against the base's segment m
 * (*pack 0): small, whole, lossless (spec q) and cheaper so by the estimate above. Its
 * bytes are looked at without being handed out. */
static ckpz_error pack_over_base(planner *pl, const fmt_segment *t, const fmt_segment *m, const quant_spec *q,
                                 int *pack)
{
    *pack = 0;
    if (!m || t->length == FMT_LEN_OPEN || t->length == 0 || t->length > PACK_MAX || q->mode != QM_NONE) return CKPZ_OK;
    const uint8_t *cur;
    size_t len;
    ch_event ev = chunker_look(&pl->ch, (size_t)t->length, &cur, &len);
    if (ev == CH_ERROR) return read_failed(pl);
    if (ev == CH_NOMEM) return ctx_fail(pl->ctx, CKPZ_ERR_NOMEM, "out of memory");
    if (len < t->length) return CKPZ_OK; /* the input ends inside it */
    const ckpz_params *p = pl->p;
    uint64_t blen = base_len(p, m);
    unsigned es = t->dtype == CKPZ_DTYPE_NONE ? 1 : ckpz_dtype_size(t->dtype);
    if (es == 0 || es > 8) es = 1;
    /* sixteenths of a byte: coded alone against the base, and packed (in a group coded
     * against its base image, feature 4, the entry's delta where that is smaller: nothing
     * for the base's bytes) */
    uint64_t alone, packed = (uint64_t)len * PACK_SIXTEENTHS;
    int keep = 0; /* the group's image takes its counterpart */
    if (blen != len || len % es) {
        alone = 16 * ((uint64_t)DELTA_FRAME + len);
    } else if (!memcmp(cur, (const uint8_t *)p->base + m->offset, len)) {
        alone = 16 * (uint64_t)DELTA_COPY;
        if (pl->gbase) packed = 0, keep = 1;
    } else {
        uint64_t d = 2 * delta_bits(cur, (const uint8_t *)p->base + m->offset, len, es);
        alone = 16 * (uint64_t)DELTA_FRAME + d;
        if (pl->gbase && d < packed) packed = d, keep = 1;
    }
    *pack = packed < alone ? 1 + keep : 0;
    return CKPZ_OK;
}

/* Whether the n entries are all tensors of dtype dt. */
static int all_of_dtype(const ctr_entry *e, size_t n, ckpz_dtype dt)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].dtype != dt) return 0;
    return 1;
}

/* Whether the n entries are all tensors of dtype dt, each of whole elements, so that
 * every element of their chunk lines up with the dtype's. */
static int uniform_group(const ctr_entry *e, size_t n, ckpz_dtype dt)
{
    unsigned es = ckpz_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        if (e[i].dtype != dt || dt == CKPZ_DTYPE_NONE || e[i].length % es) return 0;
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

int planner_needs_values(const quant_plan *plan)
{
    return plan->spec.mode == QM_REL || plan->spec.mode == QM_CREL || plan->spec.prune > 0 || plan->rms_cap > 0;
}

void planner_values(quant_plan *plan, ckpz_dtype dt, const uint8_t *all, uint64_t len, const uint8_t *b)
{
    const quant_spec *q = &plan->spec;
    size_t n = (size_t)(len - len % ckpz_dtype_size(dt));
    if (q->mode == QM_REL) {
        double lo = INFINITY, hi = -INFINITY;
        quant_scan(dt, all, n, &lo, &hi);
        plan->abs_bound = hi > lo ? q->bound * (hi - lo) : 0;
    }
    /* a bound relative to the update itself (plan_entry saw to it that there is a base),
     * or, stand-alone (no-base), to the values' own RMS (their change since zero) */
    if (q->mode == QM_CREL) plan->abs_bound = q->bound * quant_change_rms(dt, all, b, n);
    if (q->mode == QM_ABS && plan->rms_cap > 0) {
        double cap = plan->rms_cap * quant_change_rms(dt, all, NULL, n);
        if (cap < plan->abs_bound) plan->spec.bound = plan->abs_bound = cap;
    }
    if (q->prune > 0) plan->prune_thr = quant_prune_threshold(dt, all, b, n, q->prune);
}

/* A first file's weights coded by lr err by at most this x their pointwise-rel bound R_k
 * x their RMS (1/16 of it at the default): a learning rate that does not bound a step
 * (LAMB's and LARS's scale by the weights' norm) cannot erase the weights. */
#define KEYFRAME_RMS_CAP 8.0

/* A change-rel tensor without a base (and not no-base: that one is relative to its own
 * RMS): lossless, or what its spec gives for that case (auto's weights in a keyframe):
 * where the rule (keyframe_lr) or the file (s->optim) states the optimizer's learning
 * rate lr, abs keyframe_steps x lr, each weight within that many optimizer steps; else
 * pointwise-rel keyframe. */
static void keyframe(quant_plan *plan, const fmt_segment *s)
{
    quant_spec *q = &plan->spec;
    double lr = q->keyframe_lr > 0 ? q->keyframe_lr : s->optim ? s->optim->lr : 0;
    int lossy = q->keyframe > 0 && q->keyframe < 1;
    if (lossy && q->keyframe_steps > 0 && lr > 0) {
        q->mode = QM_ABS;
        q->bound = plan->abs_bound = q->keyframe_steps * lr;
        plan->rms_cap = KEYFRAME_RMS_CAP * q->keyframe; /* an lr that is not a step's size */
    } else {
        q->mode = lossy ? QM_PREL : QM_NONE;
        q->bound = q->keyframe;
    }
    q->stochastic = QR_NEAREST;
    q->no_base = 1;
}

/* Completes a lossy entry's plan. Modes that depend on the whole tensor (rel: its value
 * range; pruning: the magnitude below which the chosen share of values lies) read the
 * rest of the entry ahead into pl->whole (its first n bytes are in first), within the
 * memory limit; planner_next then hands out chunks from there. */
static ckpz_error plan_entry(planner *pl, const fmt_segment *s, const uint8_t *first, size_t n)
{
    quant_plan *plan = &pl->plan;
    const quant_spec *q = &plan->spec;
    pl->whole_len = 0;
    quant_plan_shape(plan, s->ndim, s->shape);
    if (q->mode == QM_CREL && !q->no_base && !pl->entry_base) keyframe(plan, s); /* nothing to be relative to */
    if (!planner_needs_values(plan)) return CKPZ_OK;
    const uint8_t *all = first;
    uint64_t len = n;
    if (s->length > n) {
        if (s->length > pl->p->mem_limit)
            return ctx_fail(pl->ctx, CKPZ_ERR_LIMIT,
                            "tensor '%.100s' (%llu bytes) is larger than the memory limit, which %s needs whole",
                            s->name, (unsigned long long)s->length,
                            plan->rms_cap > 0   ? "the cap of a first file's bound by lr"
                            : q->mode == QM_ABS ? "prune"
                                                : quant_mode_name(q->mode));
        uint8_t *buf = NULL;
        if (!pl->skip) {
            if (!(buf = realloc(pl->whole, (size_t)s->length)))
                return ctx_fail(pl->ctx, CKPZ_ERR_NOMEM, "out of memory reading tensor '%.100s'", s->name);
            pl->whole = buf;
            memcpy(buf, first, n);
        }
        while (len < s->length) {
            size_t got;
            const fmt_segment *s2;
            ch_event ev = chunker_next(&pl->ch, buf ? buf + len : NULL, &got, &s2);
            if (ev == CH_NOMEM) return ctx_fail(pl->ctx, CKPZ_ERR_NOMEM, "out of memory");
            if (ev == CH_ERROR) return ctx_fail(pl->ctx, CKPZ_ERR_READ, "read error in tensor '%.100s'", s->name);
            if (ev == CH_DATA && s2)
                return ctx_fail(pl->ctx, CKPZ_ERR_INTERNAL, "tensor '%.100s' ended early", s->name);
            if (ev != CH_DATA || got == 0) break; /* the input ended inside the tensor */
            len += got;
        }
        pl->whole_len = len;
        all = buf;
    }
    const uint8_t *b = pl->entry_base && len <= pl->entry_avail && !q->no_base ? pl->entry_base : NULL;
    if (q->mode == QM_CREL && !b && !q->no_base) { /* the base ends first: no update to be relative to */
        keyframe(plan, s); /* what was read ahead is handed out as it is */
        if (!planner_needs_values(plan)) return CKPZ_OK;
    }
    pl->values_base = b;
    if (!pl->skip) planner_values(plan, s->dtype, all, len, b);
    return CKPZ_OK;
}

/* The chunker's input is the planner's: its skip callback, where given, is used. */
ckpz_error planner_init(planner *pl, ckpz_ctx *ctx, const ckpz_params *p, ckpz_read_fn rd, void *rd_opaque,
                        uint64_t size_hint, ptrdiff_t (*skip_fn)(void *, size_t), plan_keep *keep)
{
    memset(pl, 0, sizeof *pl);
    pl->ctx = ctx;
    pl->p = p;
    pl->skip = skip_fn != NULL;
    pl->rq = (fmt_request){
        .format = p->format, .raw_dtype = p->raw_dtype, .raw_ndim = p->raw_ndim, .raw_shape = p->raw_shape};
    char why[256] = "";
    chunker_init(&pl->ch, &pl->segs, p->chunk_size, rd, rd_opaque);
    pl->ch.skip = skip_fn;
    if (keep) {
        pl->e = keep->e, pl->cap_e = keep->cap_e;
        pl->ch.ahead = keep->ahead, pl->ch.ahead_cap = keep->ahead_cap;
        keep->e = NULL, keep->ahead = NULL;
        pl->rq.spare = &keep->segs; /* the list described takes it (fmt_begin) */
    }
    fmt_status fs = chunker_describe(&pl->ch, &pl->rq, size_hint, why, sizeof why);
    if (fs != FMT_DONE) return fmt_fail(ctx, fs, &pl->rq, why);
    /* Small tensors: an entry a segment, the table sized once (grown one doubling at a
     * time, 4,800 entries were copied and faulted in about twice over) */
    if (pl->segs.n > 1 && grow_array((void **)&pl->e, &pl->cap_e, pl->segs.n, sizeof *pl->e))
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    if (p->policy && !(pl->pol = policy_parse(p->policy, p->max_mae, why, sizeof why)))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "%s", why);
    pl->base_named = -1;
    pl->gbase = p->base != NULL;
    if (p->base && base_index_build(p->base, p->base_size, &pl->rq, &pl->bidx))
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    return CKPZ_OK;
}

void planner_free(planner *pl, plan_keep *keep)
{
    base_index_free(&pl->bidx);
    policy_free(pl->pol);
    free(pl->whole);
    if (keep) { /* the buffers as they are, up to CTR_KEEP_MAX bytes each; keep's own freed */
        free(keep->e);
        free(keep->ahead);
        *keep = (plan_keep){.segs = keep->segs};
        if (pl->cap_e <= CTR_KEEP_MAX / sizeof *pl->e) {
            keep->e = pl->e, keep->cap_e = pl->cap_e;
            pl->e = NULL;
        }
        if (pl->ch.ahead_cap <= CTR_KEEP_MAX) {
            keep->ahead = pl->ch.ahead, keep->ahead_cap = pl->ch.ahead_cap;
            pl->ch.ahead = NULL;
        }
    }
    free(pl->e); /* names and shapes belong to segs */
    chunker_free(&pl->ch);
    fmt_list_recycle(&pl->segs); /* into keep's spare, where planner_init gave one */
    memset(pl, 0, sizeof *pl);
}

ckpz_error planner_end(planner *pl)
{
    char why[256];
    if (pl->segs.format == CKPZ_INPUT_RAW && pl->p->raw_ndim && pl->consumed != fmt_raw_bytes(&pl->rq)) {
        fmt_raw_mismatch(&pl->rq, pl->consumed, why, sizeof why); /* the size was unknown */
        return fmt_fail(pl->ctx, FMT_ERROR, &pl->rq, why);
    }
    return CKPZ_OK;
}

/* Whether any tensor of the input is in the base by name: 1, 0, or 1 while the
 * description is not complete (a piecewise format not read to its end). Opaque bytes
 * (headers, pickles) are coded against the base's only when it is 1: a file none of
 * whose tensors is in its base never needs that base for a few header bytes. */
static int base_named(planner *pl)
{
    const fmt_list *l = &pl->segs;
    while (pl->base_named < 0 && pl->named_scan < l->n && !l->seg[pl->named_scan].resume) {
        const fmt_segment *s = &l->seg[pl->named_scan++];
        if (s->dtype != CKPZ_DTYPE_NONE && s->length != FMT_LEN_OPEN && base_index_match(&pl->bidx, s, s->offset))
            pl->base_named = 1;
    }
    if (pl->base_named < 0 && pl->named_scan == l->n) pl->base_named = 0;
    return pl->base_named != 0;
}

/* The base's segment that s, at `off` in the input, is coded against (NULL: none):
 * opaque bytes and open tails only when some tensor is in the base (base_named). */
static const fmt_segment *base_match(planner *pl, const fmt_segment *s, uint64_t off)
{
    const fmt_segment *m = pl->p->base ? base_index_match(&pl->bidx, s, off) : NULL;
    if (m && (s->dtype == CKPZ_DTYPE_NONE || s->length == FMT_LEN_OPEN) && !base_named(pl)) m = NULL;
    return m;
}

ckpz_error planner_next(planner *pl, plan_chunk *c, uint8_t *buf, int *end)
{
    const ckpz_params *p = pl->p;
    chunker *ch = &pl->ch;
    ckpz_error err;
    const fmt_segment *s = NULL;
    size_t n, head_seg = 0;
    int head_packs = 0; /* the entry this chunk starts is packed rather than coded against the base */
    ch_event ev = CH_DATA;
    uint64_t at = pl->consumed;
    *end = 0;
    if (pl->whole_pos < pl->whole_len) { /* the rest of an entry read ahead */
        uint64_t left = pl->whole_len - pl->whole_pos;
        n = left < p->chunk_size ? (size_t)left : p->chunk_size;
        if (buf && pl->whole) memcpy(buf, pl->whole + pl->whole_pos, n);
        pl->whole_pos += n;
    } else {
        /* a small entry that is packed rather than coded against the base is chosen so
         * before it is read: its bytes are looked at first (pack_over_base) */
        const fmt_segment *t = NULL, *tm;
        if (p->base && (ev = chunker_peek(ch, &t)) == CH_DATA && t &&
            (tm = base_index_match(&pl->bidx, t, ch->consumed)) != NULL) {
            quant_spec q = policy_match(pl->pol, t->name, t->dtype, t->ndim, t->shape, t->optim ? t->optim->beta2 : 0);
            if ((err = pack_over_base(pl, t, tm, &q, &head_packs))) return err;
            head_seg = ch->seg;
        }
        if (ev == CH_DATA) ev = chunker_next(ch, buf, &n, &s);
        if (!s || s != &pl->segs.seg[head_seg]) head_packs = 0;
    }
    if (ev == CH_ERROR) return read_failed(pl);
    if (ev == CH_NOMEM) return ctx_fail(pl->ctx, CKPZ_ERR_NOMEM, "out of memory");
    if (ev == CH_END) {
        *end = 1;
        return CKPZ_OK;
    }
    pl->table_bytes += 2 * sizeof(ctr_chunkrec); /* its record, and its line in the index */
    c->new_entry = s != NULL;
    c->first_entry = (uint32_t)pl->ne;
    c->group = 0;
    c->gathered = 0;
    c->in_off = at;
    size_t group_len = 0; /* while a group is gathered: bytes of its entries before the last */
    if (s) {
        uint64_t off = ch->consumed - n;
        const fmt_segment *m = base_match(pl, s, off);
        const fmt_segment *m_base = m; /* m when the entry ends up in no group after all */
        if (head_packs == 1) m = NULL; /* packed without its counterpart */
        if ((err = add_entry(pl, s, off, m))) return err;
        ctr_entry *e = &pl->e[pl->ne - 1];
        if (s->dtype != CKPZ_DTYPE_NONE) pl->tensors++;
        entry_base_set(pl, m);
        pl->entry_text = s->dtype == CKPZ_DTYPE_NONE && s->text;
        memset(&pl->plan, 0, sizeof pl->plan);
        pl->values_base = NULL;
        pl->plan.spec = policy_match(pl->pol, s->name, s->dtype, s->ndim, s->shape, s->optim ? s->optim->beta2 : 0);
        if (pl->plan.spec.mode != QM_NONE && s->length != FMT_LEN_OPEN) {
            if ((err = plan_entry(pl, s, buf, n))) return err;
            pl->whole_pos = n;
        }
        quant_plan *plan = &pl->plan;
        if (plan->spec.mode != QM_NONE && s->length != FMT_LEN_OPEN) {
            e->flags |= CTR_ENTRY_LOSSY;
            e->lossy = (ctr_lossy){plan->spec.mode,
                                   plan->spec.bits,
                                   plan->spec.sym,
                                   plan->spec.per_row,
                                   plan->group,
                                   plan->spec.bound,
                                   plan->abs_bound,
                                   plan->prune_thr,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0,
                                   0};
        } else {
            plan->spec.mode = QM_NONE;
        }
        /* A small whole entry: the small entries after it join its chunk, each taken
         * whole, until one would not fit; that one, whatever its size, owns the group
         * and goes on in the chunk when it can (doc/format.md "Packed entries"). */
        if (packable(s, n, e, &plan->spec, head_packs == 2)) {
            size_t used = n, one_max = PACK_GROUP_ONE < p->chunk_size ? PACK_GROUP_ONE : p->chunk_size;
            int head_tensor = s->dtype != CKPZ_DTYPE_NONE; /* s moves when the list grows */
            ckpz_dtype one = s->dtype; /* the group's dtype while it has one, else NONE */
            for (;;) {
                const fmt_segment *t;
                size_t got;
                ev = chunker_peek(ch, &t);
                if (ev != CH_DATA || !t || t->length == FMT_LEN_OPEN || t->length == 0) break;
                quant_spec q = policy_match(pl->pol, t->name, t->dtype, t->ndim, t->shape,
                                            t->optim ? t->optim->beta2 : 0);
                if (q.mode != QM_NONE || q.level != plan->spec.level) break;
                const fmt_segment *tm = base_match(pl, t, ch->consumed);
                int packs = 0;
                if (tm && ((err = pack_over_base(pl, t, tm, &q, &packs)) || !packs)) {
                    if (err) return err;
                    break;
                }
                if (t->dtype != one) one = CKPZ_DTYPE_NONE;
                int small = t->length <= PACK_MAX && t->length <= (one ? one_max : PACK_GROUP) - used;
                if (!small && (used > PACK_LEAD || used % ckpz_dtype_size(t->dtype) ||
                               !all_of_dtype(pl->e + c->first_entry, pl->ne - c->first_entry, t->dtype)))
                    break;
                uint64_t toff = ch->consumed;
                ev = chunker_take(ch, buf ? buf + used : NULL, small ? (size_t)t->length : p->chunk_size - used, &got);
                if (ev != CH_DATA || !got) break;
                pl->e[pl->ne - 1].flags |= CTR_ENTRY_PACKED; /* the entry before owns the group no more */
                pl->e[pl->ne - 1].length = used - group_len;
                group_len = used;
                if ((err = add_entry(pl, t, toff, packs == 2 ? tm : NULL))) return err;
                if (t->dtype != CKPZ_DTYPE_NONE) pl->tensors++, pl->tensor_bytes += got;
                used += got;
                c->group = small ? GROUP_SMALL : GROUP_LEADS;
                if (!small) break; /* the owner: its rest comes in the next chunks */
            }
            if (ev == CH_ERROR) return read_failed(pl);
            if (ev == CH_NOMEM) return ctx_fail(pl->ctx, CKPZ_ERR_NOMEM, "out of memory");
            if (c->group) {
                /* the packed entries' bytes were counted as they came; the owner's are
                 * the rest */
                if (head_tensor) pl->tensor_bytes += n;
                pl->e[pl->ne - 1].length = used - group_len;
                n = used;
                /* coded against the group's base image when an entry has a counterpart;
                 * an owner's later chunks (a group leads it) are coded alone */
                for (size_t i = c->first_entry; pl->gbase && i < pl->ne; i++)
                    c->gathered |= (pl->e[i].flags & CTR_ENTRY_BASED) != 0;
                entry_base_set(pl, NULL);
            }
        }
        if (m_base && !m && !c->group) { /* alone in its chunk: coded against the base after all */
            e->flags |= CTR_ENTRY_BASED;
            e->base_offset = m_base->offset;
            entry_base_set(pl, m_base);
        }
    }
    ctr_entry *e = &pl->e[pl->ne - 1];
    c->entry = (uint32_t)(pl->ne - 1);
    c->dtype = c->group == GROUP_SMALL ? group_dtype(pl->e + c->first_entry, pl->ne - c->first_entry)
                                       : (ckpz_dtype)e->dtype;
    c->uniform = c->group == GROUP_SMALL && n >= PACK_MAX &&
                 uniform_group(pl->e + c->first_entry, pl->ne - c->first_entry, c->dtype);
    c->raw_len = n;
    c->entry_dtype = (ckpz_dtype)e->dtype;
    c->text = pl->entry_text && !c->group;
    /* the base may end first (open tails) */
    c->has_base = pl->entry_base && n <= pl->entry_avail;
    c->base_off = c->has_base ? (uint64_t)(pl->entry_base - (const uint8_t *)p->base) : 0;
    if (c->gathered) c->has_base = 1;
    c->lossy = pl->plan.spec.mode != QM_NONE;
    c->plan = pl->plan;
    c->values_base = pl->values_base != NULL;
    c->values_base_off = c->values_base ? (uint64_t)(pl->values_base - (const uint8_t *)p->base) : 0;
    c->elem0 = e->length / ckpz_dtype_size(c->dtype);
    if (n && !c->group) {
        e->length += n;
        if (pl->entry_base) {
            pl->entry_base += n;
            pl->entry_avail -= n < pl->entry_avail ? n : pl->entry_avail;
        }
        if (e->dtype != CKPZ_DTYPE_NONE) pl->tensor_bytes += n;
    }
    pl->consumed += n;
    return CKPZ_OK;
}

/* plan.h */
ckpz_error planner_base(const planner *pl, const plan_chunk *c, uint8_t **image, const uint8_t **base)
{
    uint64_t group;
    *base = NULL;
    if (!c->has_base) return CKPZ_OK;
    if (!c->gathered) {
        *base = (const uint8_t *)pl->p->base + c->base_off;
        return CKPZ_OK;
    }
    if (!*image && !(*image = malloc(pl->p->chunk_size))) return ctx_fail(pl->ctx, CKPZ_ERR_NOMEM, "out of memory");
    if (base_group_image(pl->e + c->first_entry, c->entry - c->first_entry + 1, pl->p->base, pl->p->base_size,
                         c->raw_len, *image, &group))
        return ctx_fail(pl->ctx, CKPZ_ERR_INTERNAL, "a group's base image does not fit its chunk");
    *base = *image;
    return CKPZ_OK;
}
