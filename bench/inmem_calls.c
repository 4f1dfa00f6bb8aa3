/* inmem_calls.c — the library's one-shot calls as bench/peers' worker makes them, in C:
 * ckpz_compress_buffer (one context kept, threads 1) then ckpz_decompress_buffer into
 * fresh memory (an anonymous mapping faulted in at once), the heap handed back
 * (malloc_trim) before each; CPU time, medians of RUNS rounds after one warm-up; page
 * faults per call. MODE "cd" alternates the two as the worker does, "d" restores one
 * file again and again (what the decoder costs with its memory still in cache).
 *
 *     inmem_calls FILE [RUNS [LEVEL [MODE]]]
 *
 * Build: cc -O2 -Iinclude bench/inmem_calls.c -o inmem_calls build/libckpz.so -Wl,-rpath,$PWD/build
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "ckpz.h"

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: inmem_calls FILE [RUNS [LEVEL [cd|d]]]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 9, level = argc > 3 ? atoi(argv[3]) : 3;
    int both = argc <= 4 || strcmp(argv[4], "d") != 0;
    if (runs < 1 || runs > 1000) runs = 9;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return perror(argv[1]), 1;
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    rewind(f);
    char *src = malloc(n ? n : 1);
    if (!src || fread(src, 1, n, f) != n) return fprintf(stderr, "%s: read error\n", argv[1]), 1;
    fclose(f);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = level;
    p.threads = 1;
    double *c = calloc((size_t)runs, sizeof *c), *d = calloc((size_t)runs, sizeof *d);
    long cf = 0, df = 0;
    void *z = NULL;
    size_t zn = 0;
    for (int r = 0; r <= runs; r++) {
        malloc_trim(0);
        long f0 = faults();
        double t0 = cpu();
        if ((r == 0 || both) && ckpz_compress_buffer(ctx, &p, src, n, &z, &zn))
            return fprintf(stderr, "compress: %s\n", ckpz_ctx_message(ctx)), 1;
        double t1 = cpu();
        cf += faults() - f0;
        malloc_trim(0);
        long f2 = faults();
        double t2 = cpu();
        uint64_t on = 0;
        void *dst = MAP_FAILED;
        if (!ckpz_original_size(ctx, z, zn, &on) && on == n)
            dst = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (dst == MAP_FAILED || ckpz_decompress_buffer(ctx, &p, z, zn, dst, n))
            return fprintf(stderr, "decompress: %s\n", ckpz_ctx_message(ctx)), 1;
        double t3 = cpu();
        df += faults() - f2;
        if (memcmp(dst, src, n)) return fprintf(stderr, "%s: not restored byte for byte\n", argv[1]), 1;
        munmap(dst, n ? n : 1);
        if (both || r == runs) ckpz_free(z);
        if (r) c[r - 1] = t1 - t0, d[r - 1] = t3 - t2;
    }
    qsort(c, (size_t)runs, sizeof *c, cmp);
    qsort(d, (size_t)runs, sizeof *d, cmp);
    printf("ratio %.4f  compress %7.1f  decompress %7.1f MB/s per core (CPU time, medians of %d); page faults a "
           "call: compress %ld, decompress %ld (its output's included)\n",
           (double)n / (double)zn, both ? (double)n / c[runs / 2] / 1e6 : 0.0, (double)n / d[runs / 2] / 1e6, runs,
           cf / (runs + 1), df / (runs + 1));
    ckpz_ctx_free(ctx);
    free(src), free(c), free(d);
    return 0;
}
