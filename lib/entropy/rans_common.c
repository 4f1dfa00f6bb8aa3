/* rans_common.c — what the order-0 and order-1 rANS coders share: entropy
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

/* c * log2(c) (0 for c = 0) for the counts of a sub-block (16 KiB at the default
 * levels): the greedy segment merge evaluates hundreds of histograms per plane and
 * log2 dominated it. Filled on first use; racing threads write the same values. */
#define CLOG_MAX RANS_CLOG_MAX
static double clog_tab[CLOG_MAX + 1];
static int clog_ready;

static void clog_init(void)
{
    for (uint32_t c = 1; c <= CLOG_MAX; c++) clog_tab[c] = (double)c * log2((double)c);
    __atomic_store_n(&clog_ready, 1, __ATOMIC_RELEASE);
}

double ent_bits(const uint32_t *cnt, uint64_t total)
{
    if (total == 0) return 0.0;
    if (!__atomic_load_n(&clog_ready, __ATOMIC_ACQUIRE)) clog_init();
    /* Four sums: one chain of 256 dependent additions was the cost. Small alphabets
     * (the escape transform's A plane: 32 values) stop at their largest value. */
    int top = 256;
    while (top > 4 && !(cnt[top - 1] | cnt[top - 2] | cnt[top - 3] | cnt[top - 4])) top -= 4;
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

const double *rans_clog(void)
{
    if (!__atomic_load_n(&clog_ready, __ATOMIC_ACQUIRE)) clog_init();
    return clog_tab;
}

size_t rans_table_cost(const uint32_t *cnt, uint64_t total)
{
    if (total == 0) return 2;
    int lo = 0, hi = 255;
    while (lo < 255 && !cnt[lo]) lo++;
    while (hi > lo && !cnt[hi]) hi--;
    size_t bytes = 2;
    /* A symbol needs two bytes once its scaled frequency reaches 128/4096. */
    uint64_t big = (total * 127 + RANS_M - 1) / RANS_M;
    for (int s = lo; s < hi; s++) bytes += 1 + (cnt[s] > big);
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
        if (!cnt[s]) continue;
        uint32_t f = (uint32_t)(((uint64_t)cnt[s] * RANS_M + total / 2) / total);
        if (f == 0) f = 1;
        if (f > RANS_M - 1) f = RANS_M - 1;
        freq[s] = (uint16_t)f;
        sum += (int32_t)f;
    }
    /* Rounding error goes to the largest symbols, where it costs the least. */
    while (sum != (int32_t)RANS_M) {
        int m = -1;
        for (int s = 0; s < 256; s++)
            if (freq[s] && (m < 0 || freq[s] > freq[m]) && (sum > (int32_t)RANS_M ? freq[s] > 1 : freq[s] < RANS_M - 1))
                m = s;
        if (m < 0) break; /* unreachable: >= 2 symbols always leave room */
        int32_t d = (int32_t)RANS_M - sum;
        if (d < 0 && -d > (int32_t)freq[m] - 1) d = 1 - (int32_t)freq[m];
        if (d > 0 && d > (int32_t)(RANS_M - 1) - (int32_t)freq[m]) d = (int32_t)(RANS_M - 1) - (int32_t)freq[m];
        freq[m] = (uint16_t)((int32_t)freq[m] + d);
        sum += d;
    }
}

/* -log2(f / M) for every frequency f of a normalised table, filled on first use (racing
 * threads write the same values). */
static double lgf_tab[RANS_M];
static int lgf_ready;

const double *rans_lgf(void)
{
    if (!__atomic_load_n(&lgf_ready, __ATOMIC_ACQUIRE)) {
        for (uint32_t f = 1; f < RANS_M; f++) lgf_tab[f] = RANS_BITS - log2((double)f);
        __atomic_store_n(&lgf_ready, 1, __ATOMIC_RELEASE);
    }
    return lgf_tab;
}

double rans_coded_bits(const uint32_t *cnt, const uint16_t *freq)
{
    rans_lgf();
    double a[4] = {0, 0, 0, 0};
    for (int s = 0; s < 256; s += 4)
        for (int k = 0; k < 4; k++) a[k] += (double)cnt[s + k] * lgf_tab[freq[s + k]];
    return (a[0] + a[1]) + (a[2] + a[3]);
}

size_t rans_table_len(const uint16_t *freq)
{
    int lo = 0, hi = 255;
    while (lo < 255 && !freq[lo]) lo++;
    while (hi > lo && !freq[hi]) hi--;
    size_t k = 2;
    for (int s = lo; s < hi; s++) k += 1 + (freq[s] >= 128);
    return k;
}

size_t rans_table_write(const uint16_t *freq, uint8_t *out)
{
    int lo = 0, hi = 255;
    while (lo < 255 && !freq[lo]) lo++;
    while (hi > lo && !freq[hi]) hi--;
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
    if (end - p < 2) return -1;
    int lo = p[0], hi = p[1];
    p += 2;
    if (lo >= hi) /* one symbol would need frequency RANS_M, never written */
        return -1;
    memset(freq, 0, 256 * sizeof *freq);
    uint32_t sum = 0;
    for (int s = lo; s < hi; s++) {
        if (p >= end) return -1;
        uint32_t f = *p++;
        if (f & 0x80) {
            if (p >= end || *p >= (RANS_M >> 7)) return -1;
            f = (f & 0x7f) | ((uint32_t)*p++ << 7);
            if (f < 128) /* non-canonical: keeps one byte string per table */
                return -1;
        }
        freq[s] = (uint16_t)f;
        sum += f;
    }
    if (sum >= RANS_M || (freq[lo] == 0 && lo < hi)) return -1;
    freq[hi] = (uint16_t)(RANS_M - sum);
    if (freq[hi] > RANS_M - 1) return -1;
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

/* Eight entries a store: the slots of a symbol differ by (k << 8) only. */
typedef uint32_t dtab_v8 __attribute__((vector_size(32), aligned(4)));

void rans_build_dtab(const uint16_t *freq, uint32_t *dtab)
{
    /* Entry: symbol | (slot - cum) << 8 | freq << 20, so one load and one
     * multiply-add advance the state. A symbol's last store may run up to seven
     * entries past its slots: the symbols after it write over them, and a symbol
     * whose stores would pass the table's end is written one entry at a time. */
    const dtab_v8 step = {0, 1u << 8, 2u << 8, 3u << 8, 4u << 8, 5u << 8, 6u << 8, 7u << 8};
    uint32_t cum = 0;
    for (uint32_t s = 0; s < 256; s++) {
        uint32_t f = freq[s], e = s | (f << 20); /* (k << 8) < (1 << 20): + is | */
        if (!f) continue;
        if (cum + ((f + 7) & ~7u) <= RANS_M) {
            dtab_v8 v = step + e;
            for (uint32_t k = 0; k < f; k += 8, v += 8u << 8) *(dtab_v8 *)(void *)(dtab + cum + k) = v;
        } else {
            for (uint32_t k = 0; k < f; k++) dtab[cum + k] = e | (k << 8);
        }
        cum += f;
    }
}

size_t rans_finish(const uint32_t *st, unsigned nstates, uint8_t *p, const uint8_t *wend, uint8_t *dst, size_t hdr,
                   size_t n, size_t cap)
{
    for (unsigned j = nstates; j-- > 0;) {
        p -= 4;
        p[0] = (uint8_t)st[j];
        p[1] = (uint8_t)(st[j] >> 8);
        p[2] = (uint8_t)(st[j] >> 16);
        p[3] = (uint8_t)(st[j] >> 24);
    }
    size_t slen = (size_t)(wend - p);
    if (hdr + slen >= n || hdr + slen > cap) return 0;
    memcpy(dst + hdr, p, slen);
    return hdr + slen;
}
