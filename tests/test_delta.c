/* test_delta.c — delta coding through the public API: a checkpoint coded against the
 * previous one restores byte for byte with every reader, at every level and thread
 * count; tensors that appear, disappear, change shape or dtype between the two are
 * coded stand-alone; an unchanged tensor costs one copy frame whatever its size; a file
 * coded against itself is tiny; raw dumps match as one tensor; the base's CRC put
 * together from the chunks (params.patch) gives the same file as a pass over the base. Errors for a missing or
 * wrong base are covered by test_corrupt (with every damage to a delta file). */
#include <stdlib.h>
#include <string.h>

#define CKPZ_DISABLE_DEPRECATE_WARNINGS /* checks that the deprecated params fields still work */
#include "ckpz.h"
#include "testutil.h"
#include "memfile.h"

typedef struct {
    const char *name, *dtype;
    size_t n;          /* elements */
    unsigned esize;
    unsigned rows;     /* shape [rows, n / rows] */
} tdesc;

/* A safetensors file of the tensors in t (data from gen). */
static uint8_t *write_st(const tdesc *t, size_t nt, size_t *len, uint8_t *const *data)
{
    char json[4096];
    size_t jl = 0, off = 0;
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "{");
    for (size_t i = 0; i < nt; i++) {
        size_t b = t[i].n * t[i].esize;
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%u,%zu],"
                               "\"data_offsets\":[%zu,%zu]}",
                               i ? "," : "", t[i].name, t[i].dtype, t[i].rows, t[i].n / t[i].rows, off, off + b);
        off += b;
    }
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "}");
    size_t hl = (jl + 7) & ~(size_t)7, n = 8 + hl + off;
    uint8_t *p = malloc(n);
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)((uint64_t)hl >> (8 * k));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, jl);
    uint8_t *d = p + 8 + hl;
    for (size_t i = 0; i < nt; i++) {
        memcpy(d, data[i], t[i].n * t[i].esize);
        d += t[i].n * t[i].esize;
    }
    *len = n;
    return p;
}

static void fill_f32(uint8_t *d, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        float f = (float)(rng_normal() * scale);
        memcpy(d + 4 * i, &f, 4);
    }
}

/* The next training step: every element moved by a few units in the last place. */
static void step_f32(uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, d + 4 * i, 4);
        f += f * (float)(rng_normal() * 1e-4);
        memcpy(d + 4 * i, &f, 4);
    }
}

static void step_bf16(uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i += 3) d[2 * i] = (uint8_t)(d[2 * i] + (rng() & 1 ? 1 : -1));
}

static int restores(ckpz_ctx *ctx, const uint8_t *z, size_t zl, const uint8_t *orig, size_t olen, const uint8_t *base,
                    size_t blen, int threads)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = threads;
    p.base = base;
    p.base_size = blen;
    uint8_t *out = malloc(olen + 1);
    int ok = ckpz_decompress_buffer(ctx, &p, z, zl, out, olen) == CKPZ_OK && !memcmp(out, orig, olen);
    free(out);
    return ok;
}

static uint64_t entry_compressed(ckpz_ctx *ctx, const uint8_t *z, size_t zl, const char *name, int *based);

static uint64_t entry_compressed(ckpz_ctx *ctx, const uint8_t *z, size_t zl, const char *name, int *based)
{
    ckpz_mem f = mem_in(z, zl, 0);
    ckpz_archive *a = NULL;
    uint64_t idx, c = UINT64_MAX;
    ckpz_entry e = {.struct_size = sizeof e};
    *based = -1;
    if (ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &f, zl, &a) == CKPZ_OK &&
        ckpz_archive_find(ctx, a, name, &idx) == CKPZ_OK && ckpz_archive_entry(a, idx, &e) == CKPZ_OK) {
        c = e.compressed;
        *based = e.based;
    }
    ckpz_archive_close(a);
    return c;
}

static uint8_t *compress(ckpz_ctx *ctx, const uint8_t *src, size_t n, const uint8_t *base, size_t blen, int level,
                         int threads, size_t *zl)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = level;
    p.threads = threads;
    p.chunk_size = 65536;
    p.base = base;
    p.base_size = blen;
    p.base_name = base ? "prev.safetensors" : NULL;
    void *z = NULL;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, src, n, &z, zl);
    CHECKF(e == CKPZ_OK, "compress: %s", ckpz_ctx_message(ctx));
    return z;
}

/* A memory sink that counts its patches. Its ckpz_mem comes first: the one opaque
 * pointer serves ckpz_mem_write and counted_patch. */
typedef struct {
    ckpz_mem m;
    int patches;
} counted;

static int counted_patch(void *v, const void *buf, size_t n, uint64_t off)
{
    counted *c = v;
    c->patches++;
    return ckpz_mem_patch(&c->m, buf, n, off);
}

/* With a patch callback the base's CRC is put together from the chunks and the bytes
 * between them and written at the end: the file must be the one a single pass over the
 * base gives, byte for byte (and ckpz_compress_buffer's, which patches on its own),
 * whether the patch comes with the sink or in the deprecated params field. */
static void check_deferred_crc(ckpz_ctx *ctx, const uint8_t *src, size_t n, const uint8_t *base, size_t blen,
                               const char *policy, int threads, const char *what)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = threads;
    p.chunk_size = 65536;
    p.base = base;
    p.base_size = blen;
    p.base_name = "prev.safetensors";
    p.policy = policy;
    size_t cap = 2 * n + (1u << 20);
    counted w[3];
    for (int k = 0; k < 3; k++) {
        w[k] = (counted){mem_out(malloc(cap), cap), 0};
        ckpz_mem r = mem_in(src, n, 0);
        ckpz_error e;
        if (k < 2) { /* no patch; the deprecated field */
            p.patch = k ? counted_patch : NULL;
            p.patch_opaque = k ? &w[k] : NULL;
            e = ckpz_compress_stream(ctx, &p, ckpz_mem_read, &r, n, ckpz_mem_write, &w[k], NULL);
        } else { /* the sink's */
            ckpz_source in;
            ckpz_sink out;
            p.patch = NULL;
            ckpz_source_mem(&in, &r);
            ckpz_sink_mem(&out, &w[k].m);
            out.patch = counted_patch;
            out.opaque = &w[k];
            e = ckpz_compress_io(ctx, &p, &in, &out, NULL);
        }
        CHECKF(e == CKPZ_OK, "%s: %s", what, ckpz_ctx_message(ctx));
    }
    for (int k = 1; k < 3; k++)
        CHECKF(w[0].patches == 0 && w[k].patches == 1 && w[0].m.size == w[k].m.size &&
                   !memcmp(w[0].m.data, w[k].m.data, w[0].m.size),
               "%s: deferred base CRC (%s) wrote another file", what, k == 1 ? "params.patch" : "sink.patch");
    void *z = NULL;
    size_t zl = 0;
    CHECK(ckpz_compress_buffer(ctx, &p, src, n, &z, &zl) == CKPZ_OK);
    CHECKF(zl == w[0].m.size && !memcmp(z, w[0].m.data, zl), "%s: ckpz_compress_buffer differs", what);
    ckpz_free(z);
    for (int k = 0; k < 3; k++) free(w[k].m.data);
}

int main(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    /* base: same, moved, bf16, gone, reshaped, retyped; next: same, moved, bf16, new,
     * reshaped (other rows), retyped (F32 -> I32, same bytes) */
    tdesc tb[] = {{"same", "F32", 100000, 4, 10}, {"moved", "F32", 60000, 4, 4},   {"half", "BF16", 90000, 2, 3},
                  {"gone", "F32", 5000, 4, 1},    {"reshaped", "F32", 6000, 4, 2}, {"retyped", "F32", 4000, 4, 1}};
    tdesc tn[] = {{"same", "F32", 100000, 4, 10}, {"moved", "F32", 60000, 4, 4},   {"half", "BF16", 90000, 2, 3},
                  {"new", "F32", 5000, 4, 1},     {"reshaped", "F32", 6000, 4, 3}, {"retyped", "I32", 4000, 4, 1}};
    uint8_t *db[6], *dn[6];
    for (int i = 0; i < 6; i++) {
        db[i] = malloc(tb[i].n * tb[i].esize);
        if (tb[i].esize == 4) fill_f32(db[i], tb[i].n, 0.02f);
        else
            for (size_t k = 0; k < tb[i].n * 2; k++) db[i][k] = (uint8_t)(k & 1 ? 0x3c + (rng() & 1) : rng());
        dn[i] = malloc(tn[i].n * tn[i].esize);
        memcpy(dn[i], db[i], tn[i].n * tn[i].esize);
    }
    step_f32(dn[1], tn[1].n);
    step_bf16(dn[2], tn[2].n);
    fill_f32(dn[3], tn[3].n, 0.02f);
    size_t bl, nl;
    uint8_t *base = write_st(tb, 6, &bl, db), *next = write_st(tn, 6, &nl, dn);

    size_t sl;
    uint8_t *alone = compress(ctx, next, nl, NULL, 0, 3, 1, &sl);
    int based;
    uint64_t alone_moved = entry_compressed(ctx, alone, sl, "moved", &based);
    uint64_t alone_half = entry_compressed(ctx, alone, sl, "half", &based);
    for (int level = 1; level <= 9; level += 4) {
        for (int threads = 1; threads <= 2; threads++) {
            size_t zl;
            uint8_t *z = compress(ctx, next, nl, base, bl, level, threads, &zl);
            if (!z) continue;
            CHECKF(restores(ctx, z, zl, next, nl, base, bl, 1) && restores(ctx, z, zl, next, nl, base, bl, 3),
                   "level %d threads %d: no byte-identical restore", level, threads);
            /* unchanged: one copy frame (32 bytes) although it spans 7 chunks */
            CHECKF(entry_compressed(ctx, z, zl, "same", &based) == 32 && based == 1, "level %d: 'same'", level);
            uint64_t m = entry_compressed(ctx, z, zl, "moved", &based);
            CHECKF(based == 1 && m < alone_moved * 3 / 4, "level %d: 'moved' %llu vs stand-alone %llu", level,
                   (unsigned long long)m, (unsigned long long)alone_moved);
            m = entry_compressed(ctx, z, zl, "half", &based);
            CHECKF(based == 1 && m < alone_half * 3 / 4, "level %d: 'half' %llu vs stand-alone %llu", level,
                   (unsigned long long)m, (unsigned long long)alone_half);
            entry_compressed(ctx, z, zl, "new", &based);
            CHECK(based == 0);
            entry_compressed(ctx, z, zl, "reshaped", &based);
            CHECK(based == 0);
            entry_compressed(ctx, z, zl, "retyped", &based);
            CHECK(based == 0);
            ckpz_free(z);
        }
    }
    /* the base's CRC from the chunks: with tensors the next file does not read ("gone"),
     * copy frames, lossy chunks, a file against itself, a base of raw bytes longer than
     * anything matched, one and two threads */
    for (int threads = 1; threads <= 2; threads++) {
        check_deferred_crc(ctx, next, nl, base, bl, NULL, threads, "safetensors");
        check_deferred_crc(ctx, next, nl, base, bl, "moved abs 1e-4", threads, "lossy");
        check_deferred_crc(ctx, next, nl, next, nl, NULL, threads, "itself");
    }
    {
        /* a base none of whose tensors match: no chunk reads it, its CRC is one pass */
        tdesc to[] = {{"other", "F32", 5000, 4, 1}};
        size_t ol;
        uint8_t *other = write_st(to, 1, &ol, &db[3]);
        check_deferred_crc(ctx, next, nl, other, ol, NULL, 1, "unrelated base");
        free(other);
    }
    {
        uint8_t *longer = malloc(bl + 1000);
        memcpy(longer, base, bl);
        memset(longer + bl, 0x5a, 1000);
        check_deferred_crc(ctx, next, nl, longer, bl + 1000, NULL, 1, "base with trailing bytes");
        free(longer);
    }

    /* a file against itself: a copy frame per entry, the rest is description */
    {
        size_t zl;
        uint8_t *z = compress(ctx, next, nl, next, nl, 3, 2, &zl);
        CHECKF(z && zl < 2000, "file against itself: %zu bytes", zl);
        CHECK(z && restores(ctx, z, zl, next, nl, next, nl, 2));
        ckpz_free(z);
    }
    /* raw dumps: one unnamed tensor each, matched by dtype and length */
    {
        ckpz_params p;
        ckpz_params_init(&p);
        p.format = CKPZ_INPUT_RAW;
        p.raw_dtype = CKPZ_DTYPE_F32;
        p.base = db[1];
        p.base_size = tb[1].n * 4;
        void *z = NULL;
        size_t zl = 0;
        CHECK(ckpz_compress_buffer(ctx, &p, dn[1], tn[1].n * 4, &z, &zl) == CKPZ_OK);
        CHECKF(zl < alone_moved * 3 / 4, "raw f32 delta: %zu bytes", zl);
        CHECK(restores(ctx, z, zl, dn[1], tn[1].n * 4, db[1], tb[1].n * 4, 2));
        ckpz_free(z);
    }
    /* a parameter error: a size without a base */
    {
        ckpz_params p;
        ckpz_params_init(&p);
        p.base_size = 10;
        void *z = NULL;
        size_t zl = 0;
        CHECK(ckpz_compress_buffer(ctx, &p, next, nl, &z, &zl) == CKPZ_ERR_PARAM);
    }
    ckpz_free(alone);
    free(base);
    free(next);
    for (int i = 0; i < 6; i++) {
        free(db[i]);
        free(dn[i]);
    }
    ckpz_ctx_free(ctx);
    return test_summary("test_delta");
}
