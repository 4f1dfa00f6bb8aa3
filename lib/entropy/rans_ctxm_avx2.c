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
#include "rans_ctxm.h"

#ifdef ENT_HAVE_X86

/* Row k: for each lane i that refills (bit i of k), how many refilling lanes come
 * before it (rans_ctx_avx2.c's table, built the same way). */
#define RB_(m, i) (((m) >> (i)) & 1)
#define RC_(m, i)                                                                                            \
    ((i > 0 ? RB_(m, 0) : 0) + (i > 1 ? RB_(m, 1) : 0) + (i > 2 ? RB_(m, 2) : 0) + (i > 3 ? RB_(m, 3) : 0) + \
     (i > 4 ? RB_(m, 4) : 0) + (i > 5 ? RB_(m, 5) : 0) + (i > 6 ? RB_(m, 6) : 0))
#define RR_(m) {RC_(m, 0), RC_(m, 1), RC_(m, 2), RC_(m, 3), RC_(m, 4), RC_(m, 5), RC_(m, 6), RC_(m, 7)}
#define RR4_(m) RR_(m), RR_(m + 1), RR_(m + 2), RR_(m + 3)
#define RR16_(m) RR4_(m), RR4_(m + 4), RR4_(m + 8), RR4_(m + 12)
#define RR64_(m) RR16_(m), RR16_(m + 16), RR16_(m + 32), RR16_(m + 48)
static const uint32_t rm_perm[256][8] = {RR64_(0), RR64_(64), RR64_(128), RR64_(192)};

#define TAVX2 __attribute__((target("avx2")))

/* Eight lanes: entries of the table d, the new states refilled in lane order. */
static inline TAVX2 __m256i dec8(__m256i x, const uint32_t *d, const uint8_t **pp, __m256i *sym)
{
    const __m256i mask12 = _mm256_set1_epi32(RANS_M - 1), zero = _mm256_setzero_si256();
    uint32_t ix[8];
    _mm256_storeu_si256((__m256i *)(void *)ix, _mm256_and_si256(x, mask12));
    __m256i e = _mm256_setr_epi32((int)d[ix[0]], (int)d[ix[1]], (int)d[ix[2]], (int)d[ix[3]], (int)d[ix[4]],
                                  (int)d[ix[5]], (int)d[ix[6]], (int)d[ix[7]]);
    *sym = _mm256_and_si256(e, _mm256_set1_epi32(0xff));
    __m256i f = _mm256_srli_epi32(e, 20);
    __m256i b = _mm256_and_si256(_mm256_srli_epi32(e, 8), mask12);
    x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, RANS_BITS)), b);
    __m256i nd = _mm256_cmpeq_epi32(_mm256_srli_epi32(x, 16), zero);
    int msk = _mm256_movemask_ps(_mm256_castsi256_ps(nd));
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)*pp));
    w = _mm256_permutevar8x32_epi32(w, _mm256_loadu_si256((const __m256i *)(const void *)rm_perm[msk]));
    *pp += 2 * __builtin_popcount((unsigned)msk);
    return _mm256_blendv_epi8(x, _mm256_or_si256(_mm256_slli_epi32(x, 16), w), nd);
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
