/* test_buffer.c — the one-shot in-memory compression calls: ckpz_compress_bound holds for
 * every input and params tried (random bytes of many sizes, tiny inputs, raw dumps, deltas
 * with the longest base name, lossy policies, and inputs built to make a described file
 * larger than the input: thousands of tiny or empty tensors with long names or 64-dim
 * shapes, and the chunk that makes the escape transform outgrow its frame bound); such
 * inputs are coded as opaque bytes and still restore; ckpz_compress_into writes exactly
 * ckpz_compress_buffer's bytes for every capacity they fit in and fails cleanly (nothing
 * written at or past the capacity: guard bytes here, exact allocations under
 * AddressSanitizer) below that; a context reused across calls with other params and
 * inputs (and after failed calls) gives the bytes a fresh context gives. */
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "memfile.h"
#include "testutil.h"

static uint8_t *load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

static uint8_t *random_bytes(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng();
    return p;
}

/* ---- safetensors files made to order ---------------------------------------------- */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* nt tensors named t<i> (padded to name_len bytes: ST_RANDOM_NAMES), of dtype (esize
 * bytes an element), each `bytes` bytes of data (random, or small values: ST_SMOOTH) with shape
 * [1, ..., 1, bytes / esize] of ndim dimensions (ndim 0: a scalar, bytes = esize), or
 * [0] when bytes is 0. */
#define ST_SMOOTH 1       /* data of small values (else random bytes) */
#define ST_RANDOM_NAMES 2 /* names padded with random letters (else with 'x') */
static uint8_t *make_st(size_t nt, size_t name_len, const char *dtype, unsigned esize, unsigned ndim, size_t bytes,
                        int how, size_t *len)
{
    sbuf h = {0};
    char tmp[256];
    sb_str(&h, "{");
    for (size_t i = 0; i < nt; i++) {
        int k = snprintf(tmp, sizeof tmp, "t%zu", i);
        sb_str(&h, i ? ",\"" : "\"");
        sb_str(&h, tmp);
        for (size_t x = (size_t)k; x < name_len; x++)
            sb_add(&h,
                   how & ST_RANDOM_NAMES ? &"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[rng() % 62]
                                         : "x",
                   1);
        snprintf(tmp, sizeof tmp, "\":{\"dtype\":\"%s\",\"shape\":[", dtype);
        sb_str(&h, tmp);
        if (!bytes) sb_str(&h, "0");
        else
            for (unsigned d = 0; d < ndim; d++) {
                snprintf(tmp, sizeof tmp, "%s%zu", d ? "," : "", d + 1 == ndim ? bytes / esize : (size_t)1);
                sb_str(&h, tmp);
            }
        snprintf(tmp, sizeof tmp, "],\"data_offsets\":[%zu,%zu]}", i * bytes, (i + 1) * bytes);
        sb_str(&h, tmp);
    }
    sb_str(&h, "}");
    size_t hl = (h.n + 7) & ~(size_t)7, n = 8 + hl + nt * bytes;
    uint8_t *p = malloc(n);
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)((uint64_t)hl >> (8 * k));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, h.p, h.n);
    for (size_t i = 0; i < nt * bytes; i++)
        p[8 + hl + i] = how & ST_SMOOTH ? (uint8_t)(i % 2 ? 0x3c : rng() % 8) : (uint8_t)rng();
    free(h.p);
    *len = n;
    return p;
}

/* A safetensors file of 2-D F32 tensors of normal values (for lossy policies). */
static uint8_t *make_st_f32(size_t nt, size_t rows, size_t cols, size_t *len)
{
    sbuf h = {0};
    char tmp[256];
    size_t b = rows * cols * 4;
    sb_str(&h, "{");
    for (size_t i = 0; i < nt; i++) {
        snprintf(tmp, sizeof tmp,
                 "%s\"layer%zu.weight\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],\"data_offsets\":[%zu,%zu]}",
                 i ? "," : "", i, rows, cols, i * b, (i + 1) * b);
        sb_str(&h, tmp);
    }
    sb_str(&h, "}");
    size_t hl = (h.n + 7) & ~(size_t)7, n = 8 + hl + nt * b;
    uint8_t *p = malloc(n);
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)((uint64_t)hl >> (8 * k));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, h.p, h.n);
    for (size_t i = 0; i < nt * rows * cols; i++) {
        float v = (float)(rng_normal() * 0.02);
        memcpy(p + 8 + hl + 4 * i, &v, 4);
    }
    free(h.p);
    *len = n;
    return p;
}

/* ---- calls ---------------------------------------------------------------------------- */
typedef struct {
    uint8_t *p;
    size_t n;
} blob;

static blob compress_buf(ckpz_ctx *ctx, const ckpz_params *p, const void *src, size_t n)
{
    blob b = {NULL, 0};
    void *z = NULL;
    ckpz_error e = ckpz_compress_buffer(ctx, p, src, n, &z, &b.n);
    CHECKF(e == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    b.p = z;
    return b;
}

/* The streaming call on a fresh context into a buffer large enough for anything. */
static blob compress_stream(const ckpz_params *p, const void *src, size_t n, size_t room)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_mem r = mem_in(src, n, 0);
    ckpz_mem w = mem_out(malloc(room), room);
    ckpz_params q = *p;
    ckpz_error e = ckpz_compress_stream(ctx, &q, ckpz_mem_read, &r, n, ckpz_mem_write, &w, NULL);
    CHECKF(e == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    ckpz_ctx_free(ctx);
    return (blob){w.data, w.size};
}

static int same(blob a, blob b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }

/* Restores z and compares with src (lossless params only). */
static void check_restores(const ckpz_params *p, blob z, const void *src, size_t n)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    uint64_t orig = 0;
    CHECK(ckpz_original_size(ctx, z.p, z.n, &orig) == CKPZ_OK && orig == n);
    uint8_t *back = malloc(n ? n : 1);
    ckpz_error e = ckpz_decompress_buffer(ctx, p, z.p, z.n, back, n);
    CHECKF(e == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    CHECK(e != CKPZ_OK || n == 0 || memcmp(back, src, n) == 0);
    free(back);
    ckpz_ctx_free(ctx);
}

static uint64_t entries(blob z)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_mem f = mem_in(z.p, z.n, 0);
    ckpz_archive *a = NULL;
    ckpz_archive_info info = {.struct_size = sizeof info};
    if (ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &f, z.n, &a) == CKPZ_OK) ckpz_archive_get_info(a, &info);
    ckpz_archive_close(a);
    ckpz_ctx_free(ctx);
    return info.entries;
}

/* ckpz_compress_into into an allocation of exactly cap bytes (AddressSanitizer sees any
 * write past it) followed, in a second allocation, by the same call with guard bytes. */
static ckpz_error into_exact(ckpz_ctx *ctx, const ckpz_params *p, const void *src, size_t n, size_t cap, blob *out)
{
    uint8_t *dst = cap ? malloc(cap) : NULL;
    size_t written = 12345;
    ckpz_error e = ckpz_compress_into(ctx, p, src, n, dst, cap, &written);
    if (e == CKPZ_OK) {
        CHECK(written <= cap);
        out->p = dst;
        out->n = written;
    } else {
        CHECK(written == 0);
        free(dst);
        out->p = NULL;
        out->n = 0;
    }
    uint8_t *g = malloc(cap + 64);
    memset(g, 0xa5, cap + 64);
    size_t w2 = 0;
    ckpz_error e2 = ckpz_compress_into(ctx, p, src, n, cap ? g : NULL, cap, &w2);
    CHECK(e2 == e);
    int intact = 1;
    for (size_t i = cap; i < cap + 64; i++) intact &= g[i] == 0xa5;
    CHECKF(intact, "bytes written past a capacity of %zu", cap);
    if (e == CKPZ_OK) CHECK(w2 == written && memcmp(g, out->p, written) == 0);
    free(g);
    return e;
}

/* Everything about one input and params: the bound holds for buffer and into, they
 * agree, it restores (lossless), and the capacities around the output's size behave.
 * Returns the output (caller frees). */
static blob check_one(ckpz_ctx *ctx, const ckpz_params *p, const void *src, size_t n, int lossless, int caps)
{
    size_t bound = ckpz_compress_bound(n);
    blob b = compress_buf(ctx, p, src, n);
    CHECKF(b.n <= bound, "%zu bytes in, %zu out, bound %zu", n, b.n, bound);
    blob c = {0};
    CHECK(into_exact(ctx, p, src, n, bound, &c) == CKPZ_OK);
    CHECKF(same(b, c), "into and buffer differ (%zu / %zu bytes)", b.n, c.n);
    free(c.p);
    if (lossless && b.p) check_restores(p, b, src, n);
    if (caps && b.n) {
        CHECK(into_exact(ctx, p, src, n, b.n, &c) == CKPZ_OK && same(b, c));
        free(c.p);
        size_t small[] = {b.n - 1, b.n / 2, 72, 1, 0};
        for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
            ckpz_error e = into_exact(ctx, p, src, n, small[k], &c);
            CHECKF(e == CKPZ_ERR_LIMIT, "capacity %zu for %zu bytes: %d", small[k], b.n, (int)e);
            CHECK(strstr(ckpz_ctx_message(ctx), "ckpz_compress_bound") != NULL);
        }
    }
    return b;
}

/* ---- the tests ------------------------------------------------------------------------- */
static void test_bound_formula(void)
{
    CHECK(ckpz_compress_bound(0) == 65536);
    CHECK(ckpz_compress_bound(1000) == 1000 + 3 + 65536);
    CHECK(ckpz_compress_bound((size_t)1 << 30) == ((size_t)1 << 30) + ((size_t)1 << 22) + 65536);
    CHECK(ckpz_compress_bound(SIZE_MAX) == 0);
    CHECK(ckpz_compress_bound(SIZE_MAX - 65536) == 0);
}

static void test_bound_random(void)
{
    static const size_t sizes[] = {
        0, 1, 2, 7, 8, 63, 100, 4095, 4096, 65535, 65536, 65537, 200003, 1u << 20, (1u << 20) + 3, (3u << 20) + 5};
    ckpz_ctx *ctx = ckpz_ctx_create();
    char longname[5001];
    memset(longname, 'b', 5000);
    longname[5000] = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        uint8_t *src = random_bytes(n), *base = random_bytes(n);
        for (int v = 0; v < 7; v++) {
            ckpz_params p;
            ckpz_params_init(&p);
            switch (v) {
            case 0: break; /* auto: opaque */
            case 1: p.level = 1, p.chunk_size = CKPZ_CHUNK_MIN, p.threads = 2; break;
            case 2:
                p.level = 9;
                if (n > (256u << 10)) continue;
                break;
            case 3: p.format = CKPZ_INPUT_RAW, p.raw_dtype = CKPZ_DTYPE_BF16; break;
            case 4: p.format = CKPZ_INPUT_RAW, p.raw_dtype = CKPZ_DTYPE_F32, p.threads = 3; break;
            case 5: /* a delta with the longest base name, against unrelated bytes */
                p.format = CKPZ_INPUT_RAW, p.raw_dtype = CKPZ_DTYPE_F16;
                p.base = n ? base : NULL, p.base_size = n ? n : 0, p.base_name = longname, p.base_depth = 7;
                break;
            case 6: p.format = CKPZ_INPUT_RAW, p.raw_dtype = CKPZ_DTYPE_F32, p.policy = "* abs 0.5\n"; break;
            }
            blob b = check_one(ctx, &p, src, n, 1, n == 65537 || n == 100);
            free(b.p);
        }
        free(src);
        free(base);
    }
    ckpz_ctx_free(ctx);
}

/* Inputs whose described file is larger than the input: coded as opaque bytes by the
 * buffer calls (the streaming call, which has no bound, keeps the description). */
static void test_bound_worst(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    struct {
        size_t nt, name_len;
        const char *dtype;
        unsigned esize, ndim;
        size_t bytes;
    } cases[] = {
        /* The description of a file is coded (format feature 3): names and shapes that
         * repeat cost little, so each case has random names, which the index, the entry
         * frames and the file's own header hold once each. */
        {3000, 250, "F32", 4, 1, 0},  /* empty tensors with long names: no data at all */
        {4000, 64, "U8", 1, 0, 1},    /* one-byte scalars */
        {600, 250, "BOOL", 1, 64, 1}, /* 64-dim shapes of ones */
        {1000, 250, "F32", 4, 2, 200}, /* small tensors of random floats */
        {20000, 64, "I8", 1, 1, 1},   /* many tensors */
    };
    ckpz_params p;
    ckpz_params_init(&p);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t n;
        uint8_t *src = make_st(cases[k].nt, cases[k].name_len, cases[k].dtype, cases[k].esize, cases[k].ndim,
                               cases[k].bytes, ST_RANDOM_NAMES, &n);
        size_t bound = ckpz_compress_bound(n);
        blob s = compress_stream(&p, src, n, 64 * n + (1u << 20));
        blob b = check_one(ctx, &p, src, n, 1, k == 0);
        CHECKF(s.n > bound, "case %zu: the described file (%zu bytes for %zu) fits the bound %zu: not a worst case", k,
               s.n, n, bound);
        CHECKF(entries(b) == 1, "case %zu: %llu entries, expected the opaque coding's one", k,
               (unsigned long long)entries(b));
        /* the same input at other levels and threads, and with a policy: still bounded */
        ckpz_params q = p;
        q.level = 1;
        q.threads = 2;
        blob b1 = check_one(ctx, &q, src, n, 1, 0);
        q.policy = "* rel 0.01\n";
        blob b2 = check_one(ctx, &q, src, n, 0, 0);
        free(b1.p);
        free(b2.p);
        free(s.p);
        free(b.p);
        free(src);
    }
    /* A file that compresses keeps its description, byte for byte the streaming call's. */
    size_t n;
    uint8_t *src = load("samples/gpt-small.f32.safetensors", &n);
    CHECK(src != NULL);
    if (src) {
        blob s = compress_stream(&p, src, n, 2 * n + (1u << 20));
        blob b = check_one(ctx, &p, src, n, 1, 1);
        CHECK(same(s, b));
        CHECK(entries(b) > 100);
        free(s.p);
        free(b.p);
        free(src);
    }
    /* A safetensors of many small 2-D tensors that do compress: described, not opaque. */
    src = make_st(2000, 20, "BF16", 2, 2, 4096, ST_SMOOTH, &n);
    blob s = compress_stream(&p, src, n, 4 * n + (1u << 20));
    blob b = check_one(ctx, &p, src, n, 1, 0);
    CHECK(same(s, b));
    CHECK(entries(b) > 2000);
    free(s.p);
    free(b.p);
    free(src);
    ckpz_ctx_free(ctx);
}

/* BF16 data and a base whose diff residuals fit the escape transform in the windows the
 * predictor samples and escape ~88% of the time elsewhere, with random low bytes: coded
 * with escape, the chunk would be ~1% larger than the input (past the frame bound). */
static uint16_t m_of(uint16_t u) { return u & 0x8000 ? u ^ 0xffff : u ^ 0x8000; }
static uint16_t m_inv(uint16_t m) { return m & 0x8000 ? m ^ 0x8000 : m ^ 0xffff; }

static void test_escape_outgrows(void)
{
    size_t n = 1u << 20, el = n / 2, win = 1024;
    uint16_t *x = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < el; i++) {
        uint16_t bv = (uint16_t)((rng() & 0x7f7f) | 0x0100);
        b[i] = bv;
        int inwin = 0;
        for (size_t w = 0; w < 4; w++) {
            size_t at = (el - win) / 3 * w;
            inwin |= i >= at && i < at + win;
        }
        uint16_t r = inwin ? (uint16_t)(rng() & 0xff) : (uint16_t)rng();
        int16_t d = (int16_t)((r >> 1) ^ (uint16_t)-(int16_t)(r & 1));
        x[i] = m_inv((uint16_t)(m_of(bv) + (uint16_t)d));
    }
    ckpz_ctx *ctx = ckpz_ctx_create();
    int levels[] = {3, 7};
    for (int k = 0; k < 2; k++) {
        ckpz_params p;
        ckpz_params_init(&p);
        p.level = levels[k];
        p.format = CKPZ_INPUT_RAW;
        p.raw_dtype = CKPZ_DTYPE_BF16;
        p.base = b;
        p.base_size = n;
        blob z = check_one(ctx, &p, x, n, 1, 0);
        blob s = compress_stream(&p, x, n, 2 * n + (1u << 20));
        CHECK(same(s, z));
        check_restores(&p, s, x, n);
        free(s.p);
        free(z.p);
    }
    ckpz_ctx_free(ctx);
    free(x);
    free(b);
}

static void test_into_args(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    uint8_t src[100], dst[100000];
    size_t w = 7;
    memset(src, 3, sizeof src);
    CHECK(ckpz_compress_into(ctx, NULL, src, sizeof src, dst, sizeof dst, NULL) == CKPZ_ERR_PARAM);
    CHECK(ckpz_compress_into(ctx, NULL, NULL, sizeof src, dst, sizeof dst, &w) == CKPZ_ERR_PARAM && w == 0);
    CHECK(ckpz_compress_into(ctx, NULL, src, sizeof src, NULL, 10, &w) == CKPZ_ERR_PARAM);
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = 12;
    CHECK(ckpz_compress_into(ctx, &p, src, sizeof src, dst, sizeof dst, &w) == CKPZ_ERR_PARAM);
    /* no context at all: works, with nowhere to keep memory */
    size_t w1 = 0, w2 = 0;
    uint8_t dst2[100000];
    CHECK(ckpz_compress_into(NULL, NULL, src, sizeof src, dst, sizeof dst, &w1) == CKPZ_OK);
    CHECK(ckpz_compress_into(ctx, NULL, src, sizeof src, dst2, sizeof dst2, &w2) == CKPZ_OK);
    CHECK(w1 == w2 && memcmp(dst, dst2, w1) == 0);
    CHECK(ckpz_compress_into(ctx, NULL, NULL, 0, dst, sizeof dst, &w) == CKPZ_OK && w > 0);
    ckpz_ctx_free(ctx);
}

/* Restores z with ctx into a new buffer of n bytes (NULL when it fails). */
static uint8_t *restore_with(ckpz_ctx *ctx, const ckpz_params *p, blob z, size_t n)
{
    uint8_t *back = malloc(n ? n : 1);
    if (ckpz_decompress_buffer(ctx, p, z.p, z.n, back, n) == CKPZ_OK) return back;
    free(back);
    return NULL;
}

/* One context through calls with other params and inputs, failures between them: the
 * bytes of a fresh context every time, and of the streaming call; decompressions on the
 * same context (which keeps its working memory for them too) restore what a fresh
 * context restores, also right after one that failed. */
static void test_context_reuse(void)
{
    size_t nf32, nbf16, nrand = 300000, nlossy;
    uint8_t *f32 = load("samples/gpt-small.f32.safetensors", &nf32);
    uint8_t *bf16 = load("samples/gpt-small.bf16.safetensors", &nbf16);
    uint8_t *rnd = random_bytes(nrand);
    uint8_t *lossy = make_st_f32(6, 64, 512, &nlossy);
    CHECK(f32 && bf16);
    if (!f32 || !bf16) return;
    uint8_t *bf16b = malloc(nbf16); /* a "next step" of the bf16 file */
    memcpy(bf16b, bf16, nbf16);
    for (size_t i = nbf16 / 3; i < nbf16; i += 7) bf16b[i] ^= 1;
    typedef struct {
        const uint8_t *src;
        size_t n;
        int level, threads;
        size_t chunk;
        const char *policy;
        const uint8_t *base;
        size_t base_size;
        ckpz_input_format format;
        ckpz_dtype dt;
    } call;
    call calls[] = {
        {f32, nf32, 3, 1, 0, NULL, NULL, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE},
        {bf16, nbf16, 1, 2, CKPZ_CHUNK_MIN, NULL, NULL, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE},
        {rnd, nrand, 3, 0, 0, NULL, NULL, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE},
        {lossy, nlossy, 3, 2, 256u << 10, "*weight* rel 0.001\n", NULL, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE},
        {bf16b, nbf16, 3, 3, 0, NULL, bf16, nbf16, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE},
        {f32, nf32, 9, 1, 4u << 20, NULL, NULL, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE},
        {f32, 100000, 6, 4, CKPZ_CHUNK_MIN, NULL, NULL, 0, CKPZ_INPUT_RAW, CKPZ_DTYPE_F32},
        {lossy, nlossy, 1, 1, 0, "* pointwise-rel 0.01\n", NULL, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE},
        {rnd, 1000, 3, 1, 0, NULL, NULL, 0, CKPZ_INPUT_RAW, CKPZ_DTYPE_I16},
        {bf16, nbf16, 3, 1, 0, "*h.0* lossless level 6\n* lossless level 1\n", NULL, 0, CKPZ_INPUT_AUTO,
         CKPZ_DTYPE_NONE},
    };
    size_t nc = sizeof calls / sizeof calls[0];
    blob fresh[sizeof calls / sizeof calls[0]];
    uint8_t *restored[sizeof calls / sizeof calls[0]]; /* by a fresh context */
    ckpz_params ps[sizeof calls / sizeof calls[0]];
    for (size_t i = 0; i < nc; i++) {
        ckpz_params *p = &ps[i];
        ckpz_params_init(p);
        p->level = calls[i].level;
        p->threads = calls[i].threads;
        p->chunk_size = calls[i].chunk;
        p->policy = calls[i].policy;
        p->base = calls[i].base;
        p->base_size = calls[i].base_size;
        p->format = calls[i].format;
        p->raw_dtype = calls[i].dt;
        ckpz_ctx *c = ckpz_ctx_create();
        fresh[i] = compress_buf(c, p, calls[i].src, calls[i].n);
        ckpz_ctx_free(c);
        blob s = compress_stream(p, calls[i].src, calls[i].n, 2 * calls[i].n + (1u << 20));
        CHECKF(same(s, fresh[i]), "call %zu: streaming and buffer differ", i);
        free(s.p);
        if (!calls[i].policy || strstr(calls[i].policy, "lossless"))
            check_restores(p, fresh[i], calls[i].src, calls[i].n);
        c = ckpz_ctx_create();
        restored[i] = restore_with(c, p, fresh[i], calls[i].n);
        CHECKF(restored[i] != NULL, "call %zu: a fresh context does not restore it: %s", i, ckpz_ctx_message(c));
        ckpz_ctx_free(c);
    }
    ckpz_ctx *ctx = ckpz_ctx_create();
    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < nc; k++) {
            size_t i = round == 1 ? nc - 1 - k : (k * 7 + (size_t)round) % nc; /* forward, backward, shuffled */
            blob b = compress_buf(ctx, &ps[i], calls[i].src, calls[i].n);
            CHECKF(same(b, fresh[i]), "round %d call %zu: reused context differs from a fresh one", round, i);
            free(b.p);
            /* into, with the same context, and a failure right after */
            uint8_t *dst = malloc(fresh[i].n);
            size_t w = 0;
            CHECK(ckpz_compress_into(ctx, &ps[i], calls[i].src, calls[i].n, dst, fresh[i].n, &w) == CKPZ_OK);
            CHECK(w == fresh[i].n && memcmp(dst, fresh[i].p, w) == 0);
            CHECK(ckpz_compress_into(ctx, &ps[i], calls[i].src, calls[i].n, dst, fresh[i].n / 2, &w) == CKPZ_ERR_LIMIT);
            free(dst);
            /* the streaming call on the reused context too */
            ckpz_mem r = mem_in(calls[i].src, calls[i].n, round == 2 ? 4093 : 0);
            ckpz_mem mw = mem_out(malloc(2 * calls[i].n + (1u << 20)), 2 * calls[i].n + (1u << 20));
            CHECK(ckpz_compress_stream(ctx, &ps[i], ckpz_mem_read, &r, round == 2 ? CKPZ_SIZE_UNKNOWN : calls[i].n,
                                       ckpz_mem_write, &mw, NULL) == CKPZ_OK);
            blob want = fresh[i];
            if (round == 2) { /* size unknown: a raw dump's shape is not known either; a fresh context's bytes */
                ckpz_ctx *c = ckpz_ctx_create();
                ckpz_mem r2 = mem_in(calls[i].src, calls[i].n, 4093);
                ckpz_mem w2 = mem_out(malloc(mw.capacity), mw.capacity);
                CHECK(ckpz_compress_stream(c, &ps[i], ckpz_mem_read, &r2, CKPZ_SIZE_UNKNOWN, ckpz_mem_write, &w2,
                                           NULL) == CKPZ_OK);
                ckpz_ctx_free(c);
                want = (blob){w2.data, w2.size};
            }
            CHECKF(same((blob){mw.data, mw.size}, want), "round %d call %zu: streaming on a reused context differs",
                   round, i);
            if (want.p != fresh[i].p) free(want.p);
            free(mw.data);
            ckpz_params bad = ps[i];
            bad.chunk_size = 1;
            void *z = NULL;
            size_t zn = 0;
            CHECK(ckpz_compress_buffer(ctx, &bad, calls[i].src, calls[i].n, &z, &zn) == CKPZ_ERR_PARAM && !z);
            /* decompression on the same context: a corrupt copy fails, then the file restores */
            uint8_t *back = restore_with(ctx, &ps[i], fresh[i], calls[i].n);
            CHECKF(back && restored[i] && !memcmp(back, restored[i], calls[i].n),
                   "round %d call %zu: decompressing on a reused context differs from a fresh one", round, i);
            free(back);
            blob bent = {malloc(fresh[i].n), fresh[i].n};
            memcpy(bent.p, fresh[i].p, bent.n);
            bent.p[bent.n / 2] ^= 0x40;
            back = restore_with(ctx, &ps[i], bent, calls[i].n);
            CHECKF(!back, "round %d call %zu: a corrupt file restored on a reused context", round, i);
            free(back);
            free(bent.p);
        }
    /* thread counts do not change the bytes */
    for (int t = 1; t <= 4; t++) {
        ckpz_params p = ps[0];
        p.threads = t;
        blob b = compress_buf(ctx, &p, f32, nf32);
        CHECK(same(b, fresh[0]));
        free(b.p);
    }
    ckpz_ctx_free(ctx);
    for (size_t i = 0; i < nc; i++) {
        free(fresh[i].p);
        free(restored[i]);
    }
    free(f32);
    free(bf16);
    free(bf16b);
    free(rnd);
    free(lossy);
}

/* An empty tensor where the input ends is a whole entry (listed, restored), in the
 * buffer and streaming calls; one after bytes the input lacks (a truncated file) is not. */
static void test_empty_at_end(void)
{
    static const char hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,64]},"
                              "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[64,64]}}";
    size_t hl = (sizeof hdr - 1 + 7) / 8 * 8, n = 8 + hl + 64;
    uint8_t *src = malloc(n);
    CHECK(src != NULL);
    if (!src) return;
    memset(src, ' ', n);
    for (int i = 0; i < 8; i++) src[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(src + 8, hdr, sizeof hdr - 1);
    for (size_t i = 0; i < 64; i++) src[8 + hl + i] = (uint8_t)(i * 37 + 11);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.format = CKPZ_INPUT_SAFETENSORS;
    blob s = compress_stream(&p, src, n, 4 * n + 4096);
    blob b = check_one(ctx, &p, src, n, 1, 0);
    CHECKF(entries(s) == 3, "streaming: %llu entries, expected the header bytes, a and the empty z",
           (unsigned long long)entries(s));
    CHECK(same(s, b));
    /* cut inside a: z's place is past the end, so it is not an entry */
    blob t = compress_stream(&p, src, n - 16, 4 * n + 4096);
    CHECKF(entries(t) < 3, "truncated: %llu entries, the empty tensor past the end kept",
           (unsigned long long)entries(t));
    free(t.p);
    free(s.p);
    free(b.p);
    free(src);
    ckpz_ctx_free(ctx);
}

/* Originals of 4 MiB and more are restored with streaming stores (archive_restore.c,
 * common/copy.h: mem_stream): BF16 and F32 tensors whose chunks start at any byte
 * of the destination (an odd header) and end in partial lines come back exactly, on one
 * thread and on three. */
static void test_streamed_restore(void)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = 3;
    ckpz_ctx *ctx = ckpz_ctx_create();
    for (int k = 0; k < 2; k++) {
        size_t n;
        uint8_t *src = k ? make_st_f32(3, 701, 1001, &n) : make_st(3, 5, "BF16", 2, 2, (3u << 19) + 6, ST_SMOOTH, &n);
        CHECKF(n >= (4u << 20), "%zu bytes: not streamed", n);
        blob z = compress_buf(ctx, &p, src, n);
        for (int t = 1; t <= 3; t += 2) {
            p.threads = t;
            check_restores(&p, z, src, n);
        }
        p.threads = 0;
        free(z.p);
        free(src);
    }
    ckpz_ctx_free(ctx);
}

int main(void)
{
    test_streamed_restore();
    test_bound_formula();
    test_into_args();
    test_bound_random();
    test_bound_worst();
    test_empty_at_end();
    test_escape_outgrows();
    test_context_reuse();
    return test_summary("test_buffer");
}
