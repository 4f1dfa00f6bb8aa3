/* sign.c — 1-bit scaled-sign codes (bits = 1, doc/gradients.md): per block one FP32
 * scale, mean(|v|) over the block (the scale that makes the sum of squared errors of
 * sign codes least), and per element one bit, 1 for +scale and 0 for -scale (v >= 0,
 * -0 included, is +scale), element i in bit i % 8 of byte i / 8. The sum of |v| runs in
 * double in element order, so every CPU level gets the same scale; the other kernels
 * (add, dequantise) are the level's, fed with codes of +-1. */
#include "grad/grad.h"

void grad_sign_sum(const float *v, size_t n, double *acc)
{
    double s = *acc;
    for (size_t i = 0; i < n; i++) s += (double)__builtin_fabsf(v[i]);
    *acc = s;
}

float grad_sign_scale(double sum, uint64_t n)
{
    float s = n ? (float)(sum / (double)n) : 0.0f;
    return s >= GRAD_TINY ? s : 0.0f;
}

void grad_sign_quant(const float *v, size_t n, float scale, uint8_t *c, uint64_t i, float *resid)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t e = i + k;
        unsigned bit = !(v[k] < 0);
        c[e >> 3] = (uint8_t)((c[e >> 3] & ~(1u << (e & 7))) | bit << (e & 7));
        if (resid) resid[k] = v[k] - (bit ? scale : -scale);
    }
}

void grad_sign_get(const uint8_t *c, uint64_t i, size_t n, int8_t *q)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t e = i + k;
        q[k] = (int8_t)(((c[e >> 3] >> (e & 7)) & 1) ? 1 : -1);
    }
}

void grad_sign_pad(uint8_t *c, uint64_t count)
{
    if (count & 7) c[count >> 3] &= (uint8_t)((1u << (count & 7)) - 1);
}
