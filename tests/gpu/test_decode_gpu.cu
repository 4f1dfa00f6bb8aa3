/* test_decode_gpu.cu — CPU-written .ckpz files restored on the device (lib/gpu/decode.cu)
 * against the CPU's own restore, then the decoder's speed. Needs a CUDA GPU: built and
 * run by tests/gpu/run.sh, not by CMake (see tests/gpu/README.md).
 *
 *   test_decode_gpu FILE.ckpz... [--bench FILE.ckpz...]
 *
 * Check, for every file: the host plans it (plan.c), the device decodes every order-0
 * rANS plane and merges every planned chunk, the host-decoded chunks are copied up, and
 * the device's bytes must equal ckpz_decompress_buffer's byte for byte; the same through
 * the one call ckpz_gpu_decompress. Then hostile
 * bytes: up to 256 of the file's rANS planes (codec 2 or 11), each with one change
 * (mutate_plane.h), decoded by the device in one launch, must be refused or decoded
 * exactly as the CPU's decoder of their codec refuses or decodes them.
 * Benchmark, for each file after --bench: the file tiled to at least 1 GiB of output
 * (k copies of its compressed bytes in device memory, each restored to its own place; the
 * tiles are checked against the CPU's bytes too), decode (rANS planes + merge) timed with
 * CUDA events, median of 10 after 2 warm-up runs, in GB/s of restored bytes; with the
 * chunks' CRC-32C check; the parts alone; and the pinned device-to-host copy of the
 * same restored bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/gpu.h"
extern "C" {
#include "entropy/entropy.h"
}
#include "mutate_plane.h"

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        cudaError_t err_ = (x);                                                                   \
        if (err_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            exit(2);                                                                              \
        }                                                                                         \
    } while (0)

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = (uint8_t *)malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

struct loaded {
    const char *name;
    uint8_t *file, *ref;
    size_t size;
    uint64_t orig;
    gpu_plan pl;
};

static int load(ckpz_ctx *ctx, const char *path, loaded *L)
{
    L->name = path;
    if (!(L->file = slurp(path, &L->size))) {
        fprintf(stderr, "%s: cannot read\n", path);
        return -1;
    }
    double t0 = now();
    if (ckpz_original_size(ctx, L->file, L->size, &L->orig) || !(L->ref = (uint8_t *)malloc(L->orig)) ||
        ckpz_decompress_buffer(ctx, NULL, L->file, L->size, L->ref, L->orig)) {
        fprintf(stderr, "%s: %s\n", path, ckpz_ctx_message(ctx));
        return -1;
    }
    double t1 = now();
    if (gpu_plan_build(ctx, L->file, L->size, &L->pl)) {
        fprintf(stderr, "%s: %s\n", path, ckpz_ctx_message(ctx));
        return -1;
    }
    double t2 = now();
    printf("%s: %llu -> %llu bytes (ratio %.4f); CPU restore %.1f ms, host plan %.1f ms\n", path,
           (unsigned long long)L->size, (unsigned long long)L->orig, (double)L->orig / (double)L->size, 1e3 * (t1 - t0),
           1e3 * (t2 - t1));
    return 0;
}

/* The whole file on the device against the CPU's bytes. */
static int check_file(ckpz_ctx *ctx, loaded *L)
{
    const gpu_plan *pl = &L->pl;
    uint8_t *d_file, *d_out, *out = (uint8_t *)malloc(L->orig);
    CHECK(cudaMalloc(&d_file, L->size));
    CHECK(cudaMalloc(&d_out, L->orig));
    CHECK(cudaMemcpy(d_file, L->file, L->size, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_out, 0xee, L->orig));
    gpu_dec *d;
    CHECK(gpu_dec_create(pl, &d));
    CHECK(gpu_dec_run(d, d_file, d_out, GPU_DEC_ALL, 0));
    CHECK(cudaDeviceSynchronize());
    uint32_t ch, pn;
    int refused = gpu_dec_failed(d, GPU_DEC_ALL, &ch, &pn);
    CHECK(cudaMemcpy(out, d_out, L->orig, cudaMemcpyDeviceToHost));
    size_t at = 0;
    while (at < L->orig && out[at] == L->ref[at]) at++;
    printf("  device restore: %llu chunks: %zu on the device (%llu rANS planes, %llu stored), %zu on the host "
           "(%llu bytes, %.3f%%): %s",
           (unsigned long long)pl->chunks, pl->nmc, (unsigned long long)pl->rans0_planes,
           (unsigned long long)pl->stored_planes, pl->nhc, (unsigned long long)pl->host_size,
           100.0 * (double)pl->host_size / (double)L->orig,
           refused == GPU_DEC_REFUSED    ? "REFUSED"
           : refused == GPU_DEC_CHECKSUM ? "CHECKSUM MISMATCH"
           : refused                     ? "NOT READ"
           : at == L->orig               ? "same bytes, checksums agree"
                                         : "DIFFERENT");
    if (refused) printf(" (chunk %u plane %u)", ch, pn);
    if (!refused && at < L->orig) printf(" (first at byte %zu)", at);
    printf("\n");
    /* the one call, from the file in host memory */
    CHECK(cudaMemset(d_out, 0xee, L->orig));
    ckpz_error err = ckpz_gpu_decompress(ctx, L->file, L->size, d_out, L->orig, 0);
    CHECK(cudaMemcpy(out, d_out, L->orig, cudaMemcpyDeviceToHost));
    int same = !err && memcmp(out, L->ref, L->orig) == 0;
    printf("  ckpz_gpu_decompress: %s%s\n", err ? ckpz_ctx_message(ctx) : "",
           err    ? ""
           : same ? "same bytes"
                  : "DIFFERENT");
    gpu_dec_free(d);
    CHECK(cudaFree(d_file));
    CHECK(cudaFree(d_out));
    free(out);
    return refused || at != L->orig || !same;
}

/* Changed copies of up to 256 rANS planes, one launch, against ent_decode. */
static int check_hostile(loaded *L, ent_ctx *ec)
{
    const gpu_plan *pl = &L->pl;
    size_t np = pl->nrp < 256 ? pl->nrp : 256;
    if (!np) return 0;
    std::vector<gpu_rplane> rp(np);
    std::vector<uint8_t> src, want;
    std::vector<int> rc(np);
    uint64_t dsz = 0;
    for (size_t i = 0; i < np; i++) {
        const gpu_rplane &r = pl->rp[rnd() % pl->nrp];
        std::vector<uint8_t> c(L->file + r.src, L->file + r.src + r.len);
        size_t len = r.len;
        int how;
        len = mutate_plane(c.data(), len, r.size, r.codec, rnd, &how);
        rp[i] = r;
        rp[i].src = src.size();
        rp[i].len = (uint32_t)len;
        rp[i].dst = dsz;
        dsz += (r.size + 15) & ~15u;
        src.insert(src.end(), c.begin(), c.begin() + len);
        std::vector<uint8_t> o(r.size, 0);
        rc[i] = ent_decode(ec, r.codec, c.data(), len, o.data(), r.size);
        want.resize(rp[i].dst + r.size);
        memcpy(want.data() + rp[i].dst, o.data(), r.size);
    }
    gpu_rplane *d_rp;
    uint8_t *d_src, *d_dst;
    uint32_t *d_bad;
    std::vector<uint32_t> bad(np);
    std::vector<uint8_t> got(dsz);
    CHECK(cudaMalloc(&d_rp, np * sizeof(gpu_rplane)));
    CHECK(cudaMalloc(&d_src, src.size()));
    CHECK(cudaMalloc(&d_dst, dsz));
    CHECK(cudaMalloc(&d_bad, np * sizeof(uint32_t)));
    CHECK(cudaMemcpy(d_rp, rp.data(), np * sizeof(gpu_rplane), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_src, src.data(), src.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_bad, 0, np * sizeof(uint32_t)));
    CHECK(gpu_rans0_planes(d_rp, np, d_src, d_dst, d_bad, 0));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(bad.data(), d_bad, np * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(got.data(), d_dst, dsz, cudaMemcpyDeviceToHost));
    int differ = 0, refused = 0;
    for (size_t i = 0; i < np; i++) {
        refused += bad[i] != 0;
        int same = (bad[i] != 0) == (rc[i] != 0) &&
                   (bad[i] || memcmp(got.data() + rp[i].dst, want.data() + rp[i].dst, rp[i].size) == 0);
        if (!same && differ++ < 5)
            fprintf(stderr, "  changed plane %zu (chunk %u plane %u): device %s, CPU %s\n", i, rp[i].chunk, rp[i].plane,
                    bad[i] ? "refused" : "decoded", rc[i] ? "refused" : "decoded");
    }
    printf("  changed planes: %zu, %d refused by the device, %d disagreements with the CPU\n", np, refused, differ);
    CHECK(cudaFree(d_rp));
    CHECK(cudaFree(d_src));
    CHECK(cudaFree(d_dst));
    CHECK(cudaFree(d_bad));
    return differ != 0;
}

static float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Median ms of reps runs of the parts, after 2 warm-up runs. */
static float time_parts(gpu_dec *d, const uint8_t *d_file, uint8_t *d_out, unsigned parts, int reps)
{
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < reps + 2; r++) {
        CHECK(cudaEventRecord(a, 0));
        CHECK(gpu_dec_run(d, d_file, d_out, parts, 0));
        CHECK(cudaEventRecord(b, 0));
        CHECK(cudaEventSynchronize(b));
        float t;
        CHECK(cudaEventElapsedTime(&t, a, b));
        if (r >= 2) ms.push_back(t);
    }
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return median(ms);
}

static int by_size(const gpu_rplane &x, const gpu_rplane &y) { return x.size > y.size; }

/* The file tiled k times to at least 1 GiB of output. */
static int bench(loaded *L)
{
    const gpu_plan *pl = &L->pl;
    unsigned k = (unsigned)(((1ull << 30) + L->orig - 1) / L->orig);
    std::vector<gpu_rplane> rp;
    std::vector<gpu_mchunk> mc;
    std::vector<gpu_hchunk> hc;
    for (unsigned t = 0; t < k; t++) {
        for (size_t i = 0; i < pl->nrp; i++) {
            gpu_rplane r = pl->rp[i];
            r.src += t * (uint64_t)L->size;
            r.dst += t * pl->scratch_size;
            rp.push_back(r);
        }
        for (size_t i = 0; i < pl->nmc; i++) {
            gpu_mchunk m = pl->mc[i];
            m.out += t * L->orig;
            for (int b = 0; b < GPU_PLANES_MAX; b++)
                m.plane[b] += m.plane[b] & GPU_FROM_FILE ? t * (uint64_t)L->size : t * pl->scratch_size;
            mc.push_back(m);
        }
        for (size_t i = 0; i < pl->nhc; i++) {
            gpu_hchunk h = pl->hc[i];
            h.out += t * L->orig;
            hc.push_back(h);
        }
    }
    std::stable_sort(rp.begin(), rp.end(), by_size);
    gpu_plan T = *pl;
    T.rp = rp.data(), T.nrp = rp.size(), T.mc = mc.data(), T.nmc = mc.size(), T.hc = hc.data(), T.nhc = hc.size();
    T.scratch_size = k * pl->scratch_size;
    T.original_size = k * L->orig;
    T.file_size = k * (uint64_t)L->size;
    uint8_t *d_file, *d_out, *h_out;
    CHECK(cudaMalloc(&d_file, T.file_size));
    CHECK(cudaMalloc(&d_out, T.original_size));
    CHECK(cudaMallocHost(&h_out, T.original_size));
    for (unsigned t = 0; t < k; t++)
        CHECK(cudaMemcpy(d_file + t * (uint64_t)L->size, L->file, L->size, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_out, 0xee, T.original_size));
    gpu_dec *d;
    CHECK(gpu_dec_create(&T, &d));
    CHECK(gpu_dec_run(d, d_file, d_out, GPU_DEC_ALL, 0));
    CHECK(cudaDeviceSynchronize());
    uint32_t ch, pn;
    int refused = gpu_dec_failed(d, GPU_DEC_ALL, &ch, &pn), differ = 0;
    CHECK(cudaMemcpy(h_out, d_out, T.original_size, cudaMemcpyDeviceToHost));
    for (unsigned t = 0; t < k; t++) differ += memcmp(h_out + t * L->orig, L->ref, L->orig) != 0;
    float all = time_parts(d, d_file, d_out, GPU_DEC_RANS | GPU_DEC_MERGE, 10);
    float checked = time_parts(d, d_file, d_out, GPU_DEC_RANS | GPU_DEC_MERGE | GPU_DEC_CRC, 10);
    float crc = time_parts(d, d_file, d_out, GPU_DEC_CRC, 10);
    refused |= gpu_dec_failed(d, GPU_DEC_CRC, &ch, &pn);
    float rans = time_parts(d, d_file, d_out, GPU_DEC_RANS, 10);
    float merge = time_parts(d, d_file, d_out, GPU_DEC_MERGE, 10);
    /* the decode's bytes again after the timed runs */
    CHECK(cudaMemcpy(h_out, d_out, T.original_size, cudaMemcpyDeviceToHost));
    for (unsigned t = 0; t < k; t++) differ += memcmp(h_out + t * L->orig, L->ref, L->orig) != 0;
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> cp;
    for (int r = 0; r < 7; r++) {
        CHECK(cudaEventRecord(a, 0));
        CHECK(cudaMemcpyAsync(h_out, d_out, T.original_size, cudaMemcpyDeviceToHost, 0));
        CHECK(cudaEventRecord(b, 0));
        CHECK(cudaEventSynchronize(b));
        float t;
        CHECK(cudaEventElapsedTime(&t, a, b));
        if (r >= 2) cp.push_back(t);
    }
    float d2h = median(cp);
    double gb = (double)T.original_size / 1e9;
    printf("  bench: %u tiles = %.3f GB restored from %.3f GB (%zu rANS planes, %zu chunks merged, %zu host chunks "
           "not timed): %s\n",
           k, gb, (double)T.file_size / 1e9, T.nrp, T.nmc, T.nhc,
           refused || differ ? "DIFFERENT" : "every tile the same bytes as the CPU's");
    printf("    decode (rANS + merge) %.3f ms = %.1f GB/s; rANS planes alone %.3f ms = %.1f GB/s of output; "
           "merge alone %.3f ms = %.1f GB/s\n",
           all, gb / (all / 1e3), rans, gb / (rans / 1e3), merge, gb / (merge / 1e3));
    printf("    with the chunks' CRC-32C checked: %.3f ms = %.1f GB/s; the check alone %.3f ms = %.1f GB/s\n", checked,
           gb / (checked / 1e3), crc, gb / (crc / 1e3));
    printf("    pinned device-to-host copy of the %.3f GB restored: %.3f ms = %.1f GB/s (decode / copy time %.2f)\n",
           gb, d2h, gb / (d2h / 1e3), all / d2h);
    gpu_dec_free(d);
    CHECK(cudaFree(d_file));
    CHECK(cudaFree(d_out));
    CHECK(cudaFreeHost(h_out));
    return refused || differ;
}

int main(int argc, char **argv)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1 << 30));
    ckpz_ctx *ctx = ckpz_ctx_create();
    ent_ctx *ec = ent_ctx_create();
    int fails = 0, benching = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bench")) {
            benching = 1;
            continue;
        }
        loaded L = {};
        if (load(ctx, argv[i], &L)) return 2;
        if (benching) fails += bench(&L);
        else fails += check_file(ctx, &L) + check_hostile(&L, ec);
        gpu_plan_free(&L.pl);
        free(L.file);
        free(L.ref);
        fflush(stdout);
    }
    ent_ctx_free(ec);
    ckpz_ctx_free(ctx);
    printf("%s\n", fails ? "FAILED" : "all checks passed");
    return fails ? 1 : 0;
}
