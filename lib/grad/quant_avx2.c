/* quant_avx2.c — the AVX2 loops of blockwise gradient quantisation, 8 floats a step, the
 * tail of each call through the portable loop's arithmetic: the same operations as
 * quant.c in the same order (multiply, round or floor, compare against the element's
 * draw, clamp; residual = v - code * scale, not fused), so the codes and residuals are
 * quant.c's bit for bit. The draws are grad.h's hash computed in 32-bit lanes. */
#include "grad/grad.h"

#ifdef GRAD_HAVE_X86
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>

#define TAVX2 __attribute__((target("avx2")))

static TAVX2 void absmax_avx2(const float *a, const float *b, size_t n, uint32_t *acc)
{
    const __m256i mask = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(a + i);
        if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
        m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v), mask));
    }
    uint32_t lanes[8], r = *acc;
    _mm256_storeu_si256((__m256i *)(void *)lanes, m);
    for (int k = 0; k < 8; k++) r = lanes[k] > r ? lanes[k] : r;
    *acc = r;
    if (i < n) grad_kernels_scalar.absmax(a + i, b ? b + i : NULL, n - i, acc);
}

static TAVX2 void add_avx2(float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++) a[i] += b[i];
}

static inline TAVX2 __m256i hash8(__m256i x)
{
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x846ca68bu));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

/* 8 int32 codes (already clamped) to 8 bytes. */
static inline TAVX2 void store8(int8_t *dst, __m256i q)
{
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64((__m128i *)(void *)dst, _mm_packs_epi16(w, w));
}

static TAVX2 void quant_avx2(const grad_qjob *j)
{
    const __m256 inv = _mm256_set1_ps(j->inv), scale = _mm256_set1_ps(j->scale);
    const __m256 unit = _mm256_set1_ps(0x1p-24f);
    const __m256i hi = _mm256_set1_epi32(j->qmax), lo = _mm256_set1_epi32(-j->qmax);
    const __m256i k0 = _mm256_set1_epi32((int)j->key.k0), k1 = _mm256_set1_epi32((int)j->key.k1);
    __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)j->idx), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i step = _mm256_set1_epi32(8);
    /* the job's fields in locals: the stores to the codes (a char type) may alias *j,
     * which the loop would otherwise load again after each */
    const float *src = j->v;
    int8_t *codes = j->codes;
    float *resid = j->resid;
    const int stochastic = j->stochastic;
    size_t i = 0, n = j->n;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i), y = _mm256_mul_ps(v, inv);
        __m256i q;
        if (stochastic) {
            __m256 fl = _mm256_round_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
            __m256 frac = _mm256_sub_ps(y, fl);
            __m256i h = hash8(_mm256_add_epi32(hash8(_mm256_xor_si256(idx, k0)), k1));
            __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), unit);
            __m256i up = _mm256_castps_si256(_mm256_cmp_ps(u, frac, _CMP_LT_OQ));
            q = _mm256_sub_epi32(_mm256_cvttps_epi32(fl), up); /* up is -1 where true */
            idx = _mm256_add_epi32(idx, step);
        } else {
            q = _mm256_cvtps_epi32(y); /* MXCSR's default: to nearest, ties to even */
        }
        q = _mm256_max_epi32(_mm256_min_epi32(q, hi), lo);
        store8(codes + i, q);
        if (resid) _mm256_storeu_ps(resid + i, _mm256_sub_ps(v, _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale)));
    }
    if (i < n) {
        grad_qjob t = *j;
        t.v += i, t.n -= i, t.idx += (uint32_t)i, t.codes += i;
        if (t.resid) t.resid += i;
        grad_kernels_scalar.quant(&t);
    }
}

static TAVX2 void dequant_avx2(const int8_t *codes, size_t n, float scale, float *out)
{
    const __m256 s = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(codes + i)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(c), s));
    }
    if (i < n) grad_kernels_scalar.dequant(codes + i, n - i, scale, out + i);
}

static TAVX2 size_t check_avx2(const int8_t *codes, size_t n, int qmax)
{
    const __m256i hi = _mm256_set1_epi8((char)qmax), lo = _mm256_set1_epi8((char)-qmax);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(codes + i));
        __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi8(c, hi), _mm256_cmpgt_epi8(lo, c));
        if (!_mm256_testz_si256(bad, bad)) break; /* the scalar loop names the first */
    }
    return i + grad_kernels_scalar.check(codes + i, n - i, qmax);
}

/* FP16 through F16C (vcvtph2ps is exact; vcvtps2ph to nearest, ties to even, as the
 * dtype table rounds), on the CPUs that have it: every AVX2 CPU made so far, but it is
 * a feature of its own, asked for here (common/cpu.h has no group for it). */
static int has_f16c(void)
{
    static int f = -1;
    int v = __atomic_load_n(&f, __ATOMIC_RELAXED);
    if (v < 0) { /* CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports has no "f16c") */
        unsigned a, b, c = 0, d;
        v = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
        __atomic_store_n(&f, v, __ATOMIC_RELAXED);
    }
    return v;
}

static __attribute__((target("avx2,f16c"))) void widen_avx2(int f16, const uint8_t *src, size_t n, float *out)
{
    size_t i = 0;
    if (f16 && !has_f16c()) {
        grad_kernels_scalar.widen(f16, src, n, out);
        return;
    }
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
        __m256 f = f16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        _mm256_storeu_ps(out + i, f);
    }
    if (i < n) grad_kernels_scalar.widen(f16, src + 2 * i, n - i, out + i);
}

static __attribute__((target("avx2,f16c"))) void narrow_avx2(int f16, const float *in, size_t n, uint8_t *dst)
{
    size_t i = 0;
    if (f16 && !has_f16c()) {
        grad_kernels_scalar.narrow(f16, in, n, dst);
        return;
    }
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i mag = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x400000);
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(in + i);
        __m128i h;
        if (f16) {
            h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        } else { /* dt_st_b32: a NaN made quiet, else to nearest, ties to even */
            __m256i u = _mm256_castps_si256(f);
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, mag), inf);
            __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
            u = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
            u = _mm256_srli_epi32(u, 16);
            h = _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
        }
        _mm_storeu_si128((__m128i *)(void *)(dst + 2 * i), h);
    }
    if (i < n) grad_kernels_scalar.narrow(f16, in + i, n - i, dst + 2 * i);
}

/* 32 codes to 16 bytes: the low nibbles of each pair weighted 1 and 16 (vpmaddubsw),
 * the 16-bit sums packed to bytes. */
static TAVX2 void nib_pack_avx2(const int8_t *q, size_t pairs, uint8_t *dst)
{
    const __m256i low = _mm256_set1_epi8(0x0f), w = _mm256_set1_epi16(0x1001);
    size_t k = 0;
    for (; k + 16 <= pairs; k += 16) {
        __m256i c = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(q + 2 * k)), low);
        __m256i s = _mm256_maddubs_epi16(c, w);
        __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        _mm_storeu_si128((__m128i *)(void *)(dst + k), b);
    }
    if (k < pairs) grad_kernels_scalar.nib_pack(q + 2 * k, pairs - k, dst + k);
}

/* 16 bytes to 32 codes: the halves interleaved, sign-extended as (x ^ 8) - 8. */
static TAVX2 void nib_unpack_avx2(const uint8_t *src, size_t pairs, int8_t *q)
{
    const __m128i low = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    size_t k = 0;
    for (; k + 16 <= pairs; k += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + k));
        __m128i lo = _mm_and_si128(b, low), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
        lo = _mm_sub_epi8(_mm_xor_si128(lo, eight), eight);
        hi = _mm_sub_epi8(_mm_xor_si128(hi, eight), eight);
        _mm_storeu_si128((__m128i *)(void *)(q + 2 * k), _mm_unpacklo_epi8(lo, hi));
        _mm_storeu_si128((__m128i *)(void *)(q + 2 * k + 16), _mm_unpackhi_epi8(lo, hi));
    }
    if (k < pairs) grad_kernels_scalar.nib_unpack(src + k, pairs - k, q + 2 * k);
}

/* 1-bit codes: from an element whose index is a multiple of 8, 8 signs a byte (the
 * compare's mask; a NaN compares false, as v < 0 does in the portable loop) and the
 * residuals v - (+-scale), the same subtraction as the portable loop; the ends there. */
static TAVX2 void sign_quant_avx2(const float *v, size_t n, float scale, uint8_t *c, uint64_t i, float *resid)
{
    size_t k = (size_t)((8 - (i & 7)) & 7);
    if (k > n) k = n;
    if (k) grad_sign_quant(v, k, scale, c, i, resid);
    const __m256 zero = _mm256_setzero_ps(), pos = _mm256_set1_ps(scale), neg = _mm256_set1_ps(-scale);
    for (; k + 8 <= n; k += 8) {
        __m256 x = _mm256_loadu_ps(v + k), lt = _mm256_cmp_ps(x, zero, _CMP_LT_OQ);
        c[(i + k) >> 3] = (uint8_t)~_mm256_movemask_ps(lt);
        if (resid) _mm256_storeu_ps(resid + k, _mm256_sub_ps(x, _mm256_blendv_ps(pos, neg, lt)));
    }
    if (k < n) grad_sign_quant(v + k, n - k, scale, c, i + k, resid ? resid + k : NULL);
}

/* 32 signs (4 bytes) to 32 codes +-1: each byte spread over 8 lanes, its bit picked. */
static TAVX2 void sign_get_avx2(const uint8_t *c, uint64_t i, size_t n, int8_t *q)
{
    size_t k = (size_t)((8 - (i & 7)) & 7);
    if (k > n) k = n;
    if (k) grad_sign_get(c, i, k, q);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i two = _mm256_set1_epi8(2), one = _mm256_set1_epi8(1);
    for (; k + 32 <= n; k += 32) {
        uint32_t w;
        __builtin_memcpy(&w, c + ((i + k) >> 3), 4);
        __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), spread);
        __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
        _mm256_storeu_si256((__m256i *)(void *)(q + k), _mm256_sub_epi8(_mm256_and_si256(set, two), one));
    }
    if (k < n) grad_sign_get(c, i + k, n - k, q + k);
}

const grad_kernels grad_kernels_avx2 = {absmax_avx2,     add_avx2,        quant_avx2,   dequant_avx2,
                                        check_avx2,      widen_avx2,      narrow_avx2,  nib_pack_avx2,
                                        nib_unpack_avx2, sign_quant_avx2, sign_get_avx2};
#endif
