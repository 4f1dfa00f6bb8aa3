/* simd.h — the transforms' AVX-512 kernels (and the planes', escapes', fused prediction's
 * and q8's AVX2 ones), one file each beside its portable twin (planes_avx*.c,
 * predict_avx*.c, escape_avx*.c, q8_avx*.c). Built with target attributes for x86-64
 * with GCC or clang; the portable files call them only when cpu.h allows (CPU_AVX512,
 * CPU_VBMI2 for the escape loops, CPU_AVX2 for the AVX2 ones), and every one writes
 * exactly what the portable loops would. Each returns how many elements it did (whole
 * steps of 64, of 32 for the AVX2 loops but q8's; q8's, whole blocks); the caller does
 * the rest. */
#ifndef CKPZ_TRANSFORMS_SIMD_H
#define CKPZ_TRANSFORMS_SIMD_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define XF_HAVE_X86 1

/* planes_avx512.c: xf_split / xf_merge of elems elements of esize 2 or 4, rotated when rot. */
size_t xf_split_avx512(unsigned esize, const uint8_t *src, size_t elems, uint8_t *const *pl, int rot);
size_t xf_merge_avx512(unsigned esize, const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot);
/* planes_avx2.c: the same for CPUs with AVX2 but not AVX-512. */
size_t xf_split_avx2(unsigned esize, const uint8_t *src, size_t elems, uint8_t *const *pl, int rot);
size_t xf_merge_avx2(unsigned esize, const uint8_t *const *pl, size_t elems, uint8_t *dst, int rot);

/* predict_avx512.c: pred_forward_split for XOR (xor_) or DIFF of floats (flt) or integers,
 * rotated when rot (XOR only); pred_forward_esc (needs CPU_VBMI2 too). */
size_t pred_split_avx512(int xor_, int flt, int rot, unsigned esize, const uint8_t *x, const uint8_t *b, size_t elems,
                         uint8_t *const *plane);
size_t pred_esc_avx512(unsigned esize, int flt, unsigned L, unsigned T, const uint8_t *x, const uint8_t *b,
                       size_t elems, uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *nesc);
/* predict_avx2.c: pred_forward_esc for CPUs with AVX2 (no VBMI2), whole steps of 32. */
size_t pred_esc_avx2(unsigned esize, int flt, unsigned L, unsigned T, const uint8_t *x, const uint8_t *b, size_t elems,
                     uint8_t *const *low, uint8_t *a, uint8_t *const *e, size_t *nesc);
/* predict_avx2.c: pred_inverse of DIFF for esize 2 or 4 (x may be r), whole steps of 64 bytes. */
size_t pred_inverse_avx2(int flt, unsigned esize, const uint8_t *r, const uint8_t *b, size_t elems, uint8_t *x);
/* predict_avx512.c: pred_inverse of DIFF for esize 2 or 4 (x may be r). */
size_t pred_inverse_avx512(int flt, unsigned esize, const uint8_t *r, const uint8_t *b, size_t elems, uint8_t *x);

/* escape_avx512.c: esc_forward and esc_inverse for K = 1 or 2 (needs CPU_VBMI2); the
 * inverse sets *bad when an escape overflows its K bytes. */
size_t esc_fwd_avx512(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a, uint8_t *const *e,
                      size_t *nesc);
size_t esc_inv_avx512(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems, size_t *nesc,
                      uint8_t *const *top, int *bad);
/* escape_avx2.c: the same for CPUs with AVX2 (no VBMI2), whole steps of 32. */
size_t esc_fwd_avx2(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a, uint8_t *const *e,
                    size_t *nesc);
size_t esc_inv_avx2(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems, size_t *nesc,
                    uint8_t *const *top, int *bad);

/* q8_avx512.c: q8.c's merge_blocks of whole steps of eight blocks; returns the blocks done. */
size_t q8_merge_avx512(const uint8_t *const *pl, size_t b0, size_t cnt, uint8_t *out);
/* q8_avx2.c: the same a block at a time, for CPUs with AVX2 but not AVX-512 (all of cnt). */
size_t q8_merge_avx2(const uint8_t *const *pl, size_t b0, size_t cnt, uint8_t *out);
#endif

#endif
