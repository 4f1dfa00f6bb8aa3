/* rans_ctx_avx2.c — the AVX2 decode and encode loops of rANS with a small context
 * (codec 8; for machines without AVX-512 or where its gathers are slow).
 *
 * Each group's 16 lanes are two ymm halves, so eight chains are in flight. The bucket
 * of every lane is clamped in the vector registers from the previous round's symbols;
 * the table entries are loaded one by one (vpgatherdd measured slower than scalar
 * loads on the AMD machine rans0_avx2.c was tuned on); the lanes below 2^16 take the
 * next words in lane order through a permute whose row is looked up by the refill
 * mask, as the scalar loop would take them.
 */
#include <string.h>

#include "rans_avx2.h"
#include "rans_ctx_simd.h"

#ifdef ENT_HAVE_X86

/* rc_perm (rans_ctx.h): constant data built by the preprocessor. */
#define RB_(m, i) (((m) >> (i)) & 1)
#define RC_(m, i)                                                                                            \
    ((i > 0 ? RB_(m, 0) : 0) + (i > 1 ? RB_(m, 1) : 0) + (i > 2 ? RB_(m, 2) : 0) + (i > 3 ? RB_(m, 3) : 0) + \
     (i > 4 ? RB_(m, 4) : 0) + (i > 5 ? RB_(m, 5) : 0) + (i > 6 ? RB_(m, 6) : 0))
#define RR_(m) {RC_(m, 0), RC_(m, 1), RC_(m, 2), RC_(m, 3), RC_(m, 4), RC_(m, 5), RC_(m, 6), RC_(m, 7)}
#define RR4_(m) RR_(m), RR_(m + 1), RR_(m + 2), RR_(m + 3)
#define RR16_(m) RR4_(m), RR4_(m + 4), RR4_(m + 8), RR4_(m + 12)
#define RR64_(m) RR16_(m), RR16_(m + 16), RR16_(m + 32), RR16_(m + 48)
const uint32_t rc_perm[256][8] = {RR64_(0), RR64_(64), RR64_(128), RR64_(192)};

#define NV (2 * RC_G) /* ymm vectors of states */

__attribute__((target("avx2"))) size_t rc_dec_avx2(uint32_t *st, const uint32_t *dt, unsigned m, unsigned K,
                                                   const uint8_t **pp, const uint8_t *end, uint8_t *dst, size_t P)
{
    const uint8_t *p = *pp;
    __m256i X[NV], C[NV];
    for (unsigned v = 0; v < NV; v++) {
        X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
        C[v] = _mm256_set1_epi32((int)m);
    }
    const __m256i mask12 = _mm256_set1_epi32(RANS_M - 1), b8 = _mm256_set1_epi32(0xff);
    const __m256i lo = _mm256_set1_epi32((int)m - (int)(K / 2)), kmax = _mm256_set1_epi32((int)K - 1);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i ord = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t rounds = P / RC_W, r = 0;
    for (; r < rounds && end - p >= 2 * (ptrdiff_t)RC_N; r++) {
        for (unsigned v = 0; v < NV; v++) {
            __m256i x = X[v];
            __m256i ctx = _mm256_min_epi32(_mm256_max_epi32(_mm256_sub_epi32(C[v], lo), zero), kmax);
            uint32_t ix[8];
            _mm256_storeu_si256((__m256i *)(void *)ix,
                                _mm256_or_si256(_mm256_slli_epi32(ctx, RANS_BITS), _mm256_and_si256(x, mask12)));
            __m256i e = _mm256_setr_epi32((int)dt[ix[0]], (int)dt[ix[1]], (int)dt[ix[2]], (int)dt[ix[3]],
                                          (int)dt[ix[4]], (int)dt[ix[5]], (int)dt[ix[6]], (int)dt[ix[7]]);
            C[v] = _mm256_and_si256(e, b8);
            X[v] = rc_take8(x, e, &p);
        }
        for (unsigned g = 0; g < RC_G; g++) {
            /* 16 symbols of the group: two vectors of 8 packed to bytes. */
            __m256i a = _mm256_packus_epi32(C[2 * g], C[2 * g + 1]);
            a = _mm256_packus_epi16(a, a);
            a = _mm256_permutevar8x32_epi32(a, ord);
            _mm_storeu_si128((__m128i *)(void *)(dst + g * P + r * RC_W), _mm256_castsi256_si128(a));
        }
    }
    for (unsigned v = 0; v < NV; v++) _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    *pp = p;
    return r;
}

/* The encoder: each group's 16 lanes as two vectors of 8, the upper first, in the
 * reverse of the decoding order, with order 0's step (rans_avx2.h). A lane's row is
 * that of its symbol in the table of its context, the bucket of the byte 16 back
 * (off[v]: bucket of v times 256), so the rows of all K tables sit in one array. */
__attribute__((target("avx2"))) uint8_t *rc_enc_avx2(uint32_t *st, const uint32_t (*vt)[4], const uint32_t *off,
                                                     unsigned m, const uint8_t *src, size_t P, uint8_t *p)
{
    __m256i X[NV];
    for (unsigned v = 0; v < NV; v++) X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
    uint8_t first[RC_W];
    memset(first, (int)m, sizeof first); /* the context of a group's first 16 bytes */
    for (size_t r = P / RC_W; r-- > 0;)
        for (unsigned g = RC_G; g-- > 0;) {
            const uint8_t *q = src + g * P + r * RC_W, *b = r ? q - RC_W : first;
            for (unsigned h = 2; h-- > 0;) {
                const uint8_t *s = q + 8 * h, *c = b + 8 * h;
                const uint32_t *const rows[8] = {vt[off[c[0]] + s[0]], vt[off[c[1]] + s[1]], vt[off[c[2]] + s[2]],
                                                 vt[off[c[3]] + s[3]], vt[off[c[4]] + s[4]], vt[off[c[5]] + s[5]],
                                                 vt[off[c[6]] + s[6]], vt[off[c[7]] + s[7]]};
                X[2 * g + h] = rans_enc8_avx2(X[2 * g + h], rows, &p);
            }
        }
    for (unsigned v = 0; v < NV; v++) _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    return p;
}
#endif
