/* rans_ctxm.c — rANS with a round's mean as context (codec 10): codec 8 (rans_ctx.c)
 * with another context. Each round of a group (16 consecutive bytes, one per lane) is
 * coded with one of K <= 16 tables, chosen by the bucket, around the plane's centre m,
 * of the rounded mean of the group's previous 16 bytes.
 *
 * The byte 16 back sees one neighbour; the mean of 16 sees the local scale of a run of
 * floats (a row's, a layer's), which predicts an exponent better: on the step-280 FP32
 * gradients and Adam moments of the corpus it takes a further 4-5% off codec 8's
 * exponent plane (bench/f32_context_bound.py --exp), more than what a trained
 * format-aware peer led by. All 16 lanes of a round share the context, computed once
 * per round from bytes already decoded, so the vector decoders keep codec 8's four
 * independent chains and add one horizontal sum of 16 bytes per round and group.
 * Layout, tables and word order are codec 8's: doc/entropy.md, "codec 10".
 */
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "rans_avx2.h"
#include "rans_ctxm.h"

/* Codec 8's state (rc_tabs), with the sample's pairs (byte 16 back, byte): codec 8's
 * contexts, to leave planes whose lanes follow their own byte 16 back to codec 8. */
typedef struct {
    rc_tabs t;
    uint32_t back[RC_WIDE * 256];
} rm_state;

static rm_state *rm_get(ent_ctx *c)
{
    if (!c->state[ENT_RANSCTXM]) c->state[ENT_RANSCTXM] = calloc(1, sizeof(rm_state));
    return c->state[ENT_RANSCTXM];
}

void rm_free(ent_ctx *c)
{
    free(c->state[ENT_RANSCTXM]);
    c->state[ENT_RANSCTXM] = NULL;
}

/* Part g of the plane: its start and length (group RC_G-1 owns the rest). */
static size_t part_len(size_t n, size_t P, unsigned g) { return g + 1 < RC_G ? P : n - g * P; }

/* Adds the rounds of every group whose offset in the part, modulo RC_STEP, lies in
 * [a, b) and is at least RC_W (the first round's context is m: S->head): their bytes
 * with the bucket of the mean of the 16 before. Returns the bytes counted. A round of
 * one value (a gradient's rows that saw no token) is one addition. */
#define RM_STEP 16384u
static size_t count_rounds(rc_tabs *S, const uint8_t *src, size_t n, const uint32_t *off, size_t a, size_t b)
{
    size_t P = RC_PART(n), k = 0;
    const uint64_t ones = 0x0101010101010101ull;
    for (unsigned g = 0; g < RC_G; g++) {
        const uint8_t *q0 = src + g * P;
        size_t len = part_len(n, P, g);
        for (size_t o = 0; o < len; o += RM_STEP) {
            size_t lo = o + a < RC_W ? RC_W : o + a, hi = o + b < len ? o + b : len;
            for (size_t j = lo; j < hi; j += RC_W) {
                const uint8_t *q = q0 + j;
                uint32_t *w = S->wide + off[rm_mean16(q - RC_W)];
                size_t cnt = len - j < RC_W ? len - j : RC_W;
                k += cnt;
                uint64_t x, y;
                if (cnt == RC_W) {
                    memcpy(&x, q, 8);
                    memcpy(&y, q + 8, 8);
                    if (x == y && x == (x & 0xff) * ones) {
                        w[x & 0xff] += RC_W;
                        continue;
                    }
                }
                size_t i = 0;
                for (; i + 4 <= cnt; i += 4) {
                    w[q[i]]++;
                    w[RC_ROW + q[i + 1]]++;
                    w[2 * RC_ROW + q[i + 2]]++;
                    w[3 * RC_ROW + q[i + 3]]++;
                }
                for (; i < cnt; i++) w[q[i]]++;
            }
        }
    }
    return k;
}

/* As count_rounds, for the large stages: the whole rounds are first copied together by
 * the bucket of their context into buf (n + n/16 bytes: the copies, then each round's
 * bucket), then each bucket's bytes are counted by one histogram (ent_histogram, whose
 * vector loop takes an exponent plane's few values at several GB/s) into its row of
 * set 0; partial rounds (group 3's tail) are counted one by one. bk[v]: the bucket of a
 * mean v. Counting a round's bytes one by one into shared rows took 1.75x the time of
 * codec 8's pairs. */
static size_t count_sorted(rc_tabs *S, const uint8_t *src, size_t n, const uint8_t *bk, uint8_t *buf, size_t a,
                           size_t b)
{
    size_t P = RC_PART(n), k = 0, nr = 0, at[RC_WIDE], sz[RC_WIDE] = {0};
    uint8_t *rb = buf + n;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            for (unsigned t = 0, o = 0; t < RC_WIDE; o += (unsigned)sz[t], t++) at[t] = o;
            nr = 0;
        }
        for (unsigned g = 0; g < RC_G; g++) {
            const uint8_t *q0 = src + g * P;
            size_t len = part_len(n, P, g);
            for (size_t o = 0; o < len; o += RM_STEP) {
                size_t lo = o + a < RC_W ? RC_W : o + a, hi = o + b < len ? o + b : len;
                for (size_t j = lo; j < hi; j += RC_W) {
                    const uint8_t *q = q0 + j;
                    if (len - j < RC_W) { /* the tail's last, partial round */
                        if (pass) continue;
                        uint32_t *w = S->wide + 256 * bk[rm_mean16(q - RC_W)];
                        for (size_t i = 0; i < len - j; i++) w[q[i]]++;
                        k += len - j;
                        continue;
                    }
                    if (!pass) {
                        unsigned t = bk[rm_mean16(q - RC_W)];
                        rb[nr++] = (uint8_t)t;
                        sz[t] += RC_W;
                        k += RC_W;
                    } else {
                        unsigned t = rb[nr++];
                        memcpy(buf + at[t], q, RC_W);
                        at[t] += RC_W;
                    }
                }
            }
        }
    }
    for (unsigned t = 0, o = 0; t < RC_WIDE; o += (unsigned)sz[t], t++) {
        if (!sz[t]) continue;
        uint32_t h[256];
        ent_histogram(buf + o, sz[t], h);
        for (unsigned v = 0; v < 256; v++) S->wide[256 * t + v] += h[v];
    }
    return k;
}

/* The sample's pairs (byte 16 back, byte) of the same rounds, into S->back: codec 8's
 * contexts, to leave planes whose lanes follow their own byte 16 back to codec 8. */
static void count_back(rm_state *S, const uint8_t *src, size_t n, const uint32_t *off, size_t a, size_t b)
{
    size_t P = RC_PART(n);
    for (unsigned g = 0; g < RC_G; g++) {
        const uint8_t *q0 = src + g * P;
        size_t len = part_len(n, P, g);
        for (size_t o = 0; o < len; o += RM_STEP) {
            size_t lo = o + a < RC_W ? RC_W : o + a, hi = o + b < len ? o + b : len;
            for (size_t j = lo; j < hi; j++) S->back[off[q0[j - RC_W]] + q0[j]]++;
        }
    }
}

/* The rounds at offsets [a, b) of every RM_STEP: sorted by bucket where c lends a
 * buffer, else one by one. Returns the bytes counted. */
static size_t count_stage(ent_ctx *c, rc_tabs *S, const uint8_t *src, size_t n, const uint32_t *off, size_t a, size_t b)
{
    uint8_t *buf = ent_cand(c, n + n / RC_W + 64);
    if (!buf) return count_rounds(S, src, n, off, a, b);
    uint8_t bk[256];
    for (unsigned v = 0; v < 256; v++) bk[v] = (uint8_t)(off[v] / 256);
    return count_sorted(S, src, n, bk, buf, a, b);
}

/* As codec 8's estimate (rc_estimate): sampled, the first KiB of every 16 of each part
 * must save 0.5% of the order-0 entropy, then up to 4 KiB of every 16 must beat
 * c->est_bar by 0.3%; otherwise all of it is counted, the window chosen and the tables
 * normalised, and the size returned is what the encoder writes, to a few bytes. */
double rm_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled)
{
    rm_state *R = rm_get(c);
    if (n < RC_N || !R) return 1e300;
    rc_tabs *S = &R->t;
    S->src = NULL;
    unsigned mode;
    int lo, hi;
    rc_range(hist, &mode, &lo, &hi);
    for (unsigned k = 0; k < RC_SETS; k++) /* only the values of the plane are counted */
        for (unsigned b = 0; b < RC_WIDE; b++)
            memset(S->wide + k * RC_ROW + 256 * b + lo, 0, (size_t)(hi - lo + 1) * 4);
    uint32_t off[256];
    rc_bucket_table(mode, RC_WIDE, 256, off);
    double best;
    if (sampled && n >= 64 * 1024) {
        size_t k = count_stage(c, S, src, n, off, 0, 1024);
        uint32_t mc[RC_KMAX * 256], mb[RC_KMAX * 256];
        rc_sum_sets(S, lo, hi);
        rc_merge_win(S, mode, (int)mode, RC_KMAX, lo, hi, 0, mc);
        double e = rc_est_win(mc, RC_KMAX, (double)n / (double)k, lo, hi);
        if (e > 0.995 * ent_bits(hist, n) / 8) return 1e300;
        /* Codec 8's contexts on the same sample (its window, K = 16 around the mode). */
        memset(R->back, 0, sizeof R->back);
        count_back(R, src, n, off, 0, 1024);
        memset(mb, 0, sizeof mb);
        for (unsigned b = 0; b < RC_WIDE; b++) {
            unsigned t = rc_bucket((int)b - (int)RC_WIDE / 2, -(int)(RC_KMAX / 2), RC_KMAX);
            for (int s = lo; s <= hi; s++) mb[256 * t + s] += R->back[256 * b + s];
        }
        if (rc_est_win(mb, RC_KMAX, (double)n / (double)k, lo, hi) < e) return 1e300;
        k += count_stage(c, S, src, n, off, 1024, 4096);
        rc_choose(S, mode, (double)n / (double)k, lo, hi, &best);
        if (c->est_bar > 0 && best * 1.003 >= c->est_bar) return 1e300;
        count_stage(c, S, src, n, off, 4096, RM_STEP);
    } else {
        count_stage(c, S, src, n, off, 0, RM_STEP);
    }
    size_t P = RC_PART(n);
    memset(S->head, 0, sizeof S->head);
    for (unsigned g = 0; g < RC_G; g++)
        for (size_t i = g * P; i < g * P + RC_W; i++) S->head[src[i]]++;
    return rc_tables(c, S, src, n, mode, lo, hi);
}

size_t rm_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)level;
    rm_state *R = rm_get(c);
    if (n < RC_N || !R) return 0;
    rc_tabs *S = &R->t;
    int vec = cpu_level();
    size_t hdr = rc_enc_head(c, S, src, n, dst, cap, vec, rm_estimate);
    if (!hdr) return 0;
    unsigned m = S->m, K = S->K;
    size_t scap = 2 * n + 4 * RC_N + 64;
    uint8_t *sbuf = ent_scratch(c, scap);
    if (!sbuf) return 0;
    uint8_t *p = sbuf + scap;
    uint32_t st[RC_N];
    for (unsigned j = 0; j < RC_N; j++) st[j] = RANS_L;
    uint32_t off[256];
    rc_bucket_table(m, K, 256, off);
    size_t P = RC_PART(n);
    /* The reverse of the decoding order: the tail of group 3, then the rounds. */
    const size_t b3 = (RC_G - 1) * P;
    for (size_t j = n - b3; j-- > P;) {
        const rans_esym *E = S->etab + off[rm_mean16(src + b3 + (j & ~(size_t)(RC_W - 1)) - RC_W)];
        unsigned lane = (RC_G - 1) * RC_W + (j & (RC_W - 1));
        st[lane] = rans_enc_step(st[lane], &E[src[b3 + j]], &p);
    }
#ifdef ENT_HAVE_X86
    if (vec >= CPU_AVX512) p = rm_enc_avx512(st, S->zt, off, m, src, P, p);
    else if (vec >= CPU_AVX2) p = rm_enc_avx2(st, (const uint32_t(*)[4])S->vt, off, m, src, P, p);
    else
#endif
        for (size_t r = P / RC_W; r-- > 0;)
            for (unsigned g = RC_G; g-- > 0;) {
                const uint8_t *q = src + g * P + r * RC_W;
                const rans_esym *E = S->etab + off[r ? rm_mean16(q - RC_W) : m];
                for (unsigned l = RC_W; l-- > 0;) st[g * RC_W + l] = rans_enc_step(st[g * RC_W + l], &E[q[l]], &p);
            }
    return rans_finish(st, RC_N, p, sbuf + scap, dst, hdr, n, cap);
}

/* Decodes cnt <= 16 symbols of one round of lanes st[0..cnt) with the table at dt into
 * q, checking every refill; -1 when the words end. */
static int dec_checked(uint32_t *st, const uint32_t *dt, size_t cnt, const uint8_t **pp, const uint8_t *end, uint8_t *q)
{
    for (size_t l = 0; l < cnt; l++) {
        uint32_t x = st[l];
        uint32_t e = dt[x & (RANS_M - 1)];
        q[l] = (uint8_t)e;
        x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
        if (x < RANS_L) {
            if (end - *pp < 2) return -1;
            x = (x << 16) | (uint32_t)(*pp)[0] | ((uint32_t)(*pp)[1] << 8);
            *pp += 2;
        }
        st[l] = x;
    }
    return 0;
}

int rm_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    rm_state *R;
    if (n < RC_N || srclen < 2 || !(R = rm_get(c))) return -1;
    rc_tabs *S = &R->t;
    const uint8_t *p = src, *end = src + srclen;
    uint32_t st[RC_N];
    unsigned m, K = rc_dec_head(S, &p, end, st, &m);
    if (!K) return -1;
    const uint32_t *dt = S->dtab;
    uint32_t bkt[256];
    rc_bucket_table(m, K, RANS_M, bkt);
    size_t P = RC_PART(n), rounds = P / RC_W, r = 0;
#ifdef ENT_HAVE_X86
    if (cpu_level() >= CPU_AVX512 && (cpu_features() & CPU_GATHER)) r = rm_dec_avx512(st, dt, bkt, m, &p, end, dst, P);
    else if (cpu_level() >= CPU_AVX2) r = rm_dec_avx2(st, dt, bkt, m, &p, end, dst, P);
#endif
    /* Whole rounds with a round's worst case of words left: no check per refill. */
    for (; r < rounds && end - p >= 2 * (ptrdiff_t)RC_N; r++)
        for (unsigned g = 0; g < RC_G; g++) {
            uint8_t *q = dst + g * P + r * RC_W;
            const uint32_t *d = dt + bkt[r ? rm_mean16(q - RC_W) : m];
            uint32_t *sg = st + g * RC_W;
            for (unsigned l = 0; l < RC_W; l++) {
                uint32_t x = sg[l];
                uint32_t e = d[x & (RANS_M - 1)];
                q[l] = (uint8_t)e;
                x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
                uint32_t nd = x < RANS_L, w = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
                sg[l] = (x << (nd << 4)) | (w & (0u - nd));
                p += 2 * nd;
            }
        }
    for (; r < rounds; r++)
        for (unsigned g = 0; g < RC_G; g++) {
            uint8_t *q = dst + g * P + r * RC_W;
            if (dec_checked(st + g * RC_W, dt + bkt[r ? rm_mean16(q - RC_W) : m], RC_W, &p, end, q)) return -1;
        }
    /* The tail of group 3 continues its rounds: whole or partial ones of 16. */
    const size_t b3 = (RC_G - 1) * P;
    for (size_t j = P; j < n - b3; j += RC_W) {
        size_t cnt = n - b3 - j < RC_W ? n - b3 - j : RC_W;
        uint8_t *q = dst + b3 + j;
        if (dec_checked(st + (RC_G - 1) * RC_W, dt + bkt[rm_mean16(q - RC_W)], cnt, &p, end, q)) return -1;
    }
    if (p != end) return -1;
    for (unsigned k = 0; k < RC_N; k++)
        if (st[k] != RANS_L) return -1;
    return 0;
}
