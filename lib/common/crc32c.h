/* crc32c.h — the two CRC-32s ckpz computes. CRC-32C (Castagnoli) is the checksum of
 * every ckpz header, chunk and file, chosen because x86-64 computes it in hardware
 * (SSE4.2) at several GB/s, and because CRCs combine: the whole file's checksum is
 * derived from the per-chunk checksums the workers compute anyway, so no extra pass over
 * the data is needed. The zip CRC-32 (IEEE 802.3, zlib's crc32()) is here because
 * torch.save archives, which ckpz writes from memory, carry a CRC-32 of every member;
 * it combines the same way. */
#ifndef CKPZ_CRC32C_H
#define CKPZ_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of buf continuing from crc (0 to start). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t n);
/* Copies n bytes from src to dst (not overlapping) and returns crc32c(crc, src, n), in
 * one pass over the data where the CPU folds with carry-less multiplies (a stored
 * chunk's bytes, checked as they are copied). */
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n);
/* CRC-32C of A||B from crc(A), crc(B) and len(B). */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* Zip CRC-32 of buf continuing from crc (0 to start), as zlib's crc32(). */
uint32_t crc32_zip(uint32_t crc, const void *buf, size_t n);
/* Copies n bytes from src to dst (not overlapping) and returns crc32_zip(crc, src, n),
 * in one pass over the data. */
uint32_t crc32_zip_copy(uint32_t crc, void *dst, const void *src, size_t n);
/* Zip CRC-32 of A||B from crc(A), crc(B) and len(B). */
uint32_t crc32_zip_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif
