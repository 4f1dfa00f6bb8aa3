/* compress_cpu.c — one-thread compression speed per CPU-second, in memory, for A/B runs of
 * two builds on a shared, loaded machine (where wall-clock figures such as `ckpz -b`'s
 * move with the load).
 *
 *     compress_cpu LEVEL RUNS FILE...
 *
 * Per FILE: ckpz_compress_into with threads 1 at LEVEL into one buffer reused, once
 * untimed, then RUNS times timed by the process's CPU time (CLOCK_PROCESS_CPUTIME_ID:
 * every thread the library might start counts); prints the file's name, the compressed
 * bytes and the median MB/s (original bytes / CPU second / 1e6). The output is restored
 * and compared with the input once.
 * Build one binary per library to compare, e.g. the library before a change saved as
 * old.a: cc -O2 -Iinclude bench/compress_cpu.c old.a -lzstd -llz4 -ldeflate -lsnappy
 * -lpthread -lm -ldl -o cc-old (and build/libckpz.a -> cc-new), then run the two in
 * turns (cc-old, cc-new, cc-old, ...) and take the medians of the rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpz.h"

#define RUNS_MAX 64

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long len = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (len >= 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)len + 1)) &&
        fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: compress_cpu LEVEL RUNS FILE...\n");
        return 2;
    }
    int level = atoi(argv[1]), runs = atoi(argv[2]);
    if (runs < 1 || runs > RUNS_MAX) return fprintf(stderr, "RUNS: 1..%d\n", RUNS_MAX), 2;
    ckpz_ctx *ctx = ckpz_ctx_create();
    if (!ctx) return 1;
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = level;
    p.threads = 1;
    for (int a = 3; a < argc; a++) {
        size_t n = 0, w = 0;
        char *src = slurp(argv[a], &n);
        if (!src) return fprintf(stderr, "%s: cannot read\n", argv[a]), 1;
        size_t cap = ckpz_compress_bound(n);
        char *dst = malloc(cap), *back = malloc(n + 1);
        if (!dst || !back) return fprintf(stderr, "%s: out of memory\n", argv[a]), 1;
        if (ckpz_compress_into(ctx, &p, src, n, dst, cap, &w))
            return fprintf(stderr, "%s: %s\n", argv[a], ckpz_ctx_message(ctx)), 1;
        double t[RUNS_MAX];
        for (int r = 0; r < runs; r++) {
            double t0 = cpu_now();
            if (ckpz_compress_into(ctx, &p, src, n, dst, cap, &w)) return 1;
            t[r] = cpu_now() - t0;
        }
        qsort(t, (size_t)runs, sizeof *t, cmpd);
        if (ckpz_decompress_buffer(ctx, &p, dst, w, back, n) || memcmp(back, src, n))
            return fprintf(stderr, "%s: round trip failed\n", argv[a]), 1;
        const char *base = strrchr(argv[a], '/');
        printf("%s %zu %.1f\n", base ? base + 1 : argv[a], w, (double)n / t[runs / 2] / 1e6);
        free(src);
        free(dst);
        free(back);
    }
    ckpz_ctx_free(ctx);
    return 0;
}
