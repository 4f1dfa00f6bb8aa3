/* rans_avx2.h — the AVX2 rANS encode step that order 0 (rans0_avx2.c) and codec 8
 * (rans_ctx_avx2.c) share: eight states a vector, each symbol's parameters one 16-byte
 * row (rans_build_vrows) loaded per lane and transposed, so the rows may come from one
 * table (order 0) or from one table per context (codec 8) alike. The flushing lanes'
 * words are stored in lane order ending at p, as the scalar loop, coding lane 7 down to
 * lane 0, leaves them: every path writes the same bytes.
 */
#ifndef CKPZ_RANS_AVX2_H
#define CKPZ_RANS_AVX2_H

#include "ent_internal.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>

/* For a mask of lanes that flush a word, nibble 8-c+k (c = lanes flushing) = the k-th
 * flushing lane, so their words land at the top of 8 in lane order (rans0_avx2.c). */
extern const uint32_t rans_enc_lut[256];

/* Row s of vt for every symbol s with a frequency: xmax, magic, bias, cmpl | s1 << 16 |
 * s2 << 24 (rans0_avx2.c says how the division is made exact). Rows of absent symbols
 * are left as they are. */
void rans_build_vrows(const uint16_t *freq, uint32_t (*vt)[4]);

/* Codes one symbol on each of the eight states x, lane k's row at rows[k]; stores the
 * flushed words below *pp and moves it down; returns the new states. */
static inline __attribute__((always_inline, target("avx2"))) __m256i rans_enc8_avx2(__m256i x,
                                                                                    const uint32_t *const rows[8],
                                                                                    uint8_t **pp)
{
    const __m256i low16 = _mm256_set1_epi32(0xffff), low8 = _mm256_set1_epi32(0xff);
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), nib = _mm256_set1_epi32(15);
#define ROW_(k) _mm_loadu_si128((const __m128i *)(const void *)rows[k])
    __m256i y0 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW_(0)), ROW_(4), 1);
    __m256i y1 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW_(1)), ROW_(5), 1);
    __m256i y2 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW_(2)), ROW_(6), 1);
    __m256i y3 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW_(3)), ROW_(7), 1);
#undef ROW_
    __m256i t0 = _mm256_unpacklo_epi32(y0, y1), t1 = _mm256_unpackhi_epi32(y0, y1);
    __m256i t2 = _mm256_unpacklo_epi32(y2, y3), t3 = _mm256_unpackhi_epi32(y2, y3);
    __m256i xmax = _mm256_unpacklo_epi64(t0, t2), mag = _mm256_unpackhi_epi64(t0, t2);
    __m256i bias = _mm256_unpacklo_epi64(t1, t3), pk = _mm256_unpackhi_epi64(t1, t3);
    __m256i ge = _mm256_cmpeq_epi32(_mm256_max_epu32(x, xmax), x);
    int m = _mm256_movemask_ps(_mm256_castsi256_ps(ge));
    __m256i idx = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)rans_enc_lut[m]), shifts), nib);
    __m256i wv = _mm256_permutevar8x32_epi32(_mm256_and_si256(x, low16), idx);
    __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(wv), _mm256_extracti128_si256(wv, 1));
    _mm_storeu_si128((__m128i *)(void *)(*pp - 16), w16);
    *pp -= 2 * __builtin_popcount((unsigned)m);
    x = _mm256_blendv_epi8(x, _mm256_srli_epi32(x, 16), ge);
    __m256i pe = _mm256_mul_epu32(x, mag);
    __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(mag, 32));
    __m256i t = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
    __m256i s1 = _mm256_and_si256(_mm256_srli_epi32(pk, 16), low8);
    __m256i s2 = _mm256_srli_epi32(pk, 24);
    __m256i q = _mm256_srlv_epi32(_mm256_add_epi32(t, _mm256_srlv_epi32(_mm256_sub_epi32(x, t), s1)), s2);
    __m256i cm = _mm256_and_si256(pk, low16);
    return _mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_mullo_epi32(q, cm));
}
#endif

#endif
