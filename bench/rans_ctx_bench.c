/* rans_ctx_bench.c — codecs 8 and 10 (rANS with a small context) against order-0 rANS on
 * exponent planes: coded size, encode and decode MB/s (thread CPU time, medians of 5),
 * every round trip checked; then the selector's choice (ent_encode, exponent hint), which
 * compiled against another build's library compares the two builds' choices.
 * Input: a file of planes, each a u32 length then its bytes (bench/rans_ctx_planes.py
 * writes plane 0 of the float transform of every 4 MiB chunk of a safetensors file).
 * Build (after make build): gcc -O2 -std=c11 -D_DEFAULT_SOURCE -Iinclude -Ilib bench/rans_ctx_bench.c \
 *   build/libckpz.a -lzstd -llz4 -ldeflate -lsnappy -lm -ldl -lpthread -o rans_ctx_bench
 * Usage: rans_ctx_bench PLANES [level [selector]] (selector: that row only); CKPZ_CPU=scalar|avx2|avx512 caps the loops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "entropy/ent_internal.h"

#define RUNS 5

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: rans_ctx_bench PLANES [level]\n");
        return 2;
    }
    int level = argc > 2 ? atoi(argv[2]) : 3;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return perror(argv[1]), 1;
    fseek(f, 0, SEEK_END);
    long fl = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)fl);
    if (!buf || fread(buf, 1, (size_t)fl, f) != (size_t)fl) return fprintf(stderr, "read failed\n"), 1;
    fclose(f);
    size_t np = 0, off[4096], len[4096], total = 0;
    for (size_t o = 0; o + 4 <= (size_t)fl && np < 4096; np++) {
        uint32_t l;
        memcpy(&l, buf + o, 4);
        off[np] = o + 4;
        len[np] = l;
        total += l;
        o += 4 + l;
    }
    ent_ctx *c = ent_ctx_create();
    /* order 0 forced, codec 8 forced, codec 10 forced, then the selector (ent_encode, exponent hint) */
    static const uint8_t ids[4] = {ENT_RANS0, ENT_RANSCTX, ENT_RANSCTXM, 255};
    uint8_t **enc = malloc(np * sizeof *enc), *codec = malloc(np);
    size_t *el = malloc(np * sizeof *el);
    uint8_t *out = malloc(4u << 20);
    int only_sel = argc > 3 && !strcmp(argv[3], "selector");
    for (int k = only_sel ? 3 : 0; k < 4; k++) {
        double te[RUNS], td[RUNS];
        size_t csize = 0;
        for (size_t i = 0; i < np; i++) enc[i] = malloc(ent_bound(len[i]));
        for (int r = 0; r < RUNS; r++) {
            double t0 = now();
            csize = 0;
            for (size_t i = 0; i < np; i++) {
                el[i] = ids[k] == 255 ? ent_encode(c, buf + off[i], len[i], enc[i], ent_bound(len[i]), level,
                                                   ENT_HINT_EXPONENT, &codec[i])
                                      : ent_encode_with(c, ids[k], buf + off[i], len[i], enc[i], ent_bound(len[i]),
                                                        level, &codec[i]);
                csize += el[i];
            }
            te[r] = now() - t0;
            t0 = now();
            int bad = 0;
            for (size_t i = 0; i < np; i++) bad |= ent_decode(c, codec[i], enc[i], el[i], out, len[i]);
            td[r] = now() - t0;
            for (size_t i = 0; i < np; i++)
                if (bad || ent_decode(c, codec[i], enc[i], el[i], out, len[i]) || memcmp(out, buf + off[i], len[i]))
                    return fprintf(stderr, "plane %zu: round trip failed\n", i), 1;
        }
        size_t fallback = 0, tabs = 0;
        for (size_t i = 0; i < np; i++) {
            fallback += codec[i] != ids[k] && ids[k] != 255;
            if (codec[i] != ENT_RANSCTX && codec[i] != ENT_RANSCTXM) continue;
            const uint8_t *q = enc[i] + 2; /* m, K, then K tables */
            uint16_t fr[256];
            for (unsigned t = 0; t < enc[i][1]; t++) rans_table_read(&q, enc[i] + el[i], fr);
            tabs += (size_t)(q - enc[i]);
        }
        printf("%-8s %zu planes %zu bytes -> %zu (%.4f of raw; %zu stored; %zu table bytes)  encode %.0f MB/s  decode "
               "%.0f MB/s\n",
               ids[k] == 255 ? "selector" : ent_codec_name(ids[k]), np, total, csize, (double)csize / (double)total,
               fallback, tabs, (double)total / median(te) / 1e6, (double)total / median(td) / 1e6);
        for (size_t i = 0; i < np; i++) free(enc[i]);
    }
    ent_ctx_free(c);
    return 0;
}
