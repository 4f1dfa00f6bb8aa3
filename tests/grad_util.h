/* grad_util.h — what the gradient tests (test_grad.c: dense packets, BF16/FP16 output,
 * the sum; test_grad_sparse.c: sparse packets) share: the context, test values spread
 * over magnitudes, buffers of each dtype, a packet's scale, packing with the size
 * checked, and resealing a packet's CRC after a change. */
#ifndef CKPZ_TEST_GRAD_UTIL_H
#define CKPZ_TEST_GRAD_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define CKPZ_EXPERIMENTAL
#include "ckpz.h"
#include "common/crc32c.h"
#include "common/dtype.h"
#include "isa.h"
#include "testutil.h"

static ckpz_ctx *ctx;

/* Values spread over magnitudes, so blocks get different scales; some exact zeros. */
static inline void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double mag = ldexp(1.0, (int)(rng() % 40) - 30);
        x[i] = rng() % 17 == 0 ? 0.0f : (float)(rng_normal() * mag);
    }
}

/* x as a buffer of dtype t (FP32 as is, BF16/FP16 rounded by the dtype table), and
 * those values back as floats in xv. */
static inline void *as_dtype(ckpz_dtype t, const float *x, size_t n, float *xv)
{
    const dtype_info *d = dtype_get(t);
    uint8_t *b = malloc(n * d->size + 1);
    for (size_t i = 0; i < n; i++) {
        d->from_double(b + i * d->size, x[i]);
        xv[i] = (float)d->to_double(b + i * d->size);
    }
    return b;
}

static inline float scale_of(const uint8_t *pkt, size_t b)
{
    uint32_t u = (uint32_t)pkt[24 + 4 * b] | (uint32_t)pkt[25 + 4 * b] << 8 | (uint32_t)pkt[26 + 4 * b] << 16 |
                 (uint32_t)pkt[27 + 4 * b] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint8_t *pack(const ckpz_grad_params *p, ckpz_dtype t, const void *g, size_t n, float *res, size_t *len)
{
    size_t cap = 0;
    CHECK(ckpz_grad_packet_size(ctx, p, n, &cap) == CKPZ_OK);
    uint8_t *pkt = malloc(cap);
    ckpz_error e = ckpz_grad_pack(ctx, p, t, g, n, res, pkt, cap, len);
    CHECKF(e == CKPZ_OK, "pack n=%zu: %s", n, ckpz_ctx_message(ctx));
    CHECK(p->kind == CKPZ_GRAD_DENSE ? *len == cap : *len <= cap); /* sparse: a bound */
    return pkt;
}

static inline void reseal(uint8_t *pkt, size_t len)
{
    uint32_t c = crc32c(0, pkt, len - 4);
    for (int k = 0; k < 4; k++) pkt[len - 4 + k] = (uint8_t)(c >> 8 * k);
}

#endif
