/* features.h — the inputs of the ratio predictor, computed from a sample of a tensor.
 *
 * The sample is a few windows spread over the tensor (never the whole tensor), so that
 * a tensor whose start differs from its middle (padding, embeddings of unused tokens)
 * is still seen as a whole. The features are what decides how well the lossless codec
 * does: the entropy of the exponent field (the plane the codec entropy-codes), of the
 * top mantissa bits (nearly random in trained weights), zeros, the spread of values,
 * the dtype and size (small tensors pay the fixed per-chunk cost), and the candidate
 * setting. The order is fixed by the model file: changing it means retraining
 * (bench/train-predictor). doc/predict.md lists them.
 */
#ifndef CKPZ_PREDICT_FEATURES_H
#define CKPZ_PREDICT_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"

enum {
    FEAT_BF16, FEAT_F16, FEAT_F32, FEAT_OTHER, /* dtype, one-hot */
    FEAT_ELEM_SIZE,   /* bytes per element / 8 */
    FEAT_LOG2_BYTES,  /* log2(tensor bytes) / 32 */
    FEAT_SMALL,       /* min(1, 1024 / tensor bytes): share of the fixed costs */
    FEAT_ZERO_FRAC,   /* elements equal to zero */
    FEAT_LOG_STD,     /* log2(std of the finite values) / 32, -4 when 0 */
    FEAT_LOG_MEANABS, /* log2(mean |x|) / 32, -4 when 0 */
    FEAT_EXP_ENTROPY, /* order-0 entropy of the exponent field, bits / 8 */
    FEAT_MANT_ENTROPY,/* order-0 entropy of the top (up to 8) mantissa bits, bits / 8 */
    FEAT_EXP_DISTINCT,/* distinct exponent values / possible ones */
    FEAT_LEVEL,       /* candidate: level / 9 */
    FEAT_LOSSLESS,    /* candidate: 1 = lossless (lossy modes later) */
    FEAT_MODE_PARAM,  /* candidate: the lossy mode's parameter; 0 for lossless */
    FEAT_COUNT
};

#define FEAT_WINDOWS 4

const char *feat_name(unsigned i);

/* The windows to read from a tensor of `length` bytes with elements of `esize` bytes,
 * sampling at most `budget` bytes: *n windows (<= FEAT_WINDOWS) of off[k], len[k]
 * bytes relative to the tensor's start, each a whole number of elements, in order and
 * not overlapping. */
void feat_windows(uint64_t length, unsigned esize, size_t budget, uint64_t off[FEAT_WINDOWS],
                  size_t len[FEAT_WINDOWS], unsigned *n);

/* Features of a tensor of dtype t and `length` bytes from p[0..n) (the windows, back to
 * back; n a multiple of the element size), for lossless coding at `level`. */
void feat_compute(ckpz_dtype t, uint64_t length, const uint8_t *p, size_t n, int level,
                  double out[FEAT_COUNT]);

#endif
