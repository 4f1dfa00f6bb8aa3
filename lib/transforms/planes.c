/* planes.c — byte-plane split and merge (see planes.h). These passes touch every byte
 * of every chunk twice, so the common float widths (2 and 4 bytes) have SSE2 loops —
 * baseline on x86-64, no run-time dispatch — that process 16 elements per step, and
 * AVX2 and AVX-512 loops (planes_avx2.c, planes_avx512.c, chosen at run time) of 32 and
 * 64; the portable loops handle other widths, other hosts and the last few elements. */
#include "planes.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/cpu.h"
#include "common/dtype.h"
#include "entropy/entropy.h"
#include "simd.h"

void xf_choose(ckpz_dtype dtype, uint8_t *xf, uint8_t *esize)
{
    const dtype_info *d = dtype_get(dtype);
    *xf = d->layout == DT_LAYOUT_FLOAT ? XF_FLOAT : d->layout == DT_LAYOUT_INT ? XF_INT : XF_NONE;
    *esize = *xf == XF_NONE ? 1 : (uint8_t)d->size;
}

unsigned xf_plane_sizes(uint8_t xf, uint8_t esize, size_t n, size_t *sizes)
{
    if (xf == XF_NONE) {
        if (esize != 1) return 0;
        sizes[0] = n;
        return 1;
    }
    if ((xf != XF_FLOAT && xf != XF_INT) || (esize != 2 && esize != 4 && esize != 8)) return 0;
    size_t elems = n / esize, tail = n % esize;
    for (unsigned i = 0; i < esize; i++) sizes[i] = elems;
    if (!tail) return esize;
    sizes[esize] = tail;
    return esize + 1u;
}

int xf_plane_hint(ckpz_dtype dtype, uint8_t esize, unsigned i)
{
    static const int hint[] = {[DT_ROLE_OPAQUE] = ENT_HINT_OPAQUE,
                               [DT_ROLE_EXPONENT] = ENT_HINT_EXPONENT,
                               [DT_ROLE_MANTISSA] = ENT_HINT_MANTISSA,
                               [DT_ROLE_INT] = ENT_HINT_INT};
    const dtype_info *d = dtype_get(dtype);
    if (i >= esize) return ENT_HINT_OPAQUE; /* tail bytes */
    if (i < d->exp_planes) return ENT_HINT_EXPONENT | (esize == 2 ? ENT_HINT_SAMPLE : 0);
    return hint[d->role];
}

/* Portable loops over `count` elements; q[b] / p[b] point at each plane's first byte
 * for these elements. */
#define SPLIT_LOOP(T, W, ROT)                                                         \
    for (size_t e = 0; e < count; e++) {                                              \
        T v;                                                                          \
        memcpy(&v, src + e * W, W);                                                   \
        if (ROT) v = (T)((v << 1) | (v >> (8 * W - 1)));                              \
        for (unsigned b = 0; b < W; b++) q[b][e] = (uint8_t)(v >> (8 * (W - 1 - b))); \
    }

#define MERGE_LOOP(T, W, ROT)                                                       \
    for (size_t e = 0; e < count; e++) {                                            \
        T v = 0;                                                                    \
        for (unsigned b = 0; b < W; b++) v |= (T)((T)p[b][e] << (8 * (W - 1 - b))); \
        if (ROT) v = (T)((v >> 1) | (v << (8 * W - 1)));                            \
        memcpy(dst + e * W, &v, W);                                                 \
    }

static void split_scalar(unsigned esize, int rot, const uint8_t *src, size_t count, uint8_t *const *q)
{
    if (esize == 2) {
        if (rot) {
            SPLIT_LOOP(uint16_t, 2, 1)
        } else {
            SPLIT_LOOP(uint16_t, 2, 0)
        }
    } else if (esize == 4) {
        if (rot) {
            SPLIT_LOOP(uint32_t, 4, 1)
        } else {
            SPLIT_LOOP(uint32_t, 4, 0)
        }
    } else {
        if (rot) {
            SPLIT_LOOP(uint64_t, 8, 1)
        } else {
            SPLIT_LOOP(uint64_t, 8, 0)
        }
    }
}

static void merge_scalar(unsigned esize, int rot, const uint8_t *const *p, size_t count, uint8_t *dst)
{
    if (esize == 2) {
        if (rot) {
            MERGE_LOOP(uint16_t, 2, 1)
        } else {
            MERGE_LOOP(uint16_t, 2, 0)
        }
    } else if (esize == 4) {
        if (rot) {
            MERGE_LOOP(uint32_t, 4, 1)
        } else {
            MERGE_LOOP(uint32_t, 4, 0)
        }
    } else {
        if (rot) {
            MERGE_LOOP(uint64_t, 8, 1)
        } else {
            MERGE_LOOP(uint64_t, 8, 0)
        }
    }
}

#if defined(__SSE2__)
static inline __m128i rotl16(__m128i v, int rot)
{
    return rot ? _mm_or_si128(_mm_slli_epi16(v, 1), _mm_srli_epi16(v, 15)) : v;
}
static inline __m128i rotr16(__m128i v, int rot)
{
    return rot ? _mm_or_si128(_mm_srli_epi16(v, 1), _mm_slli_epi16(v, 15)) : v;
}
static inline __m128i rotl32(__m128i v, int rot)
{
    return rot ? _mm_or_si128(_mm_slli_epi32(v, 1), _mm_srli_epi32(v, 31)) : v;
}
static inline __m128i rotr32(__m128i v, int rot)
{
    return rot ? _mm_or_si128(_mm_srli_epi32(v, 1), _mm_slli_epi32(v, 31)) : v;
}

/* 16 elements per step; returns how many elements were done. */
static size_t split2_sse2(const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    const __m128i lo = _mm_set1_epi16(0xff);
    size_t e = 0;
    for (; e + 16 <= elems; e += 16) {
        __m128i a = rotl16(_mm_loadu_si128((const __m128i *)(src + 2 * e)), rot);
        __m128i b = rotl16(_mm_loadu_si128((const __m128i *)(src + 2 * e + 16)), rot);
        _mm_storeu_si128((__m128i *)(pl[0] + e), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
        _mm_storeu_si128((__m128i *)(pl[1] + e), _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
    }
    return e;
}

static size_t merge2_sse2(const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    size_t e = 0;
    for (; e + 16 <= elems; e += 16) {
        __m128i hi = _mm_loadu_si128((const __m128i *)(pl[0] + e));
        __m128i lo = _mm_loadu_si128((const __m128i *)(pl[1] + e));
        _mm_storeu_si128((__m128i *)(dst + 2 * e), rotr16(_mm_unpacklo_epi8(lo, hi), rot));
        _mm_storeu_si128((__m128i *)(dst + 2 * e + 16), rotr16(_mm_unpackhi_epi8(lo, hi), rot));
    }
    return e;
}

/* Byte k (0 = least significant) of 16 32-bit elements held in four vectors. */
static inline __m128i byte_of4(__m128i a, __m128i b, __m128i c, __m128i d, int k)
{
    const __m128i m = _mm_set1_epi32(0xff);
    a = _mm_and_si128(_mm_srli_epi32(a, 8 * k), m);
    b = _mm_and_si128(_mm_srli_epi32(b, 8 * k), m);
    c = _mm_and_si128(_mm_srli_epi32(c, 8 * k), m);
    d = _mm_and_si128(_mm_srli_epi32(d, 8 * k), m);
    return _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
}

static size_t split4_sse2(const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    size_t e = 0;
    for (; e + 16 <= elems; e += 16) {
        const uint8_t *s = src + 4 * e;
        __m128i a = rotl32(_mm_loadu_si128((const __m128i *)s), rot);
        __m128i b = rotl32(_mm_loadu_si128((const __m128i *)(s + 16)), rot);
        __m128i c = rotl32(_mm_loadu_si128((const __m128i *)(s + 32)), rot);
        __m128i d = rotl32(_mm_loadu_si128((const __m128i *)(s + 48)), rot);
        for (int k = 0; k < 4; k++) _mm_storeu_si128((__m128i *)(pl[3 - k] + e), byte_of4(a, b, c, d, k));
    }
    return e;
}

static size_t merge4_sse2(const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    size_t e = 0;
    for (; e + 16 <= elems; e += 16) {
        __m128i p0 = _mm_loadu_si128((const __m128i *)(pl[0] + e));
        __m128i p1 = _mm_loadu_si128((const __m128i *)(pl[1] + e));
        __m128i p2 = _mm_loadu_si128((const __m128i *)(pl[2] + e));
        __m128i p3 = _mm_loadu_si128((const __m128i *)(pl[3] + e));
        __m128i l0 = _mm_unpacklo_epi8(p3, p2), l1 = _mm_unpackhi_epi8(p3, p2); /* low halves */
        __m128i h0 = _mm_unpacklo_epi8(p1, p0), h1 = _mm_unpackhi_epi8(p1, p0); /* high halves */
        uint8_t *d = dst + 4 * e;
        _mm_storeu_si128((__m128i *)d, rotr32(_mm_unpacklo_epi16(l0, h0), rot));
        _mm_storeu_si128((__m128i *)(d + 16), rotr32(_mm_unpackhi_epi16(l0, h0), rot));
        _mm_storeu_si128((__m128i *)(d + 32), rotr32(_mm_unpacklo_epi16(l1, h1), rot));
        _mm_storeu_si128((__m128i *)(d + 48), rotr32(_mm_unpackhi_epi16(l1, h1), rot));
    }
    return e;
}
#endif

void xf_split(uint8_t xf, uint8_t esize, const uint8_t *src, size_t n, uint8_t *const *plane)
{
    if (xf == XF_NONE) {
        memcpy(plane[0], src, n);
        return;
    }
    size_t elems = n / esize, done = 0;
    int rot = xf == XF_FLOAT;
#ifdef XF_HAVE_X86
    if ((esize == 2 || esize == 4) && cpu_level() >= CPU_AVX2) {
        done = cpu_level() >= CPU_AVX512 ? xf_split_avx512(esize, src, elems, plane, rot)
                                         : xf_split_avx2(esize, src, elems, plane, rot);
        if (done) { /* the SSE2 loop below takes what is left */
            uint8_t *q[5];
            for (unsigned b = 0; b < esize; b++) q[b] = plane[b] + done;
            q[esize] = n % esize ? plane[esize] : NULL; /* the tail plane */
            xf_split(xf, esize, src + done * esize, n - done * esize, q);
            return;
        }
    }
#endif
#if defined(__SSE2__)
    if (esize == 2) done = split2_sse2(src, elems, plane, rot);
    if (esize == 4) done = split4_sse2(src, elems, plane, rot);
#endif
    uint8_t *q[8];
    for (unsigned b = 0; b < esize; b++) q[b] = plane[b] + done;
    split_scalar(esize, rot, src + done * esize, elems - done, q);
    if (n % esize) memcpy(plane[esize], src + elems * esize, n % esize);
}

uint8_t *xf_bounce(uint8_t *room) { return room + ((64 - ((uintptr_t)room & 63)) & 63); }

void xf_merge(uint8_t xf, uint8_t esize, const uint8_t *const *plane, size_t n, uint8_t *dst)
{
    if (xf == XF_NONE) {
        memcpy(dst, plane[0], n);
        return;
    }
    size_t elems = n / esize, done = 0;
    int rot = xf == XF_FLOAT;
#ifdef XF_HAVE_X86
    if ((esize == 2 || esize == 4) && cpu_level() >= CPU_AVX2) {
        done = cpu_level() >= CPU_AVX512 ? xf_merge_avx512(esize, plane, elems, dst, rot)
                                         : xf_merge_avx2(esize, plane, elems, dst, rot);
        if (done) { /* the SSE2 loop below takes what is left */
            const uint8_t *p[5];
            for (unsigned b = 0; b < esize; b++) p[b] = plane[b] + done;
            p[esize] = n % esize ? plane[esize] : NULL; /* the tail plane */
            xf_merge(xf, esize, p, n - done * esize, dst + done * esize);
            return;
        }
    }
#endif
#if defined(__SSE2__)
    if (esize == 2) done = merge2_sse2(plane, elems, dst, rot);
    if (esize == 4) done = merge4_sse2(plane, elems, dst, rot);
#endif
    const uint8_t *p[8];
    for (unsigned b = 0; b < esize; b++) p[b] = plane[b] + done;
    merge_scalar(esize, rot, p, elems - done, dst + done * esize);
    if (n % esize) memcpy(dst + elems * esize, plane[esize], n % esize);
}
