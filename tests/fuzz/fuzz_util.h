/* fuzz_util.h — small helpers shared by the per-parser harnesses (fuzz_*.c).
 *
 * Every harness checks properties, not only "no crash": fz_die() prints what property
 * broke and aborts, which libFuzzer (and replay.c under ctest) reports as a crash.
 * fz_copy() gives a parser an exact-size heap copy of the bytes it may read, so that
 * ASan sees any read past them (libFuzzer's own buffer is exact too; the copies matter
 * where a harness hands a parser a prefix or a slice of the input).
 */
#ifndef CKPZ_FUZZ_UTIL_H
#define CKPZ_FUZZ_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif
#ifdef FZ_ASAN
#include <sanitizer/asan_interface.h>
#define FZ_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define FZ_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define FZ_POISON(p, n) ((void)(p), (void)(n))
#define FZ_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline __attribute__((noreturn, format(printf, 1, 2))) void fz_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: property violated: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

#define FZ_CHECK(cond, ...)               \
    do {                                  \
        if (!(cond)) fz_die(__VA_ARGS__); \
    } while (0)

/* An exact-size heap copy of p[0..n) (one byte allocated for n == 0); aborts when out of
 * memory, which with small inputs only a leak or a runaway size can cause. */
static inline uint8_t *fz_copy(const void *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    if (!c) fz_die("out of memory copying %zu bytes", n);
    if (n) memcpy(c, p, n);
    else c[0] = 0;
    return c;
}

/* A buffer kept between inputs that hands out n bytes at a time: the last n bytes of
 * its allocation, so that ASan reports a write or read past them exactly as past an
 * exact-size allocation, with the bytes before them poisoned (to ASan's 8-byte
 * granules). The hot harnesses use it instead of a fresh malloc per call: fresh memory
 * costs a page fault per 4 KiB touched, which is most of an execution's time for
 * planes of tens of KiB. The bytes are not cleared. */
typedef struct {
    uint8_t *p;
    size_t cap;
} fz_buf;

static inline uint8_t *fz_take(fz_buf *b, size_t n)
{
    if (n > b->cap || !b->p) {
        if (b->p) FZ_UNPOISON(b->p, b->cap);
        free(b->p);
        size_t cap = b->cap * 2 > n ? b->cap * 2 : n ? n : 64;
        if (!(b->p = malloc(cap))) fz_die("out of memory (%zu bytes)", cap);
        b->cap = cap;
    }
    FZ_UNPOISON(b->p, b->cap);
    FZ_POISON(b->p, b->cap - n);
    return b->p + (b->cap - n);
}

/* fz_take, then a copy of p[0..n). */
static inline uint8_t *fz_take_copy(fz_buf *b, const void *p, size_t n)
{
    uint8_t *d = fz_take(b, n);
    if (n) memcpy(d, p, n);
    return d;
}

/* Little-endian field of n <= 8 bytes. */
static inline uint64_t fz_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* Fills b[0..n) with a byte chosen by seed (prefills that differ between two decodes,
 * so that a byte the decoder did not write shows as a difference). */
static inline void fz_fill(uint8_t *b, size_t n, uint32_t seed) { memset(b, (uint8_t)(0xa5u + 0x3bu * seed), n); }

#endif
