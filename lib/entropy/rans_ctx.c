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
#include "rans_avx2.h"
#include "rans_ctx.h"

typedef rc_tabs rc_state;

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

void rc_range(const uint32_t *hist, unsigned *mode, int *lo, int *hi)
{
    unsigned md = 0;
    int l = 255, h = 0;
    for (unsigned s = 0; s < 256; s++) {
        if (hist[s] > hist[md]) md = s;
        if (hist[s]) {
            l = l < (int)s ? l : (int)s;
            h = (int)s;
        }
    }
    *mode = md;
    *lo = l;
    *hi = h;
}

/* Once per choice of a window, not once per candidate (the merges read one counter
 * instead of four). */
void rc_sum_sets(rc_tabs *S, int lo, int hi)
{
    for (unsigned b = 0; b < RC_WIDE; b++) {
        const uint32_t *w0 = S->wide + 256 * b, *w1 = S->wide + RC_ROW + 256 * b;
        const uint32_t *w2 = S->wide + 2 * RC_ROW + 256 * b, *w3 = S->wide + 3 * RC_ROW + 256 * b;
        uint32_t *d = S->sum + 256 * b;
        for (int s = lo; s <= hi; s++) d[s] = (w0[s] + w1[s]) + (w2[s] + w3[s]);
    }
}

/* Bucket b of S->sum: context mode - 16 + b, clamped at both ends: the merge is exact
 * while the window [m - K/2, m - K/2 + K - 1] lies inside the 32, as every candidate's
 * does. */
void rc_merge_win(const rc_tabs *S, unsigned mode, int m, unsigned K, int lo, int hi, int head, uint32_t *mc)
{
    memset(mc, 0, K * 256 * sizeof *mc);
    for (unsigned b = 0; b < RC_WIDE; b++) {
        unsigned t = rc_bucket((int)mode - (int)RC_WIDE / 2 + (int)b, m - (int)(K / 2), K);
        const uint32_t *w = S->sum + 256 * b;
        uint32_t *d = mc + 256 * t;
        for (int s = lo; s <= hi; s++) d[s] += w[s];
    }
    if (head)
        for (int s = lo; s <= hi; s++) mc[256 * (K / 2) + s] += S->head[s];
}

double rc_est_win(const uint32_t *mc, unsigned K, double scale, int lo, int hi)
{
    double est = 2 + 4.0 * RC_N;
    for (unsigned t = 0; t < K; t++) {
        uint64_t tot = 0;
        for (int s = lo; s <= hi; s++) tot += mc[256 * t + s];
        est += tot ? ent_bits(mc + 256 * t, tot) / 8 * scale + (double)rans_table_cost(mc + 256 * t, tot) : 4;
    }
    return est;
}

/* Adds the pairs (byte 16 back, byte) at offsets [a, b) to S->wide; returns how many.
 * Four sets of counters, and eight equal bytes whose bytes 16 back are equal too as one
 * addition: gradients' exponent planes are mostly runs of one value (rows that saw no
 * token), where each increment waited on the one before (the estimate's counting was
 * the selector's largest cost on them; grads_bf16 -3 compression +11% CPU with both). */
static size_t count_pairs(rc_state *S, const uint8_t *src, const uint32_t *off, int lo, size_t a, size_t b)
{
    uint32_t *w0 = S->wide, *w1 = S->wide + RC_ROW, *w2 = S->wide + 2 * RC_ROW, *w3 = S->wide + 3 * RC_ROW;
    size_t i = a;
#ifdef ENT_HAVE_X86
    if (cpu_level() >= CPU_AVX512) {
        uint32_t *const w[4] = {w0, w1, w2, w3};
        i = rc_pairs_avx512(w, src, lo, a, b);
    }
#else
    (void)lo;
#endif
    const uint64_t ones = 0x0101010101010101ull;
    for (; i + 8 <= b; i += 8) {
        uint64_t c8, p8;
        memcpy(&c8, src + i, 8);
        memcpy(&p8, src + i - RC_W, 8);
        if (c8 == (c8 & 0xff) * ones && p8 == (p8 & 0xff) * ones) {
            w0[off[p8 & 0xff] + (c8 & 0xff)] += 8;
            continue;
        }
        for (unsigned k = 0; k < 8; k += 4) {
            w0[off[src[i + k - RC_W]] + src[i + k]]++;
            w1[off[src[i + k + 1 - RC_W]] + src[i + k + 1]]++;
            w2[off[src[i + k + 2 - RC_W]] + src[i + k + 2]]++;
            w3[off[src[i + k + 3 - RC_W]] + src[i + k + 3]]++;
        }
    }
    for (; i + 4 <= b; i += 4) {
        w0[off[src[i - RC_W]] + src[i]]++;
        w1[off[src[i + 1 - RC_W]] + src[i + 1]]++;
        w2[off[src[i + 2 - RC_W]] + src[i + 2]]++;
        w3[off[src[i + 3 - RC_W]] + src[i + 3]]++;
    }
    for (; i < b; i++) w0[off[src[i - RC_W]] + src[i]]++;
    return b - a;
}

/* The pairs at offsets [o + a, o + b) of every piece of RC_STEP bytes (offsets from
 * RC_W on: a pair needs its byte 16 back), cut at the plane's end. */
static size_t count_pieces(rc_state *S, const uint8_t *src, size_t n, const uint32_t *off, int wlo, size_t a, size_t b)
{
    size_t k = 0;
    for (size_t o = 0; o + a < n; o += RC_STEP) {
        size_t lo = o + a < RC_W ? RC_W : o + a, hi = o + b < n ? o + b : n;
        if (lo < hi) k += count_pairs(S, src, off, wlo, lo, hi);
    }
    return k;
}

void rc_choose(rc_tabs *S, unsigned mode, double scale, int lo, int hi, double *best)
{
    /* Centred on the mode with K = 16, 8, 4, 2; and with 16 whose window reaches 2 or
     * 4 further down (float exponents trail off towards small values: Adam's moments
     * gained ~0.3% of their exponent plane). */
    static const struct {
        uint8_t K, down;
    } cand[] = {{16, 0}, {8, 0}, {4, 0}, {2, 0}, {16, 2}, {16, 4}};
    uint32_t mc[RC_KMAX * 256];
    *best = 1e300;
    rc_sum_sets(S, lo, hi);
    for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
        int m = (int)mode - cand[i].down;
        if (m < 0) continue;
        rc_merge_win(S, mode, m, cand[i].K, lo, hi, 0, mc);
        double e = rc_est_win(mc, cand[i].K, scale, lo, hi);
        if (e < *best) {
            *best = e;
            S->K = cand[i].K;
            S->m = (uint8_t)m;
        }
    }
}

/* The plane's mode, range and bucket table (S->off) for an estimate, its counts cleared. */
static void rc_start(rc_state *S, const uint32_t *hist)
{
    S->src = NULL;
    rc_range(hist, &S->mode, &S->lo, &S->hi);
    memset(S->wide, 0, sizeof S->wide);
    rc_bucket_table(S->mode, RC_WIDE, 256, S->off);
    S->k = 0;
}

/* The pairs that straddle a group's start are not coded so: its first RC_W bytes take
 * m as their context (S->head); those counted with their byte RC_W back are taken off,
 * so the sum stays exact. Then the window and the tables. */
static double rc_finish(ent_ctx *c, rc_state *S, const uint8_t *src, size_t n)
{
    size_t P = RC_PART(n);
    memset(S->head, 0, sizeof S->head);
    for (unsigned g = 0; g < RC_G; g++)
        for (size_t i = g * P; i < g * P + RC_W; i++) {
            S->head[src[i]]++;
            if (g) S->wide[S->off[src[i - RC_W]] + src[i]]--;
        }
    return rc_tables(c, S, src, n, S->mode, S->lo, S->hi);
}

/* The sampled estimate in stages (rc_estimate, sampled, calls both; the selector's
 * choice among the context coders calls them apart). rc_sample: byte pairs 16 apart in
 * the first KiB of every 16 KiB (RC_SAMPLE), the estimate for K = 16 around the mode
 * scaled to the plane. rc_rest: up to 4 KiB of every 16; a plane whose estimate from
 * those does not beat c->est_bar (the selector's best) by 0.5% is not counted further
 * (1e300; at 0.3%, the full counts of planes between the two saved at most 0.0014% of a
 * corpus file, for 5% of the BF16 weights' compression time); otherwise every pair is
 * counted, the window chosen from them and the tables normalised: the size returned is
 * then what the encoder writes, to a few bytes, and the tables are left for it. */
double rc_sample(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist)
{
    rc_state *S = rc_get(c);
    if (n < 64 * 1024 || !S) return 1e300;
    rc_start(S, hist);
    S->k = count_pieces(S, src, n, S->off, (int)S->mode - (int)RC_WIDE / 2, 0, RC_SAMPLE);
    return rc_est_sampled(S, n);
}

/* The entropy of counts from a sample runs low by about (values seen - 1) / (2 ln 2)
 * bits per table (Miller and Madow), and a sample's 16 tables are thin: uncorrected, it
 * passed 10 of the 30 exponent planes of the corpus's FP16 weights, where the full count
 * then found nothing to gain. Added back, scaled with the rest (and rc_rest's 0.5%), -3
 * compressed the FP16 weights and the Q8_0 GGUF 9% faster, BF16 weights 5%, and every
 * file of the corpus to within 0.005% of its former size. */
double rc_est_sampled(rc_tabs *S, size_t n)
{
    uint32_t mc[RC_KMAX * 256];
    rc_sum_sets(S, S->lo, S->hi);
    rc_merge_win(S, S->mode, (int)S->mode, RC_KMAX, S->lo, S->hi, 0, mc);
    double scale = (double)n / (double)S->k, seen = 0;
    for (unsigned t = 0; t < RC_KMAX; t++) {
        unsigned v = 0;
        for (int s = S->lo; s <= S->hi; s++) v += mc[256 * t + s] != 0;
        seen += v ? v - 1 : 0;
    }
    return rc_est_win(mc, RC_KMAX, scale, S->lo, S->hi) + scale * seen / (2 * 0.6931471805599453) / 8;
}

double rc_rest(ent_ctx *c, const uint8_t *src, size_t n)
{
    rc_state *S = rc_get(c);
    if (!S || !S->k) return 1e300;
    int wlo = (int)S->mode - (int)RC_WIDE / 2; /* the vector count's clamp of off */
    double best;
    S->k += count_pieces(S, src, n, S->off, wlo, RC_SAMPLE, 4096);
    rc_choose(S, S->mode, (double)n / (double)S->k, S->lo, S->hi, &best);
    S->k = 0;
    if (c->est_bar > 0 && best * 1.005 >= c->est_bar) return 1e300;
    count_pieces(S, src, n, S->off, wlo, 4096, RC_STEP);
    return rc_finish(c, S, src, n);
}

/* Estimate, sampled: rc_sample decides first: a plane where the contexts do not save
 * 0.5% of its order-0 entropy there (weights: ~0.1%) is not counted further, which
 * halved what the estimate cost on weights; then rc_rest. Not sampled: every pair. */
double rc_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled)
{
    rc_state *S = rc_get(c);
    if (n < RC_N || !S) return 1e300;
    if (sampled && n >= 64 * 1024) {
        if (rc_sample(c, src, n, hist) > RC_GAIN_MIN * ent_bits(hist, n) / 8) return 1e300;
        return rc_rest(c, src, n);
    }
    rc_start(S, hist);
    count_pairs(S, src, S->off, (int)S->mode - (int)RC_WIDE / 2, RC_W, n);
    return rc_finish(c, S, src, n);
}

double rc_tables(ent_ctx *c, rc_tabs *S, const uint8_t *src, size_t n, unsigned mode, int lo, int hi)
{
    double best;
    rc_choose(S, mode, 1.0, lo, hi, &best);
    unsigned K = S->K;
    uint32_t mc[RC_KMAX * 256];
    rc_merge_win(S, mode, S->m, K, lo, hi, 1, mc);
    double size = 2 + 4.0 * RC_N, bits = 0;
    for (unsigned t = 0; t < K; t++) {
        rans_normalize(mc + 256 * t, S->freq[t]);
        size += (double)rans_table_len(S->freq[t]);
        bits += rans_coded_bits(mc + 256 * t, S->freq[t]);
    }
    S->src = src;
    S->n = n;
    S->plane = c->plane;
    return size + bits / 8;
}

size_t rc_enc_head(ent_ctx *c, rc_tabs *S, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int vec,
                   double (*est)(ent_ctx *, const uint8_t *, size_t, const uint32_t *, int))
{
    if (S->src != src || S->n != n || S->plane != c->plane) { /* no estimate of this plane before: now */
        uint32_t h[256];
        ent_histogram(src, n, h);
        if (est(c, src, n, h, 0) >= 1e300) return 0;
    }
    unsigned m = S->m, K = S->K;
    S->src = NULL;
    if (cap < 2) return 0;
    size_t hdr = 0;
    dst[hdr++] = (uint8_t)m;
    dst[hdr++] = (uint8_t)K;
    for (unsigned t = 0; t < K; t++) {
        const uint16_t *f = S->freq[t];
        if (hdr + 512 > cap || hdr >= n) return 0;
        hdr += rans_table_write(f, dst + hdr);
        rans_build_esym(f, S->etab + 256 * t); /* the tail is coded by the scalar loop */
#ifdef ENT_HAVE_X86
        if (vec >= CPU_AVX512) rc_build_zt(f, S->zt, t);
        else if (vec >= CPU_AVX2) rans_build_vrows(f, S->vt + 256 * t);
#else
        (void)vec;
#endif
    }
    return hdr;
}

size_t rc_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)level;
    rc_state *S = rc_get(c);
    if (n < RC_N || !S) return 0;
    int vec = cpu_level();
    size_t hdr = rc_enc_head(c, S, src, n, dst, cap, vec, rc_estimate);
    if (!hdr) return 0;
    unsigned m = S->m;
#ifdef ENT_HAVE_X86
    unsigned K = S->K;
#endif
    size_t scap = 2 * n + 4 * RC_N + 64;
    uint8_t *sbuf = ent_scratch(c, scap);
    if (!sbuf) return 0;
    uint8_t *p = sbuf + scap;
    uint32_t st[RC_N];
    for (unsigned j = 0; j < RC_N; j++) st[j] = RANS_L;
    const rans_esym *E = S->etab;
    uint32_t off[256];
    rc_bucket_table(m, K, 256, off);
    size_t P = RC_PART(n);
#define ENC(lane, pos, prevbyte) st[lane] = rans_enc_step(st[lane], &E[off[prevbyte] + src[pos]], &p)
    /* The reverse of the decoding order: the tail of group 3, then the rounds. */
    const size_t b3 = (RC_G - 1) * P;
    for (size_t j = n - b3; j-- > P;) ENC((RC_G - 1) * RC_W + (j & (RC_W - 1)), b3 + j, src[b3 + j - RC_W]);
#ifdef ENT_HAVE_X86
    if (vec >= CPU_AVX512) p = rc_enc_avx512(st, S->zt, m, K, src, P, p);
    else if (vec >= CPU_AVX2) p = rc_enc_avx2(st, (const uint32_t(*)[4])S->vt, off, m, src, P, p);
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

unsigned rc_dec_head(rc_tabs *S, const uint8_t **pp, const uint8_t *end, uint32_t *st, unsigned *m)
{
    const uint8_t *p = *pp;
    if (end - p < 2) return 0;
    *m = *p++;
    unsigned K = *p++;
    if (K < 1 || K > RC_KMAX) return 0;
    uint16_t f[256];
    for (unsigned t = 0; t < K; t++) {
        if (rans_table_read(&p, end, f)) return 0;
        rans_build_dtab(f, S->dtab + (size_t)t * RANS_M);
    }
    if ((size_t)(end - p) < 4 * RC_N) return 0;
    for (unsigned j = 0; j < RC_N; j++) {
        st[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (st[j] < RANS_L) return 0;
        p += 4;
    }
    *pp = p;
    return K;
}

int rc_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    rc_state *S;
    if (n < RC_N || srclen < 2 || !(S = rc_get(c))) return -1;
    const uint8_t *p = src, *end = src + srclen;
    uint32_t st[RC_N];
    unsigned m, K = rc_dec_head(S, &p, end, st, &m);
    if (!K) return -1;
    const uint32_t *dt = S->dtab;
    uint32_t off[256];
    rc_bucket_table(m, K, RANS_M, off);
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
