/* merge_dev.h — one thread's share of the device merge (decode.cu, merge_chunks): the
 * byte planes of a chunk back into its elements, as xf_merge (transforms/planes.c) does,
 * written once for the kernel and for the CPU test that runs every thread of it
 * (tests/gpu/test_twin.c). A thread takes four elements at a time: one 4-byte load per
 * plane where the plane allows it (stored planes are read where they lie in the file, at
 * any alignment), one store of the four where the output allows it (esize 1, 2, 4),
 * esize-byte stores or bytes otherwise. W is a
 * constant at each call in the kernel, so the loops over planes unroll.
 */
#ifndef CKPZ_GPU_MERGE_DEV_H
#define CKPZ_GPU_MERGE_DEV_H

#include <string.h>

#include "rans0_dev.h" /* GPU_HD */

GPU_HD uint32_t gm_ld32(const uint8_t *q)
{
#ifdef __CUDA_ARCH__
    return *(const uint32_t *)q;
#else
    uint32_t u;
    memcpy(&u, q, 4);
    return u;
#endif
}

/* Element x (W bytes, little-endian) at d, aligned to W. */
GPU_HD void gm_store(unsigned W, uint8_t *d, uint64_t x)
{
#ifdef __CUDA_ARCH__
    if (W == 8) *(uint64_t *)d = x;
    if (W == 4) *(uint32_t *)d = (uint32_t)x;
    if (W == 2) *(uint16_t *)d = (uint16_t)x;
    if (W == 1) *d = (uint8_t)x;
#else
    for (unsigned b = 0; b < W; b++) d[b] = (uint8_t)(x >> (8 * b));
#endif
}

/* W words (4W bytes) at d, aligned to 4W, W = 1, 2 or 4: one store. */
GPU_HD void gm_storev(unsigned W, uint8_t *d, const uint32_t *w)
{
#ifdef __CUDA_ARCH__
    if (W == 1) *(uint32_t *)d = w[0];
    if (W == 2) *(uint2 *)d = make_uint2(w[0], w[1]);
    if (W == 4) *(uint4 *)d = make_uint4(w[0], w[1], w[2], w[3]);
#else
    memcpy(d, w, 4 * W); /* little-endian, as the device */
#endif
}

/* Elements e..e+cnt-1 (cnt 1 to 4) from planes p[0..W), most significant byte first;
 * rot: rotate each right by one bit (XF_FLOAT). */
GPU_HD void gm_merge4(unsigned W, int rot, const uint8_t *const *p, uint32_t e, uint32_t cnt, uint8_t *dst)
{
    uint64_t v[4] = {0, 0, 0, 0};
    for (unsigned b = 0; b < W; b++) {
        const uint8_t *q = p[b] + e;
        uint32_t u = 0;
        if (cnt == 4 && ((uintptr_t)q & 3) == 0) u = gm_ld32(q);
        else
            for (uint32_t j = 0; j < cnt; j++) u |= (uint32_t)q[j] << (8 * j);
        for (int j = 0; j < 4; j++) v[j] |= (uint64_t)((u >> (8 * j)) & 0xff) << (8 * (W - 1 - b));
    }
    uint8_t *d = dst + (size_t)e * W;
    int whole = ((uintptr_t)d % W) == 0;
    if (rot)
        for (int j = 0; j < 4; j++) v[j] = (v[j] >> 1) | ((v[j] & 1) << (8 * W - 1));
    if (cnt == 4 && W <= 4 && ((uintptr_t)d % (4 * W)) == 0) {
        /* the four elements in W little-endian words, one store */
        uint32_t w[4] = {0, 0, 0, 0};
        for (unsigned j = 0; j < 4; j++) w[j * W / 4] |= (uint32_t)v[j] << ((8 * W * j) % 32);
        gm_storev(W, d, w);
        return;
    }
    for (uint32_t j = 0; j < cnt; j++) {
        if (whole) gm_store(W, d + j * W, v[j]);
        else
            for (unsigned b = 0; b < W; b++) d[j * W + b] = (uint8_t)(v[j] >> (8 * b));
    }
}

/* The merge launch: 256-thread blocks, as many per chunk as the largest chunk has
 * GM_BLOCK_ELEMS elements (16 a thread, so that each thread's reading of its chunk's
 * plane list is spread over four groups). */
#define GM_BLOCK_ELEMS 4096u

/* Thread tid of nthreads on one chunk of n bytes: every nthreads-th group of four
 * elements from its own, and thread 0 the n % W tail bytes from plane W. */
GPU_HD void gm_merge_chunk(unsigned W, int rot, const uint8_t *const *p, uint32_t n, uint8_t *dst, uint32_t tid,
                           uint32_t nthreads)
{
    uint32_t elems = n / W;
    for (uint32_t e = 4 * tid; e < elems; e += 4 * nthreads)
        gm_merge4(W, rot, p, e, elems - e < 4 ? elems - e : 4, dst);
    if (tid == 0)
        for (uint32_t t = 0; t < n % W; t++) dst[(size_t)elems * W + t] = p[W][t];
}

#endif
