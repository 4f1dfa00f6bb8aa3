/* plan.h — what the device must do to restore a .ckpz file held in its memory, worked
 * out on the host from the file's small parts (plain C: no CUDA needed to build or test
 * it).
 *
 * The host reads the file header, the entry frames and every chunk frame header and
 * plane descriptor, with the container's own checks (container.h), and verifies each
 * payload's CRC-32C. A chunk the device handles (no predictor; transform none, float or
 * int with a byte-plane layout; every plane stored or order-0 rANS, codec 2 or 11) becomes a merge job
 * whose planes are either read where they lie in the file (stored) or decoded by the
 * device into a plane scratch (rANS, one job per plane), and whose restored bytes the
 * device checks against the frame's CRC-32C. Any other chunk (order-1 rANS,
 * zstd and the LZ codecs, deltas, lossy, escape) is decoded here by the CPU's
 * chunk_decode into host bytes that are copied up: counted, so a caller can say how
 * much the device did.
 */
#ifndef CKPZ_GPU_PLAN_H
#define CKPZ_GPU_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_PLANES_MAX 9 /* XF_MAX_PLANES */
#define GPU_FROM_FILE (1ull << 63) /* plane offset flag: in the file buffer, else the scratch */

#define GPU_RANS0 2   /* ENT_RANS0: order-0 rANS */
#define GPU_RANS0T 11 /* ENT_RANS0T: order-0 rANS with its tails in the states */

/* A plane the device decodes: coded bytes file[src, src + len) to scratch[dst, dst + size). */
typedef struct gpu_rplane {
    uint64_t src, dst;
    uint32_t len, size;
    uint32_t chunk;  /* index in the file's chunk frames, for messages */
    uint16_t plane;  /* its number in the chunk, for messages */
    uint16_t codec;  /* GPU_RANS0 or GPU_RANS0T */
} gpu_rplane;

/* A chunk the device merges: n original bytes at out, from planes plane[b] (an offset in
 * the scratch, or in the file with GPU_FROM_FILE). */
typedef struct gpu_mchunk {
    uint64_t out;
    uint64_t plane[GPU_PLANES_MAX];
    uint32_t n;
    uint32_t raw_crc; /* CRC-32C of the n restored bytes (the frame's) */
    uint32_t chunk;   /* index in the file's chunk frames, for messages */
    uint8_t xf, esize, pad[2];
} gpu_mchunk;

/* A chunk the host decoded: n bytes at host + src go to out. */
typedef struct gpu_hchunk {
    uint64_t out, src;
    uint32_t n, chunk;
} gpu_hchunk;

typedef struct gpu_plan {
    uint64_t original_size;  /* bytes the file restores to */
    uint64_t file_size;
    uint64_t scratch_size;   /* device bytes the decoded planes need (16-byte aligned starts) */
    gpu_rplane *rp;          /* rANS planes, largest first (the longest warps start first) */
    size_t nrp;
    gpu_mchunk *mc;
    size_t nmc;
    gpu_hchunk *hc;
    size_t nhc;
    uint8_t *host;           /* the host-decoded chunks' bytes, back to back */
    uint64_t host_size;
    uint64_t chunks, stored_planes, rans0_planes; /* counts, for reports */
} gpu_plan;

/* Plans file[0..size) (a whole stand-alone .ckpz file). Delta files (a base frame) are
 * refused with CKPZ_ERR_PARAM; anything the CPU decoder would refuse is refused with its
 * error, the message in ctx. On failure *pl holds nothing. */
ckpz_error gpu_plan_build(ckpz_ctx *ctx, const uint8_t *file, size_t size, gpu_plan *pl);
void gpu_plan_free(gpu_plan *pl);

/* Decodes a planned rANS plane (codec GPU_RANS0 or GPU_RANS0T) on the CPU, as the
 * device's warp does (rans0_twin.c): reads file, writes scratch. 0, or -1 for corrupt
 * coded data (or a codec other than those two). */
int gpu_rans0_twin(unsigned codec, const uint8_t *src, size_t len, uint8_t *dst, size_t n);

#ifdef __cplusplus
}
#endif

#endif
