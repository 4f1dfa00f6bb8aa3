/* test_rans_ctx.c — rANS with a small context (codec 8, lib/entropy/rans_ctx*.c).
 *
 * Round trips of random, skewed, locally correlated and all-256 planes at every size
 * around the codec's group and round boundaries (0, 1, odd, 63/64/65, ...), coded at
 * every vector level: the encoders must write the same bytes, and every decoder must
 * decode every encoding. The selector must pick the codec for a correlated exponent
 * plane, smaller than order 0, and on every plane the smaller of codec 8 and order 0,
 * whose sizes it predicts without coding (the predictions checked); the estimate's pair
 * count gives every level the same bytes wherever the plane's mode lies; the sampled
 * estimate comes within 2.2% of the full count on thin tables. Hostile input: hand-made headers (K out of range,
 * truncated tables, low states, bytes left over, wrong n), every truncation, bit flips
 * (most caught) and garbage, where the three decoders must agree on status and bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entropy/rans_ctx.h"
#define CTX_CODEC ENT_RANSCTX
#define RND_SEED 0x2545F4914F6CDD1Dull
#include "ctx_check.h"

enum { D_RANDOM, D_SKEW, D_WALK, D_ALL256, D_TWO, D_COUNT };
static const char *const dname[D_COUNT] = {"random", "skewed", "walk", "all256", "two"};

/* D_WALK: exponents that follow the one 16 places back (the codec's context), drifting
 * around 0x7c with a wide spread, as Adam's moments do. */
static void fill(uint8_t *b, size_t n, int d)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd();
        switch (d) {
        case D_RANDOM: b[i] = (uint8_t)r; break;
        case D_SKEW: b[i] = (uint8_t)(0x70 + __builtin_ctz(r | 0x10000)); break;
        case D_WALK: {
            int prev = i >= 16 ? b[i - 16] : 0x7c;
            int v = prev + (int)(r % 5) - 2 + (prev < 0x70) - (prev > 0x88);
            b[i] = r % 16 == 0 ? (uint8_t)(0x60 + r % 48) : (uint8_t)v;
            break;
        }
        case D_ALL256: b[i] = (uint8_t)(i < 256 ? i : r % 3 ? 0x7e : r >> 8); break;
        case D_TWO: b[i] = (uint8_t)(r % 7 ? 0x7f : 0x80); break;
        }
    }
}

static void test_roundtrips(ent_ctx *c)
{
    static const size_t sizes[] = {0,    1,    2,    15,   16,    17,    63,    64,     65,     127,    128,    129,
                                   1000, 4095, 4096, 4097, 16383, 65536, 65599, 100003, 131072, 262147, 1 << 20};
    int coded = ctx_roundtrips(c, sizes, sizeof sizes / sizeof *sizes, fill, dname, D_COUNT);
    CHECK(coded >= 40, "only %d planes coded with codec 8", coded);
}

/* The selector, from level 2 on, codes a correlated exponent plane with codec 8, smaller
 * than order 0 forced; level 1 (the fast level: no context coder counted) with order 0,
 * the same bytes as order 0 forced at its own level. */
static void test_selector(ent_ctx *c)
{
    size_t n = 1 << 20;
    uint8_t *src = malloc(n), *enc = malloc(ent_bound(n)), *dec = malloc(n);
    fill(src, n, D_WALK);
    uint8_t got;
    size_t l0 = ent_encode_with(c, ENT_RANS0T, src, n, enc, ent_bound(n), 3, &got);
    for (int level = 1; level <= 9; level += 2) {
        size_t len = ent_encode(c, src, n, enc, ent_bound(n), level, ENT_HINT_EXPONENT, &got);
        if (level == 1) {
            uint8_t forced;
            size_t f0 = ent_encode_with(c, ENT_RANS0T, src, n, dec, ent_bound(n), 1, &forced);
            CHECK(got == ENT_RANS0T && len == f0 && !memcmp(enc, dec, len), "level 1: selector chose %s, %zu bytes",
                  ent_codec_name(got), len);
        } else
            CHECK(got == ENT_RANSCTX && len < l0, "level %d: selector chose %s, %zu bytes (order 0: %zu)", level,
                  ent_codec_name(got), len, l0);
        CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && !memcmp(dec, src, n), "level %d: round trip", level);
    }
    /* Not on mantissa planes, and not where order 0 codes as small (no context). */
    fill(src, n, D_SKEW);
    size_t len = ent_encode(c, src, n, enc, ent_bound(n), 3, ENT_HINT_EXPONENT, &got);
    CHECK(got == ENT_RANS0T, "i.i.d. plane: selector chose %s (%zu bytes)", ent_codec_name(got), len);
    CHECK(strcmp(ent_codec_name(ENT_RANSCTX), "ransctx") == 0 && ent_codec_known(ENT_RANSCTX), "registry row");
    free(src);
    free(enc);
    free(dec);
}

/* Sizes predicted without coding (rans0_size; codec 8's full estimate) are what the
 * encoders write, to the states' few bytes; the selector codes only the smaller of the
 * two, so on every kind of plane it must land on the smaller forced size (to 32 bytes:
 * the final states' bytes vary by some tens between the two). */
static void test_choice(ent_ctx *c)
{
    static const size_t sizes[] = {65536, 100003, 262147, 1 << 20};
    size_t nmax = 1 << 20;
    uint8_t *src = malloc(nmax), *enc = malloc(ent_bound(nmax));
    int picked8 = 0, picked0 = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int d = D_SKEW; d < D_COUNT; d++) {
            size_t n = sizes[si];
            fill(src, n, d);
            uint32_t h[256];
            ent_histogram(src, n, h);
            uint8_t got;
            double p8 = ent_codec_get(ENT_RANSCTX)->estimate(c, src, n, h, 0);
            size_t l8 = ent_codec_get(ENT_RANSCTX)->encode(c, src, n, enc, ent_bound(n), 3);
            double p0 = rans0_plan(c, src, n, 3) < 1e300 ? rans0_size(c, src, n) : 1e300;
            size_t l0 = rans0_encode(c, src, n, enc, ent_bound(n), 3);
            CHECK(l8 && (double)l8 <= p8 + 16 && (double)l8 >= p8 - 4 * RC_N,
                  "%s n=%zu: codec 8 predicted %.0f, wrote %zu", dname[d], n, p8, l8);
            CHECK(l0 && (double)l0 <= p0 + 16 && (double)l0 >= p0 - 4 * RANS0_NMAX,
                  "%s n=%zu: order 0 predicted %.0f, wrote %zu", dname[d], n, p0, l0);
            size_t len = ent_encode(c, src, n, enc, ent_bound(n), 3, ENT_HINT_EXPONENT, &got);
            size_t want = l8 < l0 ? l8 : l0;
            CHECK(len <= want + 32 && (got == ENT_RANSCTX || got == ENT_RANS0T),
                  "%s n=%zu: selector wrote %zu (%s), forced: codec 8 %zu, order 0 %zu", dname[d], n, len,
                  ent_codec_name(got), l8, l0);
            picked8 += got == ENT_RANSCTX;
            picked0 += got == ENT_RANS0T;
        }
    CHECK(picked8 >= 4 && picked0 >= 4, "selector: codec 8 on %d planes, order 0 on %d", picked8, picked0);
    free(src);
    free(enc);
}

static void test_hostile(ent_ctx *c)
{
    size_t n = 50001;
    uint8_t *src = malloc(n), *enc = malloc(ent_bound(n) + 64), *bad = malloc(ent_bound(n) + 64);
    uint8_t *a = malloc(n), *b = malloc(n);
    fill(src, n, D_WALK);
    (void)ctx_hostile(c, src, n, enc, bad, a, b);
    /* Hand-made: m, K = 1, table `7C 7D FF 1F` (f[0x7C] = 4095, f[0x7D] = 1), 64 states
     * of 2^16 and no words: the first symbol of each state leaves 4095·16 < 2^16, whose
     * refill finds no word. */
    static uint8_t h[2 + 4 + 256];
    h[0] = 0x7c;
    h[1] = 1;
    h[2] = 0x7c;
    h[3] = 0x7d;
    h[4] = 0xff;
    h[5] = 0x1f;
    for (int j = 0; j < 64; j++) h[6 + 4 * j + 2] = 1; /* 00 00 01 00 */
    CHECK(decode_all(c, h, sizeof h, 64, a, b, "no words") == -1, "a stream without its words accepted");
    h[8] = 0; /* state 0 = 0 < 2^16 */
    CHECK(decode_all(c, h, sizeof h, 64, a, b, "low state") == -1, "a state below 2^16 accepted");
    h[4] = 0x80, h[5] = 0x00; /* non-canonical varint */
    CHECK(decode_all(c, h, sizeof h, 64, a, b, "table") == -1, "a bad table accepted");
    free(src);
    free(enc);
    free(bad);
    free(a);
    free(b);
}

/* The estimate's pair count (rans_ctx_avx512.c's vector count beside the scalar loop):
 * on planes whose mode sits low (the bucket window starts below 0), in the middle and
 * high (it reaches past 255), at sizes that leave tails, both the whole count (forced
 * codec 8) and the sampled one (the selector's pieces) must give every level the scalar
 * level's bytes: a pair counted in the wrong bucket changes the tables written. */
static void test_pair_count(ent_ctx *c)
{
    static const size_t sizes[] = {4097, 65599, 262147};
    static const int shift[] = {-0x7a, -0x6c, 0, 0x68, 0x80};
    size_t nmax = 262147;
    uint8_t *src = malloc(nmax), *enc[3];
    for (int k = 0; k < 3; k++) enc[k] = malloc(ent_bound(nmax));
    int coded = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t h = 0; h < sizeof shift / sizeof *shift; h++) {
            size_t n = sizes[si];
            fill(src, n, D_WALK);
            for (size_t i = 0; i < n; i++) {
                int v = src[i] + shift[h];
                src[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
            for (int sel = 0; sel < 2; sel++) {
                size_t len[3];
                uint8_t got[3];
                for (int k = 3; k-- > 0;) {
                    force_isa(isa[k]);
                    len[k] = sel ? ent_encode(c, src, n, enc[k], ent_bound(n), 3, ENT_HINT_EXPONENT, &got[k])
                                 : ent_encode_with(c, ENT_RANSCTX, src, n, enc[k], ent_bound(n), 3, &got[k]);
                    top_isa();
                }
                for (int k = 1; k < 3; k++)
                    CHECK(len[k] == len[0] && got[k] == got[0] && !memcmp(enc[k], enc[0], len[0]),
                          "walk%+d n=%zu %s: %s level writes other bytes (%zu, codec %u) than scalar (%zu, codec %u)",
                          shift[h], n, sel ? "selector" : "codec 8", isa[k], len[k], got[k], len[0], got[0]);
                coded += got[0] == ENT_RANSCTX;
            }
        }
    CHECK(coded >= 20, "only %d of 30 planes coded with codec 8", coded);
    free(src);
    for (int k = 0; k < 3; k++) free(enc[k]);
}

/* The sampled estimate (rc_sample: the pairs of the first KiB of every 16, scaled to the
 * plane) against the full count of the same plane: the entropy of a sample's 16 thin
 * tables runs low, which rc_est_sampled adds back, so that a gate on it does not pass
 * planes whose contexts only seem to help. On 64 KiB planes of a wide walk (~100 values,
 * each byte near the one 16 back) the mean of sampled / full over eight planes must be
 * within 2.2% of 1 (0.971 without the correction, 0.989 with it). */
static void test_sample_bias(ent_ctx *c)
{
    size_t n = 1 << 16;
    uint8_t *b = malloc(n);
    uint32_t h[256];
    double sum = 0;
    rng = RND_SEED; /* the same planes whatever ran before */
    for (int rep = 0; rep < 8; rep++) {
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd();
            int prev = i >= 16 ? b[i - 16] : 0x7c;
            int v = prev + (int)(r % 41) - 20 + (prev < 0x70) - (prev > 0x88);
            b[i] = r % 16 == 0 ? (uint8_t)(0x60 + r % 48) : (uint8_t)v;
        }
        ent_histogram(b, n, h);
        double e = rc_sample(c, b, n, h), full = rc_estimate(c, b, n, h, 0);
        sum += e / full;
    }
    CHECK(sum / 8 > 0.978 && sum / 8 < 1.022, "sampled estimate / full count: mean %.4f over 8 planes", sum / 8);
    free(b);
}

int main(void)
{
    ent_ctx *c = ent_ctx_create();
    if (!c) return 1;
    test_roundtrips(c);
    test_selector(c);
    test_choice(c);
    test_pair_count(c);
    test_sample_bias(c);
    test_hostile(c);
    ent_ctx_free(c);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_rans_ctx: all passed (top vector level: %s)\n", cpu_level_name(top_isa()));
    return 0;
}
