/* grad.h — the kernels under the gradient calls (ckpz_grad_*, include/ckpz_experimental.h;
 * doc/gradients.md): blockwise quantisation of float32 values to signed codes of 8 or 4
 * bits with one scale per block, or to signs (1 bit) with the block's mean magnitude, and back; 4-bit codes two a byte; BF16 and FP16
 * widened to float32 and narrowed back. The public calls (pack.c, sparse.c, sum.c)
 * stage each stretch of the caller's FP32, BF16 or FP16 buffer as float32 (the widening
 * kernel, exact) and hand it to the others, so they know one type and every
 * instruction-set path sees the same floats. Each path (quant.c: portable; quant_avx2.c) does the same float
 * operations in the same order, none fused, so all write the same codes and residuals
 * bit for bit; stochastic rounding draws its numbers from a counter-based hash of
 * (seed, element index), which a vector lane computes as the scalar loop does.
 */
#ifndef CKPZ_GRAD_H
#define CKPZ_GRAD_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"

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
    /* n BF16 or FP16 values (little-endian) to float32, exactly. */
    void (*widen)(int f16, const uint8_t *src, size_t n, float *out);
    /* n floats to BF16 or FP16, to nearest, ties to even (a NaN stays a NaN). */
    void (*narrow)(int f16, const float *in, size_t n, uint8_t *dst);
    /* 4-bit codes, two a byte: dst[k] = q[2k] & 15 | q[2k + 1] << 4 for k < pairs; and
     * back, each nibble sign-extended. */
    void (*nib_pack)(const int8_t *q, size_t pairs, uint8_t *dst);
    void (*nib_unpack)(const uint8_t *src, size_t pairs, int8_t *q);
    /* 1-bit codes (sign.c's grad_sign_quant and grad_sign_get, below) */
    void (*sign_quant)(const float *v, size_t n, float scale, uint8_t *c, uint64_t i, float *resid);
    void (*sign_get)(const uint8_t *c, uint64_t i, size_t n, int8_t *q);
} grad_kernels;

/* Codes [i, i + n) of 4-bit code bytes c to int8 in q, and q to them (the halves of
 * bytes outside [i, i + n) kept, so an odd count's padding half is the writer's to
 * clear): the kernels' pairs, the odd ends one nibble each. */
static inline void grad_nib_get(const grad_kernels *K, const uint8_t *c, uint64_t i, size_t n, int8_t *q)
{
    size_t k = 0;
    if (n && i & 1) q[k++] = (int8_t)((int8_t)(c[i >> 1] & 0xf0) >> 4);
    K->nib_unpack(c + ((i + k) >> 1), (n - k) / 2, q + k);
    k += (n - k) & ~(size_t)1;
    if (k < n) q[k] = (int8_t)((int8_t)(uint8_t)(c[(i + k) >> 1] << 4) >> 4);
}

static inline void grad_nib_put(const grad_kernels *K, const int8_t *q, uint64_t i, size_t n, uint8_t *c)
{
    size_t k = 0;
    if (n && i & 1) c[i >> 1] = (uint8_t)((c[i >> 1] & 0x0f) | (uint8_t)((uint8_t)q[k++] << 4));
    K->nib_pack(q + k, (n - k) / 2, c + ((i + k) >> 1));
    k += (n - k) & ~(size_t)1;
    if (k < n) /* the high half kept: the next element's (written or still to be read), or the padding */
        c[(i + k) >> 1] = (uint8_t)((c[(i + k) >> 1] & 0xf0) | (q[k] & 0x0f));
}

extern const grad_kernels grad_kernels_scalar;
#if defined(__x86_64__) || defined(__i386__)
#define GRAD_HAVE_X86 1
extern const grad_kernels grad_kernels_avx2;
#endif

#define GRAD_PIECE 1024
#define GRAD_BLOCK_MAX 65536u
#define GRAD_COUNT_MAX 0xffffffffull
#define GRAD_TINY 0x1p-118f /* below: scale 0 (its reciprocal and a/qmax stay normal above) */

/* A block's scale for largest magnitude a: a / qmax, lowered by an ulp where a rounding
 * would make qmax * scale overflow (a within an ulp of FLT_MAX), since a decoder refuses
 * a scale whose largest value is not finite. */
static inline float grad_scale(float a, int qmax)
{
    float s = a / (float)qmax;
    while (!((float)qmax * s <= 0x1.fffffep127f)) s = __builtin_nextafterf(s, 0);
    return s;
}

/* The checks a dense or sparse packet starts with (kernels.c): at least `header` bytes
 * and the CRC, the version this ckpz reads at byte 4, the CRC-32C of all but the last 4
 * bytes; what names the packet in the message. */
ckpz_error grad_frame_check(ckpz_ctx *ctx, const char *what, const uint8_t *src, size_t len, size_t header,
                            unsigned version);

/* kernels.c: the kernels of the level in force (common/cpu.h: the CPU, capped by CKPZ_CPU);
 * the dtypes packed; elements [i0, i0 + n) of src as float32 (src itself for FP32, else
 * tmp; n <= GRAD_PIECE). */
const grad_kernels *grad_kernels_get(void);
int grad_dtype_ok(ckpz_dtype t);
const float *grad_stage(ckpz_dtype t, const void *src, uint64_t i0, size_t n, float *tmp);

#define GRAD_MAGIC "CKGQ"
#define GRAD_VERSION 1
#define GRAD_HEADER 24
#define GRAD_FLAG_STOCHASTIC 1u

typedef struct grad_head {
    unsigned bits;
    ckpz_dtype dtype;
    unsigned flags;
    uint32_t block;
    uint64_t count, nblocks;
    uint64_t seed; /* packing only: the caller's, as far as its struct_size reaches */
    size_t scales, codes, size; /* offsets of the scales and codes, the packet's size with raw codes */
    /* parsing only: how the codes are stored (byte 21: GRAD_CODES_*), the raw codes
     * (in the packet, or in owned, decoded: free with grad_head_release) */
    unsigned coding;
    const uint8_t *cp;
    uint8_t *owned;
} grad_head;

/* Byte 21 of a dense packet: the codes as they are, or entropy-coded by the container's
 * codec of that id (lib/entropy: constant, order-0 rANS; doc/entropy.md). */
#define GRAD_CODES_RAW 0u
#define GRAD_CODES_CONST 1u
#define GRAD_CODES_RANS0 2u

/* The layout of a dense packet of h's count, block and bits (0: beyond a size_t); the
 * header of src[0..len) and every check of the dense packet, h filled (h->cp the raw
 * codes; grad_head_release frees what decoding them took, also after a failure). */
int grad_layout(grad_head *h);
ckpz_error grad_parse(ckpz_ctx *ctx, const uint8_t *src, size_t len, grad_head *h);
void grad_head_release(grad_head *h);

/* kernels.c: the raw codes c[0..n) entropy-coded in place when that is smaller (order-0
 * rANS or one repeated byte; never fails: raw when not smaller or out of memory);
 * returns the bytes they take now, *coding set. And back: len coded bytes of coding to
 * n raw ones in a new buffer *out (malloc; the caller frees it), -1 when they do not
 * decode to exactly n bytes (hostile input: never reads or writes outside the buffers),
 * -2 out of memory. */
size_t grad_codes_encode(uint8_t *c, size_t n, unsigned *coding);
int grad_codes_decode(unsigned coding, const uint8_t *src, size_t len, size_t n, uint8_t **out);

/* sign.c: 1-bit codes (bits = 1), the portable loops (the level's: K->sign_quant,
 * K->sign_get). grad_sign_sum adds |v[i]| to *acc in element order;
 * grad_sign_scale is a block's scale from that sum over its n elements (mean |v|, 0
 * below GRAD_TINY); grad_sign_quant sets bits [i, i + n) of c to the signs of v (1:
 * v >= 0, decoded +scale; 0: -scale; the other bits of the bytes kept) and, with resid
 * (may be v itself), resid[k] = v[k] -+ scale; grad_sign_get gives bits [i, i + n) as
 * codes +-1; grad_sign_pad clears the last byte's bits past count. */
void grad_sign_sum(const float *v, size_t n, double *acc);
float grad_sign_scale(double sum, uint64_t n);
void grad_sign_quant(const float *v, size_t n, float scale, uint8_t *c, uint64_t i, float *resid);
void grad_sign_get(const uint8_t *c, uint64_t i, size_t n, int8_t *q);
void grad_sign_pad(uint8_t *c, uint64_t count);

/* sparse.c: the sparse packet (magic CKGS), called by pack.c's public calls once the
 * params are resolved (q: a whole struct, defaults filled) or the magic seen. */
#define GRAD_SPARSE_MAGIC "CKGS"
ckpz_error grad_sparse_size(ckpz_ctx *ctx, const ckpz_grad_params *q, uint64_t n, size_t *size);
ckpz_error grad_sparse_pack(ckpz_ctx *ctx, const ckpz_grad_params *q, ckpz_dtype dtype, const void *grad, uint64_t n,
                            float *residual, void *dst, size_t cap, size_t *written);
ckpz_error grad_sparse_info(ckpz_ctx *ctx, const uint8_t *src, size_t len, ckpz_grad_info *mine);
/* out: n elements of dtype, or (add set) n FP32 elements the values are added into. */
ckpz_error grad_sparse_unpack(ckpz_ctx *ctx, const uint8_t *src, size_t len, ckpz_dtype dtype, void *out, uint64_t n,
                              int add);

#endif
