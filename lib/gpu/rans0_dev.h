/* rans0_dev.h — the pieces of the order-0 rANS payload (entropy/rans0.c) that the
 * device decoder (decode.cu) and its CPU twin (rans0_twin.c) share: the segment list's
 * LEB128 counts, the table format of entropy/rans_common.c with the same checks, and
 * one decode-table slot found from the cumulative frequencies. Written once, compiled
 * for both sides (GPU_HD), so the twin tested on the CPU machine runs the kernel's own
 * parsing. A warp fills its 4096-slot table 32 slots at a time, so a slot is found by
 * binary search over the 256 cumulative counts instead of the CPU's run per symbol.
 */
#ifndef CKPZ_GPU_RANS0_DEV_H
#define CKPZ_GPU_RANS0_DEV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GPU_HD __host__ __device__ __forceinline__
#else
#define GPU_HD static inline
#endif

#define GR_BITS 12u /* RANS_BITS */
#define GR_M (1u << GR_BITS)
#define GR_L (1u << 16)

/* The rans0 payload head: log2 of the base block and of the state count, checked as
 * rans0_decode checks them; 0, or -1 for a payload the CPU would refuse. */
GPU_HD int gr_head(const uint8_t *src, size_t len, size_t n, int *sh, unsigned *N, size_t *nb)
{
    if (n == 0 || len < 2 || src[0] < 10 || src[0] > 24 || (src[1] != 5 && src[1] != 6)) return -1;
    *sh = src[0];
    *N = 1u << src[1];
    *nb = ((n - 1) >> src[0]) + 1;
    return 0;
}

/* One canonical LEB128 count below 2^32 (rans0.c's leb_read). */
GPU_HD int gr_leb(const uint8_t **pp, const uint8_t *end, size_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if ((shift && b == 0) || r > 0xffffffffull) return -1;
            *pp = p;
            *v = (size_t)r;
            return 0;
        }
    }
    return -1;
}

/* rans_table_read: [lo, hi], then a 1- or 2-byte frequency per symbol below hi, the
 * last implied by the sum. freq (256 entries) is written only when out is not NULL, so
 * a pass that only walks and checks the list needs no room. */
GPU_HD int gr_table(const uint8_t **pp, const uint8_t *end, uint16_t *freq)
{
    const uint8_t *p = *pp;
    if (end - p < 2) return -1;
    int lo = p[0], hi = p[1];
    p += 2;
    if (lo >= hi) return -1;
    if (freq)
        for (int s = 0; s < 256; s++) freq[s] = 0;
    uint32_t sum = 0, first = 0;
    for (int s = lo; s < hi; s++) {
        if (p >= end) return -1;
        uint32_t f = *p++;
        if (f & 0x80) {
            if (p >= end || *p >= (GR_M >> 7)) return -1;
            f = (f & 0x7f) | ((uint32_t)*p++ << 7);
            if (f < 128) return -1;
        }
        if (s == lo) first = f;
        if (freq) freq[s] = (uint16_t)f;
        sum += f;
    }
    if (sum >= GR_M || first == 0) return -1;
    if (freq) freq[hi] = (uint16_t)(GR_M - sum);
    *pp = p;
    return 0;
}

/* The segment list: k blocks each, covering nb blocks; returns where the final states
 * start, or NULL (the CPU's pass 1). */
GPU_HD const uint8_t *gr_segments(const uint8_t *p, const uint8_t *end, size_t nb)
{
    size_t covered = 0;
    while (covered < nb) {
        size_t k;
        if (gr_leb(&p, end, &k) || k == 0 || k > nb - covered || gr_table(&p, end, NULL)) return NULL;
        covered += k;
    }
    return p;
}

/* The symbol of a decode-table slot from cum[0..256] (cum[s]: frequencies below s,
 * cum[256] = GR_M): the last s with cum[s] <= slot, which has a nonzero frequency. The
 * table holds symbols only (one byte a slot, 4 KiB), so that many warps' tables fit in
 * an SM's shared memory; the frequency and start come from freq[] and cum[] at decode. */
GPU_HD uint8_t gr_sym(const uint16_t *cum, uint32_t slot)
{
    uint32_t s = 0;
    for (uint32_t step = 128; step; step >>= 1)
        if (cum[s + step] <= slot) s += step;
    return (uint8_t)s;
}

/* One decode step without the refill, for a state whose slot holds a symbol of frequency
 * f starting at c (rans_build_dtab's entry split in three). */
GPU_HD uint32_t gr_step(uint32_t x, uint32_t f, uint32_t c) { return f * (x >> GR_BITS) + (x & (GR_M - 1)) - c; }

/* A little-endian u16 / u32 at any byte address. */
GPU_HD uint32_t gr_ld16(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }
GPU_HD uint32_t gr_ld32(const uint8_t *p) { return gr_ld16(p) | (gr_ld16(p + 2) << 16); }

#endif
