/* predict_avx2.c — the delta predictor's DIFF residual fused with the plane split and the
 * escape transform, and its inverse, in AVX2, for CPUs without AVX-512 (predict.c calls
 * them when cpu_level() is CPU_AVX2 and the AVX-512 loops cannot run). As the AVX-512
 * loop (predict_avx512.c) does it 64 elements a step, this one takes 32: the residual
 * never leaves registers, its bytes are gathered into planes (split256.h's step) and its
 * top bytes escape-coded (escape256.h's step), one pass where the path without it makes
 * three (the SSE2 residual, the split, the escapes). Writes the same bytes as those. */
#include "simd.h"

#ifdef XF_HAVE_X86
#include "escape256.h"

/* F, the float map (sign-magnitude to ordered integers), on 16- or 32-bit lanes. */
AI256 __m256i fmap256(int W, int flt, __m256i v)
{
    if (!flt) return v;
    return W == 2 ? _mm256_xor_si256(v, _mm256_srli_epi16(_mm256_srai_epi16(v, 15), 1))
                  : _mm256_xor_si256(v, _mm256_srli_epi32(_mm256_srai_epi32(v, 31), 1));
}

/* The zigzagged difference F(u) - F(v) of one vector of W-byte elements. */
AI256 __m256i res256(int W, int flt, const uint8_t *x, const uint8_t *b)
{
    __m256i u = fmap256(W, flt, ld256(x)), v = fmap256(W, flt, ld256(b));
    if (W == 2) {
        __m256i d = _mm256_sub_epi16(u, v);
        return _mm256_xor_si256(_mm256_add_epi16(d, d), _mm256_srai_epi16(d, 15));
    }
    __m256i d = _mm256_sub_epi32(u, v);
    return _mm256_xor_si256(_mm256_add_epi32(d, d), _mm256_srai_epi32(d, 31));
}

/* W, flt and L are constants in every copy below: the top K = W - L bytes go through the
 * escape step, the L low bytes to their planes. */
AI256 size_t fe256(int W, int flt, unsigned L, unsigned T, const uint8_t *x, const uint8_t *b, size_t elems,
                   uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *ne)
{
    const struct esc_tables *tb = esc_tables256();
    const __m256i t = _mm256_set1_epi8((char)T);
    size_t i = 0, n_e = *ne;
    for (; i + 32 <= elems; i += 32) {
        __m256i p[4];
        if (W == 2) {
            split2_vec256(res256(2, flt, x + 2 * i, b + 2 * i), res256(2, flt, x + 2 * i + 32, b + 2 * i + 32), p);
        } else {
            const uint8_t *xs = x + 4 * i, *bs = b + 4 * i;
            split4_vec256(res256(4, flt, xs, bs), res256(4, flt, xs + 32, bs + 32), res256(4, flt, xs + 64, bs + 64),
                          res256(4, flt, xs + 96, bs + 96), p);
        }
        unsigned K = (unsigned)W - L;
        for (unsigned k = 0; k < L; k++) st256(low[k] + i, p[K + k]);
        if (K == 2) esc_step256(tb, 2, t, p[0], p[1], a + i, e, &n_e);
        else esc_step256(tb, 1, t, p[0], p[0], a + i, e, &n_e);
    }
    *ne = n_e;
    return i;
}

#define FE(W, F, L)                                                                                      \
    T256 static size_t fe##W##_##F##_##L(unsigned T, const uint8_t *x, const uint8_t *b, size_t n,       \
                                         uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *ne) \
    {                                                                                                    \
        return fe256(W, F, L, T, x, b, n, low, a, e, ne);                                                \
    }
/* clang-format off */
FE(2, 0, 0) FE(2, 0, 1) FE(2, 1, 0) FE(2, 1, 1) FE(4, 0, 2) FE(4, 0, 3) FE(4, 1, 2) FE(4, 1, 3)
/* clang-format on */
#undef FE

/* The inverse of res256 (the decoder merges diff residuals as integers, then undoes the
 * predictor): z unzigzagged, F(b) added, F undone (F is its own inverse). */
AI256 __m256i inv256(int W, int flt, __m256i z, __m256i v)
{
    v = fmap256(W, flt, v);
    __m256i x;
    if (W == 2) {
        __m256i lsb = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_and_si256(z, _mm256_set1_epi16(1)));
        x = _mm256_add_epi16(_mm256_xor_si256(_mm256_srli_epi16(z, 1), lsb), v);
    } else {
        __m256i lsb = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_and_si256(z, _mm256_set1_epi32(1)));
        x = _mm256_add_epi32(_mm256_xor_si256(_mm256_srli_epi32(z, 1), lsb), v);
    }
    return fmap256(W, flt, x);
}

/* 64 bytes a step (two independent vectors); returns the elements done. */
#define DI(W, F)                                                                                 \
    T256 static size_t di##W##_##F(const uint8_t *r, const uint8_t *b, size_t elems, uint8_t *x) \
    {                                                                                            \
        size_t i = 0, n = elems * W;                                                             \
        for (; i + 64 <= n; i += 64) {                                                           \
            __m256i x0 = inv256(W, F, ld256(r + i), ld256(b + i)),                               \
                    x1 = inv256(W, F, ld256(r + i + 32), ld256(b + i + 32));                     \
            st256(x + i, x0);                                                                    \
            st256(x + i + 32, x1);                                                               \
        }                                                                                        \
        return i / W;                                                                            \
    }
/* clang-format off */
DI(2, 0) DI(2, 1) DI(4, 0) DI(4, 1)
/* clang-format on */
#undef DI

    size_t pred_inverse_avx2(int flt, unsigned esize, const uint8_t *r, const uint8_t *b, size_t elems, uint8_t *x)
{
    return esize == 2 ? (flt ? di2_1 : di2_0)(r, b, elems, x) : (flt ? di4_1 : di4_0)(r, b, elems, x);
}

size_t pred_esc_avx2(unsigned esize, int flt, unsigned L, unsigned T, const uint8_t *x, const uint8_t *b, size_t elems,
                     uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *nesc)
{
    typedef size_t (*fn)(unsigned, const uint8_t *, const uint8_t *, size_t, uint8_t *const *, uint8_t *,
                         uint8_t *const *, size_t *);
    static const fn tab[2][2][2] = {{{fe2_0_0, fe2_0_1}, {fe2_1_0, fe2_1_1}}, {{fe4_0_2, fe4_0_3}, {fe4_1_2, fe4_1_3}}};
    return tab[esize == 4][flt][L - (esize - 2)](T, x, b, elems, low, a, e, nesc);
}
#endif
