/* split512.h — the AVX-512 step that regroups vectors of 2- or 4-byte elements into byte
 * planes, shared by the plane split (planes_avx512.c) and the prediction fused with it
 * (predict_avx512.c), so that both write planes the same way. Only for x86-64 with GCC
 * or clang; the functions are compiled for AVX-512 (T512) and may only run where
 * cpu_level() (common/cpu.h) allows CPU_AVX512. */
#ifndef CKPZ_SPLIT512_H
#define CKPZ_SPLIT512_H

#include <immintrin.h>
#include <stdint.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* Bytes ahead of a split's loads that it prefetches. An input in memory is split where
 * it lies (api/compress.c), from DRAM: the hardware's prefetch alone left the split of
 * FP16 weights at 16% of the compression time; with 2 KiB ahead (1-8 KiB measured
 * alike, within noise) compression of FP16 / FP32 weights ran 6-8% faster. */
#define SPLIT_AHEAD 2048

static inline __attribute__((always_inline)) void split_prefetch(const uint8_t *s, int lines)
{
    for (int k = 0; k < lines; k++) _mm_prefetch((const char *)(s + SPLIT_AHEAD + 64 * k), _MM_HINT_T0);
}

/* Byte indexes into the 128 bytes of two vectors: byte j of the result is byte 2j + k
 * of the pair (split_idx2, k = 1 the high byte of each 2-byte element, 0 the low), or,
 * over 32 4-byte elements, byte k of element j for j < 32 and byte k - 1 for j >= 32
 * (split_idx4, k = 3 or 1). */
static inline T512 __m512i split_idx2(int k)
{
    uint8_t t[64];
    for (int j = 0; j < 64; j++) t[j] = (uint8_t)(2 * j + k);
    return _mm512_loadu_si512((const void *)t);
}

static inline T512 __m512i split_idx4(int k)
{
    uint8_t t[64];
    for (int j = 0; j < 64; j++) t[j] = (uint8_t)(4 * (j & 31) + (j < 32 ? k : k - 1));
    return _mm512_loadu_si512((const void *)t);
}

/* 64 2-byte elements in a, b: their high bytes to p0, low bytes to p1 (64 each);
 * ih = split_idx2(1), il = split_idx2(0). split2_vec leaves the two planes' vectors in
 * p[]. */
static inline __attribute__((always_inline)) T512 void split2_vec(__m512i a, __m512i b, __m512i ih, __m512i il,
                                                                  __m512i *p)
{
    p[0] = _mm512_permutex2var_epi8(a, ih, b);
    p[1] = _mm512_permutex2var_epi8(a, il, b);
}

static inline __attribute__((always_inline)) T512 void split2_step(__m512i a, __m512i b, __m512i ih, __m512i il,
                                                                   uint8_t *p0, uint8_t *p1)
{
    __m512i p[2];
    split2_vec(a, b, ih, il, p);
    _mm512_storeu_si512((void *)p0, p[0]);
    _mm512_storeu_si512((void *)p1, p[1]);
}

/* 64 4-byte elements in a, b, c, d: byte 3 (most significant) to p[0] .. byte 0 to
 * p[3], 64 each; i32 = split_idx4(3), i10 = split_idx4(1). Per pair of vectors (32
 * elements) bytes 3|2 and bytes 1|0 land in 32-byte halves; the halves of the two
 * pairs then make whole planes. split4_vec leaves the four planes' vectors in p[]. */
static inline __attribute__((always_inline)) T512 void split4_vec(__m512i a, __m512i b, __m512i c, __m512i d,
                                                                  __m512i i32, __m512i i10, __m512i *p)
{
    __m512i ab32 = _mm512_permutex2var_epi8(a, i32, b), ab10 = _mm512_permutex2var_epi8(a, i10, b);
    __m512i cd32 = _mm512_permutex2var_epi8(c, i32, d), cd10 = _mm512_permutex2var_epi8(c, i10, d);
    p[0] = _mm512_shuffle_i64x2(ab32, cd32, 0x44);
    p[1] = _mm512_shuffle_i64x2(ab32, cd32, 0xee);
    p[2] = _mm512_shuffle_i64x2(ab10, cd10, 0x44);
    p[3] = _mm512_shuffle_i64x2(ab10, cd10, 0xee);
}

static inline __attribute__((always_inline)) T512 void split4_step(__m512i a, __m512i b, __m512i c, __m512i d,
                                                                   __m512i i32, __m512i i10, uint8_t *p0, uint8_t *p1,
                                                                   uint8_t *p2, uint8_t *p3)
{
    __m512i p[4];
    split4_vec(a, b, c, d, i32, i10, p);
    _mm512_storeu_si512((void *)p0, p[0]);
    _mm512_storeu_si512((void *)p1, p[1]);
    _mm512_storeu_si512((void *)p2, p[2]);
    _mm512_storeu_si512((void *)p3, p[3]);
}

#endif
