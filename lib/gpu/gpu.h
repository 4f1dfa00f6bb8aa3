/* gpu.h — ckpz's kernels on CUDA device memory (built with nvcc only; nothing in the
 * CPU build includes this). Each call takes device pointers and a stream, queues its
 * kernels on that stream and returns without waiting: the caller synchronises. Every
 * kernel writes exactly the bytes of its CPU twin, so a frame written on the device is
 * read by the CPU decoder and the other way round.
 *
 * The byte planes (transforms/planes.h): plane[i] are device pointers, in a host array,
 * laid out as xf_plane_sizes gives them (esize planes of n / esize bytes, then n % esize
 * tail bytes when there are any). The planes need not be adjacent. Fast path: src/dst
 * 16-byte aligned and every plane aligned to 16 / esize bytes (whole 16-byte loads and
 * stores of 16 / esize bytes per plane per thread); otherwise, and for the last elements,
 * one element per thread with byte stores (correct for any alignment, slower).
 */
#ifndef CKPZ_GPU_H
#define CKPZ_GPU_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "transforms/ids.h" /* XF_NONE, XF_FLOAT, XF_INT */

#ifdef __cplusplus
extern "C" {
#endif

/* xf_split on the device: xf XF_FLOAT or XF_INT with esize 2, 4 or 8, or XF_NONE with
 * esize 1 (a copy). cudaErrorInvalidValue for any other pair, else the launch's error. */
cudaError_t xf_gpu_split(uint8_t xf, uint8_t esize, const uint8_t *src, size_t n, uint8_t *const *plane,
                         cudaStream_t stream);

/* xf_merge on the device: the inverse of xf_gpu_split, same pairs. */
cudaError_t xf_gpu_merge(uint8_t xf, uint8_t esize, const uint8_t *const *plane, size_t n, uint8_t *dst,
                         cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
