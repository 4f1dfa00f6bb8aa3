/* membench.c — in-memory timing driver for bench/run.
 *
 *     membench [-r RUNS] CODEC LEVEL TYPESIZE FILE
 *
 * CODEC: ckpz (public API, one thread: ckpz_compress_stream from memory into a buffer
 * made once), ckpz-buffer (the same through ckpz_compress_buffer, a new output each run as
 * bench/peers' adapter takes it: its pages' faults count, its release does not), zstd (libzstd, ZSTD_compressCCtx), lz4
 * (liblz4, LZ4_compress_fast with acceleration LEVEL = `lz4 -1` for 1), blosc (libblosc,
 * byte shuffle with TYPESIZE + the zstd codec at clevel LEVEL, one thread, automatic
 * block size). The file is read whole first; output buffers are allocated and touched
 * before the first run and reused, so only codec time is measured. Each of RUNS (default
 * 3, at least 3) compressions and decompressions is timed on its own, both as process
 * CPU time (user + sys; one thread, so per core) and wall time. Every round trip is
 * compared with the input (memcmp); a mismatch is an error (exit 1).
 *
 * Prints one JSON object: {"codec", "level", "bytes", "compressed", "c_cpu": [...],
 * "c_wall": [...], "d_cpu": [...], "d_wall": [...]} (seconds per run).
 *
 * Built by bench/run with: cc -O2 bench/membench.c -Iinclude build/libckpz.a -lzstd -llz4 -ldeflate
 * -llz4 -lblosc -lpthread -lm (Debian: libzstd-dev liblz4-dev libblosc-dev).
 */
#include <blosc.h>
#include <lz4.h>
#include <zstd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpz.h"
#include "memio.h"

#define MAX_RUNS 100

typedef struct {
    const char *codec;
    int level, typesize;
    const unsigned char *src;
    size_t size;
    unsigned char *cbuf;
    size_t ccap, csize;
    unsigned char *back;
    ckpz_ctx *ctx;
    ckpz_params params;
    void *owned; /* ckpz-buffer: the last output, the library's */
    ZSTD_CCtx *zc;
    ZSTD_DCtx *zd;
} job;

/* Releases ckpz-buffer's last output (outside the timed calls). */
static void drop_output(job *j)
{
    ckpz_free(j->owned);
    j->owned = NULL;
}

static int compress1(job *j)
{
    if (!strcmp(j->codec, "ckpz-buffer")) {
        size_t n = 0;
        if (ckpz_compress_buffer(j->ctx, &j->params, j->src, j->size, &j->owned, &n) != CKPZ_OK) {
            fprintf(stderr, "ckpz: %s\n", ckpz_ctx_message(j->ctx));
            return -1;
        }
        j->csize = n;
    } else if (!strcmp(j->codec, "ckpz")) {
        ckpz_mem in = {.data = (void *)j->src, .size = j->size}, out = {.data = j->cbuf, .capacity = j->ccap};
        if (ckpz_compress_stream(j->ctx, &j->params, ckpz_mem_read, &in, j->size, ckpz_mem_write, &out, NULL) !=
            CKPZ_OK) {
            fprintf(stderr, "ckpz: %s\n", ckpz_ctx_message(j->ctx));
            return -1;
        }
        j->csize = out.size;
    } else if (!strcmp(j->codec, "zstd")) {
        size_t r = ZSTD_compressCCtx(j->zc, j->cbuf, j->ccap, j->src, j->size, j->level);
        if (ZSTD_isError(r)) return -1;
        j->csize = r;
    } else if (!strcmp(j->codec, "lz4")) {
        int r = LZ4_compress_fast((const char *)j->src, (char *)j->cbuf, (int)j->size, (int)j->ccap, j->level);
        if (r <= 0) return -1;
        j->csize = (size_t)r;
    } else if (!strcmp(j->codec, "blosc")) {
        int r = blosc_compress_ctx(j->level, BLOSC_SHUFFLE, (size_t)j->typesize, j->size, j->src, j->cbuf, j->ccap,
                                   "zstd", 0, 1);
        if (r <= 0) return -1;
        j->csize = (size_t)r;
    } else {
        return -1;
    }
    return 0;
}

static int decompress1(job *j)
{
    if (!strncmp(j->codec, "ckpz", 4)) {
        const void *z = j->owned ? j->owned : j->cbuf;
        if (ckpz_decompress_buffer(j->ctx, &j->params, z, j->csize, j->back, j->size) != CKPZ_OK) {
            fprintf(stderr, "ckpz -d: %s\n", ckpz_ctx_message(j->ctx));
            return -1;
        }
    } else if (!strcmp(j->codec, "zstd")) {
        size_t r = ZSTD_decompressDCtx(j->zd, j->back, j->size, j->cbuf, j->csize);
        if (ZSTD_isError(r) || r != j->size) return -1;
    } else if (!strcmp(j->codec, "lz4")) {
        int r = LZ4_decompress_safe((const char *)j->cbuf, (char *)j->back, (int)j->csize, (int)j->size);
        if (r < 0 || (size_t)r != j->size) return -1;
    } else if (!strcmp(j->codec, "blosc")) {
        int r = blosc_decompress_ctx(j->cbuf, j->back, j->size, 1);
        if (r < 0 || (size_t)r != j->size) return -1;
    } else {
        return -1;
    }
    return 0;
}

static void print_list(const char *key, const double *v, int n)
{
    printf(", \"%s\": [", key);
    for (int i = 0; i < n; i++) printf("%s%.6f", i ? ", " : "", v[i]);
    printf("]");
}

int main(int argc, char **argv)
{
    int runs = 3, a = 1;
    if (argc > 2 && !strcmp(argv[1], "-r")) {
        runs = atoi(argv[2]);
        a = 3;
    }
    if (argc - a != 4 || runs < 3 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: membench [-r RUNS>=3] ckpz|ckpz-buffer|zstd|lz4|blosc LEVEL TYPESIZE FILE\n");
        return 2;
    }
    job j;
    memset(&j, 0, sizeof(j));
    j.codec = argv[a];
    j.level = atoi(argv[a + 1]);
    j.typesize = atoi(argv[a + 2]);
    FILE *f = fopen(argv[a + 3], "rb");
    if (!f) {
        perror(argv[a + 3]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    j.size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *src = malloc(j.size ? j.size : 1);
    if (!src || fread(src, 1, j.size, f) != j.size) {
        fprintf(stderr, "read failed\n");
        return 1;
    }
    fclose(f);
    j.src = src;
    j.ccap = j.size + j.size / 16 + (1u << 20);
    if (!strcmp(j.codec, "zstd")) {
        if (ZSTD_compressBound(j.size) > j.ccap) j.ccap = ZSTD_compressBound(j.size);
        j.zc = ZSTD_createCCtx();
        j.zd = ZSTD_createDCtx();
    } else if (!strncmp(j.codec, "ckpz", 4)) {
        j.ctx = ckpz_ctx_create();
        ckpz_params_init(&j.params);
        j.params.level = j.level;
        j.params.threads = 1;
    } else if (!strcmp(j.codec, "blosc")) {
        blosc_init();
    }
    j.cbuf = malloc(j.ccap);
    j.back = malloc(j.size ? j.size : 1);
    if (!j.cbuf || !j.back) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    memset(j.cbuf, 0, j.ccap);
    memset(j.back, 0, j.size);

    double c_cpu[MAX_RUNS], c_wall[MAX_RUNS], d_cpu[MAX_RUNS], d_wall[MAX_RUNS];
    /* warm-up: when a first compression takes under 0.5 s CPU (page faults, cold
     * caches weigh on it) it and one decompression are run untimed; a slower first run
     * is kept as timed run 1 */
    int first = 0;
    {
        double w = clk(CLOCK_MONOTONIC), c = clk(CLOCK_PROCESS_CPUTIME_ID);
        if (compress1(&j)) {
            fprintf(stderr, "%s: compression failed\n", j.codec);
            return 1;
        }
        c = clk(CLOCK_PROCESS_CPUTIME_ID) - c;
        w = clk(CLOCK_MONOTONIC) - w;
        if (c >= 0.5) {
            c_cpu[0] = c;
            c_wall[0] = w;
            first = 1;
        } else if (decompress1(&j)) {
            fprintf(stderr, "%s: decompression failed\n", j.codec);
            return 1;
        }
    }
    for (int i = first; i < runs; i++) {
        drop_output(&j);
        double w = clk(CLOCK_MONOTONIC), c = clk(CLOCK_PROCESS_CPUTIME_ID);
        if (compress1(&j)) {
            fprintf(stderr, "%s: compression failed\n", j.codec);
            return 1;
        }
        c_cpu[i] = clk(CLOCK_PROCESS_CPUTIME_ID) - c;
        c_wall[i] = clk(CLOCK_MONOTONIC) - w;
    }
    for (int i = 0; i < runs; i++) {
        double w = clk(CLOCK_MONOTONIC), c = clk(CLOCK_PROCESS_CPUTIME_ID);
        if (decompress1(&j)) {
            fprintf(stderr, "%s: decompression failed\n", j.codec);
            return 1;
        }
        d_cpu[i] = clk(CLOCK_PROCESS_CPUTIME_ID) - c;
        d_wall[i] = clk(CLOCK_MONOTONIC) - w;
        if (memcmp(j.back, j.src, j.size) != 0) {
            fprintf(stderr, "%s: round trip is NOT identical to the input\n", j.codec);
            return 1;
        }
        memset(j.back, 0, j.size);   /* the next run must write everything again */
    }
    printf("{\"codec\": \"%s\", \"level\": %d, \"typesize\": %d, \"bytes\": %zu, \"compressed\": %zu", j.codec, j.level,
           j.typesize, j.size, j.csize);
    print_list("c_cpu", c_cpu, runs);
    print_list("c_wall", c_wall, runs);
    print_list("d_cpu", d_cpu, runs);
    print_list("d_wall", d_wall, runs);
    printf("}\n");
    drop_output(&j);
    if (j.ctx) ckpz_ctx_free(j.ctx);
    if (j.zc) ZSTD_freeCCtx(j.zc);
    if (j.zd) ZSTD_freeDCtx(j.zd);
    free(j.cbuf);
    free(j.back);
    free(src);
    return 0;
}
