/* rans0.c — order-0 rANS with tables that adapt along the plane.
 *
 * Tensor scales drift along a checkpoint, so one table per plane leaves ~1.5% on the
 * table; but a table per small block costs tens of bytes. The encoder therefore cuts
 * the plane into base blocks (8-32 KiB by level, down to 1 KiB on small planes), counts
 * each, and greedily merges a block into the running segment whenever one shared table
 * is estimated cheaper than two (table bytes included). All segments share one rANS stream: the interleaved
 * states simply switch tables at segment boundaries, so adaptation costs only the
 * tables, not a state flush per block.
 *
 * Payload: u8 log2(base block) | u8 log2(states N: 5 or 6) | per segment: LEB128
 * block count, table | N little-endian u32 final states | 16-bit little-endian
 * renormalisation words. Symbol i belongs to state i % N. Encoder and decoder each
 * have a portable scalar loop, here, and an AVX2 loop (rans0_avx2.c, chosen at run
 * time by cpu.h) that emit and read the same words in the same order, so every
 * combination decodes; the scalar loops are branch-free except for the loop itself.
 * The encoder also has AVX-512 loops (rans0_avx512.c): one for segments of up to 64
 * symbols, every exponent plane measured, at twice the AVX2 loop's speed, and one for
 * any alphabet (delta residual planes) at about 3.5 times.
 *
 * Codec 11 is codec 2's stream with the 16 bits each state carries for nothing (the L it
 * starts and must end on) put to use: each lane's last symbols are coded into the state
 * its encoder starts from (fold_tail) and decoded from what the words leave, by the scalar
 * loop after the vector ones; its final states are packed and its tables coded by bit
 * length (rans_ctab.c). On a 256 KiB exponent plane of FP32 weights: ~120 bytes less.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ent_internal.h"
#include "common/cpu.h"

static size_t leb_write(uint8_t *out, size_t v)
{
    size_t k = 0;
    while (v >= 0x80) {
        out[k++] = (uint8_t)(0x80 | (v & 0x7f));
        v >>= 7;
    }
    out[k++] = (uint8_t)v;
    return k;
}

static int leb_read(const uint8_t **pp, const uint8_t *end, size_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            /* canonical encodings only: no padding bytes, no bits past 32 */
            if ((shift && b == 0) || r > UINT32_MAX) return -1;
            *pp = p;
            *v = (size_t)r;
            return 0;
        }
    }
    return -1;
}

int rans0_base_shift(int level, size_t n)
{
    int sh = level <= 2 ? 15 : level <= 5 ? 14 : 13;
    /* Tiny planes: one block, never more than needed. */
    while (sh > 10 && ((size_t)1 << sh) > n) sh--;
    return sh;
}

/* Codec 2 and codec 9 share the coder below (codec 9 has its own plan, rans0s_plan, and
 * decoder, rans0s_decode); small (codec 9) is a constant at every call of these
 * always-inlined helpers, so each codec's copy folds it and codec 2's loops keep no trace
 * of codec 9's branches. */
#define LANES_INLINE static inline __attribute__((always_inline))

/* log2 of the states: codec 9's 4, codec 2's 32 or 64 (large planes). */
LANES_INLINE unsigned lanes_lg(size_t n, int small) { return small ? RANS0S_LG : n >= RANS0_BIG_PLANE ? 6 : 5; }

static double seg_cost(const uint32_t *cnt, uint64_t total)
{
    return ent_bits(cnt, total) / 8.0 + (double)rans_table_cost(cnt, total) + 1.0;
}

/* log2 of the base block: codec 9's blocks are small enough to tell a small tensor's
 * part of a plane from its neighbours' (128 bytes: 384 elements are three), but no more
 * than 16 a plane: counting and merging blocks is most of its coding time. */
LANES_INLINE int base_shift(int level, size_t n, int small)
{
    if (!small) return rans0_base_shift(level, n);
    int sh = RANS0S_SHIFT;
    while (sh < 24 && ((n - 1) >> sh) >= 16) sh++;
    return sh;
}

/* The plan of a plane: its base blocks' counts merged greedily into segments, each
 * segment's counts in its first block's slot; left in c for rans0_size and the encode
 * of the same plane just after. Returns the plan's estimated size (entropy and table
 * costs), or 1e300 where it cannot beat n. */
/* A plan's end, codec 2's and codec 9's alike: est (the closed segments' tables and words)
 * plus the last segment's, the header and 2^lg states; where it beats storing, the plan is recorded for the encoder
 * that follows on the same plane (c->o0_*), else 1e300. */
static double plan_done(ent_ctx *c, const uint8_t *src, size_t n, int sh, size_t nseg, unsigned lg, double est,
                        double last)
{
    est += last + 2 + 4 * (1u << lg);
    if (est >= (double)n) return 1e300;
    c->o0_src = src;
    c->o0_n = n;
    c->o0_sh = sh;
    c->o0_nseg = nseg;
    c->o0_plane = c->plane;
    c->o0_lg = lg;
    return est;
}

double rans0_plan(ent_ctx *c, const uint8_t *src, size_t n, int level)
{
    c->o0_src = NULL;
    if (n == 0) return 1e300;
    int sh = rans0_base_shift(level, n);
    size_t B = (size_t)1 << sh;
    size_t nb = (n + B - 1) >> sh;
    /* Layout of bhist: nb block histograms, then per segment its first block and a
     * normalised table (reusing the block's slot as uint16[256]). */
    if (ent_grow((void **)&c->bhist, &c->bhist_cap, nb * (256 * sizeof(uint32_t) + sizeof(size_t)))) return 1e300;
    uint32_t *bh = c->bhist;
    size_t *segstart = (size_t *)(void *)(bh + nb * 256);
    if (c->bhist_shift != sh || c->bhist_src != src || c->bhist_n != n) {
        for (size_t b = 0; b < nb; b++) {
            size_t s0 = b << sh, len = (b + 1 == nb) ? n - s0 : B;
            ent_histogram(src + s0, len, bh + b * 256);
        }
    }
    c->bhist_src = NULL; /* consumed: the slots are reused for segment tables below */
    /* Greedy merge, left to right. */
    uint32_t cur[256];
    memcpy(cur, bh, sizeof cur);
    uint64_t curtot = nb == 1 ? n : B;
    double curcost = seg_cost(cur, curtot), est = 0;
    size_t nseg = 0;
    segstart[nseg++] = 0;
    for (size_t b = 1; b < nb; b++) {
        const uint32_t *h = bh + b * 256;
        uint64_t tot = (b + 1 == nb) ? n - (b << sh) : B;
        uint32_t m[256];
        for (int s = 0; s < 256; s++) m[s] = cur[s] + h[s];
        double cm = seg_cost(m, curtot + tot);
        double ch = seg_cost(h, tot);
        if (cm <= curcost + ch) {
            memcpy(cur, m, sizeof cur);
            curtot += tot;
            curcost = cm;
        } else {
            /* Segment closed: park its summed counts in its first block's slot. */
            memcpy(bh + segstart[nseg - 1] * 256, cur, sizeof cur);
            est += curcost;
            segstart[nseg++] = b;
            memcpy(cur, h, sizeof cur);
            curtot = tot;
            curcost = ch;
        }
    }
    memcpy(bh + segstart[nseg - 1] * 256, cur, sizeof cur);
    return plan_done(c, src, n, sh, nseg, lanes_lg(n, 0), est, curcost);
}

/* Codec 9's segment cost in bytes from its counts' sums: A = sum of c log2 c, T = sum of
 * the counts' bit lengths, [lo, hi] their range, tot their total; the entropy plus the
 * compact table as about one bit a value of the range and the count's magnitude (the
 * best precision's frequencies), or the uniform table of the range (3 bytes), and the
 * segment's block count. */
static inline double clg(const double *cl, uint32_t c)
{
    return c <= RANS_CLOG_MAX ? cl[c] : (double)c * log2((double)c); /* planes forced to codec 9 */
}

static double small_cost(double A, unsigned T, unsigned lo, unsigned hi, uint32_t tot, const double *cl)
{
    unsigned r = hi - lo + 1;
    double bits = clg(cl, tot) - A + 24 + r + T, flat = (double)tot * (cl[r] / r) + 24;
    return (bits < flat ? bits : flat) / 8 + 1;
}

static inline unsigned bitlen(uint32_t c) { return 31u - (unsigned)__builtin_clz(2 * c | 1); }

/* Codec 9's plan: the same greedy merge as codec 2's, over blocks of at most 256 bytes,
 * each counted once with the list of its distinct values, so a block's cost alone and
 * merged into the running segment come from one pass over those values (a few dozen on
 * exponent planes), not from two passes over the 256-value range. The segments' counts
 * land in their first blocks' slots, as codec 2's. */
static double rans0s_plan(ent_ctx *c, const uint8_t *src, size_t n, int level)
{
    c->o0_src = NULL;
    c->bhist_src = NULL;
    if (n == 0) return 1e300;
    int sh = base_shift(level, n, 1);
    size_t B = (size_t)1 << sh, nb = ((n - 1) >> sh) + 1;
    if (ent_grow((void **)&c->bhist, &c->bhist_cap, nb * (256 * sizeof(uint32_t) + sizeof(size_t)))) return 1e300;
    uint32_t *bh = c->bhist;
    size_t *segstart = (size_t *)(void *)(bh + nb * 256);
    const double *cl = rans_clog();
    uint32_t cur[256], blk[256], curtot = 0;
    uint8_t dl[257];
    memset(cur, 0, sizeof cur);
    memset(blk, 0, sizeof blk);
    double curA = 0, curcost = 0, est = 0;
    unsigned curT = 0, lo = 255, hi = 0;
    size_t nseg = 0;
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *p = src + (b << sh);
        uint32_t len = (uint32_t)(b + 1 == nb ? n - (b << sh) : B);
        unsigned k = 0;
        for (uint32_t i = 0; i < len; i++) {
            uint8_t x = p[i];
            dl[k] = x;
            k += blk[x]++ == 0;
        }
        double hA = 0, mA = 0;
        unsigned hT = 0, mT = 0, hlo = 255, hhi = 0;
        for (unsigned j = 0; j < k; j++) {
            unsigned v = dl[j];
            uint32_t hv = blk[v], cv = cur[v];
            hA += clg(cl, hv);
            mA += clg(cl, cv + hv) - clg(cl, cv);
            hT += bitlen(hv);
            mT += bitlen(cv + hv) - bitlen(cv);
            hlo = v < hlo ? v : hlo;
            hhi = v > hhi ? v : hhi;
        }
        double ch = small_cost(hA, hT, hlo, hhi, len, cl);
        unsigned mlo = hlo < lo ? hlo : lo, mhi = hhi > hi ? hhi : hi;
        double cm = b ? small_cost(curA + mA, curT + mT, mlo, mhi, curtot + len, cl) : 0;
        if (b && cm <= curcost + ch) {
            for (unsigned j = 0; j < k; j++) cur[dl[j]] += blk[dl[j]];
            curA += mA, curT += mT, lo = mlo, hi = mhi, curtot += len, curcost = cm;
        } else {
            if (b) { /* segment closed: its counts to its first block's slot */
                memcpy(bh + segstart[nseg - 1] * 256, cur, sizeof cur);
                memset(cur, 0, sizeof cur);
                est += curcost;
            }
            segstart[nseg++] = b;
            for (unsigned j = 0; j < k; j++) cur[dl[j]] = blk[dl[j]];
            curA = hA, curT = hT, lo = hlo, hi = hhi, curtot = len, curcost = ch;
        }
        for (unsigned j = 0; j < k; j++) blk[dl[j]] = 0;
    }
    memcpy(bh + segstart[nseg - 1] * 256, cur, sizeof cur);
    return plan_done(c, src, n, sh, nseg, RANS0S_LG, est, curcost);
}

/* The plan's coded size from its normalised tables: the symbols' exact bits under them,
 * the tables' bytes and the states (the encoder normalises the same counts again: the
 * selector asks for this only where codec 8 competes, on large planes, where that is
 * cheap). */
double rans0_size(ent_ctx *c, const uint8_t *src, size_t n)
{
    if (c->o0_src != src || c->o0_n != n || c->o0_plane != c->plane) return 1e300;
    size_t nb = ((n - 1) >> c->o0_sh) + 1, nseg = c->o0_nseg, hdr = 2;
    const uint32_t *bh = c->bhist;
    const size_t *segstart = (const size_t *)(const void *)(bh + nb * 256);
    double bits = 0;
    uint8_t tb[8];
    for (size_t k = 0; k < nseg; k++) {
        size_t b1 = k + 1 < nseg ? segstart[k + 1] : nb;
        const uint32_t *cnt = bh + segstart[k] * 256;
        uint16_t f[256];
        rans_normalize(cnt, f);
        bits += rans_coded_bits(cnt, f);
        hdr += leb_write(tb, b1 - segstart[k]) + rans_table_len(f);
    }
    return (double)hdr + bits / 8 + 4.0 * (1u << lanes_lg(n, 0));
}

/* Codec 11's tail: the last t rounds of symbols coded into the states the encoder starts
 * from (L + y_j), rather than into words, t as large as keeps every y_j below 2^32 - L.
 * y_j codes its lane's tail symbols as rANS steps without renormalisation, from 0, each
 * with its segment's table (fq: segment k's frequencies at bh + segstart[k] * 256).
 * Sets st[] to the states to start from and returns t. */
static unsigned fold_tail(const uint8_t *src, size_t n, unsigned N, int sh, const uint32_t *bh, const size_t *segstart,
                          size_t nseg, uint32_t *st)
{
    uint64_t y[RANS0_NMAX] = {0}, ny[RANS0_NMAX];
    uint32_t cum[256];
    size_t k = nseg, t = 0, tmax = n / N < RANS0T_TMAX ? n / N : RANS0T_TMAX;
    const uint16_t *fq = NULL;
    for (; t < tmax; t++) {
        size_t i0 = n - (t + 1) * N;
        int ok = 1;
        for (size_t i = i0 + N; i-- > i0 && ok;) {
            size_t b = i >> sh;
            if (!fq || b < segstart[k]) {
                while (b < segstart[k - 1]) k--;
                fq = (const uint16_t *)(const void *)(bh + segstart[--k] * 256);
                for (uint32_t s = 0, a = 0; s < 256; s++) cum[s] = a, a += fq[s];
            }
            uint32_t f = fq[src[i]], v32 = (uint32_t)y[i & (N - 1)]; /* y < 2^32: a 32-bit division */
            uint64_t v = (uint64_t)(v32 / f) * RANS_M + v32 % f + cum[src[i]];
            ok = v < (1ull << 32) - RANS_L;
            ny[i & (N - 1)] = v;
        }
        if (!ok) break;
        memcpy(y, ny, N * sizeof *y);
    }
    for (unsigned j = 0; j < N; j++) st[j] = RANS_L + (uint32_t)y[j];
    return (unsigned)t;
}

/* Codes the plane with codec 2 or 11 (fold; 32 or 64 states) or, small, codec 9 (4 states). */
LANES_INLINE size_t encode_lanes(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level,
                                 int small, int fold)
{
    if (n == 0) return 0;
    int sh = base_shift(level, n, small);
    unsigned lg = lanes_lg(n, small);
    if ((c->o0_src != src || c->o0_n != n || c->o0_sh != sh || c->o0_plane != c->plane || c->o0_lg != lg) &&
        (small ? rans0s_plan(c, src, n, level) : rans0_plan(c, src, n, level)) >= 1e300)
        return 0;
    c->o0_src = NULL;
    size_t nb = ((n - 1) >> sh) + 1, nseg = c->o0_nseg;
    uint32_t *bh = c->bhist;
    const size_t *segstart = (const size_t *)(const void *)(bh + nb * 256);
    if (cap < 1) return 0;

    /* Header: tables are written now; the stream goes to scratch and is copied after. */
    size_t hdr = 0;
    size_t lim = cap < n ? cap : n; /* anything not below n loses to STORED anyway */
    if (lim < 3) return 0;
    dst[hdr++] = (uint8_t)sh;
    hdr++; /* lane count, set below */
    for (size_t k = 0; k < nseg; k++) {
        size_t b0 = segstart[k], b1 = k + 1 < nseg ? segstart[k + 1] : nb;
        uint16_t *f = (uint16_t *)(void *)(bh + b0 * 256);
        uint16_t tmp[256];
        uint8_t tb[8 + RANS_DTAB_MAX]; /* codec 2's tables: up to 512 bytes; codec 9's: RANS_CTAB_MAX */
        size_t tl = leb_write(tb, b1 - b0);
        if (small) {
            tl += rans_ctab_write(bh + b0 * 256, tmp, tb + tl);
        } else {
            rans_normalize(bh + b0 * 256, tmp);
            tl += fold ? rans_dtab_write(tmp, tb + tl) : rans_table_write(tmp, tb + tl);
        }
        memcpy(f, tmp, sizeof tmp);
        if (hdr + tl >= lim) return 0;
        memcpy(dst + hdr, tb, tl);
        hdr += tl;
    }
    if (hdr >= n) return 0;
    unsigned N = 1u << lg, NM = N - 1;
    dst[1] = (uint8_t)lg;

    /* Worst case 12 bits per symbol plus the states; 2n is loose and simple. */
    size_t scap = 2 * n + 4 * RANS0_NMAX + 64;
    uint8_t *sbuf = ent_scratch(c, scap);
    if (!sbuf) return 0;
    uint8_t *p = sbuf + scap;
    uint32_t *st = c->st;
    size_t nm = n; /* the symbols coded into words: codec 11's tail comes off */
    if (fold) {
        unsigned t = fold_tail(src, n, N, sh, bh, segstart, nseg, st);
        dst[1] = (uint8_t)(lg | t << 3); /* the tail rounds in the lane count's byte */
        nm = n - (size_t)t * N;
    } else {
        for (unsigned j = 0; j < N; j++) st[j] = RANS_L;
    }
    rans_esym *E = c->etab;
#ifdef ENT_HAVE_X86
    int simd = small ? CPU_SCALAR : cpu_level(); /* the vector loops take 32 or 64 states */
#endif
    for (size_t k = nseg; k-- > 0;) {
        size_t b0 = segstart[k], b1 = k + 1 < nseg ? segstart[k + 1] : nb;
        size_t s0 = b0 << sh, s1 = b1 << sh;
        if (s1 > nm) s1 = nm;
        if (s0 >= s1) continue;
        const uint16_t *fq = (const uint16_t *)(const void *)(bh + b0 * 256);
        rans_build_esym(fq, E);
        size_t vlo = s0;
#ifdef ENT_HAVE_X86
        if (simd >= CPU_AVX2) vlo = s0 + (s1 - s0) / N * N; /* segments start on a round */
#endif
        for (size_t i = s1; i-- > vlo;) st[i & NM] = rans_enc_step(st[i & NM], &E[src[i]], &p);
#ifdef ENT_HAVE_X86
        if (vlo > s0)
            p = simd >= CPU_AVX512 ? rans0_enc_avx512(c, N, fq, src, s0, vlo, p)
                                   : rans0_enc_avx2(c, N, fq, src, s0, vlo, p);
#endif
    }
    if (!fold) return rans_finish(st, N, p, sbuf + scap, dst, hdr, n, cap);
    size_t sl = rans_states_len(st, N), wl = (size_t)(sbuf + scap - p);
    if (hdr + sl + wl >= n || hdr + sl + wl > cap) return 0;
    rans_states_put(st, N, dst + hdr);
    memcpy(dst + hdr + sl, p, wl);
    return hdr + sl + wl;
}

size_t rans0_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    return encode_lanes(c, src, n, dst, cap, level, 0, 0);
}

size_t rans0t_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    return encode_lanes(c, src, n, dst, cap, level, 0, 1);
}

size_t rans0s_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    return encode_lanes(c, src, n, dst, cap, level, 1, 0);
}

/* One decode step of state j; refills from p without a bounds check (callers
 * guarantee 2 bytes per remaining state in the round). */
#define DEC_STEP(j)                                                       \
    do {                                                                  \
        uint32_t x_ = st[j];                                              \
        uint32_t e_ = dt[x_ & (RANS_M - 1)];                              \
        out[j] = (uint8_t)e_;                                             \
        x_ = (e_ >> 20) * (x_ >> RANS_BITS) + ((e_ >> 8) & (RANS_M - 1)); \
        uint32_t nd_ = x_ < RANS_L;                                       \
        uint32_t w_ = (uint32_t)p[0] | ((uint32_t)p[1] << 8);             \
        x_ = (x_ << (nd_ << 4)) | (w_ & (0u - nd_));                      \
        p += 2 * nd_;                                                     \
        st[j] = x_;                                                       \
    } while (0)

/* Decodes whole rounds of N symbols (first symbol on state 0) while a round's worst
 * case of input remains; returns the symbols done. */
static size_t dec_scalar(unsigned N, uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end,
                         uint8_t *out, size_t len)
{
    const uint8_t *p = *pp;
    size_t i = 0;
    for (; i + N <= len && end - p >= 2 * (ptrdiff_t)N; i += N, out += N) {
        for (unsigned j = 0; j < N; j++) DEC_STEP(j);
    }
    *pp = p;
    return i;
}

/* Codecs 2 and 11 (fold: the tail rounds' byte, and the tail decoded from the states
 * the words leave, fold_tail's inverse). */
static int decode_lanes(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n, int fold)
{
    if (n == 0 || srclen < 2) return -1;
    const uint8_t *p = src, *end = src + srclen;
    int sh = *p++;
    if (sh < 10 || sh > 24) return -1;
    int lg = *p & 7;
    size_t t = fold ? *p >> 3 : 0; /* codec 11: its tail rounds in bits 3-7; codec 2: 0 */
    if ((lg != 5 && lg != 6) || (!fold && *p > 7)) return -1;
    p++;
    unsigned N = 1u << lg;
    size_t nb = ((n - 1) >> sh) + 1;
    if (t > n / N) return -1;
    size_t nm = n - t * N, folded = 0; /* symbols from words; the states now hold y_j */
    /* Pass 1: validate the segment list and find where the stream starts; the first
     * segment's table is kept (most planes have one), the others read again below. */
    const uint8_t *tabs = NULL;
    size_t covered = 0, k0 = 0;
    uint16_t f[256], f0[256];
    while (covered < nb) {
        size_t k;
        if (leb_read(&p, end, &k) || k == 0 || k > nb - covered) return -1;
        if (fold ? rans_dtab_read(&p, end, covered ? f : f0) : rans_table_read(&p, end, covered ? f : f0)) return -1;
        if (!covered) tabs = p, k0 = k;
        covered += k;
    }
    uint32_t *st = c->st;
    if (fold) {
        if (rans_states_get(&p, end, st, N)) return -1;
    } else {
        if ((size_t)(end - p) < 4 * (size_t)N) return -1;
        for (unsigned j = 0; j < N; j++) {
            st[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            if (st[j] < RANS_L) return -1;
            p += 4;
        }
    }
#ifdef ENT_HAVE_X86
    int simd = cpu_level(), gather = (cpu_features() & CPU_GATHER) != 0;
#endif
    const uint8_t *tp = tabs;
    size_t b = 0;
    uint32_t *dt = c->dtab;
    while (b < nb) {
        size_t k = k0;
        if (b && (leb_read(&tp, end, &k) || (fold ? rans_dtab_read(&tp, end, f) : rans_table_read(&tp, end, f))))
            return -1; /* checked in pass 1 */
        rans_build_dtab(b ? f : f0, dt);
        size_t s0 = b << sh, s1 = (b + k) << sh;
        if (s1 > n || b + k == nb) s1 = n;
        b += k;
        size_t i = s0, done, s1t = s1;
        if (s1 > nm) s1 = nm;
        if (i >= s1) goto tail;
#ifdef ENT_HAVE_X86
        if (simd >= CPU_AVX512 && gather) done = rans0_dec_avx512(N, st, dt, &p, end, dst + i, s1 - i);
        else if (simd >= CPU_AVX2) done = rans0_dec_avx2(N, st, dt, &p, end, dst + i, s1 - i);
        else
#endif
            done = dec_scalar(N, st, dt, &p, end, dst + i, s1 - i);
        i += done;
        for (; i < s1; i++) {
            /* Tail: same step with the input bound checked per refill. */
            unsigned j = (unsigned)(i & (N - 1));
            uint32_t x = st[j];
            uint32_t e = dt[x & (RANS_M - 1)];
            dst[i] = (uint8_t)e;
            x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
            if (x < RANS_L) {
                if (end - p < 2) return -1;
                x = (x << 16) | (uint32_t)p[0] | ((uint32_t)p[1] << 8);
                p += 2;
            }
            st[j] = x;
        }
    tail:
        if (s1t <= nm) continue;
        if (!folded) /* every word read: y_j = x_j - L, which codec 2 requires to be 0 */
            for (unsigned j = 0; j < N; j++) st[j] -= RANS_L;
        folded = 1;
        for (i = s1 > s0 ? s1 : s0; i < s1t; i++) { /* the step without a refill */
            uint32_t *y = &st[i & (N - 1)], e = dt[*y & (RANS_M - 1)];
            dst[i] = (uint8_t)e;
            *y = (e >> 20) * (*y >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
        }
    }
    if (p != end) return -1;
    for (unsigned j = 0; j < N; j++)
        if (st[j] != (folded ? 0 : RANS_L)) return -1;
    return 0;
}

int rans0_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    return decode_lanes(c, src, srclen, dst, n, 0);
}

int rans0t_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    return decode_lanes(c, src, srclen, dst, n, 1);
}

/* Codec 9's decode table at its own precision: 4096 >> sh entries (a table's frequencies
 * are multiples of 2^sh), each holding the (slot - cum) of the first slot it stands for;
 * the step adds the slot's low sh bits. Building 4096 entries for each segment of a few
 * hundred symbols cost more than decoding them. */
static void build_dtab_small(const uint16_t *freq, unsigned sh, uint32_t *dt)
{
    if (!sh) {
        rans_build_dtab(freq, dt);
        return;
    }
    uint32_t cum = 0;
    for (uint32_t v = 0; v < 256; v++) {
        uint32_t f = freq[v], e = v | f << 20, fc = f >> sh;
        for (uint32_t k = 0; k < fc; k++) dt[cum + k] = e | (k << sh << 8);
        cum += fc;
    }
}

/* One step of a codec 9 state held in a local: its symbol to o, refilled from p without
 * a bounds check (callers leave 2 bytes per state of the round). */
#define DEC_SMALL(x, o)                                                               \
    do {                                                                              \
        uint32_t s_ = x & (RANS_M - 1), e_ = dt[s_ >> sh];                            \
        o = (uint8_t)e_;                                                              \
        x = (e_ >> 20) * (x >> RANS_BITS) + ((e_ >> 8) & (RANS_M - 1)) + (s_ & mask); \
        uint32_t w_ = (uint32_t)q[0] | ((uint32_t)q[1] << 8), nd_ = x < RANS_L;       \
        x = nd_ ? x << 16 | w_ : x;                                                   \
        q += 2 * nd_;                                                                 \
    } while (0)

int rans0s_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    if (n == 0 || srclen < 2) return -1;
    const uint8_t *p = src, *end = src + srclen;
    int sh0 = *p++;
    if (sh0 < RANS0S_SHIFT || sh0 > 24 || *p++ != RANS0S_LG) return -1;
    enum { N = 1u << RANS0S_LG };
    size_t nb = ((n - 1) >> sh0) + 1;
    /* Pass 1: validate the segment list and find where the stream starts. */
    /* The first 4 segments' tables are kept (planes of a few small tensors), the rest read
     * again after the states. */
    enum { KEEP = 4 };
    uint16_t ft[KEEP][256], f[256];
    unsigned fsh[KEEP], sh, nseg = 0;
    size_t fk[KEEP], covered = 0;
    const uint8_t *tp = NULL; /* where the segments not kept start */
    while (covered < nb) {
        size_t k;
        uint16_t *fq = nseg < KEEP ? ft[nseg] : f;
        if (nseg == KEEP) tp = p;
        if (leb_read(&p, end, &k) || k == 0 || k > nb - covered || rans_ctab_read_sh(&p, end, fq, &sh)) return -1;
        if (nseg < KEEP) fk[nseg] = k, fsh[nseg] = sh;
        covered += k;
        nseg++;
    }
    if ((size_t)(end - p) < 4 * (size_t)N) return -1;
    uint32_t st[N];
    for (unsigned j = 0; j < N; j++) {
        st[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (st[j] < RANS_L) return -1;
        p += 4;
    }
    uint32_t *dt = c->dtab;
    for (size_t b = 0, g = 0; b < nb; g++) {
        size_t k = 0;
        if (g < KEEP) {
            k = fk[g], sh = fsh[g];
            build_dtab_small(ft[g], sh, dt);
        } else {
            if (leb_read(&tp, end, &k) || rans_ctab_read_sh(&tp, end, f, &sh)) return -1; /* checked in pass 1 */
            build_dtab_small(f, sh, dt);
        }
        uint32_t mask = (1u << sh) - 1;
        size_t i = b << sh0, s1 = (b + k) << sh0;
        if (s1 > n || b + k == nb) s1 = n;
        b += k;
        /* whole rounds (a segment starts on one: blocks are 128 bytes or more) while a
         * round's worst case of input remains */
        uint32_t x0 = st[0], x1 = st[1], x2 = st[2], x3 = st[3];
        const uint8_t *q = p;
        for (; i + N <= s1 && end - q >= 2 * N; i += N) {
            DEC_SMALL(x0, dst[i]);
            DEC_SMALL(x1, dst[i + 1]);
            DEC_SMALL(x2, dst[i + 2]);
            DEC_SMALL(x3, dst[i + 3]);
        }
        st[0] = x0, st[1] = x1, st[2] = x2, st[3] = x3;
        p = q;
        for (; i < s1; i++) { /* tail: the input bound checked per refill */
            uint32_t *x = &st[i & (N - 1)], s_ = *x & (RANS_M - 1), e = dt[s_ >> sh];
            dst[i] = (uint8_t)e;
            *x = (e >> 20) * (*x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1)) + (s_ & mask);
            if (*x < RANS_L) {
                if (end - p < 2) return -1;
                *x = (*x << 16) | (uint32_t)p[0] | ((uint32_t)p[1] << 8);
                p += 2;
            }
        }
    }
    if (p != end) return -1;
    for (unsigned j = 0; j < N; j++)
        if (st[j] != RANS_L) return -1;
    return 0;
}
