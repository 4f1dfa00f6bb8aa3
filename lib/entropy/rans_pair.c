/* rans_pair.c — codec 10, a plane of pairs: the plane's first half A and its second half
 * B are element-wise pairs (transform float-pair's FP32 exponents and top mantissa bytes,
 * lib/transforms/xf_lossless.c), and B may be coded with A's byte at the same place as
 * its context. A is coded by the selector as an exponent plane (its codec id inside the
 * payload), B either the same way as a mantissa plane, or with one order-0 rANS table per
 * context, chosen by a cost estimate.
 *
 * Why: a float's top mantissa bits are not independent of its exponent. Within one binade
 * the values of a bell-shaped tensor thin out from the low end to the high end, more so
 * in the tail's binades than near zero, so the mantissa's top byte given the exponent
 * measured 1.5 % below its order-0 size on FP32 gradients (bench/f32_context_bound.py,
 * 8,909,275 -> 8,778,256 bytes, tables not counted) — what a trained OpenZL takes and
 * byte planes coded one by one cannot. Full tables per exponent (1-2 bytes a symbol)
 * cost most of that gain in a 1 MiB chunk; the shapes differ smoothly across the byte,
 * so a context's table here is the plane's order-0 table times a ratio per 32-value bin
 * (one byte each, scaled by 32), renormalised: 33 bytes per context, sent only for the
 * exponents whose estimated saving exceeds that.
 *
 * The decoder decodes A first and then B in one go from the same payload, so no plane
 * depends on another plane of the frame. Coded bytes: doc/entropy.md, "Pairs (codec 10)".
 */
#include <stdlib.h>
#include <string.h>

#include "ent_internal.h"

#define RP_COND 0xffu /* B's mode byte: coded with A as context (else: B's own codec id) */
#define RP_BINS 32u   /* ratio bins of a context's table: the byte's top 5 bits */
#define RP_SCALE 32u  /* a ratio of 1 */
#define RP_KMAX 16u   /* own tables at most (besides the shared one) */
#define RP_N 32u      /* interleaved states: symbol i on state i mod RP_N */
#define RP_MIN (64u * 1024u)

typedef struct {
    uint32_t dtab[(RP_KMAX + 1) * RANS_M];
    rans_esym etab[(RP_KMAX + 1) * 256];
    uint32_t bins[2][256 * RP_BINS]; /* (A, bin of B), in two sets summed */
    uint8_t *out; /* the halves coded, before they are known to beat n (the inner coders use c->cand) */
    size_t out_cap;
} rp_state;

static rp_state *rp_get(ent_ctx *c)
{
    if (!c->state[ENT_PAIR]) c->state[ENT_PAIR] = calloc(1, sizeof(rp_state));
    return c->state[ENT_PAIR];
}

static void rp_free(ent_ctx *c)
{
    rp_state *S = c->state[ENT_PAIR];
    if (S) free(S->out);
    free(S);
    c->state[ENT_PAIR] = NULL;
}

/* Counts of (a, bin of b) into S->bins[0] and of b into hb, over the first KiB of every
 * `every` bytes (all of them for every = 0). */
static void count_pairs(rp_state *S, const uint8_t *a, const uint8_t *b, size_t h, size_t every, uint32_t *hb)
{
    memset(S->bins, 0, sizeof S->bins);
    memset(hb, 0, 256 * sizeof *hb);
    uint32_t hb2[256] = {0};
    size_t piece = every ? 1024 : h;
    for (size_t o = 0; o < h; o += every ? every : h) {
        size_t end = o + piece < h ? o + piece : h, i = o;
        for (; i + 2 <= end; i += 2) {
            S->bins[0][a[i] * RP_BINS + (b[i] >> 3)]++;
            S->bins[1][a[i + 1] * RP_BINS + (b[i + 1] >> 3)]++;
            hb[b[i]]++;
            hb2[b[i + 1]]++;
        }
        if (i < end) {
            S->bins[0][a[i] * RP_BINS + (b[i] >> 3)]++;
            hb[b[i]]++;
        }
    }
    for (size_t k = 0; k < 256 * RP_BINS; k++) S->bins[0][k] += S->bins[1][k];
    for (int s = 0; s < 256; s++) hb[s] += hb2[s];
}

/* The bins of b's counts. */
static void bin_sum(const uint32_t *hb, double *pb)
{
    double tot = 0;
    for (unsigned k = 0; k < RP_BINS; k++) {
        pb[k] = 0;
        for (unsigned j = 0; j < 8; j++) pb[k] += hb[8 * k + j];
        tot += pb[k];
    }
    for (unsigned k = 0; k < RP_BINS; k++) pb[k] = tot ? pb[k] / tot : 0;
}

/* Bytes context a saves with its own bin ratios against the shared table (scaled by
 * scale), its table counted: the bins' KL divergence from the plane's, times its count. */
static double ctx_gain(const uint32_t *cb, const double *pb, double scale)
{
    double n = 0, kl = 0;
    for (unsigned k = 0; k < RP_BINS; k++) n += cb[k];
    if (n * scale < 4096) return 0; /* too few for a table that pays its build */
    for (unsigned k = 0; k < RP_BINS; k++)
        if (cb[k] && pb[k] > 0) kl += cb[k] * __builtin_log2(cb[k] / n / pb[k]);
    return kl / 8 * scale - (1 + RP_BINS);
}

/* The contexts worth a table (own[a] = 1, at most RP_KMAX, the largest savings) from
 * S->bins[0]; returns the estimated saving in bytes. */
static double choose(rp_state *S, const uint32_t *hb, double scale, uint8_t *own)
{
    double pb[RP_BINS], g[256], total = 0;
    bin_sum(hb, pb);
    memset(own, 0, 256);
    for (int a = 0; a < 256; a++) g[a] = ctx_gain(S->bins[0] + a * RP_BINS, pb, scale);
    for (unsigned k = 0; k < RP_KMAX; k++) {
        int best = -1;
        for (int a = 0; a < 256; a++)
            if (!own[a] && g[a] > 0 && (best < 0 || g[a] > g[best])) best = a;
        if (best < 0) break;
        own[best] = 1;
        total += g[best];
    }
    return total;
}

/* Table of context a: the shared table f0 times its bin ratios r, renormalised. The
 * decoder builds the same from the same bytes. */
static void ctx_table(const uint16_t *f0, const uint8_t *r, uint16_t *f)
{
    uint32_t raw[256];
    for (int s = 0; s < 256; s++) raw[s] = (uint32_t)f0[s] * r[s >> 3];
    rans_normalize(raw, f);
}

/* B with A as context: tables, then the rANS stream. 0 when it cannot beat n. */
static size_t code_cond(ent_ctx *c, rp_state *S, const uint8_t *a, const uint8_t *b, size_t h, const uint32_t *hb,
                        const uint8_t *own, uint8_t *dst, size_t cap)
{
    if (cap < 2 + 510 + 1 + RP_KMAX * (1 + RP_BINS)) return 0;
    uint16_t f0[256], f[256];
    uint32_t toff[256]; /* context a's table times 256 (encode) */
    rans_normalize(hb, f0);
    size_t hdr = rans_table_write(f0, dst);
    rans_build_esym(f0, S->etab);
    double pb[RP_BINS];
    bin_sum(hb, pb);
    size_t kpos = hdr++;
    unsigned K = 0;
    for (int a = 0; a < 256; a++) {
        toff[a] = 0;
        if (!own[a]) continue;
        const uint32_t *cb = S->bins[0] + a * RP_BINS;
        uint8_t *r = dst + hdr + 1;
        double n = 0;
        for (unsigned k = 0; k < RP_BINS; k++) n += cb[k];
        for (unsigned k = 0; k < RP_BINS; k++) {
            double q = pb[k] > 0 ? cb[k] / n / pb[k] * RP_SCALE + 0.5 : 0;
            r[k] = cb[k] == 0 ? 0 : q < 1 ? 1 : q > 255 ? 255 : (uint8_t)q;
        }
        dst[hdr] = (uint8_t)a;
        hdr += 1 + RP_BINS;
        ctx_table(f0, r, f);
        rans_build_esym(f, S->etab + 256 * ++K);
        toff[a] = 256 * K;
    }
    dst[kpos] = (uint8_t)K;
    size_t scap = 2 * h + 4 * RP_N + 64;
    uint8_t *sbuf = ent_scratch(c, scap);
    if (!sbuf) return 0;
    uint8_t *p = sbuf + scap;
    uint32_t st[RP_N];
    for (unsigned j = 0; j < RP_N; j++) st[j] = RANS_L;
    for (size_t i = h; i-- > 0;) st[i % RP_N] = rans_enc_step(st[i % RP_N], &S->etab[toff[a[i]] + b[i]], &p);
    return rans_finish(st, RP_N, p, sbuf + scap, dst, hdr, 2 * h, cap);
}

/* Writes a's codec and length, then its coded bytes; returns the bytes written. */
static size_t code_half(ent_ctx *c, const uint8_t *src, size_t h, uint8_t *dst, int level, int hint, int with_len)
{
    uint8_t codec = ENT_STORED;
    size_t at = with_len ? 5 : 1;
    size_t len = ent_encode(c, src, h, dst + at, ent_bound(h), level, hint, &codec);
    dst[0] = codec;
    if (with_len)
        for (int k = 0; k < 4; k++) dst[1 + k] = (uint8_t)(len >> 8 * k);
    return at + len;
}

static size_t rp_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    size_t h = n / 2;
    rp_state *S = rp_get(c);
    /* Room for both halves coded within ent_bound each (the caller's cap is n + 16) and
     * B coded with A as context beside B alone. */
    if (!S || n % 2 || h == 0 || ent_grow((void **)&S->out, &S->out_cap, 3 * ent_bound(h) + 16)) return 0;
    uint8_t *buf = S->out;
    const uint8_t *a = src, *b = src + h;
    size_t la = code_half(c, a, h, buf, level, ENT_HINT_EXPONENT, 1);
    size_t lb = code_half(c, b, h, buf + la, level, ENT_HINT_MANTISSA, 0);
    /* B with A as context where a 1/8 sample (the first KiB of every 8) predicts it
     * smaller than B alone by a part of it: B's order-0 size less the contexts' savings
     * against what B alone was coded to. */
    if (h >= RP_MIN && !c->force && !c->lz) {
        uint32_t hb[256];
        uint8_t own[256];
        count_pairs(S, a, b, h, 8192, hb);
        uint64_t m = 0;
        for (int s = 0; s < 256; s++) m += hb[s];
        double scale = m ? (double)h / (double)m : 1;
        double est = ent_bits(hb, m) / 8 * scale + 300 - choose(S, hb, scale, own);
        double frac = getenv("RP_FRAC") ? atof(getenv("RP_FRAC")) : 0.001;
        if (est < (double)lb * (1 - frac) - 64) {
            count_pairs(S, a, b, h, 0, hb);
            choose(S, hb, 1, own);
            uint8_t *t = buf + la + lb;
            size_t lc = code_cond(c, S, a, b, h, hb, own, t + 1, ent_bound(h));
            if (lc && lc + 1 < lb) {
                t[0] = RP_COND;
                memmove(buf + la, t, lc + 1);
                lb = lc + 1;
            }
        }
    }
    if (la + lb >= n || la + lb > cap) return 0;
    memcpy(dst, buf, la + lb);
    return la + lb;
}

static int decode_cond(ent_ctx *c, const uint8_t *p, const uint8_t *end, const uint8_t *a, uint8_t *b, size_t h)
{
    rp_state *S = rp_get(c);
    uint16_t f0[256], f[256];
    uint32_t coff[256] = {0};
    if (!S || rans_table_read(&p, end, f0) || p >= end) return -1;
    rans_build_dtab(f0, S->dtab);
    unsigned K = *p++;
    if (K > RP_KMAX) return -1;
    int last = -1;
    for (unsigned t = 1; t <= K; t++) {
        if (end - p < 1 + (ptrdiff_t)RP_BINS || (int)*p <= last) return -1;
        last = *p;
        coff[last] = t * RANS_M;
        ctx_table(f0, p + 1, f);
        rans_build_dtab(f, S->dtab + (size_t)t * RANS_M);
        p += 1 + RP_BINS;
    }
    if ((size_t)(end - p) < 4 * RP_N) return -1;
    uint32_t st[RP_N];
    for (unsigned j = 0; j < RP_N; j++, p += 4) {
        st[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (st[j] < RANS_L) return -1;
    }
    const uint32_t *DT = S->dtab;
    size_t i = 0;
    /* Whole rounds while a round's worst case of words remains: no bounds check inside. */
    for (; i + RP_N <= h && end - p >= 2 * (ptrdiff_t)RP_N; i += RP_N)
        for (unsigned k = 0; k < RP_N; k++) {
            uint32_t x = st[k], e = DT[coff[a[i + k]] + (x & (RANS_M - 1))];
            b[i + k] = (uint8_t)e;
            x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
            uint32_t nd = x < RANS_L, w = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
            st[k] = (x << (nd << 4)) | (w & (0u - nd));
            p += 2 * nd;
        }
    for (; i < h; i++) {
        unsigned k = i % RP_N;
        uint32_t x = st[k], e = DT[coff[a[i]] + (x & (RANS_M - 1))];
        b[i] = (uint8_t)e;
        x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
        if (x < RANS_L) {
            if (end - p < 2) return -1;
            x = (x << 16) | (uint32_t)p[0] | ((uint32_t)p[1] << 8);
            p += 2;
        }
        st[k] = x;
    }
    if (p != end) return -1;
    for (unsigned k = 0; k < RP_N; k++)
        if (st[k] != RANS_L) return -1;
    return 0;
}

static int rp_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    size_t h = n / 2;
    if (n % 2 || h == 0 || srclen < 6 || src[0] == ENT_PAIR) return -1;
    size_t la = (size_t)src[1] | (size_t)src[2] << 8 | (size_t)src[3] << 16 | (size_t)src[4] << 24;
    if (la > srclen - 6) return -1;
    const uint8_t *p = src + 5 + la, *end = src + srclen;
    if (ent_decode(c, src[0], src + 5, la, dst, h)) return -1;
    uint8_t mode = *p++;
    if (mode == RP_COND) return decode_cond(c, p, end, dst, dst + h, h);
    if (mode == ENT_PAIR) return -1;
    return ent_decode(c, mode, p, (size_t)(end - p), dst + h, h);
}

const ent_codec_desc ent_pair_codec = {
    .id = ENT_PAIR,
    .name = "pair",
    .encode = rp_encode,
    .decode = rp_decode,
    .free = rp_free,
};
