/* rans_ctxm_avx512.c — the AVX-512 loops of rANS with a round's mean as context
 * (codec 10, rans_ctxm.c; the decoder where AVX-512 gathers are fast: CPU_GATHER).
 *
 * Codec 8's loops (rans_ctx_avx512.c) with one context per round of a group: the
 * decoder stores a group's 16 symbols as bytes, sums them with one SAD and looks the
 * bucket of their rounded mean up, the base of the next round's gather (one broadcast
 * instead of a clamp per lane); the encoder reads the mean of the 16 bytes before the
 * round. The four groups stay independent chains, which hides the gather's latency.
 */
#include "rans_ctx_simd.h"
#include "rans_ctxm.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>

#define T512F __attribute__((target("avx512f,avx512bw,avx512vl")))

/* The bucket (times RANS_M) of the rounded mean of 16 bytes. */
static inline T512F uint32_t mean_bkt(__m128i sy, const uint32_t *bkt)
{
    __m128i sad = _mm_sad_epu8(sy, _mm_setzero_si128());
    unsigned sum = (unsigned)_mm_cvtsi128_si32(sad) + (unsigned)_mm_extract_epi16(sad, 4);
    return bkt[(sum + 8) >> 4];
}

T512F size_t rm_dec_avx512(uint32_t *st, const uint32_t *dt, const uint32_t *bkt, unsigned m, const uint8_t **pp,
                           const uint8_t *end, uint8_t *dst, size_t P)
{
    const uint8_t *p = *pp;
    __m512i X[RC_G], B[RC_G];
    for (unsigned g = 0; g < RC_G; g++) {
        X[g] = _mm512_loadu_si512((const void *)(st + RC_W * g));
        B[g] = _mm512_set1_epi32((int)bkt[m]);
    }
    const __m512i mask12 = _mm512_set1_epi32(RANS_M - 1), low = _mm512_set1_epi32(RANS_L);
    size_t rounds = P / RC_W, r = 0;
    for (; r < rounds && end - p >= 2 * (ptrdiff_t)RC_N; r++) {
        for (unsigned g = 0; g < RC_G; g++) {
            __m512i x = X[g];
            __m512i e = _mm512_i32gather_epi32(_mm512_or_si512(B[g], _mm512_and_si512(x, mask12)), (const void *)dt, 4);
            __m128i sy = _mm512_cvtepi32_epi8(e);
            _mm_storeu_si128((__m128i *)(void *)(dst + g * P + r * RC_W), sy);
            B[g] = _mm512_set1_epi32((int)mean_bkt(sy, bkt));
            __m512i f = _mm512_srli_epi32(e, 20);
            __m512i b = _mm512_and_si512(_mm512_srli_epi32(e, 8), mask12);
            x = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srli_epi32(x, RANS_BITS)), b);
            __mmask16 nd = _mm512_cmplt_epu32_mask(x, low);
            __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
            w = _mm512_maskz_expand_epi32(nd, w);
            X[g] = _mm512_mask_or_epi32(x, nd, _mm512_slli_epi32(x, 16), w);
            p += 2 * __builtin_popcount((unsigned)nd);
        }
    }
    for (unsigned g = 0; g < RC_G; g++) _mm512_storeu_si512((void *)(st + RC_W * g), X[g]);
    *pp = p;
    return r;
}

/* The encoder: codec 8's step (rans_ctx_avx512.c says how the quotient is exact), the
 * fields of (context, symbol) gathered from zt (rc_build_zt) at the round's bucket. */
T512F uint8_t *rm_enc_avx512(uint32_t *st, const uint64_t *zt, const uint32_t *off, unsigned m, const uint8_t *src,
                             size_t P, uint8_t *p)
{
    __m512i X[RC_G];
    for (unsigned g = 0; g < RC_G; g++) X[g] = _mm512_loadu_si512((const void *)(st + RC_W * g));
    for (size_t r = P / RC_W; r-- > 0;) {
        for (unsigned g = RC_G; g-- > 0;) {
            const uint8_t *q = src + g * P + r * RC_W;
            __m512i s = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)q));
            __m512i ix = _mm512_add_epi32(_mm512_set1_epi32((int)off[r ? rm_mean16(q - RC_W) : m]), s);
            /* a slot's two fields lie in one qword: the magic below, the packed ones above */
            __m512i mag = _mm512_i32gather_epi32(ix, (const void *)zt, 8);
            __m512i pk = _mm512_i32gather_epi32(ix, (const void *)((const uint32_t *)(const void *)zt + 1), 8);
            X[g] = rc_put16(X[g], mag, pk, &p);
        }
    }
    for (unsigned g = 0; g < RC_G; g++) _mm512_storeu_si512((void *)(st + RC_W * g), X[g]);
    return p;
}
#endif
