/* bench.c — ckpz -b: compress and decompress each file in memory with ckpz and with
 * zstd -1 and -3 on exactly the same bytes, and print sizes and speeds side by side.
 *
 * Files are read whole first so that only codec time is measured (no disk, no page
 * cache). Each measurement repeats for at least -i seconds (default 1) and at least
 * three runs, and reports the median run, which shrugs off a stray context switch
 * better than the mean. ckpz runs on one thread unless -T is given, so that the
 * numbers are per core and comparable with single-threaded zstd. Every round trip is
 * compared with memcmp: a benchmark of a codec that does not restore the input is a
 * failure, not a number (with lossy options, the restored content's checksums are
 * what decompression verifies). MB/s = original bytes / seconds / 1e6, as zstd prints it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "bench.h"
#include "display.h"
#include "fileio.h"

#define BENCH_MIN_RUNS 3
#define BENCH_MAX_RUNS 10000

const char *bench_zstd_version(void) { return ZSTD_versionString(); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One codec under test: run() does one full compression or decompression and returns
 * 0 on success. */
typedef struct bench_job {
    int (*run)(struct bench_job *j);
    const void *src;
    size_t src_size;
    void *dst;
    size_t dst_cap, dst_size;
    int level;
    ckpz_ctx *ctx;
    const ckpz_params *params;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    char err[256];
} bench_job;

/* Median seconds of one run, or a negative value on failure. */
static double measure(bench_job *j, double seconds)
{
    static double times[BENCH_MAX_RUNS];
    double start = fio_now(), med;
    int n = 0;
    while (n < BENCH_MAX_RUNS && (n < BENCH_MIN_RUNS || fio_now() - start < seconds)) {
        double t0 = fio_now();
        if (j->run(j) != 0) return -1.0;
        times[n++] = fio_now() - t0;
    }
    qsort(times, (size_t)n, sizeof(times[0]), cmp_double);
    med = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    return med > 1e-9 ? med : 1e-9;
}

/* Compressed output goes to one buffer allocated before the first run and reused (a
 * ckpz_mem of fixed capacity), as zstd's does, so that no run pays for faulting in fresh
 * pages. */
static int run_ckpz_c(bench_job *j)
{
    ckpz_mem in = {.data = (void *)j->src, .size = j->src_size}, out = {.data = j->dst, .capacity = j->dst_cap};
    ckpz_error e = ckpz_compress_stream(j->ctx, j->params, ckpz_mem_read, &in, j->src_size, ckpz_mem_write, &out, NULL);
    if (e != CKPZ_OK) {
        snprintf(j->err, sizeof(j->err), "ckpz compression: %s", ckpz_ctx_message(j->ctx));
        return -1;
    }
    j->dst_size = out.size;
    return 0;
}

static int run_ckpz_d(bench_job *j)
{
    ckpz_error e = ckpz_decompress_buffer(j->ctx, j->params, j->src, j->src_size, j->dst, j->dst_cap);
    if (e != CKPZ_OK) {
        snprintf(j->err, sizeof(j->err), "ckpz decompression: %s", ckpz_ctx_message(j->ctx));
        return -1;
    }
    return 0;
}

static int run_zstd_c(bench_job *j)
{
    size_t r = ZSTD_compressCCtx(j->cctx, j->dst, j->dst_cap, j->src, j->src_size, j->level);
    if (ZSTD_isError(r)) {
        snprintf(j->err, sizeof(j->err), "zstd compression: %s", ZSTD_getErrorName(r));
        return -1;
    }
    j->dst_size = r;
    return 0;
}

static int run_zstd_d(bench_job *j)
{
    size_t r = ZSTD_decompressDCtx(j->dctx, j->dst, j->dst_cap, j->src, j->src_size);
    if (ZSTD_isError(r) || r != j->dst_cap) {
        snprintf(j->err, sizeof(j->err), "zstd decompression: %s",
                 ZSTD_isError(r) ? ZSTD_getErrorName(r) : "wrong size");
        return -1;
    }
    return 0;
}

typedef struct bench_result {
    size_t csize;
    double cspeed, dspeed; /* MB/s */
} bench_result;

static void status(const fio_prefs *p, const char *label, const char *name)
{
    if (p->verbosity >= 2 && isatty(STDERR_FILENO)) {
        fprintf(stderr, "\r%-14s %.50s ...", label, name);
        fflush(stderr);
    }
}

static void status_clear(const fio_prefs *p)
{
    if (p->verbosity >= 2 && isatty(STDERR_FILENO)) {
        fprintf(stderr, "\r%80s\r", "");
        fflush(stderr);
    }
}

static void print_line(const char *label, const char *name, size_t size, const bench_result *r)
{
    printf("%-14s %s : %9llu -> %9llu (%.3fx) %7.1f MB/s %7.1f MB/s\n", label, name, (unsigned long long)size,
           (unsigned long long)r->csize, r->csize ? (double)size / (double)r->csize : 0.0, r->cspeed, r->dspeed);
    fflush(stdout);
}

/* ckpz round trip; 0 or -1 (message printed). */
static int bench_ckpz(const fio_prefs *p, const char *name, const void *src, size_t size, bench_result *r)
{
    ckpz_params params;
    bench_job j;
    void *back = NULL;
    uint64_t orig = 0;
    double t;
    int rc = -1;

    fio_params(p, &params);
    params.threads = p->threads_set ? p->threads : 1;
    memset(&j, 0, sizeof(j));
    j.ctx = ckpz_ctx_create();
    if (!j.ctx) {
        fio_error("%s: out of memory", name);
        return -1;
    }
    j.params = &params;
    j.src = src;
    j.src_size = size;
    /* room for stored data plus frames and index (~0.01% of the input) */
    j.dst_cap = size + size / 64 + (1u << 20);
    j.dst = malloc(j.dst_cap);
    if (!j.dst) {
        snprintf(j.err, sizeof(j.err), "out of memory");
        goto fail;
    }
    j.run = run_ckpz_c;
    if ((t = measure(&j, p->bench_seconds)) < 0) goto fail;
    r->csize = j.dst_size;
    r->cspeed = (double)size / 1e6 / t;

    if (ckpz_original_size(j.ctx, j.dst, j.dst_size, &orig) != CKPZ_OK || orig != size) {
        snprintf(j.err, sizeof(j.err), "ckpz_original_size: %s", orig != size ? "wrong size" : ckpz_ctx_message(j.ctx));
        goto fail;
    }
    back = malloc(size ? size : 1);
    if (!back) {
        snprintf(j.err, sizeof(j.err), "out of memory");
        goto fail;
    }
    {
        bench_job d = j;
        d.src = j.dst;
        d.src_size = j.dst_size;
        d.dst = back;
        d.dst_cap = size;
        d.run = run_ckpz_d;
        if ((t = measure(&d, p->bench_seconds)) < 0) {
            memcpy(j.err, d.err, sizeof(j.err));
            goto fail;
        }
    }
    r->dspeed = (double)size / 1e6 / t;
    /* A lossy run restores approximations: decompression has verified every chunk's
     * checksum of what it restores, which is what can be checked here. */
    if (size && !params.policy && memcmp(back, src, size) != 0) {
        snprintf(j.err, sizeof(j.err), "ckpz round trip is NOT identical to the input");
        goto fail;
    }
    rc = 0;
fail:
    if (rc) fio_error("%s: %s", name, j.err);
    free(back);
    free(j.dst);
    ckpz_ctx_free(j.ctx);
    return rc;
}

static int bench_zstd(const fio_prefs *p, int level, const char *name, const void *src, size_t size, bench_result *r)
{
    bench_job j;
    void *comp = NULL, *back = NULL;
    size_t cap = ZSTD_compressBound(size);
    double t;
    int rc = -1;

    memset(&j, 0, sizeof(j));
    j.cctx = ZSTD_createCCtx();
    j.dctx = ZSTD_createDCtx();
    comp = malloc(cap);
    back = malloc(size ? size : 1);
    if (!j.cctx || !j.dctx || !comp || !back) {
        snprintf(j.err, sizeof(j.err), "out of memory");
        goto fail;
    }
    j.src = src;
    j.src_size = size;
    j.dst = comp;
    j.dst_cap = cap;
    j.level = level;
    j.run = run_zstd_c;
    if ((t = measure(&j, p->bench_seconds)) < 0) goto fail;
    r->csize = j.dst_size;
    r->cspeed = (double)size / 1e6 / t;
    {
        bench_job d = j;
        d.src = comp;
        d.src_size = j.dst_size;
        d.dst = back;
        d.dst_cap = size;
        d.run = run_zstd_d;
        if ((t = measure(&d, p->bench_seconds)) < 0) {
            memcpy(j.err, d.err, sizeof(j.err));
            goto fail;
        }
    }
    r->dspeed = (double)size / 1e6 / t;
    if (size && memcmp(back, src, size) != 0) {
        snprintf(j.err, sizeof(j.err), "zstd round trip is not identical to the input");
        goto fail;
    }
    rc = 0;
fail:
    if (rc) fio_error("%s: %s", name, j.err);
    free(comp);
    free(back);
    ZSTD_freeCCtx(j.cctx);
    ZSTD_freeDCtx(j.dctx);
    return rc;
}

static void print_ratio(const char *vs, const bench_result *c, const bench_result *z)
{
    printf("ckpz/%s: compress %.2fx, decompress %.2fx\n", vs, z->cspeed > 0 ? c->cspeed / z->cspeed : 0.0,
           z->dspeed > 0 ? c->dspeed / z->dspeed : 0.0);
}

int bench_files(const fio_prefs *p, const char *const *files, int n)
{
    int i, failed = 0;
    for (i = 0; i < n; i++) {
        void *data = NULL;
        size_t size = 0;
        bench_result c, z1, z3;
        char label[32];
        int threads = p->threads_set ? p->threads : 1;
        if (fio_load_file(files[i], &data, &size) != 0) {
            failed = 1;
            continue;
        }
        if (threads == 1) snprintf(label, sizeof(label), "ckpz -%d", p->level);
        else snprintf(label, sizeof(label), "ckpz -%d -T%d", p->level, threads);
        status(p, label, files[i]);
        if (bench_ckpz(p, files[i], data, size, &c) != 0) {
            status_clear(p);
            failed = 1;
            free(data);
            continue;
        }
        status_clear(p);
        print_line(label, files[i], size, &c);
        status(p, "zstd -1", files[i]);
        if (bench_zstd(p, 1, files[i], data, size, &z1) != 0) {
            status_clear(p);
            failed = 1;
            free(data);
            continue;
        }
        status_clear(p);
        print_line("zstd -1", files[i], size, &z1);
        status(p, "zstd -3", files[i]);
        if (bench_zstd(p, 3, files[i], data, size, &z3) != 0) {
            status_clear(p);
            failed = 1;
            free(data);
            continue;
        }
        status_clear(p);
        print_line("zstd -3", files[i], size, &z3);
        print_ratio("zstd-1", &c, &z1);
        print_ratio("zstd-3", &c, &z3);
        free(data);
    }
    return failed;
}
