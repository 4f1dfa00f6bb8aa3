/* quant.h — the lossy transform: float elements become small integer codes.
 *
 * A lossy chunk stores, instead of the elements' bits, one code per element that the
 * decoder maps back to a value on a grid, plus the few elements that no code can
 * represent within the bound (NaN, Inf, far outliers, rounding at the edge), stored as
 * they are ("exceptions"). Three grids:
 *   - absolute (QM_ABS; QM_REL is QM_ABS with E = R x the tensor's value range, QM_CREL
 *     with E = R x the RMS of its change since the base): a uniform grid of step 2E, so
 *     every value is within E of its code's;
 *   - logarithmic (QM_PREL): a uniform grid on log2|x| with the sign kept, so every
 *     value is within R|x|, none changes sign and none becomes zero (Adam's exp_avg_sq
 *     stays positive); exact zeros have a code of their own;
 *   - affine (QM_AFFINE, fixed rate): per group of G elements (a block of columns, or a
 *     row for per-channel INT8), offset + scale x code with 8- or 16-bit codes, from the
 *     group's min-max or a percentile of its magnitudes.
 * With a base, the grid is laid around the base's element (closed loop: the base is
 * what the decoder restored, so errors do not add up along a chain). Magnitude pruning
 * sets the smallest values (residuals, with a base) to zero (to the base's value): a
 * bitmap says which elements carry a code. Codes go to the entropy stage as byte
 * planes; they are what makes lossy files small.
 *
 * Decoding is plain IEEE double arithmetic (no libm transcendental functions: the log
 * grid uses this file's own exp2 and log2), so every decoder on every platform restores
 * the same bits, which the chunk's checksum then confirms. The encoder reconstructs each
 * element exactly as the decoder will and checks it against the bound; an element that
 * fails becomes an exception, so the bound holds for every element by construction.
 */
#ifndef CKPZ_QUANT_H
#define CKPZ_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"

/* Modes, stored in entry records and chunk headers: the numbers are fixed. */
enum quant_mode {
    QM_NONE = 0,   /* lossless */
    QM_ABS = 1,    /* |x' - x| <= E */
    QM_REL = 2,    /* |x' - x| <= R (max - min) of the tensor (coded as QM_ABS) */
    QM_PREL = 3,   /* |x' - x| <= R |x|, log grid */
    QM_AFFINE = 4, /* fixed rate, per-group offset and scale */
    QM_CREL = 5,   /* |x' - x| <= R x the RMS of the tensor's change since the base (coded as
                      QM_ABS; without a base the tensor stays lossless, or takes its
                      keyframe bound); no-base: R x the RMS of the tensor itself */
    QM_COUNT_
};

/* How a grid rounds (quant_spec.stochastic). Unbiased rounding goes down or up to the
 * grid points around x at random, with the odds that keep, on average:
 * - QR_VALUE: x itself (every grid; policy word `stochastic`): what a quantity used
 *   linearly needs (Adam's m: each step and the next m are linear in it);
 * - QR_LOG: log2 |x| (the log grid only; `stochastic-log`): on the log grid x then comes
 *   back larger on average (by ~3.5% at ratio 1.9), but a power of it less biased than
 *   through QR_VALUE (Adam's v, whose step divides by sqrt(v): +0.3% against +1.0% at
 *   ratio 1.5). */
enum quant_rounding { QR_NEAREST, QR_VALUE, QR_LOG };

/* How to code one tensor (what a policy rule says). */
typedef struct quant_spec {
    uint8_t mode;    /* enum quant_mode */
    uint8_t bits;    /* QM_AFFINE: 8 or 16 */
    uint8_t sym;     /* QM_AFFINE: symmetric (zero is a code) instead of min-max offset */
    uint8_t per_row; /* QM_AFFINE: a group is one row (per-channel) instead of `group` elements */
    uint8_t stochastic; /* QM_ABS, QM_REL, QM_CREL, QM_PREL: unbiased rounding (enum
                           quant_rounding; grid step E, not 2E; the log grid's ratio 1 + R,
                           not its square): a change smaller than the step survives on
                           average instead of vanishing */
    uint8_t delta;      /* QM_AFFINE: column-wise delta, each value predicted by the restored
                           value above it (previous row, same column) */
    uint8_t no_base;    /* code stand-alone even in a file with a base (values the base does
                           not predict, e.g. Adam's exp_avg far apart; pruning then drops the
                           smallest magnitudes to zero, not the smallest changes) */
    uint32_t group;  /* QM_AFFINE: elements per block (default 64) */
    double bound;    /* QM_ABS: E; QM_REL, QM_PREL, QM_CREL: R */
    double pct;      /* QM_AFFINE: calibrate to this percentile of |x| (0 or 100 = min-max) */
    double prune;    /* fraction of the smallest magnitudes set to zero, 0..0.999 */
    double max_mae;  /* code a chunk losslessly when its mean absolute error would exceed it
                        (QM_AFFINE with 8 bits tries 16 bits first); 0 = no cap */
    uint8_t level;   /* entropy level of the tensor's chunks, 1..9, any mode; 0 = the file's */
    double keyframe; /* QM_CREL: without a base, pointwise-rel this R instead of lossless (0: lossless) */
    double keyframe_steps; /* QM_CREL with keyframe: where the file states the optimizer's learning
                              rate lr, abs this many lr instead (one optimizer step each; 0: never),
                              at most KEYFRAME_RMS_CAP x keyframe x the tensor's RMS */
    double keyframe_lr;    /* > 0: that learning rate (a rule's `lr L`), whatever the file states */
} quant_spec;

/* What the compressor derives for one tensor from its spec and its values. */
typedef struct quant_plan {
    quant_spec spec;
    double abs_bound; /* QM_ABS, QM_REL, QM_CREL: E */
    double rms_cap;   /* QM_ABS: E at most this x the tensor's RMS (0: no cap) */
    double prune_thr; /* values (residuals) with |v| < prune_thr are pruned; 0 = none */
    uint32_t group;   /* QM_AFFINE: elements per group, >= 16 */
    uint32_t row;     /* QM_AFFINE with delta: elements per row (>= group), else 0 */
} quant_plan;

/* Error statistics of lossy chunks, added up per tensor. */
typedef struct quant_stats {
    uint64_t n;          /* elements */
    uint64_t exceptions; /* stored as they are */
    uint64_t changed;    /* with a base: elements that differ from the base's */
    uint64_t frozen;     /* ... of which the restored value equals the base's */
    double sum_abs, sum_sq, max_abs; /* of restored - original, over finite originals */
    double vmin, vmax;   /* of the finite originals (vmin > vmax: none) */
} quant_stats;

void quant_stats_init(quant_stats *s);
void quant_stats_add(quant_stats *s, const quant_stats *t);

/* 1 when lossy coding applies to the dtype: the floats the dtype table can round a value
 * to (from_double: those of 2 bytes and more). */
int quant_dtype_ok(ckpz_dtype dtype);

/* The chunk header, plane 0 of a lossy chunk (QUANT_HDR bytes, stored). */
#define QUANT_HDR 32
#define QUANT_PLANES_MAX 7 /* header, group params, bitmap, 2 code planes, exceptions, tail */

/* Sizes of the planes that follow the header, given the decoded header, the chunk's
 * original length n and (once the bitmap is decoded) the number of coded elements.
 * quant_layout_read returns the plane count (>= 5), or 0 when the header is invalid for
 * this dtype and length. */
typedef struct quant_layout {
    uint8_t mode, w, flags;
    uint32_t group, first;  /* affine: group size, elements in the first group */
    uint32_t row;           /* affine with delta: row length (>= group) */
    int32_t q0;
    double step;
    uint32_t nexc;
    size_t nel, ngroups;
    unsigned nplanes;
    size_t size[QUANT_PLANES_MAX]; /* size[4] and size[5] (codes) need the bitmap: set by quant_set_kept */
} quant_layout;

#define QUANT_F_BASE 1   /* the grid is laid around the base's elements */
#define QUANT_F_BITMAP 2 /* pruning: plane 2 is a bitmap of the coded elements */
#define QUANT_F_SYM 4    /* affine: symmetric codes */
#define QUANT_F_DELTA 8  /* affine: column-wise delta (the header's last field is the row length) */

unsigned quant_layout_read(const uint8_t *hdr, ckpz_dtype dtype, size_t n, int have_base, quant_layout *L);
/* Counts the bitmap's set bits and sets the code plane sizes; -1 if the bitmap has bits
 * past the last element or fewer coded elements than exceptions. */
int quant_set_kept(quant_layout *L, const uint8_t *bitmap);

/* Per-thread working memory of the encoder. */
typedef struct quant_work quant_work;
quant_work *quant_work_create(void);
void quant_work_free(quant_work *w);

/* Codes n bytes of dtype (elements elem0.. of their tensor, for group phase) into
 * planes, written back to back at out (capacity quant_out_bound(n)); sizes[] gets each
 * plane's size and `restored` (n bytes) what the decoder will restore. base: the
 * base's same bytes (closed-loop prediction) or NULL. Returns the plane count, 0 when
 * the chunk should be coded losslessly (max_mae), or -1 when out of memory. Adds to *st
 * on success. */
size_t quant_out_bound(size_t n);
/* The same, as the transform registry's encoder takes it (xform.h: xf_enc.opt). */
typedef struct quant_opt {
    quant_work *work;
    const quant_plan *plan;
    uint64_t elem0;
    uint8_t *restored;
    quant_stats *stats;
} quant_opt;
int quant_forward(quant_work *w, const quant_plan *plan, ckpz_dtype dtype, uint64_t elem0, const uint8_t *x,
                  const uint8_t *base, size_t n, uint8_t *out, uint8_t *restored, size_t *sizes, quant_stats *st);

/* Restores n bytes from the planes (plane[i] holds L->size[i] bytes). Returns 0, or -1
 * when the planes are inconsistent (codes out of range, exceptions miscounted). */
int quant_inverse(const quant_layout *L, ckpz_dtype dtype, const uint8_t *const *plane, const uint8_t *base, size_t n,
                  uint8_t *out);

/* For the compressor's per-tensor plan: lowers *vmin and raises *vmax to the smallest
 * and largest finite values of n bytes of dtype (rel's range). */
void quant_scan(ckpz_dtype dtype, const uint8_t *x, size_t n, double *vmin, double *vmax);
/* The part of a tensor's plan its spec and shape decide (plan->spec set): abs's bound,
 * and affine's group (per channel: a row of all but the first dimension, tiny rows
 * grouped to at least 16 elements) and delta row. rel, change-rel and prune need the
 * values (quant_scan, quant_change_rms, quant_prune_threshold). */
void quant_plan_shape(quant_plan *plan, uint32_t ndim, const uint64_t *shape);
/* Root mean square of x - base over the elements where both are finite (0 if none);
 * base NULL: of x itself. */
double quant_change_rms(ckpz_dtype dtype, const uint8_t *x, const uint8_t *base, size_t n);
double quant_prune_threshold(ckpz_dtype dtype, const uint8_t *x, const uint8_t *base, size_t n, double rate);

const char *quant_mode_name(uint8_t mode);

#endif
