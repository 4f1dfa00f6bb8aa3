/* rans_ctx.c — rANS with a small context (codec 8): each byte is coded with one of
 * K <= 16 frequency tables, chosen by the bucket of the byte 16 places before it in
 * its group, bucketed around the plane's most common value m.
 *
 * Float exponents are locally correlated (a row of small updates, a layer's scale), so
 * the previous exponent predicts the next: on Adam's moments and gradients a bucketed
 * context takes 6-10% off the order-0 size of the exponent plane, most of what a full
 * order-1 model (codec 3) gains, with 16 tables instead of 257 (so they stay small to
 * send and to build, and the decoder's working set stays in L2). The context is the
 * byte 16 places back, not the one just before: the 64 states form four groups of 16
 * consecutive lanes, one group per quarter of the plane, so a vector decoder keeps each
 * group in one register, stores 16 consecutive bytes per step and runs four
 * independent context chains at once; measured on the corpus, the byte 16 back
 * predicts as well as the one before (weights, gradients, moments: within 0.3% of the
 * gain). Coded bytes: doc/entropy.md, "rANS with a small context (codec 8)".
 */
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "rans_ctx.h"

typedef struct {
    uint32_t dtab[RC_KMAX * RANS_M]; /* decode tables, one per context */
    rans_esym etab[RC_KMAX * 256];   /* encode tables */
    uint32_t cnt[RC_KMAX * 256];     /* counts by context of the plane being coded */
    uint32_t tmp[RC_KMAX * 256];
    uint32_t wide[RC_WIDE * 256]; /* the estimate's counts: 32 buckets around the mode */
    uint32_t wide2[RC_WIDE * 256];
    uint32_t zt[2][RC_KMAX * 256]; /* AVX-512 encoder fields (rans_ctx_avx512.c) */
    const uint8_t *src;              /* the plane the estimate chose m and K for */
    size_t n;
    uint8_t m, K;
} rc_state;

static rc_state *rc_get(ent_ctx *c)
{
    if (!c->state[ENT_RANSCTX]) c->state[ENT_RANSCTX] = calloc(1, sizeof(rc_state));
    return c->state[ENT_RANSCTX];
}

void rc_free(ent_ctx *c)
{
    free(c->state[ENT_RANSCTX]);
    c->state[ENT_RANSCTX] = NULL;
}

static inline unsigned rc_bucket(int prev, int lo, unsigned K)
{
    int d = prev - lo;
    return d < 0 ? 0 : (unsigned)d >= K ? K - 1 : (unsigned)d;
}

/* off[v] = bucket of a previous byte v, times stride: one load instead of a clamp
 * whose branches the data mispredicts. */
static void bucket_table(unsigned m, unsigned K, uint32_t stride, uint32_t *off)
{
    int lo = (int)m - (int)(K / 2);
    for (unsigned v = 0; v < 256; v++) off[v] = rc_bucket((int)v, lo, K) * stride;
}

/* Exact counts by 16-bucket context of the whole plane, in the coded layout. Two sets
 * of counters, even and odd bytes, so that runs of one value do not wait on their own
 * increments. */
static void count_exact(uint32_t *cnt, uint32_t *tmp, const uint8_t *src, size_t n, unsigned m)
{
    memset(cnt, 0, RC_KMAX * 256 * sizeof *cnt);
    memset(tmp, 0, RC_KMAX * 256 * sizeof *tmp);
    uint32_t off[256];
    bucket_table(m, RC_KMAX, 256, off);
    size_t P = RC_PART(n);
    for (unsigned g = 0; g < RC_G; g++) {
        const uint8_t *q = src + g * P;
        size_t len = g + 1 < RC_G ? P : n - g * P, j = RC_W;
        for (size_t i = 0; i < RC_W; i++) cnt[off[m] + q[i]]++;
        for (; j + 2 <= len; j += 2) {
            cnt[off[q[j - RC_W]] + q[j]]++;
            tmp[off[q[j + 1 - RC_W]] + q[j + 1]]++;
        }
        for (; j < len; j++) cnt[off[q[j - RC_W]] + q[j]]++;
    }
    for (unsigned k = 0; k < RC_KMAX * 256; k++) cnt[k] += tmp[k];
}

/* Counts merged from 16 buckets to K (clamping composes: bucket b of 16 is bucket
 * clamp(b - 8 + K/2) of K). */
static void merge_counts(const uint32_t *c16, unsigned K, uint32_t *out)
{
    memset(out, 0, K * 256 * sizeof *out);
    for (unsigned b = 0; b < RC_KMAX; b++) {
        unsigned t = rc_bucket((int)b, RC_KMAX / 2 - (int)(K / 2), K);
        for (int s = 0; s < 256; s++) out[256 * t + s] += c16[256 * b + s];
    }
}

/* Estimated coded size with K contexts around m from the 32-bucket counts around the
 * mode (bucket b: previous byte mode - 16 + b, clamped at both ends), scaled by scale.
 * Exact merging while the window [m - K/2, m - K/2 + K - 1] lies inside the 32. */
static double est_win(const uint32_t *w, unsigned mode, int m, unsigned K, double scale, int lo, int hi)
{
    uint32_t mc[RC_KMAX * 256];
    memset(mc, 0, K * 256 * sizeof *mc);
    for (unsigned b = 0; b < RC_WIDE; b++) {
        unsigned t = rc_bucket((int)mode - (int)RC_WIDE / 2 + (int)b, m - (int)(K / 2), K);
        for (int s = lo; s <= hi; s++) mc[256 * t + s] += w[256 * b + s];
    }
    double est = 2 + 4.0 * RC_N;
    for (unsigned t = 0; t < K; t++) {
        uint64_t tot = 0;
        for (int s = lo; s <= hi; s++) tot += mc[256 * t + s];
        est += tot ? ent_bits(mc + 256 * t, tot) / 8 * scale + (double)rans_table_cost(mc + 256 * t, tot) : 4;
    }
    return est;
}

/* Adds to S->wide the pairs (byte 16 back, byte) at offsets [from, to) of every piece of
 * step bytes that holds them all; returns how many. Two sets of counters: on planes of
 * few values one alone waited on its own increments. */
static size_t count_pairs(rc_state *S, const uint8_t *src, size_t n, const uint32_t *off, size_t from, size_t to,
                          size_t step)
{
    memset(S->wide2, 0, sizeof S->wide2);
    size_t k = 0;
    for (size_t o = 0; o + to <= n; o += step, k += to - from)
        for (size_t i = o + from; i < o + to; i += 2) {
            S->wide[off[src[i - RC_W]] + src[i]]++;
            if (i + 1 < o + to) S->wide2[off[src[i + 1 - RC_W]] + src[i + 1]]++;
        }
    for (size_t j = 0; j < RC_WIDE * 256; j++) S->wide[j] += S->wide2[j];
    return k;
}

double rc_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled)
{
    rc_state *S = rc_get(c);
    if (n < RC_N || !S) return 1e300;
    unsigned mode = 0;
    int lo = 255, hi = 0; /* the plane's values: the counts are 0 outside */
    for (unsigned s = 0; s < 256; s++) {
        if (hist[s] > hist[mode]) mode = s;
        if (hist[s]) {
            lo = lo < (int)s ? lo : (int)s;
            hi = (int)s;
        }
    }
    /* Byte pairs 16 apart: sampled, inside the first 4 KiB of every 16 KiB; else all
     * of them (group boundaries ignored). The encoder recounts. Sampled, the first KiB
     * of each piece decides first: a plane where the contexts do not save 0.5% of its
     * order-0 entropy there (weights: ~0.1%) is not counted further, which halved what
     * the estimate cost on weights. */
    memset(S->wide, 0, sizeof S->wide);
    uint32_t off[256];
    bucket_table(mode, RC_WIDE, 256, off);
    int samp = sampled && n >= 64 * 1024;
    size_t k = 0, step = samp ? 16384 : n;
    if (samp) {
        k = count_pairs(S, src, n, off, RC_W, 1024, step);
        double e1 = est_win(S->wide, mode, (int)mode, RC_KMAX, (double)n / (double)k, lo, hi);
        if (e1 > 0.995 * ent_bits(hist, n) / 8) return 1e300;
        k += count_pairs(S, src, n, off, 1024, 4096, step);
    } else {
        k = count_pairs(S, src, n, off, RC_W, n, n);
    }
    double scale = (double)n / (double)k, best = 1e300;
    /* Centred on the mode with K = 16, 8, 4, 2; and with 16 whose window reaches 2 or
     * 4 further down (float exponents trail off towards small values: Adam's moments
     * gained ~0.3% of their exponent plane). */
    static const struct {
        uint8_t K, down;
    } cand[] = {{16, 0}, {8, 0}, {4, 0}, {2, 0}, {16, 2}, {16, 4}};
    for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
        int m = (int)mode - cand[i].down;
        if (m < 0) continue;
        double e = est_win(S->wide, mode, m, cand[i].K, scale, lo, hi);
        if (e < best) {
            best = e;
            S->K = cand[i].K;
            S->m = (uint8_t)m;
        }
    }
    S->src = src;
    S->n = n;
    return best;
}

size_t rc_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)level;
    rc_state *S = rc_get(c);
    if (n < RC_N || !S) return 0;
    if (S->src != src || S->n != n) { /* no estimate of this plane before: choose now */
        uint32_t h[256];
        ent_histogram(src, n, h);
        rc_estimate(c, src, n, h, 0);
    }
    unsigned m = S->m, K = S->K;
    S->src = NULL;
#ifdef ENT_HAVE_X86
    int vec = cpu_level() >= CPU_AVX512;
#endif
    count_exact(S->cnt, S->tmp, src, n, m);
    uint32_t mc[RC_KMAX * 256];
    merge_counts(S->cnt, K, mc);
    if (cap < 2) return 0;
    size_t hdr = 0;
    dst[hdr++] = (uint8_t)m;
    dst[hdr++] = (uint8_t)K;
    uint16_t f[256];
    for (unsigned t = 0; t < K; t++) {
        if (hdr + 512 > cap || hdr >= n) return 0;
        rans_normalize(mc + 256 * t, f);
        hdr += rans_table_write(f, dst + hdr);
        rans_build_esym(f, S->etab + 256 * t); /* the tail is coded by the scalar loop */
#ifdef ENT_HAVE_X86
        if (vec) rc_build_zt(f, S->zt, t);
#endif
    }
    size_t scap = 2 * n + 4 * RC_N + 64;
    uint8_t *sbuf = ent_scratch(c, scap);
    if (!sbuf) return 0;
    uint8_t *p = sbuf + scap;
    uint32_t st[RC_N];
    for (unsigned j = 0; j < RC_N; j++) st[j] = RANS_L;
    const rans_esym *E = S->etab;
    uint32_t off[256];
    bucket_table(m, K, 256, off);
    size_t P = RC_PART(n);
#define ENC(lane, pos, prevbyte) st[lane] = rans_enc_step(st[lane], &E[off[prevbyte] + src[pos]], &p)
    /* The reverse of the decoding order: the tail of group 3, then the rounds. */
    const size_t b3 = (RC_G - 1) * P;
    for (size_t j = n - b3; j-- > P;) ENC((RC_G - 1) * RC_W + (j & (RC_W - 1)), b3 + j, src[b3 + j - RC_W]);
#ifdef ENT_HAVE_X86
    if (vec) p = rc_enc_avx512(st, (const uint32_t(*)[RC_KMAX * 256]) S->zt, m, K, src, P, p);
    else
#endif
        for (size_t r = P / RC_W; r-- > 0;)
            for (unsigned g = RC_G; g-- > 0;)
                for (unsigned l = RC_W; l-- > 0;) {
                    size_t j = r * RC_W + l, i = g * P + j;
                    ENC(g * RC_W + l, i, r ? src[i - RC_W] : m);
                }
#undef ENC
    return rans_finish(st, RC_N, p, sbuf + scap, dst, hdr, n, cap);
}

/* One symbol of lane `lane` at dst[i], its context byte prev; -1 when the words end. */
static inline int dec1(uint32_t *st, unsigned lane, const uint32_t *dt, const uint32_t *off, unsigned prev,
                       const uint8_t **pp, const uint8_t *end, uint8_t *out)
{
    uint32_t x = st[lane];
    uint32_t e = dt[off[prev] + (x & (RANS_M - 1))];
    *out = (uint8_t)e;
    x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
    if (x < RANS_L) {
        const uint8_t *p = *pp;
        if (end - p < 2) return -1;
        x = (x << 16) | (uint32_t)p[0] | ((uint32_t)p[1] << 8);
        *pp = p + 2;
    }
    st[lane] = x;
    return 0;
}

int rc_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    rc_state *S;
    if (n < RC_N || srclen < 2 || !(S = rc_get(c))) return -1;
    const uint8_t *p = src, *end = src + srclen;
    unsigned m = *p++, K = *p++;
    if (K < 1 || K > RC_KMAX) return -1;
    uint16_t f[256];
    for (unsigned t = 0; t < K; t++) {
        if (rans_table_read(&p, end, f)) return -1;
        rans_build_dtab(f, S->dtab + (size_t)t * RANS_M);
    }
    if ((size_t)(end - p) < 4 * RC_N) return -1;
    uint32_t st[RC_N];
    for (unsigned j = 0; j < RC_N; j++) {
        st[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (st[j] < RANS_L) return -1;
        p += 4;
    }
    const uint32_t *dt = S->dtab;
    uint32_t off[256];
    bucket_table(m, K, RANS_M, off);
    size_t P = RC_PART(n), rounds = P / RC_W, r = 0;
#ifdef ENT_HAVE_X86
    if (cpu_level() >= CPU_AVX512 && (cpu_features() & CPU_GATHER)) r = rc_dec_avx512(st, dt, m, K, &p, end, dst, P);
    else if (cpu_level() >= CPU_AVX2) r = rc_dec_avx2(st, dt, m, K, &p, end, dst, P);
#endif
    /* Scalar: whole rounds with a round's worst case of words left need no check per
     * refill (branch-free, as the vector loops); the rest is checked. */
    for (; r < rounds && end - p >= 2 * (ptrdiff_t)RC_N; r++)
        for (unsigned g = 0; g < RC_G; g++) {
            uint8_t *q = dst + g * P + r * RC_W;
            for (unsigned l = 0; l < RC_W; l++) {
                uint32_t x = st[g * RC_W + l];
                uint32_t e = dt[off[r ? q[(ptrdiff_t)l - RC_W] : m] + (x & (RANS_M - 1))];
                q[l] = (uint8_t)e;
                x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
                uint32_t nd = x < RANS_L, w = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
                st[g * RC_W + l] = (x << (nd << 4)) | (w & (0u - nd));
                p += 2 * nd;
            }
        }
    for (; r < rounds; r++)
        for (unsigned g = 0; g < RC_G; g++)
            for (unsigned l = 0; l < RC_W; l++) {
                size_t i = g * P + r * RC_W + l;
                if (dec1(st, g * RC_W + l, dt, off, r ? dst[i - RC_W] : m, &p, end, dst + i)) return -1;
            }
    const size_t b3 = (RC_G - 1) * P;
    for (size_t j = P; j < n - b3; j++)
        if (dec1(st, (RC_G - 1) * RC_W + (j & (RC_W - 1)), dt, off, j >= RC_W ? dst[b3 + j - RC_W] : m, &p, end,
                 dst + b3 + j))
            return -1;
    if (p != end) return -1;
    for (unsigned k = 0; k < RC_N; k++)
        if (st[k] != RANS_L) return -1;
    return 0;
}
