/* rans0_dev.h — the pieces of the order-0 rANS payload (entropy/rans0.c) that the
 * device decoder (decode.cu) and its CPU twin (rans0_twin.c) share: the segment list's
 * LEB128 counts, the table format of entropy/rans_common.c with the same checks, and
 * one decode-table slot found from the cumulative frequencies. Written once, compiled
 * for both sides (GPU_HD), so the twin tested on the CPU machine runs the kernel's own
 * parsing. Codec 11 (rans0.c: codec 2 with its tails in the states) is the same stream
 * with its own head byte, tables (gr_dtab), packed states (gr_states) and a tail
 * decoded from the states after the words (gr_step without the refill). A warp fills its 4096-slot table 32 slots at a time, so a slot is found by
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

/* A little-endian u16 / u32 at any byte address. */
GPU_HD uint32_t gr_ld16(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }
GPU_HD uint32_t gr_ld32(const uint8_t *p) { return gr_ld16(p) | (gr_ld16(p + 2) << 16); }

/* The head of codec 2 or, fold 1, codec 11 (rans0.c's decode_lanes): log2 of the base
 * block and of the state count, and nm, the symbols decoded from words (codec 11's last
 * t rounds, t in bits 3-7 of the lane byte, come from the states); 0, or -1 for a
 * payload the CPU would refuse. */
GPU_HD int gr_head(const uint8_t *src, size_t len, size_t n, int fold, int *sh, unsigned *N, size_t *nb, size_t *nm)
{
    if (n == 0 || len < 2 || src[0] < 10 || src[0] > 24) return -1;
    unsigned lg = src[1] & 7u, t = fold ? src[1] >> 3 : 0;
    if ((lg != 5 && lg != 6) || (!fold && src[1] > 7) || t > (n >> lg)) return -1;
    *sh = src[0];
    *N = 1u << lg;
    *nb = ((n - 1) >> src[0]) + 1;
    *nm = n - (size_t)t * *N;
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

/* Codec 11's bit strings (rans_ctab.c), read a byte at a time only when a bit of it is
 * needed: what is left of the last byte taken is the string's padding. */
typedef struct gr_bits {
    const uint8_t *p, *end;
    uint64_t acc;
    unsigned n;
} gr_bits;

GPU_HD int gr_need(gr_bits *r, unsigned k) /* k <= 56 */
{
    while (r->n < k) {
        if (r->p >= r->end) return -1;
        r->acc |= (uint64_t)*r->p++ << r->n;
        r->n += 8;
    }
    return 0;
}

GPU_HD uint32_t gr_take(gr_bits *r, unsigned k) /* k <= 31, after gr_need(r, k) */
{
    uint32_t v = (uint32_t)r->acc & ((1u << k) - 1);
    r->acc >>= k;
    r->n -= k;
    return v;
}

#define GR_DTAB_RUN 25u /* RANS_DTAB_RUN: the longest run of ones */

/* rans_dtab_read: lo, hi, then the bit string: a mode bit m, then for each value below
 * hi its bit length b as a run of ones (a zigzag step from the length 1 + m values
 * back) and a zero, then b's low bits; the same checks (a run over 25, b over 12,
 * f[lo] = 0, a sum of 4096 or more, the bytes ending inside, padding not zero). Only the
 * last two lengths are kept, so a pass with freq NULL needs no room. */
GPU_HD int gr_dtab(const uint8_t **pp, const uint8_t *end, uint16_t *freq)
{
    const uint8_t *p = *pp;
    if (end - p < 3 || p[0] >= p[1]) return -1;
    int lo = p[0], hi = p[1];
    gr_bits r = {p + 2, end, 0, 0};
    if (gr_need(&r, 1)) return -1;
    int m = (int)gr_take(&r, 1), b1 = 0, b2 = 0; /* the lengths 1 and 2 values back */
    if (freq)
        for (int s = 0; s < 256; s++) freq[s] = 0;
    uint32_t sum = 0, first = 0;
    for (int v = lo; v < hi; v++) {
        unsigned u = 0;
        for (;;) {
            if (gr_need(&r, 1)) return -1;
            if (!gr_take(&r, 1)) break;
            if (++u > GR_DTAB_RUN) return -1;
        }
        int b = (m ? b2 : b1) + 1 - m + ((int)(u >> 1) ^ -(int)(u & 1)); /* zigzag: 0, -1, 1, -2, ... */
        if (b < 0 || b > (int)GR_BITS) return -1;
        unsigned nb = b > 1 ? (unsigned)b - 1 : 0;
        if (gr_need(&r, nb)) return -1;
        uint32_t f = (b ? 1u << nb : 0) | gr_take(&r, nb);
        if (v == lo) first = f;
        if (freq) freq[v] = (uint16_t)f;
        sum += f;
        b2 = b1, b1 = b;
    }
    if (r.acc || first == 0 || sum >= GR_M) return -1; /* r.acc: the padding bits */
    if (freq) freq[hi] = (uint16_t)(GR_M - sum);
    *pp = r.p;
    return 0;
}

/* A segment's table: codec 2's (fold 0) or codec 11's. */
GPU_HD int gr_tab(const uint8_t **pp, const uint8_t *end, uint16_t *freq, int fold)
{
    return fold ? gr_dtab(pp, end, freq) : gr_table(pp, end, freq);
}

/* The segment list: k blocks each, covering nb blocks; returns where the starting
 * states begin, or NULL (the CPU's pass 1). */
GPU_HD const uint8_t *gr_segments(const uint8_t *p, const uint8_t *end, size_t nb, int fold)
{
    size_t covered = 0;
    while (covered < nb) {
        size_t k;
        if (gr_leb(&p, end, &k) || k == 0 || k > nb - covered || gr_tab(&p, end, NULL, fold)) return NULL;
        covered += k;
    }
    return p;
}

/* A lane's starting states (rans_states_get's checks): state j0, and j1 when j1 < N
 * (*x1 left alone otherwise). Codec 2: 4 bytes each, at least L. Codec 11: N 4-bit
 * lengths e (two a byte; N is even, so no unused half), then one bit string of each
 * state's 16 + e bits below its leading one, padded with zero bits; every lane reads
 * all of them (a warp's loads of the same bytes are one). Returns where the words
 * start, or NULL (for codec 2, a state of this lane's below L: the warp refuses when
 * any lane gets NULL). */
GPU_HD const uint8_t *gr_states(const uint8_t *p, const uint8_t *end, unsigned N, int fold, unsigned j0, unsigned j1,
                                uint32_t *x0, uint32_t *x1)
{
    if (!fold) {
        if ((size_t)(end - p) < 4 * (size_t)N) return NULL;
        *x0 = gr_ld32(p + 4 * j0);
        if (j1 < N) *x1 = gr_ld32(p + 4 * j1);
        return *x0 < GR_L || (j1 < N && *x1 < GR_L) ? NULL : p + 4 * N;
    }
    if ((size_t)(end - p) < N / 2) return NULL;
    gr_bits r = {p + N / 2, end, 0, 0};
    for (unsigned j = 0; j < N; j++) {
        unsigned b = 16u + ((p[j / 2] >> (4 * (j & 1))) & 15u);
        if (gr_need(&r, b)) return NULL;
        uint32_t x = (1u << b) | gr_take(&r, b);
        if (j == j0) *x0 = x;
        if (j == j1) *x1 = x;
    }
    return r.acc ? NULL : r.p;
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

#endif
