/* planes.h — third stage: split a chunk of elements into byte planes and back.
 *
 * Floats are rotated left by one bit, so the sign moves to the lowest bit and the
 * exponent becomes the top of the value, then split into bytes most-significant first:
 * plane 0 is the whole 8-bit exponent for BF16 and FP32 (exponent regrouping), the top
 * of the exponent for FP64, and the rest are mantissa bytes. One rule serves every
 * float width. Integers are split most-significant first without rotation (their high
 * bytes are runs of 0x00/0xFF). Bytes past the last whole element form one extra plane.
 */
#ifndef CKPZ_PLANES_H
#define CKPZ_PLANES_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"
#include "xform.h" /* the ids: XF_NONE, XF_FLOAT, XF_INT are the byte-plane transforms */

/* The transform and element size used for a dtype (its layout in common/dtype.h). */
void xf_choose(ckpz_dtype dtype, uint8_t *xf, uint8_t *esize);

/* Number of planes and their sizes for n bytes; returns the plane count, 0 if the
 * (xf, esize) pair is not a byte-plane transform's. sizes[] needs XF_MAX_PLANES entries. */
unsigned xf_plane_sizes(uint8_t xf, uint8_t esize, size_t n, size_t *sizes);

/* Role of plane i (an ent_hint) for the entropy stage, in the dtype's own transform
 * (xf_choose) with element size esize: the dtype table's plane roles; planes from esize on
 * hold tail bytes. */
int xf_plane_hint(ckpz_dtype dtype, uint8_t esize, unsigned i);

/* Writes plane i of n source bytes to plane[i] (sizes as xf_plane_sizes gives them). */
void xf_split(uint8_t xf, uint8_t esize, const uint8_t *src, size_t n, uint8_t *const *plane);

/* Inverse of xf_split, reading plane i from plane[i] (the planes need not be adjacent,
 * so a stored plane is merged straight from the compressed payload). */
void xf_merge(uint8_t xf, uint8_t esize, const uint8_t *const *plane, size_t n, uint8_t *dst);

/* Restored bytes bound for a large destination that was just handed out (xf_chunk.stream)
 * are merged and checksummed in a bounce slice of the scratch, in cache, then copied out
 * by mem_stream (common/copy.h) with streaming stores, which write whole lines without
 * reading them first: a plain store to such memory waits for its line to be read in.
 * XF_BOUNCE is the room a transform's scratch keeps for a slice of n bytes; xf_bounce
 * finds the slice in it (64-byte aligned). */
#define XF_BOUNCE(n) ((n) + 64)
uint8_t *xf_bounce(uint8_t *room);

#endif
