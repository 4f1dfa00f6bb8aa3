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

#include "plan.h"
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

/* decode.cu. The whole path: a stand-alone .ckpz file in host memory restored into
 * d_dst (device memory, exactly the original size) on stream s, which is synchronised
 * before it returns. Only the coded bytes cross the bus; the host plans the file and
 * decodes the chunks the device has no kernel for (plan.h). Checked as the CPU decoder
 * checks: payload CRCs on the host, restored chunks' CRCs on the device. Errors as the
 * CPU decoder's, the message in ctx; a device failure is CKPZ_ERR_NOMEM with CUDA's
 * words. Not checked: the index against the chunks, and the whole content's CRC (each
 * chunk's is). */
ckpz_error ckpz_gpu_decompress(ckpz_ctx *ctx, const void *src, size_t src_size, void *d_dst, size_t dst_size,
                               cudaStream_t s);

/* The same in parts, for callers that keep the file on the device or time the kernels:
 * a .ckpz file in device memory restored from its host plan. */
enum { GPU_DEC_RANS = 1, GPU_DEC_MERGE = 2, GPU_DEC_CRC = 4, GPU_DEC_HOST = 8, GPU_DEC_ALL = 15 };
typedef struct gpu_dec gpu_dec;
/* Device copies of the plan's tables and the plane scratch (the plan must outlive it). */
cudaError_t gpu_dec_create(const gpu_plan *pl, gpu_dec **out);
/* Queues the parts asked for on the stream, in this order: the rANS planes into the
 * scratch, the merge of every device chunk into d_out (it reads the scratch: run both),
 * the CRC-32C of every merged chunk, the host-decoded chunks' copies into d_out (from
 * the plan's pageable buffer). d_file: the whole file in device memory; d_out: the
 * original size. */
cudaError_t gpu_dec_run(gpu_dec *d, const uint8_t *d_file, uint8_t *d_out, unsigned parts, cudaStream_t s);
/* After the stream is synchronised, for the parts that ran: 0, GPU_DEC_REFUSED (a rANS
 * plane the CPU decoder would refuse: its chunk and plane numbers), GPU_DEC_CHECKSUM (a
 * merged chunk whose CRC-32C is not its frame's: its chunk number), GPU_DEC_UNKNOWN (the
 * device's answers could not be read). */
enum { GPU_DEC_REFUSED = 1, GPU_DEC_CHECKSUM = 2, GPU_DEC_UNKNOWN = 3 };
int gpu_dec_failed(gpu_dec *d, unsigned parts, uint32_t *chunk, uint32_t *plane);
void gpu_dec_free(gpu_dec *d); /* accepts NULL */
/* The rANS warp alone: d_rp[0..nrp) decoded from d_file into d_scratch, d_bad[i] set to
 * 1 for a plane the CPU's rans0_decode would refuse (left as it was otherwise). */
cudaError_t gpu_rans0_planes(const gpu_rplane *d_rp, size_t nrp, const uint8_t *d_file, uint8_t *d_scratch,
                             uint32_t *d_bad, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
