/* make_corpus.c — writes the seed corpora of tests/fuzz/corpus/ (not part of the
 * build; rerun it when the format changes):
 *   cc -O2 -Iinclude -Ilib tests/fuzz/make_corpus.c build/libckpz.a -lzstd -llz4 -ldeflate -lpthread -lm -ldl \
 *       -o /tmp/mkc
 *   /tmp/mkc tests/fuzz/corpus
 * decompress/: small valid .ckpz files (< 20 KB: safetensors, npy, raw floats and ints
 * at several levels so that every codec and transform appears, several chunks, an empty
 * original, delta files against fuzz_base.h's base) and a few damaged copies;
 * roundtrip/: small originals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "fuzz_base.h"

static uint64_t s = 0x1234567887654321ull;
static uint64_t rnd(void)
{
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}
static double gauss(void)
{
    double a = ((rnd() >> 11) + 1.0) / 9007199254740993.0, b = (rnd() >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(a)) * cos(6.283185307179586 * b);
}

static const char *dir;
static const char *policy; /* lossy seeds: the policy for ckpz() */
static int based;          /* delta seeds: coded against fuzz_base() (1) or fuzz_gbase() (2) */

static void put(const char *sub, const char *name, const void *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        perror(path);
        exit(1);
    }
}

static void *ckpz(const char *name, const void *src, size_t n, ckpz_input_format fmt, ckpz_dtype dt, int level,
                  size_t *zl)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.chunk_size = 65536;
    p.threads = 1;
    p.level = level;
    p.format = fmt;
    p.raw_dtype = dt;
    p.policy = policy;
    if (based == 1) {
        p.base = fuzz_base();
        p.base_size = FUZZ_BASE_BYTES;
    }
    if (based == 2) p.base = fuzz_gbase(&p.base_size);
    void *z = NULL;
    if (ckpz_compress_buffer(ctx, &p, src, n, &z, zl)) {
        fprintf(stderr, "compress: %s\n", ckpz_ctx_message(ctx));
        exit(1);
    }
    ckpz_ctx_free(ctx);
    if (*zl > 20000) {
        fprintf(stderr, "seed %s too large: %zu bytes\n", name, *zl);
        exit(1);
    }
    return z;
}

static void seed(const char *name, const void *src, size_t n, ckpz_input_format fmt, ckpz_dtype dt, int level,
                 int damaged)
{
    size_t zl;
    uint8_t *z = ckpz(name, src, n, fmt, dt, level, &zl);
    char nm[256];
    snprintf(nm, sizeof nm, "%s.ckpz", name);
    put("decompress", nm, z, zl);
    if (damaged) {
        snprintf(nm, sizeof nm, "%s-truncated.ckpz", name);
        put("decompress", nm, z, zl * 2 / 3);
        z[zl / 2] ^= 0x10;
        snprintf(nm, sizeof nm, "%s-bitflip.ckpz", name);
        put("decompress", nm, z, zl);
    }
    ckpz_free(z);
}

static size_t safetensors(uint8_t *p, size_t na, size_t nb)
{
    char json[400];
    int jl = snprintf(json, sizeof json,
                      "{\"__metadata__\":{\"format\":\"pt\"},\"w.a\":{\"dtype\":\"BF16\",\"shape\":[%zu],"
                      "\"data_offsets\":[0,%zu]},\"w.b\":{\"dtype\":\"F32\",\"shape\":[%zu,1],"
                      "\"data_offsets\":[%zu,%zu]}}",
                      na, 2 * na, nb, 2 * na, 2 * na + 4 * nb);
    size_t hl = ((size_t)jl + 7) & ~(size_t)7;
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, (size_t)jl);
    uint8_t *d = p + 8 + hl;
    for (size_t i = 0; i < na; i++, d += 2) {
        float f = (float)(gauss() * 0.02);
        uint32_t u;
        memcpy(&u, &f, 4);
        d[0] = (uint8_t)(u >> 16);
        d[1] = (uint8_t)(u >> 24);
    }
    for (size_t i = 0; i < nb; i++, d += 4) {
        float f = (float)(gauss() * 0.1);
        memcpy(d, &f, 4);
    }
    return 8 + hl + 2 * na + 4 * nb;
}

/* A norm or bias per layer and a few larger tensors: small entries that share chunks
 * (packed entries, format version 5), with an empty tensor, and a small one that leads a
 * larger one (too large to pack) after it. */
static size_t small_safetensors(uint8_t *p)
{
    static const size_t elems[] = {16, 10, 96, 40, 0, 8, 4500, 64, 3, 128, 24, 7};
    char json[2048];
    int jl = 1;
    size_t off = 0;
    json[0] = '{';
    for (int t = 0; t < 12; t++) {
        int bf = t % 3 == 1;
        jl += snprintf(json + jl, sizeof json - (size_t)jl,
                       "%s\"h.%d.%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}", t ? "," : "", t,
                       t % 2 ? "bias" : "ln.weight", bf ? "BF16" : "F32", elems[t], off, off + elems[t] * (bf ? 2 : 4));
        off += elems[t] * (bf ? 2 : 4);
    }
    json[jl++] = '}';
    size_t hl = ((size_t)jl + 7) & ~(size_t)7;
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, (size_t)jl);
    uint8_t *d = p + 8 + hl;
    for (int t = 0; t < 12; t++)
        for (size_t i = 0; i < elems[t]; i++) {
            float f = (float)((t % 2 ? 0 : 1) + gauss() * 0.02);
            uint8_t b[4];
            memcpy(b, &f, 4);
            if (t % 3 == 1) {
                memcpy(d, b + 2, 2);
                d += 2;
            } else {
                memcpy(d, b, 4);
                d += 4;
            }
        }
    return 8 + hl + off;
}

/* buf = the fuzz base with every 16-bit element moved by up to `span` units, one in
 * `rare` of them `mult` times as far. */
static void bf16_steps(uint8_t *buf, const uint8_t *b, int span, unsigned rare, int mult)
{
    memcpy(buf, b, FUZZ_BASE_BYTES);
    for (size_t i = 0; i < FUZZ_BASE_BYTES / 2; i++) {
        unsigned v = buf[2 * i] | (unsigned)buf[2 * i + 1] << 8;
        int d = (int)(rnd() % (2 * (unsigned)span + 1)) - span;
        if (rnd() % rare == 0) d *= mult;
        v = (v + (unsigned)d) & 0xffff;
        buf[2 * i] = (uint8_t)v;
        buf[2 * i + 1] = (uint8_t)(v >> 8);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    dir = argv[1];
    static uint8_t buf[400000];
    size_t n;

    n = safetensors(buf, 3000, 1500);
    seed("safetensors-l3", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 1);
    put("roundtrip", "safetensors", buf, 2000 < n ? 2000 : n);
    seed("safetensors-l9", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 9, 0);
    /* lossy files (format version 3): every grid, 1- and 2-byte codes, bitmap, groups */
    policy = "* abs 1e-3";
    seed("lossy-abs", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 1);
    policy = "* abs 1e-6 prune 0.3";
    seed("lossy-abs-wide-prune", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 0);
    policy = "* pointwise-rel 0.05";
    seed("lossy-prel", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 1);
    policy = "* bits 8 block 32 sym";
    seed("lossy-affine", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 0);
    policy = NULL;

    n = small_safetensors(buf);
    seed("packed-small", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 1);
    seed("packed-small-l9", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 9, 0);
    put("roundtrip", "packed-small", buf, n < 4000 ? n : 4000);

    /* npy: header + f16 data */
    const char *hdr = "{'descr': '<f2', 'fortran_order': False, 'shape': (1500,), }";
    size_t hl = 10 + strlen(hdr) + 1;
    size_t pad = (64 - hl % 64) % 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hl + pad - 10);
    buf[9] = (uint8_t)((hl + pad - 10) >> 8);
    memcpy(buf + 10, hdr, strlen(hdr));
    memset(buf + 10 + strlen(hdr), ' ', pad);
    buf[hl + pad - 1] = '\n';
    for (size_t i = 0; i < 1500; i++) {
        uint16_t h = (uint16_t)(0x3000 + (int)(gauss() * 200));
        buf[hl + pad + 2 * i] = (uint8_t)h;
        buf[hl + pad + 2 * i + 1] = (uint8_t)(h >> 8);
    }
    n = hl + pad + 3000;
    seed("npy-f16", buf, n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 6, 1);
    put("roundtrip", "npy-f16", buf, n);

    /* several chunks of small integers: compresses to a few KB */
    for (size_t i = 0; i < 160000; i += 4) {
        int32_t v = (int32_t)(gauss() * 0.7);
        memcpy(buf + i, &v, 4);
    }
    seed("raw-i32-multichunk", buf, 160002, CKPZ_INPUT_RAW, CKPZ_DTYPE_I32, 3, 1);
    seed("raw-i32-multichunk-l9", buf, 160000, CKPZ_INPUT_RAW, CKPZ_DTYPE_I32, 9, 0);
    put("roundtrip", "i32", buf, 1024);

    /* constant planes, and a zstd-friendly opaque text */
    memset(buf, 0, 200000);
    seed("zeros-multichunk", buf, 200000, CKPZ_INPUT_RAW, CKPZ_DTYPE_F64, 1, 0);
    n = 0;
    while (n < 150000) n += (size_t)sprintf((char *)buf + n, "layer.%zu.weight = %zu;\n", n % 977, n % 13);
    seed("text-zstd", buf, n, CKPZ_INPUT_RAW, CKPZ_DTYPE_NONE, 5, 1);
    put("roundtrip", "text", buf, 1500);

    /* f32 and bf16 gaussian floats (rans0 / rans1 exponent planes), odd lengths */
    for (size_t i = 0; i < 4001; i++) {
        float f = (float)(gauss() * 0.05);
        memcpy(buf + 4 * i, &f, 4);
    }
    seed("raw-f32", buf, 4 * 4001 + 3, CKPZ_INPUT_RAW, CKPZ_DTYPE_F32, 9, 0);
    seed("raw-bf16-l9", buf, 9001, CKPZ_INPUT_RAW, CKPZ_DTYPE_BF16, 9, 0);
    buf[0] = 0x83; /* dtype 3 (f32), tiled */
    buf[1] = 8;
    put("roundtrip", "f32-tiled", buf, 402);
    buf[0] = 0x01;
    buf[1] = 2;
    put("roundtrip", "bf16", buf, 3001);

    /* floats whose magnitude drifts slowly: correlated exponents (order-1 rANS) */
    for (size_t i = 0; i < 8000; i++) {
        float f = (float)(sin((double)i / 40.0) * (1.0 + 0.01 * gauss()));
        uint32_t u;
        memcpy(&u, &f, 4);
        buf[2 * i] = (uint8_t)(u >> 16);
        buf[2 * i + 1] = (uint8_t)(u >> 24);
    }
    seed("raw-bf16-drift-l5", buf, 2 * 8000, CKPZ_INPUT_RAW, CKPZ_DTYPE_BF16, 5, 1);

    /* stored: random bytes; empty original; a tiny one */
    for (size_t i = 0; i < 3000; i++) buf[i] = (uint8_t)rnd();
    seed("raw-random", buf, 3000, CKPZ_INPUT_RAW, CKPZ_DTYPE_NONE, 1, 0);
    put("roundtrip", "random", buf, 700);
    seed("empty", buf, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 0);
    seed("one-byte", "x", 1, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 0);
    put("roundtrip", "empty", buf, 0);
    put("roundtrip", "one-byte", "\x8a", 1);
    /* delta files against fuzz_base(): bf16 and f32 steps of a few units in the last
     * place with some far larger (escape transform with escapes), f16 steps (escape with
     * a plain low byte), an unchanged run (copy frames), XOR-like bit flips, and bf16
     * steps wide enough for the escape threshold T = 63 */
    based = 1;
    {
        const uint8_t *b = fuzz_base();
        bf16_steps(buf, b, 4, 8, 40);
        seed("delta-bf16-escapes", buf, FUZZ_BASE_BYTES, CKPZ_INPUT_RAW, CKPZ_DTYPE_BF16, 3, 1);
        seed("delta-f16", buf, FUZZ_BASE_BYTES / 4 - 1, CKPZ_INPUT_RAW, CKPZ_DTYPE_F16, 3, 0);
        memcpy(buf, b, FUZZ_BASE_BYTES);
        for (size_t i = FUZZ_BASE_BYTES / 8; i < FUZZ_BASE_BYTES / 4; i++) {
            uint32_t v;
            memcpy(&v, buf + 4 * i, 4);
            v += (uint32_t)(rnd() % 400000) - 200000u;
            memcpy(buf + 4 * i, &v, 4);
        }
        seed("delta-f32-escapes", buf, FUZZ_BASE_BYTES, CKPZ_INPUT_RAW, CKPZ_DTYPE_F32, 3, 1);
        memcpy(buf, b, FUZZ_BASE_BYTES);
        for (size_t i = 0; i < FUZZ_BASE_BYTES; i += 13) buf[i] ^= 1;
        seed("delta-f32-xor-l9", buf, FUZZ_BASE_BYTES, CKPZ_INPUT_RAW, CKPZ_DTYPE_F32, 9, 0);
        bf16_steps(buf, b, 24, 32, 8); /* the wide threshold (T = 63) */
        seed("delta-bf16-wide", buf, FUZZ_BASE_BYTES, CKPZ_INPUT_RAW, CKPZ_DTYPE_BF16, 3, 0);
    }
    /* groups of small tensors coded against the base (format feature 4): against
     * fuzz_gbase(), tensors equal to the base's, moved by a few units in the last place,
     * and one renamed (no counterpart: zeros in the group's base image) share a group;
     * and the base itself (copy frames) */
    based = 2;
    {
        size_t gn;
        const uint8_t *g = fuzz_gbase(&gn);
        memcpy(buf, g, gn);
        size_t hl = (size_t)g[0] | (size_t)g[1] << 8, data = 8 + hl;
        for (size_t i = data + 4 * FUZZ_GBASE_ELEMS * 4; i < gn; i += 4)
            buf[i] = (uint8_t)(buf[i] + (rnd() % 7) - 3); /* tensors 4 on moved */
        for (size_t i = 8; i + 6 <= data; i++)
            if (!memcmp(buf + i, "\"g.07\"", 6)) buf[i + 1] = 'h'; /* "h.07": a tensor the base does not have */
        seed("delta-groups", buf, gn, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 1);
        seed("delta-groups-l9", buf, gn, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 9, 0);
        seed("delta-groups-same", g, gn, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, 0);
    }
    based = 0;
    return 0;
}
