/* fuzz_formats.h — what the format harnesses (fuzz_safetensors, fuzz_npy, fuzz_npz,
 * fuzz_detect) check about a segment list, and the two drivers that feed a reader the
 * way the library does:
 *   - fz_probe: lib/compress.c's probe: a prefix of `want` bytes, then exactly the
 *     prefix the reader asks for (FMT_NEED_MORE), end of input only once a read came
 *     back short; every prefix is an exact-size copy, so a read past it is an ASan error;
 *   - fz_resume_all: lib/chunker.c at each resume segment: the bytes from there on, in
 *     windows that grow to what the reader asks for, until the list ends without one.
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

typedef fmt_status (*fz_reader_fn)(const uint8_t *p, size_t len, uint64_t total, fmt_list *out, size_t *need,
                                   char *why, size_t whylen);

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
        FZ_CHECK(!s->resume || (last && open && s->dtype == CKPZ_DTYPE_NONE), "%s: misplaced resume segment %zu",
                 who, i);
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
                FZ_CHECK(!ovf && n == s->length, "%s: tensor %zu ('%s'): %llu bytes for its shape, length %llu", who,
                         i, s->name, ovf ? 0ull : (unsigned long long)n, (unsigned long long)s->length);
                if (in_bounds && total != CKPZ_SIZE_UNKNOWN)
                    FZ_CHECK(s->offset + s->length <= total, "%s: tensor %zu ('%s') ends past the input (%llu)", who,
                             i, s->name, (unsigned long long)total);
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

/* compress.c's probe over data[0..size): the reader rd, or fmt_describe(requested,
 * raw) when rd is NULL. hint_known: the caller knows the input size (else
 * CKPZ_SIZE_UNKNOWN until a read comes back short). error_ok: FMT_ERROR is allowed (a
 * forced format that does not match); it must leave a message. Returns the status,
 * *out set on FMT_DONE. */
static inline fmt_status fz_probe(fz_reader_fn rd, ckpz_input_format requested, ckpz_dtype raw, const uint8_t *data,
                                  size_t size, size_t want, int hint_known, int error_ok, fmt_list *out,
                                  const char *who)
{
    for (size_t round = 0;; round++) {
        FZ_CHECK(round <= size + 2, "%s: the reader keeps asking for more", who);
        size_t have = want < size ? want : size;
        int eof = want > size;
        uint64_t total = eof ? have : hint_known ? size : CKPZ_SIZE_UNKNOWN;
        uint8_t *buf = fz_copy(data, have);
        size_t need = 0;
        char why[256] = "";
        fmt_status s = rd ? rd(buf, have, total, out, &need, why, sizeof why)
                          : fmt_describe(buf, have, total, requested, raw, out, &need, why, sizeof why);
        free(buf);
        if (s == FMT_DONE) return s;
        if (s == FMT_ERROR) {
            FZ_CHECK(error_ok, "%s: FMT_ERROR (%s) where only running out of memory may fail", who, why);
            FZ_CHECK(why[0], "%s: FMT_ERROR without a message", who);
            return s;
        }
        FZ_CHECK(s == FMT_NEED_MORE, "%s: status %d", who, (int)s);
        FZ_CHECK(!eof, "%s: asks for %zu bytes at end of input (%zu bytes)", who, need, have);
        FZ_CHECK(need > have && need <= FMT_PROBE_MAX, "%s: asks for %zu bytes with %zu at hand", who, need, have);
        want = need;
    }
}

/* chunker.c's resume: while the list ends with a resume segment, hand fmt_resume the
 * input from there on, in windows of want0 bytes growing to what it asks for. Checks
 * each stretch it describes and returns the number of resume calls. */
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
        size_t want = want0;
        for (size_t round = 0;; round++) {
            FZ_CHECK(round <= size + 2 && calls <= 4 * size + 8, "%s: fmt_resume keeps asking", who);
            size_t avail = at < size ? size - (size_t)at : 0;
            size_t len = want < avail ? want : avail;
            int eof = want > avail;
            uint8_t *buf = fz_copy(data + (at < size ? at : size), len);
            size_t need = 0;
            fmt_status s = fmt_resume(l, buf, len, eof, &need);
            free(buf);
            calls++;
            FZ_CHECK(s != FMT_ERROR, "%s: fmt_resume failed at %llu (only running out of memory may)", who,
                     (unsigned long long)at);
            if (s == FMT_DONE) break;
            FZ_CHECK(s == FMT_NEED_MORE && !eof && need > len && need <= FMT_PROBE_MAX,
                     "%s: fmt_resume at %llu: status %d, need %zu with %zu (eof %d)", who, (unsigned long long)at,
                     (int)s, need, len, eof);
            FZ_CHECK(l->n == first + 1 && l->seg[first].resume && l->seg[first].offset == at,
                     "%s: fmt_resume asked for more but changed the list", who);
            want = need;
        }
        fz_check_segs(l, first, at, size, in_bounds, who);
    }
    return calls;
}

#endif
