/* mlp.h — the ratio predictor's network: a few dense layers, ReLU between them, one
 * output (the predicted space savings, 1 - compressed / original).
 *
 * The weights come from a text file (doc/predict.md has the format) that is treated as
 * untrusted input: every count is bounded, every number must be finite and of sane
 * size, the layer sizes must chain from FEAT_COUNT inputs to one output, and the file
 * must end with "end" so that a truncated file is an error rather than a smaller net.
 */
#ifndef CKPZ_PREDICT_MLP_H
#define CKPZ_PREDICT_MLP_H

#include <stddef.h>

#define MLP_MAX_LAYERS 4
#define MLP_MAX_WIDTH 256
#define MLP_MAX_ABS 1e6 /* largest weight, bias or normalisation value accepted */

typedef struct mlp_layer {
    unsigned in, out;
    int relu;
    double *w; /* out rows of in weights */
    double *b; /* out biases */
} mlp_layer;

typedef struct mlp {
    unsigned inputs, nlayers;
    double *mean, *scale; /* inputs values each: x' = (x - mean) * scale */
    mlp_layer layer[MLP_MAX_LAYERS];
} mlp;

/* Parses text[0..len) into *m (freed with mlp_free, also after a failure). The network
 * must take `inputs` inputs. 0, or -1 with a message naming the line in why[]. */
int mlp_parse(const char *text, size_t len, unsigned inputs, mlp *m, char *why, size_t whylen);
void mlp_free(mlp *m);

/* The output for x[0..m->inputs). */
double mlp_forward(const mlp *m, const double *x);

/* The built-in model's text (model_builtin.c, written by bench/train-predictor). */
extern const char mlp_builtin_text[];

#endif
