/* crc_dev.h — CRC-32C (common/crc32c.h: reflected polynomial 0x82F63B78, initial and
 * final inversion) for the device check of restored chunks, and for its CPU test.
 *
 * A chunk's bytes are cut into pieces that threads checksum on their own; because the
 * CRC of A||B is crc(A) times x^(8 len(B)) modulo the polynomial, XOR crc(B) (zlib's
 * crc32_combine), every piece's CRC moved past the bytes that follow it, XORed with the
 * others in any order, gives the chunk's CRC: one atomicXor per piece. A piece is read
 * 16 bytes at a time from 16-byte boundaries (one vector load on the device, the bytes
 * before the first boundary and after the last one at a time) and folded eight bytes a
 * step with eight 1 KiB tables (slicing-by-8: eight independent lookups, not a chain of
 * eight): byte loads from 32 pieces 1 KiB apart and a lookup chain per byte made the
 * first version of this check (2026-12-04, H200) slower than the decode it checked.
 */
#ifndef CKPZ_GPU_CRC_DEV_H
#define CKPZ_GPU_CRC_DEV_H

#include <string.h>

#include "rans0_dev.h" /* GPU_HD */

#define GC_POLY 0x82f63b78u
#define GC_PIECE 1024u /* bytes a thread checksums */
#define GC_TABS (8 * 256 + 64) /* words of gc_tables' two tables */

/* tab[8 * 256]: the byte table, then tab[256 k + i] = i's CRC moved on by k zero bytes
 * (slicing-by-8); x2n[64]: x^(2^k) modulo the polynomial. */
GPU_HD void gc_tables(uint32_t *tab, uint32_t *x2n)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ GC_POLY : c >> 1;
        tab[i] = c;
    }
    for (uint32_t i = 256; i < 8 * 256; i++) tab[i] = (tab[i - 256] >> 8) ^ tab[tab[i - 256] & 0xff];
    uint32_t p = 1u << 30; /* x^1 */
    for (int k = 0; k < 64; k++) {
        x2n[k] = p;
        /* p = p * p mod P (zlib's multmodp) */
        uint32_t a = p, b = p, m = 1u << 31, r = 0;
        for (;;) {
            if (a & m) {
                r ^= b;
                if ((a & (m - 1)) == 0) break;
            }
            m >>= 1;
            b = b & 1 ? (b >> 1) ^ GC_POLY : b >> 1;
        }
        p = r;
    }
}

/* a * b modulo the polynomial (reflected). */
GPU_HD uint32_t gc_mult(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, r = 0;
    if (!a) return 0;
    for (;;) {
        if (a & m) {
            r ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ GC_POLY : b >> 1;
    }
    return r;
}

/* crc moved past `bytes` bytes: crc * x^(8 bytes). */
GPU_HD uint32_t gc_shift(const uint32_t *x2n, uint32_t crc, uint64_t bytes)
{
    for (int k = 3; bytes && k < 64; k++, bytes >>= 1)
        if (bytes & 1) crc = gc_mult(x2n[k], crc);
    return crc;
}

/* Eight bytes, as two little-endian words lo and hi, folded into c. */
GPU_HD uint32_t gc_fold8(const uint32_t *tab, uint32_t c, uint32_t lo, uint32_t hi)
{
    c ^= lo;
    return tab[7 * 256 + (c & 0xff)] ^ tab[6 * 256 + ((c >> 8) & 0xff)] ^ tab[5 * 256 + ((c >> 16) & 0xff)] ^
           tab[4 * 256 + (c >> 24)] ^ tab[3 * 256 + (hi & 0xff)] ^ tab[2 * 256 + ((hi >> 8) & 0xff)] ^
           tab[256 + ((hi >> 16) & 0xff)] ^ tab[hi >> 24];
}

/* The CRC-32C of p[0..n) (initial and final inversion). */
GPU_HD uint32_t gc_bytes(const uint32_t *tab, const uint8_t *p, uint32_t n)
{
    uint32_t c = 0xffffffffu, i = 0, head = (uint32_t)((16 - ((uintptr_t)p & 15)) & 15);
    for (; i < n && i < head; i++) c = tab[(c ^ p[i]) & 0xff] ^ (c >> 8);
    for (; n - i >= 16; i += 16) {
        uint32_t w[4];
#ifdef __CUDA_ARCH__
        uint4 v = *(const uint4 *)(p + i);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
#else
        memcpy(w, p + i, 16); /* the tables are for a little-endian host, as the device is */
#endif
        c = gc_fold8(tab, c, w[0], w[1]);
        c = gc_fold8(tab, c, w[2], w[3]);
    }
    for (; i < n; i++) c = tab[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return ~c;
}

/* Piece k of a chunk of n bytes: its CRC moved to the chunk's end (0 past the end). */
GPU_HD uint32_t gc_piece(const uint32_t *tab, const uint32_t *x2n, const uint8_t *chunk, uint32_t n, uint32_t k)
{
    uint64_t at = (uint64_t)k * GC_PIECE;
    if (at >= n) return 0;
    uint32_t len = n - at < GC_PIECE ? (uint32_t)(n - at) : GC_PIECE;
    return gc_shift(x2n, gc_bytes(tab, chunk + at, len), n - at - len);
}

#endif
