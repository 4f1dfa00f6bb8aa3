/* test_rans_small.c — codec 9 (order-0 rANS for small planes, lib/entropy/rans0.c with
 * the compact tables of rans_ctab.c): the selector writes it for order-0 planes below
 * RANS0S_MAX (4 KiB) and codec 2 above; it codes a small tensor's part of a mixed plane that codec 2
 * must store; its tables read back to the frequencies the encoder used and every
 * malformed one is refused; codec 2 and codec 9 refuse each other's streams. Round
 * trips, truncations and bit flips of codec 9 at every size: test_entropy.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entropy/ent_internal.h"

#define RND_SEED 0x2545F4914F6CDD1Dull
#include "ent_check.h"

/* A small tensor's bytes (a bell of ~20 values) then random ones: the planes of a chunk
 * of small tensors (a norm's weights beside biases). */
static void mixed(uint8_t *b, size_t n, size_t skewed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = i < skewed ? (uint8_t)(0x70 + rnd() % 5 + rnd() % 5 + rnd() % 5) : (uint8_t)rnd();
}

static size_t code(ent_ctx *c, uint8_t want, const uint8_t *src, size_t n, uint8_t *enc, uint8_t *got)
{
    return ent_encode_with(c, want, src, n, enc, ent_bound(n), 3, got);
}

static void test_selector(ent_ctx *c)
{
    static uint8_t b[40000], enc[40016], dec[40000];
    static const size_t sizes[] = {300, 1152, RANS0S_MAX - 1, RANS0S_MAX, 40000};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        mixed(b, n, n); /* all skewed: an order-0 plane */
        uint8_t got;
        size_t len = ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_EXPONENT, &got);
        uint8_t want = n < RANS0S_MAX ? ENT_RANS0S : ENT_RANS0T;
        CHECK(got == want, "n=%zu: selector wrote %s, not %s", n, ent_codec_name(got), ent_codec_name(want));
        CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && !memcmp(dec, b, n), "n=%zu: round trip", n);
        if (got == ENT_RANS0S) { /* against codec 2: 112 bytes of states, less some precision */
            uint8_t g2;
            size_t l2 = code(c, ENT_RANS0, b, n, dec, &g2);
            CHECK(g2 == ENT_RANS0 && len + 80 < l2, "n=%zu: codec 9 %zu bytes, codec 2 %zu", n, len, l2);
        }
    }
    /* a norm's 384 values beside 768 random bytes: codec 2 cannot beat storing them */
    size_t n = 1152;
    mixed(b, n, 384);
    uint8_t got, g2;
    size_t len = ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_MANTISSA, &got);
    size_t l2 = code(c, ENT_RANS0, b, n, dec, &g2);
    CHECK(got == ENT_RANS0S && len + 150 < n, "mixed plane: %s %zu bytes of %zu", ent_codec_name(got), len, n);
    CHECK(g2 == ENT_STORED, "mixed plane: codec 2 coded it (%zu bytes): the test needs a harder plane", l2);
    CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && !memcmp(dec, b, n), "mixed plane: round trip");
    /* each refuses the other's stream (the lane count) */
    CHECK(ent_decode(c, ENT_RANS0, enc, len, dec, n) == -1, "codec 2 decoded a codec 9 stream");
    mixed(b, 5000, 5000);
    len = code(c, ENT_RANS0, b, 5000, enc, &got);
    CHECK(got == ENT_RANS0 && ent_decode(c, ENT_RANS0S, enc, len, dec, 5000) == -1, "codec 9 decoded codec 2's");
    CHECK(strcmp(ent_codec_name(ENT_RANS0S), "rans0s") == 0 && ent_codec_known(ENT_RANS0S), "registry row");
}

/* The decoder builds each segment's table at its own precision 2^s (4096 entries for a
 * uniform table, s = 0) and adds the slot's low bits in its step: planes of several sizes
 * and spreads, coded as codec 9, decode at every precision the encoder chose, and those
 * precisions are several (the first segment's s read from its table's third byte). */
static void test_precisions(ent_ctx *c)
{
    static uint8_t b[4000], enc[4016], dec[4000];
    static const size_t sizes[] = {40, 130, 300, 1000, 3000, 3999};
    unsigned seen = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (unsigned spread = 1; spread <= 256; spread *= 4) {
            size_t n = sizes[k];
            for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t)(0x40 + rnd() % spread + (rnd() % 3 == 0 ? rnd() % spread : 0));
            uint8_t got;
            size_t len = code(c, ENT_RANS0S, b, n, enc, &got);
            if (got != ENT_RANS0S) continue;
            CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && !memcmp(dec, b, n), "n=%zu spread %u: round trip", n,
                  spread);
            if (enc[2] < 0x80) seen |= 1u << (enc[5] & 15); /* one-byte block count */
        }
    CHECK(__builtin_popcount(seen) >= 5 && (seen & 1), "precisions written: mask %#x", seen);
}

/* Counts of a few shapes: a bell, one value, two, uniform over a range, all 256, sparse. */
static void counts(uint32_t *cnt, int shape)
{
    memset(cnt, 0, 256 * sizeof *cnt);
    size_t n = 10 + rnd() % 20000;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        switch (shape) {
        case 0: v = 100 + rnd() % 9 + rnd() % 9; break;
        case 1: v = 77; break;
        case 2: v = rnd() % 2 ? 3 : 250; break;
        case 3: v = 16 + rnd() % 16; break;
        case 4: v = rnd() & 255; break;
        default: v = rnd() % 7 ? 0 : rnd() & 255; break;
        }
        cnt[v]++;
    }
}

static void test_tables(void)
{
    uint8_t t[RANS_CTAB_MAX + 8], bad[RANS_CTAB_MAX + 8];
    uint16_t f[256], g[256];
    for (int round = 0; round < 600; round++) {
        uint32_t cnt[256];
        counts(cnt, round % 6);
        size_t len = rans_ctab_write(cnt, f, t);
        CHECK(len >= 3 && len <= RANS_CTAB_MAX, "shape %d: table of %zu bytes", round % 6, len);
        uint32_t sum = 0;
        for (int v = 0; v < 256; v++) {
            sum += f[v];
            CHECK(!cnt[v] || f[v], "shape %d: value %d counted but given no frequency", round % 6, v);
        }
        CHECK(sum == RANS_M, "shape %d: frequencies add up to %u", round % 6, sum);
        const uint8_t *p = t;
        CHECK(rans_ctab_read(&p, t + len, g) == 0 && p == t + len && !memcmp(f, g, sizeof f),
              "shape %d: the table does not read back (%zu bytes)", round % 6, len);
        p = t;
        CHECK(rans_ctab_read(&p, t + len - 1, g) == -1, "shape %d: truncated table accepted", round % 6);
        /* any one bit flipped: refused, or a table that still adds up */
        for (size_t bit = 0; bit < 8 * len; bit++) {
            memcpy(bad, t, len);
            bad[bit >> 3] ^= (uint8_t)(1u << (bit & 7));
            p = bad;
            if (rans_ctab_read(&p, bad + len, g)) continue;
            sum = 0;
            for (int v = 0; v < 256; v++) sum += g[v];
            CHECK(sum == RANS_M && g[bad[0]] && p <= bad + len, "shape %d: flipped bit %zu gives a bad table",
                  round % 6, bit);
        }
    }
    /* hand-made: uniform [16, 31]; then every rule of the format broken once */
    static const uint8_t uni[] = {16, 31, 0};
    const uint8_t *p = uni;
    CHECK(rans_ctab_read(&p, uni + 3, g) == 0 && g[16] == 256 && g[31] == 256 && g[15] == 0 && g[32] == 0,
          "uniform table");
    static const uint8_t rules[][5] = {
        {31, 16, 0},          /* lo > hi */
        {16, 16, 0},          /* lo = hi */
        {16, 31, 13},         /* s > 12 */
        {16, 31, 0x10},       /* s = 0 with k = 1 */
        {16, 31, 0x32},       /* k > s */
        {1, 2, 0x01, 0x03},   /* s = 1: g[1] = 2 = 2^s: nothing left for hi */
        {1, 2, 0x02, 0x00},   /* s = 2: g[1] = 0 (lo absent) */
        {1, 2, 0x02, 0x09},   /* s = 2: g[1] = 1, padding bits not zero */
        {1, 2, 0x02, 0xff},   /* a run of ones past 2^s */
        {1, 4, 0x33, 0x02},   /* s = 3, k = 3: the bit string ends before g[3] */
    };
    static const size_t rlen[] = {3, 3, 3, 3, 3, 4, 4, 4, 4, 4};
    for (size_t k = 0; k < sizeof rlen / sizeof *rlen; k++) {
        p = rules[k];
        CHECK(rans_ctab_read(&p, rules[k] + rlen[k], g) == -1, "malformed table %zu accepted", k);
    }
    static const uint8_t ok[] = {1, 2, 0x02, 0x01}; /* g[1] = 1 ("10" with k = 0): f 1024 and 3072 */
    p = ok;
    CHECK(rans_ctab_read(&p, ok + 4, g) == 0 && g[1] == 1024 && g[2] == 3072, "minimal table refused");
}

int main(void)
{
    ent_ctx *c = ent_ctx_create();
    if (!c) return 1;
    test_selector(c);
    test_precisions(c);
    test_tables();
    ent_ctx_free(c);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_rans_small: ok\n");
    return 0;
}
