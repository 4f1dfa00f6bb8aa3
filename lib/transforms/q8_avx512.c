/* q8_avx512.c — transform q8's block merge (q8.c, merge_blocks) in AVX-512: two Q8_0
 * blocks a vector. The scalar loop rebuilds a block in about 30 64-bit operations and six
 * stores; here byte permutes (vpermb) put each quant's top, middle and low field bytes
 * under it (64 quants at once), 16-bit variable shifts bring its fields down (a quant's
 * shift depends only on which eight it is among its block's 32, the same for both bytes
 * of a word), two bit selects assemble the zigzag and three operations undo it. Each
 * block's 32 quants go out as one 32-byte store after its 2-byte scale, so nothing is
 * written past the blocks. Writes exactly what merge_blocks writes. */
#include "simd.h"

#ifdef XF_HAVE_X86
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

/* Bit select: (a & m) | (b & ~m) (imm 0xca: the first operand chooses). */
#define SEL(a, b, m) _mm512_ternarylogic_epi32(m, a, b, 0xca)

/* Blocks b + 2p and b + 2p + 1 from the top (T), middle (M) and low (L) field vectors:
 * permute each quant's field bytes under it, shift its fields into place, assemble the
 * zigzag and undo it; then each block's scale and 32 quants. */
#define PAIR(p, IA, IL, L)                                                                              \
    do {                                                                                                \
        __m512i t = _mm512_slli_epi16(_mm512_srlv_epi16(_mm512_permutexvar_epi8(IA, T), S2), 6);        \
        __m512i m = _mm512_slli_epi16(_mm512_srlv_epi16(_mm512_permutexvar_epi8(IA, M), S2), 4);        \
        __m512i l = _mm512_srlv_epi16(_mm512_permutexvar_epi8(IL, L), S4);                              \
        __m512i z = SEL(SEL(t, m, mC0), l, mF0); /* top 2 | middle 2 | low 4 bits */                    \
        __m512i s = _mm512_sub_epi8(zero, _mm512_and_si512(z, m01));                                    \
        __m512i q = _mm512_ternarylogic_epi32(_mm512_srli_epi16(z, 1), m7F, s, 0x6a); /* (a & b) ^ c */ \
        const size_t k = b + 2 * (p);                                                                   \
        uint8_t *o = out + 34 * k;                                                                      \
        uint16_t s0 = (uint16_t)(slo[k] | shi[k] << 8), s1 = (uint16_t)(slo[k + 1] | shi[k + 1] << 8);  \
        __builtin_memcpy(o, &s0, 2);                                                                    \
        _mm256_storeu_si256((__m256i *)(void *)(o + 2), _mm512_castsi512_si256(q));                     \
        __builtin_memcpy(o + 34, &s1, 2);                                                               \
        _mm256_storeu_si256((__m256i *)(void *)(o + 36), _mm512_extracti64x4_epi64(q, 1));              \
    } while (0)

T512 size_t q8_merge_avx512(const uint8_t *const *pl, size_t b0, size_t cnt, uint8_t *out)
{
    const uint8_t *slo = pl[1] + b0, *shi = pl[2] + b0, *top = pl[3] + 8 * b0, *mid = pl[4] + 8 * b0,
                  *lo = pl[5] + 16 * b0;
    /* Byte 32h + 8k + i of pair p's vector is quant 8k + i of block 2p + h: its top and
     * middle fields are byte 8(2p + h) + i of eight blocks' 64, its low field byte 16(2p
     * + h) + 8(k & 1) + i of four blocks' 64 (bits 4(k >> 1) up). */
    uint8_t ia[4][64], il[2][64];
    uint16_t s2[32], s4[32];
    for (unsigned j = 0; j < 64; j++) {
        unsigned h = j / 32, k = j / 8 % 4, i = j % 8;
        for (unsigned p = 0; p < 4; p++) ia[p][j] = (uint8_t)(16 * p + 8 * h + i);
        for (unsigned p = 0; p < 2; p++) il[p][j] = (uint8_t)(32 * p + 16 * h + 8 * (k & 1) + i);
        if (j % 2 == 0) s2[j / 2] = (uint16_t)(2 * k), s4[j / 2] = (uint16_t)(4 * (k >> 1));
    }
    const __m512i IA0 = _mm512_loadu_si512((const void *)ia[0]), IA1 = _mm512_loadu_si512((const void *)ia[1]),
                  IA2 = _mm512_loadu_si512((const void *)ia[2]), IA3 = _mm512_loadu_si512((const void *)ia[3]),
                  IL0 = _mm512_loadu_si512((const void *)il[0]), IL1 = _mm512_loadu_si512((const void *)il[1]);
    const __m512i S2 = _mm512_loadu_si512((const void *)s2), S4 = _mm512_loadu_si512((const void *)s4);
    const __m512i mC0 = _mm512_set1_epi8((char)0xc0), mF0 = _mm512_set1_epi8((char)0xf0);
    const __m512i m7F = _mm512_set1_epi8(0x7f), m01 = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    size_t b = 0;
    for (; b + 8 <= cnt; b += 8) {
        const __m512i T = _mm512_loadu_si512((const void *)(top + 8 * b)),
                      M = _mm512_loadu_si512((const void *)(mid + 8 * b)),
                      L0 = _mm512_loadu_si512((const void *)(lo + 16 * b)),
                      L1 = _mm512_loadu_si512((const void *)(lo + 16 * b + 64));
        /* the four pairs written out, so that the index vectors stay in registers */
        PAIR(0, IA0, IL0, L0);
        PAIR(1, IA1, IL1, L0);
        PAIR(2, IA2, IL0, L1);
        PAIR(3, IA3, IL1, L1);
    }
    return b;
}
#undef PAIR
#endif
