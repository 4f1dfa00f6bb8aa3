/* repeats.h — a cheap look for repeated content in a chunk: rows, blocks or runs that
 * recur whole, which LZ coding finds and byte-plane coding at the default levels does
 * not try for (doc/format.md's transforms are unchanged; codec.c codes such a chunk a
 * second way and keeps the smaller frame: doc/entropy.md, "Chunks with repeats"). */
#ifndef CKPZ_REPEATS_H
#define CKPZ_REPEATS_H

#include <stddef.h>
#include <stdint.h>

/* Of the chunk's sampled 16-byte blocks, in 1/256ths: *repeats, the share of nonzero
 * blocks equal to an earlier sampled block, *zeros, the share of blocks of zeros, and
 * *zbytes (when not NULL) the share of zero bytes in them. All 0 for chunks too small to
 * sample (under 64 KiB). */
void chunk_repeats(const uint8_t *raw, size_t n, unsigned *repeats, unsigned *zeros, unsigned *zbytes);

/* Of a packed group's n bytes (encode.c), 256 sampled 16-byte blocks spread over them
 * (every n/256 bytes, rounded down to 16), in 1/256ths: the share of nonzero blocks equal
 * to an earlier sampled one. Tensors repeated whole in a group (copies, tied or freshly
 * initialised small weights) recur at their length, which such a grid meets when the two
 * share a large enough factor. */
unsigned group_repeats(const uint8_t *raw, size_t n);

/* From these shares on (1/8 of the samples repeating, 1/4 zero) codec.c tries LZ. */
#define REPEATS_LIKELY 32u
#define ZEROS_LIKELY 64u
/* From this share of zero bytes on (3/8: the entropy stage tries zstd on a plane of
 * integers over half zero, entropy/select.c), codec.c leaves LZ to the entropy stage on
 * a chunk of 1-byte integers. */
#define ZERO_BYTES_LZ 96u

#endif
