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
    uint64_t acc; /* bits not yet written, least significant first */
    unsigned n;   /* how many */
} bitw;

static void put_bits(bitw *w, uint32_t v, unsigned nb) /* nb <= 32 */
{
    w->acc |= (uint64_t)(v & (uint32_t)((1ull << nb) - 1)) << w->n;
    w->n += nb;
    while (w->n >= 8) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->n -= 8;
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

/* The table's precision s and Rice parameter k, chosen from an estimate per precision in
 * one pass over the present values: the frequencies rounded without rans_normalize's
 * correction of their sum, their coded bits from the log table, the table's bits for k
 * within one of log2 of the mean frequency. Precisions from three below the counts' own
 * (log2 of their total; coarser ones lost more coded bits than their tables saved) to it
 * (finer ones only added table bits), and never so coarse that a present value gets no
 * frequency. Returns the estimated bits of the best, *bs 0 where none beats limit. */
static double choose(const uint32_t *cnt, const uint8_t *pv, unsigned np, int lo, int hi, uint64_t total, double limit,
                     unsigned *bs, unsigned *bk)
{
    const double *lg = rans_lgf();
    unsigned sc = 0, s0 = 1, r = (unsigned)(hi - lo + 1);
    while (sc < RANS_BITS && (total >> sc) > 1) sc++;
    while ((1u << s0) <= np) s0++;
    unsigned s1 = sc > s0 ? sc : s0;
    if (s1 > RANS_BITS) s1 = RANS_BITS;
    if (s0 + 3 < sc) s0 = sc - 3;
    double best = limit;
    *bs = 0;
    for (unsigned s = s0; s <= s1; s++) {
        unsigned mean = (1u << s) / r, k0 = 0;
        while (k0 < s && (2u << k0) <= mean) k0++;
        unsigned ka = k0 ? k0 - 1 : 0, kb = k0 + 1 <= s ? k0 + 1 : s, sh = RANS_BITS - s;
        double scale = (double)(1u << s) / (double)total, coded = 0;
        uint32_t top = (1u << s) - 1, t[3] = {0, 0, 0}, sum = 0, fm = 0, cm = 0, vm = 0;
        for (unsigned j = 0; j < np; j++) {
            uint32_t c = cnt[pv[j]], f = (uint32_t)((double)c * scale + 0.5);
            f = f < 1 ? 1 : f > top ? top : f;
            coded += (double)c * lg[f << sh];
            sum += f;
            if (f > fm) fm = f, cm = c, vm = pv[j];
            if (pv[j] == hi) continue; /* implied by the sum */
            t[0] += f >> ka, t[1] += f >> (ka + 1), t[2] += f >> kb;
        }
        /* the sum's error on the largest, as normalize_to puts it */
        int64_t fc = (int64_t)fm + (int64_t)(top + 1) - (int64_t)sum;
        if (fc < 1 || fc > (int64_t)top) continue; /* more than one value absorbs it: rare */
        coded += (double)cm * (lg[(uint32_t)fc << sh] - lg[fm << sh]);
        if (vm != (uint32_t)hi)
            for (unsigned i = 0; i < 3; i++) {
                unsigned k = ka + i > kb ? kb : ka + i;
                t[i] += ((uint32_t)fc >> k) - (fm >> k);
            }
        for (unsigned i = 0; i < 3; i++) {
            unsigned k = ka + i > kb ? kb : ka + i;
            double bits = coded + 24 + t[i] + (double)(r - 1) * (1 + k);
            if (bits < best) best = bits, *bs = s, *bk = k;
        }
    }
    return best;
}

size_t rans_ctab_write(const uint32_t *cnt, uint16_t *freq, uint8_t *out)
{
    int lo = 0, hi = 255;
    while (lo < 255 && !cnt[lo]) lo++;
    while (hi > lo && !cnt[hi]) hi--;
    uint16_t f[256];
    uint8_t pv[256];
    unsigned np = 0, bs = 0, bk = 0;
    uint64_t total = 0;
    /* the uniform table of the range, near-random parts: log2(hi - lo + 1) bits a byte
     * for three bytes */
    const double *lg = rans_lgf();
    unsigned r = (unsigned)(hi - lo + 1), q = RANS_M / r - (r == 1), m = RANS_M % r; /* r = 1: unused */
    double flat = 24;
    for (int v = lo; v <= hi; v++) {
        uint32_t c = cnt[v];
        flat += (double)c * lg[q + ((unsigned)(v - lo) < m)];
        total += c;
        pv[np] = (uint8_t)v;
        np += c != 0;
    }
    if (np > 1) choose(cnt, pv, np, lo, hi, total, flat, &bs, &bk);
    if (bs) {
        normalize_to(cnt, lo, hi, total, (int)np, bs, f);
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
    bitw w = {out + 3, 0, 0};
    for (int v = lo; v < hi; v++) {
        uint32_t u = (uint32_t)f[v] >> bk;
        for (; u >= 31; u -= 31) put_bits(&w, 0x7fffffffu, 31);
        put_bits(&w, (1u << u) - 1, u + 1); /* u ones and a zero */
        put_bits(&w, f[v], bk);
    }
    if (w.n) *w.p++ = (uint8_t)w.acc;
    for (int v = 0; v < 256; v++) freq[v] = (uint16_t)(f[v] << (RANS_BITS - bs));
    return (size_t)(w.p - out);
}

/* The bits of a table, read through a window of up to 64 bits that takes a byte only
 * when a bit of it is needed (so the bytes taken are the table's, and what is left of the
 * last one is its padding). */
typedef struct {
    const uint8_t *p, *end;
    uint64_t acc;
    unsigned n;
} bitr;

static int need(bitr *r, unsigned k) /* k <= 56 */
{
    while (r->n < k) {
        if (r->p >= r->end) return -1;
        r->acc |= (uint64_t)*r->p++ << r->n;
        r->n += 8;
    }
    return 0;
}

static void drop(bitr *r, unsigned k)
{
    r->acc = k < 64 ? r->acc >> k : 0;
    r->n -= k;
}

/* A run of ones and its zero: the ones in *q, at most max. */
static int unary(bitr *r, uint32_t max, uint32_t *q)
{
    uint32_t u = 0;
    for (;;) {
        if (need(r, 1)) return -1;
        unsigned t = (unsigned)__builtin_ctzll(~r->acc); /* ones in the window */
        if (t < r->n) {
            u += t;
            drop(r, t + 1);
            break;
        }
        u += r->n;
        drop(r, r->n);
        if (u > max) return -1;
    }
    if (u > max) return -1;
    *q = u;
    return 0;
}

int rans_ctab_read_sh(const uint8_t **pp, const uint8_t *end, uint16_t *freq, unsigned *shift)
{
    const uint8_t *p = *pp;
    if (end - p < 3) return -1;
    int lo = p[0], hi = p[1];
    unsigned s = p[2] & 15, k = p[2] >> 4;
    if (lo >= hi || s > RANS_BITS || k > s) return -1;
    p += 3;
    if (s == 0) { /* a range of 2^j values: every frequency 4096 >> j */
        unsigned r = (unsigned)(hi - lo + 1);
        uniform(lo, hi, freq);
        *pp = p;
        *shift = r & (r - 1) ? 0 : RANS_BITS - (unsigned)__builtin_ctz(r);
        return 0;
    }
    bitr r = {p, end, 0, 0};
    uint32_t M = 1u << s, sum = 0;
    memset(freq, 0, 256 * sizeof *freq);
    for (int v = lo; v < hi; v++) {
        uint32_t q;
        if (unary(&r, M, &q) || need(&r, k)) return -1;
        uint32_t f = q << k | (uint32_t)(r.acc & ((1u << k) - 1));
        drop(&r, k);
        sum += f;
        if (sum >= M) return -1;
        freq[v] = (uint16_t)(f << (RANS_BITS - s));
    }
    if (freq[lo] == 0) return -1;
    freq[hi] = (uint16_t)((M - sum) << (RANS_BITS - s));
    if (freq[hi] > RANS_M - 1) return -1;
    if (r.acc) return -1; /* padding bits are zero: one byte string per table */
    *pp = r.p;
    *shift = RANS_BITS - s;
    return 0;
}

int rans_ctab_read(const uint8_t **pp, const uint8_t *end, uint16_t *freq)
{
    unsigned sh;
    return rans_ctab_read_sh(pp, end, freq, &sh);
}

/* Codec 11's tables: lo, hi, then a bit string: a mode bit m, then for each f of [lo, hi)
 * its bit length b (0 for f = 0) as u = zigzag(b - b' - 1 + m) ones and a zero, b' the bit
 * length 1 + m values back (0 before lo), then f's b - 1 bits below its leading one. An
 * exponent plane's counts double from value to value up to its mode and halve after it
 * (m = 0: b' + 1 costs one bit, b' - 1 three); a plane of even bytes only (the sign bit
 * of a positive tensor's lowest byte) alternates with zeros (m = 1). The writer takes the
 * shorter; on the corpus's tables about half of codec 2's bytes (its FP32 weights' 1,903:
 * 1,092; the -1 files of Adam's second moment: 21,472 -> 11,689). */
/* The bit length of every frequency of [lo, hi) and the code of it in mode m; returns the
 * bits of the string (the mode bit included), writing it when w is not NULL. */
static size_t dtab_code(const uint16_t *freq, int lo, int hi, unsigned m, bitw *w)
{
    int bl[256];
    size_t bits = 1;
    if (w) put_bits(w, m, 1);
    for (int v = lo; v < hi; v++) {
        int b = freq[v] ? 32 - __builtin_clz(freq[v]) : 0, d = b - (v - lo > (int)m ? bl[v - 1 - m] : 0) - 1 + (int)m;
        unsigned u = d >= 0 ? 2u * (unsigned)d : 2u * (unsigned)-d - 1; /* <= RANS_DTAB_RUN */
        bits += u + 1 + (b > 1 ? (unsigned)b - 1 : 0);
        if (w) {
            put_bits(w, (1u << u) - 1, u + 1);
            if (b > 1) put_bits(w, freq[v], (unsigned)b - 1);
        }
        bl[v] = b;
    }
    return bits;
}

size_t rans_dtab_write(const uint16_t *freq, uint8_t *out)
{
    int lo = 0, hi = 255;
    while (lo < 255 && !freq[lo]) lo++;
    while (hi > lo && !freq[hi]) hi--;
    unsigned m = dtab_code(freq, lo, hi, 1, NULL) < dtab_code(freq, lo, hi, 0, NULL);
    out[0] = (uint8_t)lo, out[1] = (uint8_t)hi;
    bitw w = {out + 2, 0, 0};
    dtab_code(freq, lo, hi, m, &w);
    if (w.n) *w.p++ = (uint8_t)w.acc;
    return (size_t)(w.p - out);
}

/* Codec 11's bit strings are read from a copy padded with 16 zero bytes, through 64-bit
 * loads at any bit: at least 57 bits from bit `at` (a run of ones is at most 25, a field
 * at most 31 bits). The caller checks after each value that the bits it took were there,
 * so `at` passes the copy by at most 37 bits and a load by at most 13 bytes. */
typedef struct {
    uint8_t b[RANS_DTAB_MAX + 16];
    size_t at, have; /* bits taken; bits copied */
} peek;

static void peek_fill(peek *k, const uint8_t *p, const uint8_t *end, size_t most)
{
    size_t n = (size_t)(end - p) < most ? (size_t)(end - p) : most;
    memcpy(k->b, p, n);
    memset(k->b + n, 0, 16);
    k->at = 0, k->have = 8 * n;
}

static inline uint64_t peek_at(const peek *k)
{
    uint64_t v;
    memcpy(&v, k->b + (k->at >> 3), 8);
    return v >> (k->at & 7);
}

static inline uint32_t peek_take(peek *k, unsigned nb) /* nb <= 31 */
{
    uint32_t v = (uint32_t)peek_at(k) & ((1u << nb) - 1);
    k->at += nb;
    return v;
}

/* The bytes the string took, or 0 where it ran past the copy or its padding is not zero. */
static size_t peek_done(const peek *k)
{
    if (k->at > k->have) return 0;
    if ((k->at & 7) && k->b[k->at >> 3] >> (k->at & 7)) return 0;
    return (k->at + 7) >> 3;
}

int rans_dtab_read(const uint8_t **pp, const uint8_t *end, uint16_t *freq)
{
    const uint8_t *p = *pp;
    if (end - p < 3 || p[0] >= p[1]) return -1;
    int lo = p[0], hi = p[1], bl[2 + 256] = {0, 0}; /* bl[2 + i]: value lo + i's; two 0s before */
    peek k;
    peek_fill(&k, p + 2, end, (1u + (unsigned)(hi - lo) * (RANS_DTAB_RUN + RANS_BITS) + 7) / 8); /* the longest */
    int m = (int)peek_take(&k, 1);
    uint32_t sum = 0;
    memset(freq, 0, 256 * sizeof *freq);
    for (int i = 0; i < hi - lo; i++) {
        uint64_t w = peek_at(&k); /* the run, its zero and the low bits: at most 37 of its 57 */
        if (!~w) return -1;       /* a run of 57 ones or more */
        unsigned u = (unsigned)__builtin_ctzll(~w);
        if (u > RANS_DTAB_RUN) return -1;
        int b = bl[i + 1 - m] + 1 - m + ((int)(u >> 1) ^ -(int)(u & 1)); /* zigzag: 0, -1, 1, -2, ... */
        if ((unsigned)b > RANS_BITS) return -1;
        unsigned nb = b > 1 ? (unsigned)b - 1 : 0;
        uint32_t f = (b ? 1u << nb : 0) | ((uint32_t)(w >> (u + 1)) & ((1u << nb) - 1));
        k.at += u + 1 + nb;
        if (k.at > k.have) return -1; /* past the bytes there are */
        freq[lo + i] = (uint16_t)f;
        sum += f;
        bl[i + 2] = b;
    }
    size_t used = peek_done(&k);
    if (!used || freq[lo] == 0 || sum >= RANS_M) return -1;
    freq[hi] = (uint16_t)(RANS_M - sum);
    *pp = p + 2 + used;
    return 0;
}

/* Codec 11's final states: per state e = floor(log2 x) - 16 in four bits (two a byte,
 * state 0 in the low nibble), then the 16 + e bits of each x below its leading one, least
 * significant first, as one bit string padded with zero bits. A final state's log2 is
 * spread evenly over [16, 32) (the 3,040 order-0 states of the corpus's FP32 weights: 16
 * values of 170-223 each), so this is ~27.4 bits a state, not 32. */
size_t rans_states_len(const uint32_t *st, unsigned nstates)
{
    size_t bits = 0;
    for (unsigned j = 0; j < nstates; j++) bits += 31u - (unsigned)__builtin_clz(st[j]);
    return (nstates + 1) / 2 + (bits + 7) / 8;
}

void rans_states_put(const uint32_t *st, unsigned nstates, uint8_t *out)
{
    size_t k = (nstates + 1) / 2;
    memset(out, 0, k);
    bitw w = {out + k, 0, 0};
    for (unsigned j = 0; j < nstates; j++) {
        unsigned b = 31u - (unsigned)__builtin_clz(st[j]); /* bits below the leading one: 16..31 */
        out[j / 2] |= (uint8_t)((b - 16) << (4 * (j & 1)));
        put_bits(&w, st[j], b);
    }
    if (w.n) *w.p++ = (uint8_t)w.acc;
}

int rans_states_get(const uint8_t **pp, const uint8_t *end, uint32_t *st, unsigned nstates)
{
    const uint8_t *p = *pp;
    size_t h = (nstates + 1) / 2, bits = 0;
    if ((size_t)(end - p) < h || 4 * nstates > RANS_DTAB_MAX) return -1;
    if ((nstates & 1) && p[nstates / 2] >> 4) return -1; /* the unused nibble */
    for (unsigned j = 0; j < nstates; j++) bits += 16u + ((p[j / 2] >> (4 * (j & 1))) & 15u);
    if ((size_t)(end - p) - h < (bits + 7) / 8) return -1;
    peek k;
    peek_fill(&k, p + h, end, (bits + 7) / 8);
    for (unsigned j = 0; j < nstates; j++) {
        unsigned b = 16u + ((p[j / 2] >> (4 * (j & 1))) & 15u);
        st[j] = (1u << b) | peek_take(&k, b);
    }
    size_t used = peek_done(&k); /* padding bits are zero: one byte string */
    if (!used) return -1;
    *pp = p + h + used;
    return 0;
}
