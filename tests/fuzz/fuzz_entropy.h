/* fuzz_entropy.h — the body of the entropy harnesses (fuzz_rans0.c, fuzz_rans1.c,
 * fuzz_ransctx.c, fuzz_ransmean.c, fuzz_rans0t.c, fuzz_zstd.c: one decoder each; fuzz_entropy.c: ent_decode, the dispatcher of
 * lib/entropy/select.c, stored and constant planes and unknown codec ids included).
 *
 * Input: [codec, fuzz_entropy only] flags, 3 bytes n (little-endian), then the plane
 * payload.
 *   flags bits 0-1: vector loops allowed for the first decode (CKPZ_CPU: 0 scalar,
 *                   1 avx2, 2-3 avx512); the second decode uses another level;
 *   flags bit 7:    encode mode (fuzz_rans0, fuzz_rans0t, fuzz_ransctx, fuzz_ransmean: the coders with vector
 *                   encoders; the others' encoders cost milliseconds per call in fixed work, which
 *                   would starve their decoders): the payload, repeated to n & 0xffff
 *                   bytes if that is longer, or to 64 KiB (the smallest plane coded
 *                   with 64 lanes) when n & 0x1ffff is that or more, is a plane to
 *                   code at the level from bits 2-5, with the scalar loops and with
 *                   AVX2 (bit 0 clear) or AVX-512 (set), then decode (bit 1: with
 *                   AVX-512, else scalar); bit 6 is not used.
 * Decode mode: n % 65537 is the declared size (up to the smallest plane of 64 lanes).
 * Decode mode: the payload is decoded to a declared n bytes into a buffer that ends
 * where they end (fz_take; ASan: a write past n), and again, at another vector level into a buffer prefilled
 * differently, when the first decode succeeded (always for rANS order 0, whose
 * decoder has vector loops). Both decodes must agree on success or failure, and on
 * success on every byte (a byte left unwritten or a path-dependent result shows as a
 * difference). Stored and constant planes must decode exactly as specified.
 * Encode mode: the coded size stays within ent_bound, the vector loops write the same
 * bytes as the scalar ones (ent_internal.h), and the plane decodes back exactly.
 * Levels are set through CKPZ_CPU (tests/isa.h), as the unit tests do.
 */
#ifndef CKPZ_FUZZ_ENTROPY_H
#define CKPZ_FUZZ_ENTROPY_H

#include "../isa.h"
#include "entropy/ent_internal.h"
#include "fuzz_util.h"

static const char *const fz_isa[3] = {"scalar", "avx2", "avx512"};

typedef int (*fz_dec_fn)(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);

static ent_ctx *fz_ec; /* kept between inputs, as a worker keeps its context */

static inline ent_ctx *fz_ent_ctx(void)
{
    if (!fz_ec && !(fz_ec = ent_ctx_create())) fz_die("ent_ctx_create failed");
    return fz_ec;
}

/* Decodes with codec (dispatcher: dec == NULL) or dec, at vector level simd. */
static inline int fz_decode(fz_dec_fn dec, uint8_t codec, int simd, const uint8_t *src, size_t srclen, uint8_t *dst,
                            size_t n)
{
    force_isa(fz_isa[simd]);
    int r = dec ? dec(fz_ent_ctx(), src, srclen, dst, n) : ent_decode(fz_ent_ctx(), codec, src, srclen, dst, n);
    top_isa();
    FZ_CHECK(r == 0 || r == -1, "%s decoder returned %d", ent_codec_name(codec), r);
    return r;
}

static inline void fz_entropy_decode(fz_dec_fn dec, uint8_t codec, unsigned flags, const uint8_t *src, size_t srclen,
                                     size_t n)
{
    const char *name = ent_codec_name(codec);
    int s1 = (int)(flags & 3) > 2 ? 2 : (int)(flags & 3), s2 = (s1 + 1) % 3;
    static fz_buf bin, ba, bb;
    uint8_t *in = fz_take_copy(&bin, src, srclen), *a = fz_take(&ba, n), *b = fz_take(&bb, n);
    fz_fill(a, n, 1);
    fz_fill(b, n, 2);
    int r1 = fz_decode(dec, codec, s1, in, srclen, a, n);
    /* a second decode where the first succeeded, or (rANS order 0, codecs 8, 10 and 11:
     * vector loops) always */
    int r2 = r1 == 0 || codec == ENT_RANS0 || codec == ENT_RANSCTX || codec == ENT_RANSCTXM || codec == ENT_RANS0T
                 ? fz_decode(dec, codec, s2, in, srclen, b, n)
                 : r1;
    FZ_CHECK(r1 == r2, "%s: %zu bytes into %zu: vector level %d says %d, level %d says %d", name, srclen, n, s1, r1, s2,
             r2);
    if (r1 == 0 && memcmp(a, b, n)) {
        size_t k = 0;
        while (a[k] == b[k]) k++;
        fz_die("%s: two decodes of the same %zu bytes differ at byte %zu of %zu (unwritten or path-dependent)", name,
               srclen, k, n);
    }
    if (!dec) { /* the dispatcher's own codecs are fully specified */
        if (codec == ENT_STORED)
            FZ_CHECK((r1 == 0) == (srclen == n) && (r1 || !n || !memcmp(a, in, n)), "stored plane decoded wrongly");
        if (codec == ENT_CONST) {
            FZ_CHECK((r1 == 0) == (srclen == 1 && n > 0), "constant plane: status %d for %zu bytes into %zu", r1,
                     srclen, n);
            FZ_CHECK(r1 || !n || (a[0] == in[0] && !memcmp(a, a + 1, n - 1)), "constant plane decoded wrongly");
        }
        if (!ent_codec_known(codec)) FZ_CHECK(r1 == -1, "unknown codec %u decoded", codec);
    }
}

/* Encodes the plane (src[0..len) repeated to n bytes when n is larger) with codec want
 * at level, with the scalar loops and at vector level vec (1 AVX2, 2 AVX-512), and
 * decodes the result at vector level dvec. */
static inline void fz_entropy_encode(fz_dec_fn dec, uint8_t want, int level, int vec, int dvec, const uint8_t *src,
                                     size_t len, size_t n)
{
    if (!len) n = 0;
    if (n < len) n = len;
    static fz_buf bin, bz[2], bzz, bout;
    uint8_t *in = fz_take(&bin, n);
    for (size_t at = 0; at < n; at += len) memcpy(in + at, src, n - at < len ? n - at : len);
    size_t cap = ent_bound(n), zl[2];
    uint8_t *z[2], got[2];
    for (int k = 0; k < 2; k++) {
        z[k] = fz_take(&bz[k], cap);
        force_isa(fz_isa[k ? vec : 0]);
        zl[k] = ent_encode_with(fz_ent_ctx(), want, in, n, z[k], cap, level, &got[k]);
        FZ_CHECK(zl[k] <= cap, "encoder wrote %zu bytes, bound %zu", zl[k], cap);
        FZ_CHECK(got[k] == want || got[k] == ENT_STORED, "asked for %s, got %s", ent_codec_name(want),
                 ent_codec_name(got[k]));
        FZ_CHECK(got[k] != ENT_STORED || zl[k] == n, "stored plane of %zu bytes coded as %zu", n, zl[k]);
    }
    top_isa();
    FZ_CHECK(zl[1] == zl[0] && got[1] == got[0] && !memcmp(z[1], z[0], zl[0]),
             "%s at level %d: vector level %d codes %zu bytes differently from the scalar loops",
             ent_codec_name(got[0]), level, vec, n);
    uint8_t *zz = fz_take_copy(&bzz, z[0], zl[0]), *out = fz_take(&bout, n);
    fz_fill(out, n, 3);
    int r = fz_decode(got[0] == want ? dec : NULL, got[0], dvec, zz, zl[0], out, n);
    FZ_CHECK(r == 0 && !memcmp(out, in, n), "%s: %zu bytes coded at level %d do not decode back (vector level %d)",
             ent_codec_name(got[0]), n, level, dvec);
}

/* codec: the decoder's id (dec != NULL) or -1 for the dispatcher (codec from the input).
 * encode: flags bit 7 selects encode mode (else it is ignored). */
static inline int fz_entropy_run(fz_dec_fn dec, int codec, int encode, const uint8_t *data, size_t size)
{
    size_t hdr = codec < 0 ? 5 : 4;
    if (size < hdr) return 0;
    uint8_t c = codec < 0 ? data[0] : (uint8_t)codec;
    const uint8_t *h = data + hdr - 4;
    unsigned flags = h[0];
    size_t n = (size_t)fz_le(h + 1, 3);
    if (encode && (flags & 0x80)) {
        int level = 1 + (int)((flags >> 2) & 15) % 9;
        fz_entropy_encode(dec, c, level, 1 + (flags & 1), (int)((flags >> 1) & 1) * 2, data + hdr, size - hdr,
                          (n & 0x1ffff) >= 65536 ? 65536 : n & 0xffff);
    } else {
        fz_entropy_decode(dec, c, flags, data + hdr, size - hdr, n % 65537);
    }
    return 0;
}

#endif
