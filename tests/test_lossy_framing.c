/* test_lossy_framing.c — lossy chunks whose codes cost next to nothing.
 *
 * At a bound above a chunk's values every code is the centre and a lossy frame is all
 * framing (frame header, quant header, five plane descriptors); the encoder codes the
 * restored bytes as they are where that takes less (a chunk of zeros: one constant
 * plane). Checked on a raw FP32 tensor of several chunks: every element within the
 * bound, the entry still lossy with the error statistics of what was restored, fewer
 * bytes than the lossy frames' framing alone; the same with a few values off the
 * centre (restored bytes that are not constant), and laid around a base.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "container/container.h"
#include "memfile.h"
#include "testutil.h"
#include "transforms/quant.h"

enum { R = 256, C = 1024, N = R * C, CHUNK = 65536 };
#define BOUND 1e-2

/* The bytes of the lossy frame of a chunk before any code: header, quant header, and
 * the descriptors of its five planes. */
#define LOSSY_FRAMING_MIN (CTR_FRAME_SIZE + QUANT_HDR + 5 * CTR_PLANE_DESC)

static float *compress_restore(ckpz_ctx *ctx, const float *x, const float *base, ckpz_entry *en, void **zout,
                               size_t *zl)
{
    uint64_t shape[2] = {R, C};
    ckpz_params p;
    ckpz_params_init(&p);
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_F32;
    p.raw_ndim = 2;
    p.raw_shape = shape;
    p.chunk_size = CHUNK;
    p.policy = "* abs 0.01\n";
    p.base = base;
    p.base_size = base ? N * sizeof *base : 0;
    void *z = NULL;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, x, N * sizeof *x, &z, zl);
    CHECKF(e == CKPZ_OK, "compress: %s", ckpz_ctx_message(ctx));
    if (e != CKPZ_OK) return NULL;
    *zout = z;
    ckpz_mem f = mem_in(z, *zl, 0);
    ckpz_archive *a = NULL;
    CHECKF(ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &f, *zl, &a) == CKPZ_OK, "open: %s", ckpz_ctx_message(ctx));
    CHECK(a && ckpz_archive_entry(a, 0, en) == CKPZ_OK);
    en->shape = NULL; /* the archive's, gone with it */
    ckpz_archive_close(a);
    ckpz_params d;
    ckpz_params_init(&d);
    d.base = base;
    d.base_size = p.base_size;
    float *out = malloc(N * sizeof *out);
    e = ckpz_decompress_buffer(ctx, &d, z, *zl, out, N * sizeof *out);
    CHECKF(e == CKPZ_OK, "decompress: %s", ckpz_ctx_message(ctx));
    return out;
}

/* Every element within the bound; returns the largest error. */
static double max_error(const float *x, const float *y)
{
    double mx = 0;
    for (size_t i = 0; i < N; i++) {
        double e = fabs((double)y[i] - (double)x[i]);
        mx = e > mx ? e : mx;
    }
    CHECKF(mx <= BOUND, "max error %g over the bound", mx);
    return mx;
}

static void check_case(ckpz_ctx *ctx, const char *what, const float *x, const float *base, int zeros)
{
    ckpz_entry en = {.struct_size = sizeof en};
    void *z = NULL;
    size_t zl = 0;
    float *y = compress_restore(ctx, x, base, &en, &z, &zl);
    if (!y) return;
    double mx = max_error(x, y);
    size_t nz = 0;
    for (size_t i = 0; i < N; i++) nz += y[i] == 0 && !signbit(y[i]);
    if (zeros) CHECKF(nz == N, "%s: %zu of %d restored as +0", what, nz, N);
    CHECKF(en.lossy && en.chunks == (N * 4 + CHUNK - 1) / CHUNK, "%s: lossy %d, %llu chunks", what, en.lossy,
           (unsigned long long)en.chunks);
    CHECKF(fabs(en.max_error - mx) <= 1e-12 * (1 + mx), "%s: listed max error %g, measured %g", what, en.max_error, mx);
    CHECKF(en.compressed < en.chunks * LOSSY_FRAMING_MIN, "%s: %llu bytes in %llu chunks, lossy framing alone %llu",
           what, (unsigned long long)en.compressed, (unsigned long long)en.chunks,
           (unsigned long long)(en.chunks * LOSSY_FRAMING_MIN));
    if (getenv("CKPZ_TEST_VERBOSE"))
        printf("%s: %llu bytes in %llu chunks, max error %g\n", what, (unsigned long long)en.compressed,
               (unsigned long long)en.chunks, mx);
    free(y);
    free(z);
}

int main(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    float *x = malloc(N * sizeof *x), *x2 = malloc(N * sizeof *x2);
    /* all within 0.4 of the bound of zero: every code the centre, restored as zeros */
    for (size_t i = 0; i < N; i++) x[i] = (float)((rng() % 2001 - 1000.0) / 1000.0 * 0.4 * BOUND);
    check_case(ctx, "zeros", x, NULL, 1);
    /* two values per chunk on other grid points: restored bytes not constant */
    for (size_t c = 0; c < N / (CHUNK / 4); c++) {
        x[c * (CHUNK / 4) + 7] = (float)(6 * BOUND);
        x[c * (CHUNK / 4) + 100] = (float)(-10 * BOUND);
    }
    check_case(ctx, "a few off the centre", x, NULL, 0);
    /* laid around a base: a change within 0.4 of the bound restores as the base */
    for (size_t i = 0; i < N; i++) x2[i] = x[i] + (float)((rng() % 2001 - 1000.0) / 1000.0 * 0.4 * BOUND);
    check_case(ctx, "around a base", x2, x, 0);
    free(x);
    free(x2);
    ckpz_ctx_free(ctx);
    if (test_failures) fprintf(stderr, "test_lossy_framing: %d failures\n", test_failures);
    return test_failures != 0;
}
