/* rans_ctx_simd.h — the vector steps codecs 8 (rans_ctx_avx2.c, rans_ctx_avx512.c) and
 * 10 (rans_ctxm_avx2.c, rans_ctxm_avx512.c) share, always inlined into each codec's
 * own loops (which differ only in how a lane's context is found). The AVX-512
 * decoders' steps stay written out in each: shared, the register allocation of codec
 * 10's loop changed (its gather then waited on the previous group's states: +10% of its
 * time). */
#ifndef CKPZ_RANS_CTX_SIMD_H
#define CKPZ_RANS_CTX_SIMD_H

#include "rans_ctx.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>

#define RC_INL static inline __attribute__((always_inline))
#define RC_TAVX2 __attribute__((target("avx2")))
#define RC_T512 __attribute__((target("avx512f")))

/* Decoding, eight states x with their table entries e: the states advanced, the lanes
 * below 2^16 refilled from *pp in lane order (rc_perm), *pp moved past the words. */
RC_INL RC_TAVX2 __m256i rc_take8(__m256i x, __m256i e, const uint8_t **pp)
{
    const __m256i mask12 = _mm256_set1_epi32(RANS_M - 1);
    __m256i f = _mm256_srli_epi32(e, 20);
    __m256i b = _mm256_and_si256(_mm256_srli_epi32(e, 8), mask12);
    x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, RANS_BITS)), b);
    __m256i nd = _mm256_cmpeq_epi32(_mm256_srli_epi32(x, 16), _mm256_setzero_si256());
    int msk = _mm256_movemask_ps(_mm256_castsi256_ps(nd));
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)*pp));
    w = _mm256_permutevar8x32_epi32(w, _mm256_loadu_si256((const __m256i *)(const void *)rc_perm[msk]));
    *pp += 2 * __builtin_popcount((unsigned)msk);
    return _mm256_blendv_epi8(x, _mm256_or_si256(_mm256_slli_epi32(x, 16), w), nd);
}

/* Encoding, the fields of 16 slots ix of zt (rc_build_zt): both of a slot lie in one
 * qword, so two gathers of eight qwords (where two of sixteen dwords took twice the
 * loads), then parted by two permutes into the magic mag and the packed word pk. */
RC_INL __attribute__((target("avx512f"))) void rc_fields(const uint64_t *zt, __m512i ix, __m512i *mag, __m512i *pk)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512i a = _mm512_i32gather_epi64(_mm512_castsi512_si256(ix), (const void *)zt, 8);
    __m512i b = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(ix, 1), (const void *)zt, 8);
    *mag = _mm512_permutex2var_epi32(a, ev, b);
    *pk = _mm512_permutex2var_epi32(a, od, b);
}

/* Encoding, one step of 16 states x with their symbols' fields from zt (rc_build_zt:
 * the magic mag, the packed word pk); the flushed words end at *pp. */
RC_INL RC_T512 __m512i rc_put16(__m512i x, __m512i mag, __m512i pk, uint8_t **pp)
{
    const __m512i mM = _mm512_set1_epi32(RANS_M), m12 = _mm512_set1_epi32(RANS_M - 1);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i cmpl = _mm512_and_si512(pk, m12);
    __m512i xmax = _mm512_slli_epi32(_mm512_sub_epi32(mM, cmpl), 20);
    __mmask16 fl = _mm512_cmpge_epu32_mask(x, xmax);
    unsigned c = (unsigned)__builtin_popcount((unsigned)fl);
    __m512i w = _mm512_maskz_compress_epi32(fl, x);
    w = _mm512_permutexvar_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32((int)c)), w);
    _mm256_storeu_si256((__m256i *)(void *)(*pp - 32), _mm512_cvtepi32_epi16(w));
    *pp -= 2 * c;
    x = _mm512_mask_srli_epi32(x, fl, x, 16);
    __m512i pe = _mm512_mul_epu32(x, mag);
    __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(mag, 32));
    __m512i t = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
    __m512i qq = _mm512_srlv_epi32(_mm512_add_epi32(t, _mm512_srli_epi32(_mm512_sub_epi32(x, t), 1)),
                                   _mm512_and_si512(_mm512_srli_epi32(pk, 12), _mm512_set1_epi32(15)));
    return _mm512_add_epi32(_mm512_add_epi32(x, _mm512_srli_epi32(pk, 16)), _mm512_mullo_epi32(qq, cmpl));
}
#endif

#endif
