/* test_rans_ctxm.c — rANS with a round's mean as context (codec 10, lib/entropy/rans_ctxm*.c).
 *
 * Round trips of random, skewed, mean-following and all-256 planes at every size around
 * the codec's group and round boundaries, coded at every vector level: the encoders
 * must write the same bytes, and every decoder must decode every encoding (and refuse a
 * size one short). The selector must pick codec 10 for an exponent plane whose rounds
 * follow the previous round's mean from level 3 on (codec 8 below), smaller than codec
 * 8 and order 0 forced, and the size its estimate predicts is what the encoder writes.
 * Hostile input: every truncation, a byte left over, K out of range, bit flips (most
 * caught) and garbage, where the three decoders must agree on status and bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entropy/rans_ctxm.h"
#define CTX_CODEC ENT_RANSCTXM
#include "ctx_check.h"

enum { D_RANDOM, D_SKEW, D_MEAN, D_ALL256, D_WALK, D_COUNT };
static const char *const dname[D_COUNT] = {"random", "skewed", "mean", "all256", "walk"};

/* D_MEAN: each aligned 16 bytes scatter (-3..+3) around a level that drifts from the
 * previous 16's mean, as a row of float exponents scatters around its scale. D_WALK:
 * test_rans_ctx.c's, where codec 8's context predicts and the mean does not. */
static void fill(uint8_t *b, size_t n, int d)
{
    int level = 0x7c;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd();
        switch (d) {
        case D_RANDOM: b[i] = (uint8_t)r; break;
        case D_SKEW: b[i] = (uint8_t)(0x70 + __builtin_ctz(r | 0x10000)); break;
        case D_MEAN:
            if (i % 16 == 0 && i >= 16) {
                level = (int)rm_mean16(b + i - 16) + (int)(r % 3) - 1;
                level += (level < 0x70) - (level > 0x88);
            }
            b[i] = (uint8_t)(level + (int)((r >> 4) % 7) - 3);
            break;
        case D_ALL256: b[i] = (uint8_t)(i < 256 ? i : r % 3 ? 0x7e : r >> 8); break;
        case D_WALK: { /* each byte follows the one 16 back (codec 8's context), not the mean */
            int prev = i >= 16 ? b[i - 16] : 0x7c;
            int v = prev + (int)(r % 5) - 2 + (prev < 0x70) - (prev > 0x88);
            b[i] = r % 16 == 0 ? (uint8_t)(0x60 + r % 48) : (uint8_t)v;
            break;
        }
        }
    }
}

static void test_roundtrips(ent_ctx *c)
{
    static const size_t sizes[] = {0,   1,    15,   16,   63,    64,    65,    79,     80,     127,    128,
                                   129, 1000, 4095, 4097, 16383, 65536, 65599, 100003, 131072, 262147, 1 << 20};
    int coded = ctx_roundtrips(c, sizes, sizeof sizes / sizeof *sizes, fill, dname, D_COUNT);
    CHECK(coded >= 24, "only %d planes coded with codec 10", coded);
}

/* The selector codes a mean-following exponent plane with codec 10 from level 3 on,
 * smaller than codec 8 and order 0 forced (below, with codec 8); its estimate is what
 * the encoder writes. */
static void test_selector(ent_ctx *c)
{
    size_t n = 1 << 20;
    uint8_t *src = malloc(n), *enc = malloc(ent_bound(n)), *dec = malloc(n);
    fill(src, n, D_MEAN);
    uint8_t got;
    size_t l0 = ent_encode_with(c, ENT_RANS0T, src, n, enc, ent_bound(n), 3, &got);
    size_t l8 = ent_encode_with(c, ENT_RANSCTX, src, n, enc, ent_bound(n), 3, &got);
    uint32_t h[256];
    ent_histogram(src, n, h);
    double p10 = ent_codec_get(ENT_RANSCTXM)->estimate(c, src, n, h, 0);
    size_t l10 = ent_codec_get(ENT_RANSCTXM)->encode(c, src, n, enc, ent_bound(n), 3);
    CHECK(l10 && (double)l10 <= p10 + 16 && (double)l10 >= p10 - 4 * RC_N, "codec 10 predicted %.0f, wrote %zu", p10,
          l10);
    for (int level = 1; level <= 9; level++) {
        size_t len = ent_encode(c, src, n, enc, ent_bound(n), level, ENT_HINT_EXPONENT, &got);
        if (level == 1) /* the fast level: order 0 alone (select.c, ENT_CTX_MIN_LEVEL) */
            CHECK(got == ENT_RANS0T && len > l8, "level 1: selector chose %s, %zu bytes (codec 8 %zu)",
                  ent_codec_name(got), len, l8);
        else if (level < 3) /* codec 10 from level 3 on (select.c, ENT_MEAN_MIN_LEVEL) */
            CHECK(got == ENT_RANSCTX && len == l8, "level %d: selector chose %s, %zu bytes (codec 8 %zu)", level,
                  ent_codec_name(got), len, l8);
        else
            CHECK(got == ENT_RANSCTXM && len < l8 && len < l0,
                  "level %d: selector chose %s, %zu bytes (codec 8 %zu, 0 %zu)", level, ent_codec_name(got), len, l8,
                  l0);
        CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && !memcmp(dec, src, n), "level %d: round trip", level);
    }
    /* Not where the rounds do not follow their means (i.i.d. bytes: order 0). */
    fill(src, n, D_SKEW);
    size_t len = ent_encode(c, src, n, enc, ent_bound(n), 3, ENT_HINT_EXPONENT, &got);
    CHECK(got == ENT_RANS0T, "i.i.d. plane: selector chose %s (%zu bytes)", ent_codec_name(got), len);
    CHECK(strcmp(ent_codec_name(ENT_RANSCTXM), "ransmean") == 0 && ent_codec_known(ENT_RANSCTXM), "registry row");
    free(src);
    free(enc);
    free(dec);
}

/* The selector's choice between the context coders from one sample (select.c) against
 * the full estimates. A sampled estimate's stages count every round once: where it goes
 * through, its size and the bytes coded after it are the full count's (a round counted
 * twice or missed changes the tables). On planes where one of order 0, codec 8 and codec
 * 10, each forced, is smaller than the others by 1% (order 0: at all), the selector at
 * level 3 codes that one (the context coders byte for byte as forced). */
static void test_pick(ent_ctx *c)
{
    static const size_t sizes[] = {65536, 65599, 100003, 262147, 1 << 20};
    static const uint8_t ids[3] = {ENT_RANS0T, ENT_RANSCTX, ENT_RANSCTXM};
    static const int kinds[] = {D_SKEW, D_MEAN, D_ALL256, D_WALK};
    size_t nmax = 1 << 20;
    uint8_t *src = malloc(nmax), *enc[4], *sel = malloc(ent_bound(nmax));
    for (int k = 0; k < 4; k++) enc[k] = malloc(ent_bound(nmax));
    const ent_codec_desc *cm = ent_codec_get(ENT_RANSCTXM);
    int sampled = 0, picked[3] = {0, 0, 0};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t di = 0; di < sizeof kinds / sizeof *kinds; di++) {
            size_t n = sizes[si], len[3];
            int d = kinds[di];
            fill(src, n, d);
            uint32_t h[256];
            ent_histogram(src, n, h);
            double full = cm->estimate(c, src, n, h, 0);
            size_t lf = cm->encode(c, src, n, enc[3], ent_bound(n), 3);
            CHECK(lf && (double)lf <= full + 16 && (double)lf >= full - 4 * RC_N,
                  "%s n=%zu: codec 10 predicted %.0f, wrote %zu", dname[d], n, full, lf);
            c->est_bar = 0;
            double part = cm->estimate(c, src, n, h, 1);
            if (part < 1e300) {
                size_t ls = cm->encode(c, src, n, sel, ent_bound(n), 3);
                CHECK(part == full && ls == lf && !memcmp(sel, enc[3], lf),
                      "%s n=%zu: sampled estimate %.1f (%zu bytes), full %.1f (%zu bytes)", dname[d], n, part, ls, full,
                      lf);
                sampled++;
            }
            uint8_t got;
            for (int k = 0; k < 3; k++) len[k] = ent_encode_with(c, ids[k], src, n, enc[k], ent_bound(n), 3, &got);
            size_t ls = ent_encode(c, src, n, sel, ent_bound(n), 3, ENT_HINT_EXPONENT, &got);
            int best = 0;
            for (int k = 1; k < 3; k++) best = len[k] < len[best] ? k : best;
            int clear = 1;
            for (int k = 0; k < 3; k++) clear &= k == best || best == 0 || (double)len[best] * 1.01 < (double)len[k];
            if (!clear) continue;
            picked[best]++;
            CHECK(got == ids[best] && (best == 0 ? ls <= len[0] + 32 : ls == len[best] && !memcmp(sel, enc[best], ls)),
                  "%s n=%zu: selector chose %s (%zu bytes); forced: order 0 %zu, codec 8 %zu, codec 10 %zu", dname[d],
                  n, ent_codec_name(got), ls, len[0], len[1], len[2]);
        }
    CHECK(sampled >= 5 && picked[0] >= 3 && picked[1] >= 3 && picked[2] >= 3,
          "sampled estimates gone through: %d; clear choices: order 0 %d, codec 8 %d, codec 10 %d", sampled, picked[0],
          picked[1], picked[2]);
    free(src);
    free(sel);
    for (int k = 0; k < 4; k++) free(enc[k]);
}

static void test_hostile(ent_ctx *c)
{
    size_t n = 50001;
    uint8_t *src = malloc(n), *enc = malloc(ent_bound(n) + 64), *bad = malloc(ent_bound(n) + 64);
    uint8_t *a = malloc(n), *b = malloc(n);
    fill(src, n, D_MEAN);
    (void)ctx_hostile(c, src, n, enc, bad, a, b);
    free(src);
    free(enc);
    free(bad);
    free(a);
    free(b);
}

int main(void)
{
    ent_ctx *c = ent_ctx_create();
    if (!c) return 1;
    test_roundtrips(c);
    test_selector(c);
    test_pick(c);
    test_hostile(c);
    ent_ctx_free(c);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_rans_ctxm: all passed (top vector level: %s)\n", cpu_level_name(top_isa()));
    return 0;
}
