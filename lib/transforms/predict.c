/* predict.c — delta predictors against a base chunk and their choice (see predict.h).
 *
 * DIFF uses F(u) = u ^ (sign ? 0x7f..f : 0) in place of M: F(u) = M(u) ^ signbit, and
 * flipping the top bit is adding 2^(bits-1), so F(x) - F(b) = M(x) - M(b) mod 2^bits.
 * F is its own inverse (it keeps the sign bit), which makes the inverse one more F.
 * Forward and inverse touch every byte of every delta chunk, so they have SSE2 loops —
 * baseline on x86-64, no run-time dispatch — for every width, 32 or 64 bytes per step
 * (about 20 GB/s for float DIFF, 50 for XOR from L2); the portable loops handle other
 * hosts and the last few elements; AVX-512 loops fuse the residual with the plane split
 * (predict_avx512.c). The choice histograms a sample of at most 16 KiB. */
#include "predict.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/cpu.h"
#include "common/dtype.h"
#include "escape.h"
#include "planes.h"
#include "simd.h"

const char *pred_name(uint8_t pred)
{
    switch (pred) {
    case PRED_NONE: return "none";
    case PRED_XOR: return "xor";
    case PRED_DIFF: return "diff";
    case PRED_COPY: return "copy";
    }
    return "?";
}

int pred_is_float(ckpz_dtype dtype) { return dtype_is_float(dtype); }

void pred_transform(uint8_t pred, ckpz_dtype dtype, uint8_t *xf, uint8_t *esize)
{
    if (pred != PRED_DIFF) {
        xf_choose(dtype, xf, esize);
        return;
    }
    unsigned s = ckpz_dtype_size(dtype);
    if (s == 2 || s == 4 || s == 8) {
        *xf = XF_INT;
        *esize = (uint8_t)s;
    } else {
        *xf = XF_NONE;
        *esize = 1;
    }
}

/* ---- element maps (portable) ------------------------------------------------------ */
/* All-ones if the top bit of u (W bytes) is set, else 0. */
#define SIGNMASK(T, W, u) ((T)(0 - (T)((u) >> (8 * (W) - 1))))
/* F above; the identity unless FLT. */
#define FMAP(T, W, FLT, u) ((FLT) ? (T)((u) ^ (T)(SIGNMASK(T, W, u) >> 1)) : (u))
#define ZIGZAG(T, W, d) ((T)((T)((d) << 1) ^ SIGNMASK(T, W, d)))
#define UNZIGZAG(T, z) ((T)(((z) >> 1) ^ (T)(0 - (T)((z) & 1))))

#define DIFF_FWD_LOOP(T, W, FLT)                            \
    for (size_t i = 0; i + (W) <= n; i += (W)) {            \
        T u, v;                                             \
        memcpy(&u, x + i, W);                               \
        memcpy(&v, b + i, W);                               \
        T d = (T)(FMAP(T, W, FLT, u) - FMAP(T, W, FLT, v)); \
        d = ZIGZAG(T, W, d);                                \
        memcpy(r + i, &d, W);                               \
    }

#define DIFF_INV_LOOP(T, W, FLT)                        \
    for (size_t i = 0; i + (W) <= n; i += (W)) {        \
        T z, v;                                         \
        memcpy(&z, r + i, W);                           \
        memcpy(&v, b + i, W);                           \
        T m = (T)(UNZIGZAG(T, z) + FMAP(T, W, FLT, v)); \
        m = FMAP(T, W, FLT, m);                         \
        memcpy(x + i, &m, W);                           \
    }

/* Whole elements of n bytes; a partial last element is left to the caller. */
static void diff_fwd_scalar(unsigned esize, int flt, const uint8_t *x, const uint8_t *b, size_t n, uint8_t *r)
{
    switch (esize) {
    /* clang-format off */
    case 1: if (flt) { DIFF_FWD_LOOP(uint8_t, 1, 1) } else { DIFF_FWD_LOOP(uint8_t, 1, 0) } break;
    case 2: if (flt) { DIFF_FWD_LOOP(uint16_t, 2, 1) } else { DIFF_FWD_LOOP(uint16_t, 2, 0) } break;
    case 4: if (flt) { DIFF_FWD_LOOP(uint32_t, 4, 1) } else { DIFF_FWD_LOOP(uint32_t, 4, 0) } break;
    default: if (flt) { DIFF_FWD_LOOP(uint64_t, 8, 1) } else { DIFF_FWD_LOOP(uint64_t, 8, 0) } break;
    /* clang-format on */
    }
}

static void diff_inv_scalar(unsigned esize, int flt, const uint8_t *r, const uint8_t *b, size_t n, uint8_t *x)
{
    switch (esize) {
    /* clang-format off */
    case 1: if (flt) { DIFF_INV_LOOP(uint8_t, 1, 1) } else { DIFF_INV_LOOP(uint8_t, 1, 0) } break;
    case 2: if (flt) { DIFF_INV_LOOP(uint16_t, 2, 1) } else { DIFF_INV_LOOP(uint16_t, 2, 0) } break;
    case 4: if (flt) { DIFF_INV_LOOP(uint32_t, 4, 1) } else { DIFF_INV_LOOP(uint32_t, 4, 0) } break;
    default: if (flt) { DIFF_INV_LOOP(uint64_t, 8, 1) } else { DIFF_INV_LOOP(uint64_t, 8, 0) } break;
    /* clang-format on */
    }
}

/* ---- SSE2 loops ------------------------------------------------------------------- */
#if defined(__SSE2__)
/* Per lane width N: all-ones where the top bit is set, logical shift right by 1,
 * add, subtract, and the constant 1. SSE2 has no 8-bit shifts and no 64-bit
 * arithmetic shift: bytes compare against zero, 64-bit lanes copy the high dword's. */
static inline __m128i sra_8(__m128i v) { return _mm_cmpgt_epi8(_mm_setzero_si128(), v); }
static inline __m128i sra_16(__m128i v) { return _mm_srai_epi16(v, 15); }
static inline __m128i sra_32(__m128i v) { return _mm_srai_epi32(v, 31); }
static inline __m128i sra_64(__m128i v) { return _mm_shuffle_epi32(_mm_srai_epi32(v, 31), _MM_SHUFFLE(3, 3, 1, 1)); }
static inline __m128i srl1_8(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 1), _mm_set1_epi8(0x7f)); }
static inline __m128i srl1_16(__m128i v) { return _mm_srli_epi16(v, 1); }
static inline __m128i srl1_32(__m128i v) { return _mm_srli_epi32(v, 1); }
static inline __m128i srl1_64(__m128i v) { return _mm_srli_epi64(v, 1); }
static inline __m128i add_8(__m128i a, __m128i b) { return _mm_add_epi8(a, b); }
static inline __m128i add_16(__m128i a, __m128i b) { return _mm_add_epi16(a, b); }
static inline __m128i add_32(__m128i a, __m128i b) { return _mm_add_epi32(a, b); }
static inline __m128i add_64(__m128i a, __m128i b) { return _mm_add_epi64(a, b); }
static inline __m128i sub_8(__m128i a, __m128i b) { return _mm_sub_epi8(a, b); }
static inline __m128i sub_16(__m128i a, __m128i b) { return _mm_sub_epi16(a, b); }
static inline __m128i sub_32(__m128i a, __m128i b) { return _mm_sub_epi32(a, b); }
static inline __m128i sub_64(__m128i a, __m128i b) { return _mm_sub_epi64(a, b); }
static inline __m128i one_8(void) { return _mm_set1_epi8(1); }
static inline __m128i one_16(void) { return _mm_set1_epi16(1); }
static inline __m128i one_32(void) { return _mm_set1_epi32(1); }
static inline __m128i one_64(void) { return _mm_set1_epi64x(1); }

#define LOADU(p) _mm_loadu_si128((const __m128i *)(p))
#define STOREU(p, v) _mm_storeu_si128((__m128i *)(p), v)

/* 32 bytes per step (two independent vectors); FLT is a constant at each call site,
 * so the F map is compiled in or out. Returns how many bytes were done. */
#define DIFF_SSE2(N)                                                                                                \
    static inline __m128i fmap_##N(__m128i v, int flt) { return flt ? _mm_xor_si128(v, srl1_##N(sra_##N(v))) : v; } \
    static inline __m128i fwd_##N(__m128i u, __m128i v, int flt)                                                    \
    {                                                                                                               \
        __m128i d = sub_##N(fmap_##N(u, flt), fmap_##N(v, flt));                                                    \
        return _mm_xor_si128(add_##N(d, d), sra_##N(d));                                                            \
    }                                                                                                               \
    static inline __m128i inv_##N(__m128i z, __m128i v, int flt)                                                    \
    {                                                                                                               \
        __m128i lsb = sub_##N(_mm_setzero_si128(), _mm_and_si128(z, one_##N()));                                    \
        __m128i d = _mm_xor_si128(srl1_##N(z), lsb);                                                                \
        return fmap_##N(add_##N(d, fmap_##N(v, flt)), flt);                                                         \
    }                                                                                                               \
    static size_t diff_fwd_sse2_##N(const uint8_t *x, const uint8_t *b, size_t n, uint8_t *r, int flt)              \
    {                                                                                                               \
        size_t i = 0;                                                                                               \
        if (flt) {                                                                                                  \
            for (; i + 32 <= n; i += 32) {                                                                          \
                __m128i z0 = fwd_##N(LOADU(x + i), LOADU(b + i), 1);                                                \
                __m128i z1 = fwd_##N(LOADU(x + i + 16), LOADU(b + i + 16), 1);                                      \
                STOREU(r + i, z0);                                                                                  \
                STOREU(r + i + 16, z1);                                                                             \
            }                                                                                                       \
        } else {                                                                                                    \
            for (; i + 32 <= n; i += 32) {                                                                          \
                __m128i z0 = fwd_##N(LOADU(x + i), LOADU(b + i), 0);                                                \
                __m128i z1 = fwd_##N(LOADU(x + i + 16), LOADU(b + i + 16), 0);                                      \
                STOREU(r + i, z0);                                                                                  \
                STOREU(r + i + 16, z1);                                                                             \
            }                                                                                                       \
        }                                                                                                           \
        return i;                                                                                                   \
    }                                                                                                               \
    static size_t diff_inv_sse2_##N(const uint8_t *r, const uint8_t *b, size_t n, uint8_t *x, int flt)              \
    {                                                                                                               \
        size_t i = 0;                                                                                               \
        if (flt) {                                                                                                  \
            for (; i + 32 <= n; i += 32) {                                                                          \
                __m128i x0 = inv_##N(LOADU(r + i), LOADU(b + i), 1);                                                \
                __m128i x1 = inv_##N(LOADU(r + i + 16), LOADU(b + i + 16), 1);                                      \
                STOREU(x + i, x0);                                                                                  \
                STOREU(x + i + 16, x1);                                                                             \
            }                                                                                                       \
        } else {                                                                                                    \
            for (; i + 32 <= n; i += 32) {                                                                          \
                __m128i x0 = inv_##N(LOADU(r + i), LOADU(b + i), 0);                                                \
                __m128i x1 = inv_##N(LOADU(r + i + 16), LOADU(b + i + 16), 0);                                      \
                STOREU(x + i, x0);                                                                                  \
                STOREU(x + i + 16, x1);                                                                             \
            }                                                                                                       \
        }                                                                                                           \
        return i;                                                                                                   \
    }

DIFF_SSE2(8)
DIFF_SSE2(16)
DIFF_SSE2(32)
DIFF_SSE2(64)

/* 64 bytes per step; returns how many bytes were done. */
static size_t xor_sse2(const uint8_t *x, const uint8_t *b, size_t n, uint8_t *r)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a0 = _mm_xor_si128(LOADU(x + i), LOADU(b + i));
        __m128i a1 = _mm_xor_si128(LOADU(x + i + 16), LOADU(b + i + 16));
        __m128i a2 = _mm_xor_si128(LOADU(x + i + 32), LOADU(b + i + 32));
        __m128i a3 = _mm_xor_si128(LOADU(x + i + 48), LOADU(b + i + 48));
        STOREU(r + i, a0);
        STOREU(r + i + 16, a1);
        STOREU(r + i + 32, a2);
        STOREU(r + i + 48, a3);
    }
    for (; i + 16 <= n; i += 16) STOREU(r + i, _mm_xor_si128(LOADU(x + i), LOADU(b + i)));
    return i;
}
#endif

/* ---- forward and inverse ---------------------------------------------------------- */
static void xor_bytes(const uint8_t *x, const uint8_t *b, size_t n, uint8_t *r)
{
    size_t i = 0;
#if defined(__SSE2__)
    i = xor_sse2(x, b, n, r);
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t u, v;
        memcpy(&u, x + i, 8);
        memcpy(&v, b + i, 8);
        u ^= v;
        memcpy(r + i, &u, 8);
    }
    for (; i < n; i++) r[i] = x[i] ^ b[i];
}

void pred_forward(uint8_t pred, unsigned esize, int is_float, const uint8_t *x, const uint8_t *b, size_t n, uint8_t *r)
{
    if (pred == PRED_XOR) {
        xor_bytes(x, b, n, r);
        return;
    }
    if (pred == PRED_COPY) {
        memset(r, 0, n);
        return;
    }
    if (pred != PRED_DIFF) {
        if (r != x) memcpy(r, x, n);
        return;
    }
    if (esize != 2 && esize != 4 && esize != 8) esize = 1;
    int flt = is_float != 0;
    size_t whole = n - n % esize, done = 0;
#if defined(__SSE2__)
    switch (esize) {
    case 1: done = diff_fwd_sse2_8(x, b, whole, r, flt); break;
    case 2: done = diff_fwd_sse2_16(x, b, whole, r, flt); break;
    case 4: done = diff_fwd_sse2_32(x, b, whole, r, flt); break;
    default: done = diff_fwd_sse2_64(x, b, whole, r, flt); break;
    }
#endif
    diff_fwd_scalar(esize, flt, x + done, b + done, whole - done, r + done);
    if (whole < n) diff_fwd_scalar(1, 0, x + whole, b + whole, n - whole, r + whole);
}

void pred_inverse(uint8_t pred, unsigned esize, int is_float, const uint8_t *r, const uint8_t *b, size_t n, uint8_t *x)
{
    if (pred == PRED_XOR) {
        xor_bytes(r, b, n, x);
        return;
    }
    if (pred == PRED_COPY) {
        if (x != b) memcpy(x, b, n);
        return;
    }
    if (pred != PRED_DIFF) {
        if (x != r) memcpy(x, r, n);
        return;
    }
    if (esize != 2 && esize != 4 && esize != 8) esize = 1;
    int flt = is_float != 0;
    size_t whole = n - n % esize, done = 0;
#ifdef XF_HAVE_X86
    /* 64 bytes wide: with the SSE2 loop it was a fifth of restoring a BF16 delta file */
    if ((esize == 2 || esize == 4) && cpu_level() >= CPU_AVX2)
        done = (cpu_level() >= CPU_AVX512 ? pred_inverse_avx512(flt, esize, r, b, whole / esize, x)
                                          : pred_inverse_avx2(flt, esize, r, b, whole / esize, x)) *
               esize;
#endif
#if defined(__SSE2__)
    if (!done) switch (esize) {
        case 1: done = diff_inv_sse2_8(r, b, whole, x, flt); break;
        case 2: done = diff_inv_sse2_16(r, b, whole, x, flt); break;
        case 4: done = diff_inv_sse2_32(r, b, whole, x, flt); break;
        default: done = diff_inv_sse2_64(r, b, whole, x, flt); break;
        }
#endif
    diff_inv_scalar(esize, flt, r + done, b + done, whole - done, x + done);
    if (whole < n) diff_inv_scalar(1, 0, r + whole, b + whole, n - whole, x + whole);
}

/* ---- residual and plane split in one pass (predict_avx512.c) ----------------------- */
size_t pred_forward_split(uint8_t pred, uint8_t xf, unsigned esize, int is_float, const uint8_t *x, const uint8_t *b,
                          size_t n, uint8_t *const *plane)
{
#ifdef XF_HAVE_X86
    if ((pred != PRED_XOR && pred != PRED_DIFF) || (xf != XF_INT && xf != XF_FLOAT) || (esize != 2 && esize != 4) ||
        cpu_level() < CPU_AVX512)
        return 0;
    int rot = xf == XF_FLOAT;
    if (pred == PRED_DIFF && rot) /* DIFF is split as integers: no rotation */
        return 0;
    return pred_split_avx512(pred == PRED_XOR, is_float != 0, rot, esize, x, b, n / esize, plane) * esize;
#else
    (void)pred, (void)xf, (void)esize, (void)is_float, (void)x, (void)b, (void)n, (void)plane;
    return 0;
#endif
}

size_t pred_forward_esc(unsigned esize, int is_float, unsigned L, unsigned T, const uint8_t *x, const uint8_t *b,
                        size_t n, uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *nesc)
{
#ifdef XF_HAVE_X86
    if ((esize != 2 && esize != 4) || L >= esize || esize - L > 2 || cpu_level() < CPU_AVX2) return 0;
    if (cpu_features() & CPU_VBMI2)
        return pred_esc_avx512(esize, is_float != 0, L, T, x, b, n / esize, low, a, e, nesc);
    return pred_esc_avx2(esize, is_float != 0, L, T, x, b, n / esize, low, a, e, nesc);
#else
    (void)esize, (void)is_float, (void)L, (void)T, (void)x, (void)b, (void)n, (void)low, (void)a, (void)e, (void)nesc;
    return 0;
#endif
}

/* ---- choice ----------------------------------------------------------------------- */
/* The sample: NWIN windows of WIN consecutive elements (half as many for 8-byte ones,
 * so that no dtype reads more than 16 KiB of each side), first and last at the ends.
 * Windows of 2 KiB for 4-byte elements were 2% faster on f32 deltas but chose worse on
 * Adam's exp_avg (0.3% larger). */
enum { WIN = 1024, NWIN = 4, SAMPLE = WIN * NWIN };

/* c * log2(c) for every count a sample can reach, filled on first use (every thread
 * that races here writes the same values). */
static float clog_tab[SAMPLE + 1];
static int clog_ready;

static void make_clog(void)
{
    for (unsigned c = 2; c <= SAMPLE; c++) clog_tab[c] = (float)(c * log2((double)c));
    __atomic_store_n(&clog_ready, 1, __ATOMIC_RELEASE);
}

/* Histograms of the three candidates' planes: [candidate][byte of the element][value].
 * Bytes are indexed least-significant first; the order of planes does not change
 * the estimate. Candidates: 0 = x itself, 1 = x ^ b, 2 = the DIFF residual, where
 * NONE and XOR are rotated left by 1 for floats wider than a byte (XF_FLOAT). */
typedef uint32_t hist3[3][8][256];

#define ROTL1(T, W, v) ((T)((T)((v) << 1) | (T)((v) >> (8 * (W) - 1))))
#define HIST_ONE(T, W, FLT, e, H)                                  \
    do {                                                           \
        T u, v;                                                    \
        memcpy(&u, x + (e) * (W), W);                              \
        memcpy(&v, b + (e) * (W), W);                              \
        T o = (T)(u ^ v);                                          \
        T d = (T)(FMAP(T, W, FLT, u) - FMAP(T, W, FLT, v));        \
        d = ZIGZAG(T, W, d);                                       \
        if ((FLT) && (W) > 1) {                                    \
            u = ROTL1(T, W, u);                                    \
            o = ROTL1(T, W, o);                                    \
        }                                                          \
        _Pragma("GCC unroll 8") for (unsigned k = 0; k < (W); k++) \
        {                                                          \
            (H)[0][k][(uint8_t)(u >> (8 * k))]++;                  \
            (H)[1][k][(uint8_t)(o >> (8 * k))]++;                  \
            (H)[2][k][(uint8_t)(d >> (8 * k))]++;                  \
        }                                                          \
    } while (0)
/* Even and odd elements go to their own set: the top bytes repeat a few values, and
 * one set made every element wait for the previous one's increment of the same count. */
#define HIST_LOOP(T, W, FLT)              \
    size_t e = 0;                         \
    for (; e + 2 <= cnt; e += 2) {        \
        HIST_ONE(T, W, FLT, e, h[0]);     \
        HIST_ONE(T, W, FLT, e + 1, h[1]); \
    }                                     \
    if (e < cnt) HIST_ONE(T, W, FLT, e, h[0]);

/* Adds cnt elements of x and b to the two sets of histograms h[0] and h[1]. */
static void hist_window(unsigned esize, int flt, const uint8_t *x, const uint8_t *b, size_t cnt, hist3 *h)
{
    switch (esize) {
    /* clang-format off */
    case 1: if (flt) { HIST_LOOP(uint8_t, 1, 1) } else { HIST_LOOP(uint8_t, 1, 0) } break;
    case 2: if (flt) { HIST_LOOP(uint16_t, 2, 1) } else { HIST_LOOP(uint16_t, 2, 0) } break;
    case 4: if (flt) { HIST_LOOP(uint32_t, 4, 1) } else { HIST_LOOP(uint32_t, 4, 0) } break;
    default: if (flt) { HIST_LOOP(uint64_t, 8, 1) } else { HIST_LOOP(uint64_t, 8, 0) } break;
    /* clang-format on */
    }
}

/* Order-0 entropy in bits of `planes` histograms of `total` symbols each. */
static double planes_bits(uint32_t (*hp)[256], unsigned planes, uint32_t total)
{
    double bits = 0;
    for (unsigned k = 0; k < planes; k++) {
        float s = 0;
        for (unsigned v = 0; v < 256; v++) s += clog_tab[hp[k][v]];
        bits += (double)clog_tab[total] - (double)s;
    }
    return bits;
}

/* Residual bytes whose sample entropy reaches this many bits look random: the escape
 * transform keeps them as byte planes (escape.h). */
#define RANDOM_BITS 7.5
/* Share of elements that must fit the escape transform's A plane (no escape). */
#define ESC_MIN_FIT 0.5
/* Below this share fitting A at T = ESC_T_SMALL, T = ESC_T_WIDE, in chunks of at least
 * ESC_WIDE_MIN elements. */
#define ESC_WIDE_BELOW 0.75
#define ESC_WIDE_MIN 16384

uint8_t pred_choose(ckpz_dtype dtype, const uint8_t *x, const uint8_t *b, size_t n, int *diff_low, unsigned *esc_t)
{
    if (diff_low) *diff_low = -1;
    if (esc_t) *esc_t = ESC_T_SMALL;
    uint8_t xf, es;
    xf_choose(dtype, &xf, &es);
    /* Rotation (XF_FLOAT) only ever comes with a float dtype, so one flag serves both. */
    int flt = pred_is_float(dtype);
    size_t elems = n / es;
    if (!elems) return PRED_NONE;
    if (!__atomic_load_n(&clog_ready, __ATOMIC_ACQUIRE)) make_clog();

    hist3 hs[2];
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 3; c++) memset(hs[s][c], 0, es * sizeof hs[s][c][0]);
    size_t win = es == 8 ? WIN / 2 : WIN;
    uint32_t total;
    if (elems <= NWIN * win) {
        hist_window(es, flt, x, b, elems, hs);
        total = (uint32_t)elems;
    } else {
        for (size_t w = 0; w < NWIN; w++) {
            size_t at = (elems - win) / (NWIN - 1) * w * es;
            hist_window(es, flt, x + at, b + at, win, hs);
        }
        total = (uint32_t)(NWIN * win);
    }
    uint32_t(*h)[8][256] = hs[0];
    for (int c = 0; c < 3; c++)
        for (unsigned k = 0; k < es; k++)
            for (unsigned v = 0; v < 256; v++) h[c][k][v] += hs[1][c][k][v];
    double none = planes_bits(h[0], es, total);
    double bx = planes_bits(h[1], es, total);
    double bd = planes_bits(h[2], es, total);
    if (diff_low && es >= 2 && es <= 4) {
        /* Low bytes that look random stay plain, and at most the top two bytes are
         * escape-coded; worth it when most elements fit A (estimated as if the top
         * bytes were independent), else the escapes would outweigh A. */
        unsigned L = 0;
        while (L + 1 < es && planes_bits(&h[2][L], 1, total) >= RANDOM_BITS * total) L++;
        if (L + 2 < es) L = es - 2;
        double fit[2] = {0, 0}; /* below ESC_T_SMALL, below ESC_T_WIDE */
        for (unsigned v = 0; v < ESC_T_WIDE; v++) fit[v >= ESC_T_SMALL] += h[2][L][v];
        fit[1] += fit[0];
        for (int k = 0; k < 2; k++) {
            fit[k] /= total;
            if (es - L == 2) fit[k] *= (double)h[2][L + 1][0] / total;
        }
        /* Where a quarter or more would escape at 31, A's wider alphabet costs less than
         * the escapes it saves (FP16 weights: 48% -> 29% escapes, coded 8% faster and
         * 0.1% smaller; a 32-value A takes one register per table, 64 two), except in
         * small chunks, where its larger tables outweigh that (384-element tensors of
         * Adam's exp_avg_sq grew 0.1-2% past their stand-alone size). */
        int wide = fit[0] < ESC_WIDE_BELOW && elems >= ESC_WIDE_MIN;
        if (fit[wide] >= ESC_MIN_FIT) {
            *diff_low = (int)L;
            if (esc_t) *esc_t = wide ? ESC_T_WIDE : ESC_T_SMALL;
        }
    }
    uint8_t pred = bx <= bd ? PRED_XOR : PRED_DIFF;
    double best = bx <= bd ? bx : bd;
    return best < 0.99 * none ? pred : PRED_NONE;
}
