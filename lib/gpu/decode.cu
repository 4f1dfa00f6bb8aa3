/* decode.cu — a .ckpz file restored in device memory, from the host's plan (plan.h): the
 * order-0 rANS planes decoded by one warp each, then every chunk's planes merged into its
 * original bytes in one launch, then the chunks the host decoded copied up.
 *
 * rANS (entropy/rans0.c) interleaves 32 or 64 states over one word stream: symbol i is
 * state i % N's, and the renormalisation words are read in symbol order. A warp holds
 * the states in its lanes (two per lane for N = 64), so a round of N symbols is one table
 * lookup and step per state; the lanes that need a word find its place from a ballot
 * (the words the lanes before them take) and get it with a shuffle from a window of six
 * 32-word registers, the first three covering any round, the last three loaded ahead so
 * the stream's global loads are issued long before they are needed. Tables change at
 * segment starts: lane 0 reads the table, the warp scans the cumulative counts and fills
 * the 4096-slot decode table in shared memory 32 slots at a time: one byte a slot, its
 * symbol, whose frequency and start a step reads from the counts beside it. rans0_twin.c
 * runs these same steps on the CPU; the parsing is rans0_dev.h, shared by both.
 *
 * Hostile input: every load is bounded by the plane's coded bytes and every store by its
 * decoded size; a plane the CPU would refuse sets its error word (gpu_dec_failed). The
 * merge reads stored planes where they lie in the file, at any alignment. Last, as the
 * CPU does, every merged chunk's CRC-32C is taken (crc_dev.h: 1 KiB pieces, one thread
 * each, combined by atomicXor) and compared with its frame's on the host.
 */
#include "gpu.h"

#include <stdlib.h>

#include <cuda_runtime.h>

#include "crc_dev.h"
#include "merge_dev.h"
#include "rans0_dev.h"
extern "C" {
#include "common/ctx.h"
}

#define FULL 0xffffffffu

__device__ __forceinline__ uint32_t win_word(const uint8_t *w, uint32_t nw, uint32_t i)
{
    return i < nw ? gr_ld16(w + 2 * (size_t)i) : 0;
}

__global__ void __launch_bounds__(32)
    rans0_warp(const gpu_rplane *rp, const uint8_t *file, uint8_t *scratch, uint32_t *bad)
{
    __shared__ uint8_t sym[GR_M];
    __shared__ uint16_t freq[256];
    __shared__ uint16_t cum[257];
    const gpu_rplane P = rp[blockIdx.x];
    const unsigned lane = threadIdx.x;
    const uint8_t *src = file + P.src, *end = src + P.len;
    uint8_t *dst = scratch + P.dst;
    const uint32_t n = P.size;
    int sh, fold = P.codec == GPU_RANS0T;
    unsigned N;
    size_t nb, nm;
    /* Every lane parses the head, the segment list and the states (the same bytes:
     * broadcast loads), so every decision below is the warp's. */
    if ((P.codec != GPU_RANS0 && !fold) || gr_head(src, P.len, n, fold, &sh, &N, &nb, &nm)) goto fail;
    {
        const uint8_t *tp = src + 2, *s = gr_segments(tp, end, nb, fold);
        if (!s) goto fail;
        uint32_t x0 = GR_L, x1 = GR_L;
        const uint8_t *w = gr_states(s, end, N, fold, lane, lane + 32, &x0, &x1);
        if (__any_sync(FULL, w == NULL)) goto fail;
        size_t rem = (size_t)(end - w);
        if (rem & 1) goto fail;
        const uint32_t nw = (uint32_t)(rem / 2), wm = (uint32_t)nm;
        uint32_t w0 = win_word(w, nw, lane), w1 = win_word(w, nw, 32 + lane), w2 = win_word(w, nw, 64 + lane);
        uint32_t w3 = win_word(w, nw, 96 + lane), w4 = win_word(w, nw, 128 + lane), w5 = win_word(w, nw, 160 + lane);
        uint32_t wpos = 0, wb = 0, err = 0;
        const uint32_t lt = (1u << lane) - 1;
        size_t b = 0;
        while (b < nb) {
            size_t k = 0;
            gr_leb(&tp, end, &k); /* checked by gr_segments */
            gr_tab(&tp, end, lane == 0 ? freq : NULL, fold);
            __syncwarp();
            uint32_t part = 0;
            for (int q = 0; q < 8; q++) part += freq[8 * lane + q];
            uint32_t incl = part;
            for (int d = 1; d < 32; d <<= 1) {
                uint32_t t = __shfl_up_sync(FULL, incl, d);
                if (lane >= (unsigned)d) incl += t;
            }
            uint32_t at = incl - part;
            for (int q = 0; q < 8; q++) {
                cum[8 * lane + q] = (uint16_t)at;
                at += freq[8 * lane + q];
            }
            if (lane == 31) cum[256] = (uint16_t)GR_M;
            __syncwarp();
            for (uint32_t slot = lane; slot < GR_M; slot += 32) sym[slot] = gr_sym(cum, slot);
            __syncwarp();
            uint32_t s0 = (uint32_t)(b << sh), s1 = (uint32_t)((b + k) << sh);
            if ((b + k) << sh > n || b + k == nb) s1 = n;
            const uint32_t s1w = s1 < wm ? s1 : wm; /* the symbols from words end at nm */
            b += k;
            for (uint32_t i = s0; i < s1w; i += N) {
                uint32_t i0 = i + lane, i1 = i + 32 + lane;
                bool a0 = i0 < s1w, a1 = N == 64 && i1 < s1w, n0 = false, n1 = false;
                uint32_t y0 = x0, y1 = x1;
                if (a0) {
                    uint32_t c = sym[x0 & (GR_M - 1)];
                    dst[i0] = (uint8_t)c;
                    y0 = gr_step(x0, freq[c], cum[c]);
                    n0 = y0 < GR_L;
                }
                if (a1) {
                    uint32_t c = sym[x1 & (GR_M - 1)];
                    dst[i1] = (uint8_t)c;
                    y1 = gr_step(x1, freq[c], cum[c]);
                    n1 = y1 < GR_L;
                }
                uint32_t m0 = __ballot_sync(FULL, n0), m1 = __ballot_sync(FULL, n1);
                uint32_t off0 = wpos - wb + __popc(m0 & lt), off1 = wpos - wb + __popc(m0) + __popc(m1 & lt);
                uint32_t q0 = off0 & 31, q1 = off1 & 31;
                uint32_t r00 = __shfl_sync(FULL, w0, q0), r01 = __shfl_sync(FULL, w1, q0),
                         r02 = __shfl_sync(FULL, w2, q0);
                uint32_t r10 = __shfl_sync(FULL, w0, q1), r11 = __shfl_sync(FULL, w1, q1),
                         r12 = __shfl_sync(FULL, w2, q1);
                if (n0) {
                    err |= wb + off0 >= nw;
                    y0 = (y0 << 16) | (off0 < 32 ? r00 : off0 < 64 ? r01 : r02);
                }
                if (n1) {
                    err |= wb + off1 >= nw;
                    y1 = (y1 << 16) | (off1 < 32 ? r10 : off1 < 64 ? r11 : r12);
                }
                x0 = y0;
                x1 = y1;
                wpos += __popc(m0) + __popc(m1);
                while (wpos - wb >= 32) {
                    w0 = w1, w1 = w2, w2 = w3, w3 = w4, w4 = w5;
                    wb += 32;
                    w5 = win_word(w, nw, wb + 160 + lane);
                }
            }
            if (s1 > wm) { /* codec 11's tail, as rans0_twin.c: no words, each lane in order */
                if (s0 <= wm) x0 -= GR_L, x1 -= GR_L;
                const uint32_t t0 = s0 > wm ? s0 : wm;
                for (uint32_t i = t0 & ~(N - 1); i < s1; i += N) {
                    uint32_t i0 = i + lane, i1 = i + 32 + lane;
                    if (i0 >= t0 && i0 < s1) {
                        uint32_t c = sym[x0 & (GR_M - 1)];
                        dst[i0] = (uint8_t)c;
                        x0 = gr_step(x0, freq[c], cum[c]);
                    }
                    if (N == 64 && i1 >= t0 && i1 < s1) {
                        uint32_t c = sym[x1 & (GR_M - 1)];
                        dst[i1] = (uint8_t)c;
                        x1 = gr_step(x1, freq[c], cum[c]);
                    }
                }
            }
            __syncwarp(); /* the table is rebuilt for the next segment */
        }
        const uint32_t last = wm < n ? 0 : GR_L; /* codec 11 with a tail: every y back to 0 */
        if (__any_sync(FULL, err || x0 != last || x1 != last) || wpos != nw) goto fail;
        return;
    }
fail:
    if (lane == 0) bad[blockIdx.x] = 1;
}

/* Chunk blockIdx.y (and every gridDim.y-th after it); groups of 4 elements (merge_dev.h). */
__global__ void merge_chunks(const gpu_mchunk *mc, size_t nmc, const uint8_t *file, const uint8_t *scratch,
                             uint8_t *out)
{
    for (size_t c = blockIdx.y; c < nmc; c += gridDim.y) {
        const gpu_mchunk *m = &mc[c];
        const uint8_t *p[GPU_PLANES_MAX];
        for (int b = 0; b < GPU_PLANES_MAX; b++)
            p[b] = m->plane[b] & GPU_FROM_FILE ? file + (m->plane[b] & ~GPU_FROM_FILE) : scratch + m->plane[b];
        uint8_t *d = out + m->out;
        uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, nt = blockDim.x * gridDim.x;
        bool rot = m->xf == XF_FLOAT;
        /* W a constant in each call: the plane loops unroll */
        switch (m->esize) {
        case 1: gm_merge_chunk(1, 0, p, m->n, d, tid, nt); break;
        case 2: rot ? gm_merge_chunk(2, 1, p, m->n, d, tid, nt) : gm_merge_chunk(2, 0, p, m->n, d, tid, nt); break;
        case 4: rot ? gm_merge_chunk(4, 1, p, m->n, d, tid, nt) : gm_merge_chunk(4, 0, p, m->n, d, tid, nt); break;
        default: rot ? gm_merge_chunk(8, 1, p, m->n, d, tid, nt) : gm_merge_chunk(8, 0, p, m->n, d, tid, nt); break;
        }
    }
}

/* Piece blockIdx.x * 256 + threadIdx.x of chunk blockIdx.y (and every gridDim.y-th
 * after it): its CRC-32C moved to the chunk's end, XORed into acc[chunk]. */
__global__ void crc_chunks(const gpu_mchunk *mc, size_t nmc, const uint8_t *out, const uint32_t *tabs, uint32_t *acc)
{
    __shared__ uint32_t tab[8 * 256], x2n[64];
    for (unsigned i = threadIdx.x; i < GC_TABS; i += blockDim.x) (i < 8 * 256 ? tab[i] : x2n[i - 8 * 256]) = tabs[i];
    __syncthreads();
    for (size_t c = blockIdx.y; c < nmc; c += gridDim.y) {
        uint32_t v = gc_piece(tab, x2n, out + mc[c].out, mc[c].n, blockIdx.x * blockDim.x + threadIdx.x);
        if (v) atomicXor(&acc[c], v);
    }
}

extern "C" cudaError_t gpu_rans0_planes(const gpu_rplane *d_rp, size_t nrp, const uint8_t *d_file, uint8_t *d_scratch,
                                        uint32_t *d_bad, cudaStream_t s)
{
    if (nrp > 0x7fffffffu) return cudaErrorInvalidValue;
    /* 5 KiB of shared memory per warp (a symbol per slot, then frequency and start per
     * symbol): with the largest carveout, the registers limit the warps an SM holds (28
     * at 72 a thread, nvcc 13.0 for sm_90: 3696 planes in one wave on an H200), where a
     * 16 KiB table of whole entries held 13 and left a last partial wave. */
    static int carved;
    if (!carved) {
        cudaFuncSetAttribute(rans0_warp, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
        carved = 1;
    }
    if (nrp) rans0_warp<<<(unsigned)nrp, 32, 0, s>>>(d_rp, d_file, d_scratch, d_bad);
    return cudaGetLastError();
}

struct gpu_dec {
    const gpu_plan *pl;
    gpu_rplane *rp;
    gpu_mchunk *mc;
    uint8_t *scratch;
    uint32_t *bad;
    uint32_t *tabs; /* crc_dev.h's tables: GC_TABS words */
    uint32_t *acc;  /* per merged chunk: its CRC-32C, once the CRC part has run */
    unsigned per;   /* merge blocks per chunk: the most elements of a chunk / GM_BLOCK_ELEMS */
    unsigned cper;  /* CRC blocks per chunk: the most bytes of a chunk / 256 pieces */
};

extern "C" cudaError_t gpu_dec_create(const gpu_plan *pl, gpu_dec **out)
{
    gpu_dec *d = (gpu_dec *)calloc(1, sizeof *d);
    if (!d) return cudaErrorMemoryAllocation;
    d->pl = pl;
    for (size_t c = 0; c < pl->nmc; c++) {
        unsigned per = (unsigned)((pl->mc[c].n / pl->mc[c].esize + GM_BLOCK_ELEMS - 1) / GM_BLOCK_ELEMS);
        if (per > d->per) d->per = per;
        unsigned cper = (unsigned)((pl->mc[c].n + 256 * GC_PIECE - 1) / (256 * GC_PIECE));
        if (cper > d->cper) d->cper = cper;
    }
    uint32_t tabs[GC_TABS];
    gc_tables(tabs, tabs + 8 * 256);
    cudaError_t e;
    if ((e = cudaMalloc(&d->rp, pl->nrp * sizeof *d->rp + 1)) ||
        (e = cudaMalloc(&d->mc, pl->nmc * sizeof *d->mc + 1)) || (e = cudaMalloc(&d->scratch, pl->scratch_size + 1)) ||
        (e = cudaMalloc(&d->bad, pl->nrp * sizeof *d->bad + 1)) || (e = cudaMalloc(&d->tabs, sizeof tabs)) ||
        (e = cudaMalloc(&d->acc, pl->nmc * sizeof *d->acc + 1)) ||
        (e = cudaMemcpy(d->tabs, tabs, sizeof tabs, cudaMemcpyHostToDevice)) ||
        (e = cudaMemcpy(d->rp, pl->rp, pl->nrp * sizeof *d->rp, cudaMemcpyHostToDevice)) ||
        (e = cudaMemcpy(d->mc, pl->mc, pl->nmc * sizeof *d->mc, cudaMemcpyHostToDevice))) {
        gpu_dec_free(d);
        return e;
    }
    *out = d;
    return cudaSuccess;
}

extern "C" cudaError_t gpu_dec_run(gpu_dec *d, const uint8_t *d_file, uint8_t *d_out, unsigned parts, cudaStream_t s)
{
    const gpu_plan *pl = d->pl;
    cudaError_t e;
    if (parts & GPU_DEC_RANS) {
        if ((e = cudaMemsetAsync(d->bad, 0, pl->nrp * sizeof *d->bad, s))) return e;
        if ((e = gpu_rans0_planes(d->rp, pl->nrp, d_file, d->scratch, d->bad, s))) return e;
    }
    if ((parts & GPU_DEC_MERGE) && pl->nmc) {
        dim3 grid(d->per ? d->per : 1, pl->nmc < 65535 ? (unsigned)pl->nmc : 65535u);
        merge_chunks<<<grid, 256, 0, s>>>(d->mc, pl->nmc, d_file, d->scratch, d_out);
        if ((e = cudaGetLastError())) return e;
    }
    if ((parts & GPU_DEC_CRC) && pl->nmc) {
        if ((e = cudaMemsetAsync(d->acc, 0, pl->nmc * sizeof *d->acc, s))) return e;
        dim3 grid(d->cper ? d->cper : 1, pl->nmc < 65535 ? (unsigned)pl->nmc : 65535u);
        crc_chunks<<<grid, 256, 0, s>>>(d->mc, pl->nmc, d_out, d->tabs, d->acc);
        if ((e = cudaGetLastError())) return e;
    }
    if (parts & GPU_DEC_HOST)
        for (size_t c = 0; c < pl->nhc; c++)
            if ((e = cudaMemcpyAsync(d_out + pl->hc[c].out, pl->host + pl->hc[c].src, pl->hc[c].n,
                                     cudaMemcpyHostToDevice, s)))
                return e;
    return cudaSuccess;
}

extern "C" int gpu_dec_failed(gpu_dec *d, unsigned parts, uint32_t *chunk, uint32_t *plane)
{
    const gpu_plan *pl = d->pl;
    size_t nb = parts & GPU_DEC_RANS ? pl->nrp : 0, nc = parts & GPU_DEC_CRC ? pl->nmc : 0;
    uint32_t *w = (uint32_t *)malloc((nb + nc) * sizeof *w + 1);
    *chunk = *plane = UINT32_MAX;
    if (!w || cudaMemcpy(w, d->bad, nb * sizeof *w, cudaMemcpyDeviceToHost) ||
        cudaMemcpy(w + nb, d->acc, nc * sizeof *w, cudaMemcpyDeviceToHost)) {
        free(w);
        return GPU_DEC_UNKNOWN;
    }
    int why = 0;
    for (size_t i = 0; i < nb && !why; i++)
        if (w[i]) {
            *chunk = pl->rp[i].chunk;
            *plane = pl->rp[i].plane;
            why = GPU_DEC_REFUSED;
        }
    for (size_t c = 0; c < nc && !why; c++)
        if (w[nb + c] != pl->mc[c].raw_crc) {
            *chunk = pl->mc[c].chunk;
            why = GPU_DEC_CHECKSUM;
        }
    free(w);
    return why;
}

extern "C" void gpu_dec_free(gpu_dec *d)
{
    if (!d) return;
    cudaFree(d->rp);
    cudaFree(d->mc);
    cudaFree(d->scratch);
    cudaFree(d->bad);
    cudaFree(d->tabs);
    cudaFree(d->acc);
    free(d);
}

extern "C" ckpz_error ckpz_gpu_decompress(ckpz_ctx *ctx, const void *src, size_t src_size, void *d_dst, size_t dst_size,
                                          cudaStream_t s)
{
    gpu_plan pl;
    ckpz_error err = gpu_plan_build(ctx, (const uint8_t *)src, src_size, &pl);
    if (err) return err;
    uint8_t *d_file = NULL;
    gpu_dec *d = NULL;
    cudaError_t e = cudaSuccess;
    uint32_t chunk, plane;
    if (pl.original_size != dst_size)
        err = ctx_fail(ctx, CKPZ_ERR_PARAM, "the output holds %zu bytes, the file restores to %llu", dst_size,
                       (unsigned long long)pl.original_size);
    else if ((e = cudaMalloc(&d_file, src_size + 1)) ||
             (e = cudaMemcpyAsync(d_file, src, src_size, cudaMemcpyHostToDevice, s)) || (e = gpu_dec_create(&pl, &d)) ||
             (e = gpu_dec_run(d, d_file, (uint8_t *)d_dst, GPU_DEC_ALL, s)) || (e = cudaStreamSynchronize(s)))
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "device: %s", cudaGetErrorString(e));
    else switch (gpu_dec_failed(d, GPU_DEC_ALL, &chunk, &plane)) {
        case GPU_DEC_REFUSED:
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "chunk %u: plane %u (rans0): corrupt coded data", chunk, plane);
            break;
        case GPU_DEC_CHECKSUM:
            err = ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "chunk %u: checksum mismatch in the restored data", chunk);
            break;
        case GPU_DEC_UNKNOWN: err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "device: the check could not be read"); break;
        default: break;
        }
    gpu_dec_free(d);
    cudaFree(d_file);
    gpu_plan_free(&pl);
    return err;
}
