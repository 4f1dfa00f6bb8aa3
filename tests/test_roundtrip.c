/* test_roundtrip.c — the library's promise, through the public API only: every dtype,
 * special values (NaN, ±Inf, denormals, -0.0), empty and one-element tensors, odd
 * lengths, several chunk sizes, levels and thread counts, streaming with tiny reads and
 * unknown size, random access (list and extract), and failing callbacks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CKPZ_DISABLE_DEPRECATE_WARNINGS /* checks that the deprecated params fields still work */
#include "ckpz.h"
#include "testutil.h"

/* ckpz_mem_read (reads of at most m.step bytes) that fails once fail_at bytes were read
 * (if > 0). Writers are ckpz_mem sinks: grown ({.grow = 1}), or of a fixed capacity
 * where a write past it must fail. */
typedef struct {
    ckpz_mem m;
    size_t fail_at;
} rd_t;
static ptrdiff_t rd_fn(void *v, void *buf, size_t n)
{
    rd_t *r = v;
    if (r->fail_at > 0 && r->m.pos >= r->fail_at) return -1;
    return ckpz_mem_read(&r->m, buf, n);
}
static rd_t reader(const void *p, size_t n, size_t step, size_t fail_at)
{
    return (rd_t){{.data = (void *)p, .size = n, .step = step}, fail_at};
}

/* Fills n elements of dtype with realistic values plus every special value. */
static void fill(uint8_t *p, size_t bytes, ckpz_dtype t)
{
    unsigned es = ckpz_dtype_size(t);
    size_t n = bytes / es;
    for (size_t i = 0; i < n; i++) {
        double v = rng_normal() * 0.02;
        uint64_t bits = 0;
        float f = (float)v;
        uint32_t fb;
        memcpy(&fb, &f, 4);
        switch (t) {
        case CKPZ_DTYPE_F32: bits = fb; break;
        case CKPZ_DTYPE_BF16: bits = fb >> 16; break;
        case CKPZ_DTYPE_F16:
            bits = ((fb >> 16) & 0x8000) | ((((fb >> 23) & 0xff) - 112) << 10 & 0x7c00) | ((fb >> 13) & 0x3ff);
            break;
        case CKPZ_DTYPE_F64: memcpy(&bits, &v, 8); break;
        default: bits = (uint64_t)(int64_t)(v * 2000); break;
        }
        /* sprinkle special values */
        switch (rng() % 97) {
        case 0:
            bits = t == CKPZ_DTYPE_F64 ? 0x7ff8000000000001ull : t == CKPZ_DTYPE_F32 ? 0x7fc00001u : 0x7fc1;
            break; /* NaN */
        case 1:
            bits = t == CKPZ_DTYPE_F64 ? 0xfff0000000000000ull : t == CKPZ_DTYPE_F32 ? 0xff800000u : 0xff80;
            break; /* -Inf */
        case 2:
            bits = t == CKPZ_DTYPE_F64 ? 0x7ff0000000000000ull : t == CKPZ_DTYPE_F32 ? 0x7f800000u : 0x7f80;
            break; /* +Inf */
        case 3: bits = 1; break;                                      /* smallest denormal */
        case 4: bits = 1ull << (8 * es - 1); break;                    /* -0.0 */
        default: break;
        }
        memcpy(p + i * es, &bits, es);
    }
    for (size_t i = n * es; i < bytes; i++) p[i] = (uint8_t)rng();
}

static int same(const uint8_t *a, const uint8_t *b, size_t n) { return n == 0 || !memcmp(a, b, n); }

/* Compresses src with p through the streaming API (reads of `step` bytes, size hint
 * known or not), then restores it three ways and compares. */
static void roundtrip(const char *what, const uint8_t *src, size_t n, const ckpz_params *p, size_t step, int hint)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    rd_t r = reader(src, n, step, 0);
    ckpz_mem w = {.grow = 1};
    ckpz_stats st = {.struct_size = sizeof st};
    ckpz_error e = ckpz_compress_stream(ctx, p, rd_fn, &r, hint ? n : CKPZ_SIZE_UNKNOWN, ckpz_mem_write, &w, &st);
    CHECKF(e == CKPZ_OK, "%s: compress: %s", what, ckpz_ctx_message(ctx));
    if (e) goto out;
    CHECKF(st.original_bytes == n && st.compressed_bytes == w.size, "%s: stats", what);

    /* 1. one-shot decompression */
    uint64_t osz = 0;
    CHECK(ckpz_original_size(ctx, w.data, w.size, &osz) == CKPZ_OK && osz == n);
    uint8_t *back = malloc(n + 1);
    e = ckpz_decompress_buffer(ctx, p, w.data, w.size, back, n);
    CHECKF(e == CKPZ_OK && same(back, src, n), "%s: decompress_buffer: %s", what, ckpz_ctx_message(ctx));

    /* 2. streaming, tiny reads */
    rd_t r2 = reader(w.data, w.size, 3, 0);
    ckpz_mem w2 = {.grow = 1};
    e = ckpz_decompress_stream(ctx, p, rd_fn, &r2, ckpz_mem_write, &w2, NULL);
    CHECKF(e == CKPZ_OK && w2.size == n && same(w2.data, src, n), "%s: decompress_stream: %s", what,
           ckpz_ctx_message(ctx));
    free(w2.data);

    /* 3. random access: every entry extracted alone lands where its offset says */
    ckpz_archive *a;
    e = ckpz_archive_open(ctx, p, ckpz_mem_pread, &w, w.size, &a);
    CHECKF(e == CKPZ_OK, "%s: archive_open: %s", what, ckpz_ctx_message(ctx));
    if (!e) {
        ckpz_archive_info info = {.struct_size = sizeof info};
        ckpz_archive_get_info(a, &info);
        CHECK(info.original_size == n && info.compressed_size == w.size);
        uint64_t covered = 0;
        for (uint64_t i = 0; i < info.entries; i++) {
            ckpz_entry en = {.struct_size = sizeof en};
            CHECK(ckpz_archive_entry(a, i, &en) == CKPZ_OK);
            CHECK(en.offset == covered);
            ckpz_mem w3 = {.grow = 1};
            e = ckpz_archive_extract(ctx, a, i, ckpz_mem_write, &w3);
            CHECKF(e == CKPZ_OK && w3.size == en.length && same(w3.data, src + en.offset, en.length),
                   "%s: extract %llu: %s", what, (unsigned long long)i, ckpz_ctx_message(ctx));
            covered += en.length;
            free(w3.data);
        }
        CHECK(covered == n);
        CHECK(ckpz_archive_entry(a, info.entries, &(ckpz_entry){.struct_size = sizeof(ckpz_entry)}) ==
              CKPZ_ERR_NOT_FOUND);
        ckpz_archive_close(a);
    }
    free(back);
out:
    free(w.data);
    ckpz_ctx_free(ctx);
}

static void test_dtypes_raw(void)
{
    ckpz_dtype types[] = {CKPZ_DTYPE_BF16,   CKPZ_DTYPE_F16,    CKPZ_DTYPE_F32, CKPZ_DTYPE_F64,
                          CKPZ_DTYPE_F8E4M3, CKPZ_DTYPE_F8E5M2, CKPZ_DTYPE_I8,  CKPZ_DTYPE_I16,
                          CKPZ_DTYPE_I32,    CKPZ_DTYPE_I64,    CKPZ_DTYPE_U8,  CKPZ_DTYPE_NONE};
    size_t sizes[] = {0, 1, 2, 3, 4, 7, 8, 9, 1001, 65536, 65537, 200003};
    uint8_t *buf = malloc(200003);
    char what[128];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            ckpz_params p;
            ckpz_params_init(&p);
            p.format = CKPZ_INPUT_RAW;
            p.raw_dtype = types[ti];
            p.chunk_size = 65536;
            p.threads = (int)(si % 3) + 1;
            p.level = (int)(si % 10); /* 0: CKPZ_LEVEL_STORE (ckpz_experimental.h), the chunks as they are */
            fill(buf, sizes[si], types[ti]);
            snprintf(what, sizeof what, "raw %s %zu bytes T%d L%d", ckpz_dtype_name(types[ti]), sizes[si], p.threads,
                     p.level);
            roundtrip(what, buf, sizes[si], &p, sizes[si] % 2 ? 4093 : 1 << 20, (int)(si & 1));
        }
    free(buf);
}

/* A safetensors file written here by hand: header, tensors of several dtypes (one empty,
 * one with a single element), then trailing bytes the header does not mention. */
static size_t make_safetensors(uint8_t *out, size_t cap)
{
    static const struct {
        const char *name, *dt;
        ckpz_dtype t;
        size_t n;
    } ts[] = {{"emb.weight", "BF16", CKPZ_DTYPE_BF16, 70000},
              {"ln.bias", "F32", CKPZ_DTYPE_F32, 1},
              {"empty", "F16", CKPZ_DTYPE_F16, 0},
              {"h.0.w", "F32", CKPZ_DTYPE_F32, 40001},
              {"step", "I64", CKPZ_DTYPE_I64, 1},
              {"h.0.d", "F64", CKPZ_DTYPE_F64, 333}};
    char json[2048];
    size_t pos = 0, off = 0;
    pos += (size_t)snprintf(json + pos, sizeof json - pos, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
        size_t len = ts[i].n * ckpz_dtype_size(ts[i].t);
        pos += (size_t)snprintf(json + pos, sizeof json - pos,
                                ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}", ts[i].name,
                                ts[i].dt, ts[i].n, off, off + len);
        off += len;
    }
    json[pos++] = '}';
    while (pos % 8) json[pos++] = ' ';
    size_t total = 8 + pos + off + 5;
    if (total > cap) return 0;
    for (int k = 0; k < 8; k++) out[k] = (uint8_t)((uint64_t)pos >> (8 * k));
    memcpy(out + 8, json, pos);
    uint8_t *d = out + 8 + pos;
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
        size_t len = ts[i].n * ckpz_dtype_size(ts[i].t);
        fill(d, len, ts[i].t);
        d += len;
    }
    memcpy(d, "tail!", 5);
    return total;
}

static void test_safetensors(void)
{
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    size_t n = make_safetensors(buf, cap);
    CHECK(n > 0);
    size_t chunks[] = {65536, 256 << 10, 16 << 20};
    for (int k = 0; k < 3; k++)
        for (int threads = 1; threads <= 4; threads += 3) {
            ckpz_params p;
            ckpz_params_init(&p);
            p.chunk_size = chunks[k];
            p.threads = threads;
            char what[96];
            snprintf(what, sizeof what, "safetensors chunk %zu T%d", chunks[k], threads);
            roundtrip(what, buf, n, &p, 65536 + 17, threads == 1);
        }
    /* The index names tensors with dtype and shape. */
    ckpz_ctx *ctx = ckpz_ctx_create();
    void *z;
    size_t zn;
    CHECK(ckpz_compress_buffer(ctx, NULL, buf, n, &z, &zn) == CKPZ_OK);
    ckpz_mem w = {.data = z, .size = zn};
    ckpz_archive *a;
    CHECK(ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &w, zn, &a) == CKPZ_OK);
    ckpz_archive_info info = {.struct_size = sizeof info};
    ckpz_archive_get_info(a, &info);
    CHECK(info.format == CKPZ_INPUT_SAFETENSORS);
    uint64_t idx;
    ckpz_entry e = {.struct_size = sizeof e};
    CHECK(ckpz_archive_find(ctx, a, "emb.weight", &idx) == CKPZ_OK);
    CHECK(ckpz_archive_entry(a, idx, &e) == CKPZ_OK && e.dtype == CKPZ_DTYPE_BF16 && e.ndim == 1 &&
          e.shape[0] == 70000 && e.length == 140000 && e.compressed < e.length);
    CHECK(ckpz_archive_find(ctx, a, "empty", &idx) == CKPZ_OK);
    CHECK(ckpz_archive_entry(a, idx, &e) == CKPZ_OK && e.length == 0 && e.chunks == 0 && e.dtype == CKPZ_DTYPE_F16);
    CHECK(ckpz_archive_find(ctx, a, "no.such", &idx) == CKPZ_ERR_NOT_FOUND);
    CHECK(strstr(ckpz_ctx_message(ctx), "no.such") != NULL);
    ckpz_archive_close(a);
    ckpz_free(z);
    ckpz_ctx_free(ctx);
    free(buf);
}

static int abort_progress(void *opaque, uint64_t done, uint64_t total)
{
    (void)total;
    *(uint64_t *)opaque = done;
    return done > 100000;
}

static void test_failures_propagate(void)
{
    size_t n = 500000;
    uint8_t *buf = malloc(n);
    fill(buf, n, CKPZ_DTYPE_BF16);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.chunk_size = 65536;
    for (int threads = 1; threads <= 2; threads++) {
        p.threads = threads;
        rd_t r = reader(buf, n, 1 << 20, 200000);
        ckpz_mem w = {.grow = 1};
        CHECK(ckpz_compress_stream(ctx, &p, rd_fn, &r, n, ckpz_mem_write, &w, NULL) == CKPZ_ERR_READ);
        free(w.data);
        rd_t r2 = reader(buf, n, 1 << 20, 0);
        ckpz_mem w2 = {.data = malloc(100000), .capacity = 100000}; /* a write past it fails */
        CHECK(ckpz_compress_stream(ctx, &p, rd_fn, &r2, n, ckpz_mem_write, &w2, NULL) == CKPZ_ERR_WRITE);
        CHECK(strstr(ckpz_ctx_message(ctx), "write") != NULL && w2.full);
        free(w2.data);
        /* progress aborts, from the deprecated params field and from the source */
        for (int how = 0; how < 2; how++) {
            uint64_t seen = 0;
            rd_t r3 = reader(buf, n, 1 << 20, 0);
            ckpz_mem w3 = {.grow = 1};
            ckpz_source in;
            ckpz_sink out;
            ckpz_source_mem(&in, &r3.m);
            ckpz_sink_mem(&out, &w3);
            if (how == 0) {
                p.progress = abort_progress;
                p.progress_opaque = &seen;
            } else {
                in.progress = abort_progress;
                in.progress_opaque = &seen;
            }
            CHECK(ckpz_compress_io(ctx, &p, &in, &out, NULL) == CKPZ_ERR_ABORTED);
            CHECKF(seen > 100000 && seen < n, "progress (%s) saw %llu", how ? "source" : "params",
                   (unsigned long long)seen);
            free(w3.data);
            p.progress = NULL;
        }
    }
    /* bad parameters */
    p.level = 10;
    void *z;
    size_t zn;
    CHECK(ckpz_compress_buffer(ctx, &p, buf, n, &z, &zn) == CKPZ_ERR_PARAM);
    p.level = -1;
    CHECK(ckpz_compress_buffer(ctx, &p, buf, n, &z, &zn) == CKPZ_ERR_PARAM);
    p.level = 3;
    p.chunk_size = 1000;
    CHECK(ckpz_compress_buffer(ctx, &p, buf, n, &z, &zn) == CKPZ_ERR_PARAM);
    CHECK(strstr(ckpz_ctx_message(ctx), "chunk size") != NULL);
    /* destination of the wrong size */
    p.chunk_size = 0;
    CHECK(ckpz_compress_buffer(ctx, &p, buf, n, &z, &zn) == CKPZ_OK);
    CHECK(ckpz_decompress_buffer(ctx, &p, z, zn, buf, n - 1) == CKPZ_ERR_PARAM);
    ckpz_free(z);
    ckpz_ctx_free(ctx);
    free(buf);
}

/* Real-looking BF16 data must actually shrink (a coder stuck on "stored" fails this). */
static void test_ratio_sanity(void)
{
    size_t n = 1 << 20;
    uint8_t *buf = malloc(n);
    fill(buf, n, CKPZ_DTYPE_BF16);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_BF16;
    void *z;
    size_t zn;
    CHECK(ckpz_compress_buffer(ctx, &p, buf, n, &z, &zn) == CKPZ_OK);
    CHECKF(zn < n * 0.8, "bf16 gaussian compressed to %zu of %zu", zn, n);
    ckpz_free(z);
    ckpz_ctx_free(ctx);
    free(buf);
}

int main(void)
{
    test_dtypes_raw();
    test_safetensors();
    test_failures_propagate();
    test_ratio_sanity();
    return test_summary("test_roundtrip");
}
