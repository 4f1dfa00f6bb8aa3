/* select.c — the entropy stage's entry points and its per-plane codec choice, made
 * through the codec registry (codecs.c: estimates, encoders, decoders by id).
 *
 * Choosing must cost far less than coding, so the decision runs on one histogram of
 * the plane: one value -> CONST; an order-0 estimate at or above ~7.9 bits/byte (the
 * mantissa planes) -> STORED without running any coder; otherwise order-0 rANS with
 * adaptive sub-block tables (below 4 KiB as codec 9: 4 states, compact tables); on exponent
 * and mantissa planes, from level 2, rANS with a small context (codec 8) when its
 * estimate beats order 0's size, and on exponent planes from level 3 the same coder with
 * a round's mean as context (codec 10) where a sample finds it better. Order-1 is estimated only
 * for exponent planes at level >= 4 (any non-mantissa plane at >= 6), and only coded
 * when its estimate (its larger tables counted) beats the order-0 result; zstd is tried
 * for opaque and integer planes, for planes that are mostly zero bytes, for every plane
 * of a chunk with repeats (ent_ctx_set_lz) and for every plane at level >= 6. Every
 * candidate must beat STORED, so output never exceeds n bytes. A choice other than auto
 * (ent_ctx_set_codec) leaves zstd out (rans) or codes every plane with one back end that
 * is not stored unseen or constant (zstd, lz4, snappy, deflate). Level 1, the fast level,
 * counts no context coder (their pair counts, estimates and encoders were a third of -3's
 * time on gradients) and codes zstd first where it is tried, order 0 after it only where
 * order 0's plan beats zstd's size.
 */
#include <string.h>

#include "common/copy.h"
#include "common/cpu.h"
#include "ent_internal.h"
#include "rans_ctxm.h"

size_t ent_bound(size_t n) { return n + 16; }

static size_t store(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, uint8_t *codec)
{
    *codec = ENT_STORED;
    if (cap < n) /* broken contract (cap < ent_bound): never write past dst */
        return 0;
    mem_copy_far(dst, src, n);
    return n;
}

int ent_codec_known(uint8_t codec) { return ent_codec_get(codec) != NULL; }

size_t ent_encode_with(ent_ctx *c, uint8_t want, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level,
                       uint8_t *codec)
{
    const ent_codec_desc *d = ent_codec_get(want);
    size_t r = 0;
    c->bhist_src = NULL;
    c->plane++;
    c->est_bar = 0;
    if (n == 0 || !d) return store(src, n, dst, cap, codec);
    if (d->estimate) { /* the exact estimate first, as the selector does */
        uint32_t h[256];
        ent_histogram(src, n, h);
        if (d->estimate(c, src, n, h, 0) >= 1e300) return store(src, n, dst, cap, codec);
    }
    r = d->encode(c, src, n, dst, cap, level);
    if (r) {
        *codec = want;
        return r;
    }
    return store(src, n, dst, cap, codec);
}

/* Histogram of the first KiB of every 8 KiB. One set of sub-histograms for all the
 * pieces: per-piece ent_histogram calls spent more on clearing and summing their
 * tables than on counting, and the vector histogram cannot take random bytes. */
static size_t sample_histogram(const uint8_t *src, size_t n, uint32_t *cnt)
{
    uint32_t t[4][256];
    memset(t, 0, sizeof t);
    size_t m = 0;
    for (size_t o = 0; o + 1024 <= n; o += 8192, m += 1024) {
        const uint8_t *p = src + o;
        for (size_t i = 0; i < 1024; i += 8) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            t[0][v & 0xff]++;
            t[1][(v >> 8) & 0xff]++;
            t[2][(v >> 16) & 0xff]++;
            t[3][(v >> 24) & 0xff]++;
            t[0][(v >> 32) & 0xff]++;
            t[1][(v >> 40) & 0xff]++;
            t[2][(v >> 48) & 0xff]++;
            t[3][v >> 56]++;
        }
    }
    for (int s = 0; s < 256; s++) cnt[s] = t[0][s] + t[1][s] + t[2][s] + t[3][s];
    return m;
}

/* Nonzero bytes that come in runs (frozen rows next to changed ones) are where zstd
 * beats order-0 coding on a residual plane; isolated ones, the common case of slowly
 * moving weights, cost zstd a sequence each (~2-3 bytes against ~1.5 for rANS), and
 * trying zstd on those planes took as long as coding them. So zstd is tried on large
 * planes only when the nonzero bytes average at least 1.5 per run; small planes (where
 * rANS's states and tables weigh most) always try it. Counted from the first KiB of
 * every 8 (a run cut by a window's start counts twice). */
static int nonzero_clustered(const uint8_t *src, size_t n)
{
    size_t runs = 0, nz = 0;
    for (size_t o = 0; o < n; o += 8192) {
        const uint8_t *p = src + o;
        size_t len = n - o < 1024 ? n - o : 1024, i = 0;
#ifdef ENT_HAVE_X86
        if (cpu_level() >= CPU_AVX2) i = ent_runs_avx2(p, len, &runs, &nz);
#endif
        for (; i < len; i++) {
            runs += p[i] && (i == 0 || !p[i - 1]);
            nz += p[i] != 0;
        }
    }
    return 2 * nz >= 3 * runs;
}

/* An entry list's column (ENT_HINT_LIST) predicted rather than tried: one value as such,
 * else zstd, which coded every column of the corpus's lists 4 to 100 times smaller than
 * the table coders did (names, shapes, kinds repeat from entry to entry), and stored
 * where it does not code a column under 256 bytes. 0 when zstd codes a larger column
 * less than 4:1: then every codec is tried. The bytes are what the full choice writes
 * whenever a table coder would not have won. */
static size_t list_column(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level, uint8_t *codec)
{
    size_t i = 1;
    while (i < n && src[i] == src[0]) i++;
    if (i == n && cap >= 1) {
        dst[0] = src[0];
        *codec = ENT_CONST;
        return 1;
    }
    size_t r = ent_codec_get(ENT_ZSTD)->encode(c, src, n, dst, cap < n ? cap : n, level);
    if (r && (n < 256 || r <= n / 4)) {
        *codec = ENT_ZSTD;
        return r;
    }
    return n < 256 ? store(src, n, dst, cap, codec) : 0;
}

/* Order 0 or a small-context coder, on exponent and mantissa planes of 64 KiB or more
 * (plan: order 0's size as rans0_plan predicts it, its state left in c for rans0_size).
 * The context coders' first stages (rc_sample, rm_sample: the pairs 16 apart and the
 * rounds' means in the first KiB of every 16 KiB, the same bytes) choose which of them
 * is counted further: codec 10 (a round's mean as context, exponent planes from level
 * ENT_MEAN_MIN_LEVEL) where its sampled estimate is below codec 8's, else codec 8, the
 * one chosen only where its sample saves RC_GAIN_MIN of the order-0 entropy (weights
 * save ~0.1%). On the corpus's gradients and moments codec 10 codes the exponent
 * planes 4-6% below codec 8 (step-300 grads_bf16's: 3.04 MB against 3.15 MB), and
 * its count (sorted by bucket) costs less than codec 8's pairs. At level 3 codec 10 is
 * sampled only where codec 8's sample passed: sampled on every exponent plane, and
 * counted through on the planes codec 8 leaves to order 0, it took 0.36% off
 * grads_bf16's exponent bytes (none off weights_f32's) for 7% more selector CPU on
 * those planes (9% on weights_f32's). The chosen coder stops where its second stage cannot beat
 * order 0's plan, or zstd's size where that is smaller (c->est_bar; then codec 8 goes on
 * where codec 10 stopped and codec 8 passed), else every byte is counted once, for its
 * exact estimate and the encoder's tables, and its size is compared with order 0's
 * predicted size (or zstd's). Counting both through cost 12-18% more compression time. */
/* The lowest level at which codec 10 is a candidate: -2 keeps codec 8 alone. */
#define ENT_MEAN_MIN_LEVEL 3

static const ent_codec_desc *context_pick(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *h, int hint,
                                          int level, double plan, size_t lz)
{
    const ent_codec_desc *o0 = ent_codec_get(ENT_RANS0);
    /* The size to beat: order 0's plan (it may not beat stored), or zstd's (lz, already
     * written; 0: none) where that is not larger; then order 0 is out, and NULL says
     * that zstd's stays. */
    double bar = plan < (double)n ? plan : (double)n;
    int o0_out = lz && (double)lz <= bar;
    if (o0_out) bar = (double)lz;
    c->est_bar = bar;
    double gain = RC_GAIN_MIN * ent_bits(h, n) / 8, size = 1e300;
    double e8 = rc_sample(c, src, n, h);
    int mean = hint == ENT_HINT_EXPONENT && level >= ENT_MEAN_MIN_LEVEL && (e8 <= gain || level > 3);
    double e10 = mean ? rm_sample(c, src, n, h) : 1e300;
    uint8_t id = ENT_RANSCTX;
    if (e10 < e8 && e10 <= gain && (size = rm_rest(c, src, n)) < 1e300) id = ENT_RANSCTXM;
    else if (e8 <= gain) size = rc_rest(c, src, n);
    c->est_bar = 0;
    if (o0_out) return size < bar ? ent_codec_get(id) : NULL;
    if (size >= 1e300) return o0;
    double size0 = rans0_size(c, src, n);
    return size < (size0 < (double)n ? size0 : (double)n) ? ent_codec_get(id) : o0;
}

size_t ent_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level, int hint,
                  uint8_t *codec)
{
    /* The exponent byte of a 16-bit float is half its bytes, and counting it exactly took
     * a fifth of compressing FP16 weights at level 3 (the scalar table: its values span
     * more than the vector count takes) and a tenth of BF16 gradients. Up to level 3 its
     * blocks are counted from a sample, as small planes are (a quarter; every value in
     * the block's range kept codable): the corpus's FP16 and BF16 files 0.005-0.035%
     * larger, compressed 5-9% faster at level 3 and 11-19% at level 1. Not FP32's
     * exponent planes, a quarter of the bytes, where the estimate cost up to 0.08% (Adam's
     * exp_avg) and moved the selector's choices for no time. */
    int count_sample = (hint & ENT_HINT_SAMPLE) && level <= 3;
    hint &= ~ENT_HINT_SAMPLE;
    if (n == 0) return store(src, n, dst, cap, codec);
    if (level < 1) level = 1;
    c->plane++;
    uint32_t h[256];
    if (hint == ENT_HINT_MANTISSA && n >= 64 * 1024 && !c->lz) {
        /* Mostly random: a 1/8 sample (1 KiB of every 8) decides STORED, so these
         * planes cost one pass over 12% of their bytes; the sample's entropy runs low
         * by ~0.03 bits, which only makes coding attempts more likely. */
        size_t m = sample_histogram(src, n, h);
        if (ent_bits(h, m) / 8 >= 0.9875 * (double)m && level < 6) return store(src, n, dst, cap, codec);
    }
    if (c->force) {
        /* A forced back end codes every plane not stored unseen above or one value. */
        c->bhist_src = NULL;
        if (ent_codec_get(ENT_CONST)->encode(c, src, n, dst, cap, level)) {
            *codec = ENT_CONST;
            return 1;
        }
        size_t r = ent_codec_get(c->force)->encode(c, src, n, dst, cap < n ? cap : n, level);
        if (r && r < n) {
            *codec = c->force;
            return r;
        }
        return store(src, n, dst, cap, codec);
    }
    if (hint == ENT_HINT_LIST && !c->only_rans) {
        size_t r = list_column(c, src, n, dst, cap, level, codec);
        if (r) return r;
        hint = ENT_HINT_OPAQUE; /* coded poorly: every codec tried */
    }
    /* Block histograms once: the plane histogram is their sum, rans0 reuses them. */
    int sh = rans0_base_shift(level, n);
    size_t nb = ((n - 1) >> sh) + 1;
    c->bhist_src = NULL;
    if (ent_grow((void **)&c->bhist, &c->bhist_cap, nb * (256 * sizeof(uint32_t) + sizeof(size_t))) == 0) {
        memset(h, 0, sizeof h);
        for (size_t b = 0; b < nb; b++) {
            size_t s0 = b << sh, len = (b + 1 == nb) ? n - s0 : ((size_t)1 << sh);
            uint32_t *bh = c->bhist + b * 256;
            if (hint == ENT_HINT_SMALL || count_sample) ent_histogram_sampled(src + s0, len, bh);
            else ent_histogram(src + s0, len, bh);
            for (int s = 0; s < 256; s++) h[s] += bh[s];
        }
        c->bhist_src = src;
        c->bhist_n = n;
        c->bhist_shift = sh;
    } else {
        ent_histogram(src, n, h);
    }
    int present = 0;
    for (int s = 0; s < 256; s++) present += h[s] != 0;
    if (present == 1 && cap >= 1) {
        c->bhist_src = NULL;
        dst[0] = src[0];
        *codec = ENT_CONST;
        return 1;
    }
    const ent_codec_desc *o0 = ent_codec_get(ENT_RANS0), *o1 = ent_codec_get(ENT_RANS1), *lz = ent_codec_get(ENT_ZSTD);
    double est0 = o0->estimate(c, src, n, h, 0);
    /* Planes mostly of zero bytes (gradients of rows that saw no tokens, pruned or
     * padded tensors) hold long runs that zstd codes in almost nothing and fast. */
    int zero_heavy = hint == ENT_HINT_RESIDUAL || hint == ENT_HINT_SMALL
                         ? h[0] > n - n / 16 && (n < 64 * 1024 || nonzero_clustered(src, n))
                         : h[0] > n / 2;
    int try_zstd = !c->only_rans &&
                   (hint == ENT_HINT_OPAQUE || hint == ENT_HINT_INT || level >= 6 || zero_heavy || c->lz);
    /* Near-random planes: the best a table coder could save is below ~1.25% of the
     * plane, not worth a coding pass (level >= 6 still tries down to 0.4%). */
    double keep = level >= 6 ? 0.996 : 0.9875;
    size_t best = n;
    uint8_t bestc = ENT_STORED;
    size_t lim = cap < n ? cap : n;
    /* The fast level codes zstd first where it is tried, and order 0 only where its plan
     * (to some tens of bytes of what it writes) is below zstd's size: on the zero-run
     * planes of gradients zstd codes half of order 0's size, and coding both cost a
     * tenth of grads_bf16's compression. Not on small planes, whose codec 9 the plan of
     * codec 2 does not predict. */
    int ctx = (hint == ENT_HINT_EXPONENT || hint == ENT_HINT_MANTISSA) && n >= 64 * 1024 && level > ENT_FAST_LEVEL;
    /* Levels 2 and 3 code zstd first too, at its level 1, on the zero-run planes of floats
     * (the rows of a gradient that saw no token), then order 0 only where its plan is
     * below zstd's size and a context coder only where its count is: on step-300
     * grads_bf16 such planes (15% of its bytes) took over a quarter of the compression
     * CPU at level 3, coded by a context coder and by zstd 3 to compare, and zstd 1 codes
     * them smaller (doc/entropy.md). */
    int zero_first = try_zstd && zero_heavy && ctx && level <= 3 && (c->lz == ENT_LZ_OFF || c->lz == ENT_LZ_RUNS);
    int lz_first = try_zstd && (level <= ENT_FAST_LEVEL || zero_first);
    uint8_t *zb = lz_first ? ent_cand(c, n) : NULL;
    size_t zr = zb ? lz->encode(c, src, n, zb, n, zero_first ? ENT_FAST_LEVEL : level) : 0;
    double plan = zr && n >= RANS0S_MAX ? rans0_plan(c, src, n, level) : -1;
    int o0_loses = zr && plan >= (double)zr;
    /* Order 0, or on exponent and mantissa planes from level 2 a small-context coder
     * (codec 8, or from level 3 codec 10 on exponent planes: context_pick): it decodes
     * about as fast as order 0 and takes 3-10% off the exponent planes of moments and
     * gradients (and ~0.5% off Adam's coded mantissa planes). Only one of them is coded:
     * both sizes are predicted from full counts and normalised tables (order 0's plan,
     * the context coder's window), to some tens of bytes of what each writes, so the
     * choice is the smaller, which coding both to compare found at twice the cost. The
     * context coder stops counting where a sample cannot beat order 0's plan, and order
     * 0's size is predicted only where it has not. Not below 64 KiB, where building its
     * decoder's tables (up to 16 x 4096 entries) costs more than decoding the plane. */
    if (est0 < keep * (double)n && (!o0_loses || zero_first)) {
        const ent_codec_desc *pick = o0;
        if (ctx)
            pick = context_pick(c, src, n, h, hint, level, plan >= 0 ? plan : rans0_plan(c, src, n, level),
                                zero_first ? zr : 0);
        /* Small planes: order 0 with 4 states and compact tables; not residual planes, which
         * gradient packets (lib/grad) take only as codec 2. Not where the plane's order-0
         * entropy is 95% of n or more: on the corpus's ~400 such planes it never beat
         * stored, and planning them cost more than coding the rest. */
        int small = n < RANS0S_MAX && hint != ENT_HINT_RESIDUAL;
        if (small) pick = est0 < 0.95 * (double)n ? ent_codec_get(ENT_RANS0S) : NULL;
        /* Order 0 is written as codec 11 (its last rounds in the states it starts from:
         * ~100 bytes less a plane of 64 states), but for residual planes, which gradient
         * packets take only as codec 2. */
        const ent_codec_desc *o0w = hint == ENT_HINT_RESIDUAL ? o0 : ent_codec_get(ENT_RANS0T);
        if (pick == o0) pick = o0w;
        size_t r = pick ? pick->encode(c, src, n, dst, lim, level) : 0;
        if (!r && pick && pick != o0w && !small && !o0_loses) r = (pick = o0w)->encode(c, src, n, dst, lim, level);
        if (r && r < best) {
            best = r;
            bestc = pick->id;
        }
    }
    /* Order-1 decodes several times slower than order-0 (scalar, serial context
     * chain per lane) and gained 0-0.5% of file size on the planes measured, so the
     * default level leaves it out; level 4-5 try it on exponent planes from a sampled
     * estimate, level >= 6 on any plane with an exact one. */
    int try_o1 = (hint == ENT_HINT_EXPONENT && level >= 4) || (level >= 6 && hint != ENT_HINT_MANTISSA);
    if (try_o1 && n >= 4096 && (est0 < keep * (double)n || level >= 6)) {
        int sampled = level < 6;
        double est1 = o1->estimate(c, src, n, h, sampled);
        /* Order-0 actual size vs order-1 estimate: the estimate runs ~0.3% low. */
        if (est1 * 1.003 < (double)best) {
            if (sampled) est1 = o1->estimate(c, src, n, h, 0);
            uint8_t *cb = est1 * 1.003 < (double)best ? ent_cand(c, n) : NULL;
            size_t r = cb ? o1->encode(c, src, n, cb, n, level) : 0;
            if (r && r < best) {
                memcpy(dst, cb, r);
                best = r;
                bestc = ENT_RANS1;
            }
        }
    }
    if (try_zstd) {
        if (!lz_first) { /* order 1 (not at the fast level) may have used the candidate buffer */
            zb = ent_cand(c, n);
            zr = zb ? lz->encode(c, src, n, zb, n, level) : 0;
        }
        if (zr && zr < best) {
            memcpy(dst, zb, zr);
            best = zr;
            bestc = ENT_ZSTD;
        }
    }
    c->bhist_src = NULL;
    c->o0_src = NULL;
    if (bestc == ENT_STORED) return store(src, n, dst, cap, codec);
    *codec = bestc;
    return best;
}

int ent_decode(ent_ctx *c, uint8_t codec, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    const ent_codec_desc *d = ent_codec_get(codec);
    if (!c || !d || (srclen && !src) || (n && !dst)) return -1;
    return d->decode(c, src, srclen, dst, n);
}
