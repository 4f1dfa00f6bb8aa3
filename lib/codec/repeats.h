/* repeats.h — a cheap look for repeated content in a chunk: rows, blocks or runs that
 * recur whole, which LZ coding finds and byte-plane coding at the default levels does
 * not try for (doc/format.md's transforms are unchanged; the chunk is coded twice where
 * repeats are likely and the smaller frame kept: codec.c). */
#ifndef CKPZ_REPEATS_H
#define CKPZ_REPEATS_H

#include <stddef.h>
#include <stdint.h>

/* Share of the chunk's sampled 16-byte blocks that recur (an earlier sampled block has the
 * same bytes), in 1/256ths: 0 for chunks too small to sample. */
unsigned chunk_repeat_share(const uint8_t *raw, size_t n);

/* Shares from this one (1/8 of the samples recurring) make chunk_encode try LZ. */
#define REPEATS_LIKELY 32u

#endif
