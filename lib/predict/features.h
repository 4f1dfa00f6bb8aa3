/* features.h — the inputs of the ratio predictor, computed from a sample of a tensor.
 *
 * The sample is a few windows spread over the tensor (never the whole tensor), so that
 * a tensor whose start differs from its middle (padding, embeddings of unused tokens)
 * is still seen as a whole. The features are what decides how well the codec does:
 * for lossless coding the entropy of the exponent field (the plane the codec
 * entropy-codes), of the top mantissa bits (nearly random in trained weights), zeros,
 * the spread of values, the dtype and size (small tensors pay the fixed per-chunk
 * cost); for a lossy candidate, the sample is coded by the compressor's own quantiser
 * (lib/transforms/quant_encode.c, see lossy_sample.c), which gives the order-0 entropy of the
 * code planes the entropy stage will see, the exceptions and the group parameters, and
 * the mode, bits, block size and bound themselves. The order is fixed by the
 * model file: changing it means retraining (bench/train-predictor). doc/predict.md
 * lists them.
 */
#ifndef CKPZ_PREDICT_FEATURES_H
#define CKPZ_PREDICT_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"

enum {
    FEAT_BF16,
    FEAT_F16,
    FEAT_F32,
    FEAT_OTHER, /* dtype, one-hot */
    FEAT_ELEM_SIZE,   /* bytes per element / 8 */
    FEAT_LOG2_BYTES,  /* log2(tensor bytes) / 32 */
    FEAT_SMALL,       /* min(1, 1024 / tensor bytes): share of the fixed costs */
    FEAT_ZERO_FRAC,   /* elements equal to zero */
    FEAT_LOG_STD,     /* log2(std of the finite values) / 32, -4 when 0 */
    FEAT_LOG_MEANABS, /* log2(mean |x|) / 32, -4 when 0 */
    FEAT_EXP_ENTROPY, /* order-0 entropy of the exponent field, bits / 8 */
    FEAT_MANT_ENTROPY,/* order-0 entropy of the top (up to 8) mantissa bits, bits / 8 */
    FEAT_EXP_DISTINCT,/* distinct exponent values / possible ones */
    FEAT_EXP_DELTA,   /* order-0 entropy of the exponent's change from the element before, bits / 8 */
    FEAT_REPEAT,      /* elements equal (bitwise) to the element before */
    FEAT_BLOCK_RANGE, /* mean over blocks of 64 of log2(block max - min) - log2(std), / 8 */
    FEAT_RANGE_STD,   /* log2(estimated tensor range / std) / 8 */
    FEAT_UNDERSAMPLE, /* log2(tensor bytes / sampled bytes) / 32 */
    FEAT_LEVEL,       /* candidate: level / 9 */
    FEAT_LOSSLESS,    /* candidate: 1 = this tensor is coded exactly */
    FEAT_M_GRID,      /* candidate: abs / rel (uniform grid), one-hot with the next two */
    FEAT_M_LOG,       /* candidate: pointwise-rel (log grid) */
    FEAT_M_AFFINE,    /* candidate: int8 / bits (per group offset and scale) */
    FEAT_BITS,        /* candidate: affine code bits / 16 */
    FEAT_LOG2_GROUP,  /* candidate: log2(affine group elements) / 24 */
    FEAT_SYM,         /* candidate: affine, symmetric */
    FEAT_LOG_BOUND,   /* candidate: grid: log2(std / E) / 16; log grid: -log2(R) / 16 */
    FEAT_CODE_BITS,   /* quantiser on the sample: order-0 entropy of the code planes, bits / 16 */
    FEAT_EXC_FRAC,    /* quantiser on the sample: share of elements stored as exceptions */
    FEAT_EST_SAVINGS, /* quantiser on the sample: 1 - (codes + group parameters + exceptions) / original */
    FEAT_COUNT
};

#define FEAT_WINDOWS 4
#define FEAT_BLOCK 64 /* elements per block of FEAT_BLOCK_RANGE */

const char *feat_name(unsigned i);

/* A lossy candidate as it applies to one tensor, and what the quantiser made of the
 * sample (lossy_sample.c). */
typedef struct feat_lossy {
    uint8_t mode;          /* QM_ABS, QM_REL (coded as a grid of bound abs_bound), QM_PREL, QM_AFFINE */
    uint8_t bits, sym;     /* QM_AFFINE */
    uint32_t group;        /* QM_AFFINE: elements per group, rows resolved */
    double bound;          /* the setting's bound: E, or R */
    double abs_bound;      /* grids: the E the quantiser used */
    double code_bits;      /* order-0 entropy of the code planes, bits per element */
    double exc_frac;       /* elements stored as they are */
    double bytes_per_elem; /* codes at their entropy + group parameters + bitmap + exceptions */
} feat_lossy;

/* Bits per symbol of a histogram of `bins` bins over `total` symbols (order-0 entropy). */
double feat_entropy(const uint32_t *h, size_t bins, double total);

/* The range of a tensor of `total` elements extrapolated from the range of `sampled`
 * of them: a sample misses the tails, and the largest of n draws of a bell-shaped
 * distribution grows like sqrt(ln n). */
double feat_range_extrapolate(double range, uint64_t sampled, uint64_t total);

/* The windows to read from a tensor of `length` bytes with elements of `esize` bytes,
 * sampling at most `budget` bytes: *n windows (<= FEAT_WINDOWS) of off[k], len[k]
 * bytes relative to the tensor's start, each a whole number of elements, in order and
 * not overlapping. */
void feat_windows(uint64_t length, unsigned esize, size_t budget, uint64_t off[FEAT_WINDOWS], size_t len[FEAT_WINDOWS],
                  unsigned *n);

/* Features of a tensor of dtype t and `length` bytes from p[0..n) (the windows, back to
 * back; n a multiple of the element size), for coding at `level`, lossless when lossy
 * is NULL. */
void feat_compute(ckpz_dtype t, uint64_t length, const uint8_t *p, size_t n, int level, const feat_lossy *lossy,
                  double out[FEAT_COUNT]);

#endif
