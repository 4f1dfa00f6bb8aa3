/* split256.h — the AVX2 step that regroups vectors of 2- or 4-byte elements into byte
 * planes, shared by the plane split (planes_avx2.c) and the prediction fused with it and
 * the escapes (predict_avx2.c), so that both write planes the same way. Only for x86-64
 * with GCC or clang; compiled for AVX2 (T256) and run only where cpu_level() (common/cpu.h)
 * allows CPU_AVX2. AVX2's packs and shuffles work within each 128-bit lane, so each step
 * ends with one cross-lane permute that puts the elements back in order. */
#ifndef CKPZ_SPLIT256_H
#define CKPZ_SPLIT256_H

#include <immintrin.h>
#include <stdint.h>

#define T256 __attribute__((target("avx2,popcnt")))
#define AI256 static inline __attribute__((always_inline)) T256

/* Unaligned 32-byte load and store, for every AVX2 loop of the transforms. */
AI256 __m256i ld256(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
AI256 void st256(uint8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)(void *)p, v); }

/* 32 2-byte elements in a, b: their high bytes to p[0], low bytes to p[1]. Packed lane by
 * lane they come out as elements 0-7, 16-23, 8-15, 24-31 in 64-bit quarters. */
AI256 void split2_vec256(__m256i a, __m256i b, __m256i *p)
{
    const __m256i lo = _mm256_set1_epi16(0xff);
    __m256i h = _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    __m256i l = _mm256_packus_epi16(_mm256_and_si256(a, lo), _mm256_and_si256(b, lo));
    p[0] = _mm256_permute4x64_epi64(h, 0xd8);
    p[1] = _mm256_permute4x64_epi64(l, 0xd8);
}

/* 32 4-byte elements in a, b, c, d: byte 3 (most significant) to p[0] .. byte 0 to p[3].
 * Each lane of four elements is shuffled into four 32-bit words, one per plane; a 4 x 4
 * transpose of those words across the vectors gives each plane's 16 bytes per lane in
 * the element order 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31, which one 32-bit
 * permute puts right. */
AI256 void split4_vec256(__m256i a, __m256i b, __m256i c, __m256i d, __m256i *p)
{
    const __m256i by_plane = _mm256_setr_epi8(3, 7, 11, 15, 2, 6, 10, 14, 1, 5, 9, 13, 0, 4, 8, 12, /* lane 0 */
                                              3, 7, 11, 15, 2, 6, 10, 14, 1, 5, 9, 13, 0, 4, 8, 12);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    a = _mm256_shuffle_epi8(a, by_plane);
    b = _mm256_shuffle_epi8(b, by_plane);
    c = _mm256_shuffle_epi8(c, by_plane);
    d = _mm256_shuffle_epi8(d, by_plane);
    __m256i ab01 = _mm256_unpacklo_epi32(a, b), ab23 = _mm256_unpackhi_epi32(a, b);
    __m256i cd01 = _mm256_unpacklo_epi32(c, d), cd23 = _mm256_unpackhi_epi32(c, d);
    p[0] = _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(ab01, cd01), order);
    p[1] = _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi64(ab01, cd01), order);
    p[2] = _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(ab23, cd23), order);
    p[3] = _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi64(ab23, cd23), order);
}

#endif
