/* ids.h — the numbers of the transforms and predictors that chunk frames store: a leaf
 * header (no includes), so that the container reads and checks a frame's ids without
 * knowing the transforms themselves (xform.h, predict.h). */
#ifndef CKPZ_TRANSFORM_IDS_H
#define CKPZ_TRANSFORM_IDS_H

/* Transform ids are stored in chunk frames: the numbers are fixed. Ranges as for codec
 * ids: 0-63 this format's, assigned in order; 64-127 later versions of the format;
 * 128-255 private use, never written by ckpz. */
enum xf_id {
    XF_NONE = 0,  /* one plane: the bytes as they are */
    XF_FLOAT = 1, /* rotate left 1, split MSB first (planes.h) */
    XF_INT = 2,   /* split MSB first (planes.h) */
    XF_QUANT = 3, /* lossy codes and their side planes (quant.h) */
    XF_ESC = 4,   /* diff residuals: low byte planes, top bytes escape-coded (escape.h) */
    XF_Q8 = 5     /* GGML Q8_0 blocks: scale planes and quant bit fields (q8.c) */
};

/* Predictor ids are stored in chunk frames: the numbers are fixed. */
enum pred_id {
    PRED_NONE = 0, /* no base: the chunk as it is */
    PRED_XOR = 1,  /* x ^ b */
    PRED_DIFF = 2, /* zigzag(M(x) - M(b)) per element */
    PRED_COPY = 3, /* x equals b: nothing stored */
    PRED_COUNT_
};

#endif
