/* test_planes_gpu.cu — the device byte-plane split and merge (lib/gpu/planes.cu) against
 * the CPU's (lib/transforms/planes.c), then their speed. Needs a CUDA GPU: built and run
 * by tests/gpu/run.sh, not by CMake (see tests/gpu/README.md).
 *
 * Check: for esize 2, 4 and 8, XF_FLOAT and XF_INT (and XF_NONE), n in {0, 1, 7, 1000003,
 * 512 MiB + 3}, random bytes and real-looking values (normal(0, 0.02) as FP32, BF16, FP64),
 * in three layouts — planes packed as the codec lays them (plane i at i * elems), planes
 * padded to 256-byte starts, and everything shifted by one byte (unaligned) — the planes
 * the device writes must equal xf_split's byte for byte, and the device merge of
 * xf_split's planes must give the input back. Any mismatch: its place, exit 1.
 * Benchmark: split and merge of 1 GiB (BF16 and FP32 values, XF_FLOAT), median of 10
 * after warm-up, timed with CUDA events, and the pinned device-to-host copy of 1 GiB.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/gpu.h"
extern "C" {
#include "common/cpu.h"
#include "transforms/planes.h"
}

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        cudaError_t err_ = (x);                                                                   \
        if (err_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            exit(2);                                                                              \
        }                                                                                         \
    } while (0)

#define BIG ((size_t)512 << 20)
#define PAD 256 /* room before and after every buffer, and the padded layout's alignment */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* normal(0, 0.02) by Box-Muller, two values per call. */
static void normal2(double *a, double *b)
{
    double u = ((next_u64() >> 11) + 1.0) / 9007199254740993.0, v = (next_u64() >> 11) / 9007199254740992.0;
    double r = 0.02 * sqrt(-2.0 * log(u));
    *a = r * cos(6.283185307179586 * v), *b = r * sin(6.283185307179586 * v);
}

struct data {
    const char *name;
    uint8_t *bytes; /* BIG + PAD bytes, pinned */
};

static uint8_t *pinned(size_t n)
{
    void *p;
    CHECK(cudaMallocHost(&p, n));
    return (uint8_t *)p;
}

static void fill_random(uint8_t *p, size_t n)
{
    memset(p, 0, n);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = next_u64();
        memcpy(p + i, &v, std::min<size_t>(8, n - i));
    }
}

static void fill_real(uint8_t *p, size_t n, unsigned esize)
{
    memset(p, 0, n); /* the bytes past the last pair of values */
    for (size_t i = 0; i + 2 * esize <= n; i += 2 * esize) {
        double a, b;
        normal2(&a, &b);
        if (esize == 8) {
            memcpy(p + i, &a, 8), memcpy(p + i + 8, &b, 8);
        } else {
            float f[2] = {(float)a, (float)b};
            if (esize == 4) {
                memcpy(p + i, f, 8);
            } else { /* BF16: FP32 rounded to nearest even on its top 16 bits */
                for (int k = 0; k < 2; k++) {
                    uint32_t u;
                    memcpy(&u, &f[k], 4);
                    uint16_t h = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
                    memcpy(p + i + 2 * k, &h, 2);
                }
            }
        }
    }
}

/* Buffers of one size for every case: host (pinned) and device, PAD bytes of slack. */
static uint8_t *h_cpu, *h_gpu, *h_out, *d_src, *d_pl, *d_out;
static long failures, cases;

/* Plane i's offset in the plane buffer in a layout (0 packed, 1 padded, 2 packed + 1). */
static void layout(int lay, unsigned np, const size_t *sizes, size_t *off)
{
    size_t o = lay == 2 ? 1 : 0;
    for (unsigned i = 0; i < np; i++) {
        off[i] = o;
        o += sizes[i];
        if (lay == 1) o = (o + PAD - 1) / PAD * PAD;
    }
}

static int first_diff(const uint8_t *a, const uint8_t *b, size_t n, size_t *at)
{
    if (!memcmp(a, b, n)) return 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            *at = i;
            return 1;
        }
    return 0;
}

static void check(const char *what, uint8_t xf, uint8_t esize, const uint8_t *src_all, size_t n, int lay)
{
    static const char *lay_name[] = {"packed", "padded", "shifted"};
    size_t sizes[XF_MAX_PLANES], off[XF_MAX_PLANES];
    unsigned np = xf_plane_sizes(xf, esize, n, sizes);
    if (!np) {
        fprintf(stderr, "no planes for xf %u esize %u\n", xf, esize);
        exit(2);
    }
    layout(lay, np, sizes, off);
    size_t so = lay == 2 ? 1 : 0, span = off[np - 1] + sizes[np - 1];
    const uint8_t *src = src_all + so;
    uint8_t *cp[XF_MAX_PLANES], *dp[XF_MAX_PLANES];
    for (unsigned i = 0; i < np; i++) cp[i] = h_cpu + off[i], dp[i] = d_pl + off[i];
    cases++;

    /* split: the device's planes against xf_split's */
    xf_split(xf, esize, src, n, cp);
    CHECK(cudaMemset(d_pl, 0xa5, span + PAD));
    CHECK(cudaMemcpy(d_src + so, src, n, cudaMemcpyHostToDevice));
    CHECK(xf_gpu_split(xf, esize, d_src + so, n, dp, 0));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h_gpu, d_pl, span, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned i = 0; i < np && !bad; i++) {
        size_t at;
        if (first_diff(h_cpu + off[i], h_gpu + off[i], sizes[i], &at)) {
            fprintf(stderr, "MISMATCH split %s xf %u esize %u n %zu %s: plane %u byte %zu: cpu %02x gpu %02x\n", what,
                    xf, esize, n, lay_name[lay], i, at, h_cpu[off[i] + at], h_gpu[off[i] + at]);
            bad = 1;
        }
    }

    /* merge: the device merge of xf_split's planes gives src back */
    CHECK(cudaMemcpy(d_pl, h_cpu, span, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_out, 0x5a, n + PAD));
    CHECK(xf_gpu_merge(xf, esize, (const uint8_t *const *)dp, n, d_out + so, 0));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h_out, d_out, n + so + 1, cudaMemcpyDeviceToHost));
    size_t at;
    if (first_diff(src, h_out + so, n, &at)) {
        fprintf(stderr, "MISMATCH merge %s xf %u esize %u n %zu %s: byte %zu: in %02x gpu %02x\n", what, xf, esize, n,
                lay_name[lay], at, src[at], h_out[so + at]);
        bad = 1;
    } else if (h_out[so + n] != 0x5a) { /* and nothing past the end */
        fprintf(stderr, "MISMATCH merge %s xf %u esize %u n %zu %s: wrote past the end\n", what, xf, esize, n,
                lay_name[lay]);
        bad = 1;
    }
    failures += bad;
}

static double median_ms(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/* Median time of 10 runs of f after 3 warm-up runs, in ms. */
template <typename F> static double time_it(F f)
{
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) f();
    std::vector<float> t;
    for (int i = 0; i < 10; i++) {
        CHECK(cudaEventRecord(a));
        f();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return median_ms(t);
}

static void bench(const char *what, uint8_t esize, const uint8_t *host, size_t hn, int shifted)
{
    size_t n = (size_t)1 << 30, so = shifted ? 1 : 0;
    size_t elems = n / esize;
    uint8_t *src, *pl, *out;
    CHECK(cudaMalloc(&src, n + PAD));
    CHECK(cudaMalloc(&pl, n + PAD));
    CHECK(cudaMalloc(&out, n + PAD));
    for (size_t o = 0; o < n; o += hn)
        CHECK(cudaMemcpy(src + so + o, host, std::min(hn, n - o), cudaMemcpyHostToDevice));
    uint8_t *p[XF_MAX_PLANES];
    for (unsigned i = 0; i < esize; i++) p[i] = pl + so + i * elems;
    double ts = time_it([&] { CHECK(xf_gpu_split(XF_FLOAT, esize, src + so, n, p, 0)); });
    double tm = time_it([&] { CHECK(xf_gpu_merge(XF_FLOAT, esize, (const uint8_t *const *)p, n, out + so, 0)); });
    CHECK(cudaDeviceSynchronize());
    printf("bench %-5s esize %u %-7s 1 GiB: split %.3f ms = %6.1f GB/s (%6.1f GB/s read+write), merge %.3f ms = %6.1f "
           "GB/s (%6.1f GB/s read+write)\n",
           what, esize, shifted ? "shifted" : "aligned", ts, n / ts / 1e6, 2 * n / ts / 1e6, tm, n / tm / 1e6,
           2 * n / tm / 1e6);
    CHECK(cudaFree(src));
    CHECK(cudaFree(pl));
    CHECK(cudaFree(out));
}

static void bench_d2h(void)
{
    size_t n = (size_t)1 << 30;
    uint8_t *d, *h = pinned(n);
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMemset(d, 1, n));
    double t = time_it([&] { CHECK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, 0)); });
    printf("bench D2H pinned 1 GiB: %.3f ms = %6.1f GB/s\n", t, n / t / 1e6);
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(h));
}

int main(void)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; CPU reference at level %s\n", prop.name, prop.multiProcessorCount,
           cpu_level_name(cpu_level()));

    size_t hn = BIG + 3 + PAD, hp = hn + XF_MAX_PLANES * PAD; /* hp: planes padded to PAD */
    h_cpu = pinned(hp), h_gpu = pinned(hp), h_out = pinned(hn);
    CHECK(cudaMalloc(&d_src, hn));
    CHECK(cudaMalloc(&d_pl, hp));
    CHECK(cudaMalloc(&d_out, hn));

    struct data rnd = {"random", pinned(hn)}, r2 = {"bf16", pinned(hn)}, r4 = {"fp32", pinned(hn)},
                r8 = {"fp64", pinned(hn)};
    fill_random(rnd.bytes, hn);
    fill_real(r2.bytes, hn, 2), fill_real(r4.bytes, hn, 4), fill_real(r8.bytes, hn, 8);

    const size_t ns[] = {0, 1, 7, 1000003, BIG + 3};
    for (size_t n : ns) {
        for (int lay = 0; lay < 3; lay++) {
            check(rnd.name, XF_NONE, 1, rnd.bytes, n, lay);
            for (uint8_t xf : {(uint8_t)XF_FLOAT, (uint8_t)XF_INT}) {
                for (uint8_t es : {(uint8_t)2, (uint8_t)4, (uint8_t)8}) {
                    check(rnd.name, xf, es, rnd.bytes, n, lay);
                    struct data *real = es == 2 ? &r2 : es == 4 ? &r4 : &r8;
                    check(real->name, xf, es, real->bytes, n, lay);
                }
            }
        }
        printf("n %10zu: %ld cases, %ld mismatches so far\n", n, cases, failures);
        fflush(stdout);
    }
    printf("check: %ld cases, %ld mismatches: %s\n", cases, failures, failures ? "FAIL" : "bit-exact");
    fflush(stdout);

    CHECK(cudaFree(d_src));
    CHECK(cudaFree(d_pl));
    CHECK(cudaFree(d_out));
    bench("bf16", 2, r2.bytes, BIG, 0);
    bench("fp32", 4, r4.bytes, BIG, 0);
    bench("fp64", 8, r8.bytes, BIG, 0);
    bench("bf16", 2, r2.bytes, BIG, 1);
    bench("fp32", 4, r4.bytes, BIG, 1);
    bench_d2h();
    return failures ? 1 : 0;
}
