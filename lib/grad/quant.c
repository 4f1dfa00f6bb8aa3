/* quant.c — the portable loops of blockwise gradient quantisation (grad.h says what each
 * kernel computes; pack.c chooses the level's kernels). These loops are the
 * definition: every vector path (quant_avx2.c) writes the same codes and residuals, bit
 * for bit, which tests/test_grad.c checks at every CKPZ_CPU level. The library builds
 * lib/grad/ with -ffp-contract=off so that no compiler fuses a multiply and an add here
 * that a vector path keeps apart. */
#include <math.h>

#include "common/dtype.h"

#include "grad/grad.h"

static void absmax_scalar(const float *a, const float *b, size_t n, uint32_t *acc)
{
    uint32_t m = *acc;
    for (size_t i = 0; i < n; i++) {
        float v = b ? a[i] + b[i] : a[i];
        uint32_t u;
        __builtin_memcpy(&u, &v, 4);
        u &= 0x7fffffffu;
        if (u > m) m = u;
    }
    *acc = m;
}

static void add_scalar(float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}

static void quant_scalar(const grad_qjob *j)
{
    for (size_t i = 0; i < j->n; i++) {
        float v = j->v[i], y = v * j->inv;
        int32_t q;
        if (j->stochastic) {
            float fl = floorf(y), frac = y - fl;
            float u = (float)(grad_draw(j->key, j->idx + (uint32_t)i) >> 8) * 0x1p-24f;
            q = (int32_t)fl + (u < frac);
        } else {
            q = (int32_t)lrintf(y);
        }
        q = q > j->qmax ? j->qmax : q < -j->qmax ? -j->qmax : q;
        j->codes[i] = (int8_t)q;
        if (j->resid) j->resid[i] = v - (float)q * j->scale;
    }
}

static void dequant_scalar(const int8_t *codes, size_t n, float scale, float *out)
{
    for (size_t i = 0; i < n; i++) out[i] = (float)codes[i] * scale;
}

static size_t check_scalar(const int8_t *codes, size_t n, int qmax)
{
    for (size_t i = 0; i < n; i++)
        if (codes[i] > qmax || codes[i] < -qmax) return i;
    return n;
}

static void widen_scalar(int f16, const uint8_t *src, size_t n, float *out)
{
    if (!f16) {
        for (size_t i = 0; i < n; i++) out[i] = dt_ld_b32(2, src + 2 * i);
        return;
    }
    const dtype_info *d = dtype_get(CKPZ_DTYPE_F16);
    for (size_t i = 0; i < n; i++) out[i] = (float)d->to_double(src + 2 * i);
}

static void narrow_scalar(int f16, const float *in, size_t n, uint8_t *dst)
{
    if (!f16) {
        for (size_t i = 0; i < n; i++) dt_st_b32(2, dst + 2 * i, in[i]);
        return;
    }
    const dtype_info *d = dtype_get(CKPZ_DTYPE_F16);
    for (size_t i = 0; i < n; i++) d->from_double(dst + 2 * i, in[i]);
}

static void nib_pack_scalar(const int8_t *q, size_t pairs, uint8_t *dst)
{
    for (size_t k = 0; k < pairs; k++) dst[k] = (uint8_t)((q[2 * k] & 0x0f) | (uint8_t)((uint8_t)q[2 * k + 1] << 4));
}

static void nib_unpack_scalar(const uint8_t *src, size_t pairs, int8_t *q)
{
    for (size_t k = 0; k < pairs; k++) {
        q[2 * k] = (int8_t)((int8_t)(uint8_t)(src[k] << 4) >> 4);
        q[2 * k + 1] = (int8_t)((int8_t)src[k] >> 4);
    }
}

const grad_kernels grad_kernels_scalar = {absmax_scalar,     add_scalar,      quant_scalar,  dequant_scalar,
                                          check_scalar,      widen_scalar,    narrow_scalar, nib_pack_scalar,
                                          nib_unpack_scalar, grad_sign_quant, grad_sign_get};
