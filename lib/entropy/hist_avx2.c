/* hist_avx2.c — the AVX2 byte histogram of narrow planes, for CPUs without AVX-512
 * (hist.c calls it when cpu_level() is CPU_AVX2): as hist_avx512.c's range count, the
 * value range first, then up to eight values a pass with byte-wide compare-and-subtract
 * counters (a compare gives -1 where it matches), 32 bytes a vector, in windows of 255
 * vectors that the byte counters hold; planes wider than HIST_MAX_RANGE values go back to
 * the table, as do planes mostly of one value (no byte compress here). Counts are exact,
 * so every path gives the coder the same tables. */
#include <string.h>

#include "common/cpu.h"
#include "ent_internal.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>

#define T256 __attribute__((target("avx2")))

#define HIST_GROUP 8
/* Four passes at most: 32 values (a T = 31 escape plane, an FP32 exponent plane), where
 * the count runs about twice the table's speed; wider ranges gain too little. */
#define HIST_MAX_RANGE 32

/* Adds to cnt[lo .. lo + range) the counts of nv <= 255 vectors at at. */
T256 static void count_window(const uint8_t *at, size_t nv, uint32_t *cnt, int lo, int range)
{
    const __m256i zero = _mm256_setzero_si256();
    for (int g = 0; g < range; g += HIST_GROUP) {
        __m256i c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero, c5 = zero, c6 = zero, c7 = zero;
        const __m256i base = _mm256_set1_epi8((char)(lo + g));
        for (size_t j = 0; j < nv; j++) {
            /* v - base == k exactly when v is the k-th value of this group */
            __m256i v = _mm256_sub_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(at + 32 * j)), base);
#define HCOUNT(k) c##k = _mm256_sub_epi8(c##k, _mm256_cmpeq_epi8(v, _mm256_set1_epi8(k)))
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
        __m256i s[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
        for (int k = 0; k < HIST_GROUP && g + k < range; k++) {
            uint64_t q[4];
            _mm256_storeu_si256((__m256i *)(void *)q, _mm256_sad_epu8(s[k], zero));
            cnt[lo + g + k] += (uint32_t)(q[0] + q[1] + q[2] + q[3]);
        }
    }
}

/* cnt (set) of n bytes at src whose values lie in [lo, lo + range). */
T256 static void hist_range(const uint8_t *src, size_t n, uint32_t *cnt, int lo, int range, int clear)
{
    size_t nv = n / 32;
    if (clear) memset(cnt, 0, 256 * sizeof *cnt);
    for (size_t w0 = 0; w0 < nv; w0 += 255) count_window(src + 32 * w0, nv - w0 < 255 ? nv - w0 : 255, cnt, lo, range);
    for (size_t i = nv * 32; i < n; i++) cnt[src[i]]++;
}

T256 size_t ent_minmax_avx2(const uint8_t *src, size_t n, unsigned *lo, unsigned *hi)
{
    size_t nv = n / 32 * 32;
    if (!nv) return 0;
    __m256i mn = _mm256_set1_epi8((char)0xff), mx = _mm256_setzero_si256();
    for (size_t i = 0; i < nv; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        mn = _mm256_min_epu8(mn, v);
        mx = _mm256_max_epu8(mx, v);
    }
    uint8_t a[32], b[32];
    _mm256_storeu_si256((__m256i *)(void *)a, mn);
    _mm256_storeu_si256((__m256i *)(void *)b, mx);
    for (int k = 0; k < 32; k++) {
        *lo = a[k] < *lo ? a[k] : *lo;
        *hi = b[k] > *hi ? b[k] : *hi;
    }
    return nv;
}

T256 size_t ent_hist_avx2(const uint8_t *src, size_t n, uint32_t *cnt)
{
    if (n < 256) return 0;
    /* the first 256 bytes send wide planes (mantissas) straight to the table */
    unsigned lo = 255, hi = 0;
    ent_minmax_avx2(src, 256, &lo, &hi);
    if (hi - lo >= HIST_MAX_RANGE) return 0;
    size_t i = 256 + ent_minmax_avx2(src + 256, n - 256, &lo, &hi);
    for (; i < n; i++) {
        lo = src[i] < lo ? src[i] : lo;
        hi = src[i] > hi ? src[i] : hi;
    }
    if (hi - lo >= HIST_MAX_RANGE) return 0;
    hist_range(src, n, cnt, (int)lo, (int)(hi - lo + 1), 1);
    return n;
}

T256 size_t ent_hist_pieces_avx2(const uint8_t *const *at, int np, size_t len, unsigned lo, unsigned hi, uint32_t *cnt)
{
    if (hi < lo || hi - lo >= HIST_MAX_RANGE || np > ENT_PIECES_MAX) return 0;
    memset(cnt, 0, 256 * sizeof *cnt);
    for (int k = 0; k < np; k++) hist_range(at[k], len, cnt, (int)lo, (int)(hi - lo + 1), 0);
    return 1;
}
#endif
