/* entropy_bench.c — measures the entropy stage on real checkpoint bytes.
 *
 * Reads a raw little-endian tensor dump, cuts it into chunks, turns each chunk into
 * byte planes the way the container does (rotate each element left by one bit so the
 * sign sits in the low bit, then split most-significant byte first), and codes every
 * plane with ent_encode, checking each round trip. Reports the whole-file ratio (16
 * bytes of framing counted per plane), plane-only and whole-input MB/s (medians of 5),
 * the selector's choices, and, on the same chunks, zstd -1 and htscodecs' 4x16 rANS
 * (exponent plane, order 0 and 1) as yardsticks, so the numbers are comparable within
 * one run. Timings are thread CPU time (the build machines are shared). The
 * split/join here is plain C: built with -O2 it is slower than the product's
 * transform stage will be; -O3 on this file vectorises it. Build (htscodecs optional):
 *   gcc -O2 -std=c11 -D_DEFAULT_SOURCE -Iinclude -Ilib -DHAVE_HTSCODECS \
 *       lib/entropy/\*.c lib/common/cpu.c lib/common/dtype.c bench/entropy_bench.c -lzstd -llz4 -ldeflate \
 *       -lhtscodecs -lm -ldl \
 *       -o entropy_bench
 * CKPZ_CPU=scalar in the environment forces the portable loops, CKPZ_CPU=avx2 the AVX2
 * ones (lib/common/cpu.h).
 * Usage: entropy_bench FILE DTYPE [chunk_KiB [level]], DTYPE a float of 2 or 4 bytes
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "ckpz.h"
#include "entropy/ent_internal.h"
#include "entropy/entropy.h"

#ifdef HAVE_HTSCODECS
#include <htscodecs/rANS_static4x16.h>
#endif

#define RUNS 5

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* CPU time: the build machine is shared */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, RUNS, sizeof *v, cmpd);
    return v[RUNS / 2];
}

static void split(const uint8_t *in, size_t nel, int w, uint8_t **pl)
{
    if (w == 2) {
        for (size_t i = 0; i < nel; i++) {
            uint16_t v = (uint16_t)(in[2 * i] | in[2 * i + 1] << 8);
            v = (uint16_t)(v << 1 | v >> 15);
            pl[0][i] = (uint8_t)(v >> 8);
            pl[1][i] = (uint8_t)v;
        }
    } else {
        for (size_t i = 0; i < nel; i++) {
            uint32_t v;
            memcpy(&v, in + 4 * i, 4);
            v = v << 1 | v >> 31;
            pl[0][i] = (uint8_t)(v >> 24);
            pl[1][i] = (uint8_t)(v >> 16);
            pl[2][i] = (uint8_t)(v >> 8);
            pl[3][i] = (uint8_t)v;
        }
    }
}

static void join(uint8_t *out, size_t nel, int w, uint8_t **pl)
{
    if (w == 2) {
        for (size_t i = 0; i < nel; i++) {
            uint16_t v = (uint16_t)(pl[0][i] << 8 | pl[1][i]);
            v = (uint16_t)(v >> 1 | v << 15);
            out[2 * i] = (uint8_t)v;
            out[2 * i + 1] = (uint8_t)(v >> 8);
        }
    } else {
        for (size_t i = 0; i < nel; i++) {
            uint32_t v = (uint32_t)pl[0][i] << 24 | (uint32_t)pl[1][i] << 16 | (uint32_t)pl[2][i] << 8 | pl[3][i];
            v = v >> 1 | v << 31;
            memcpy(out + 4 * i, &v, 4);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE DTYPE [chunk_KiB [level]] (DTYPE: a float of 2 or 4 bytes)\n", argv[0]);
        return 2;
    }
    int w = (int)ckpz_dtype_size(ckpz_dtype_from_name(argv[2]));
    if (w != 2 && w != 4) {
        fprintf(stderr, "%s: not a float type of 2 or 4 bytes\n", argv[2]);
        return 2;
    }
    size_t chunk = (argc > 3 ? (size_t)atol(argv[3]) : 256) * 1024;
    int level = argc > 4 ? atoi(argv[4]) : 3;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return perror(argv[1]), 2;
    fseek(f, 0, SEEK_END);
    size_t N = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    N -= N % (size_t)w;
    uint8_t *in = malloc(N), *back = malloc(N);
    if (!in || !back || fread(in, 1, N, f) != N) return 2;
    fclose(f);
    size_t nchunks = (N + chunk - 1) / chunk, maxel = chunk / (size_t)w;
    /* Encoded planes of all chunks are kept so decode can be timed separately. */
    uint8_t **enc = calloc(nchunks * (size_t)w, sizeof *enc);
    size_t *elen = calloc(nchunks * (size_t)w, sizeof *elen);
    uint8_t *codec = calloc(nchunks * (size_t)w, 1);
    uint8_t *pl[4], *dp[4];
    for (int k = 0; k < w; k++) {
        pl[k] = malloc(maxel);
        dp[k] = malloc(maxel);
    }
    for (size_t i = 0; i < nchunks * (size_t)w; i++) enc[i] = malloc(ent_bound(maxel));
    ent_ctx *c = ent_ctx_create();
    double te[RUNS], tew[RUNS], td[RUNS], tdw[RUNS], te0[RUNS], td0[RUNS];
    size_t total = 0, tot_plane[4] = {0}, raw_plane[4] = {0};
    for (int run = 0; run < RUNS; run++) {
        double a = 0, b = 0, a0 = 0;
        double t0 = now();
        total = 0;
        memset(tot_plane, 0, sizeof tot_plane);
        memset(raw_plane, 0, sizeof raw_plane);
        for (size_t ch = 0; ch < nchunks; ch++) {
            size_t len = ch + 1 == nchunks ? N - ch * chunk : chunk, nel = len / (size_t)w;
            split(in + ch * chunk, nel, w, pl);
            for (int k = 0; k < w; k++) {
                size_t id = ch * (size_t)w + (size_t)k;
                double s = now();
                elen[id] = ent_encode(c, pl[k], nel, enc[id], ent_bound(nel), level,
                                      k == 0 ? ENT_HINT_EXPONENT : ENT_HINT_MANTISSA, &codec[id]);
                double e = now() - s;
                a += e;
                if (k == 0) a0 += e;
                total += elen[id] + 16;
                tot_plane[k] += elen[id] + 16;
                raw_plane[k] += nel;
            }
        }
        te[run] = a;
        te0[run] = a0;
        tew[run] = now() - t0;
        t0 = now();
        a0 = 0;
        for (size_t ch = 0; ch < nchunks; ch++) {
            size_t len = ch + 1 == nchunks ? N - ch * chunk : chunk, nel = len / (size_t)w;
            for (int k = 0; k < w; k++) {
                size_t id = ch * (size_t)w + (size_t)k;
                double s = now();
                if (ent_decode(c, codec[id], enc[id], elen[id], dp[k], nel)) {
                    fprintf(stderr, "decode failed chunk %zu plane %d\n", ch, k);
                    return 1;
                }
                double e = now() - s;
                b += e;
                if (k == 0) a0 += e;
            }
            join(back + ch * chunk, nel, w, dp);
        }
        td[run] = b;
        td0[run] = a0;
        tdw[run] = now() - t0;
        if (memcmp(in, back, N)) {
            fprintf(stderr, "round trip mismatch\n");
            return 1;
        }
    }
    int cnt[4][ENT_CODEC_LIMIT] = {{0}};
    for (size_t ch = 0; ch < nchunks; ch++)
        for (int k = 0; k < w; k++) cnt[k][codec[ch * (size_t)w + (size_t)k]]++;
    double MB = (double)N / 1e6, MB0 = (double)raw_plane[0] / 1e6;
    printf("%s %s chunk %zu KiB level %d: ratio %.4f  planes:", argv[1], argv[2], chunk >> 10, level,
           (double)N / (double)total);
    for (int k = 0; k < w; k++) printf(" %.3f", (double)raw_plane[k] / (double)tot_plane[k]);
    printf("\n  ckpz planes: enc %.0f MB/s dec %.0f MB/s | whole (split+code): enc %.0f dec %.0f MB/s"
           " | exp plane only: enc %.0f dec %.0f MB/s\n",
           MB / median(te), MB / median(td), MB / median(tew), MB / median(tdw), MB0 / median(te0), MB0 / median(td0));
    printf("  selector:");
    for (int k = 0; k < w; k++) {
        printf(" p%d[", k);
        for (int q = 0; q < ENT_CODEC_LIMIT; q++)
            if (cnt[k][q]) printf(" %s:%d", ent_codec_name((uint8_t)q), cnt[k][q]);
        printf(" ]");
    }
    printf("\n");

    /* zstd -1 on the same unsplit chunks. */
    ZSTD_CCtx *zc = ZSTD_createCCtx();
    ZSTD_DCtx *zd = ZSTD_createDCtx();
    size_t zb = ZSTD_compressBound(chunk);
    uint8_t *zbuf = malloc(zb * nchunks);
    size_t *zlen = malloc(nchunks * sizeof *zlen), ztot = 0;
    for (int run = 0; run < RUNS; run++) {
        double t0 = now();
        ztot = 0;
        for (size_t ch = 0; ch < nchunks; ch++) {
            size_t len = ch + 1 == nchunks ? N - ch * chunk : chunk;
            zlen[ch] = ZSTD_compressCCtx(zc, zbuf + ch * zb, zb, in + ch * chunk, len, 1);
            ztot += zlen[ch];
        }
        te[run] = now() - t0;
        t0 = now();
        for (size_t ch = 0; ch < nchunks; ch++) {
            size_t len = ch + 1 == nchunks ? N - ch * chunk : chunk;
            if (ZSTD_decompressDCtx(zd, back + ch * chunk, len, zbuf + ch * zb, zlen[ch]) != len) return 1;
        }
        td[run] = now() - t0;
    }
    printf("  zstd -1 same chunks: ratio %.4f enc %.0f MB/s dec %.0f MB/s\n", (double)N / (double)ztot, MB / median(te),
           MB / median(td));

#ifdef HAVE_HTSCODECS
    /* htscodecs 4x16 rANS on the exponent planes only, against our exponent numbers. */
    static const int orders[4] = {0, RANS_ORDER_X32, 1, 1 | RANS_ORDER_X32};
    static const char *oname[4] = {"o0", "o0 x32", "o1", "o1 x32"};
    for (int oi = 0; oi < 4; oi++) {
        size_t htot = 0;
        double he[RUNS], hd[RUNS];
        for (int run = 0; run < RUNS; run++) {
            he[run] = hd[run] = 0;
            htot = 0;
            for (size_t ch = 0; ch < nchunks; ch++) {
                size_t len = ch + 1 == nchunks ? N - ch * chunk : chunk, nel = len / (size_t)w;
                split(in + ch * chunk, nel, w, pl);
                unsigned int ol = 0, dl = 0;
                double s = now();
                unsigned char *o = rans_compress_4x16(pl[0], (unsigned)nel, &ol, orders[oi]);
                he[run] += now() - s;
                s = now();
                unsigned char *d = rans_uncompress_4x16(o, ol, &dl);
                hd[run] += now() - s;
                if (!d || dl != nel || memcmp(d, pl[0], nel))
                    return fprintf(stderr, "htscodecs round trip failed\n"), 1;
                htot += ol + 16;
                free(o);
                free(d);
            }
        }
        printf("  htscodecs %-6s exp plane: ratio %.4f (ckpz %.4f) enc %.0f dec %.0f MB/s\n", oname[oi],
               MB0 / ((double)htot / 1e6), (double)raw_plane[0] / (double)tot_plane[0], MB0 / median(he),
               MB0 / median(hd));
    }
#endif
    return 0;
}
