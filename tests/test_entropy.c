/* test_entropy.c — round trips, selector behaviour and hostile input for lib/entropy.
 *
 * Every codec is forced on many sizes and distributions (and chosen by the selector
 * at several levels), the scalar, AVX2 and AVX-512 paths must produce identical bytes
 * and decode each other (and the histogram and CRC-32C paths identical values), and
 * damaged encodings (truncated, bit-flipped, garbage) must be rejected or at least
 * decoded without touching memory outside the buffers, which the sanitizer build
 * checks. Exits non-zero on the first class of failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "entropy/ent_internal.h"
#include "isa.h"
#include "entropy/entropy.h"
#include "transforms/planes.h"

#include "ent_check.h"

enum { D_CONST, D_RANDOM, D_SKEW, D_EXPO, D_ALL256, D_RARE, D_RUNS, D_SUCC, D_COUNT };
static const char *dname[D_COUNT] = {"const", "random", "skewed", "exponent", "all256", "rare", "runs", "successor"};

static void fill(uint8_t *b, size_t n, int d)
{
    for (size_t i = 0; i < n; i++) {
        switch (d) {
        case D_CONST: b[i] = 0x7b; break;
        case D_RANDOM: b[i] = (uint8_t)rnd(); break;
        case D_SKEW: { /* geometric: most mass on a few symbols */
            uint32_t r = rnd(), k = 0;
            while ((r & 1) && k < 40) {
                r >>= 1;
                k++;
            }
            b[i] = (uint8_t)(k * 7);
            break;
        }
        case D_EXPO: { /* sum of uniforms ~ bell around 0x7a, drifting along the plane */
            int v = 0;
            for (int k = 0; k < 4; k++) v += (int)(rnd() % 7);
            b[i] = (uint8_t)(0x68 + v + (int)((i >> 14) % 3));
            break;
        }
        case D_ALL256: b[i] = (uint8_t)(i < 256 ? i : (rnd() % 5 ? 3 : rnd())); break;
        case D_RARE: b[i] = (i == n / 2) ? 0x01 : 0x7c; break;
        case D_RUNS: b[i] = (uint8_t)((i / 97) % 4 * 60); break;
        case D_SUCC: /* order-1 structure over all 256 contexts: every one earns a table */
            b[i] = (uint8_t)((i ? b[i - 1] : 0) + 1 + (rnd() % 3 == 0));
            break;
        }
    }
}

static const uint8_t codecs[] = {ENT_STORED, ENT_CONST,   ENT_RANS0,   ENT_RANS1,  ENT_ZSTD,  ENT_LZ4,
                                 ENT_SNAPPY, ENT_DEFLATE, ENT_RANSCTX, ENT_RANS0S, ENT_RANS0T};

/* The LZ back ends: bit flips in their literals decode to other bytes (the chunk's CRC
 * catches those), and their top levels are slow. */
static int lz_backend(uint8_t codec)
{
    return codec == ENT_ZSTD || codec == ENT_LZ4 || codec == ENT_SNAPPY || codec == ENT_DEFLATE;
}

static void roundtrip(ent_ctx *c, const uint8_t *src, size_t n, const char *what)
{
    size_t cap = ent_bound(n);
    uint8_t *enc = malloc(cap + 1), *dec = malloc(n + 1);
    for (size_t k = 0; k < sizeof codecs; k++) {
        for (int lv = 1; lv <= 9; lv += 4) {
            if (lz_backend(codecs[k]) && lv == 9 && n > 70000) continue;
            uint8_t got = 255;
            size_t len = ent_encode_with(c, codecs[k], src, n, enc, cap, lv, &got);
            CHECK(len <= n, "%s n=%zu forced %s: %zu > n", what, n, ent_codec_name(codecs[k]), len);
            CHECK(got == codecs[k] || got == ENT_STORED, "%s: forced codec reported %d", what, got);
            int r = ent_decode(c, got, enc, len, dec, n);
            CHECK(r == 0 && (n == 0 || memcmp(dec, src, n) == 0), "%s n=%zu forced %s level %d: round trip (r=%d)",
                  what, n, ent_codec_name(got), lv, r);
            /* Not codec 11: the 16 bits a codec 2 state must end on (L) hold its tail there, so
             * it may decode another n (the container's plane sizes come from the frame, and the
             * chunk's CRC-32C checks what a plane decodes to). */
            if (n > 0 && got != ENT_RANS0T) {
                r = ent_decode(c, got, enc, len, dec, n - 1);
                CHECK(r == -1 || got == ENT_CONST, "%s n=%zu %s: accepted wrong n-1", what, n, ent_codec_name(got));
            }
        }
    }
    static const int levels[] = {1, 3, 9};
    for (int h = 0; h < 4; h++)
        for (int li = 0; li < 3; li++) {
            if (levels[li] == 9 && n > 70000) continue;
            uint8_t got = 255;
            size_t len = ent_encode(c, src, n, enc, cap, levels[li], h, &got);
            CHECK(len <= n + 1, "%s n=%zu selector %zu bytes", what, n, len);
            CHECK(ent_codec_known(got), "%s: bad codec id", what);
            int r = ent_decode(c, got, enc, len, dec, n);
            CHECK(r == 0 && (n == 0 || memcmp(dec, src, n) == 0), "%s n=%zu selector %s level %d hint %d: round trip",
                  what, n, ent_codec_name(got), levels[li], h);
        }
    free(enc);
    free(dec);
}

static void test_roundtrips(ent_ctx *c)
{
    static const size_t sizes[] = {0,   1,   2,    3,    5,    7,     31,    32,    33,     63,     64,     65,
                                   100, 257, 1000, 4095, 4097, 16384, 16385, 65543, 131072, 200001, 1 << 20};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        uint8_t *b = malloc(n + 1);
        for (int d = 0; d < D_COUNT; d++) {
            if (n >= 131072 && (d == D_ALL256 || d == D_RUNS)) continue;
            char what[64];
            snprintf(what, sizeof what, "%s", dname[d]);
            fill(b, n, d);
            roundtrip(c, b, n, what);
        }
        free(b);
    }
}

static void test_selector(ent_ctx *c)
{
    size_t n = 1 << 18;
    uint8_t *b = malloc(n), *enc = malloc(ent_bound(n)), *dec = malloc(n);
    uint8_t got;
    fill(b, n, D_RANDOM);
    for (int h = 0; h < 4; h++) {
        size_t len = ent_encode(c, b, n, enc, ent_bound(n), 3, h, &got);
        CHECK(got == ENT_STORED && len == n, "random bytes hint %d: chose %s", h, ent_codec_name(got));
    }
    fill(b, n, D_CONST);
    size_t len = ent_encode(c, b, n, enc, ent_bound(n), 1, ENT_HINT_MANTISSA, &got);
    CHECK(got == ENT_CONST && len == 1, "constant plane: chose %s (%zu bytes)", ent_codec_name(got), len);
    fill(b, n, D_EXPO);
    len = ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_EXPONENT, &got);
    CHECK((got == ENT_RANS0T || got == ENT_RANS1) && len < n * 6 / 10, "exponent plane: %s %zu bytes",
          ent_codec_name(got), len);
    fill(b, n, D_RARE);
    len = ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_EXPONENT, &got);
    CHECK(len < 400 && ent_decode(c, got, enc, len, dec, n) == 0 && memcmp(dec, b, n) == 0,
          "single rare symbol: %s %zu bytes", ent_codec_name(got), len);
    CHECK(strcmp(ent_codec_name(ENT_RANS1), "rans1") == 0 && strcmp(ent_codec_name(200), "unknown") == 0,
          "codec names");
    CHECK(ent_decode(c, 77, enc, len, dec, n) == -1, "unknown codec accepted");
    CHECK(ent_decode(c, ENT_CONST, enc, 2, dec, n) == -1, "const with 2 bytes accepted");
    CHECK(ent_decode(c, ENT_STORED, enc, n - 1, dec, n) == -1, "short stored accepted");
    free(b);
    free(enc);
    free(dec);
}

/* The coder choice (ent_ctx_set_codec, ckpz_params.codec): a back end forced codes
 * every plane that is not random (stored unseen) or constant, and decodes back; its coded
 * bytes are refused with a byte appended, cut short or for another plane size; "rans"
 * never picks zstd; back to "auto", the output is the fresh context's. */
static void test_choice(ent_ctx *c)
{
    size_t n = 1 << 17;
    uint8_t *b = malloc(n), *enc = malloc(ent_bound(n) + 1), *ref = malloc(ent_bound(n)), *dec = malloc(n);
    uint8_t got;
    ent_ctx *fresh = ent_ctx_create();
    for (int k = 0; k < CKPZ_CODEC_COUNT_; k++)
        CHECK(ckpz_codec_from_name(ckpz_codec_name((ckpz_codec)k)) == (ckpz_codec)k, "choice %d's name", k);
    CHECK(ckpz_codec_from_name("rans0") == CKPZ_CODEC_COUNT_ && ckpz_codec_name(CKPZ_CODEC_COUNT_) == NULL,
          "choice names");
    static const ckpz_codec forced[] = {CKPZ_CODEC_ZSTD, CKPZ_CODEC_LZ4, CKPZ_CODEC_SNAPPY, CKPZ_CODEC_DEFLATE};
    static const uint8_t ids[] = {ENT_ZSTD, ENT_LZ4, ENT_SNAPPY, ENT_DEFLATE};
    for (size_t f = 0; f < 4; f++) {
        ent_ctx_set_codec(c, forced[f]);
        const char *nm = ckpz_codec_name(forced[f]);
        CHECK(!strcmp(nm, ent_codec_name(ids[f])), "choice %s names codec %s", nm, ent_codec_name(ids[f]));
        for (int lv = 1; lv <= 9; lv += 4) {
            fill(b, n, D_RUNS); /* repeats, which every LZ coder finds (snappy codes nothing else) */
            size_t len = ent_encode(c, b, n, enc, ent_bound(n), lv, ENT_HINT_EXPONENT, &got);
            CHECK(got == ids[f] && len < n, "%s level %d: plane of runs coded %s (%zu bytes)", nm, lv,
                  ent_codec_name(got), len);
            CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && !memcmp(dec, b, n), "%s level %d: round trip", nm, lv);
            CHECK(ent_decode(c, got, enc, len, dec, n - 1) == -1, "%s: decoded to a smaller plane", nm);
            CHECK(ent_decode(c, got, enc, len - 1, dec, n) == -1, "%s: decoded cut short", nm);
            enc[len] = enc[len / 2];
            CHECK(ent_decode(c, got, enc, len + 1, dec, n) == -1, "%s: decoded with a byte appended", nm);
        }
        fill(b, n, D_RANDOM);
        ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_MANTISSA, &got);
        CHECK(got == ENT_STORED, "%s: random mantissa plane coded %s", nm, ent_codec_name(got));
        fill(b, n, D_CONST);
        ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_INT, &got);
        CHECK(got == ENT_CONST, "%s: constant plane coded %s", nm, ent_codec_name(got));
    }
    /* an opaque plane of repeats, which auto codes with zstd */
    for (size_t i = 0; i < n; i++) b[i] = "layer.0.weight = 13;\n"[i % 21];
    size_t rl = ent_encode(fresh, b, n, ref, ent_bound(n), 3, ENT_HINT_OPAQUE, &got);
    CHECK(got == ENT_ZSTD, "text plane: auto chose %s", ent_codec_name(got));
    ent_ctx_set_codec(c, CKPZ_CODEC_RANS);
    ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_OPAQUE, &got);
    CHECK(got == ENT_RANS0T || got == ENT_RANS1, "text plane: rans chose %s", ent_codec_name(got));
    ent_ctx_set_codec(c, CKPZ_CODEC_AUTO);
    size_t l = ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_OPAQUE, &got);
    CHECK(l == rl && !memcmp(enc, ref, l), "auto after other choices differs from a fresh context");
    ent_ctx_free(fresh);
    free(b);
    free(enc);
    free(ref);
    free(dec);
}

/* ENT_HINT_LIST predicts zstd for an entry list's column: the bytes are the full
 * choice's (ENT_HINT_OPAQUE) wherever zstd codes the column at least 4:1 or the table
 * coders are tried after all, on every kind of data at the sizes lists take. */
static void test_list_hint(void)
{
    static const size_t sizes[] = {40, 300, 5000, 40000};
    size_t cap = ent_bound(40000);
    uint8_t *b = malloc(40000), *ref = malloc(cap), *enc = malloc(cap), *dec = malloc(40000), gr, gl;
    ent_ctx *full = ent_ctx_create(), *list = ent_ctx_create();
    for (int d = 0; d <= D_COUNT; d++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t n = sizes[k];
            if (d == D_COUNT) /* names front-coded, as a list's names column holds them */
                for (size_t i = 0; i < n; i++) b[i] = "blocks.17.fc.weight.bias"[(i * 7 + i / 24) % 24];
            else fill(b, n, d);
            const char *what = d == D_COUNT ? "names" : dname[d];
            size_t rl = ent_encode(full, b, n, ref, cap, 6, ENT_HINT_OPAQUE, &gr);
            size_t l = ent_encode(list, b, n, enc, cap, 6, ENT_HINT_LIST, &gl);
            CHECK(l <= n && ent_decode(list, gl, enc, l, dec, n) == 0 && !memcmp(dec, b, n), "list %s %zu: round trip",
                  what, n);
            if (n >= 256)
                CHECK(gl == gr && l == rl && !memcmp(enc, ref, l), "list %s %zu: %s %zu bytes, the full choice %s %zu",
                      what, n, ent_codec_name(gl), l, ent_codec_name(gr), rl);
        }
    ent_ctx_free(full);
    ent_ctx_free(list);
    free(b), free(ref), free(enc), free(dec);
}

/* Planes shaped for the vector encoders' table modes: two symbols; 60 adjacent
 * values across a multiple of 64 (register slots by the low 6 bits, byte tables of 64);
 * 40, 64 and 65 values spread over the whole byte range (byte tables of 256 with few
 * symbols); a skewed 30-value window with rare ends (frequency-1 symbols); residual
 * bytes: all 256 values, geometric (byte tables of 256, every slot used); a span of
 * 100 (byte tables of 128); two values 200 apart; mostly zero with rare values
 * anywhere (frequency-1 symbols at both ends of the table). */
enum { P_TWO, P_WIDE60, P_SPREAD40, P_SPREAD64, P_SPREAD65, P_EDGE, P_RESID, P_SPAN100, P_FAR2, P_SPARSE, P_COUNT };
static const char *pname[P_COUNT] = {"two",  "wide60",   "spread40", "spread64", "spread65",
                                     "edge", "residual", "span100",  "far2",     "sparse"};

static void fill_parity(uint8_t *b, size_t n, int d)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd();
        switch (d) {
        case P_TWO: b[i] = r % 5 ? 0xfe : 0x01; break;
        case P_WIDE60: b[i] = (uint8_t)(0x30 + (r % 60 + r % 7 * 5) % 60); break;
        case P_SPREAD40: b[i] = (uint8_t)(r % 40 * 6 + 7); break;
        case P_SPREAD64: b[i] = (uint8_t)(r % 64 * 4 + 1); break;
        case P_SPREAD65: b[i] = (uint8_t)(r % 65 * 3 + 2); break;
        case P_EDGE: b[i] = (uint8_t)(0xe1 + (r % 3 ? r % 7 : r % 30)); break;
        case P_RESID: { /* zigzag of a two-sided geometric step: small values first */
            uint32_t k = 0;
            while ((r & 3) && k < 255) {
                r = (r >> 2) | (rnd() << 28);
                k += 1 + (r & 7);
            }
            b[i] = (uint8_t)(i % 1000 == 7 ? rnd() : k);
            break;
        }
        case P_SPAN100: b[i] = (uint8_t)(0x90 + (r % 4 ? r % 9 : r % 100)); break;
        case P_FAR2: b[i] = r % 3 ? 0x10 : 0xd8; break;
        case P_SPARSE: b[i] = (uint8_t)(r % 61 ? 0 : rnd()); break;
        }
    }
    if (n > 2 && (d == P_EDGE || d == P_SPARSE)) { /* single 0x00 and 0xff (or 0x01) */
        b[n / 3] = d == P_EDGE ? 0x00 : 0x01;
        b[n - 1] = 0xff;
    }
}

/* The scalar, AVX2 and AVX-512 paths (CKPZ_CPU) must write the same stream and read
 * each other's. Sizes leave partial rounds of 32 and 64 states. */
static void test_simd_parity(ent_ctx *c)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"};
    int top = top_isa();
    if (top == CPU_SCALAR) {
        printf("no AVX2 on this CPU: parity test skipped\n");
        return;
    }
    if (top < CPU_AVX512) printf("no AVX-512 on this CPU: its parity test skipped\n");
    static const size_t sizes[] = {32, 63, 100, 1025, 4097, 40000, 131072 + 77, 700000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        uint8_t *b = malloc(n), *ref = malloc(ent_bound(n)), *e = malloc(ent_bound(n)), *d = malloc(n);
        for (int dc = 0; dc < 2 * (D_COUNT + P_COUNT); dc++) { /* codecs 2 and 11 (its tails) */
            int dist = dc >> 1;
            uint8_t id = dc & 1 ? ENT_RANS0T : ENT_RANS0;
            const char *nm = dist < D_COUNT ? dname[dist] : pname[dist - D_COUNT];
            if (dist < D_COUNT) fill(b, n, dist);
            else fill_parity(b, n, dist - D_COUNT);
            uint8_t c0, c1;
            force_isa("scalar");
            size_t l0 = ent_encode_with(c, id, b, n, ref, ent_bound(n), 3, &c0);
            for (int lv = CPU_AVX2; lv <= top; lv++) {
                CHECK(force_isa(isa[lv]) == lv, "CKPZ_CPU=%s not in force", isa[lv]);
                size_t l1 = ent_encode_with(c, id, b, n, e, ent_bound(n), 3, &c1);
                CHECK(l0 == l1 && c0 == c1 && memcmp(ref, e, l0) == 0, "scalar and %s encoders differ (%s n=%zu)",
                      isa[lv], nm, n);
                force_isa("scalar");
                CHECK(ent_decode(c, c1, e, l1, d, n) == 0 && memcmp(d, b, n) == 0,
                      "scalar decode of %s stream (%s n=%zu)", isa[lv], nm, n);
                force_isa(isa[lv]);
                CHECK(ent_decode(c, c0, ref, l0, d, n) == 0 && memcmp(d, b, n) == 0,
                      "%s decode of scalar stream (%s n=%zu)", isa[lv], nm, n);
            }
            top_isa();
        }
        free(b);
        free(ref);
        free(e);
        free(d);
    }
}

/* The vector histograms (value ranges up to 32 with AVX2, 64 with AVX-512) must count
 * exactly what the table does: byte counters that fill up at a window's end, ranges at
 * both ends of the byte values, group edges (8, 9, 32, 33, 64, 65 values), tails shorter
 * than a vector. */
static void test_histogram(void)
{
    static const size_t sizes[] = {1, 63, 1023, 1024, 1089, 16320, 16321, 255 * 32 * 3 + 9, 255 * 64 * 3 + 17, 200000};
    static const int spans[] = {1, 2, 8, 9, 31, 32, 33, 64, 65, 256};
    size_t nmax = 200000;
    uint8_t *b = malloc(nmax);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t k = 0; k < sizeof spans / sizeof *spans; k++)
            for (int base = 0; base < 3; base++) {
                size_t n = sizes[si];
                int span = spans[k];
                int lo = base == 0 ? 0 : base == 1 ? 256 - span : (256 - span) / 2;
                for (size_t i = 0; i < n; i++) /* long runs of the lowest value */
                    b[i] = (uint8_t)(lo + ((i / 5000) % 2 ? 0 : (int)(rnd() % (uint32_t)span)));
                b[n - 1] = (uint8_t)(lo + span - 1); /* both ends present */
                b[0] = (uint8_t)lo;
                uint32_t h1[256], h2[256];
                force_isa("scalar");
                ent_histogram(b, n, h1);
                for (int lv = 0; lv < 2; lv++) { /* the AVX2 count, then the AVX-512 one */
                    force_isa(lv ? "avx512" : "avx2");
                    ent_histogram(b, n, h2);
                    CHECK(memcmp(h1, h2, sizeof h1) == 0, "histogram paths differ (n=%zu span %d lo %d, %s)", n, span,
                          lo, lv ? "avx512" : "avx2");
                }
                top_isa();
                uint64_t tot = 0;
                for (int s = 0; s < 256; s++) tot += h1[s];
                CHECK(tot == n, "histogram total %llu of %zu", (unsigned long long)tot, n);
            }
    free(b);
}

/* Planes mostly of one value (delta residuals) take the compare-and-pack histogram:
 * the dominant value anywhere in the byte range, rare others of every value, runs of
 * others, a share of others that crosses 1/8 part way (the rest goes to the table),
 * and lengths around the 64-byte vector and the 4 KiB pieces. */
static void test_histogram_sparse(void)
{
    static const size_t sizes[] = {256, 1000, 1024, 1089, 4095, 4096, 4097, 8191 + 64, 16384, 100003};
    static const int doms[] = {0, 0x80, 0xff};
    static const int rates[] = {0, 2, 60, 500}; /* others per thousand */
    uint8_t *b = malloc(100003);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t di = 0; di < sizeof doms / sizeof *doms; di++)
            for (size_t ri = 0; ri < sizeof rates / sizeof *rates + 2; ri++) {
                size_t n = sizes[si];
                for (size_t i = 0; i < n; i++) {
                    int other;
                    if (ri < 4) other = (int)(rnd() % 1000) < rates[ri];
                    else if (ri == 4) /* clean start, then half others: gives up */ other = i >= n / 3 && rnd() % 2;
                    else /* runs of others */ other = (i / 37) % 11 == 3;
                    b[i] = (uint8_t)(other ? rnd() : (uint32_t)doms[di]);
                }
                for (size_t i = 0; i < 256 && i < n; i++) /* the first 256 bytes decide */
                    b[i] = (uint8_t)(i % 64 == 9 ? doms[di] + 1 : doms[di]);
                uint32_t h1[256], h2[256];
                force_isa("scalar");
                ent_histogram(b, n, h1);
                top_isa();
                ent_histogram(b, n, h2);
                CHECK(memcmp(h1, h2, sizeof h1) == 0, "sparse histogram differs (n=%zu dominant %d case %zu)", n,
                      doms[di], ri);
            }
    free(b);
}

/* The sampled histogram (escape A planes) must give the same counts on every path
 * (the pieces' range pass, the per-piece histograms, the scalar table), add up to n,
 * and count every value between the block's least and largest byte at least once, even
 * one that only occurs outside the pieces. */
static void test_histogram_sampled(void)
{
    static const size_t sizes[] = {4095, 4096, 16384, 16384 + 17, 16384 + 64 * 3 + 5, 65536, 100003};
    static const int spans[] = {1, 8, 31, 32, 64, 65, 200};
    uint8_t *b = malloc(100003);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t k = 0; k < sizeof spans / sizeof *spans; k++)
            for (int skew = 0; skew < 2; skew++) {
                size_t n = sizes[si];
                int span = spans[k], lo = span == 200 ? 30 : 255 - span + 1;
                for (size_t i = 0; i < n; i++) /* skew: mostly the top value, as A's T */
                    b[i] = (uint8_t)(lo + (skew && rnd() % 4 ? span - 1 : (int)(rnd() % (uint32_t)span)));
                b[n / 16 + 3] = (uint8_t)lo; /* outside the pieces (for n >= 4096) */
                uint32_t h[3][256];
                static const char *const isa[3] = {"scalar", "avx2", "avx512"};
                for (int c = 0; c < 3; c++) {
                    force_isa(isa[c]);
                    ent_histogram_sampled(b, n, h[c]);
                }
                CHECK(!memcmp(h[0], h[1], sizeof h[0]) && !memcmp(h[0], h[2], sizeof h[0]),
                      "sampled histogram paths differ (n=%zu span %d skew %d)", n, span, skew);
                uint64_t tot = 0;
                int missing = 0, dlo = 255, dhi = 0, present[256] = {0};
                for (size_t i = 0; i < n; i++) {
                    present[b[i]] = 1;
                    dlo = b[i] < dlo ? b[i] : dlo;
                    dhi = b[i] > dhi ? b[i] : dhi;
                }
                for (int s = 0; s < 256; s++) { /* below 4 KiB the counts are exact */
                    tot += h[2][s];
                    missing += (n >= 4096 ? s >= dlo && s <= dhi : present[s]) && !h[2][s];
                    missing += (s < dlo || s > dhi) && h[2][s];
                }
                CHECK(tot == n, "sampled histogram total %llu of %zu", (unsigned long long)tot, n);
                CHECK(!missing, "sampled histogram: %d values of the range not counted once (n=%zu span %d)", missing,
                      n, span);
            }
    free(b);
}

/* A 16-bit float's exponent byte (ENT_HINT_SAMPLE): up to level 3 it is counted from a
 * sample, so its tables (and bytes) differ from the exact count's, the same on every path
 * and restored exactly; from level 4 the flag changes nothing. Planes of a narrow range
 * (BF16's exponent byte: the vector count) and of a wide one (FP16's: the table). */
static void test_sample_hint(ent_ctx *c)
{
    size_t n = 200000;
    uint8_t *b = malloc(n), *e0 = malloc(ent_bound(n)), *e1 = malloc(ent_bound(n)), *d = malloc(n);
    static const char *const isa[3] = {"scalar", "avx2", "avx512"};
    int top = top_isa();
    for (int wide = 0; wide < 2; wide++) {
        for (size_t i = 0; i < n; i++) { /* exponents around 2^-6, both signs (wide) or one */
            int e = 9 + (int)(rnd() % 3) - (int)(rnd() % 4), m = (int)(rnd() % 8);
            b[i] = (uint8_t)(((wide && rnd() % 2) ? 0x80 : 0) | (e << 3) | m);
        }
        for (int level = 1; level <= 4; level += 3) {
            uint8_t k0, k1;
            force_isa("scalar");
            size_t l0 = ent_encode(c, b, n, e0, ent_bound(n), level, ENT_HINT_EXPONENT, &k0);
            size_t l1 = ent_encode(c, b, n, e1, ent_bound(n), level, ENT_HINT_EXPONENT | ENT_HINT_SAMPLE, &k1);
            int same = l0 == l1 && k0 == k1 && !memcmp(e0, e1, l0);
            CHECK(same == (level > 3), "ENT_HINT_SAMPLE at level %d on a %s plane: %s", level, wide ? "wide" : "narrow",
                  same ? "no effect" : "changed the bytes");
            CHECK(l1 < n && ent_decode(c, k1, e1, l1, d, n) == 0 && !memcmp(d, b, n),
                  "ENT_HINT_SAMPLE plane not restored (level %d, %s)", level, wide ? "wide" : "narrow");
            for (int p = CPU_AVX2; p <= top; p++) {
                force_isa(isa[p]);
                size_t l2 = ent_encode(c, b, n, e0, ent_bound(n), level, ENT_HINT_EXPONENT | ENT_HINT_SAMPLE, &k0);
                CHECK(l2 == l1 && k0 == k1 && !memcmp(e0, e1, l1),
                      "ENT_HINT_SAMPLE: %s and scalar differ (level %d, %s)", isa[p], level, wide ? "wide" : "narrow");
            }
            top_isa();
        }
    }
    free(b);
    free(e0);
    free(e1);
    free(d);
}

/* Residual planes: zstd is tried on a large, nearly empty plane only when its nonzero
 * bytes come in runs, where it wins; isolated ones go to rANS without the attempt. */
static void test_residual_zstd(ent_ctx *c)
{
    size_t n = 1 << 19;
    uint8_t *b = malloc(n), *enc = malloc(ent_bound(n)), *dec = malloc(n);
    for (int runs = 0; runs < 2; runs++) {
        memset(b, 0, n);
        if (runs) /* 2% of the bytes: rows of 512 changed values */
            for (size_t i = 0; i + 512 <= n; i += 25600)
                for (size_t k = 0; k < 512; k++) b[i + k] = (uint8_t)(1 + rnd() % 3);
        else /* 2% of the bytes, one at a time */
            for (size_t i = 0; i + 50 <= n; i += 50) b[i + rnd() % 50] = (uint8_t)(1 + rnd() % 3);
        uint8_t got;
        size_t len = ent_encode(c, b, n, enc, ent_bound(n), 3, ENT_HINT_RESIDUAL, &got);
        CHECK(got == (runs ? ENT_ZSTD : ENT_RANS0), "residual plane (%s): chose %s", runs ? "runs" : "isolated",
              ent_codec_name(got));
        CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && memcmp(dec, b, n) == 0, "residual round trip");
    }
    free(b);
    free(enc);
    free(dec);
}

/* The fast level (select.c, ENT_FAST_LEVEL) codes zstd first on a chunk with zero runs and
 * order 0 only where its plan beats zstd: on planes where either wins (zero runs with
 * skewed or exponent-like bytes, or none), its size must be the smaller of the two forced
 * at level 1, to the plan's few tens of bytes, and it must decode. */
static void test_fast_level(ent_ctx *c)
{
    size_t n = 1 << 19;
    uint8_t *b = malloc(n), *enc = malloc(ent_bound(n)), *dec = malloc(n), got;
    ent_ctx_set_lz(c, ENT_LZ_RUNS);
    for (int zeros = 0; zeros < 3; zeros++)
        for (int d = D_SKEW; d <= D_EXPO; d++) {
            fill(b, n, d);
            for (size_t i = 0; zeros && i + 4096 <= n; i += 8192) /* every other 4 KiB (or 3 of 4) zero */
                memset(b + i, 0, zeros == 1 ? 4096 : 6144 < n - i ? 6144 : n - i);
            size_t l0 = ent_encode_with(c, ENT_RANS0T, b, n, enc, ent_bound(n), 1, &got);
            size_t lz = ent_encode_with(c, ENT_ZSTD, b, n, enc, ent_bound(n), 1, &got);
            size_t len = ent_encode(c, b, n, enc, ent_bound(n), 1, ENT_HINT_EXPONENT, &got);
            size_t want = l0 < lz ? l0 : lz;
            CHECK(len <= want + 32 && (got == ENT_RANS0T || got == ENT_ZSTD),
                  "fast level, %s, zeros %d: %s %zu bytes, forced order 0 %zu, zstd %zu", dname[d], zeros,
                  ent_codec_name(got), len, l0, lz);
            CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && memcmp(dec, b, n) == 0, "fast level round trip");
        }
    ent_ctx_set_lz(c, ENT_LZ_OFF);
    free(b);
    free(enc);
    free(dec);
}

/* Levels 2 and 3 code zstd 1 first too on zero-run float planes (select.c, zero_first),
 * then order 0 or a context coder only where it beats zstd's size: on exponent and
 * mantissa planes half or more zero, the result is no larger than the smaller of zstd 1
 * and order 0 forced at that level, to the plan's few tens of bytes; where zstd wins its
 * bytes are zstd 1's (levels 2-3 used to code zstd 3 there); where another coder beats
 * it (counted while zstd's output waits in the candidate buffer), it decodes. */
static void test_zero_first(ent_ctx *c)
{
    size_t n = 1 << 19;
    uint8_t *b = malloc(n), *enc = malloc(ent_bound(n)), *z1 = malloc(ent_bound(n)), *dec = malloc(n), got;
    int zstd_won = 0, other_won = 0;
    for (int lz = ENT_LZ_OFF; lz <= ENT_LZ_RUNS; lz++) {
        ent_ctx_set_lz(c, lz);
        for (int level = 2; level <= 3; level++)
            for (int zeros = 1; zeros < 3; zeros++)
                for (int d = D_SKEW; d <= D_EXPO; d++)
                    for (int hint = ENT_HINT_EXPONENT; hint <= ENT_HINT_MANTISSA; hint++) {
                        fill(b, n, d);
                        for (size_t i = 0; i + 4096 <= n; i += 8192) /* every other 4 KiB (or 3 of 4) zero */
                            memset(b + i, 0, zeros == 1 ? 4352 : 6144 < n - i ? 6144 : n - i);
                        size_t l0 = ent_encode_with(c, ENT_RANS0T, b, n, enc, ent_bound(n), level, &got);
                        size_t lz1 = ent_encode_with(c, ENT_ZSTD, b, n, z1, ent_bound(n), 1, &got);
                        size_t len = ent_encode(c, b, n, enc, ent_bound(n), level, hint, &got);
                        size_t want = l0 < lz1 ? l0 : lz1;
                        CHECK(len <= want + 32,
                              "zero runs, level %d, %s, zeros %d, hint %d: %s %zu bytes, order 0 %zu, "
                              "zstd 1 %zu",
                              level, dname[d], zeros, hint, ent_codec_name(got), len, l0, lz1);
                        if (got == ENT_ZSTD) {
                            zstd_won++;
                            CHECK(len == lz1 && !memcmp(enc, z1, len),
                                  "zero runs, level %d, %s: zstd's bytes are not zstd 1's", level, dname[d]);
                        } else {
                            other_won++;
                        }
                        CHECK(ent_decode(c, got, enc, len, dec, n) == 0 && memcmp(dec, b, n) == 0,
                              "zero runs round trip (level %d, %s, %s)", level, dname[d], ent_codec_name(got));
                    }
    }
    CHECK(zstd_won && other_won, "zero runs: zstd won %d planes, another coder %d (both expected)", zstd_won,
          other_won);
    ent_ctx_set_lz(c, ENT_LZ_OFF);
    free(b);
    free(enc);
    free(z1);
    free(dec);
}

/* CRC-32C: the check value, and the folding path (long buffers on CPUs with
 * VPCLMULQDQ) against the crc32-instruction path (CKPZ_CPU=avx2) on every length up to
 * a few KiB, odd alignments and continuing states. */
static void test_crc(void)
{
    CHECK(crc32c(0, "123456789", 9) == 0xe3069283u, "crc32c check value");
    size_t nmax = 300000;
    uint8_t *b = malloc(nmax + 64);
    for (size_t i = 0; i < nmax + 64; i++) b[i] = (uint8_t)rnd();
    for (int t = 0; t < 4000; t++) {
        size_t n = t < 3000 ? (size_t)t : rnd() % nmax, off = rnd() % 64;
        uint32_t init = t & 1 ? rnd() : 0;
        top_isa();
        uint32_t a = crc32c(init, b + off, n);
        force_isa("avx2");
        uint32_t r = crc32c(init, b + off, n);
        top_isa();
        CHECK(a == r, "crc32c paths differ (n=%zu off %zu)", n, off);
        if (n > 2) { /* and a CRC continues across any split */
            size_t cut = rnd() % n;
            CHECK(crc32c(crc32c(init, b + off, cut), b + off + cut, n - cut) == a, "crc32c split at %zu of %zu", cut,
                  n);
        }
    }
    free(b);
}

static void test_hostile(ent_ctx *c)
{
    size_t n = 40000;
    uint8_t *b = malloc(n), *enc = malloc(ent_bound(n)), *bad = malloc(ent_bound(n) + 64), *dec = malloc(n);
    for (int dist = D_SKEW; dist <= D_EXPO; dist++) {
        fill(b, n, dist);
        for (size_t k = 0; k < sizeof codecs; k++) {
            uint8_t got;
            size_t len = ent_encode_with(c, codecs[k], b, n, enc, ent_bound(n), 3, &got);
            if (got != codecs[k] || got == ENT_STORED) continue;
            /* Truncation must be detected by every coded format. */
            for (size_t cut = 0; cut < len; cut += 1 + cut / 16) {
                memcpy(bad, enc, cut);
                for (int sc = 0; sc < 2; sc++) {
                    force_isa(sc ? "scalar" : "avx512");
                    CHECK(ent_decode(c, got, bad, cut, dec, n) == -1, "%s truncated to %zu of %zu accepted",
                          ent_codec_name(got), cut, len);
                }
            }
            top_isa();
            /* Bit flips: any result is fine as long as memory is not touched wrongly
             * (ASan); most must be caught. */
            int caught = 0, tries = 0;
            for (size_t pos = 0; pos < len; pos += 1 + pos / 64, tries++) {
                memcpy(bad, enc, len);
                bad[pos] ^= (uint8_t)(1u << (rnd() & 7));
                caught += ent_decode(c, got, bad, len, dec, n) == -1;
            }
            CHECK(caught * 4 >= tries * 3 || lz_backend(got), "%s: only %d of %d bit flips detected",
                  ent_codec_name(got), caught, tries);
            /* Garbage of many lengths. */
            for (int t = 0; t < 300; t++) {
                size_t gl = rnd() % (len + 64);
                for (size_t i = 0; i < gl; i++) bad[i] = (uint8_t)rnd();
                if (gl > 2 && (t & 1)) {
                    bad[0] = enc[0]; /* plausible header */
                    bad[1] = enc[1];
                }
                (void)ent_decode(c, got, bad, gl, dec, n);
            }
        }
    }
    /* Hand-made bad order-0 tables: sums over M, single symbol, non-canonical varint. */
    static const uint8_t t1[] = {14, 5, 1, 0x10, 0x11, 0xff, 0x1f};
    static const uint8_t t2[] = {14, 5, 1, 0x10, 0x10};
    static const uint8_t t3[] = {14, 5, 1, 0x10, 0x11, 0x85, 0x00};
    static const uint8_t t4[] = {14, 7, 1, 0x10, 0x11, 0x05};
    CHECK(ent_decode(c, ENT_RANS0, t1, sizeof t1, dec, 1000) == -1, "table sum > M accepted");
    CHECK(ent_decode(c, ENT_RANS0, t2, sizeof t2, dec, 1000) == -1, "one-symbol table accepted");
    CHECK(ent_decode(c, ENT_RANS0, t3, sizeof t3, dec, 1000) == -1, "non-canonical table accepted");
    CHECK(ent_decode(c, ENT_RANS0, t4, sizeof t4, dec, 1000) == -1, "bad lane count accepted");
    free(b);
    free(enc);
    free(bad);
    free(dec);
}

/* Byte planes (lib/transforms/planes.c, whose vector loops feed the entropy stage):
 * the SSE2 (CKPZ_CPU=scalar), AVX2 and AVX-512 loops against a plain model of the
 * transform, on element counts around their 16-, 32- and 64-element steps, with and
 * without tail bytes, and the merge back. */
static void test_planes(void)
{
    size_t nmax = 8 * 1000 + 7;
    uint8_t *src = malloc(nmax), *pl = malloc(nmax), *ref = malloc(nmax), *back = malloc(nmax);
    for (size_t i = 0; i < nmax; i++) src[i] = (uint8_t)rnd();
    static const uint8_t xfs[] = {XF_FLOAT, XF_INT};
    static const uint8_t es[] = {2, 4, 8};
    static const char *const isa[] = {"scalar", "avx2", "avx512"}; /* scalar: the SSE2 loops */
    for (int lv = 0; lv < 3; lv++) {
        force_isa(isa[lv]);
        for (size_t xi = 0; xi < sizeof xfs; xi++)
            for (size_t ei = 0; ei < sizeof es; ei++)
                for (size_t elems = 0; elems < 1000; elems += elems < 200 ? 1 : 61) {
                    unsigned w = es[ei];
                    size_t n = elems * w + (elems % 3 ? elems % w : 0);
                    uint8_t *plane[XF_MAX_PLANES], *rplane[XF_MAX_PLANES];
                    for (unsigned b = 0; b <= w; b++) {
                        plane[b] = pl + b * elems;
                        rplane[b] = ref + b * elems;
                    }
                    for (size_t e = 0; e < elems; e++) {
                        uint64_t v = 0;
                        for (unsigned b = 0; b < w; b++) v |= (uint64_t)src[e * w + b] << (8 * b);
                        if (xfs[xi] == XF_FLOAT)
                            v = (v << 1 | v >> (8 * w - 1)) & (w == 8 ? ~0ull : ((1ull << (8 * w)) - 1));
                        for (unsigned b = 0; b < w; b++) rplane[b][e] = (uint8_t)(v >> (8 * (w - 1 - b)));
                    }
                    memcpy(rplane[w], src + elems * w, n - elems * w);
                    memset(pl, 0xaa, nmax);
                    xf_split(xfs[xi], w, src, n, plane);
                    CHECK(memcmp(pl, ref, n) == 0, "split xf %d esize %u elems %zu at %s", xfs[xi], w, elems, isa[lv]);
                    memset(back, 0xaa, nmax);
                    xf_merge(xfs[xi], w, (const uint8_t *const *)plane, n, back);
                    CHECK(memcmp(back, src, n) == 0 && back[n] == 0xaa, "merge xf %d esize %u elems %zu at %s", xfs[xi],
                          w, elems, isa[lv]);
                }
    }
    top_isa();
    free(src);
    free(pl);
    free(ref);
    free(back);
}

int main(void)
{
    ent_ctx *c = ent_ctx_create();
    if (!c) {
        fprintf(stderr, "FAIL: ent_ctx_create\n");
        return 1;
    }
    CHECK(ent_bound(1000) >= 1000, "ent_bound");
    test_roundtrips(c);
    test_selector(c);
    test_choice(c);
    test_simd_parity(c);
    test_histogram();
    test_histogram_sampled();
    test_sample_hint(c);
    if (top_isa() >= CPU_AVX512) test_histogram_sparse();
    test_residual_zstd(c);
    test_fast_level(c);
    test_zero_first(c);
    test_list_hint();
    test_crc();
    test_planes();
    test_hostile(c);
    ent_ctx_free(c);
    ent_ctx_free(NULL);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_entropy: all passed\n");
    return 0;
}
