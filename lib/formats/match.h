/* match.h — delta coding's use of the formats stage: describe the base (the previous
 * checkpoint, whole in memory) and find, for each segment of the input, the base's
 * segment that holds the same thing: a tensor with the same name, dtype, shape and
 * length, or opaque bytes at the same offset with the same length. The open tail of
 * the input matches the base's open tail at the same offset, whatever their lengths:
 * only the bytes both have are predicted. */
#ifndef CKPZ_MATCH_H
#define CKPZ_MATCH_H

#include "formats.h"

typedef struct base_index {
    fmt_list segs;    /* the base described, resume segments resolved */
    uint32_t *slots;  /* open addressing over tensor names: segment index + 1, 0 = empty */
    size_t nslots;    /* a power of two */
} base_index;

/* Describes base[0..n) with the same format request as the input (falling back to
 * detection). 0, or -1 when out of memory. */
int base_index_build(const uint8_t *base, size_t n, const fmt_request *rq, base_index *bi);
void base_index_free(base_index *bi);

/* The base segment for input segment s (which starts at `offset` of the input), or NULL
 * when there is none. */
const fmt_segment *base_index_match(const base_index *bi, const fmt_segment *s, uint64_t offset);

#endif
