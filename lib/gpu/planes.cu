/* planes.cu — the byte-plane split and merge of transforms/planes.c on the device, writing
 * the same bytes: floats (XF_FLOAT) rotated left by one bit, then every element split
 * most-significant byte first into esize planes; integers (XF_INT) split without the
 * rotation; the n % esize bytes past the last whole element go to one more plane.
 *
 * The pass is a transpose of bytes, bound by memory bandwidth, so the one thing that
 * matters is whole-sector access. The fast kernels give each thread one 16-byte load
 * of 16 / esize elements and one store of 16 / esize bytes to each plane (8 for BF16,
 * 4 for FP32): a warp reads 512 contiguous bytes and writes 256 or 128 contiguous bytes
 * per plane, with no shared memory. They need src/dst 16-byte aligned and each plane
 * aligned to 16 / esize bytes; the elements they leave (the last few, or all of them
 * when a plane is not aligned, as in a packed layout with an odd element count) and the
 * tail bytes go to a kernel of one element per thread with byte loads and stores.
 */
#include "gpu.h"

#include <cuda_runtime.h>

#define GPU_MAX_PLANES 9 /* XF_MAX_PLANES: 8 byte planes and the tail */
#define GPU_BLOCK 256

/* The plane pointers travel by value in the kernels' parameters. */
struct planes_out {
    uint8_t *p[GPU_MAX_PLANES];
};
struct planes_in {
    const uint8_t *p[GPU_MAX_PLANES];
};

template <typename T> __device__ __forceinline__ T rotl1(T v) { return (T)((v << 1) | (v >> (8 * sizeof(T) - 1))); }
template <typename T> __device__ __forceinline__ T rotr1(T v) { return (T)((v >> 1) | (v << (8 * sizeof(T) - 1))); }

/* V bytes (2, 4 or 8), the low bytes of a, at p aligned to V. */
template <int V> __device__ __forceinline__ void store_v(uint8_t *p, unsigned long long a)
{
    if (V == 8) *(unsigned long long *)p = a;
    if (V == 4) *(uint32_t *)p = (uint32_t)a;
    if (V == 2) *(uint16_t *)p = (uint16_t)a;
}
template <int V> __device__ __forceinline__ unsigned long long load_v(const uint8_t *p)
{
    if (V == 8) return *(const unsigned long long *)p;
    if (V == 4) return *(const uint32_t *)p;
    return *(const uint16_t *)p;
}

template <typename T> union vec16 {
    uint4 q;
    T e[16 / sizeof(T)];
};

/* Vector i: elements i * V to i * V + V - 1 (V = 16 / esize). */
template <typename T, bool ROT> __global__ void split_vec(const uint4 *__restrict__ src, size_t nvec, planes_out pl)
{
    constexpr int W = sizeof(T), V = 16 / W;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec) return;
    vec16<T> u;
    u.q = src[i];
    unsigned long long acc[W];
#pragma unroll
    for (int b = 0; b < W; b++) acc[b] = 0;
#pragma unroll
    for (int j = 0; j < V; j++) {
        T v = ROT ? rotl1(u.e[j]) : u.e[j];
#pragma unroll
        for (int b = 0; b < W; b++) acc[b] |= (unsigned long long)(uint8_t)(v >> (8 * (W - 1 - b))) << (8 * j);
    }
#pragma unroll
    for (int b = 0; b < W; b++) store_v<V>(pl.p[b] + i * V, acc[b]);
}

template <typename T, bool ROT> __global__ void merge_vec(planes_in pl, size_t nvec, uint4 *__restrict__ dst)
{
    constexpr int W = sizeof(T), V = 16 / W;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec) return;
    unsigned long long acc[W];
#pragma unroll
    for (int b = 0; b < W; b++) acc[b] = load_v<V>(pl.p[b] + i * V);
    vec16<T> u;
#pragma unroll
    for (int j = 0; j < V; j++) {
        T v = 0;
#pragma unroll
        for (int b = 0; b < W; b++) v |= (T)((T)((acc[b] >> (8 * j)) & 0xff) << (8 * (W - 1 - b)));
        u.e[j] = ROT ? rotr1(v) : v;
    }
    dst[i] = u.q;
}

/* Elements from..elems-1, one per thread; the thread of index elems copies the tail. */
template <typename T, bool ROT>
__global__ void split_one(const uint8_t *__restrict__ src, size_t from, size_t elems, unsigned tail, planes_out pl)
{
    constexpr int W = sizeof(T);
    size_t e = from + (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < elems) {
        T v = 0;
#pragma unroll
        for (int b = 0; b < W; b++) v |= (T)((T)src[e * W + b] << (8 * b));
        if (ROT) v = rotl1(v);
#pragma unroll
        for (int b = 0; b < W; b++) pl.p[b][e] = (uint8_t)(v >> (8 * (W - 1 - b)));
    } else if (e == elems) {
        for (unsigned t = 0; t < tail; t++) pl.p[W][t] = src[elems * W + t];
    }
}

template <typename T, bool ROT>
__global__ void merge_one(planes_in pl, size_t from, size_t elems, unsigned tail, uint8_t *__restrict__ dst)
{
    constexpr int W = sizeof(T);
    size_t e = from + (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < elems) {
        T v = 0;
#pragma unroll
        for (int b = 0; b < W; b++) v |= (T)((T)pl.p[b][e] << (8 * (W - 1 - b)));
        if (ROT) v = rotr1(v);
#pragma unroll
        for (int b = 0; b < W; b++) dst[e * W + b] = (uint8_t)(v >> (8 * b));
    } else if (e == elems) {
        for (unsigned t = 0; t < tail; t++) dst[elems * W + t] = pl.p[W][t];
    }
}

static inline unsigned blocks_for(size_t count) { return (unsigned)((count + GPU_BLOCK - 1) / GPU_BLOCK); }

/* How many whole vectors the fast kernels may take: 0 unless every pointer is aligned. */
static size_t vectors(const void *whole, const void *const *plane, unsigned esize, size_t elems)
{
    unsigned v = 16 / esize;
    if ((uintptr_t)whole % 16) return 0;
    for (unsigned b = 0; b < esize; b++)
        if ((uintptr_t)plane[b] % v) return 0;
    return elems / v;
}

/* Grid dimensions are limited to 2^31 - 1 blocks: far past any chunk (2^39 elements). */
static int too_many(size_t count) { return (count + GPU_BLOCK - 1) / GPU_BLOCK > 0x7fffffffu; }

template <typename T, bool ROT>
static cudaError_t split_t(const uint8_t *src, size_t n, uint8_t *const *plane, cudaStream_t s)
{
    constexpr unsigned W = sizeof(T);
    size_t elems = n / W;
    unsigned tail = (unsigned)(n % W);
    planes_out pl = {};
    for (unsigned b = 0; b < W + (tail ? 1u : 0u); b++) pl.p[b] = plane[b];
    size_t nvec = vectors(src, (const void *const *)plane, W, elems), from = nvec * (16 / W);
    size_t rest = elems - from + (tail ? 1u : 0u);
    if (too_many(nvec) || too_many(rest)) return cudaErrorInvalidValue;
    if (nvec) split_vec<T, ROT><<<blocks_for(nvec), GPU_BLOCK, 0, s>>>((const uint4 *)src, nvec, pl);
    if (rest) split_one<T, ROT><<<blocks_for(rest), GPU_BLOCK, 0, s>>>(src, from, elems, tail, pl);
    return cudaGetLastError();
}

template <typename T, bool ROT>
static cudaError_t merge_t(const uint8_t *const *plane, size_t n, uint8_t *dst, cudaStream_t s)
{
    constexpr unsigned W = sizeof(T);
    size_t elems = n / W;
    unsigned tail = (unsigned)(n % W);
    planes_in pl = {};
    for (unsigned b = 0; b < W + (tail ? 1u : 0u); b++) pl.p[b] = plane[b];
    size_t nvec = vectors(dst, (const void *const *)plane, W, elems), from = nvec * (16 / W);
    size_t rest = elems - from + (tail ? 1u : 0u);
    if (too_many(nvec) || too_many(rest)) return cudaErrorInvalidValue;
    if (nvec) merge_vec<T, ROT><<<blocks_for(nvec), GPU_BLOCK, 0, s>>>(pl, nvec, (uint4 *)dst);
    if (rest) merge_one<T, ROT><<<blocks_for(rest), GPU_BLOCK, 0, s>>>(pl, from, elems, tail, dst);
    return cudaGetLastError();
}

extern "C" cudaError_t xf_gpu_split(uint8_t xf, uint8_t esize, const uint8_t *src, size_t n, uint8_t *const *plane,
                                    cudaStream_t stream)
{
    if (xf == XF_NONE && esize == 1)
        return n ? cudaMemcpyAsync(plane[0], src, n, cudaMemcpyDeviceToDevice, stream) : cudaSuccess;
    if (xf != XF_FLOAT && xf != XF_INT) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    bool rot = xf == XF_FLOAT;
    switch (esize) {
    case 2:
        return rot ? split_t<uint16_t, true>(src, n, plane, stream) : split_t<uint16_t, false>(src, n, plane, stream);
    case 4:
        return rot ? split_t<uint32_t, true>(src, n, plane, stream) : split_t<uint32_t, false>(src, n, plane, stream);
    case 8:
        return rot ? split_t<uint64_t, true>(src, n, plane, stream) : split_t<uint64_t, false>(src, n, plane, stream);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t xf_gpu_merge(uint8_t xf, uint8_t esize, const uint8_t *const *plane, size_t n, uint8_t *dst,
                                    cudaStream_t stream)
{
    if (xf == XF_NONE && esize == 1)
        return n ? cudaMemcpyAsync(dst, plane[0], n, cudaMemcpyDeviceToDevice, stream) : cudaSuccess;
    if (xf != XF_FLOAT && xf != XF_INT) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    bool rot = xf == XF_FLOAT;
    switch (esize) {
    case 2:
        return rot ? merge_t<uint16_t, true>(plane, n, dst, stream) : merge_t<uint16_t, false>(plane, n, dst, stream);
    case 4:
        return rot ? merge_t<uint32_t, true>(plane, n, dst, stream) : merge_t<uint32_t, false>(plane, n, dst, stream);
    case 8:
        return rot ? merge_t<uint64_t, true>(plane, n, dst, stream) : merge_t<uint64_t, false>(plane, n, dst, stream);
    default: return cudaErrorInvalidValue;
    }
}
