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

/* Codec 10's state: codec 8's (tables, the estimate's counts and its choice). */
typedef struct {
    rc_tabs t;
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

/* The rounds the stage [a, b) counts: those that start at plane offsets [o + a, o + b)
 * of every RC_STEP (a and b multiples of RC_W, and so every round's start, P being one),
 * but a group's first round, whose context is m (S->head): the statements ... for the
 * round at j of cnt bytes (16 but for the plane's last). Rounds lie inside their group's part,
 * so their context, the 16 bytes before, is the group's own. Plane offsets rather than
 * offsets in each part, so that the first stage reads the bytes codec 8's does
 * (rc_sample) and the two are compared on one sample. */
#define FOR_ROUNDS(n, a, b, ...)                                                                   \
    do {                                                                                           \
        size_t P_ = RC_PART(n);                                                                    \
        for (size_t o_ = 0; o_ + (a) < (n); o_ += RC_STEP) {                                       \
            size_t lo_ = o_ + (a) < RC_W ? RC_W : o_ + (a), hi_ = o_ + (b) < (n) ? o_ + (b) : (n); \
            for (size_t j = lo_; j < hi_; j += RC_W) {                                             \
                if (j == P_ || j == 2 * P_ || j == 3 * P_) continue;                               \
                size_t cnt = (n) - j < RC_W ? (n) - j : RC_W;                                      \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)
_Static_assert(RC_G == 4, "FOR_ROUNDS skips the starts of four groups");

/* n bytes of one bucket counted into w's four copies in turn (their sum is the count;
 * four rows, so that consecutive equal bytes do not wait on one counter). */
static void count_bytes(uint32_t *w, const uint8_t *q, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        w[q[i]]++;
        w[RC_ROW + q[i + 1]]++;
        w[2 * RC_ROW + q[i + 2]]++;
        w[3 * RC_ROW + q[i + 3]]++;
    }
    for (; i < n; i++) w[q[i]]++;
}

/* The stage [a, b)'s rounds one by one, each byte with the bucket of the mean of the 16
 * before. Returns the bytes counted. A round of one value (a gradient's rows that saw
 * no token) is one addition. */
static size_t count_rounds(rc_tabs *S, const uint8_t *src, size_t n, size_t a, size_t b)
{
    size_t k = 0;
    const uint64_t ones = 0x0101010101010101ull;
    FOR_ROUNDS(n, a, b, {
        const uint8_t *q = src + j;
        uint32_t *w = S->wide + S->off[rm_mean16(q - RC_W)];
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
        count_bytes(w, q, cnt);
    });
    return k;
}

/* The runs of consecutive whole rounds the stage [a, b) counts (FOR_ROUNDS's whole
 * rounds, as runs): the statements ... for the nr rounds from offset j. A piece of
 * RC_STEP holds at most one group start (P >= RC_STEP on the planes that are sampled;
 * the whole count's one piece is the plane), which splits it. */
#define FOR_RUNS(n, a, b, ...)                                                                       \
    do {                                                                                             \
        size_t P_ = RC_PART(n), end_ = (n) / RC_W * RC_W;                                            \
        for (size_t o_ = 0; o_ + (a) < end_; o_ += RC_STEP) {                                        \
            size_t lo_ = o_ + (a) < RC_W ? RC_W : o_ + (a), hi_ = o_ + (b) < end_ ? o_ + (b) : end_; \
            if (lo_ >= hi_) continue;                                                                \
            for (unsigned g_ = 1; g_ <= RC_G; g_++) {                                                \
                size_t s_ = g_ < RC_G ? g_ * P_ : hi_; /* the run ends at a group start or at hi_ */ \
                if (s_ < lo_) continue;                                                              \
                if (s_ > hi_) s_ = hi_;                                                              \
                size_t j = lo_, nr = (s_ - lo_) / RC_W;                                              \
                if (nr) {                                                                            \
                    __VA_ARGS__                                                                      \
                }                                                                                    \
                lo_ = s_ + RC_W; /* past the group's first round */                                  \
                if (lo_ >= hi_) break;                                                               \
            }                                                                                        \
        }                                                                                            \
    } while (0)

/* The buckets of nr consecutive whole rounds from q into out: the bucket of each one's
 * context, clamped to [0, RC_WIDE) from base (the plane's mode less RC_WIDE / 2). */
static void buckets(const uint8_t *q, size_t nr, int base, uint8_t *out)
{
    size_t i = 0;
#ifdef ENT_HAVE_X86
    if (cpu_level() >= CPU_AVX512) i = rm_buckets_avx512(q, nr, base, out);
#endif
    for (; i < nr; i++) out[i] = (uint8_t)rc_bucket((int)rm_mean16(q + RC_W * i - RC_W), base, RC_WIDE);
}

/* Buckets of fewer bytes are counted one by one; planes of wider values (Adam's
 * exp_avg where a row saw no token: exponents 0 and 90-120) are not sorted. */
#define RM_HIST_MIN 1024u
#define RM_SORT_RANGE 64

/* As count_rounds, for the large stages: the whole rounds are first copied together by
 * the bucket of their context into buf (n + n/16 bytes: the copies, then each round's
 * bucket), then each bucket's bytes are counted by one histogram (ent_histogram, whose
 * vector loop takes an exponent plane's few values at several GB/s) into its row of
 * set 0; the plane's last round, when partial, is counted by itself. Counting a round's
 * bytes one by one into shared rows took 1.75x the time of codec 8's pairs. */
static size_t count_sorted(rc_tabs *S, const uint8_t *src, size_t n, uint8_t *buf, size_t a, size_t b)
{
    size_t k = 0, nr_all = 0, at[RC_WIDE], sz[4][RC_WIDE];
    uint8_t *rb = buf + n;
    int base = (int)S->mode - (int)RC_WIDE / 2;
    FOR_RUNS(n, a, b, {
        buckets(src + j, nr, base, rb + nr_all);
        nr_all += nr;
    });
    size_t last = n / RC_W * RC_W; /* the plane's last round, when partial */
    if (last < n && (last % RC_STEP) >= a && (last % RC_STEP) < b) {
        uint32_t *w = S->wide + S->off[rm_mean16(src + last - RC_W)];
        for (size_t i = last; i < n; i++) w[src[i]]++;
        k += n - last;
    }
    /* Four sets of counters: runs of one bucket would wait on each increment. */
    memset(sz, 0, sizeof sz);
    size_t i = 0;
    for (; i + 4 <= nr_all; i += 4) {
        sz[0][rb[i]]++;
        sz[1][rb[i + 1]]++;
        sz[2][rb[i + 2]]++;
        sz[3][rb[i + 3]]++;
    }
    for (; i < nr_all; i++) sz[0][rb[i]]++;
    for (unsigned t = 0, o = 0; t < RC_WIDE; t++) {
        sz[0][t] = RC_W * (sz[0][t] + sz[1][t] + sz[2][t] + sz[3][t]);
        at[t] = o;
        o += (unsigned)sz[0][t];
    }
    const uint8_t *r = rb;
    FOR_RUNS(n, a, b, {
        for (size_t e = j + RC_W * nr; j < e; j += RC_W) {
            unsigned t = *r++;
            memcpy(buf + at[t], src + j, RC_W);
            at[t] += RC_W;
        }
    });
    for (unsigned t = 0, o = 0; t < RC_WIDE; o += (unsigned)sz[0][t], t++) {
        const uint8_t *q = buf + o;
        uint32_t *w = S->wide + 256 * t, h[256];
        size_t len = sz[0][t];
        if (len >= RM_HIST_MIN) { /* below, the histogram's set-up costs more than its count */
            ent_histogram(q, len, h);
            for (int v = S->lo; v <= S->hi; v++) w[v] += h[v];
            continue;
        }
        count_bytes(w, q, len);
    }
    return k + RC_W * nr_all;
}

/* The rounds of the stage [a, b): sorted by bucket where the plane's values span less
 * than RM_SORT_RANGE (the vector histogram's reach: ent_hist_avx512) and c lends a
 * buffer, but not the first stage's few; else one by one. Returns the bytes counted.
 * The buffer is the encoders' staging (ent_scratch), which no coder holds while a plane
 * is being estimated (an encoder takes it after its estimate); the candidate buffer may
 * hold another coder's output for this plane meanwhile (zstd's, select.c). */
static size_t count_stage(ent_ctx *c, rc_tabs *S, const uint8_t *src, size_t n, size_t a, size_t b)
{
    int sort = b - a > RC_SAMPLE && S->hi - S->lo < RM_SORT_RANGE;
    uint8_t *buf = sort ? ent_scratch(c, n + n / RC_W + 64) : NULL;
    return buf ? count_sorted(S, src, n, buf, a, b) : count_rounds(S, src, n, a, b);
}

/* The plane's mode, range and buckets for an estimate; only the values of the plane
 * are counted, so only theirs are cleared. */
static void rm_start(rc_tabs *S, const uint32_t *hist)
{
    S->src = NULL;
    rc_range(hist, &S->mode, &S->lo, &S->hi);
    for (unsigned k = 0; k < RC_SETS; k++)
        for (unsigned b = 0; b < RC_WIDE; b++)
            memset(S->wide + k * RC_ROW + 256 * b + S->lo, 0, (size_t)(S->hi - S->lo + 1) * 4);
    rc_bucket_table(S->mode, RC_WIDE, 256, S->off);
    S->k = 0;
}

/* Every round counted: the group heads (context m), the window and the tables. */
static double rm_finish(ent_ctx *c, rc_tabs *S, const uint8_t *src, size_t n)
{
    size_t P = RC_PART(n);
    memset(S->head, 0, sizeof S->head);
    for (unsigned g = 0; g < RC_G; g++)
        for (size_t i = g * P; i < g * P + RC_W; i++) S->head[src[i]]++;
    return rc_tables(c, S, src, n, S->mode, S->lo, S->hi);
}

/* As codec 8's (rc_sample, rc_rest): the first stage's rounds and their estimate (K = 16
 * around the mode) scaled to the plane; then up to 4 KiB of every 16 must beat
 * c->est_bar by 0.5%, and all of it is counted, the window chosen and the tables
 * normalised: the size returned is what the encoder writes, to a few bytes. */
double rm_sample(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist)
{
    rm_state *R = rm_get(c);
    if (n < 64 * 1024 || !R) return 1e300;
    rc_tabs *S = &R->t;
    rm_start(S, hist);
    S->k = count_stage(c, S, src, n, 0, RC_SAMPLE);
    return rc_est_sampled(S, n);
}

double rm_rest(ent_ctx *c, const uint8_t *src, size_t n)
{
    rm_state *R = rm_get(c);
    if (!R || !R->t.k) return 1e300;
    rc_tabs *S = &R->t;
    double best;
    S->k += count_stage(c, S, src, n, RC_SAMPLE, 4096);
    rc_choose(S, S->mode, (double)n / (double)S->k, S->lo, S->hi, &best);
    S->k = 0;
    if (c->est_bar > 0 && best * 1.005 >= c->est_bar) return 1e300;
    count_stage(c, S, src, n, 4096, RC_STEP);
    return rm_finish(c, S, src, n);
}

/* Sampled: rm_sample must save RC_GAIN_MIN of the order-0 entropy, then rm_rest; not
 * sampled, every round. (The selector weighs codec 8's sample against this one's
 * itself: select.c.) */
double rm_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled)
{
    rm_state *R = rm_get(c);
    if (n < RC_N || !R) return 1e300;
    rc_tabs *S = &R->t;
    if (sampled && n >= 64 * 1024) {
        if (rm_sample(c, src, n, hist) > RC_GAIN_MIN * ent_bits(hist, n) / 8) return 1e300;
        return rm_rest(c, src, n);
    }
    rm_start(S, hist);
    count_stage(c, S, src, n, 0, RC_STEP);
    return rm_finish(c, S, src, n);
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
