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
 * fields of (context, symbol) gathered from zt (rc_build_zt) at the round's bucket. The
 * four groups written out, their lookups first so that the gathers overlap the steps,
 * as in codec 8's loop (a loop over the groups, sixteen dwords gathered twice a step:
 * 1,630 MB/s where this runs at 1,880 on the exponent planes of step-300 BF16
 * gradients, one thread, CPU time). */
_Static_assert(RC_G == 4, "rm_enc_avx512 writes out four groups");

static inline T512F void rm_look(const uint64_t *zt, const uint8_t *q, uint32_t base, __m512i *mag, __m512i *pk)
{
    __m512i s = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)q));
    rc_fields(zt, _mm512_add_epi32(_mm512_set1_epi32((int)base), s), mag, pk);
}

T512F uint8_t *rm_enc_avx512(uint32_t *st, const uint64_t *zt, const uint32_t *off, unsigned m, const uint8_t *src,
                             size_t P, uint8_t *p)
{
    __m512i X0 = _mm512_loadu_si512((const void *)st), X1 = _mm512_loadu_si512((const void *)(st + RC_W));
    __m512i X2 = _mm512_loadu_si512((const void *)(st + 2 * RC_W)),
            X3 = _mm512_loadu_si512((const void *)(st + 3 * RC_W));
    for (size_t r = P / RC_W; r-- > 0;) {
        const uint8_t *q = src + r * RC_W;
        __m512i g0, g1, g2, g3, k0, k1, k2, k3;
        rm_look(zt, q + 3 * P, off[r ? rm_mean16(q + 3 * P - RC_W) : m], &g3, &k3);
        rm_look(zt, q + 2 * P, off[r ? rm_mean16(q + 2 * P - RC_W) : m], &g2, &k2);
        rm_look(zt, q + P, off[r ? rm_mean16(q + P - RC_W) : m], &g1, &k1);
        rm_look(zt, q, off[r ? rm_mean16(q - RC_W) : m], &g0, &k0);
        X3 = rc_put16(X3, g3, k3, &p);
        X2 = rc_put16(X2, g2, k2, &p);
        X1 = rc_put16(X1, g1, k1, &p);
        X0 = rc_put16(X0, g0, k0, &p);
    }
    _mm512_storeu_si512((void *)st, X0);
    _mm512_storeu_si512((void *)(st + RC_W), X1);
    _mm512_storeu_si512((void *)(st + 2 * RC_W), X2);
    _mm512_storeu_si512((void *)(st + 3 * RC_W), X3);
    return p;
}

/* Sixteen rounds a step: four SADs give the sums of the 8-byte halves of the 16 bytes
 * before each round, added in pairs (even and odd qwords of two SADs), rounded to the
 * mean, less base, clamped and narrowed to bytes. */
T512F size_t rm_buckets_avx512(const uint8_t *q, size_t nr, int base, uint8_t *out)
{
    const __m512i ev = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), od = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i zero = _mm512_setzero_si512(), top = _mm512_set1_epi64(RC_WIDE - 1);
    const __m512i b8 = _mm512_set1_epi64(16 * (int64_t)base - 8);
    size_t i = 0;
    for (; i + 16 <= nr; i += 16) {
        const uint8_t *p = q + RC_W * i - RC_W;
        __m512i s0 = _mm512_sad_epu8(_mm512_loadu_si512((const void *)p), zero);
        __m512i s1 = _mm512_sad_epu8(_mm512_loadu_si512((const void *)(p + 64)), zero);
        __m512i s2 = _mm512_sad_epu8(_mm512_loadu_si512((const void *)(p + 128)), zero);
        __m512i s3 = _mm512_sad_epu8(_mm512_loadu_si512((const void *)(p + 192)), zero);
        __m512i a = _mm512_add_epi64(_mm512_permutex2var_epi64(s0, ev, s1), _mm512_permutex2var_epi64(s0, od, s1));
        __m512i c = _mm512_add_epi64(_mm512_permutex2var_epi64(s2, ev, s3), _mm512_permutex2var_epi64(s2, od, s3));
        /* (sum + 8) / 16 - base = (sum + 8 - 16 base) >> 4, arithmetic, then clamped */
        a = _mm512_min_epi64(_mm512_max_epi64(_mm512_srai_epi64(_mm512_sub_epi64(a, b8), 4), zero), top);
        c = _mm512_min_epi64(_mm512_max_epi64(_mm512_srai_epi64(_mm512_sub_epi64(c, b8), 4), zero), top);
        __m128i lo = _mm512_cvtepi64_epi8(a), hi = _mm512_cvtepi64_epi8(c);
        _mm_storeu_si128((__m128i *)(void *)(out + i), _mm_unpacklo_epi64(lo, hi));
    }
    return i;
}
#endif
