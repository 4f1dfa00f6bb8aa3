/* sum.c — the sum of dense gradient packets as one packet (ckpz_grad_sum,
 * doc/gradients.md), the step of a ring all-reduce: each hop adds its own packet to the
 * partial sum it received and sends the result on, at the packets' size.
 *
 * A block at a time, never the whole buffer in FP32: each packet's codes times its
 * block's scale, added in the order given (the dense kernels: dequant, add), give the
 * block's sums; their largest magnitude sets the block's new scale, and the sums are
 * quantised to nearest by the same kernel as a pack. So the result is the packet that
 * ckpz_grad_pack would write for the sum of what the inputs decode to, bit for bit at
 * every level, and its error against that sum is at most half of its own step (1-bit:
 * the sums' signs with their mean magnitude, as a pack; no step bound). Each
 * block of every input is read before that block of the output is written (a 4-bit
 * byte shared by two blocks keeps its other half), so the output may be the first
 * input itself: a ring's partial sum updated in place. Inputs whose codes are
 * entropy-coded are decoded first (their raw codes, one buffer each, never FP32); the
 * output's codes are raw: a ring's next hop adds to it again, and coding is the sender's
 * choice (ckpz_grad_pack). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "grad/grad.h"

/* Codes [i, i + n) of a packet's code bytes as int8 (4-bit: sign-extended nibbles). */
static const int8_t *sum_codes(const grad_kernels *K, const grad_head *h, const uint8_t *codes, uint64_t i, size_t n,
                               int8_t *q4)
{
    if (h->bits == 8) return (const int8_t *)(codes + i);
    if (h->bits == 1) {
        K->sign_get(codes, i, n, q4);
        return q4;
    }
    grad_nib_get(K, codes, i, n, q4);
    return q4;
}

static void sum_release(grad_head *hs, size_t m)
{
    for (size_t p = 0; p < m; p++) grad_head_release(&hs[p]);
    free(hs);
}

/* Every input checked (and its codes decoded where coded) into hs[p]; one layout. */
static ckpz_error sum_parse(ckpz_ctx *ctx, const void *const *srcs, const size_t *lens, size_t m, grad_head *hs)
{
    for (size_t p = 0; p < m; p++) {
        if (srcs[p] && lens[p] >= 4 && !memcmp(srcs[p], GRAD_SPARSE_MAGIC, 4))
            return ctx_fail(ctx, CKPZ_ERR_PARAM,
                            "gradient sum: packet %zu is sparse (sum sparse packets with ckpz_grad_unpack_add)", p);
        ckpz_error e = grad_parse(ctx, srcs[p], lens[p], &hs[p]);
        if (e) {
            char why[256];
            snprintf(why, sizeof why, "%s", ckpz_ctx_message(ctx));
            ctx_clear(ctx); /* the message again, naming the packet */
            return ctx_fail(ctx, e, "gradient sum: packet %zu: %s", p, why);
        }
        const grad_head *o = &hs[p], *h = &hs[0];
        if (p && (o->bits != h->bits || o->block != h->block || o->count != h->count || o->dtype != h->dtype))
            return ctx_fail(ctx, CKPZ_ERR_PARAM,
                            "gradient sum: packet %zu (%llu %s elements, %u-bit, block %u) is not laid out as "
                            "packet 0 (%llu %s, %u-bit, block %u)",
                            p, (unsigned long long)o->count, ckpz_dtype_name(o->dtype), o->bits, (unsigned)o->block,
                            (unsigned long long)h->count, ckpz_dtype_name(h->dtype), h->bits, (unsigned)h->block);
    }
    return CKPZ_OK;
}

ckpz_error ckpz_grad_sum(ckpz_ctx *ctx, const void *const *srcs, const size_t *lens, size_t m, void *dst, size_t cap,
                         size_t *written)
{
    ctx_clear(ctx);
    if (written) *written = 0;
    if (!m || !srcs || !lens) return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sum: no packets");
    grad_head *hs = calloc(m, sizeof *hs);
    if (!hs) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "gradient sum: no memory for %zu packets", m);
    ckpz_error e = sum_parse(ctx, srcs, lens, m, hs);
    grad_head h = hs[0];
    if (!e && (!dst || cap < h.size))
        e = ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sum: %zu bytes of room for a packet of %zu", dst ? cap : 0, h.size);
    size_t bn = h.count < h.block ? (size_t)h.count : h.block;
    float *acc = e ? NULL : malloc(bn * sizeof *acc + 4), tmp[GRAD_PIECE];
    if (!e && !acc) e = ctx_fail(ctx, CKPZ_ERR_NOMEM, "gradient sum: no memory for a block of %zu", bn);
    if (e) {
        sum_release(hs, m);
        return e;
    }
    const grad_kernels *K = grad_kernels_get();
    const int qmax = h.bits == 8 ? 127 : 7;
    int8_t q4[GRAD_PIECE];
    uint8_t *out = dst;
    if (out != srcs[0]) memcpy(out, srcs[0], GRAD_HEADER);
    out[7] = 0;              /* rounded to nearest */
    out[21] = GRAD_CODES_RAW; /* srcs[0]'s codes, if coded, are in hs[0].owned */
    for (uint64_t b = 0; b < h.nblocks; b++) {
        uint64_t b0 = b * h.block, end = b0 + h.block < h.count ? b0 + h.block : h.count;
        for (size_t p = 0; p < m; p++) {
            const uint8_t *pk = srcs[p];
            uint32_t u = ld32(pk + h.scales + 4 * b);
            float scale;
            memcpy(&scale, &u, 4);
            for (uint64_t i = b0; i < end; i += GRAD_PIECE) {
                size_t len = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
                const int8_t *c = sum_codes(K, &h, hs[p].cp, i, len, q4);
                if (!p) K->dequant(c, len, scale, acc + (i - b0));
                else {
                    K->dequant(c, len, scale, tmp);
                    K->add(acc + (i - b0), tmp, len);
                }
            }
        }
        size_t len = (size_t)(end - b0);
        uint32_t a_bits = 0;
        K->absmax(acc, NULL, len, &a_bits);
        if (a_bits >= 0x7f800000u) {
            free(acc);
            sum_release(hs, m);
            return ctx_fail(ctx, CKPZ_ERR_INPUT, "gradient sum: block %llu's sum overflows to infinity",
                            (unsigned long long)b);
        }
        if (h.bits == 1) { /* the sums' signs with their mean magnitude, as a pack */
            double s = 0;
            grad_sign_sum(acc, len, &s);
            float scale = grad_sign_scale(s, len);
            uint32_t u;
            memcpy(&u, &scale, 4);
            st32(out + h.scales + 4 * b, u);
            K->sign_quant(acc, len, scale, out + h.codes, b0, NULL);
            continue;
        }
        float a, inv = 0, scale = 0;
        memcpy(&a, &a_bits, 4);
        if (a >= GRAD_TINY) inv = (float)qmax / a, scale = grad_scale(a, qmax);
        memcpy(&a_bits, &scale, 4);
        st32(out + h.scales + 4 * b, a_bits);
        for (uint64_t i = b0; i < end; i += GRAD_PIECE) {
            size_t n = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
            grad_qjob j = {.v = acc + (i - b0),
                           .n = n,
                           .idx = (uint32_t)i,
                           .inv = inv,
                           .scale = scale,
                           .qmax = qmax,
                           .codes = h.bits == 8 ? (int8_t *)(out + h.codes + i) : q4};
            K->quant(&j);
            if (h.bits == 4) grad_nib_put(K, q4, i, n, out + h.codes);
        }
    }
    free(acc);
    sum_release(hs, m);
    if (h.bits == 4 && h.count & 1) out[h.codes + (h.count >> 1)] &= 0x0f; /* the padding half */
    if (h.bits == 1) grad_sign_pad(out + h.codes, h.count);
    st32(out + h.size - 4, crc32c(0, out, h.size - 4));
    if (written) *written = h.size;
    return CKPZ_OK;
}
