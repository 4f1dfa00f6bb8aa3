/* match.c — see match.h. */
#include "match.h"

#include <stdlib.h>
#include <string.h>

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static const char *seg_name(const fmt_segment *s) { return s->name ? s->name : ""; }

typedef struct mem_src {
    const uint8_t *p;
    size_t n;
} mem_src;

/* The whole base is at hand: every fetch gives all of it from `at` on. */
static fmt_status mem_fetch(void *opaque, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof)
{
    const mem_src *m = opaque;
    (void)want;
    size_t from = at < m->n ? (size_t)at : m->n;
    *p = m->p ? m->p + from : NULL;
    *len = m->n - from;
    *eof = 1;
    return FMT_DONE;
}

int base_index_build(const uint8_t *base, size_t n, const fmt_request *rq, base_index *bi)
{
    memset(bi, 0, sizeof *bi);
    mem_src m = {base, n};
    fmt_source src = {mem_fetch, &m, n};
    fmt_status st = fmt_drive_describe(&src, n, rq, &bi->segs, NULL, 0);
    if (st == FMT_ERROR && rq->format != CKPZ_INPUT_AUTO)
        st = fmt_drive_describe(&src, n, &(fmt_request){.format = CKPZ_INPUT_AUTO}, &bi->segs, NULL, 0);
    if (st == FMT_DONE) st = fmt_drive_all(&src, n, &bi->segs, NULL, 0);
    if (st != FMT_DONE) return -1; /* the whole input is at hand: only allocation fails */
    size_t tensors = 0;
    for (size_t i = 0; i < bi->segs.n; i++) tensors += bi->segs.seg[i].dtype != CKPZ_DTYPE_NONE;
    bi->nslots = 16;
    while (bi->nslots < 2 * tensors) bi->nslots *= 2;
    if (!(bi->slots = calloc(bi->nslots, sizeof *bi->slots))) return -1;
    for (size_t i = 0; i < bi->segs.n && i < UINT32_MAX - 1; i++) {
        const fmt_segment *s = &bi->segs.seg[i];
        if (s->dtype == CKPZ_DTYPE_NONE || s->length == FMT_LEN_OPEN) continue;
        size_t k = (size_t)name_hash(seg_name(s)) & (bi->nslots - 1);
        for (; bi->slots[k]; k = (k + 1) & (bi->nslots - 1))
            if (!strcmp(seg_name(&bi->segs.seg[bi->slots[k] - 1]), seg_name(s))) break;
        if (!bi->slots[k]) bi->slots[k] = (uint32_t)(i + 1); /* the first of equal names wins */
    }
    return 0;
}

void base_index_free(base_index *bi)
{
    fmt_list_free(&bi->segs);
    free(bi->slots);
    memset(bi, 0, sizeof *bi);
}

const fmt_segment *base_index_match(const base_index *bi, const fmt_segment *s, uint64_t offset)
{
    if (!bi->slots) return NULL;
    if (s->dtype == CKPZ_DTYPE_NONE || s->length == FMT_LEN_OPEN) {
        /* opaque bytes, and the open tail: the base's segment at the same offset, of the
         * same length (an open tail with the base's open tail) */
        size_t lo = 0, hi = bi->segs.n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (bi->segs.seg[mid].offset < offset) lo = mid + 1;
            else hi = mid;
        }
        const fmt_segment *b = lo < bi->segs.n ? &bi->segs.seg[lo] : NULL;
        return b && b->offset == offset && b->dtype == s->dtype && b->length == s->length ? b : NULL;
    }
    for (size_t k = (size_t)name_hash(seg_name(s)) & (bi->nslots - 1); bi->slots[k]; k = (k + 1) & (bi->nslots - 1)) {
        const fmt_segment *b = &bi->segs.seg[bi->slots[k] - 1];
        if (strcmp(seg_name(b), seg_name(s))) continue;
        if (b->dtype == s->dtype && b->ndim == s->ndim && b->length == s->length &&
            (!s->ndim || !memcmp(b->shape, s->shape, 8 * (size_t)s->ndim)))
            return b;
        return NULL;
    }
    return NULL;
}
