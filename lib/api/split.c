/* split.c — one compression split over processes (ckpz_experimental.h "one compression,
 * many processes"; libckpz_mpi is its user). Every process plans the whole input without
 * reading the chunks' bytes (plan.c with a skip callback: only the bytes the format
 * readers ask for are read), codes the chunks it is given with the coder the serial
 * encoder uses (encode.c), and, once every chunk's small fixed-size result is known to
 * it, runs the serial encoder's writer over all chunks in order with the bytes of other
 * processes' chunks counted but not written. What the file holds at each offset is
 * therefore decided by the code that writes serial files, and the parts the processes
 * write side by side add up to the file serial ckpz writes.
 *
 * The one decision that reads values, a lossy entry's bound relative to its range and
 * its pruning threshold, is taken by each process that codes a chunk of the entry, from
 * the whole entry (read once per process); the values travel in the results to the
 * index. A base's CRC-32C is taken over the whole base (the serial encoder can put it
 * together from its chunks, which give the same value). */
#include <stdlib.h>
#include <string.h>

#include "codec/encode.h"
#include "codec/workmem.h"
#include "common/grow.h"
#include "common/pipeline.h"
#include "io/io.h"
#include "split.h"

_Static_assert(sizeof(chunk_result) <= CKPZ_SPLIT_RECORD_SIZE, "a record holds a chunk_result");

struct ckpz_split {
    ckpz_ctx *ctx;       /* the planning call's, for messages while planning */
    ckpz_params p;
    ckpz_source src;
    uint64_t pos;        /* planning: where the sequential reads are */
    planner pl;
    plan_chunk *c;
    size_t nc, cap_c;
    int lossy;
    cjob *jobs;          /* the coder's chunk buffers, kept from call to call (fresh pages
                            fault in slowly) */
    size_t njobs;
    ckpz_progress_fn progress; /* the source's: called as chunks are coded */
    void *progress_opaque;
    writer w;            /* a layout in progress (ckpz_split_lay): chunks [0, laid) are laid out */
    int laying;
    uint64_t laid;
};

static ptrdiff_t plan_read(void *opaque, void *buf, size_t n)
{
    ckpz_split *s = opaque;
    uint64_t left = s->src.size - s->pos;
    if (n > left) n = (size_t)left;
    if (n && s->src.pread(s->src.opaque, buf, n, s->pos) != 0) return -1;
    s->pos += n;
    return (ptrdiff_t)n;
}

static ptrdiff_t plan_skip(void *opaque, size_t n)
{
    ckpz_split *s = opaque;
    uint64_t left = s->src.size - s->pos;
    if (n > left) n = (size_t)left;
    s->pos += n;
    return (ptrdiff_t)n;
}

void ckpz_split_free(ckpz_split *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->njobs; i++) free(s->jobs[i].raw), free(s->jobs[i].out), free(s->jobs[i].image);
    free(s->jobs);
    writer_free(&s->w);
    planner_free(&s->pl, NULL);
    free(s->c);
    free(s);
}

ckpz_error ckpz_split_plan(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, ckpz_split **out)
{
    ctx_clear(ctx);
    *out = NULL;
    ckpz_split *s = calloc(1, sizeof *s);
    if (!s) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    ckpz_sink none;
    ckpz_error err = io_resolve(ctx, params, src, NULL, &s->p, &s->src, &none);
    if (err) goto fail;
    if (!s->src.pread || s->src.size == CKPZ_SIZE_UNKNOWN) {
        err = ctx_fail(ctx, CKPZ_ERR_PARAM, "a split compression reads its input at offsets: pread and size needed");
        goto fail;
    }
    const char *missing = ent_choice_missing(s->p.codec);
    if (missing) {
        err = ctx_fail(ctx, CKPZ_ERR_PARAM, "codec %s: %s", ckpz_codec_name(s->p.codec), missing);
        goto fail;
    }
    s->p.patch = NULL; /* the base's CRC is taken whole */
    s->progress = s->p.progress, s->progress_opaque = s->p.progress_opaque;
    s->p.progress = NULL; /* neither planning nor laying out reports */
    if ((err = planner_init(&s->pl, ctx, &s->p, plan_read, s, s->src.size, plan_skip, NULL))) goto fail;
    s->lossy = policy_lossy(s->pl.pol);
    for (;;) {
        int end;
        if (grow_array((void **)&s->c, &s->cap_c, s->nc + 1, sizeof *s->c)) {
            err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
            goto fail;
        }
        if ((err = planner_next(&s->pl, &s->c[s->nc], NULL, &end))) goto fail;
        if (end) break;
        s->nc++;
    }
    if ((err = planner_end(&s->pl))) goto fail;
    *out = s;
    return CKPZ_OK;
fail:
    ckpz_split_free(s);
    return err;
}

uint64_t ckpz_split_chunks(const ckpz_split *s) { return s->nc; }

void ckpz_split_chunk(const ckpz_split *s, uint64_t i, uint64_t *offset, uint64_t *length)
{
    *offset = i < s->nc ? s->c[i].in_off : s->pl.consumed;
    *length = i < s->nc ? s->c[i].raw_len : 0;
}

const char *ckpz_split_chunk_name(const ckpz_split *s, uint64_t i)
{
    return i < s->nc ? s->pl.e[s->c[i].entry].name : "";
}

/* Chunk d's lossy plan with its values (planner_values), from its whole entry read
 * through the source; *have caches the last entry's. */
static ckpz_error complete_plan(ckpz_ctx *ctx, ckpz_split *s, plan_chunk *d, uint32_t *have, quant_plan *cache)
{
    if (!d->lossy || !planner_needs_values(&d->plan)) return CKPZ_OK;
    if (*have == d->entry + 1) {
        d->plan = *cache;
        return CKPZ_OK;
    }
    const ctr_entry *e = &s->pl.e[d->entry];
    if (e->length > s->p.mem_limit)
        return ctx_fail(ctx, CKPZ_ERR_LIMIT,
                        "tensor '%.100s' (%llu bytes) is larger than the memory limit, which %s needs whole", e->name,
                        (unsigned long long)e->length, quant_mode_name(d->plan.spec.mode));
    uint8_t *all = malloc(e->length ? (size_t)e->length : 1);
    if (!all) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading tensor '%.100s'", e->name);
    if (e->length && s->src.pread(s->src.opaque, all, (size_t)e->length, e->offset) != 0) {
        free(all);
        return ctx_fail(ctx, CKPZ_ERR_READ, "read error in tensor '%.100s'", e->name);
    }
    const uint8_t *b = d->values_base ? (const uint8_t *)s->p.base + d->values_base_off : NULL;
    planner_values(&d->plan, (ckpz_dtype)e->dtype, all, e->length, b);
    free(all);
    *cache = d->plan;
    *have = d->entry + 1;
    return CKPZ_OK;
}

uint64_t ckpz_split_bound(const ckpz_split *s, uint64_t first, uint64_t n)
{
    uint64_t room = 0;
    for (uint64_t k = first; k < s->nc && k < first + n; k++) room += workmem_out_bound(s->c[k].raw_len);
    return room;
}

ckpz_error ckpz_split_code_into(ckpz_ctx *ctx, ckpz_split *s, uint64_t first, uint64_t n, void *records, void *dst,
                                size_t cap, size_t *coded_len)
{
    ctx_clear(ctx);
    *coded_len = 0;
    if (first > s->nc || n > s->nc - first)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "chunks %llu..%llu of %zu", (unsigned long long)first,
                        (unsigned long long)(first + n), s->nc);
    uint64_t need = ckpz_split_bound(s, first, n);
    if (cap < need)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "chunks %llu..%llu: %zu bytes of room, %llu needed",
                        (unsigned long long)first, (unsigned long long)(first + n), cap, (unsigned long long)need);
    const ckpz_params *p = &s->p;
    int workers = p->threads - 1;
    if ((uint64_t)workers >= n) workers = n ? (int)(n - 1) : 0;
    size_t depth = pipeline_depth(workers + 1), used = 0;
    struct workmem *wm = workmem_take(ctx);
    workers_state ws = {p->level, NULL, 0, p->codec};
    cjob *j;
    pipeline *pline = NULL;
    ckpz_mem outm = {0};
    outm.data = dst;
    outm.capacity = cap;
    ckpz_error err = CKPZ_OK;
    uint32_t have = 0;
    quant_plan cache;
    size_t fbound = workmem_out_bound(p->chunk_size);
    uint64_t done = 0, coded_raw = 0, all_raw = 0;
    for (uint64_t k = first; k < first + n; k++) all_raw += s->c[k].raw_len;
    if (!wm || workmem_scratch(wm, workers + 1, p->chunk_size, s->lossy ? CHUNK_SCRATCH_ENCODE_LOSSY : 0)) goto nomem;
    if (s->njobs < depth) {
        cjob *more = realloc(s->jobs, depth * sizeof *more);
        if (!more) goto nomem;
        s->jobs = more;
        for (; s->njobs < depth; s->njobs++) {
            j = &s->jobs[s->njobs];
            memset(j, 0, sizeof *j);
            if (!(j->raw = malloc(p->chunk_size)) || !(j->out = malloc(fbound))) {
                free(j->raw), free(j->out);
                goto nomem;
            }
        }
    }
    ws.scratch = wm->scratch;
    if (!(pline = pipeline_create(workers, depth, encode_job, &ws))) goto nomem;
    for (uint64_t k = first; k <= first + n; k++) {
        if (used < depth && k < first + n) {
            j = &s->jobs[used++];
        } else {
            /* the oldest job (all of them after the last chunk) is done: its frame and record */
            while ((j = pipeline_retire(pline))) {
                if (j->d.raw_len && !j->r.copy && ckpz_mem_write(&outm, j->out, (size_t)j->r.out_len) != 0) goto nomem;
                memcpy((uint8_t *)records + done++ * CKPZ_SPLIT_RECORD_SIZE, &j->r, sizeof j->r);
                coded_raw += j->d.raw_len;
                if (s->progress && s->progress(s->progress_opaque, coded_raw, all_raw)) {
                    err = ctx_fail(ctx, CKPZ_ERR_ABORTED, "aborted");
                    goto fail;
                }
                if (k < first + n) break;
            }
            if (k == first + n) break;
        }
        j->d = s->c[k];
        memset(&j->r, 0, sizeof j->r);
        if ((err = complete_plan(ctx, s, &j->d, &have, &cache))) goto fail;
        if (j->d.raw_len && s->src.pread(s->src.opaque, j->raw, j->d.raw_len, j->d.in_off) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_READ, "read error in chunk %llu (tensor '%.100s')", (unsigned long long)k,
                           s->pl.e[j->d.entry].name);
            goto fail;
        }
        if ((err = planner_base(&s->pl, &j->d, &j->image, &j->base))) goto fail;
        pipeline_submit(pline, j);
    }
    *coded_len = outm.size;
    goto done;
nomem:
    err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
fail:
done:
    pipeline_destroy(pline);
    workmem_keep(ctx, wm);
    return err;
}

/* The coded frames of a process's share (hundreds of MB written once) go into
 * workmem_room: in 4 KiB pages their faults cost more than coding them (a VM here:
 * 353 MB, 1 rank, 1.1 s user + 1.7 s sys against serial ckpz's 0.25 + 0.2 s). Room for
 * every frame is taken once: growing it would copy the frames and touch fresh pages
 * again. */
ckpz_error split_code(ckpz_ctx *ctx, ckpz_split *s, uint64_t first, uint64_t n, void *records, void **coded,
                      size_t *coded_len)
{
    *coded = NULL;
    *coded_len = 0;
    uint64_t room = ckpz_split_bound(s, first, n);
    void *dst = room <= SIZE_MAX ? workmem_room((size_t)room) : NULL;
    if (!dst) {
        ctx_clear(ctx);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    ckpz_error err = ckpz_split_code_into(ctx, s, first, n, records, dst, (size_t)room, coded_len);
    if (err) free(dst);
    else *coded = dst;
    return err;
}

/* The writer's sink while it lays out a region: bytes inside the coded frames become
 * pieces that point at them; the frames it makes itself (entries, copies) are kept in
 * `frames`, their pieces first as offsets (the buffer moves as it grows). */
typedef struct collect {
    const uint8_t *coded;
    size_t coded_len;
    ckpz_mem frames;
    ckpz_piece *p;  /* ptr: an offset into frames when `in_frames` */
    uint8_t *in_frames;
    size_t n, cap, cap_f;
} collect;

#define PIECE_MAX (1u << 30)

static int collect_write(void *opaque, const void *buf, size_t n)
{
    collect *c = opaque;
    const uint8_t *b = buf;
    int coded = b >= c->coded && b < c->coded + c->coded_len;
    uintptr_t at = coded ? (uintptr_t)b : (uintptr_t)c->frames.size;
    if (!coded && ckpz_mem_write(&c->frames, buf, n) != 0) return -1;
    if (c->n && c->in_frames[c->n - 1] == !coded && c->p[c->n - 1].len + n <= PIECE_MAX &&
        (uintptr_t)c->p[c->n - 1].ptr + c->p[c->n - 1].len == at) {
        c->p[c->n - 1].len += n; /* the next bytes of the same buffer */
        return 0;
    }
    if (grow_array((void **)&c->p, &c->cap, c->n + 1, sizeof *c->p) ||
        grow_array((void **)&c->in_frames, &c->cap_f, c->n + 1, 1))
        return -1;
    c->p[c->n] = (ckpz_piece){(const void *)at, n};
    c->in_frames[c->n++] = !coded;
    return 0;
}

/* The layout of chunks [s->laid, upto), continuing the one in progress or starting one:
 * the serial encoder's writer run over them in order, muted for chunks not in [first,
 * first + n), whose bytes become out's pieces (and out's head when it starts, its tail
 * when it reaches the last chunk). The writer keeps what crosses calls (a run of copies
 * not yet written, the seek table, the entries' chunk counts). */
static ckpz_error lay(ckpz_ctx *ctx, ckpz_split *s, const void *records, uint64_t upto, uint64_t first, uint64_t n,
                      const void *coded, size_t coded_len, ckpz_split_out *out)
{
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    uint64_t from = s->laying ? s->laid : 0;
    if (upto > s->nc || upto < from || (n && (first < from || first > upto || n > upto - first))) {
        writer_free(&s->w);
        s->laying = 0; /* a failed call ends the layout, whatever failed */
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "chunks %llu..%llu laid out to %llu, after %llu",
                        (unsigned long long)first, (unsigned long long)(first + n), (unsigned long long)upto,
                        (unsigned long long)from);
    }
    ckpz_mem head = {0}, tail = {0};
    collect region = {coded, coded_len, {0}, NULL, NULL, 0, 0, 0};
    head.grow = tail.grow = region.frames.grow = 1;
    writer *w = &s->w;
    ckpz_error err = CKPZ_OK;
    if (!s->laying) {
        for (size_t i = 0; i < s->pl.ne; i++) s->pl.e[i].nchunks = 0; /* the writer counts them */
        writer_free(w);
        writer_init(w, ctx, &s->p, &s->pl, s->src.size, ckpz_mem_write, &head, 0);
        s->laying = 1;
        s->laid = 0;
        err = writer_start(w, s->lossy);
    }
    w->ctx = ctx;
    size_t at = 0; /* in coded */
    uint64_t region_end = w->pos;
    out->region_offset = w->pos;
    for (uint64_t k = from; k < upto && !err; k++) {
        chunk_result r;
        memcpy(&r, (const uint8_t *)records + k * CKPZ_SPLIT_RECORD_SIZE, sizeof r);
        const plan_chunk *d = &s->c[k];
        int mine = n && k >= first && k < first + n;
        const uint8_t *frame = NULL;
        if (r.out_len > workmem_out_bound(s->p.chunk_size)) {
            err = ctx_fail(ctx, CKPZ_ERR_PARAM, "chunk %llu's record is not one of this plan's", (unsigned long long)k);
            break;
        }
        if (k == first) out->region_offset = w->pos;
        if (mine && d->raw_len && !r.copy) {
            if (r.out_len > coded_len - at) {
                err = ctx_fail(ctx, CKPZ_ERR_PARAM, "chunk %llu's frame is not among the coded bytes given",
                               (unsigned long long)k);
                break;
            }
            frame = (const uint8_t *)coded + at;
            at += (size_t)r.out_len;
        }
        w->mute = !mine;
        w->wr = mine ? collect_write : ckpz_mem_write;
        w->opaque = mine ? (void *)&region : (void *)&head;
        err = writer_emit(w, d, &r, frame);
        if (mine) region_end = w->pos;
    }
    if (!n) out->region_offset = region_end = w->pos;
    if (!err && upto == s->nc) {
        w->mute = 0;
        w->wr = ckpz_mem_write;
        w->opaque = &tail;
        out->tail_offset = w->pos;
        err = writer_end(w);
    }
    if (!err) {
        for (size_t i = 0; i < region.n; i++)
            if (region.in_frames[i]) region.p[i].ptr = (const uint8_t *)region.frames.data + (uintptr_t)region.p[i].ptr;
        out->head = head.data, out->head_len = head.size;
        out->pieces = region.p, out->npieces = region.n;
        out->frames = region.frames.data;
        out->region_len = (size_t)(region_end - out->region_offset);
        out->tail = tail.data, out->tail_len = tail.size;
        out->file_size = w->pos;
        if (upto == s->nc) {
            out->content_checksum = w->content_crc;
            out->stats = (ckpz_stats){sizeof out->stats, w->original, w->pos,           s->pl.tensor_bytes,
                                      s->pl.tensors,     w->nc,       s->pl.segs.format};
        }
        s->laid = upto;
    } else {
        free(head.data), free(region.frames.data), free(region.p), free(tail.data);
    }
    free(region.in_frames);
    if (err || upto == s->nc) { /* done: the next call starts again */
        writer_free(w);
        s->laying = 0;
    }
    return err;
}

/* The pointers out holds must lie within its struct_size: ckpz_split_out_free frees them. */
#define SPLIT_OUT_MIN offsetof(ckpz_split_out, stats)

ckpz_error ckpz_split_lay(ckpz_ctx *ctx, ckpz_split *s, const void *records, uint64_t upto, uint64_t first, uint64_t n,
                          const void *coded, size_t coded_len, ckpz_split_out *out)
{
    ctx_clear(ctx);
    if (OUT_CHECK(ctx, out, "ckpz_split_out")) return CKPZ_ERR_PARAM;
    if (out->struct_size < SPLIT_OUT_MIN)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_split_out.struct_size %zu does not hold its pointers (%zu)",
                        out->struct_size, (size_t)SPLIT_OUT_MIN);
    ckpz_split_out mine;
    ckpz_error err = lay(ctx, s, records, upto, first, n, coded, coded_len, &mine);
    OUT_GIVE(out, &mine);
    return err;
}

ckpz_error split_write(ckpz_ctx *ctx, ckpz_split *s, const void *records, uint64_t first, uint64_t n, const void *coded,
                       size_t coded_len, ckpz_split_out *out)
{
    if (first > s->nc || n > s->nc - first) {
        ctx_clear(ctx);
        ckpz_split_out none = {.struct_size = sizeof none};
        if (out->struct_size >= sizeof(size_t)) OUT_GIVE(out, &none);
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "chunks %llu..%llu of %zu", (unsigned long long)first,
                        (unsigned long long)(first + n), s->nc);
    }
    s->laying = 0; /* a layout in progress is abandoned */
    return ckpz_split_lay(ctx, s, records, s->nc, first, n, coded, coded_len, out);
}

void ckpz_split_out_free(ckpz_split_out *o)
{
    if (!o || o->struct_size < SPLIT_OUT_MIN) return;
    free(o->head), free(o->pieces), free(o->frames), free(o->tail);
    ckpz_split_out none = {.struct_size = sizeof none};
    OUT_GIVE(o, &none);
}
