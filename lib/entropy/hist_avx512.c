/* hist_avx512.c — the AVX-512 byte histogram of the entropy stage (hist.c calls it when
 * cpu_level() allows AVX-512).
 *
 * Exponent planes use a few dozen byte values. The histogram finds the value range of
 * its input, then counts up to eight values per pass with byte-wide compare-and-add
 * counters (three times the scalar table's speed on 20-40 values); planes that are
 * mostly one value (the high bytes of delta residuals) count that value by compare and
 * pack the rest with vpcompressb (VBMI2); other inputs go back to the table. Counts are
 * exact, so every path gives the coder the same tables.
 */
#include <string.h>

#include "common/cpu.h"
#include "ent_internal.h"

#ifdef ENT_HAVE_X86
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
        if (other * 256 > i * max_other) break;
    }
    for (int s = 0; s < 256; s++) cnt[s] = t[0][s] + t[1][s];
    cnt[d] += (uint32_t)(i - other);
    return i;
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
#define HCOUNT(k) c##k = _mm512_mask_add_epi8(c##k, _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(k)), c##k, one)
                HCOUNT(0);
                HCOUNT(1);
                HCOUNT(2);
                HCOUNT(3);
                HCOUNT(4);
                HCOUNT(5);
                HCOUNT(6);
                HCOUNT(7);
#undef HCOUNT
            }
#define HFLUSH(k) \
    if (g + k < range) cnt[lo + g + k] += (uint32_t)_mm512_reduce_add_epi64(_mm512_sad_epu8(c##k, zero))
        HFLUSH(0);
        HFLUSH(1);
        HFLUSH(2);
        HFLUSH(3);
        HFLUSH(4);
        HFLUSH(5);
        HFLUSH(6);
        HFLUSH(7);
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
    for (size_t i = nv * 64; i < n; i++) cnt[src[i]]++;
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
    if (hi < lo || hi - lo >= HIST_MAX_RANGE || np > ENT_PIECES_MAX || (size_t)np * v > 255) return 0;
    memset(cnt, 0, 256 * sizeof *cnt);
    count_spans(at, v, np, cnt, (int)lo, (int)(hi - lo + 1));
    for (int k = 0; k < np; k++)
        for (size_t i = v * 64; i < len; i++) cnt[at[k][i]]++;
    return 1;
}

T512 size_t ent_hist_avx512(const uint8_t *src, size_t n, uint32_t *cnt)
{
    if (n < 256) return 0;
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
    if (other <= 20 * group && (cpu_features() & CPU_VBMI2)) {
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

#endif
