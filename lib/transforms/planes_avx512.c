/* planes_avx512.c — the AVX-512 plane split and merge (planes.c calls them when
 * cpu_level() allows AVX-512): VBMI byte permutes gather a plane's bytes of 64 elements
 * with one or two vpermt2b each, about three times the SSE2 loops' speed, writing the
 * same planes. 2- and 4-byte elements only; planes.c does the rest. */
#include "simd.h"

#ifdef XF_HAVE_X86
#include "split512.h"

static inline T512 __m512i rotl16_512(__m512i v, int rot)
{
    return rot ? _mm512_or_si512(_mm512_slli_epi16(v, 1), _mm512_srli_epi16(v, 15)) : v;
}

static inline T512 __m512i rotr16_512(__m512i v, int rot)
{
    return rot ? _mm512_or_si512(_mm512_srli_epi16(v, 1), _mm512_slli_epi16(v, 15)) : v;
}

/* 64 elements per step; returns how many elements were done. */
T512 static size_t split2_avx512(const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    const __m512i ih = split_idx2(1), il = split_idx2(0);
    size_t e = 0;
    for (; e + 64 <= elems; e += 64) {
        split_prefetch(src + 2 * e, 2);
        __m512i a = rotl16_512(_mm512_loadu_si512((const void *)(src + 2 * e)), rot);
        __m512i b = rotl16_512(_mm512_loadu_si512((const void *)(src + 2 * e + 64)), rot);
        split2_step(a, b, ih, il, pl[0] + e, pl[1] + e);
    }
    return e;
}

T512 static size_t merge2_avx512(const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    /* Output byte 2j is plane 1's byte j, 2j + 1 plane 0's (index 64 + j). */
    uint8_t t0[64], t1[64];
    for (int j = 0; j < 64; j++) {
        t0[j] = (uint8_t)((j & 1 ? 64 : 0) + j / 2);
        t1[j] = (uint8_t)(t0[j] + 32);
    }
    const __m512i i0 = _mm512_loadu_si512((const void *)t0), i1 = _mm512_loadu_si512((const void *)t1);
    size_t e = 0;
    for (; e + 64 <= elems; e += 64) {
        __m512i hi = _mm512_loadu_si512((const void *)(pl[0] + e));
        __m512i lo = _mm512_loadu_si512((const void *)(pl[1] + e));
        _mm512_storeu_si512((void *)(dst + 2 * e), rotr16_512(_mm512_permutex2var_epi8(lo, i0, hi), rot));
        _mm512_storeu_si512((void *)(dst + 2 * e + 64), rotr16_512(_mm512_permutex2var_epi8(lo, i1, hi), rot));
    }
    return e;
}

T512 static size_t split4_avx512(const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    const __m512i i32 = split_idx4(3), i10 = split_idx4(1);
    size_t e = 0;
    for (; e + 64 <= elems; e += 64) {
        const uint8_t *s = src + 4 * e;
        split_prefetch(s, 4);
        __m512i a = _mm512_loadu_si512((const void *)s), b = _mm512_loadu_si512((const void *)(s + 64));
        __m512i c = _mm512_loadu_si512((const void *)(s + 128)), d = _mm512_loadu_si512((const void *)(s + 192));
        if (rot) {
            a = _mm512_rol_epi32(a, 1);
            b = _mm512_rol_epi32(b, 1);
            c = _mm512_rol_epi32(c, 1);
            d = _mm512_rol_epi32(d, 1);
        }
        split4_step(a, b, c, d, i32, i10, pl[0] + e, pl[1] + e, pl[2] + e, pl[3] + e);
    }
    return e;
}

T512 static size_t merge4_avx512(const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    /* Two planes interleaved as 16-bit pairs first (0|1 and 2|3, 32 elements each),
     * then the pairs into elements: byte 4j+m of the 16 elements comes from byte
     * 2j + (m & 1) of one pair vector (m >= 2) or the other. */
    uint8_t ta[64], tb[64], tc[64];
    for (int j = 0; j < 64; j++) {
        ta[j] = (uint8_t)((j & 1 ? 0 : 64) + j / 2);    /* byte 2j: plane 1, 2j+1: plane 0 */
        tb[j] = (uint8_t)(ta[j] + 32);
        int el = j / 4, m = j % 4;                       /* element 16q + el, byte m */
        tc[j] = (uint8_t)((m >= 2 ? 0 : 64) + 2 * el + (m & 1));
    }
    const __m512i ia = _mm512_loadu_si512((const void *)ta), ib = _mm512_loadu_si512((const void *)tb);
    const __m512i ic = _mm512_loadu_si512((const void *)tc);
    const __m512i step = _mm512_set1_epi8(32);
    size_t e = 0;
    for (; e + 64 <= elems; e += 64) {
        __m512i p0 = _mm512_loadu_si512((const void *)(pl[0] + e));
        __m512i p1 = _mm512_loadu_si512((const void *)(pl[1] + e));
        __m512i p2 = _mm512_loadu_si512((const void *)(pl[2] + e));
        __m512i p3 = _mm512_loadu_si512((const void *)(pl[3] + e));
        /* hi16: (p0 << 8 | p1) per element, lo16: (p2 << 8 | p3); first/second 32 elements */
        __m512i h0 = _mm512_permutex2var_epi8(p0, ia, p1), h1 = _mm512_permutex2var_epi8(p0, ib, p1);
        __m512i l0 = _mm512_permutex2var_epi8(p2, ia, p3), l1 = _mm512_permutex2var_epi8(p2, ib, p3);
        uint8_t *d = dst + 4 * e;
        __m512i ic1 = _mm512_add_epi8(ic, step);
        __m512i v0 = _mm512_permutex2var_epi8(h0, ic, l0), v1 = _mm512_permutex2var_epi8(h0, ic1, l0);
        __m512i v2 = _mm512_permutex2var_epi8(h1, ic, l1), v3 = _mm512_permutex2var_epi8(h1, ic1, l1);
        if (rot) {
            v0 = _mm512_ror_epi32(v0, 1);
            v1 = _mm512_ror_epi32(v1, 1);
            v2 = _mm512_ror_epi32(v2, 1);
            v3 = _mm512_ror_epi32(v3, 1);
        }
        _mm512_storeu_si512((void *)d, v0);
        _mm512_storeu_si512((void *)(d + 64), v1);
        _mm512_storeu_si512((void *)(d + 128), v2);
        _mm512_storeu_si512((void *)(d + 192), v3);
    }
    return e;
}

size_t xf_split_avx512(unsigned esize, const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    return esize == 2 ? split2_avx512(src, elems, pl, rot) : split4_avx512(src, elems, pl, rot);
}

size_t xf_merge_avx512(unsigned esize, const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    return esize == 2 ? merge2_avx512(pl, elems, dst, rot) : merge4_avx512(pl, elems, dst, rot);
}
#endif
