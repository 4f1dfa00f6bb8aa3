/* gradbench.c — gradient packing and unpacking speed on one core (ckpz_grad_*,
 * doc/gradients.md), the figures of issue 30's ">= 2 GB/s per core for 8-bit": for each
 * CKPZ_CPU level, dtype, bit width and rounding, a buffer of N normal-ish values is
 * packed (plain and with error feedback) and unpacked REPS times; the median run gives
 * GB/s of the gradient's own bytes (N * element size / time), on the calling thread,
 * and the packet's size as times fewer bytes than the FP32 gradient; the rows "rANS"
 * entropy-code the codes (ckpz_grad_params.entropy). The values are a sum of four
 * uniforms (about normal: the flattest codes absmax gives); with T set (gradbench N REPS
 * BLOCK T) a Student t of T degrees of freedom instead, heavier-tailed as real gradients
 * are (t of 3-5 fits layer gradients of small transformers).
 * Then FP32 sparsification (top 1 %, a threshold keeping about as many; 8-bit and FP32
 * values: pack, pack with error feedback, unpack, unpack_add, and how many times fewer
 * bytes than the FP32 gradient) and the sum of two dense packets (ckpz_grad_sum).
 * A benchmark, not a test: it checks nothing but that each call succeeds. The library
 * reads CKPZ_CPU once, so each instruction-set level is one run:
 *
 * Usage: [CKPZ_CPU=scalar|avx2|avx512] gradbench [N [REPS [BLOCK]]]
 *        (defaults: 4194304 elements, 9 runs, block 256) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CKPZ_EXPERIMENTAL
#include "ckpz.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp);
    return t[n / 2];
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 4194304;
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    uint32_t block = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 256;
    int tdf = argc > 4 ? atoi(argv[4]) : 0;
    if (!n || reps < 1 || reps > 1000) return fprintf(stderr, "usage: gradbench [N [REPS [BLOCK]]]\n"), 2;
    float *f32 = malloc(n * 4), *res = malloc(n * 4), *back = malloc(n * 4);
    uint16_t *h16 = malloc(n * 2);
    uint64_t s = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        double v = 0;
        for (int k = 0; k < 4; k++)
            s ^= s << 13, s ^= s >> 7, s ^= s << 17, v += (double)(s >> 11) / 9007199254740992.0;
        f32[i] = (float)((v - 2.0) * 1e-3);
        if (tdf > 0) { /* Student t: a normal over the root of a chi-square's mean */
            double z = (v - 2.0) * 3.4641016, c2 = 0; /* unit variance */
            for (int k = 0; k < tdf; k++) {
                double u = 0;
                for (int j = 0; j < 4; j++)
                    s ^= s << 13, s ^= s >> 7, s ^= s << 17, u += (double)(s >> 11) / 9007199254740992.0;
                u = (u - 2.0) * 1.7320508; /* about normal, unit variance */
                c2 += u * u;
            }
            f32[i] = (float)(z / __builtin_sqrt(c2 / tdf + 1e-30) * 1e-3);
        }
    }
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.block = block;
    size_t cap;
    p.bits = 4;
    size_t cap4;
    ckpz_grad_packet_size(ctx, &p, n, &cap4);
    p.bits = 8;
    ckpz_grad_packet_size(ctx, &p, n, &cap);
    void *pkt = malloc(cap > cap4 ? cap : cap4);
    double *t = malloc((size_t)reps * sizeof *t);
    printf("gradbench: %llu elements, block %u, median of %d runs, GB/s of the gradient's bytes, one core\n",
           (unsigned long long)n, (unsigned)block, reps);
    printf("%-7s %-5s %-4s %-15s %8s %8s %8s %8s\n", "cpu", "dtype", "bits", "rounding", "pack", "pack+ef", "unpack",
           "x fewer");
    const char *isa = getenv("CKPZ_CPU") ? getenv("CKPZ_CPU") : "default";
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    {
        for (int d = 0; d < 3; d++) {
            unsigned es = ckpz_dtype_size(dts[d]);
            const void *g = f32;
            if (es == 2) { /* the top half of each float: a bf16 buffer; good enough as f16 bits too */
                for (uint64_t i = 0; i < n; i++) {
                    uint32_t u;
                    memcpy(&u, &f32[i], 4);
                    h16[i] = dts[d] == CKPZ_DTYPE_BF16 ? (uint16_t)(u >> 16) : (uint16_t)(0x1000u + (u >> 20 & 0x7ff));
                }
                g = h16;
            }
            for (unsigned bits = 8; bits; bits = bits == 8 ? 4 : bits == 4 ? 1 : 0)
                for (int v = 0; v < (bits == 1 ? 1 : 3); v++) { /* 1-bit signs: nearest only, raw */
                    double r[3];
                    int sto = v == 1;
                    p.bits = bits, p.stochastic = sto, p.entropy = v == 2;
                    size_t w;
                    for (int k = 0; k < 3; k++) {
                        memset(res, 0, n * 4);
                        for (int i = 0; i < reps; i++) {
                            p.seed = (uint64_t)i;
                            double t0 = now();
                            ckpz_error e = CKPZ_OK;
                            if (k == 0)
                                e = ckpz_grad_pack(ctx, &p, dts[d], g, n, NULL, pkt, cap > cap4 ? cap : cap4, &w);
                            if (k == 1)
                                e = ckpz_grad_pack(ctx, &p, dts[d], g, n, res, pkt, cap > cap4 ? cap : cap4, &w);
                            if (k == 2) e = ckpz_grad_unpack(ctx, pkt, w, dts[d], back, n);
                            t[i] = now() - t0;
                            if (e) return fprintf(stderr, "gradbench: %s\n", ckpz_ctx_message(ctx)), 1;
                        }
                        r[k] = (double)n * es / median(t, reps) / 1e9;
                    }
                    printf("%-7s %-5s %-4u %-15s %8.2f %8.2f %8.2f %8.2f\n", isa, ckpz_dtype_name(dts[d]), bits,
                           v == 2 ? "nearest, rANS"
                           : sto  ? "stochastic"
                                  : "nearest",
                           r[0], r[1], r[2], 4.0 * (double)n / (double)w);
                }
            p.entropy = 0;
        }
    }
    /* Sparsification (FP32 gradients): top-k and a threshold chosen to keep about the
     * same 1 %, 8-bit and FP32 values; unpack writes the dense buffer, unpack_add adds
     * into one. Then the sum of two 8-bit (and 4-bit) packets, GB/s of one gradient. */
    printf("\n%-7s %-24s %8s %8s %8s %8s %8s\n", "cpu", "sparse (f32)", "pack", "pack+ef", "unpack", "unp+add",
           "x fewer");
    float thr = 0;
    {
        float *mag = malloc(n * 4);
        for (uint64_t i = 0; i < n; i++) mag[i] = f32[i] < 0 ? -f32[i] : f32[i];
        qsort(mag, n, 4, cmpf);
        thr = mag[n - n / 100 - 1];
        free(mag);
    }
    for (int c = 0; c < 4; c++) {
        ckpz_grad_params q;
        ckpz_grad_params_init(&q);
        q.kind = c < 2 ? CKPZ_GRAD_TOPK : CKPZ_GRAD_THRESHOLD, q.density = 0.01, q.threshold = thr;
        q.bits = c & 1 ? 32 : 8;
        size_t qcap, w = 0;
        if (ckpz_grad_packet_size(ctx, &q, n, &qcap))
            return fprintf(stderr, "gradbench: %s\n", ckpz_ctx_message(ctx)), 1;
        void *qp = malloc(qcap);
        double r[4], ratio = 0;
        for (int kk = 0; kk < 4; kk++) {
            int k = kk < 2 ? 1 - kk : kk; /* with error feedback first: unpack reads a plain packet */
            memset(res, 0, n * 4);
            for (int i = 0; i < reps; i++) {
                if (k == 1) memset(res, 0, n * 4); /* a residual of one step, not of REPS on one gradient */
                double t0 = now();
                ckpz_error e = CKPZ_OK;
                if (k < 2) e = ckpz_grad_pack(ctx, &q, CKPZ_DTYPE_F32, f32, n, k ? res : NULL, qp, qcap, &w);
                if (k == 2) e = ckpz_grad_unpack(ctx, qp, w, CKPZ_DTYPE_F32, back, n);
                if (k == 3) e = ckpz_grad_unpack_add(ctx, qp, w, back, n);
                t[i] = now() - t0;
                if (e) return fprintf(stderr, "gradbench: %s\n", ckpz_ctx_message(ctx)), 1;
            }
            r[k] = (double)n * 4 / median(t, reps) / 1e9;
            if (k == 0) ratio = 4.0 * (double)n / (double)w;
        }
        char name[64];
        snprintf(name, sizeof name, "%s %s", c < 2 ? "top 1 %" : "threshold ~1 %", c & 1 ? "fp32" : "8-bit");
        printf("%-7s %-24s %8.2f %8.2f %8.2f %8.2f %8.1f\n", isa, name, r[0], r[1], r[2], r[3], ratio);
        free(qp);
    }
    printf("\n%-7s %-24s %8s\n", "cpu", "sum of 2 packets (f32)", "sum");
    for (unsigned bits = 8; bits; bits = bits == 8 ? 4 : bits == 4 ? 1 : 0) {
        p.bits = bits, p.stochastic = 0, p.entropy = 0;
        size_t la, lb, w;
        void *b2 = malloc(cap), *o = malloc(cap);
        ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, f32, n, NULL, pkt, cap, &la);
        ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, back, n, NULL, b2, cap, &lb);
        const void *two[2] = {pkt, b2};
        size_t lens[2] = {la, lb};
        for (int i = 0; i < reps; i++) {
            double t0 = now();
            ckpz_error e = ckpz_grad_sum(ctx, two, lens, 2, o, cap, &w);
            t[i] = now() - t0;
            if (e) return fprintf(stderr, "gradbench: %s\n", ckpz_ctx_message(ctx)), 1;
        }
        char name[64];
        snprintf(name, sizeof name, "%u-bit", bits);
        printf("%-7s %-24s %8.2f\n", isa, name, (double)n * 4 / median(t, reps) / 1e9);
        free(b2), free(o);
    }
    ckpz_ctx_free(ctx);
    free(f32), free(res), free(back), free(h16), free(pkt), free(t);
    return 0;
}
