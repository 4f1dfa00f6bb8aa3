/* rans_ctx_avx512.c — the AVX-512 decode loop of rANS with a small context (codec 8,
 * rans_ctx.c calls it where AVX-512 gathers are fast: CPU_GATHER), its encode loop and
 * the estimate's pair count.
 *
 * One zmm register per group holds its 16 states, another its last 16 symbols (the
 * contexts of the next 16): per step the bucket is clamped from them, the entry of
 * bucket·4096 + (x mod 4096) gathered from the K tables (at most 256 KiB, in L2), the
 * 16 symbols stored as consecutive bytes of the group's part, and the lanes below
 * 2^16 refilled in lane order by an expand, so words are taken in the scalar loop's
 * order. The four groups are independent chains, which hides the gather's latency.
 */
#include "rans_ctx_simd.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>

/* The bucket of each lane's context (the symbol in the low byte of its entry e, the other
 * bytes ignored) times RANS_M: the distance from the window's low end d (or, where that
 * end lies below 0, the symbol plus -d) saturated in the low byte, the other bytes
 * cleared, then at most K - 1: two byte operations where a 32-bit clamp took four. */
#define RC_BUCKET(e, below, d, kmax)                                                               \
    _mm512_slli_epi32(_mm512_min_epu8(below ? _mm512_maskz_adds_epu8(0x1111111111111111ull, e, d)  \
                                            : _mm512_maskz_subs_epu8(0x1111111111111111ull, e, d), \
                                      kmax),                                                       \
                      RANS_BITS)

#define T512BW __attribute__((target("avx512f,avx512bw")))

/* The loop, for a window whose low end lies below 0 (below) or not: a constant in each
 * of the two copies rc_dec_avx512 chooses between. */
static inline __attribute__((always_inline)) T512BW size_t dec_loop(const int below, uint32_t *st, const uint32_t *dt,
                                                                    unsigned m, unsigned K, const uint8_t **pp,
                                                                    const uint8_t *end, uint8_t *dst, size_t P)
{
    const uint8_t *p = *pp;
    __m512i X[RC_G], C[RC_G];
    for (unsigned g = 0; g < RC_G; g++) {
        X[g] = _mm512_loadu_si512((const void *)(st + RC_W * g));
        C[g] = _mm512_set1_epi32((int)m);
    }
    const __m512i mask12 = _mm512_set1_epi32(RANS_M - 1), low = _mm512_set1_epi32(RANS_L);
    const int lo = (int)m - (int)(K / 2);
    const __m512i d = _mm512_set1_epi8((char)(below ? -lo : lo)), kmax = _mm512_set1_epi8((char)(K - 1));
    size_t rounds = P / RC_W, r = 0;
    for (; r < rounds && end - p >= 2 * (ptrdiff_t)RC_N; r++) {
        for (unsigned g = 0; g < RC_G; g++) {
            __m512i x = X[g];
            /* bucket << 12 | x mod 4096 (imm 0xf8: a | (b & c)) */
            __m512i ix = _mm512_ternarylogic_epi32(RC_BUCKET(C[g], below, d, kmax), x, mask12, 0xf8);
            __m512i e = _mm512_i32gather_epi32(ix, (const void *)dt, 4);
            _mm_storeu_si128((__m128i *)(void *)(dst + g * P + r * RC_W), _mm512_cvtepi32_epi8(e));
            C[g] = e;
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

T512BW static size_t dec_below(uint32_t *st, const uint32_t *dt, unsigned m, unsigned K, const uint8_t **pp,
                               const uint8_t *end, uint8_t *dst, size_t P)
{
    return dec_loop(1, st, dt, m, K, pp, end, dst, P);
}

T512BW static size_t dec_above(uint32_t *st, const uint32_t *dt, unsigned m, unsigned K, const uint8_t **pp,
                               const uint8_t *end, uint8_t *dst, size_t P)
{
    return dec_loop(0, st, dt, m, K, pp, end, dst, P);
}

size_t rc_dec_avx512(uint32_t *st, const uint32_t *dt, unsigned m, unsigned K, const uint8_t **pp, const uint8_t *end,
                     uint8_t *dst, size_t P)
{
    return (int)m < (int)(K / 2) ? dec_below(st, dt, m, K, pp, end, dst, P) : dec_above(st, dt, m, K, pp, end, dst, P);
}

/* ---- the encoder ---------------------------------------------------------------------
 * Sixteen lanes of a group a vector, as the decoder, in the reverse order. The quotient
 * x / f comes from rans0_avx512.c's 32-bit magic multiply (exact like the scalar
 * reciprocal, so the states and words are the scalar loop's). Per (context, symbol) two
 * words are gathered from a K × 256-entry array: the magic, and M - f | shift << 12 |
 * bias << 16 (12, 4 and 13 bits; xmax = f << 20 follows from M - f) above it. Flushing lanes'
 * words are compressed in lane order and stored so that they end at p. */
void rc_build_zt(const uint16_t *freq, uint64_t *zt, unsigned t)
{
    uint32_t cum = 0;
    for (unsigned s = 0; s < 256; s++) {
        uint32_t f = freq[s], k = t * 256 + s, l = 0;
        if (!f) {
            zt[k] = 0;
            continue;
        }
        while ((1u << l) < f) l++;
        if (f == 1) zt[k] = UINT32_MAX | (uint64_t)((RANS_M - 1) | (cum + RANS_M - 1) << 16) << 32;
        else
            zt[k] = (uint32_t)((((uint64_t)1 << 32) * ((1u << l) - f)) / f + 1) |
                    (uint64_t)((RANS_M - f) | (l - 1) << 12 | cum << 16) << 32;
        cum += f;
    }
}

#define T512E __attribute__((target("avx512f,avx512bw,avx512vl")))
#define INL static inline __attribute__((always_inline))

/* The magic and the packed word of 16 lanes: symbols at q, contexts at q - RC_W (or m
 * for a group's first round). */
INL T512E void rc_look(const uint64_t *zt, const uint8_t *q, int first, __m512i mv, __m512i lo, __m512i kmax,
                       __m512i *mag, __m512i *pk)
{
    __m512i s = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)q));
    __m512i prev = first ? mv : _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(q - RC_W)));
    __m512i ctx = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(prev, lo), _mm512_setzero_si512()), kmax);
    rc_fields(zt, _mm512_add_epi32(_mm512_slli_epi32(ctx, 8), s), mag, pk);
}

_Static_assert(RC_G == 4, "rc_enc_avx512 writes out four groups");

/* The four groups written out (a loop over them kept the states in memory, a store and
 * a load on every chain), their lookups first so that the gathers overlap the steps. */
T512E uint8_t *rc_enc_avx512(uint32_t *st, const uint64_t *zt, unsigned m, unsigned K, const uint8_t *src, size_t P,
                             uint8_t *p)
{
    __m512i X0 = _mm512_loadu_si512((const void *)st), X1 = _mm512_loadu_si512((const void *)(st + RC_W));
    __m512i X2 = _mm512_loadu_si512((const void *)(st + 2 * RC_W)),
            X3 = _mm512_loadu_si512((const void *)(st + 3 * RC_W));
    const __m512i lo = _mm512_set1_epi32((int)m - (int)(K / 2)), kmax = _mm512_set1_epi32((int)K - 1);
    const __m512i mv = _mm512_set1_epi32((int)m);
    for (size_t r = P / RC_W; r-- > 0;) {
        const uint8_t *q = src + r * RC_W;
        int first = r == 0;
        __m512i g0, g1, g2, g3, k0, k1, k2, k3;
        rc_look(zt, q + 3 * P, first, mv, lo, kmax, &g3, &k3);
        rc_look(zt, q + 2 * P, first, mv, lo, kmax, &g2, &k2);
        rc_look(zt, q + P, first, mv, lo, kmax, &g1, &k1);
        rc_look(zt, q, first, mv, lo, kmax, &g0, &k0);
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
/* ---- the estimate's pair count --------------------------------------------------------
 * The counter of a pair is bucket(byte 16 back) · 256 + byte, the bucket the byte 16
 * back less lo clamped to [0, 31]: in bytes a saturating subtract (or add, lo < 0) and
 * a minimum, then widened to 16-bit counters' indices, 64 at a time, so the scalar
 * loop is left only its increments (two byte loads, a table load and an add fewer per
 * pair). Eight equal indices are one addition of 8, as in the scalar loop. Same counts
 * as rans_ctx.c's loop, in the same four sets or others (only their sum is used). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) size_t rc_pairs_avx512(uint32_t *const *w, const uint8_t *src,
                                                                            int lo, size_t a, size_t b)
{
    const __m512i d = _mm512_set1_epi8((char)(lo < 0 ? -lo : lo)), top = _mm512_set1_epi8((char)(RC_WIDE - 1));
    /* word 0 of each 128-bit lane to all its eight words */
    const __m512i first = _mm512_set4_epi32(0x01000100, 0x01000100, 0x01000100, 0x01000100);
    uint32_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    uint16_t ix[64];
    size_t i = a;
    for (; i + 64 <= b; i += 64) {
        __m512i c = _mm512_loadu_si512((const void *)(src + i));
        __m512i p = _mm512_loadu_si512((const void *)(src + i - RC_W));
        __m512i k = _mm512_min_epu8(lo < 0 ? _mm512_adds_epu8(p, d) : _mm512_subs_epu8(p, d), top);
        __m512i x0 = _mm512_or_si512(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(c)),
                                     _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(k)), 8));
        __m512i x1 = _mm512_or_si512(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(c, 1)),
                                     _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(k, 1)), 8));
        uint64_t same = (uint64_t)_mm512_cmpeq_epi16_mask(x0, _mm512_shuffle_epi8(x0, first)) |
                        (uint64_t)_mm512_cmpeq_epi16_mask(x1, _mm512_shuffle_epi8(x1, first)) << 32;
        _mm512_storeu_si512((void *)ix, x0);
        _mm512_storeu_si512((void *)(ix + 32), x1);
        for (unsigned g = 0; g < 64; g += 8, same >>= 8) {
            const uint16_t *q = ix + g;
            if ((same & 0xff) == 0xff) {
                w0[q[0]] += 8;
                continue;
            }
            w0[q[0]]++, w1[q[1]]++, w2[q[2]]++, w3[q[3]]++;
            w0[q[4]]++, w1[q[5]]++, w2[q[6]]++, w3[q[7]]++;
        }
    }
    return i;
}
#endif
