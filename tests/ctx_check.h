/* ctx_check.h — what the tests of the context codecs (test_rans_ctx.c: codec 8,
 * test_rans_ctxm.c: codec 10) share: coding and decoding one plane at a vector level,
 * every decoder agreeing with the scalar one, and the hostile inputs both codecs must
 * refuse. CTX_CODEC, defined before the include, names the codec. */
#ifndef CKPZ_TEST_CTX_CHECK_H
#define CKPZ_TEST_CTX_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "ent_check.h"
#include "entropy/ent_internal.h"
#include "entropy/entropy.h"
#include "isa.h"

static const char *const isa[3] = {"scalar", "avx2", "avx512"};

static inline size_t code_at(ent_ctx *c, int level, const uint8_t *src, size_t n, uint8_t *dst, uint8_t *got)
{
    force_isa(isa[level]);
    size_t len = ent_encode_with(c, CTX_CODEC, src, n, dst, ent_bound(n), 3, got);
    top_isa();
    return len;
}

static inline int decode_at(ent_ctx *c, int level, const uint8_t *src, size_t len, uint8_t *dst, size_t n)
{
    force_isa(isa[level]);
    int r = ent_decode(c, CTX_CODEC, src, len, dst, n);
    top_isa();
    return r;
}

/* The plane src (n bytes) coded at every level, the vector encoders first (nothing the
 * scalar one leaves behind may help them): the same bytes from all, CTX_CODEC or stored,
 * no longer than n; coded, every decoder must give src back (and not write past n) and
 * refuse n - 1. enc: three buffers of ent_bound(n), dec: n + 1 bytes; what names the
 * plane. Returns whether the codec took it. */
static inline int ctx_roundtrip(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *const *enc, uint8_t *dec,
                                const char *what)
{
    size_t len[3];
    uint8_t got[3];
    for (int k = 3; k-- > 0;) len[k] = code_at(c, k, src, n, enc[k], &got[k]);
    for (int k = 1; k < 3; k++)
        CHECK(len[k] == len[0] && got[k] == got[0] && !memcmp(enc[k], enc[0], len[0]),
              "%s n=%zu: %s encoder writes other bytes than the scalar one", what, n, isa[k]);
    CHECK(got[0] == CTX_CODEC || got[0] == ENT_STORED, "%s n=%zu: got codec %u", what, n, got[0]);
    CHECK(len[0] <= n, "%s n=%zu: %zu bytes", what, n, len[0]);
    if (got[0] != CTX_CODEC) return 0;
    for (int k = 0; k < 3; k++) {
        memset(dec, 0xa5, n + 1);
        int r = decode_at(c, k, enc[0], len[0], dec, n);
        CHECK(r == 0 && !memcmp(dec, src, n) && dec[n] == 0xa5, "%s n=%zu: %s decoder: r=%d or wrong bytes", what, n,
              isa[k], r);
        CHECK(decode_at(c, k, enc[0], len[0], dec, n - 1) == -1, "%s n=%zu: accepted n-1", what, n);
    }
    return 1;
}

/* ctx_roundtrip of every plane fill(., n, d) gives, d < nd (names[d] naming it), at each of
 * the sizes (the largest last): how many of them the codec took. */
static inline int ctx_roundtrips(ent_ctx *c, const size_t *sizes, size_t nsizes, void (*fill)(uint8_t *, size_t, int),
                                 const char *const *names, int nd)
{
    size_t nmax = sizes[nsizes - 1];
    uint8_t *src = malloc(nmax), *enc[3], *dec = malloc(nmax + 1);
    for (int k = 0; k < 3; k++) enc[k] = malloc(ent_bound(nmax));
    int coded = 0;
    for (size_t si = 0; si < nsizes; si++) {
        for (int d = 0; d < nd; d++) {
            fill(src, sizes[si], d);
            coded += ctx_roundtrip(c, src, sizes[si], enc, dec, names[d]);
        }
    }
    free(src);
    free(dec);
    for (int k = 0; k < 3; k++) free(enc[k]);
    return coded;
}

/* Every decoder must agree with the scalar one on status and bytes. */
static inline int decode_all(ent_ctx *c, const uint8_t *src, size_t len, size_t n, uint8_t *a, uint8_t *b,
                             const char *what)
{
    memset(a, 1, n);
    int r0 = decode_at(c, 0, src, len, a, n);
    for (int k = 1; k < 3; k++) {
        memset(b, 2, n);
        int r = decode_at(c, k, src, len, b, n);
        CHECK(r == r0 && (r || !memcmp(a, b, n)), "%s: %s decoder says %d, scalar %d (or other bytes)", what, isa[k], r,
              r0);
    }
    return r0;
}

/* The plane src (n bytes, which the codec must take) coded into enc (ent_bound(n) + 64
 * bytes), then refused: every truncation, a byte left over, n below 64, K out of range,
 * bit flips (most caught) and garbage. bad: ent_bound(n) + 64 bytes; a, b: n. Returns
 * the coded length. */
static inline size_t ctx_hostile(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *enc, uint8_t *bad, uint8_t *a,
                                 uint8_t *b)
{
    uint8_t got;
    size_t len = ent_encode_with(c, CTX_CODEC, src, n, enc, ent_bound(n), 3, &got);
    CHECK(got == CTX_CODEC, "hostile: plane not coded");
    CHECK(decode_all(c, enc, len, n, a, b, "valid") == 0 && !memcmp(a, src, n), "valid plane rejected");
    for (size_t cut = 0; cut < len; cut += 1 + cut / 32)
        CHECK(decode_all(c, enc, cut, n, a, b, "truncated") == -1, "truncated to %zu of %zu accepted", cut, len);
    memcpy(bad, enc, len);
    bad[len] = 0;
    CHECK(decode_all(c, bad, len + 1, n, a, b, "extra byte") == -1, "a byte left over accepted");
    CHECK(decode_all(c, enc, len, 63, a, b, "n=63") == -1, "n below 64 accepted");
    for (unsigned K = 0; K < 256; K += K < 20 ? 1 : 37) {
        memcpy(bad, enc, len);
        bad[1] = (uint8_t)K;
        int r = decode_all(c, bad, len, n, a, b, "K");
        CHECK(K != 0 && K <= 16 ? 1 : r == -1, "K=%u accepted", K);
    }
    int caught = 0, tries = 0;
    for (size_t pos = 0; pos < len; pos += 1 + pos / 50, tries++) {
        memcpy(bad, enc, len);
        bad[pos] ^= (uint8_t)(1u << (rnd() & 7));
        caught += decode_all(c, bad, len, n, a, b, "bit flip") == -1;
    }
    CHECK(caught * 4 >= tries * 3, "only %d of %d bit flips caught", caught, tries);
    for (int t = 0; t < 400; t++) {
        size_t gl = rnd() % (len + 64);
        for (size_t i = 0; i < gl; i++) bad[i] = (uint8_t)rnd();
        if (t & 1) memcpy(bad, enc, gl < len / 2 ? gl : len / 2); /* valid header, garbage after */
        (void)decode_all(c, bad, gl, n, a, b, "garbage");
    }
    return len;
}

#endif
