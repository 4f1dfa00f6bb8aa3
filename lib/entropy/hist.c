/* hist.c — byte histograms, the first pass over every plane the entropy stage codes:
 * the selector decides from them and the coders build their tables from them.
 *
 * Exponent planes are long runs of a few values, so the table loop keeps eight
 * sub-histograms to break the dependency between equal bytes; CPUs with AVX-512 count
 * narrow or one-value planes with vector compares instead (hist_avx512.c), CPUs with
 * AVX2 narrow ones (hist_avx2.c); the counts are the same. Escape-coded planes of few
 * values, and up to level 3 the exponent bytes of 16-bit floats (ENT_HINT_SAMPLE), are
 * counted from a sample that keeps every value between the least and the largest byte
 * codable.
 */
#include <string.h>

#include "common/cpu.h"
#include "ent_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static void hist_table(const uint8_t *src, size_t n, uint32_t *cnt);

void ent_histogram(const uint8_t *src, size_t n, uint32_t *cnt)
{
#ifdef ENT_HAVE_X86
    /* Below a few vectors the range pass and the per-window sums do not pay. */
    if (n >= 1024 && cpu_level() >= CPU_AVX2) {
        size_t done = cpu_level() >= CPU_AVX512 ? ent_hist_avx512(src, n, cnt) : ent_hist_avx2(src, n, cnt);
        if (done == n) return;
        if (done) {
            uint32_t rest[256];
            hist_table(src + done, n - done, rest);
            for (int s = 0; s < 256; s++) cnt[s] += rest[s];
            return;
        }
    }
#endif
    hist_table(src, n, cnt);
}

void ent_histogram_sampled(const uint8_t *src, size_t n, uint32_t *cnt)
{
    if (n < 4096) {
        ent_histogram(src, n, cnt);
        return;
    }
    /* The range of the whole block first (every value in it must stay codable), then
     * four pieces of n / 16 bytes, the first at the start, the last at the end. */
    unsigned lo = 255, hi = 0;
    size_t i = 0;
#ifdef ENT_HAVE_X86
    if (cpu_level() >= CPU_AVX512) i = ent_minmax_avx512(src, n, &lo, &hi);
    else if (cpu_level() >= CPU_AVX2) i = ent_minmax_avx2(src, n, &lo, &hi);
#endif
#if defined(__SSE2__)
    __m128i mn = _mm_set1_epi8((char)0xff), mx = _mm_setzero_si128();
    size_t i0 = i;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        mn = _mm_min_epu8(mn, v);
        mx = _mm_max_epu8(mx, v);
    }
    uint8_t a[16], b[16];
    _mm_storeu_si128((__m128i *)(void *)a, mn);
    _mm_storeu_si128((__m128i *)(void *)b, mx);
    for (int k = 0; i > i0 && k < 16; k++) {
        lo = a[k] < lo ? a[k] : lo;
        hi = b[k] > hi ? b[k] : hi;
    }
#endif
    for (; i < n; i++) {
        lo = src[i] < lo ? src[i] : lo;
        hi = src[i] > hi ? src[i] : hi;
    }
    size_t piece = n / 16, m = 4 * piece;
    const uint8_t *at[4];
    for (int k = 0; k < 4; k++) at[k] = src + (n - piece) / 3 * (size_t)k;
    int done = 0;
#ifdef ENT_HAVE_X86
    if (cpu_level() >= CPU_AVX512) done = (int)ent_hist_pieces_avx512(at, 4, piece, lo, hi, cnt);
    else if (cpu_level() >= CPU_AVX2) done = (int)ent_hist_pieces_avx2(at, 4, piece, lo, hi, cnt);
#endif
    if (!done) {
        uint32_t part[256];
        memset(cnt, 0, 256 * sizeof *cnt);
        for (int k = 0; k < 4; k++) {
            ent_histogram(at[k], piece, part);
            for (int s = 0; s < 256; s++) cnt[s] += part[s];
        }
    }
    /* Scale to n (rounding down), floor the range at 1, and give what is left over (or
     * take what the floors added) to the most frequent value. */
    uint64_t sum = 0;
    int top = (int)lo;
    for (unsigned s = 0; s < 256; s++) {
        uint64_t v = (uint64_t)cnt[s] * n / m;
        if (s >= lo && s <= hi && v == 0) v = 1;
        if (s < lo || s > hi) v = 0;
        cnt[s] = (uint32_t)v;
        sum += v;
        if (cnt[s] > cnt[top]) top = (int)s;
    }
    if (sum > n + cnt[top] / 2) { /* floors outweigh the sample: count it all */
        ent_histogram(src, n, cnt);
        return;
    }
    cnt[top] = (uint32_t)((uint64_t)cnt[top] + n - sum);
}

static void hist_table(const uint8_t *src, size_t n, uint32_t *cnt)
{
    /* Eight sub-histograms fed from 64-bit loads break the store-to-load dependency on
     * runs of equal bytes, which exponent planes are full of. */
    uint32_t h[8][256];
    memset(h, 0, sizeof h);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, src + i, 8);
        h[0][v & 0xff]++;
        h[1][(v >> 8) & 0xff]++;
        h[2][(v >> 16) & 0xff]++;
        h[3][(v >> 24) & 0xff]++;
        h[4][(v >> 32) & 0xff]++;
        h[5][(v >> 40) & 0xff]++;
        h[6][(v >> 48) & 0xff]++;
        h[7][v >> 56]++;
    }
    for (; i < n; i++) h[0][src[i]]++;
    for (int s = 0; s < 256; s++)
        cnt[s] = h[0][s] + h[1][s] + h[2][s] + h[3][s] + h[4][s] + h[5][s] + h[6][s] + h[7][s];
}
