/* fuzz_formats.h — what the format harnesses (fuzz_safetensors, fuzz_npy, fuzz_npz,
 * fuzz_detect) check about a segment list, and the library's own driver
 * (lib/formats/drive.c) run over the input the way the compressor runs it:
 *   - fz_probe: describing from the start: a prefix of `want` bytes, then exactly the
 *     prefix the reader asks for (FMT_NEED_MORE), end of input only once a fetch came
 *     back short; every prefix is an exact-size copy, so a read past it is an ASan error;
 *   - fz_resume_all: at each resume segment, the bytes from there on, in windows that
 *     grow to what the reader asks for, until the list ends without one.
 * The contract checked (formats.h): a list tiles the input from 0 with no gap or
 * overlap and ends with exactly one open segment (a resume segment only last); a
 * tensor has a valid dtype, a name, and a length equal to its shape's element count
 * times the element size; FMT_NEED_MORE asks for more than it had, at most
 * FMT_PROBE_MAX, never at end of input; a failure leaves a message; detection (AUTO)
 * and fmt_resume fail only when out of memory.
 */
#ifndef CKPZ_FUZZ_FORMATS_H
#define CKPZ_FUZZ_FORMATS_H

#include "formats/formats.h"
#include "fuzz_util.h"

/* A reader's describe, from the table. */
#define FZ_DESCRIBE(id) (fmt_reader_get(id)->describe)

/* Checks l->seg[from..n): they tile the input from byte `at` on. in_bounds: tensors
 * must also lie inside an input of `total` bytes (readers that check offsets against
 * the file size: safetensors, npy). */
static inline void fz_check_segs(const fmt_list *l, size_t from, uint64_t at, uint64_t total, int in_bounds,
                                 const char *who)
{
    FZ_CHECK(l->n > from, "%s: no segment from byte %llu on", who, (unsigned long long)at);
    FZ_CHECK(l->seg, "%s: segments without storage", who);
    uint64_t cur = at;
    for (size_t i = from; i < l->n; i++) {
        const fmt_segment *s = &l->seg[i];
        int last = i + 1 == l->n, open = s->length == FMT_LEN_OPEN;
        FZ_CHECK(s->offset == cur, "%s: segment %zu starts at %llu, the one before ends at %llu", who, i,
                 (unsigned long long)s->offset, (unsigned long long)cur);
        FZ_CHECK(open == last, "%s: segment %zu of %zu is %s", who, i, l->n, open ? "open" : "closed but last");
        FZ_CHECK(open || s->length <= UINT64_MAX - s->offset, "%s: segment %zu wraps around", who, i);
        FZ_CHECK(!s->resume || (last && open && s->dtype == CKPZ_DTYPE_NONE), "%s: misplaced resume segment %zu", who,
                 i);
        if (s->dtype == CKPZ_DTYPE_NONE) {
            FZ_CHECK(!s->name && !s->shape && !s->ndim, "%s: opaque segment %zu has a name or shape", who, i);
        } else {
            FZ_CHECK((unsigned)s->dtype < CKPZ_DTYPE_COUNT_, "%s: segment %zu: dtype %d", who, i, (int)s->dtype);
            FZ_CHECK(s->name, "%s: tensor %zu without a name", who, i);
            FZ_CHECK(s->ndim <= 64 && (s->ndim == 0 || s->shape), "%s: tensor %zu: ndim %u", who, i, s->ndim);
            if (open) {
                /* only a raw dump of unknown size is an open tensor */
                FZ_CHECK(total == CKPZ_SIZE_UNKNOWN && s->ndim == 0, "%s: open tensor %zu ('%s')", who, i, s->name);
            } else {
                uint64_t n = ckpz_dtype_size(s->dtype);
                int ovf = 0, zero = 0;
                for (uint32_t d = 0; d < s->ndim; d++) {
                    if (!s->shape[d]) zero = 1;
                    else if (n > UINT64_MAX / s->shape[d]) ovf = 1;
                    else n *= s->shape[d];
                }
                if (zero) n = 0, ovf = 0;
                FZ_CHECK(!ovf && n == s->length, "%s: tensor %zu ('%s'): %llu bytes for its shape, length %llu", who, i,
                         s->name, ovf ? 0ull : (unsigned long long)n, (unsigned long long)s->length);
                if (in_bounds && total != CKPZ_SIZE_UNKNOWN)
                    FZ_CHECK(s->offset + s->length <= total, "%s: tensor %zu ('%s') ends past the input (%llu)", who, i,
                             s->name, (unsigned long long)total);
            }
        }
        if (!open) cur = s->offset + s->length;
    }
}

/* 1 when two lists say the same. */
static inline int fz_same_list(const fmt_list *a, const fmt_list *b)
{
    if (a->format != b->format || a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const fmt_segment *x = &a->seg[i], *y = &b->seg[i];
        if (x->dtype != y->dtype || x->offset != y->offset || x->length != y->length || x->resume != y->resume ||
            x->ndim != y->ndim || (!x->name) != (!y->name) || (x->name && strcmp(x->name, y->name)) ||
            (x->ndim && memcmp(x->shape, y->shape, 8 * (size_t)x->ndim)))
            return 0;
    }
    return 1;
}

/* A fmt_source over data[0..size) for the driver (lib/formats/drive.c): every fetch
 * is an exact-size copy of min(want, what is left) bytes (a read past it is an ASan
 * error), with end of input only once a fetch comes back short, as a stream shows it.
 * It also checks what the driver asks: from the describe, always byte 0; while a
 * resume is under way, the list still ends with that resume segment. */
typedef struct fz_src {
    const uint8_t *data;
    size_t size;
    uint8_t *copy;   /* the last fetch's bytes */
    const fmt_list *l; /* resume: the list being resumed, else NULL */
    size_t first;    /* resume: where its resume segment is */
    size_t calls;
    const char *who;
} fz_src;

static inline fmt_status fz_fetch(void *opaque, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof)
{
    fz_src *s = opaque;
    FZ_CHECK(++s->calls <= s->size + 3, "%s: the reader keeps asking for more", s->who);
    if (!s->l) FZ_CHECK(at == 0, "%s: describe fetches at %llu", s->who, (unsigned long long)at);
    else
        FZ_CHECK(s->l->n == s->first + 1 && s->l->seg[s->first].resume && s->l->seg[s->first].offset == at,
                 "%s: fmt_resume asked for more but changed the list", s->who);
    size_t avail = at < s->size ? s->size - (size_t)at : 0;
    size_t n = want < avail ? want : avail;
    free(s->copy);
    s->copy = fz_copy(s->data + (at < s->size ? at : s->size), n);
    *p = s->copy;
    *len = n;
    *eof = want > avail;
    return FMT_DONE;
}

/* chunker.c's describe over data[0..size), through the driver: a prefix of `want`
 * bytes, then exactly what the reader asks for. requested: the format (a reader's own
 * id to test that reader). hint_known: the caller knows the input size (else
 * CKPZ_SIZE_UNKNOWN until a fetch comes back short). error_ok: FMT_ERROR is allowed
 * (a forced format that does not match); it must leave a message. Returns the status,
 * *out set on FMT_DONE. */
static inline fmt_status fz_probe(ckpz_input_format requested, ckpz_dtype raw, const uint8_t *data, size_t size,
                                  size_t want, int hint_known, int error_ok, fmt_list *out, const char *who)
{
    fz_src s = {data, size, NULL, NULL, 0, 0, who};
    fmt_source src = {fz_fetch, &s, hint_known ? size : CKPZ_SIZE_UNKNOWN};
    char why[256] = "";
    fmt_request rq = {.format = requested, .raw_dtype = raw};
    fmt_status st = fmt_drive_describe(&src, want, &rq, out, why, sizeof why);
    free(s.copy);
    FZ_CHECK(st != FMT_PROTOCOL, "%s: %s", who, why);
    FZ_CHECK(st == FMT_DONE || st == FMT_ERROR, "%s: status %d", who, (int)st);
    if (st == FMT_ERROR) {
        FZ_CHECK(error_ok, "%s: FMT_ERROR (%s) where only running out of memory may fail", who, why);
        FZ_CHECK(why[0], "%s: FMT_ERROR without a message", who);
    }
    return st;
}

/* chunker.c's resume: while the list ends with a resume segment, the driver hands
 * fmt_resume the input from there on, want0 bytes first, then what it asks for. Checks
 * each stretch it describes and returns the number of resume segments it resolved. */
static inline size_t fz_resume_all(fmt_list *l, const uint8_t *data, size_t size, size_t want0, int in_bounds,
                                   const char *who)
{
    size_t calls = 0;
    uint64_t prev = 0;
    int have_prev = 0;
    while (l->n && l->seg[l->n - 1].resume) {
        size_t first = l->n - 1;
        uint64_t at = l->seg[first].offset;
        FZ_CHECK(!have_prev || at > prev, "%s: resume at %llu after one at %llu", who, (unsigned long long)at,
                 (unsigned long long)prev);
        prev = at, have_prev = 1;
        fz_src s = {data, size, NULL, l, first, 0, who};
        fmt_source src = {fz_fetch, &s, size};
        char why[256] = "";
        fmt_status st = fmt_drive_resume(&src, want0, l, why, sizeof why);
        free(s.copy);
        calls++;
        FZ_CHECK(st != FMT_PROTOCOL, "%s: %s", who, why);
        FZ_CHECK(st == FMT_DONE, "%s: fmt_resume failed at %llu (only running out of memory may)", who,
                 (unsigned long long)at);
        fz_check_segs(l, first, at, size, in_bounds, who);
    }
    return calls;
}

#endif
