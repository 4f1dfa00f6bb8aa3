/* grad.h — the kernels under the gradient calls (ckpz_grad_*, include/ckpz_experimental.h;
 * doc/gradients.md): blockwise quantisation of float32 values to signed codes of 8 or 4
 * bits with one scale per block, and back. The public calls (pack.c) stage each stretch
 * of the caller's FP32, BF16 or FP16 buffer as float32 (through dtype.h's converters)
 * and hand it here, so the kernels know one type and every instruction-set path sees the
 * same floats. Each path (quant.c: portable; quant_avx2.c) does the same float
 * operations in the same order, none fused, so all write the same codes and residuals
 * bit for bit; stochastic rounding draws its numbers from a counter-based hash of
 * (seed, element index), which a vector lane computes as the scalar loop does.
 */
#ifndef CKPZ_GRAD_H
#define CKPZ_GRAD_H

#include <stddef.h>
#include <stdint.h>

/* The random number of element i under key: lowbias32 (a 32-bit integer hash with low
 * bias) applied twice, keyed before each round. Vector paths: the same two rounds per
 * lane. */
static inline uint32_t grad_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

typedef struct grad_key {
    uint32_t k0, k1;
} grad_key;

static inline grad_key grad_key_of(uint64_t seed)
{
    grad_key k = {grad_hash32((uint32_t)seed ^ 0x9e3779b9u), grad_hash32((uint32_t)(seed >> 32) + 0x632be5abu)};
    return k;
}

static inline uint32_t grad_draw(grad_key k, uint32_t i) { return grad_hash32(grad_hash32(i ^ k.k0) + k.k1); }

/* One stretch of a block to quantise: values v[0..n), whose first is element idx of the
 * whole buffer (the hash's counter), to codes in [-qmax, qmax]: y = v * inv, then
 * nearest (ties to even) or, with stochastic set, floor(y) + (u < y - floor(y)), u the
 * element's draw as a multiple of 2^-24; clamped. With resid set, resid[i] becomes
 * v[i] - code * scale (resid may be v itself). */
typedef struct grad_qjob {
    const float *v;
    size_t n;
    uint32_t idx;
    float inv, scale;
    int qmax;
    int stochastic;
    grad_key key;
    int8_t *codes;
    float *resid;
} grad_qjob;

/* The kernels of one instruction-set level. */
typedef struct grad_kernels {
    /* The largest |a[i] + b[i]| (b may be NULL: |a[i]|) as float bits, a NaN or an
     * infinity giving a value >= 0x7f800000; folded into *acc (max). */
    void (*absmax)(const float *a, const float *b, size_t n, uint32_t *acc);
    /* a[i] += b[i] */
    void (*add)(float *a, const float *b, size_t n);
    void (*quant)(const grad_qjob *j);
    /* out[i] = codes[i] * scale */
    void (*dequant)(const int8_t *codes, size_t n, float scale, float *out);
    /* The first code outside [-qmax, qmax] among n, or n. */
    size_t (*check)(const int8_t *codes, size_t n, int qmax);
} grad_kernels;

extern const grad_kernels grad_kernels_scalar;
#if defined(__x86_64__) || defined(__i386__)
#define GRAD_HAVE_X86 1
extern const grad_kernels grad_kernels_avx2;
#endif

#endif
