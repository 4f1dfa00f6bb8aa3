/* rans_ctab.c — the compact frequency tables of codec 9 (order 0 for small planes).
 *
 * Codec 2's table spends a byte or two on every value between the least and the largest
 * present, which on a plane of a few hundred bytes costs more than the table saves: a
 * 384-byte mantissa plane of 150 values and ~170 bytes of entropy pays ~260 bytes of table
 * and is stored. These tables give the frequencies at a precision of 2^s (s <= 12) that
 * the encoder chooses per table, each one a Rice code of parameter k, and scale them by
 * 2^(12-s) to the coders' 4096: coarser probabilities cost a little in coded bits and
 * save much more in table bits on small planes.
 *
 * Layout: u8 lo | u8 hi | u8 s | (k << 4) | then for every value v in [lo, hi): its
 * frequency f at precision 2^s, as f >> k ones, a zero, and the k low bits of f (bits
 * least significant first, bytes filled from bit 0, the last byte padded with zeros);
 * hi's frequency is 2^s less their sum and must be at least 1, lo's at least 1.
 */
#include <math.h>

#include "ent_internal.h"

typedef struct {
    uint8_t *p;
    size_t bits;
} bitw;

static void put_bits(bitw *w, uint32_t v, unsigned nb)
{
    for (unsigned i = 0; i < nb; i++, w->bits++) {
        if ((w->bits & 7) == 0) w->p[w->bits >> 3] = 0;
        w->p[w->bits >> 3] |= (uint8_t)(((v >> i) & 1u) << (w->bits & 7));
    }
}

/* Frequencies of the counts at precision 2^s, each counted value at least 1 and at most
 * 2^s - 1: rans_normalize's rule at another precision. -1 where 2^s is too coarse. */
static int normalize_to(const uint32_t *cnt, int lo, int hi, uint64_t total, int present, unsigned s, uint16_t *freq)
{
    int32_t M = (int32_t)1 << s, sum = 0;
    if (present >= M || present < 2) return -1;
    memset(freq, 0, 256 * sizeof *freq);
    for (int v = lo; v <= hi; v++) {
        if (!cnt[v]) continue;
        uint64_t f = (cnt[v] * (uint64_t)M + total / 2) / total;
        freq[v] = (uint16_t)(f<1 ? 1 : f>(uint64_t) M - 1 ? (uint64_t)M - 1 : f);
        sum += freq[v];
    }
    while (sum != M) { /* the rounding error to the largest, where it costs the least */
        int m = -1;
        for (int v = lo; v <= hi; v++)
            if (freq[v] && (m < 0 || freq[v] > freq[m]) && (sum > M ? freq[v] > 1 : freq[v] < M - 1)) m = v;
        if (m < 0) return -1; /* unreachable: fewer than M values leave room */
        int32_t d = M - sum;
        if (d < 0 && -d > (int32_t)freq[m] - 1) d = 1 - (int32_t)freq[m];
        if (d > 0 && d > M - 1 - (int32_t)freq[m]) d = M - 1 - (int32_t)freq[m];
        freq[m] = (uint16_t)((int32_t)freq[m] + d);
        sum += d;
    }
    return 0;
}

/* The uniform table of [lo, hi] (s = 0): 4096 shared out, the first values taking the
 * remainder. */
static void uniform(int lo, int hi, uint16_t *freq)
{
    unsigned r = (unsigned)(hi - lo + 1);
    memset(freq, 0, 256 * sizeof *freq);
    for (int v = lo; v <= hi; v++) freq[v] = (uint16_t)(RANS_M / r + ((unsigned)(v - lo) < RANS_M % r));
}

/* Bits of a table (its three bytes included) with parameter k. */
static size_t table_bits(const uint16_t *freq, int lo, int hi, unsigned k)
{
    size_t b = 24;
    for (int v = lo; v < hi; v++) b += (freq[v] >> k) + 1 + k;
    return b;
}

size_t rans_ctab_write(const uint32_t *cnt, uint16_t *freq, uint8_t *out)
{
    int lo = 0, hi = 255;
    while (lo < 255 && !cnt[lo]) lo++;
    while (hi > lo && !cnt[hi]) hi--;
    uint16_t f[256];
    double best = 1e300;
    unsigned bs = 0, bk = 0;
    if (lo < hi) { /* near-random parts: log2(hi - lo + 1) bits a byte for three bytes */
        uniform(lo, hi, f);
        best = rans_coded_bits(cnt, f) + 24;
    }
    /* Precisions around the counts' own (log2 of their total): coarser ones cost more
     * coded bits than their tables save, finer ones only table bits; from the least that
     * gives every present value a frequency. */
    uint64_t total = 0;
    unsigned present = 0, sc = 0, s0 = 1;
    for (int v = lo; v <= hi; v++) total += cnt[v], present += cnt[v] != 0;
    while (sc < RANS_BITS && (total >> sc) > 1) sc++;
    while ((1u << s0) <= present) s0++;
    unsigned s1 = sc + 1 < RANS_BITS ? sc + 1 : RANS_BITS;
    if (s0 + 2 < sc) s0 = sc - 2;
    if (s1 < s0 + 1) s1 = s0 + 1 < RANS_BITS ? s0 + 1 : RANS_BITS;
    for (unsigned s = s0; s <= s1; s++) {
        if (normalize_to(cnt, lo, hi, total, (int)present, s, f)) continue;
        for (int v = 0; v < 256; v++) f[v] = (uint16_t)(f[v] << (RANS_BITS - s));
        double coded = rans_coded_bits(cnt, f);
        for (int v = 0; v < 256; v++) f[v] = (uint16_t)(f[v] >> (RANS_BITS - s));
        /* k near log2 of the mean frequency: the Rice parameter's optimum */
        unsigned mean = (1u << s) / (unsigned)(hi - lo + 1), k0 = 0;
        while (k0 < s && (2u << k0) <= mean) k0++;
        for (unsigned k = k0 ? k0 - 1 : 0; k <= k0 + 1 && k <= s; k++) {
            double t = coded + (double)table_bits(f, lo, hi, k);
            if (t < best) best = t, bs = s, bk = k;
        }
    }
    if (bs) {
        normalize_to(cnt, lo, hi, total, (int)present, bs, f);
    } else if (lo < hi) {
        out[0] = (uint8_t)lo, out[1] = (uint8_t)hi, out[2] = 0;
        uniform(lo, hi, freq);
        return 3;
    } else { /* one value: 4095 and a neighbour's 1, as rans_normalize gives them */
        rans_normalize(cnt, f);
        bs = RANS_BITS, bk = 8;
        lo &= ~1, hi = lo + 1; /* the two values: v and v ^ 1 */
    }
    out[0] = (uint8_t)lo, out[1] = (uint8_t)hi, out[2] = (uint8_t)(bs | bk << 4);
    bitw w = {out + 3, 0};
    for (int v = lo; v < hi; v++) {
        for (uint32_t i = 0; i < (uint32_t)f[v] >> bk; i++) put_bits(&w, 1, 1);
        put_bits(&w, 0, 1);
        put_bits(&w, f[v], bk);
    }
    for (int v = 0; v < 256; v++) freq[v] = (uint16_t)(f[v] << (RANS_BITS - bs));
    return 3 + (w.bits + 7) / 8;
}

int rans_ctab_read(const uint8_t **pp, const uint8_t *end, uint16_t *freq)
{
    const uint8_t *p = *pp;
    if (end - p < 3) return -1;
    int lo = p[0], hi = p[1];
    unsigned s = p[2] & 15, k = p[2] >> 4;
    if (lo >= hi || s > RANS_BITS || k > s) return -1;
    p += 3;
    if (s == 0) {
        uniform(lo, hi, freq);
        *pp = p;
        return 0;
    }
    size_t avail = (size_t)(end - p) * 8, bit = 0;
    uint32_t M = 1u << s, sum = 0;
    memset(freq, 0, 256 * sizeof *freq);
    for (int v = lo; v < hi; v++) {
        uint32_t q = 0;
        for (;;) { /* unary part, bounded by M */
            if (bit >= avail) return -1;
            unsigned b = (p[bit >> 3] >> (bit & 7)) & 1u;
            bit++;
            if (!b) break;
            if (++q > M) return -1;
        }
        uint32_t f = q << k;
        for (unsigned i = 0; i < k; i++, bit++) {
            if (bit >= avail) return -1;
            f |= (uint32_t)((p[bit >> 3] >> (bit & 7)) & 1u) << i;
        }
        sum += f;
        if (sum >= M) return -1;
        freq[v] = (uint16_t)(f << (RANS_BITS - s));
    }
    if (freq[lo] == 0) return -1;
    freq[hi] = (uint16_t)((M - sum) << (RANS_BITS - s));
    if (freq[hi] > RANS_M - 1) return -1;
    /* padding bits are zero: one byte string per table */
    size_t used = (bit + 7) / 8;
    if ((bit & 7) && (p[bit >> 3] >> (bit & 7))) return -1;
    *pp = p + used;
    return 0;
}
