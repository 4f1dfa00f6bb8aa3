/* crc32c.h — CRC-32C (Castagnoli), the checksum of every ckpz header, chunk and file.
 * Chosen because x86-64 computes it in hardware (SSE4.2) at several GB/s, and because
 * CRCs combine: the whole file's checksum is derived from the per-chunk checksums the
 * workers compute anyway, so no extra pass over the data is needed. */
#ifndef CKPZ_CRC32C_H
#define CKPZ_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC of buf continuing from crc (0 to start). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t n);
/* CRC of A||B from crc(A), crc(B) and len(B). */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* Tests set this to run the crc32-instruction path on long buffers too (both paths
 * must give the same values). */
extern int crc32c_no_fold;

#endif
