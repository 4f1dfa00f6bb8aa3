/* escape.h — the escape transform (id 4) for delta residuals.
 *
 * A DIFF residual (predict.h) is a zigzag integer per element: most are a few units,
 * a few are large. Split into bytes (transform int), its top bytes make one skewed
 * plane over the whole byte alphabet plus planes that are almost all zero, and the
 * entropy stage pays per symbol for each. The escape transform keeps the L low bytes
 * of each element as byte planes (they are near-random: coding gains nothing there)
 * and turns the rest, h = r >> 8L (K = E - L bytes), into
 *     A = min(h, T)                      one byte per element, alphabet 0..T, and
 *     h - T for the elements with A = T  K escape planes, most-significant byte first,
 * so the entropy stage codes one small-alphabet plane (its fast path) and short escape
 * planes instead of K full-length ones. Chunk layout (doc/format.md, transform 4):
 *     plane 0            header, stored: L, T
 *     planes 1 .. L      the low bytes, most-significant first (as transform int)
 *     plane L + 1        A
 *     planes L + 2 ..    K escape planes of (count of A = T) bytes each
 *     last (R mod E)     the tail bytes, as they are
 */
#ifndef CKPZ_ESCAPE_H
#define CKPZ_ESCAPE_H

#include <stddef.h>
#include <stdint.h>

#define ESC_HDR 2       /* bytes of the header plane */
/* T written by the encoder: A spans 32 values (register tables of one vector) where
 * most elements fit them, 64 where a quarter or more would escape (pred_choose). */
#define ESC_T_SMALL 31
#define ESC_T_WIDE 63
#define ESC_SLACK 64    /* bytes past each escape plane the vector loops may touch */

/* Encoder, on byte planes as transform int writes them: top[0..K) are the K most
 * significant planes of elems elements. Writes a[0..elems) and appends the escapes of
 * these elements to e[k] from index *nesc on (e[k] must have room for elems more plus
 * ESC_SLACK); adds their count to *nesc. K in 1..8, T in 1..255. */
void esc_forward(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a, uint8_t *const *e,
                 size_t *nesc);

/* Number of A = T in a[0..elems), or -1 if some A exceeds T (never written). */
ptrdiff_t esc_count(unsigned T, const uint8_t *a, size_t elems);

/* Decoder: the K top planes of elems elements from a[] and the escape planes e[k]
 * (esc_count(a) entries each, readable ESC_SLACK bytes further). Returns 0, or -1 if an
 * escape does not fit K bytes once T is added back (never written). */
int esc_inverse(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems, uint8_t *const *top);

#endif
