/* avx512.c — AVX-512 kernels of the entropy stage: the byte histogram and the order-0
 * rANS encode loop, for the small alphabets of float exponent planes.
 *
 * Both rest on one observation: an exponent plane's segment uses a few dozen byte
 * values, so per-symbol data fits in registers. The histogram finds the value range
 * of its input, then counts up to eight values per pass with byte-wide compare-and-add
 * counters (three times the scalar table's speed on 20-40 values; wider inputs go back
 * to the table). The encoder keeps each encoder field of up to 64 symbols in four zmm
 * registers and looks it up with vpermt2d instead of loading and transposing one row
 * per lane as the AVX2 loop must; a segment with more than 64 symbols falls back to
 * the AVX2 loop. The state update is the AVX2 loop's exact division, so all paths
 * write the same bytes. Built with target attributes and chosen at run time, so the
 * library needs no -m flags and runs on any x86-64.
 */
#include <string.h>

#include "ent_internal.h"

#ifdef ENT_HAVE_AVX512
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

/* Values per pass: eight byte counters plus the data stay in registers; sixteen spill. */
#define HIST_GROUP 8
/* Wider inputs would take more than eight passes: the scalar table is as fast. */
#define HIST_MAX_RANGE 64

T512 int ent_hist_avx512(const uint8_t *src, size_t n, uint32_t *cnt)
{
    size_t nv = n / 64 * 64, i;
    __m512i mn = _mm512_set1_epi8(-1), mx = _mm512_setzero_si512();
    for (i = 0; i < nv; i += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(src + i));
        mn = _mm512_min_epu8(mn, v);
        mx = _mm512_max_epu8(mx, v);
    }
    uint8_t a[64], b[64];
    _mm512_storeu_si512((void *)a, mn);
    _mm512_storeu_si512((void *)b, mx);
    int lo = 255, hi = 0;
    for (int k = 0; k < 64; k++) {
        lo = a[k] < lo ? a[k] : lo;
        hi = b[k] > hi ? b[k] : hi;
    }
    for (; i < n; i++) {
        lo = src[i] < lo ? src[i] : lo;
        hi = src[i] > hi ? src[i] : hi;
    }
    int range = hi - lo + 1;
    if (range > HIST_MAX_RANGE)
        return -1;
    memset(cnt, 0, 256 * sizeof *cnt);
    const __m512i one = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    /* Byte counters hold 255: a window of 255 vectors, then they are summed. The
     * window (16 KiB) stays in L1 across the passes over it. */
    for (size_t w0 = 0; w0 < nv; w0 += 255 * 64) {
        size_t w1 = w0 + 255 * 64 < nv ? w0 + 255 * 64 : nv;
        for (int g = 0; g < range; g += HIST_GROUP) {
            __m512i c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero, c5 = zero,
                    c6 = zero, c7 = zero;
            const __m512i base = _mm512_set1_epi8((char)(lo + g));
            for (size_t j = w0; j < w1; j += 64) {
                /* v - base == k exactly when v is the k-th value of this group. */
                __m512i v = _mm512_sub_epi8(_mm512_loadu_si512((const void *)(src + j)), base);
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
    for (i = nv; i < n; i++)
        cnt[src[i]]++;
    return 0;
}

/* How a segment's symbols index the register tables: by their low 5 or 6 bits when
 * the present values span at most 32 or 64 (distinct there), else by rank among the
 * present values, which takes a byte lookup first. */
enum { ZK32, ZK64, ZRANK };

/* Encoder fields per table slot, like the AVX2 rows: xmax, magic, bias, cmpl | s2<<16.
 * A frequency of 1 uses magic 2^32-1, which makes the quotient x-1, and the bias
 * absorbs the missing M-1 (as in the scalar table), so the pre-shift is always 1. */
static int zbuild(const uint16_t *freq, uint32_t (*tab)[64], uint8_t *rank)
{
    int lo = -1, hi = 0, distinct = 0;
    for (int s = 0; s < 256; s++)
        if (freq[s]) {
            lo = lo < 0 ? s : lo;
            hi = s;
            distinct++;
        }
    int mode = hi - lo < 32 ? ZK32 : hi - lo < 64 ? ZK64 : distinct <= 64 ? ZRANK : -1;
    if (mode < 0)
        return -1;
    memset(tab, 0, 4 * 64 * sizeof(uint32_t));
    memset(rank, 0, 256);
    uint32_t cum = 0, r = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (!f)
            continue;
        unsigned slot = mode == ZK32 ? (unsigned)s & 31 : mode == ZK64 ? (unsigned)s & 63 : r;
        rank[s] = (uint8_t)r++;
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
     const uint8_t *rank, const uint8_t *src, size_t lo, size_t hi, uint8_t *p)
{
    __m512i X[RANS0_NMAX / 16], T[4][4], R[4];
    for (unsigned v = 0; v < N / 16; v++)
        X[v] = _mm512_loadu_si512((const void *)(st + 16 * v));
    for (int f = 0; f < 4; f++)
        for (int r = 0; r < 4; r++)
            T[f][r] = _mm512_loadu_si512((const void *)(tab[f] + 16 * r));
    for (int r = 0; r < 4; r++)
        R[r] = _mm512_loadu_si512((const void *)(rank + 64 * r));
    const __m512i bit5 = _mm512_set1_epi32(32), low16 = _mm512_set1_epi32(0xffff);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t i0 = hi; i0 > lo;) {
        i0 -= N;
        for (unsigned v = N / 16; v-- > 0;) {
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i0 + 16 * v));
            if (mode == ZRANK) {
                __m512i bz = _mm512_castsi128_si512(b);
                __m512i r0 = _mm512_permutex2var_epi8(R[0], bz, R[1]);
                __m512i r1 = _mm512_permutex2var_epi8(R[2], bz, R[3]);
                b = _mm512_castsi512_si128(_mm512_mask_blend_epi8(_mm512_movepi8_mask(bz), r0, r1));
            }
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
                                        const uint8_t *rank, const uint8_t *src,      \
                                        size_t lo, size_t hi, uint8_t *p)             \
    {                                                                                 \
        return zenc(N, M, st, tab, rank, src, lo, hi, p);                             \
    }
ZENC(32, ZK32)
ZENC(32, ZK64)
ZENC(32, ZRANK)
ZENC(64, ZK32)
ZENC(64, ZK64)
ZENC(64, ZRANK)
#undef ZENC

uint8_t *rans0_enc_avx512(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src,
                          size_t lo, size_t hi, uint8_t *p)
{
    int mode = zbuild(freq, c->ztab, c->zrank);
    if (mode < 0)
        return NULL;
    const uint32_t(*t)[64] = (const uint32_t(*)[64])c->ztab;
    if (N == 64)
        return mode == ZK32   ? zenc_64_ZK32(c->st, t, c->zrank, src, lo, hi, p)
               : mode == ZK64 ? zenc_64_ZK64(c->st, t, c->zrank, src, lo, hi, p)
                              : zenc_64_ZRANK(c->st, t, c->zrank, src, lo, hi, p);
    return mode == ZK32   ? zenc_32_ZK32(c->st, t, c->zrank, src, lo, hi, p)
           : mode == ZK64 ? zenc_32_ZK64(c->st, t, c->zrank, src, lo, hi, p)
                          : zenc_32_ZRANK(c->st, t, c->zrank, src, lo, hi, p);
}
#endif
