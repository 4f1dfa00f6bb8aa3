/* avx512.c — AVX-512 kernels of the entropy stage: the byte histogram and the order-0
 * rANS encode loop.
 *
 * Exponent planes use a few dozen byte values, so per-symbol data fits in registers.
 * The histogram finds the value range of its input, then counts up to eight values per
 * pass with byte-wide compare-and-add counters (three times the scalar table's speed
 * on 20-40 values); planes that are mostly one value (the high bytes of delta
 * residuals) count that value by compare and pack the rest with vpcompressb; other
 * inputs go back to the table. The encoder keeps each encoder field of up to 64
 * symbols in four zmm registers and looks it up with vpermt2d instead of loading and
 * transposing one row per lane as the AVX2 loop must. Segments of more symbols
 * (residual planes use 100-256) or spread values take a second loop that looks up
 * f | cum << 12 in byte tables and divides in floating point (see wenc). Both update
 * the state exactly, so all paths write the same bytes. Built with target attributes
 * and chosen at run time, so the library needs no -m flags and runs on any x86-64.
 */
#include <string.h>

#include "ent_internal.h"

int ent_enc512_bytes_only;

#ifdef ENT_HAVE_AVX512
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

/* Values per pass: eight byte counters plus the data stay in registers; sixteen spill. */
#define HIST_GROUP 8
/* Wider inputs would take more than eight passes: the scalar table is as fast. */
#define HIST_MAX_RANGE 64

/* Counts bytes equal to d with one compare per vector and packs the others (vpcompressb)
 * into a small buffer counted by the table afterwards: residual planes of slowly
 * moving tensors are 95-99% zero bytes, where the table's increments queue behind each
 * other on one counter. Gives up (the caller counts the rest) once more than
 * max_other / 256 of the bytes seen differ from d. */
#define T512V2 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2")))
#define SPARSE_PIECE 4096

T512V2 static size_t hist_sparse(const uint8_t *src, size_t n, uint32_t *cnt, uint8_t d, unsigned max_other)
{
    uint8_t buf[SPARSE_PIECE + 64];
    uint32_t t[2][256]; /* the other values repeat too (1, 2 in residual planes) */
    size_t nv = n / 64 * 64, i = 0, other = 0;
    const __m512i dv = _mm512_set1_epi8((char)d);
    memset(t, 0, sizeof t);
    while (i < nv) {
        size_t end = nv - i < SPARSE_PIECE ? nv : i + SPARSE_PIECE, k = 0;
        for (; i < end; i += 64) {
            __m512i v = _mm512_loadu_si512((const void *)(src + i));
            __mmask64 m = _mm512_cmpneq_epi8_mask(v, dv);
            _mm512_storeu_si512((void *)(buf + k), _mm512_maskz_compress_epi8(m, v));
            k += (size_t)__builtin_popcountll(m);
        }
        size_t j = 0;
        for (; j + 2 <= k; j += 2) {
            t[0][buf[j]]++;
            t[1][buf[j + 1]]++;
        }
        if (j < k) t[0][buf[j]]++;
        other += k;
        if (other * 256 > i * max_other)
            break;
    }
    for (int s = 0; s < 256; s++)
        cnt[s] = t[0][s] + t[1][s];
    cnt[d] += (uint32_t)(i - other);
    return i;
}

static int have_vbmi2(void)
{
    static int v = -1; /* racing threads compute the same value */
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0) {
        r = __builtin_cpu_supports("avx512vbmi2") != 0;
        __atomic_store_n(&v, r, __ATOMIC_RELAXED);
    }
    return r;
}

/* Adds to cnt[lo .. lo + range) the counts of np spans of nv vectors at at[k] (at most
 * 255 vectors in all, which byte counters hold), HIST_GROUP values per
 * pass; the spans (16 KiB at most) stay in L1 across the passes. */
T512 static void count_spans(const uint8_t *const *at, size_t nv, int np, uint32_t *cnt, int lo, int range)
{
    const __m512i one = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    for (int g = 0; g < range; g += HIST_GROUP) {
        __m512i c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero, c5 = zero, c6 = zero, c7 = zero;
        const __m512i base = _mm512_set1_epi8((char)(lo + g));
        for (int k = 0; k < np; k++)
            for (size_t j = 0; j < nv; j++) {
                /* v - base == k exactly when v is the k-th value of this group. */
                __m512i v = _mm512_sub_epi8(_mm512_loadu_si512((const void *)(at[k] + 64 * j)), base);
#define HCOUNT(k) \
    c##k = _mm512_mask_add_epi8(c##k, _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(k)), c##k, one)
                HCOUNT(0); HCOUNT(1); HCOUNT(2); HCOUNT(3);
                HCOUNT(4); HCOUNT(5); HCOUNT(6); HCOUNT(7);
#undef HCOUNT
            }
#define HFLUSH(k)                                                                    \
    if (g + k < range)                                                               \
        cnt[lo + g + k] += (uint32_t)_mm512_reduce_add_epi64(_mm512_sad_epu8(c##k, zero))
        HFLUSH(0); HFLUSH(1); HFLUSH(2); HFLUSH(3);
        HFLUSH(4); HFLUSH(5); HFLUSH(6); HFLUSH(7);
#undef HFLUSH
    }
}

/* Values span at most HIST_MAX_RANGE: byte counters in windows of 255 vectors. */
T512 static void hist_range(const uint8_t *src, size_t n, uint32_t *cnt, int lo, int range)
{
    size_t nv = n / 64;
    memset(cnt, 0, 256 * sizeof *cnt);
    for (size_t w0 = 0; w0 < nv; w0 += 255) {
        const uint8_t *at = src + 64 * w0;
        size_t len = nv - w0 < 255 ? nv - w0 : 255;
        count_spans(&at, len, 1, cnt, lo, range);
    }
    for (size_t i = nv * 64; i < n; i++)
        cnt[src[i]]++;
}

/* The least and largest byte of v. */
T512 static void reduce_minmax(__m512i mn, __m512i mx, unsigned *lo, unsigned *hi)
{
    __m256i a = _mm256_min_epu8(_mm512_castsi512_si256(mn), _mm512_extracti64x4_epi64(mn, 1));
    __m256i b = _mm256_max_epu8(_mm512_castsi512_si256(mx), _mm512_extracti64x4_epi64(mx, 1));
    __m128i c = _mm_min_epu8(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    __m128i d = _mm_max_epu8(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    /* Bytes widened to words: minpos finds the least; the largest is 255 - the least of
     * 255 - x. */
    __m128i z = _mm_setzero_si128(), ff = _mm_set1_epi8((char)0xff);
    __m128i cmin = _mm_min_epu16(_mm_unpacklo_epi8(c, z), _mm_unpackhi_epi8(c, z));
    __m128i dinv = _mm_sub_epi8(ff, d);
    __m128i dmin = _mm_min_epu16(_mm_unpacklo_epi8(dinv, z), _mm_unpackhi_epi8(dinv, z));
    unsigned l = (unsigned)_mm_cvtsi128_si32(_mm_minpos_epu16(cmin)) & 0xffff;
    unsigned h = 255 - ((unsigned)_mm_cvtsi128_si32(_mm_minpos_epu16(dmin)) & 0xffff);
    *lo = l < *lo ? l : *lo;
    *hi = h > *hi ? h : *hi;
}

T512 size_t ent_hist_pieces_avx512(const uint8_t *const *at, int np, size_t len, unsigned lo, unsigned hi,
                                   uint32_t *cnt)
{
    size_t v = len / 64;
    if (hi < lo || hi - lo >= HIST_MAX_RANGE || np > ENT_PIECES_MAX || (size_t)np * v > 255)
        return 0;
    memset(cnt, 0, 256 * sizeof *cnt);
    count_spans(at, v, np, cnt, (int)lo, (int)(hi - lo + 1));
    for (int k = 0; k < np; k++)
        for (size_t i = v * 64; i < len; i++) cnt[at[k][i]]++;
    return 1;
}

T512 size_t ent_hist_avx512(const uint8_t *src, size_t n, uint32_t *cnt)
{
    if (n < 256)
        return 0;
    /* A look at the first 256 bytes sends wide, undominated planes (mantissa and
     * low residual bytes) straight to the table without a pass over the rest. */
    __m512i mn = _mm512_loadu_si512((const void *)src), mx = mn;
    const __m512i dv = _mm512_set1_epi8((char)src[0]);
    unsigned same = 0;
    for (int k = 0; k < 4; k++) {
        __m512i v = _mm512_loadu_si512((const void *)(src + 64 * k));
        mn = _mm512_min_epu8(mn, v);
        mx = _mm512_max_epu8(mx, v);
        same += (unsigned)__builtin_popcountll(_mm512_cmpeq_epi8_mask(v, dv));
    }
    unsigned lo = 255, hi = 0;
    reduce_minmax(mn, mx, &lo, &hi);
    /* Mostly one value: packing the others out costs about a table increment per other
     * byte, counting by range two operations per vector per value; the cheaper wins. */
    unsigned other = 256 - same, group = hi - lo < HIST_MAX_RANGE ? (hi - lo) / HIST_GROUP + 1 : 8;
    if (other <= 20 * group && have_vbmi2()) {
        unsigned lim = 24 * group + 16;
        return hist_sparse(src, n, cnt, src[0], lim < 128 ? lim : 128);
    }
    if (hi - lo < HIST_MAX_RANGE) {
        size_t i = 256 + ent_minmax_avx512(src + 256, n - 256, &lo, &hi);
        for (; i < n; i++) {
            lo = src[i] < lo ? src[i] : lo;
            hi = src[i] > hi ? src[i] : hi;
        }
        if (hi - lo < HIST_MAX_RANGE) {
            hist_range(src, n, cnt, (int)lo, (int)(hi - lo + 1));
            return n;
        }
    }
    return 0;
}

T512 size_t ent_minmax_avx512(const uint8_t *src, size_t n, unsigned *lo, unsigned *hi)
{
    size_t nv = n / 64 * 64;
    __m512i mn = _mm512_set1_epi8((char)0xff), mx = _mm512_setzero_si512();
    for (size_t i = 0; i < nv; i += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(src + i));
        mn = _mm512_min_epu8(mn, v);
        mx = _mm512_max_epu8(mx, v);
    }
    if (nv) reduce_minmax(mn, mx, lo, hi);
    return nv;
}

/* How a segment's symbols index the register tables: by their low 5 or 6 bits when
 * the present values span at most 32 or 64 (distinct there). Wider spans go to the
 * byte-table loop below, which beat a rank lookup in front of this one. */
enum { ZK32, ZK64 };

/* Encoder fields per table slot, like the AVX2 rows: xmax, magic, bias, cmpl | s2<<16.
 * A frequency of 1 uses magic 2^32-1, which makes the quotient x-1, and the bias
 * absorbs the missing M-1 (as in the scalar table), so the pre-shift is always 1. */
static int zbuild(const uint16_t *freq, uint32_t (*tab)[64])
{
    int lo = -1, hi = 0;
    for (int s = 0; s < 256; s++)
        if (freq[s]) {
            lo = lo < 0 ? s : lo;
            hi = s;
        }
    int mode = hi - lo < 32 ? ZK32 : hi - lo < 64 ? ZK64 : -1;
    if (mode < 0)
        return -1;
    memset(tab, 0, 4 * 64 * sizeof(uint32_t));
    uint32_t cum = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (!f)
            continue;
        unsigned slot = mode == ZK32 ? (unsigned)s & 31 : (unsigned)s & 63;
        uint32_t l = 0;
        while ((1u << l) < f)
            l++;
        tab[0][slot] = f << (32 - RANS_BITS);
        if (f == 1) {
            tab[1][slot] = UINT32_MAX;
            tab[2][slot] = cum + RANS_M - 1;
            tab[3][slot] = RANS_M - 1;
        } else {
            tab[1][slot] = (uint32_t)((((uint64_t)1 << 32) * ((1u << l) - f)) / f + 1);
            tab[2][slot] = cum;
            tab[3][slot] = (RANS_M - f) | (l - 1) << 16;
        }
        cum += f;
    }
    return mode;
}

static inline __attribute__((always_inline)) T512 __m512i
zlook(const int mode, const __m512i *t, __m512i s, __mmask16 hi)
{
    __m512i a = _mm512_permutex2var_epi32(t[0], s, t[1]);
    if (mode == ZK32)
        return a;
    return _mm512_mask_blend_epi32(hi, a, _mm512_permutex2var_epi32(t[2], s, t[3]));
}

static inline __attribute__((always_inline)) T512 uint8_t *
zenc(const unsigned N, const int mode, uint32_t *st, const uint32_t (*tab)[64],
     const uint8_t *src, size_t lo, size_t hi, uint8_t *p)
{
    __m512i X[RANS0_NMAX / 16], T[4][4];
    for (unsigned v = 0; v < N / 16; v++)
        X[v] = _mm512_loadu_si512((const void *)(st + 16 * v));
    for (int f = 0; f < 4; f++)
        for (int r = 0; r < 4; r++)
            T[f][r] = _mm512_loadu_si512((const void *)(tab[f] + 16 * r));
    const __m512i bit5 = _mm512_set1_epi32(32), low16 = _mm512_set1_epi32(0xffff);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t i0 = hi; i0 > lo;) {
        i0 -= N;
        for (unsigned v = N / 16; v-- > 0;) {
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i0 + 16 * v));
            __m512i s = _mm512_cvtepu8_epi32(b);
            __mmask16 h = mode == ZK32 ? 0 : _mm512_test_epi32_mask(s, bit5);
            __m512i xmax = zlook(mode, T[0], s, h), mag = zlook(mode, T[1], s, h);
            __m512i bias = zlook(mode, T[2], s, h), pk = zlook(mode, T[3], s, h);
            __m512i x = X[v];
            __mmask16 fl = _mm512_cmpge_epu32_mask(x, xmax);
            /* Flushing lanes' low words, in lane order, rotated to the top of the
             * vector so that one full store ends exactly at p (below p is free). */
            unsigned c = (unsigned)__builtin_popcount((unsigned)fl);
            __m512i w = _mm512_maskz_compress_epi32(fl, x);
            w = _mm512_permutexvar_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32((int)c)), w);
            _mm256_storeu_si256((__m256i *)(void *)(p - 32), _mm512_cvtepi32_epi16(w));
            p -= 2 * c;
            x = _mm512_mask_srli_epi32(x, fl, x, 16);
            __m512i pe = _mm512_mul_epu32(x, mag);
            __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(mag, 32));
            __m512i t = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
            __m512i q = _mm512_srlv_epi32(
                _mm512_add_epi32(t, _mm512_srli_epi32(_mm512_sub_epi32(x, t), 1)),
                _mm512_srli_epi32(pk, 16));
            X[v] = _mm512_add_epi32(_mm512_add_epi32(x, bias),
                                    _mm512_mullo_epi32(q, _mm512_and_si512(pk, low16)));
        }
    }
    for (unsigned v = 0; v < N / 16; v++)
        _mm512_storeu_si512((void *)(st + 16 * v), X[v]);
    return p;
}

#define ZENC(N, M)                                                                    \
    T512 static uint8_t *zenc_##N##_##M(uint32_t *st, const uint32_t (*tab)[64],      \
                                        const uint8_t *src, size_t lo, size_t hi,     \
                                        uint8_t *p)                                   \
    {                                                                                 \
        return zenc(N, M, st, tab, src, lo, hi, p);                                   \
    }
ZENC(32, ZK32)
ZENC(32, ZK64)
ZENC(64, ZK32)
ZENC(64, ZK64)
#undef ZENC

/* ---- any alphabet ------------------------------------------------------------------
 * A segment with more symbols than four registers hold per field (residual planes use
 * 100-256 values) keeps only f | cum << 12 per symbol, in three byte tables of up to
 * 256 entries (four registers each), looked up for 64 symbols at once with vpermb or
 * vpermt2b; two more byte permutes per 16 lanes assemble the dwords. Without the
 * reciprocal the quotient x / f comes from a float division rounded toward zero:
 * x < f * 2^20 after renormalisation, so x / f < 2^20 and the two roundings (each
 * below 2^-23 relative, both downward) leave the truncated quotient q or q - 1; one
 * compare on the remainder fixes the second case. The state update is then exact,
 * q * M + (x - q * f) + cum, the same value as every other path's. */
enum { W64, W128, W256 };

static int wbuild(const uint16_t *freq, uint8_t (*wt)[256])
{
    int lo = -1, hi = 0;
    for (int s = 0; s < 256; s++)
        if (freq[s]) {
            lo = lo < 0 ? s : lo;
            hi = s;
        }
    int mode = hi - lo < 64 ? W64 : hi - lo < 128 ? W128 : W256;
    unsigned wrap = mode == W64 ? 63 : mode == W128 ? 127 : 255;
    memset(wt, 0, 3 * 256);
    uint32_t cum = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (!f)
            continue;
        /* Present values span less than wrap + 1: their low bits are distinct. */
        unsigned slot = (unsigned)s & wrap;
        uint32_t d = f | cum << 12;
        wt[0][slot] = (uint8_t)d;
        wt[1][slot] = (uint8_t)(d >> 8);
        wt[2][slot] = (uint8_t)(d >> 16);
        cum += f;
    }
    return mode;
}

static inline __attribute__((always_inline)) T512 __m512i
wlook(const int mode, const __m512i *t, __m512i s, __mmask64 top)
{
    if (mode == W64)
        return _mm512_permutexvar_epi8(s, t[0]);
    __m512i a = _mm512_permutex2var_epi8(t[0], s, t[1]);
    if (mode == W128)
        return a;
    return _mm512_mask_blend_epi8(top, a, _mm512_permutex2var_epi8(t[2], s, t[3]));
}

/* Byte k of dword lane j of quarter v: k = 0, 1 from bytes 16v + j of the first two
 * fields (vpermt2b, second table at +64), k = 2 from the third field. */
#define WI01(j) 0, 0, (char)(64 + (j)), (char)(j) /* _mm512_set_epi8: high byte first */
#define WI2(j) 0, (char)(j), 0, 0

static inline __attribute__((always_inline)) T512 uint8_t *
wenc(const unsigned N, const int mode, uint32_t *st, const uint8_t (*wt)[256],
     const uint8_t *src, size_t lo, size_t hi, uint8_t *p)
{
    __m512i X[RANS0_NMAX / 16], T[3][4], I01[4], I2[4];
    for (unsigned v = 0; v < N / 16; v++)
        X[v] = _mm512_loadu_si512((const void *)(st + 16 * v));
    int nt = mode == W64 ? 1 : mode == W128 ? 2 : 4;
    for (int f = 0; f < 3; f++)
        for (int r = 0; r < nt; r++)
            T[f][r] = _mm512_loadu_si512((const void *)(wt[f] + 64 * r));
    const __m512i i01 = _mm512_set_epi8(
        WI01(15), WI01(14), WI01(13), WI01(12), WI01(11), WI01(10), WI01(9), WI01(8),
        WI01(7), WI01(6), WI01(5), WI01(4), WI01(3), WI01(2), WI01(1), WI01(0));
    const __m512i i2 = _mm512_set_epi8(
        WI2(15), WI2(14), WI2(13), WI2(12), WI2(11), WI2(10), WI2(9), WI2(8),
        WI2(7), WI2(6), WI2(5), WI2(4), WI2(3), WI2(2), WI2(1), WI2(0));
    for (unsigned v = 0; v < N / 16; v++) {
        I01[v] = _mm512_add_epi8(i01, _mm512_set1_epi8((char)(16 * v)));
        I2[v] = _mm512_add_epi8(i2, _mm512_set1_epi8((char)(16 * v)));
    }
    const __m512i m12 = _mm512_set1_epi32(RANS_M - 1), mM = _mm512_set1_epi32(RANS_M);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t i0 = hi; i0 > lo;) {
        i0 -= N;
        __m512i s = N == 64 ? _mm512_loadu_si512((const void *)(src + i0))
                            : _mm512_zextsi256_si512(
                                  _mm256_loadu_si256((const __m256i *)(const void *)(src + i0)));
        __mmask64 top = mode == W256 ? _mm512_movepi8_mask(s) : 0;
        __m512i b0 = wlook(mode, T[0], s, top), b1 = wlook(mode, T[1], s, top),
                b2 = wlook(mode, T[2], s, top);
        for (unsigned v = N / 16; v-- > 0;) {
            __m512i d = _mm512_maskz_permutex2var_epi8(0x3333333333333333ull, b0, I01[v], b1);
            d = _mm512_mask_permutexvar_epi8(d, 0x4444444444444444ull, I2[v], b2);
            __m512i f = _mm512_and_si512(d, m12);
            __m512i x = X[v];
            __mmask16 fl = _mm512_cmpge_epu32_mask(x, _mm512_slli_epi32(d, 20));
            /* Flushing lanes' low words, as in zenc. */
            unsigned c = (unsigned)__builtin_popcount((unsigned)fl);
            __m512i w = _mm512_maskz_compress_epi32(fl, x);
            w = _mm512_permutexvar_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32((int)c)), w);
            _mm256_storeu_si256((__m256i *)(void *)(p - 32), _mm512_cvtepi32_epi16(w));
            p -= 2 * c;
            x = _mm512_mask_srli_epi32(x, fl, x, 16);
            __m512 qf = _mm512_div_round_ps(
                _mm512_cvt_roundepu32_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC),
                _mm512_cvtepi32_ps(f), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m512i q = _mm512_cvttps_epu32(qf);
            __m512i r = _mm512_sub_epi32(x, _mm512_mullo_epi32(q, f));
            /* q one short: r in [f, 2f); the state then lacks M - f. */
            __mmask16 lowq = _mm512_cmpge_epu32_mask(r, f);
            __m512i y = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(q, RANS_BITS), r),
                                         _mm512_srli_epi32(d, 12));
            X[v] = _mm512_mask_add_epi32(y, lowq, y, _mm512_sub_epi32(mM, f));
        }
    }
    for (unsigned v = 0; v < N / 16; v++)
        _mm512_storeu_si512((void *)(st + 16 * v), X[v]);
    return p;
}
#undef WI01
#undef WI2

#define WENC(N, M)                                                                    \
    T512 static uint8_t *wenc_##N##_##M(uint32_t *st, const uint8_t (*wt)[256],       \
                                        const uint8_t *src, size_t lo, size_t hi,     \
                                        uint8_t *p)                                   \
    {                                                                                 \
        return wenc(N, M, st, wt, src, lo, hi, p);                                    \
    }
WENC(32, W64)
WENC(32, W128)
WENC(32, W256)
WENC(64, W64)
WENC(64, W128)
WENC(64, W256)
#undef WENC

static uint8_t *wide_enc(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src,
                         size_t lo, size_t hi, uint8_t *p)
{
    int mode = wbuild(freq, c->wtab);
    const uint8_t(*t)[256] = (const uint8_t(*)[256])c->wtab;
    if (N == 64)
        return mode == W64    ? wenc_64_W64(c->st, t, src, lo, hi, p)
               : mode == W128 ? wenc_64_W128(c->st, t, src, lo, hi, p)
                              : wenc_64_W256(c->st, t, src, lo, hi, p);
    return mode == W64    ? wenc_32_W64(c->st, t, src, lo, hi, p)
           : mode == W128 ? wenc_32_W128(c->st, t, src, lo, hi, p)
                          : wenc_32_W256(c->st, t, src, lo, hi, p);
}

uint8_t *rans0_enc_avx512(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src,
                          size_t lo, size_t hi, uint8_t *p)
{
    int mode = ent_enc512_bytes_only ? -1 : zbuild(freq, c->ztab);
    if (mode < 0)
        return wide_enc(c, N, freq, src, lo, hi, p);
    const uint32_t(*t)[64] = (const uint32_t(*)[64])c->ztab;
    if (N == 64)
        return mode == ZK32 ? zenc_64_ZK32(c->st, t, src, lo, hi, p)
                            : zenc_64_ZK64(c->st, t, src, lo, hi, p);
    return mode == ZK32 ? zenc_32_ZK32(c->st, t, src, lo, hi, p)
                        : zenc_32_ZK64(c->st, t, src, lo, hi, p);
}
#endif
