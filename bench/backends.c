/* backends.c — each entropy back end through ckpz against the same back end on the raw
 * bytes of the same file: what exponent regrouping and per-plane coding add to zstd, lz4,
 * snappy and deflate, in ratio and in speed.
 *
 * "ckpz --codec=X" is ckpz_compress_into / ckpz_decompress_buffer on one thread with
 * params.codec = X (what `ckpz -b -T1 --codec=X` measures); "X raw" is the same library
 * at the level lib/entropy/X_backend.c uses for that ckpz level, run once over the whole
 * file as one buffer, as `lz4 FILE` would be, in memory (its output kept even where it
 * is larger than the file). Files are read whole first; each figure is the median
 * of at least three runs lasting at least -i seconds (default 1); every round trip is
 * compared with the input. MB/s = original bytes / seconds / 1e6. Prints figures only:
 * BENCHMARKS.md is written from runs on a quiet machine (bench/backends runs this).
 *
 * Build (bench/backends does it): cc -O2 -Iinclude bench/backends.c build/libckpz.a
 *     -lzstd -llz4 -lsnappy -ldeflate -lpthread -lm -ldl -o build/bench_backends
 * Usage: bench_backends [-l LEVEL] [-i SECONDS] FILE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libdeflate.h>
#include <lz4.h>
#include <lz4hc.h>
#include <snappy-c.h>
#include <zstd.h>

#include "ckpz.h"

#define MAX_RUNS 1000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed operation: run() returns 0 on success. */
typedef struct job {
    int (*run)(struct job *j);
    const uint8_t *src;
    size_t n, zlen;
    uint8_t *z, *back;
    size_t zcap;
    int level;
    ckpz_codec choice;
    ckpz_ctx *ctx;
    ZSTD_CCtx *zc;
    ZSTD_DCtx *zd;
    void *lz4state;
    struct libdeflate_compressor *dc;
    struct libdeflate_decompressor *dd;
} job;

/* Median seconds of one run, or -1 on failure. */
static double measure(job *j, double seconds)
{
    static double t[MAX_RUNS];
    int k = 0;
    double start = now_s();
    while (k < MAX_RUNS && (k < 3 || now_s() - start < seconds)) {
        double t0 = now_s();
        if (j->run(j)) return -1;
        t[k++] = now_s() - t0;
    }
    qsort(t, (size_t)k, sizeof *t, cmp_double);
    double m = k % 2 ? t[k / 2] : (t[k / 2 - 1] + t[k / 2]) / 2;
    return m > 1e-9 ? m : 1e-9;
}

static int ckpz_c(job *j)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = j->level;
    p.threads = 1;
    p.codec = j->choice;
    return ckpz_compress_into(j->ctx, &p, j->src, j->n, j->z, j->zcap, &j->zlen) != CKPZ_OK;
}

static int ckpz_d(job *j)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    return ckpz_decompress_buffer(j->ctx, &p, j->z, j->zlen, j->back, j->n) != CKPZ_OK;
}

/* The back end on the whole file, at the level its lib/entropy/X_backend.c takes for the
 * ckpz level (1-3, 4-6, 7-9). */
static int raw_c(job *j)
{
    int band = j->level <= 3 ? 0 : j->level <= 6 ? 1 : 2;
    switch (j->choice) {
    case CKPZ_CODEC_ZSTD: {
        static const int zl[3] = {3, 9, 19};
        size_t r = ZSTD_compressCCtx(j->zc, j->z, j->zcap, j->src, j->n, zl[band]);
        if (ZSTD_isError(r)) return -1;
        j->zlen = r;
        return 0;
    }
    case CKPZ_CODEC_LZ4: {
        int r = band ? LZ4_compress_HC_extStateHC(j->lz4state, (const char *)j->src, (char *)j->z, (int)j->n,
                                                  (int)j->zcap, band == 1 ? 6 : 12)
                     : LZ4_compress_fast_extState(j->lz4state, (const char *)j->src, (char *)j->z, (int)j->n,
                                                  (int)j->zcap, 1);
        j->zlen = r > 0 ? (size_t)r : 0;
        return r > 0 ? 0 : -1;
    }
    case CKPZ_CODEC_SNAPPY:
        j->zlen = j->zcap;
        return snappy_compress((const char *)j->src, j->n, (char *)j->z, &j->zlen) != SNAPPY_OK;
    default: j->zlen = libdeflate_deflate_compress(j->dc, j->src, j->n, j->z, j->zcap); return j->zlen ? 0 : -1;
    }
}

static int raw_d(job *j)
{
    switch (j->choice) {
    case CKPZ_CODEC_ZSTD: return ZSTD_decompressDCtx(j->zd, j->back, j->n, j->z, j->zlen) != j->n;
    case CKPZ_CODEC_LZ4:
        return LZ4_decompress_safe((const char *)j->z, (char *)j->back, (int)j->zlen, (int)j->n) != (int)j->n;
    case CKPZ_CODEC_SNAPPY: {
        size_t len = j->n;
        return snappy_uncompress((const char *)j->z, j->zlen, (char *)j->back, &len) != SNAPPY_OK || len != j->n;
    }
    default: return libdeflate_deflate_decompress(j->dd, j->z, j->zlen, j->back, j->n, NULL) != LIBDEFLATE_SUCCESS;
    }
}

static void line(const char *file, const char *label, size_t n, size_t zlen, double tc, double td)
{
    printf("%-28s %-22s %12zu -> %12zu %7.3fx %9.1f MB/s %9.1f MB/s\n", file, label, n, zlen,
           zlen ? (double)n / (double)zlen : 0.0, (double)n / 1e6 / tc, (double)n / 1e6 / td);
}

/* Both measurements of one back end on one file; 0, or -1 (message printed). */
static int bench(const char *file, const uint8_t *src, size_t n, int level, double seconds, ckpz_codec choice)
{
    job j = {0};
    j.src = src;
    j.n = n;
    j.level = level;
    j.choice = choice;
    size_t b1 = ckpz_compress_bound(n), b2 = ZSTD_compressBound(n) + (size_t)LZ4_compressBound((int)n) +
                                             snappy_max_compressed_length(n) +
                                             libdeflate_deflate_compress_bound(NULL, n);
    j.zcap = b1 > b2 ? b1 : b2;
    j.z = malloc(j.zcap);
    j.back = malloc(n ? n : 1);
    j.ctx = ckpz_ctx_create();
    int band = level <= 3 ? 0 : level <= 6 ? 1 : 2;
    j.zc = ZSTD_createCCtx();
    j.zd = ZSTD_createDCtx();
    j.lz4state = malloc(band ? (size_t)LZ4_sizeofStateHC() : (size_t)LZ4_sizeofState());
    j.dc = libdeflate_alloc_compressor(band == 0 ? 1 : band == 1 ? 6 : 12);
    j.dd = libdeflate_alloc_decompressor();
    const char *name = ckpz_codec_name(choice), *err = NULL;
    char label[48];
    double tc, td;
    if (!j.z || !j.back || !j.ctx || !j.zc || !j.zd || !j.lz4state || !j.dc || !j.dd ||
        n > (size_t)LZ4_MAX_INPUT_SIZE) {
        err = "out of memory";
        goto done;
    }
    j.run = ckpz_c;
    if ((tc = measure(&j, seconds)) < 0) {
        err = ckpz_ctx_message(j.ctx);
        goto done;
    }
    j.run = ckpz_d;
    if ((td = measure(&j, seconds)) < 0 || memcmp(j.back, src, n)) {
        err = "ckpz round trip failed";
        goto done;
    }
    snprintf(label, sizeof label, "ckpz -%d --codec=%s", level, name);
    line(file, label, n, j.zlen, tc, td);
    size_t ckpz_len = j.zlen;
    j.run = raw_c;
    if ((tc = measure(&j, seconds)) < 0) {
        err = "raw compression failed";
        goto done;
    }
    j.run = raw_d;
    if ((td = measure(&j, seconds)) < 0 || memcmp(j.back, src, n)) {
        err = "raw round trip failed";
        goto done;
    }
    snprintf(label, sizeof label, "%s raw", name);
    line(file, label, n, j.zlen, tc, td);
    printf("%-28s %-22s ckpz/raw ratio %.3fx\n", file, name, (double)j.zlen / (double)(ckpz_len ? ckpz_len : 1));
done:
    if (err) fprintf(stderr, "%s: %s: %s\n", file, name, err);
    free(j.z);
    free(j.back);
    ckpz_ctx_free(j.ctx);
    ZSTD_freeCCtx(j.zc);
    ZSTD_freeDCtx(j.zd);
    free(j.lz4state);
    libdeflate_free_compressor(j.dc);
    libdeflate_free_decompressor(j.dd);
    return err ? -1 : 0;
}

int main(int argc, char **argv)
{
    int level = CKPZ_LEVEL_DEFAULT, failed = 0, a = 1;
    double seconds = 1.0;
    for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
        if (!strcmp(argv[a], "-l")) level = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-i")) seconds = atof(argv[a + 1]);
        else break;
    }
    if (a >= argc || level < CKPZ_LEVEL_MIN || level > CKPZ_LEVEL_MAX) {
        fprintf(stderr, "usage: %s [-l LEVEL] [-i SECONDS] FILE...\n", argv[0]);
        return 2;
    }
    static const ckpz_codec backs[] = {CKPZ_CODEC_ZSTD, CKPZ_CODEC_LZ4, CKPZ_CODEC_SNAPPY, CKPZ_CODEC_DEFLATE};
    for (; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        uint8_t *buf = NULL;
        long n = -1;
        if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
            (buf = malloc(n ? (size_t)n : 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            const char *base = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
            for (size_t k = 0; k < sizeof backs / sizeof *backs; k++)
                failed |= bench(base, buf, (size_t)n, level, seconds, backs[k]) != 0;
        } else {
            perror(argv[a]);
            failed = 1;
        }
        if (f) fclose(f);
        free(buf);
    }
    return failed;
}
