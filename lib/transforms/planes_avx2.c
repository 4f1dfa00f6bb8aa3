/* planes_avx2.c — the AVX2 plane split and merge, for CPUs with AVX2 but not AVX-512
 * (planes.c calls them when cpu_level() is CPU_AVX2): 32 elements a step, twice the SSE2
 * loops' width, writing the same planes (the split's step is split256.h's, which the
 * prediction fused with it shares). AVX2's packs, unpacks and byte shuffles work within
 * each 128-bit lane, so every loop ends with one cross-lane permute that puts the lanes'
 * halves back in element order. 2- and 4-byte elements only; planes.c does the rest. */
#include "simd.h"

#ifdef XF_HAVE_X86
#include "split256.h"

AI256 __m256i rotl16_256(__m256i v, int rot)
{
    return rot ? _mm256_or_si256(_mm256_slli_epi16(v, 1), _mm256_srli_epi16(v, 15)) : v;
}

AI256 __m256i rotr16_256(__m256i v, int rot)
{
    return rot ? _mm256_or_si256(_mm256_srli_epi16(v, 1), _mm256_slli_epi16(v, 15)) : v;
}

AI256 __m256i rotl32_256(__m256i v, int rot)
{
    return rot ? _mm256_or_si256(_mm256_slli_epi32(v, 1), _mm256_srli_epi32(v, 31)) : v;
}

AI256 __m256i rotr32_256(__m256i v, int rot)
{
    return rot ? _mm256_or_si256(_mm256_srli_epi32(v, 1), _mm256_slli_epi32(v, 31)) : v;
}

T256 static size_t split2_avx2(const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    size_t e = 0;
    for (; e + 32 <= elems; e += 32) {
        __m256i p[2];
        split2_vec256(rotl16_256(ld256(src + 2 * e), rot), rotl16_256(ld256(src + 2 * e + 32), rot), p);
        st256(pl[0] + e, p[0]);
        st256(pl[1] + e, p[1]);
    }
    return e;
}

/* The lane-wise unpacks give elements 0-7 | 16-23 and 8-15 | 24-31; the two 128-bit
 * permutes pair the lanes back up. */
T256 static size_t merge2_avx2(const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    size_t e = 0;
    for (; e + 32 <= elems; e += 32) {
        __m256i hi = ld256(pl[0] + e), lo = ld256(pl[1] + e);
        __m256i a = _mm256_unpacklo_epi8(lo, hi), b = _mm256_unpackhi_epi8(lo, hi);
        st256(dst + 2 * e, rotr16_256(_mm256_permute2x128_si256(a, b, 0x20), rot));
        st256(dst + 2 * e + 32, rotr16_256(_mm256_permute2x128_si256(a, b, 0x31), rot));
    }
    return e;
}

T256 static size_t split4_avx2(const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    size_t e = 0;
    for (; e + 32 <= elems; e += 32) {
        const uint8_t *s = src + 4 * e;
        __m256i p[4];
        split4_vec256(rotl32_256(ld256(s), rot), rotl32_256(ld256(s + 32), rot), rotl32_256(ld256(s + 64), rot),
                      rotl32_256(ld256(s + 96), rot), p);
        for (int k = 0; k < 4; k++) st256(pl[k] + e, p[k]);
    }
    return e;
}

/* As the SSE2 loop: planes 3|2 and 1|0 interleaved into 16-bit halves, then the halves
 * into elements, which the lane-wise unpacks leave as 0-3 | 16-19, 4-7 | 20-23, 8-11 |
 * 24-27 and 12-15 | 28-31; the 128-bit permutes pair the lanes back up. */
T256 static size_t merge4_avx2(const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    size_t e = 0;
    for (; e + 32 <= elems; e += 32) {
        __m256i p0 = ld256(pl[0] + e), p1 = ld256(pl[1] + e), p2 = ld256(pl[2] + e), p3 = ld256(pl[3] + e);
        __m256i l0 = _mm256_unpacklo_epi8(p3, p2), l1 = _mm256_unpackhi_epi8(p3, p2); /* low halves */
        __m256i h0 = _mm256_unpacklo_epi8(p1, p0), h1 = _mm256_unpackhi_epi8(p1, p0); /* high halves */
        __m256i w0 = _mm256_unpacklo_epi16(l0, h0), w1 = _mm256_unpackhi_epi16(l0, h0);
        __m256i w2 = _mm256_unpacklo_epi16(l1, h1), w3 = _mm256_unpackhi_epi16(l1, h1);
        uint8_t *d = dst + 4 * e;
        st256(d, rotr32_256(_mm256_permute2x128_si256(w0, w1, 0x20), rot));
        st256(d + 32, rotr32_256(_mm256_permute2x128_si256(w2, w3, 0x20), rot));
        st256(d + 64, rotr32_256(_mm256_permute2x128_si256(w0, w1, 0x31), rot));
        st256(d + 96, rotr32_256(_mm256_permute2x128_si256(w2, w3, 0x31), rot));
    }
    return e;
}

size_t xf_split_avx2(unsigned esize, const uint8_t *src, size_t elems, uint8_t *const *pl, int rot)
{
    return esize == 2 ? split2_avx2(src, elems, pl, rot) : split4_avx2(src, elems, pl, rot);
}

size_t xf_merge_avx2(unsigned esize, const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot)
{
    return esize == 2 ? merge2_avx2(pl, elems, dst, rot) : merge4_avx2(pl, elems, dst, rot);
}
#endif
