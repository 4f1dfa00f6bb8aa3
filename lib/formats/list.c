/* list.c — building and finishing segment lists (see formats.h).
 *
 * Readers push segments in ascending offset order. fmt_finish turns that into a list
 * that tiles the input: gaps become opaque segments, adjacent opaque segments are
 * merged, and the list ends with an open-ended segment. It is defensive: a segment
 * that starts before the end of the previous one (a reader bug) is trimmed to opaque
 * bytes or dropped, so the result never covers a byte twice.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "formats.h"

void fmt_why(char *why, size_t whylen, const char *fmt, ...)
{
    if (!why || !whylen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

int fmt_begin(fmt_list *out, const fmt_request *rq, size_t *len, uint64_t total, size_t *need, char *why, size_t whylen)
{
    if (need) *need = 0;
    if (why && whylen) why[0] = '\0';
    if (!out) return -1;
    memset(out, 0, sizeof(*out));
    out->spare = rq ? rq->spare : NULL;
    if (total != CKPZ_SIZE_UNKNOWN && *len > total) *len = (size_t)total;
    return 0;
}

static void seg_clear(fmt_segment *s)
{
    s->name = NULL; /* its bytes are the list's blocks' */
    s->shape = NULL;
    s->ndim = 0;
}

/* A block of names and shapes: one allocation for many tensors, where one each (4,800
 * small tensors' names: a tenth of describing their file) cost a malloc and a free
 * apiece. Blocks double from 16 KiB to 1 MiB, or hold one larger request. */
typedef struct fmt_block {
    struct fmt_block *next;
    size_t used, cap;
    uint64_t bytes[]; /* 8-aligned for shapes */
} fmt_block;

/* n bytes from the list's current block (8-aligned), or NULL out of memory. */
static void *block_take(fmt_list *l, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    fmt_block *b = l->blocks;
    if ((!b || b->cap - b->used < n) && l->spare && l->spare->blocks && l->spare->blocks->cap >= n) {
        fmt_block *sb = l->spare->blocks; /* a kept block, as large as needed */
        l->spare->blocks = sb->next;
        sb->next = b;
        sb->used = 0;
        l->blocks = b = sb;
    }
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? (b->cap < ((size_t)1 << 20) ? 2 * b->cap : b->cap) : (size_t)16 << 10;
        if (cap < n) cap = n;
        if (cap > SIZE_MAX - sizeof(fmt_block)) return NULL;
        fmt_block *nb = malloc(sizeof(fmt_block) + cap);
        if (!nb) return NULL;
        nb->next = b;
        nb->used = 0;
        nb->cap = cap;
        l->blocks = b = nb;
    }
    void *r = (uint8_t *)b->bytes + b->used;
    b->used += n;
    return r;
}

/* A list without a segment array takes its spare's. */
static void take_spare(fmt_list *l)
{
    if (l->seg || !l->spare || !l->spare->seg) return;
    l->seg = l->spare->seg;
    l->cap = l->spare->cap;
    l->spare->seg = NULL;
    l->spare->cap = 0;
}

int fmt_reserve(fmt_list *l, size_t more)
{
    if (!l || more > SIZE_MAX - l->n) return -1;
    take_spare(l);
    return grow_array((void **)&l->seg, &l->cap, l->n + more, sizeof(fmt_segment));
}

int fmt_push(fmt_list *l, ckpz_dtype dtype, const char *name, size_t name_len, uint32_t ndim, const uint64_t *shape,
             uint64_t offset, uint64_t length)
{
    if (fmt_reserve(l, 1)) return -1;
    fmt_segment s;
    memset(&s, 0, sizeof(s));
    s.dtype = dtype;
    s.offset = offset;
    s.length = length;
    if (dtype != CKPZ_DTYPE_NONE) {
        /* A tensor always has a name (possibly empty); its shape, then its name. */
        if (!name) name_len = 0;
        size_t sb = ndim && shape ? (size_t)ndim * sizeof(uint64_t) : 0;
        if (name_len > SIZE_MAX - 8 - sb) return -1;
        uint8_t *blk = block_take(l, sb + name_len + 1);
        if (!blk) return -1;
        if (sb) {
            s.shape = (uint64_t *)(void *)blk;
            memcpy(s.shape, shape, sb);
            s.ndim = ndim;
        }
        s.name = (char *)blk + sb;
        if (name_len) memcpy(s.name, name, name_len);
        s.name[name_len] = '\0';
    }
    l->seg[l->n++] = s;
    return 0;
}

/* Appends s to the array d (capacity checked by the caller), merging opaque runs, but
 * never into d[0..floor): those segments are final (a chunker may be past them). */
static void append(fmt_segment *d, size_t *n, fmt_segment s, size_t floor)
{
    if (s.dtype == CKPZ_DTYPE_NONE && !s.resume && *n > floor) {
        fmt_segment *p = &d[*n - 1];
        if (p->dtype == CKPZ_DTYPE_NONE && p->length != FMT_LEN_OPEN) {
            /* Contiguous by construction. */
            if (s.length == FMT_LEN_OPEN) p->length = FMT_LEN_OPEN;
            else p->length += s.length;
            p->text &= s.text; /* text only while all of it is */
            return;
        }
    }
    d[(*n)++] = s;
}

static fmt_segment opaque(uint64_t offset, uint64_t length)
{
    fmt_segment s;
    memset(&s, 0, sizeof(s));
    s.dtype = CKPZ_DTYPE_NONE;
    s.offset = offset;
    s.length = length;
    return s;
}

int fmt_push_resume(fmt_list *l, uint64_t offset)
{
    if (fmt_push(l, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, offset, FMT_LEN_OPEN)) return -1;
    l->seg[l->n - 1].resume = 1;
    return 0;
}

/* Normalises segments [first, n), which describe the input from byte `start` on; the
 * ones before `first` are already final. In place while no gap needs a segment of its
 * own (the output then stays behind the segment being read: a reader's tensors back to
 * back, as in most safetensors files), where a new array of twice the segments took
 * page faults and a tenth of describing 5,174 small tensors; into a new array, sized for
 * the worst case (a gap before every segment plus the open tail), from the first gap on. */
static int finish_from(fmt_list *l, size_t first, uint64_t start)
{
    if (l->n > (((size_t)-1) / sizeof(fmt_segment) - 1) / 2) return -1;
    fmt_segment *d = l->seg;
    size_t n = first, cap = l->cap, i;
    uint64_t cur = start;
    int open = 0;

    for (i = first; i < l->n; i++) {
        fmt_segment s = l->seg[i];
        if (open) { /* nothing may follow an open segment */
            seg_clear(&s);
            continue;
        }
        if (s.dtype == CKPZ_DTYPE_NONE) seg_clear(&s);
        int is_open = s.length == FMT_LEN_OPEN || s.length > UINT64_MAX - s.offset;
        uint64_t end = is_open ? UINT64_MAX : s.offset + s.length;
        if (d == l->seg && s.offset > cur && n + 2 > i + 1) {
            cap = first + 2 * (l->n - first) + 1;
            d = malloc(cap * sizeof(*d));
            if (!d) return -1;
            memcpy(d, l->seg, n * sizeof(*d));
        }
        if (s.offset < cur) {
            /* Overlaps what is already described: keep only the new bytes, opaque. */
            seg_clear(&s);
            if (!is_open && end <= cur) continue;
            s = opaque(cur, is_open ? FMT_LEN_OPEN : end - cur);
        } else if (s.offset > cur) {
            append(d, &n, opaque(cur, s.offset - cur), first);
        }
        if (is_open) {
            s.length = FMT_LEN_OPEN;
            open = 1;
        } else {
            cur = s.offset + s.length;
        }
        if (s.dtype == CKPZ_DTYPE_NONE && s.length == 0) continue; /* empty opaque run: nothing to describe */
        append(d, &n, s, first);
    }
    if (!open && d == l->seg && n + 1 > cap) {
        if (grow_array((void **)&l->seg, &l->cap, n + 1, sizeof(fmt_segment))) return -1;
        d = l->seg;
        cap = l->cap;
    }
    if (!open) append(d, &n, opaque(cur, FMT_LEN_OPEN), first);

    if (d != l->seg) free(l->seg);
    l->seg = d;
    l->n = n;
    l->cap = cap;
    return 0;
}

int fmt_finish(fmt_list *l) { return l ? finish_from(l, 0, 0) : -1; }

fmt_status fmt_all_opaque(fmt_list *out, ckpz_input_format f, char *why, size_t whylen, const char *reason)
{
    fmt_list_free(out);
    out->format = f;
    if (fmt_finish(out)) {
        fmt_list_free(out);
        return FMT_NOMEM;
    }
    fmt_why(why, whylen, "%s", reason);
    return FMT_DONE;
}

fmt_status fmt_resume(fmt_list *l, const uint8_t *p, size_t len, int eof, size_t *need)
{
    if (!l || !l->n || !l->seg[l->n - 1].resume) return FMT_ERROR;
    size_t first = l->n - 1;
    uint64_t at = l->seg[first].offset;
    l->n = first; /* the resume segment owns no memory */
    fmt_status s = FMT_ERROR;
    if (l->reader && l->reader->resume && !(eof && len == 0)) s = l->reader->resume(l->state, l, at, p, len, eof, need);
    /* A reader must make progress: a resume point at or before this one would loop. */
    if (s == FMT_DONE && l->n > first && l->seg[l->n - 1].resume && l->seg[l->n - 1].offset <= at)
        l->seg[l->n - 1].resume = 0;
    if (s != FMT_DONE) {
        while (l->n > first) seg_clear(&l->seg[--l->n]);
        if (s == FMT_NOMEM) {
            (void)fmt_push_resume(l, at); /* the callers give up; the list stays whole if it can */
            return FMT_NOMEM;
        }
        if (s == FMT_NEED_MORE && *need > len && *need <= FMT_PROBE_MAX && !eof)
            return fmt_push_resume(l, at) ? FMT_NOMEM : FMT_NEED_MORE;
        /* The reader gave up: the rest of the input is opaque. */
        if (fmt_push(l, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, at, FMT_LEN_OPEN)) return FMT_NOMEM;
        return FMT_DONE;
    }
    return finish_from(l, first, at) ? FMT_NOMEM : FMT_DONE;
}

void fmt_list_drop(fmt_list *l, size_t n)
{
    while (l->n > n) seg_clear(&l->seg[--l->n]);
}

static void blocks_free(fmt_block *b)
{
    for (fmt_block *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
}

void fmt_list_free(fmt_list *l)
{
    if (!l) return;
    free(l->seg);
    blocks_free(l->blocks);
    if (l->state && l->reader && l->reader->free_state) l->reader->free_state(l->state);
    memset(l, 0, sizeof(*l));
}

/* What a spare keeps: up to SPARE_MAX bytes of segments and as much of blocks (a list of
 * 100,000 tensors' would keep ~10 MB; the rest is freed). */
#define SPARE_MAX ((size_t)16 << 20)

void fmt_list_recycle(fmt_list *l)
{
    if (!l) return;
    fmt_spare *k = l->spare;
    if (k) {
        if (l->seg && l->cap > k->cap && l->cap <= SPARE_MAX / sizeof(fmt_segment)) { /* the larger array stays */
            free(k->seg);
            k->seg = l->seg, k->cap = l->cap;
            l->seg = NULL;
        }
        size_t kept = 0;
        for (fmt_block *b = k->blocks; b; b = b->next) kept += b->cap;
        while (l->blocks && kept + l->blocks->cap <= SPARE_MAX) { /* the blocks, the spare's after them */
            fmt_block *b = l->blocks;
            l->blocks = b->next;
            kept += b->cap;
            b->next = k->blocks;
            k->blocks = b;
        }
    }
    fmt_list_free(l);
}

void fmt_spare_free(fmt_spare *k)
{
    if (!k) return;
    free(k->seg);
    blocks_free(k->blocks);
    memset(k, 0, sizeof *k);
}
