/* crc_dev.h — CRC-32C (common/crc32c.h: reflected polynomial 0x82F63B78, initial and
 * final inversion) for the device check of restored chunks, and for its CPU test.
 *
 * A chunk's bytes are cut into pieces that threads checksum on their own; because the
 * CRC of A||B is crc(A) times x^(8 len(B)) modulo the polynomial, XOR crc(B) (zlib's
 * crc32_combine), every piece's CRC moved past the bytes that follow it, XORed with the
 * others in any order, gives the chunk's CRC: one atomicXor per piece. Byte-at-a-time
 * with a 1 KiB table: the device is memory-bound long before this matters.
 */
#ifndef CKPZ_GPU_CRC_DEV_H
#define CKPZ_GPU_CRC_DEV_H

#include "rans0_dev.h" /* GPU_HD */

#define GC_POLY 0x82f63b78u
#define GC_PIECE 1024u /* bytes a thread checksums */

/* tab[256]: the byte table; x2n[64]: x^(2^k) modulo the polynomial. */
GPU_HD void gc_tables(uint32_t *tab, uint32_t *x2n)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ GC_POLY : c >> 1;
        tab[i] = c;
    }
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

/* The CRC-32C of p[0..n) (initial and final inversion). */
GPU_HD uint32_t gc_bytes(const uint32_t *tab, const uint8_t *p, uint32_t n)
{
    uint32_t c = 0xffffffffu;
    for (uint32_t i = 0; i < n; i++) c = tab[(c ^ p[i]) & 0xff] ^ (c >> 8);
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
