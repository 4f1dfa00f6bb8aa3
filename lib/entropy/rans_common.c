/* rans_common.c — what the order-0 and order-1 rANS coders share: histograms, entropy
 * estimates, frequency normalisation, the compact table format and the encode/decode
 * symbol tables.
 *
 * Tables are sent per sub-block, so their size decides whether adapting pays: a table
 * is the present symbol range [lo, hi] followed by one 1- or 2-byte varint frequency
 * per symbol inside it (0 = absent), with the last one implied by the sum. Float
 * exponent planes use a few dozen adjacent values, so a table is tens of bytes. The
 * encoder's division is replaced by a multiply with a 64-bit reciprocal: with states
 * < 2^32 and frequencies < 2^12 the high half of x * ceil(2^64 / f) is exactly x / f,
 * which keeps scalar output identical on every platform.
 */
#include <math.h>
#include <string.h>

#include "ent_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static void hist_table(const uint8_t *src, size_t n, uint32_t *cnt);

void ent_histogram(const uint8_t *src, size_t n, uint32_t *cnt)
{
#ifdef ENT_HAVE_AVX512
    /* Below a few vectors the range pass and the per-window sums do not pay. */
    if (n >= 1024 && ent_simd_level() >= ENT_SIMD_AVX512) {
        size_t done = ent_hist_avx512(src, n, cnt);
        if (done == n)
            return;
        if (done) {
            uint32_t rest[256];
            hist_table(src + done, n - done, rest);
            for (int s = 0; s < 256; s++)
                cnt[s] += rest[s];
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
#ifdef ENT_HAVE_AVX512
    if (ent_simd_level() >= ENT_SIMD_AVX512)
        i = ent_minmax_avx512(src, n, &lo, &hi);
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
#ifdef ENT_HAVE_AVX512
    if (ent_simd_level() >= ENT_SIMD_AVX512) done = (int)ent_hist_pieces_avx512(at, 4, piece, lo, hi, cnt);
#endif
    if (!done) {
        uint32_t part[256];
        memset(cnt, 0, 256 * sizeof *cnt);
        for (int k = 0; k < 4; k++) {
            ent_histogram(at[k], piece, part);
            for (int s = 0; s < 256; s++)
                cnt[s] += part[s];
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
    for (; i < n; i++)
        h[0][src[i]]++;
    for (int s = 0; s < 256; s++)
        cnt[s] = h[0][s] + h[1][s] + h[2][s] + h[3][s] + h[4][s] + h[5][s] + h[6][s] + h[7][s];
}

/* c * log2(c) (0 for c = 0) for the counts of a sub-block (16 KiB at the default
 * levels): the greedy segment merge evaluates hundreds of histograms per plane and
 * log2 dominated it. Filled on first use; racing threads write the same values. */
#define CLOG_MAX 16384u
static double clog_tab[CLOG_MAX + 1];
static int clog_ready;

static void clog_init(void)
{
    for (uint32_t c = 1; c <= CLOG_MAX; c++)
        clog_tab[c] = (double)c * log2((double)c);
    __atomic_store_n(&clog_ready, 1, __ATOMIC_RELEASE);
}

double ent_bits(const uint32_t *cnt, uint64_t total)
{
    if (total == 0)
        return 0.0;
    if (!__atomic_load_n(&clog_ready, __ATOMIC_ACQUIRE))
        clog_init();
    /* Four sums: one chain of 256 dependent additions was the cost. Small alphabets
     * (the escape transform's A plane: 32 values) stop at their largest value. */
    int top = 256;
    while (top > 4 && !(cnt[top - 1] | cnt[top - 2] | cnt[top - 3] | cnt[top - 4]))
        top -= 4;
    double a[4] = {0, 0, 0, 0};
    for (int s = 0; s < top; s += 4)
        for (int k = 0; k < 4; k++) {
            uint32_t c = cnt[s + k];
            a[k] += c <= CLOG_MAX ? clog_tab[c] : (double)c * log2((double)c);
        }
    double acc = (a[0] + a[1]) + (a[2] + a[3]);
    double b = (double)total * log2((double)total) - acc;
    return b < 0 ? 0 : b;
}

size_t rans_table_cost(const uint32_t *cnt, uint64_t total)
{
    if (total == 0)
        return 2;
    int lo = 0, hi = 255;
    while (lo < 255 && !cnt[lo])
        lo++;
    while (hi > lo && !cnt[hi])
        hi--;
    size_t bytes = 2;
    /* A symbol needs two bytes once its scaled frequency reaches 128/4096. */
    uint64_t big = (total * 127 + RANS_M - 1) / RANS_M;
    for (int s = lo; s < hi; s++)
        bytes += 1 + (cnt[s] > big);
    return bytes;
}

void rans_normalize(const uint32_t *cnt, uint16_t *freq)
{
    uint64_t total = 0;
    int present = 0, last = 0;
    for (int s = 0; s < 256; s++) {
        total += cnt[s];
        if (cnt[s]) {
            present++;
            last = s;
        }
    }
    memset(freq, 0, 256 * sizeof *freq);
    if (present <= 1) {
        /* A frequency of RANS_M does not fit the 12-bit table fields; a dummy neighbour
         * costs 0.0004 bits per symbol. */
        freq[last] = RANS_M - 1;
        freq[last ^ 1] = 1;
        return;
    }
    int32_t sum = 0;
    for (int s = 0; s < 256; s++) {
        if (!cnt[s])
            continue;
        uint32_t f = (uint32_t)(((uint64_t)cnt[s] * RANS_M + total / 2) / total);
        if (f == 0)
            f = 1;
        if (f > RANS_M - 1)
            f = RANS_M - 1;
        freq[s] = (uint16_t)f;
        sum += (int32_t)f;
    }
    /* Rounding error goes to the largest symbols, where it costs the least. */
    while (sum != (int32_t)RANS_M) {
        int m = -1;
        for (int s = 0; s < 256; s++)
            if (freq[s] && (m < 0 || freq[s] > freq[m]) &&
                (sum > (int32_t)RANS_M ? freq[s] > 1 : freq[s] < RANS_M - 1))
                m = s;
        if (m < 0)
            break; /* unreachable: >= 2 symbols always leave room */
        int32_t d = (int32_t)RANS_M - sum;
        if (d < 0 && -d > (int32_t)freq[m] - 1)
            d = 1 - (int32_t)freq[m];
        if (d > 0 && d > (int32_t)(RANS_M - 1) - (int32_t)freq[m])
            d = (int32_t)(RANS_M - 1) - (int32_t)freq[m];
        freq[m] = (uint16_t)((int32_t)freq[m] + d);
        sum += d;
    }
}

size_t rans_table_write(const uint16_t *freq, uint8_t *out)
{
    int lo = 0, hi = 255;
    while (lo < 255 && !freq[lo])
        lo++;
    while (hi > lo && !freq[hi])
        hi--;
    size_t k = 0;
    out[k++] = (uint8_t)lo;
    out[k++] = (uint8_t)hi;
    for (int s = lo; s < hi; s++) {
        uint32_t f = freq[s];
        if (f < 128) {
            out[k++] = (uint8_t)f;
        } else {
            out[k++] = (uint8_t)(0x80 | (f & 0x7f));
            out[k++] = (uint8_t)(f >> 7);
        }
    }
    return k;
}

int rans_table_read(const uint8_t **pp, const uint8_t *end, uint16_t *freq)
{
    const uint8_t *p = *pp;
    if (end - p < 2)
        return -1;
    int lo = p[0], hi = p[1];
    p += 2;
    if (lo >= hi) /* one symbol would need frequency RANS_M, never written */
        return -1;
    memset(freq, 0, 256 * sizeof *freq);
    uint32_t sum = 0;
    for (int s = lo; s < hi; s++) {
        if (p >= end)
            return -1;
        uint32_t f = *p++;
        if (f & 0x80) {
            if (p >= end || *p >= (RANS_M >> 7))
                return -1;
            f = (f & 0x7f) | ((uint32_t)*p++ << 7);
            if (f < 128) /* non-canonical: keeps one byte string per table */
                return -1;
        }
        freq[s] = (uint16_t)f;
        sum += f;
    }
    if (sum >= RANS_M || (freq[lo] == 0 && lo < hi) )
        return -1;
    freq[hi] = (uint16_t)(RANS_M - sum);
    if (freq[hi] > RANS_M - 1)
        return -1;
    *pp = p;
    return 0;
}

void rans_build_esym(const uint16_t *freq, rans_esym *e)
{
    uint32_t cum = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (f) {
            e[s].xmax = f << (32 - RANS_BITS); /* ((L >> BITS) << 16) * f */
            e[s].cmpl = (uint16_t)(RANS_M - f);
            if (f == 1) {
                /* ceil(2^64/1) does not fit: with rcp = 2^64-1 the quotient comes out
                 * as x-1, and the bias absorbs the missing (M-1). */
                e[s].rcp = UINT64_MAX;
                e[s].bias = (uint16_t)(cum + RANS_M - 1);
            } else {
                e[s].rcp = UINT64_MAX / f + 1;
                e[s].bias = (uint16_t)cum;
            }
        }
        cum += f;
    }
}

void rans_build_dtab(const uint16_t *freq, uint32_t *dtab)
{
    /* Entry: symbol | (slot - cum) << 8 | freq << 20, so one load and one
     * multiply-add advance the state. */
    uint32_t cum = 0;
    for (uint32_t s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        for (uint32_t k = 0; k < f; k++)
            dtab[cum + k] = s | (k << 8) | (f << 20);
        cum += f;
    }
}
