/* deltabench.c — in-memory timing of delta checkpoints for bench/delta.
 *
 *     deltabench [-r RUNS] [-l LEVEL] [-T THREADS] [-n BASE_NAME] [-P] [-L POLICY] FILE BASE
 *
 * Public ckpz API only. Reads FILE and BASE whole, then times, each on its own, RUNS
 * (>= 3) times:
 *   sc  stand-alone compression of FILE       (ckpz_compress_stream into a reused,
 *                                              pre-touched buffer, as bench/membench.c)
 *   dc  compression of FILE with params.base = BASE (same; base_name = BASE_NAME or the
 *       base's file name, as the CLI records it; the sink's patch rewrites the buffer, as
 *       the CLI does writing a file, so the base's CRC comes from the chunks; -P: no
 *       patch, one pass over the base first, as when writing to a pipe)
 *   sb  stand-alone compression with ckpz_compress_buffer (allocates its output)
 *   db  delta compression with ckpz_compress_buffer
 *   sd  ckpz_decompress_buffer of the stand-alone file
 *   dd  ckpz_decompress_buffer of the delta file with params.base = BASE
 * The base's CRC, its description (tensor index) and the matching all happen inside
 * the timed calls. Every decompression is compared with FILE (memcmp) and the output
 * buffer is cleared between runs; a mismatch or an error exits 1. One untimed warm-up
 * of each mode first. -L POLICY codes lossily (params.policy: the text of a --policy
 * file, `* auto` for --lossy=auto; BASE then the previous file's restored content, as a
 * closed-loop chain codes against): every decompression is then compared with the
 * warm-up's of the same mode (the library checks each against the checksum of what the
 * writer reconstructed).
 *
 * Prints one JSON object: {"bytes", "base_bytes", "standalone", "delta", "runs": {MODE:
 * {"cpu": [...], "wall": [...]}}} (seconds per run; cpu = process CPU time, user + sys).
 * -m sc,dc,... times only the modes listed (for profiling one of them; a decompression
 * or buffer mode still runs its stream compression once, untimed, in the warm-up; the
 * JSON then holds only the listed modes and the size of a mode not run is 0).
 *
 * Built by bench/delta with: cc -O2 bench/deltabench.c -Iinclude build/libckpz.a -lzstd -llz4 -ldeflate
 * -lpthread -lm
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpz.h"
#include "memio.h"

#define MAX_RUNS 100

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
    if (!p || n < 0 || fread(p, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "deltabench: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

static ckpz_ctx *ctx;
static const unsigned char *src, *base;
static size_t size, base_size;
static ckpz_params ps, pd; /* stand-alone, delta */
static unsigned char *cbuf[2], *back;
static size_t ccap, csize[2];
static int patch = 1; /* dc: a seekable output (the sink's patch); -P: one pass over the base first */
static const char *policy;           /* -L: lossy; decompressions compared with the first of their mode */
static unsigned char *first[2];      /* -L: that first decompression, stand-alone and delta */

static void fail(const char *what)
{
    fprintf(stderr, "deltabench: %s: %s\n", what, ckpz_ctx_message(ctx));
    exit(1);
}

/* mode: 0 sc, 1 dc, 2 sb, 3 db, 4 sd, 5 dd */
static void run1(int mode)
{
    int d = mode & 1;
    const ckpz_params *p = d ? &pd : &ps;
    if (mode < 2) {
        ckpz_mem in = {.data = (void *)src, .size = size}, out = {.data = cbuf[d], .capacity = ccap};
        ckpz_source s;
        ckpz_sink k;
        ckpz_source_mem(&s, &in);
        ckpz_sink_mem(&k, &out);
        if (!(d && patch)) k.patch = NULL; /* else a seekable output, as the CLI's file: the base CRC from the chunks */
        if (ckpz_compress_io(ctx, p, &s, &k, NULL) != CKPZ_OK) fail(d ? "delta compression" : "compression");
        csize[d] = out.size;
    } else if (mode < 4) {
        void *o = NULL;
        size_t n = 0;
        if (ckpz_compress_buffer(ctx, p, src, size, &o, &n) != CKPZ_OK)
            fail(d ? "delta compression (buffer)" : "compression (buffer)");
        if (n != csize[d] || memcmp(o, cbuf[d], n) != 0) {
            fprintf(stderr, "deltabench: ckpz_compress_buffer and ckpz_compress_stream differ (%s)\n",
                    d ? "delta" : "stand-alone");
            exit(1);
        }
        ckpz_free(o);
    } else {
        if (ckpz_decompress_buffer(ctx, p, cbuf[d], csize[d], back, size) != CKPZ_OK)
            fail(d ? "delta decompression" : "decompression");
    }
}

static void check_back(int mode)
{
    if (mode >= 4 && policy) {
        unsigned char **f = &first[mode - 4];
        if (!*f) {
            if (!(*f = malloc(size ? size : 1))) {
                fprintf(stderr, "deltabench: out of memory\n");
                exit(1);
            }
            memcpy(*f, back, size);
        } else if (memcmp(back, *f, size) != 0) {
            fprintf(stderr, "deltabench: %s lossy decompressions differ\n", mode == 5 ? "delta" : "stand-alone");
            exit(1);
        }
        memset(back, 0, size);
    } else if (mode >= 4) {
        if (memcmp(back, src, size) != 0) {
            fprintf(stderr, "deltabench: %s round trip is NOT identical to the input\n",
                    mode == 5 ? "delta" : "stand-alone");
            exit(1);
        }
        memset(back, 0, size);
    }
}

int main(int argc, char **argv)
{
    int runs = 3, level = 3, threads = 1, opt;
    const char *base_name = NULL, *only = NULL;
    while ((opt = getopt(argc, argv, "r:l:T:n:m:PL:")) != -1) {
        switch (opt) {
        case 'r': runs = atoi(optarg); break;
        case 'l': level = atoi(optarg); break;
        case 'T': threads = atoi(optarg); break;
        case 'n': base_name = optarg; break;
        case 'm': only = optarg; break;
        case 'P': patch = 0; break;
        case 'L': policy = optarg; break;
        default: goto usage;
        }
    }
    if (argc - optind != 2 || runs < 3 || runs > MAX_RUNS) {
    usage:
        fprintf(stderr,
                "usage: deltabench [-r RUNS>=3] [-l LEVEL] [-T THREADS] [-n BASE_NAME] [-m MODE,...] [-P] [-L POLICY] "
                "FILE BASE\n");
        return 2;
    }
    src = slurp(argv[optind], &size);
    base = slurp(argv[optind + 1], &base_size);
    if (!base_name) {
        const char *s = strrchr(argv[optind + 1], '/');
        base_name = s ? s + 1 : argv[optind + 1];
    }
    ctx = ckpz_ctx_create();
    ckpz_params_init(&ps);
    ps.level = level;
    ps.threads = threads;
    ps.policy = policy;
    pd = ps;
    pd.base = base;
    pd.base_size = base_size;
    pd.base_name = base_name;
    ccap = size + size / 8 + (1u << 20);
    cbuf[0] = malloc(ccap);
    cbuf[1] = malloc(ccap);
    back = malloc(size ? size : 1);
    if (!ctx || !cbuf[0] || !cbuf[1] || !back) {
        fprintf(stderr, "deltabench: out of memory\n");
        return 1;
    }
    memset(cbuf[0], 0, ccap);
    memset(cbuf[1], 0, ccap);
    memset(back, 0, size);

    static const char *names[6] = {"sc", "dc", "sb", "db", "sd", "dd"};
    static const int order[6] = {0, 1, 4, 5, 2, 3}; /* stream first: the buffer modes compare with it */
    double cpu[6][MAX_RUNS], wall[6][MAX_RUNS];
    int timed[6];
    for (int m = 0; m < 6; m++) {
        size_t l = strlen(names[m]);
        const char *at = only ? strstr(only, names[m]) : NULL;
        timed[m] = !only || (at && (at == only || at[-1] == ',') && (at[l] == ',' || at[l] == 0));
    }
    for (int k = 0; k < 6; k++) { /* warm-up; a timed mode's stream run comes first */
        int m = order[k];
        if (!timed[m] && !(m < 2 && (timed[m + 2] || timed[m + 4]))) continue;
        run1(m);
        check_back(m);
    }
    /* runs interleaved (sc dc sd dd sb db, sc dc ...) so that drift on a shared machine
     * weighs on every mode alike */
    for (int i = 0; i < runs; i++) {
        for (int k = 0; k < 6; k++) {
            int m = order[k];
            if (!timed[m]) continue;
            double w = clk(CLOCK_MONOTONIC), c = clk(CLOCK_PROCESS_CPUTIME_ID);
            run1(m);
            cpu[m][i] = clk(CLOCK_PROCESS_CPUTIME_ID) - c;
            wall[m][i] = clk(CLOCK_MONOTONIC) - w;
            check_back(m);
        }
    }
    printf("{\"bytes\": %zu, \"base_bytes\": %zu, \"standalone\": %zu, \"delta\": %zu, \"threads\": %d, "
           "\"level\": %d, \"runs\": {",
           size, base_size, csize[0], csize[1], threads, level);
    for (int m = 0, first = 1; m < 6; m++) {
        if (!timed[m]) continue;
        printf("%s\"%s\": {\"cpu\": [", first ? "" : ", ", names[m]);
        first = 0;
        for (int i = 0; i < runs; i++) printf("%s%.6f", i ? ", " : "", cpu[m][i]);
        printf("], \"wall\": [");
        for (int i = 0; i < runs; i++) printf("%s%.6f", i ? ", " : "", wall[m][i]);
        printf("]}");
    }
    printf("}}\n");
    ckpz_ctx_free(ctx);
    free(cbuf[0]);
    free(cbuf[1]);
    free(back);
    free(first[0]);
    free(first[1]);
    free((void *)src);
    free((void *)base);
    return 0;
}
