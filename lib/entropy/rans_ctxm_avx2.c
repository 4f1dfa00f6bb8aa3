/* rans_ctxm_avx2.c — the AVX2 loops of rANS with a round's mean as context (codec 10,
 * rans_ctxm.c; for machines without AVX-512 or where its gathers are slow).
 *
 * Codec 8's AVX2 loops (rans_ctx_avx2.c) with one context per round of a group: all 16
 * lanes read the same table, whose base is the bucket of the rounded mean of the
 * group's previous 16 symbols (one SAD per round), so the per-lane clamp goes away; the
 * entries are loaded one by one and the refills taken in lane order by a permute, as
 * there.
 */
#include <string.h>

#include "rans_avx2.h"
#include "rans_ctx_simd.h"
#include "rans_ctxm.h"

#ifdef ENT_HAVE_X86

#define TAVX2 __attribute__((target("avx2")))

/* Eight lanes: entries of the table d, the new states refilled in lane order. */
static inline TAVX2 __m256i dec8(__m256i x, const uint32_t *d, const uint8_t **pp, __m256i *sym)
{
    const __m256i mask12 = _mm256_set1_epi32(RANS_M - 1);
    uint32_t ix[8];
    _mm256_storeu_si256((__m256i *)(void *)ix, _mm256_and_si256(x, mask12));
    __m256i e = _mm256_setr_epi32((int)d[ix[0]], (int)d[ix[1]], (int)d[ix[2]], (int)d[ix[3]], (int)d[ix[4]],
                                  (int)d[ix[5]], (int)d[ix[6]], (int)d[ix[7]]);
    *sym = _mm256_and_si256(e, _mm256_set1_epi32(0xff));
    return rc_take8(x, e, pp);
}

TAVX2 size_t rm_dec_avx2(uint32_t *st, const uint32_t *dt, const uint32_t *bkt, unsigned m, const uint8_t **pp,
                         const uint8_t *end, uint8_t *dst, size_t P)
{
    const uint8_t *p = *pp;
    __m256i X[2 * RC_G];
    uint32_t base[RC_G];
    for (unsigned v = 0; v < 2 * RC_G; v++) X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
    for (unsigned g = 0; g < RC_G; g++) base[g] = bkt[m];
    const __m256i ord = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t rounds = P / RC_W, r = 0;
    for (; r < rounds && end - p >= 2 * (ptrdiff_t)RC_N; r++) {
        for (unsigned g = 0; g < RC_G; g++) {
            __m256i s0, s1;
            X[2 * g] = dec8(X[2 * g], dt + base[g], &p, &s0);
            X[2 * g + 1] = dec8(X[2 * g + 1], dt + base[g], &p, &s1);
            __m256i a = _mm256_packus_epi32(s0, s1);
            a = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, a), ord);
            __m128i sy = _mm256_castsi256_si128(a);
            _mm_storeu_si128((__m128i *)(void *)(dst + g * P + r * RC_W), sy);
            __m128i sad = _mm_sad_epu8(sy, _mm_setzero_si128());
            base[g] = bkt[((unsigned)_mm_cvtsi128_si32(sad) + (unsigned)_mm_extract_epi16(sad, 4) + 8) >> 4];
        }
    }
    for (unsigned v = 0; v < 2 * RC_G; v++) _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    *pp = p;
    return r;
}

/* The encoder: each group's 16 lanes as two vectors of 8, the upper first, in the
 * reverse of the decoding order, with order 0's step (rans_avx2.h); every lane's row
 * in the table of the round's bucket (off[v]: bucket of a mean v times 256). */
TAVX2 uint8_t *rm_enc_avx2(uint32_t *st, const uint32_t (*vt)[4], const uint32_t *off, unsigned m, const uint8_t *src,
                           size_t P, uint8_t *p)
{
    __m256i X[2 * RC_G];
    for (unsigned v = 0; v < 2 * RC_G; v++) X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
    for (size_t r = P / RC_W; r-- > 0;)
        for (unsigned g = RC_G; g-- > 0;) {
            const uint8_t *q = src + g * P + r * RC_W;
            const uint32_t(*t)[4] = vt + off[r ? rm_mean16(q - RC_W) : m];
            for (unsigned h = 2; h-- > 0;) {
                const uint8_t *s = q + 8 * h;
                const uint32_t *const rows[8] = {t[s[0]], t[s[1]], t[s[2]], t[s[3]],
                                                 t[s[4]], t[s[5]], t[s[6]], t[s[7]]};
                X[2 * g + h] = rans_enc8_avx2(X[2 * g + h], rows, &p);
            }
        }
    for (unsigned v = 0; v < 2 * RC_G; v++) _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    return p;
}
#endif
