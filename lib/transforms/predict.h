/* predict.h — the predictor stage of delta checkpoints: a chunk is coded as its
 * residual against the same bytes of the previous checkpoint (the base), ahead of the
 * byte-plane split.
 *
 * Fine-tuning and optimiser steps move most weights by a few units in the last place,
 * so the residual is mostly zero high bytes. XOR keeps the sign and exponent bits that
 * did not change as zeros; DIFF subtracts the elements as integers, after mapping
 * floats onto an order-preserving integer scale, so that a step of k ulps becomes the
 * small number 2k or 2k-1 (zigzag) even where it carries into the exponent or crosses
 * zero. pred_choose estimates from a sample which of stand-alone, XOR and DIFF codes
 * cheapest; COPY is the caller's for a chunk equal to its base (no residual stored).
 */
#ifndef CKPZ_PREDICT_H
#define CKPZ_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"
#include "ids.h" /* enum pred_id */

/* "none", "xor", "diff", "copy"; "?" for other values. */
const char *pred_name(uint8_t pred);

/* 1 for the float dtypes (the dtype table's class): DIFF maps them with M below. */
int pred_is_float(ckpz_dtype dtype);

/* Residual r of n bytes x against the base's bytes b (same length). esize = element
 * size (1, 2, 4 or 8); is_float selects the order-preserving map M for DIFF.
 *   PRED_NONE: r = x.   PRED_XOR: r = x ^ b.   PRED_COPY: r = 0 (x must equal b).
 *   PRED_DIFF: r = zigzag(M(x) - M(b)) per element of esize*8 bits, mod 2^bits, where
 *     for floats M(u) = (u has the sign bit) ? ~u : u ^ signbit and for integers M(u) = u;
 *     zigzag(d) = (d << 1) ^ (d >> (bits-1)), d read as signed.
 * Elements are little-endian. n should be a multiple of esize; a tail of n % esize
 * bytes is coded byte by byte as integers. r may be x (in place); b must not overlap r
 * unless it equals x. An unknown pred id is treated as PRED_NONE. */
void pred_forward(uint8_t pred, unsigned esize, int is_float, const uint8_t *x, const uint8_t *b, size_t n, uint8_t *r);
/* Inverse: x from r and b (PRED_COPY copies b and ignores r). x may be r (in place). */
void pred_inverse(uint8_t pred, unsigned esize, int is_float, const uint8_t *r, const uint8_t *b, size_t n, uint8_t *x);

/* pred_forward followed by xf_split (planes.h) of the residual, in one pass where a
 * vector loop exists: PRED_XOR or PRED_DIFF, XF_INT or XF_FLOAT, esize 2 or 4, a CPU
 * with AVX-512 VBMI. Writes the planes of the first k bytes of x (k a multiple of
 * 64 * esize, plane[i][0 .. k / esize)) and returns k, which is 0 when no loop applies;
 * the caller predicts and splits the rest. Same bytes as the two-step path. */
size_t pred_forward_split(uint8_t pred, uint8_t xf, unsigned esize, int is_float, const uint8_t *x, const uint8_t *b,
                          size_t n, uint8_t *const *plane);
/* PRED_DIFF's residual of x against b (esize 2 or 4), split and put through the escape
 * transform (escape.h) in one pass: the L low bytes of each element to low[0 .. L)
 * (most significant first, as planes K .. esize - 1 of xf_split), A = min(h, T) to a,
 * and the escapes appended to e[] at *nesc, as esc_forward would. K = esize - L must be
 * 1 or 2. Vector loops only (AVX-512 with VBMI2, AVX2): returns the elements done, a
 * multiple of 64 (32 with AVX2), or 0 where it cannot run; the caller does the rest. */
size_t pred_forward_esc(unsigned esize, int is_float, unsigned L, unsigned T, const uint8_t *x, const uint8_t *b,
                        size_t n, uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *nesc);

/* Chooses the predictor for chunk x[0..n) against its base b[0..n): PRED_NONE, PRED_XOR
 * or PRED_DIFF, the one whose residual (x itself for NONE) has the lowest estimated
 * coded size. The estimate is the sum over byte planes, as the coder will split them
 * (pred_transform), of the order-0 entropy of a sample: four windows of 1024 elements
 * (512 for 8-byte ones) spread over the chunk, first and last at its ends, or all
 * elements if fewer. A delta predictor must beat 0.99 x the NONE estimate, so near-ties
 * stay stand-alone; XOR wins ties with DIFF. Never COPY: testing equality is the
 * caller's. A tail of n % element size bytes is ignored. Reads at most 16 KiB of each
 * side whatever n is (about 20 us for f32). Thread-safe. If diff_low is not NULL it
 * gets how the escape transform (escape.h) should code a DIFF residual of 2 or 4 bytes:
 * the number L of low bytes kept as plain planes (those whose sample looks random,
 * >= 7.5 bits per byte, and at least all but the top two), or -1 when fewer than half
 * the sampled elements would fit A (no escape transform); and esc_t (if not NULL) the
 * threshold T to code it with (ESC_T_SMALL, or ESC_T_WIDE where a quarter or more of the
 * sample would escape at ESC_T_SMALL, in chunks of 16384 elements or more). */
uint8_t pred_choose(ckpz_dtype dtype, const uint8_t *x, const uint8_t *b, size_t n, int *diff_low, unsigned *esc_t);

/* The transform (planes.h ids) and element size that split the residual of pred:
 * NONE, XOR (and COPY) -> xf_choose(dtype); DIFF -> XF_INT with the dtype's element size
 * when that is 2, 4 or 8, else XF_NONE with esize 1 (the coder then turns XF_INT planes
 * into the escape transform's, XF_ESC). */
void pred_transform(uint8_t pred, ckpz_dtype dtype, uint8_t *xf, uint8_t *esize);

#endif
