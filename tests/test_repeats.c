/* test_repeats.c — chunks whose content repeats are found and coded with LZ (lib/codec/
 * repeats.c, codec.c's encode_alone): FP32 data of 16 distinct 1,024-value rows in a
 * seeded order, and of 64 distinct 8-value blocks (whole values recurring, as quantised
 * blocks do), must compress far beyond what byte planes coded order-0 give them (1.2x),
 * at the default level and at -9, and restore exactly; rows zero past a length (padding)
 * must gain from zstd on their planes' zero runs; the detector sees repeats and zeros
 * there and none in random bytes or fresh weights. The repeats' floors are far from the
 * measured ratios (rows ~18x, blocks 19-22x; bench/repeats for real data), so that only a
 * detector that stopped finding repeats fails them; all of them fail with it off. */
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "codec/repeats.h"
#include "testutil.h"

static unsigned share(const void *p, size_t n, int zeros)
{
    unsigned rep, zero;
    chunk_repeats(p, n, &rep, &zero);
    return zeros ? zero : rep;
}

static float *rows_data(size_t rows, size_t cols, size_t distinct)
{
    float *d = malloc(distinct * cols * sizeof *d), *x = malloc(rows * cols * sizeof *x);
    for (size_t i = 0; i < distinct * cols; i++) d[i] = (float)(0.02 * rng_normal());
    for (size_t r = 0; r < rows; r++) memcpy(x + r * cols, d + (rng() % distinct) * cols, cols * sizeof *x);
    free(d);
    return x;
}

/* Ratio of ckpz at `level` on n bytes of raw FP32, after checking the round trip. */
static double ratio(const char *what, const void *src, size_t n, int level)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = level;
    p.threads = 1;
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_F32;
    void *z = NULL;
    size_t zl = 0;
    double r = 0;
    if (ckpz_compress_buffer(ctx, &p, src, n, &z, &zl) != CKPZ_OK) {
        CHECKF(0, "%s -%d: compress: %s", what, level, ckpz_ctx_message(ctx));
    } else {
        uint8_t *back = malloc(n);
        CHECKF(ckpz_decompress_buffer(ctx, &p, z, zl, back, n) == CKPZ_OK && !memcmp(back, src, n),
               "%s -%d: restored bytes differ (%s)", what, level, ckpz_ctx_message(ctx));
        free(back);
        r = (double)n / (double)zl;
        printf("%s -%d: %zu -> %zu bytes, %.2fx\n", what, level, n, zl, r);
    }
    ckpz_free(z);
    ckpz_ctx_free(ctx);
    return r;
}

int main(void)
{
    const size_t cols = 1024, rows = 512, n = rows * cols * sizeof(float);
    float *x = rows_data(rows, cols, 16);
    CHECKF(share(x, 1u << 20, 0) >= 200, "rows: share %u of 256", share(x, 1u << 20, 0));
    CHECK(ratio("16 distinct rows", x, n, 3) >= 8.0);
    CHECK(ratio("16 distinct rows", x, n, 9) >= 8.0);
    free(x);

    float *b = rows_data(n / 32, 8, 64); /* 32-byte blocks of 8 values */
    CHECKF(share(b, 1u << 20, 0) >= 200, "blocks: share %u of 256", share(b, 1u << 20, 0));
    CHECK(ratio("64 distinct 8-value blocks", b, n, 3) >= 10.0);
    CHECK(ratio("64 distinct 8-value blocks", b, n, 9) >= 10.0);
    free(b);

    float *pad = malloc(n); /* rows zero past a seeded length: padding */
    for (size_t i = 0; i < rows; i++) {
        size_t len = (size_t)(rng() % (cols + 1));
        for (size_t j = 0; j < cols; j++) pad[i * cols + j] = j < len ? (float)(0.02 * rng_normal()) : 0.0f;
    }
    CHECKF(share(pad, 1u << 20, 1) >= ZEROS_LIKELY && share(pad, 1u << 20, 0) < REPEATS_LIKELY,
           "padded: zeros %u, repeats %u of 256", share(pad, 1u << 20, 1), share(pad, 1u << 20, 0));
    /* 2.31x measured, 2.13x with zero runs left to the planes' own choice: the floor between */
    CHECK(ratio("rows zero past a length", pad, n, 3) >= 2.22);
    free(pad);

    uint8_t *r = malloc(1u << 20);
    for (size_t i = 0; i < 1u << 20; i++) r[i] = (uint8_t)rng();
    CHECKF(share(r, 1u << 20, 0) < REPEATS_LIKELY, "random: share %u", share(r, 1u << 20, 0));
    float *w = malloc(1u << 20); /* every value drawn anew: weights */
    for (size_t i = 0; i < (1u << 20) / sizeof *w; i++) w[i] = (float)(0.02 * rng_normal());
    CHECKF(share(w, 1u << 20, 0) < REPEATS_LIKELY, "distinct rows: share %u", share(w, 1u << 20, 0));
    CHECK(share(r, 4096, 0) == 0); /* too small to sample */
    free(w);
    free(r);
    return test_summary("test_repeats");
}
