/* rans0_avx512.c — the AVX-512 encode and decode loops of order-0 rANS (rans0.c calls
 * them when cpu_level() allows AVX-512).
 *
 * Exponent planes use a few dozen byte values, so per-symbol data fits in registers:
 * the first loop keeps each encoder field of up to 64 symbols in four zmm registers and
 * looks it up with vpermt2d instead of loading and transposing one row per lane as the
 * AVX2 loop must. Segments of more symbols (residual planes use 100-256) or spread
 * values take a second loop that looks up f | cum << 12 in byte tables and divides in
 * floating point (see wenc). Both update the state exactly, so all paths write the
 * same bytes.
 */
#include <string.h>

#include "ent_internal.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))
#define T512F __attribute__((target("avx512f")))

/* The least and largest symbol with a frequency (a table has at least two). */
static void span(const uint16_t *freq, int *lo, int *hi)
{
    *lo = -1, *hi = 0;
    for (int s = 0; s < 256; s++)
        if (freq[s]) {
            *lo = *lo < 0 ? s : *lo;
            *hi = s;
        }
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
    int lo, hi;
    span(freq, &lo, &hi);
    int mode = hi - lo < 32 ? ZK32 : hi - lo < 64 ? ZK64 : -1;
    if (mode < 0) return -1;
    memset(tab, 0, 4 * 64 * sizeof(uint32_t));
    uint32_t cum = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (!f) continue;
        unsigned slot = mode == ZK32 ? (unsigned)s & 31 : (unsigned)s & 63;
        uint32_t l = 0;
        while ((1u << l) < f) l++;
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

static inline __attribute__((always_inline)) T512 __m512i zlook(const int mode, const __m512i *t, __m512i s,
                                                                __mmask16 hi)
{
    __m512i a = _mm512_permutex2var_epi32(t[0], s, t[1]);
    if (mode == ZK32) return a;
    return _mm512_mask_blend_epi32(hi, a, _mm512_permutex2var_epi32(t[2], s, t[3]));
}

static inline __attribute__((always_inline)) T512 uint8_t *zenc(const unsigned N, const int mode, uint32_t *st,
                                                                const uint32_t (*tab)[64], const uint8_t *src,
                                                                size_t lo, size_t hi, uint8_t *p)
{
    __m512i X[RANS0_NMAX / 16], T[4][4];
    for (unsigned v = 0; v < N / 16; v++) X[v] = _mm512_loadu_si512((const void *)(st + 16 * v));
    for (int f = 0; f < 4; f++)
        for (int r = 0; r < 4; r++) T[f][r] = _mm512_loadu_si512((const void *)(tab[f] + 16 * r));
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
            __m512i q = _mm512_srlv_epi32(_mm512_add_epi32(t, _mm512_srli_epi32(_mm512_sub_epi32(x, t), 1)),
                                          _mm512_srli_epi32(pk, 16));
            X[v] = _mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_mullo_epi32(q, _mm512_and_si512(pk, low16)));
        }
    }
    for (unsigned v = 0; v < N / 16; v++) _mm512_storeu_si512((void *)(st + 16 * v), X[v]);
    return p;
}

#define ZENC(N, M)                                                                                             \
    T512 static uint8_t *zenc_##N##_##M(uint32_t *st, const uint32_t(*tab)[64], const uint8_t *src, size_t lo, \
                                        size_t hi, uint8_t *p)                                                 \
    {                                                                                                          \
        return zenc(N, M, st, tab, src, lo, hi, p);                                                            \
    }
ZENC(32, ZK32)
ZENC(32, ZK64)
ZENC(64, ZK32)
ZENC(64, ZK64)
#undef ZENC

/* ---- any alphabet ------------------------------------------------------------------
 * A segment with more symbols than four registers hold per field (residual planes use
 * 100-256 values) keeps only f | cum << 12 per symbol, in three byte tables of up to
 * 256 entries (four registers each), looked up for 64 symbols at once with vpermt2b
 * (a segment of this loop spans 64 values or more); two more byte permutes per 16 lanes assemble the dwords. Without the
 * reciprocal the quotient x / f comes from a float division rounded toward zero:
 * x < f * 2^20 after renormalisation, so x / f < 2^20 and the two roundings (each
 * below 2^-23 relative, both downward) leave the truncated quotient q or q - 1; one
 * compare on the remainder fixes the second case. The state update is then exact,
 * q * M + (x - q * f) + cum, the same value as every other path's. */
enum { W128, W256 };

static int wbuild(const uint16_t *freq, uint8_t (*wt)[256])
{
    int lo, hi;
    span(freq, &lo, &hi);
    int mode = hi - lo < 128 ? W128 : W256; /* spans under 64 take zenc */
    unsigned wrap = mode == W128 ? 127 : 255;
    memset(wt, 0, 3 * 256);
    uint32_t cum = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (!f) continue;
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

static inline __attribute__((always_inline)) T512 __m512i wlook(const int mode, const __m512i *t, __m512i s,
                                                                __mmask64 top)
{
    __m512i a = _mm512_permutex2var_epi8(t[0], s, t[1]);
    if (mode == W128) return a;
    return _mm512_mask_blend_epi8(top, a, _mm512_permutex2var_epi8(t[2], s, t[3]));
}

/* Byte k of dword lane j of quarter v: k = 0, 1 from bytes 16v + j of the first two
 * fields (vpermt2b, second table at +64), k = 2 from the third field. */
#define WI01(j) 0, 0, (char)(64 + (j)), (char)(j) /* _mm512_set_epi8: high byte first */
#define WI2(j) 0, (char)(j), 0, 0

static inline __attribute__((always_inline)) T512 uint8_t *wenc(const unsigned N, const int mode, uint32_t *st,
                                                                const uint8_t (*wt)[256], const uint8_t *src, size_t lo,
                                                                size_t hi, uint8_t *p)
{
    __m512i X[RANS0_NMAX / 16], T[3][4], I01[4], I2[4];
    for (unsigned v = 0; v < N / 16; v++) X[v] = _mm512_loadu_si512((const void *)(st + 16 * v));
    int nt = mode == W128 ? 2 : 4;
    for (int f = 0; f < 3; f++)
        for (int r = 0; r < nt; r++) T[f][r] = _mm512_loadu_si512((const void *)(wt[f] + 64 * r));
    const __m512i i01 = _mm512_set_epi8(WI01(15), WI01(14), WI01(13), WI01(12), WI01(11), WI01(10), WI01(9), WI01(8),
                                        WI01(7), WI01(6), WI01(5), WI01(4), WI01(3), WI01(2), WI01(1), WI01(0));
    const __m512i i2 = _mm512_set_epi8(WI2(15), WI2(14), WI2(13), WI2(12), WI2(11), WI2(10), WI2(9), WI2(8), WI2(7),
                                       WI2(6), WI2(5), WI2(4), WI2(3), WI2(2), WI2(1), WI2(0));
    for (unsigned v = 0; v < N / 16; v++) {
        I01[v] = _mm512_add_epi8(i01, _mm512_set1_epi8((char)(16 * v)));
        I2[v] = _mm512_add_epi8(i2, _mm512_set1_epi8((char)(16 * v)));
    }
    const __m512i m12 = _mm512_set1_epi32(RANS_M - 1), mM = _mm512_set1_epi32(RANS_M);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t i0 = hi; i0 > lo;) {
        i0 -= N;
        __m512i s = N == 64 ? _mm512_loadu_si512((const void *)(src + i0))
                            : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(src + i0)));
        __mmask64 top = mode == W256 ? _mm512_movepi8_mask(s) : 0;
        __m512i b0 = wlook(mode, T[0], s, top), b1 = wlook(mode, T[1], s, top), b2 = wlook(mode, T[2], s, top);
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
            __m512 qf = _mm512_div_round_ps(_mm512_cvt_roundepu32_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC),
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
    for (unsigned v = 0; v < N / 16; v++) _mm512_storeu_si512((void *)(st + 16 * v), X[v]);
    return p;
}
#undef WI01
#undef WI2

#define WENC(N, M)                                                                                            \
    T512 static uint8_t *wenc_##N##_##M(uint32_t *st, const uint8_t(*wt)[256], const uint8_t *src, size_t lo, \
                                        size_t hi, uint8_t *p)                                                \
    {                                                                                                         \
        return wenc(N, M, st, wt, src, lo, hi, p);                                                            \
    }
WENC(32, W128)
WENC(32, W256)
WENC(64, W128)
WENC(64, W256)
#undef WENC

static uint8_t *wide_enc(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src, size_t lo, size_t hi,
                         uint8_t *p)
{
    int mode = wbuild(freq, c->wtab);
    const uint8_t(*t)[256] = (const uint8_t(*)[256])c->wtab;
    if (N == 64) return mode == W128 ? wenc_64_W128(c->st, t, src, lo, hi, p) : wenc_64_W256(c->st, t, src, lo, hi, p);
    return mode == W128 ? wenc_32_W128(c->st, t, src, lo, hi, p) : wenc_32_W256(c->st, t, src, lo, hi, p);
}

uint8_t *rans0_enc_avx512(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src, size_t lo, size_t hi,
                          uint8_t *p)
{
    int mode = zbuild(freq, c->ztab);
    if (mode < 0) return wide_enc(c, N, freq, src, lo, hi, p);
    const uint32_t(*t)[64] = (const uint32_t(*)[64])c->ztab;
    if (N == 64) return mode == ZK32 ? zenc_64_ZK32(c->st, t, src, lo, hi, p) : zenc_64_ZK64(c->st, t, src, lo, hi, p);
    return mode == ZK32 ? zenc_32_ZK32(c->st, t, src, lo, hi, p) : zenc_32_ZK64(c->st, t, src, lo, hi, p);
}
/* The decoder: sixteen states a vector. The decode table (4096 entries of symbol | bias
 * << 8 | freq << 20, 16 KiB, in L1) is read with a gather, the symbols leave through a
 * truncating move, and the lanes that fall below RANS_L take the next 16-bit words in
 * lane order by an expand: the words are consumed in the order of the scalar loop, so
 * the states, the symbols and the input position are the same after every round. The
 * 32 bytes read for a vector lie inside the round's 2N that the loop condition checks.
 *
 * A round is bound by each vector's chain from its gather to the next one's index, not by
 * the ports (two or four vectors a round, no more independent work), so the loop is
 * written to keep that chain short: the vectors written out, their states and indices in
 * registers (as a loop over an array, GCC kept the states on the stack: a store and a
 * reload on every chain); the next index taken from the refill word where a lane refills
 * (the state's low 12 bits are then the word's) beside the state's update, not after it;
 * and f · (x >> 12) as two 32x32->64 multiplies of even and odd lanes merged by a
 * shuffle, 5 cycles and 1 where vpmulld takes 10. */
#define DEC_VEC(X, I, o)                                                                                        \
    do {                                                                                                        \
        __m512i e_ = _mm512_i32gather_epi32(I, (const void *)dt, 4);                                            \
        _mm_storeu_si128((__m128i *)(void *)(o), _mm512_cvtepi32_epi8(e_));                                     \
        __m512i q_ = _mm512_srli_epi32(X, RANS_BITS), qo_ = _mm512_srli_epi64(X, 32 + RANS_BITS);               \
        __m512i pe_ = _mm512_mul_epu32(_mm512_srli_epi32(e_, 20), q_);                                          \
        __m512i po_ = _mm512_mul_epu32(_mm512_srli_epi64(e_, 52), qo_);                                         \
        __m512i fq_ = _mm512_mask_shuffle_epi32(pe_, 0xaaaa, po_, (_MM_PERM_ENUM)0x80);                         \
        __m512i x_ = _mm512_add_epi32(fq_, _mm512_and_si512(_mm512_srli_epi32(e_, 8), mask12));                 \
        __mmask16 nd_ = _mm512_cmplt_epu32_mask(x_, low);                                                       \
        __m512i w_ = _mm512_maskz_expand_epi32(nd_, _mm512_cvtepu16_epi32(                                      \
                                                        _mm256_loadu_si256((const __m256i *)(const void *)p))); \
        I = _mm512_mask_and_epi32(_mm512_and_si512(x_, mask12), nd_, w_, mask12);                               \
        X = _mm512_mask_or_epi32(x_, nd_, _mm512_slli_epi32(x_, 16), w_);                                       \
        p += 2 * __builtin_popcount((unsigned)nd_);                                                             \
    } while (0)

T512F static size_t dec_32(uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end, uint8_t *out,
                           size_t len)
{
    const uint8_t *p = *pp;
    const __m512i mask12 = _mm512_set1_epi32(RANS_M - 1), low = _mm512_set1_epi32(RANS_L);
    __m512i X0 = _mm512_loadu_si512((const void *)st), X1 = _mm512_loadu_si512((const void *)(st + 16));
    __m512i I0 = _mm512_and_si512(X0, mask12), I1 = _mm512_and_si512(X1, mask12);
    size_t i = 0;
    for (; i + 32 <= len && end - p >= 64; i += 32) {
        DEC_VEC(X0, I0, out + i);
        DEC_VEC(X1, I1, out + i + 16);
    }
    _mm512_storeu_si512((void *)st, X0);
    _mm512_storeu_si512((void *)(st + 16), X1);
    *pp = p;
    return i;
}

T512F static size_t dec_64(uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end, uint8_t *out,
                           size_t len)
{
    const uint8_t *p = *pp;
    const __m512i mask12 = _mm512_set1_epi32(RANS_M - 1), low = _mm512_set1_epi32(RANS_L);
    __m512i X0 = _mm512_loadu_si512((const void *)st), X1 = _mm512_loadu_si512((const void *)(st + 16));
    __m512i X2 = _mm512_loadu_si512((const void *)(st + 32)), X3 = _mm512_loadu_si512((const void *)(st + 48));
    __m512i I0 = _mm512_and_si512(X0, mask12), I1 = _mm512_and_si512(X1, mask12);
    __m512i I2 = _mm512_and_si512(X2, mask12), I3 = _mm512_and_si512(X3, mask12);
    size_t i = 0;
    for (; i + 64 <= len && end - p >= 128; i += 64) {
        DEC_VEC(X0, I0, out + i);
        DEC_VEC(X1, I1, out + i + 16);
        DEC_VEC(X2, I2, out + i + 32);
        DEC_VEC(X3, I3, out + i + 48);
    }
    _mm512_storeu_si512((void *)st, X0);
    _mm512_storeu_si512((void *)(st + 16), X1);
    _mm512_storeu_si512((void *)(st + 32), X2);
    _mm512_storeu_si512((void *)(st + 48), X3);
    *pp = p;
    return i;
}
#undef DEC_VEC

size_t rans0_dec_avx512(unsigned N, uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end,
                        uint8_t *out, size_t len)
{
    return N == 64 ? dec_64(st, dt, pp, end, out, len) : dec_32(st, dt, pp, end, out, len);
}
#endif
