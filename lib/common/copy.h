/* copy.h — copies into memory that is not read again here: a restored chunk's bytes going
 * out to the caller's tensors, a stored plane into a frame, a frame into a memory sink.
 *
 * A plain store to a line not in the cache first reads the line in (to own it); writing
 * megabytes of output that way moves every byte through the memory bus twice and pushes
 * the working set out of the cache. Streaming stores write whole lines without reading
 * them. mem_stream streams any run of 64 bytes or more (a slice merged in a bounce
 * buffer in cache); mem_copy_far streams from MEM_FAR_COPY bytes on and copies shorter runs plainly, where
 * the lines may well be read again soon. A streamed copy ends with a store fence, so that
 * bytes another thread reads next (a frame written for the writer, a chunk for the
 * caller) are in memory before whatever publishes them. Off x86-64, memcpy.
 */
#ifndef CKPZ_COPY_H
#define CKPZ_COPY_H

#include <stddef.h>
#include <stdint.h>

#define MEM_FAR_COPY (64u << 10)

void mem_stream(uint8_t *dst, const uint8_t *src, size_t n);
void mem_copy_far(uint8_t *dst, const uint8_t *src, size_t n);

#endif
