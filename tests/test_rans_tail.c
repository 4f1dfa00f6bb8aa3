/* test_rans_tail.c — codec 11 (lib/entropy/rans0.c, tables and states in rans_ctab.c):
 * its tables read back to exactly the frequencies written, in both modes, for edge
 * tables (one symbol and its dummy neighbour, all 256 values, skewed, alternating with
 * zeros, the largest frequency), and every malformed table is refused; its packed final
 * states read back for the edge values 2^16 and 2^32 - 1, and truncated or padded ones
 * are refused; its streams code a plane of every size around the lanes' tails smaller
 * than codec 2 does, decode back, and refuse a tail longer than the plane or a lane not
 * ending where the encoder started it. Round trips, truncations and bit flips at more
 * sizes: test_entropy.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entropy/ent_internal.h"

#define RND_SEED 0x3C6EF372FE94F82Bull
#include "ent_check.h"

static void roundtrip_table(const uint16_t *f, const char *what)
{
    uint8_t buf[RANS_DTAB_MAX + 8];
    uint16_t g[256];
    memset(buf, 0xA5, sizeof buf);
    size_t len = rans_dtab_write(f, buf);
    CHECK(len >= 3 && len <= RANS_DTAB_MAX, "%s: table of %zu bytes", what, len);
    const uint8_t *p = buf;
    CHECK(rans_dtab_read(&p, buf + len, g) == 0 && p == buf + len, "%s: table not read back whole", what);
    CHECK(!memcmp(f, g, sizeof g), "%s: frequencies differ after reading", what);
    /* every truncation is refused (the bit string ends inside a value, or the mode bit) */
    for (size_t k = 0; k < len; k++) {
        p = buf;
        CHECK(rans_dtab_read(&p, buf + k, g) == -1, "%s: table cut to %zu of %zu bytes accepted", what, k, len);
    }
    /* trailing bytes are not the table's */
    p = buf;
    CHECK(rans_dtab_read(&p, buf + len + 8, g) == 0 && p == buf + len, "%s: read past its end", what);
}

static void test_tables(void)
{
    uint32_t cnt[256];
    uint16_t f[256];
    memset(cnt, 0, sizeof cnt);
    cnt[77] = 1000; /* one symbol: 4095 and its neighbour's 1 */
    rans_normalize(cnt, f);
    roundtrip_table(f, "one symbol");
    for (int s = 0; s < 256; s++) cnt[s] = 1; /* all 256, equal */
    rans_normalize(cnt, f);
    roundtrip_table(f, "all 256");
    for (int s = 0; s < 256; s++) cnt[s] = 1 + rnd() % 1000; /* all 256, noisy */
    rans_normalize(cnt, f);
    roundtrip_table(f, "all 256 noisy");
    memset(cnt, 0, sizeof cnt);
    for (int s = 100; s < 126; s++) cnt[s] = 1u << (s < 120 ? s - 100 : 2 * (125 - s)); /* exponent-like */
    rans_normalize(cnt, f);
    roundtrip_table(f, "skewed");
    memset(cnt, 0, sizeof cnt);
    for (int s = 0; s < 256; s += 2) cnt[s] = 30 + rnd() % 5; /* even bytes only: mode 1 */
    rans_normalize(cnt, f);
    uint8_t buf[RANS_DTAB_MAX];
    rans_dtab_write(f, buf);
    CHECK(buf[2] & 1, "alternating table not written in mode 1");
    roundtrip_table(f, "alternating");
    memset(f, 0, sizeof f); /* the extremes: 4094 + 1 + 1, with the 1s first and last */
    f[0] = 1, f[128] = 4094, f[255] = 1;
    roundtrip_table(f, "extremes");

    /* malformed: lo >= hi; f[lo] = 0; a sum of 4096; a run too long; padding not zero */
    const uint8_t *p;
    static const uint8_t same[] = {5, 5, 0};
    p = same;
    CHECK(rans_dtab_read(&p, same + sizeof same, f) == -1, "lo == hi accepted");
    /* mode 0, f[lo] = 0: b = 0 is zigzag(-1) = 1 one then a zero */
    static const uint8_t zero_lo[] = {1, 2, 0x02};
    p = zero_lo;
    CHECK(rans_dtab_read(&p, zero_lo + sizeof zero_lo, f) == -1, "f[lo] = 0 accepted");
    /* mode 0, lo = 1, hi = 2, f[1] = 4096: b = 13 is too long a bit length */
    static const uint8_t big[] = {1, 2, 0xFE, 0xFF, 0xFF, 0x01}; /* 24 ones: b = 13 */
    p = big;
    CHECK(rans_dtab_read(&p, big + sizeof big, f) == -1, "bit length 13 accepted");
    /* mode 0, f[1] = 1 ("0": b = 1 = b' + 1, no bits), then a padding bit set */
    static const uint8_t ok[] = {1, 2, 0x00}, pad[] = {1, 2, 0x08};
    p = ok;
    CHECK(rans_dtab_read(&p, ok + sizeof ok, f) == 0 && f[1] == 1 && f[2] == 4095, "minimal table refused");
    p = pad;
    CHECK(rans_dtab_read(&p, pad + sizeof pad, f) == -1, "padding bits accepted");
    /* 30 ones: a run longer than RANS_DTAB_RUN */
    static const uint8_t run[] = {1, 2, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF};
    p = run;
    CHECK(rans_dtab_read(&p, run + sizeof run, f) == -1, "overlong run accepted");
}

static void test_states(void)
{
    uint32_t st[64], back[64];
    uint8_t buf[4 * 64 + 64];
    for (unsigned n = 1; n <= 64; n += n < 4 ? 1 : 29) {
        for (unsigned j = 0; j < n; j++) st[j] = j % 3 == 0 ? RANS_L : j % 3 == 1 ? 0xFFFFFFFFu : RANS_L | rnd();
        size_t len = rans_states_len(st, n);
        memset(buf, 0xA5, sizeof buf);
        rans_states_put(st, n, buf);
        const uint8_t *p = buf;
        CHECK(rans_states_get(&p, buf + len, back, n) == 0 && p == buf + len && !memcmp(st, back, n * 4),
              "%u states not read back", n);
        for (size_t k = 0; k < len; k++) {
            p = buf;
            CHECK(rans_states_get(&p, buf + k, back, n) == -1, "%u states cut to %zu of %zu bytes accepted", n, k, len);
        }
    }
    st[0] = RANS_L; /* 16 bits of 0 below the leading one: two bytes, then padding */
    uint8_t one[3];
    rans_states_put(st, 1, one);
    one[0] |= 0x10; /* the unused nibble */
    const uint8_t *p = one;
    CHECK(rans_states_get(&p, one + 3, back, 1) == -1, "unused nibble accepted");
    st[0] = RANS_L | 1; /* e = 0, then 16 bits: exactly two bytes, no padding to spoil */
    st[1] = 1u << 17;   /* e = 1: 17 bits, then 7 of padding */
    size_t len = rans_states_len(st, 2);
    rans_states_put(st, 2, buf);
    buf[len - 1] |= 0x80;
    p = buf;
    CHECK(rans_states_get(&p, buf + len, back, 2) == -1, "padding bits accepted");
}

/* A plane of exponent-like bytes: the tails hold a few symbols each. */
static void plane(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(120 + rnd() % 3 + rnd() % 3 - (rnd() % 16 == 0) * (rnd() % 9));
}

static void test_streams(ent_ctx *c)
{
    static const size_t sizes[] = {1000, 1001, 4096, 65535, 65536, 65536 + 64 * 3 + 5, 300000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si], cap = ent_bound(n);
        uint8_t *b = malloc(n), *e2 = malloc(cap), *e11 = malloc(cap), *d = malloc(n), g2, g11;
        plane(b, n);
        size_t l2 = ent_encode_with(c, ENT_RANS0, b, n, e2, cap, 3, &g2);
        size_t l11 = ent_encode_with(c, ENT_RANS0T, b, n, e11, cap, 3, &g11);
        CHECK(g11 == ENT_RANS0T && g2 == ENT_RANS0, "n=%zu: codecs %d, %d", n, g2, g11);
        CHECK(l11 < l2, "n=%zu: codec 11 %zu bytes, codec 2 %zu", n, l11, l2);
        CHECK(ent_decode(c, ENT_RANS0T, e11, l11, d, n) == 0 && !memcmp(d, b, n), "n=%zu: codec 11 round trip", n);
        unsigned t = e11[1] >> 3, N = 1u << (e11[1] & 7);
        CHECK(t > 0, "n=%zu: no tail", n);
        /* a tail of more rounds than the plane has is refused */
        uint8_t keep = e11[1];
        e11[1] = (uint8_t)((e11[1] & 7) | (n / N + 1 <= RANS0T_TMAX ? n / N + 1 : 0) << 3);
        if (n / N + 1 <= RANS0T_TMAX)
            CHECK(ent_decode(c, ENT_RANS0T, e11, l11, d, n) == -1, "n=%zu: tail past the plane accepted", n);
        /* one round fewer: the last round's words are missing or a lane ends elsewhere */
        e11[1] = (uint8_t)((keep & 7) | (t - 1) << 3);
        CHECK(ent_decode(c, ENT_RANS0T, e11, l11, d, n) == -1, "n=%zu: a tail one round short accepted", n);
        e11[1] = keep;
        /* codec 2 and codec 11 refuse each other's streams (the lane byte, the states) */
        CHECK(ent_decode(c, ENT_RANS0, e11, l11, d, n) == -1, "n=%zu: codec 2 decoded codec 11's", n);
        CHECK(ent_decode(c, ENT_RANS0T, e2, l2, d, n) == -1, "n=%zu: codec 11 decoded codec 2's", n);
        free(b);
        free(e2);
        free(e11);
        free(d);
    }
}

int main(void)
{
    ent_ctx *c = ent_ctx_create();
    if (!c) return 1;
    test_tables();
    test_states();
    test_streams(c);
    ent_ctx_free(c);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_rans_tail: ok\n");
    return 0;
}
