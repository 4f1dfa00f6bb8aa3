/* predict_avx512.c — the delta predictor's residual fused with the plane split, and with
 * the escape transform, and its inverse (predict.c calls them when cpu_level() allows
 * AVX-512).
 *
 * The residual never leaves registers: 64 elements are predicted and their bytes
 * gathered into planes with vpermt2b, which saves the delta path a store and a reload
 * of every residual byte and runs the prediction 64 bytes wide (about twice the SSE2
 * loop's speed). The split and the escape step are the ones planes_avx512.c and
 * escape_avx512.c use (split512.h, escape512.h), so every path writes the same bytes. */
#include "simd.h"

#ifdef XF_HAVE_X86
#include "escape512.h"
#include "split512.h"

/* Residual of one vector of 16- or 32-bit elements (W = 2 or 4), rotated left by one
 * bit when ROT (XF_FLOAT); constant arguments compile the unused steps out. */
static inline __attribute__((always_inline)) T512 __m512i res_vec(int W, int xor_, int flt, int rot, __m512i u,
                                                                  __m512i v)
{
    __m512i r;
    if (xor_) {
        r = _mm512_xor_si512(u, v);
    } else if (W == 2) {
        if (flt) {
            u = _mm512_xor_si512(u, _mm512_srli_epi16(_mm512_srai_epi16(u, 15), 1));
            v = _mm512_xor_si512(v, _mm512_srli_epi16(_mm512_srai_epi16(v, 15), 1));
        }
        __m512i d = _mm512_sub_epi16(u, v);
        r = _mm512_xor_si512(_mm512_add_epi16(d, d), _mm512_srai_epi16(d, 15));
    } else {
        if (flt) {
            u = _mm512_xor_si512(u, _mm512_srli_epi32(_mm512_srai_epi32(u, 31), 1));
            v = _mm512_xor_si512(v, _mm512_srli_epi32(_mm512_srai_epi32(v, 31), 1));
        }
        __m512i d = _mm512_sub_epi32(u, v);
        r = _mm512_xor_si512(_mm512_add_epi32(d, d), _mm512_srai_epi32(d, 31));
    }
    if (rot) r = W == 2 ? _mm512_or_si512(_mm512_slli_epi16(r, 1), _mm512_srli_epi16(r, 15)) : _mm512_rol_epi32(r, 1);
    return r;
}

#define LD(p) _mm512_loadu_si512((const void *)(p))
#define ST(p, v) _mm512_storeu_si512((void *)(p), v)

/* 64 elements per step, most significant byte to plane 0; returns elements done. */
static inline __attribute__((always_inline)) T512 size_t fs2(int xor_, int flt, int rot, const uint8_t *x,
                                                             const uint8_t *b, size_t elems, uint8_t *p0, uint8_t *p1)
{
    const __m512i hi = split_idx2(1), lo = split_idx2(0);
    size_t e = 0;
    for (; e + 64 <= elems; e += 64) {
        const uint8_t *xs = x + 2 * e, *bs = b + 2 * e;
        __m512i r0 = res_vec(2, xor_, flt, rot, LD(xs), LD(bs));
        __m512i r1 = res_vec(2, xor_, flt, rot, LD(xs + 64), LD(bs + 64));
        split2_step(r0, r1, hi, lo, p0 + e, p1 + e);
    }
    return e;
}

static inline __attribute__((always_inline)) T512 size_t fs4(int xor_, int flt, int rot, const uint8_t *x,
                                                             const uint8_t *b, size_t elems, uint8_t *const *q)
{
    const __m512i top = split_idx4(3), bot = split_idx4(1);
    size_t e = 0;
    for (; e + 64 <= elems; e += 64) {
        const uint8_t *xs = x + 4 * e, *bs = b + 4 * e;
        __m512i r0 = res_vec(4, xor_, flt, rot, LD(xs), LD(bs));
        __m512i r1 = res_vec(4, xor_, flt, rot, LD(xs + 64), LD(bs + 64));
        __m512i r2 = res_vec(4, xor_, flt, rot, LD(xs + 128), LD(bs + 128));
        __m512i r3 = res_vec(4, xor_, flt, rot, LD(xs + 192), LD(bs + 192));
        split4_step(r0, r1, r2, r3, top, bot, q[0] + e, q[1] + e, q[2] + e, q[3] + e);
    }
    return e;
}
#undef LD
#undef ST

#define FS2(X, F, R)                                                                                  \
    T512 static size_t fs2_##X##F##R(const uint8_t *x, const uint8_t *b, size_t n, uint8_t *const *q) \
    {                                                                                                 \
        return fs2(X, F, R, x, b, n, q[0], q[1]);                                                     \
    }
#define FS4(X, F, R)                                                                                  \
    T512 static size_t fs4_##X##F##R(const uint8_t *x, const uint8_t *b, size_t n, uint8_t *const *q) \
    {                                                                                                 \
        return fs4(X, F, R, x, b, n, q);                                                              \
    }
/* XOR (rotated or not), DIFF of integers and of floats (never rotated). */
/* clang-format off */
FS2(1, 0, 0) FS2(1, 0, 1) FS2(0, 0, 0) FS2(0, 1, 0)
FS4(1, 0, 0) FS4(1, 0, 1) FS4(0, 0, 0) FS4(0, 1, 0)
/* clang-format on */
#undef FS2
#undef FS4

/* DIFF, split and escape-coded (escape.h) in one pass, 64 elements per step: the top
 * K = W - L bytes go through esc_step, the L low bytes to their planes. */
/* W, flt and L are constants in every copy below, so that the planes stay in registers
 * and the loop holds no stores but the planes'. */
static inline __attribute__((always_inline)) T512E size_t fe(int W, int flt, unsigned L, unsigned T, const uint8_t *x,
                                                             const uint8_t *b, size_t elems, uint8_t *const *low,
                                                             uint8_t *a, uint8_t *const *e, size_t *ne)
{
    const __m512i t = _mm512_set1_epi8((char)T);
    uint8_t *lo0 = L > 0 ? low[0] : NULL, *lo1 = L > 1 ? low[1] : NULL;
    uint8_t *const es[2] = {e[0], W - L == 2 ? e[1] : NULL};
    size_t i = 0, n_e = *ne;
    if (W == 2) {
        const __m512i ih = split_idx2(1), il = split_idx2(0);
        for (; i + 64 <= elems; i += 64) {
            const uint8_t *xs = x + 2 * i, *bs = b + 2 * i;
            __m512i r0 = res_vec(2, 0, flt, 0, _mm512_loadu_si512((const void *)xs),
                                 _mm512_loadu_si512((const void *)bs));
            __m512i r1 = res_vec(2, 0, flt, 0, _mm512_loadu_si512((const void *)(xs + 64)),
                                 _mm512_loadu_si512((const void *)(bs + 64)));
            __m512i p[2]; /* high bytes, low bytes */
            split2_vec(r0, r1, ih, il, p);
            if (L == 0) {
                esc_step(2, t, p[0], p[1], a + i, es, &n_e);
            } else {
                _mm512_storeu_si512((void *)(lo0 + i), p[1]);
                esc_step(1, t, p[0], p[0], a + i, es, &n_e);
            }
        }
        *ne = n_e;
        return i;
    }
    const __m512i i32 = split_idx4(3), i10 = split_idx4(1);
    for (; i + 64 <= elems; i += 64) {
        const uint8_t *xs = x + 4 * i, *bs = b + 4 * i;
        __m512i p[4];
        split4_vec(res_vec(4, 0, flt, 0, _mm512_loadu_si512((const void *)xs), _mm512_loadu_si512((const void *)bs)),
                   res_vec(4, 0, flt, 0, _mm512_loadu_si512((const void *)(xs + 64)),
                           _mm512_loadu_si512((const void *)(bs + 64))),
                   res_vec(4, 0, flt, 0, _mm512_loadu_si512((const void *)(xs + 128)),
                           _mm512_loadu_si512((const void *)(bs + 128))),
                   res_vec(4, 0, flt, 0, _mm512_loadu_si512((const void *)(xs + 192)),
                           _mm512_loadu_si512((const void *)(bs + 192))),
                   i32, i10, p);
        if (L == 2) {
            _mm512_storeu_si512((void *)(lo0 + i), p[2]);
            _mm512_storeu_si512((void *)(lo1 + i), p[3]);
            esc_step(2, t, p[0], p[1], a + i, es, &n_e);
        } else {
            _mm512_storeu_si512((void *)(lo0 + i), p[1]);
            _mm512_storeu_si512((void *)(lo1 + i), p[2]);
            _mm512_storeu_si512((void *)(low[2] + i), p[3]);
            esc_step(1, t, p[0], p[0], a + i, es, &n_e);
        }
    }
    *ne = n_e;
    return i;
}

/* One copy per element size, float or integer, and number of low planes L (W - L is
 * 1 or 2). */
#define FE(W, F, L)                                                                                       \
    T512E static size_t fe##W##_##F##_##L(unsigned T, const uint8_t *x, const uint8_t *b, size_t n,       \
                                          uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *ne) \
    {                                                                                                     \
        return fe(W, F, L, T, x, b, n, low, a, e, ne);                                                    \
    }
/* clang-format off */
FE(2, 0, 0) FE(2, 0, 1) FE(2, 1, 0) FE(2, 1, 1) FE(4, 0, 2) FE(4, 0, 3) FE(4, 1, 2) FE(4, 1, 3)
/* clang-format on */
#undef FE

/* The inverse of res_vec's DIFF without rotation (the decoder merges diff residuals as
 * integers, then undoes the predictor): z unzigzagged, F(b) added, F undone (F is its
 * own inverse). */
static inline __attribute__((always_inline)) T512 __m512i inv_vec(int W, int flt, __m512i z, __m512i v)
{
    __m512i x;
    if (W == 2) {
        if (flt) v = _mm512_xor_si512(v, _mm512_srli_epi16(_mm512_srai_epi16(v, 15), 1));
        __m512i lsb = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_and_si512(z, _mm512_set1_epi16(1)));
        x = _mm512_add_epi16(_mm512_xor_si512(_mm512_srli_epi16(z, 1), lsb), v);
        if (flt) x = _mm512_xor_si512(x, _mm512_srli_epi16(_mm512_srai_epi16(x, 15), 1));
    } else {
        if (flt) v = _mm512_xor_si512(v, _mm512_srli_epi32(_mm512_srai_epi32(v, 31), 1));
        __m512i lsb = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_and_si512(z, _mm512_set1_epi32(1)));
        x = _mm512_add_epi32(_mm512_xor_si512(_mm512_srli_epi32(z, 1), lsb), v);
        if (flt) x = _mm512_xor_si512(x, _mm512_srli_epi32(_mm512_srai_epi32(x, 31), 1));
    }
    return x;
}

/* 128 bytes per step (two independent vectors); returns elements done. */
#define DI(W, F)                                                                                                  \
    T512 static size_t di##W##_##F(const uint8_t *r, const uint8_t *b, size_t elems, uint8_t *x)                  \
    {                                                                                                             \
        size_t i = 0, n = elems * W;                                                                              \
        for (; i + 128 <= n; i += 128) {                                                                          \
            __m512i x0 = inv_vec(W, F, LD(r + i), LD(b + i)), x1 = inv_vec(W, F, LD(r + i + 64), LD(b + i + 64)); \
            ST(x + i, x0);                                                                                        \
            ST(x + i + 64, x1);                                                                                   \
        }                                                                                                         \
        return i / W;                                                                                             \
    }
#define LD(p) _mm512_loadu_si512((const void *)(p))
#define ST(p, v) _mm512_storeu_si512((void *)(p), v)
/* clang-format off */
DI(2, 0) DI(2, 1) DI(4, 0) DI(4, 1)
/* clang-format on */
#undef DI
#undef LD
#undef ST

    size_t pred_inverse_avx512(int flt, unsigned esize, const uint8_t *r, const uint8_t *b, size_t elems, uint8_t *x)
{
    return esize == 2 ? (flt ? di2_1 : di2_0)(r, b, elems, x) : (flt ? di4_1 : di4_0)(r, b, elems, x);
}

size_t pred_split_avx512(int xor_, int flt, int rot, unsigned esize, const uint8_t *x, const uint8_t *b, size_t elems,
                         uint8_t *const *plane)
{
    typedef size_t (*fn)(const uint8_t *, const uint8_t *, size_t, uint8_t *const *);
    fn f;
    if (xor_) f = esize == 2 ? (rot ? fs2_101 : fs2_100) : (rot ? fs4_101 : fs4_100);
    else f = esize == 2 ? (flt ? fs2_010 : fs2_000) : (flt ? fs4_010 : fs4_000);
    return f(x, b, elems, plane);
}

size_t pred_esc_avx512(unsigned esize, int flt, unsigned L, unsigned T, const uint8_t *x, const uint8_t *b,
                       size_t elems, uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *nesc)
{
    typedef size_t (*fn)(unsigned, const uint8_t *, const uint8_t *, size_t, uint8_t *const *, uint8_t *,
                         uint8_t *const *, size_t *);
    static const fn tab[2][2][2] = {{{fe2_0_0, fe2_0_1}, {fe2_1_0, fe2_1_1}}, {{fe4_0_2, fe4_0_3}, {fe4_1_2, fe4_1_3}}};
    return tab[esize == 4][flt][L - (esize - 2)](T, x, b, elems, low, a, e, nesc);
}
#endif
