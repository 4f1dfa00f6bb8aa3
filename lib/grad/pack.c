/* pack.c — the gradient calls (ckpz_grad_*, include/ckpz_experimental.h) and their wire
 * format (doc/gradients.md): a 24-byte header, one FP32 scale per block, the codes (one
 * byte each at 8 bits, two a byte at 4, eight signs a byte at 1; 8 and 4 entropy-coded
 * when asked and smaller), a CRC-32C of all before it.
 *
 * Packing is two passes per group of blocks over the caller's buffer, staged GRAD_PIECE
 * elements at a time as float32 (dtype.h's loads: the kernels know one type): the first
 * finds each block's largest magnitude (and any NaN or infinity), the second quantises.
 * Without error feedback a group is one block, whose pieces are still in cache for the
 * second pass; with it the group is the whole buffer, so that a non-finite value is
 * found before the residual changes (the call then leaves it as it was). Unpacking
 * checks the whole packet first (sizes against len, reserved fields, CRC, every scale
 * and code): a packet either decodes in full or not at all. */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "common/dtype.h"
#include "grad/grad.h"

/* The raw code bytes of h's count at h's bits. */
static uint64_t grad_code_bytes(const grad_head *h)
{
    return h->bits == 8 ? h->count : h->bits == 4 ? (h->count + 1) / 2 : (h->count + 7) / 8;
}

/* The layout of a packet of n elements; n <= GRAD_COUNT_MAX and block >= 1, so nothing
 * overflows 64 bits. 0 when the packet would not fit in a size_t. */
int grad_layout(grad_head *h)
{
    uint64_t codes = grad_code_bytes(h);
    h->nblocks = (h->count + h->block - 1) / h->block;
    uint64_t size = GRAD_HEADER + 4 * h->nblocks + codes + 4;
    if (size > SIZE_MAX) return 0;
    h->scales = GRAD_HEADER;
    h->codes = GRAD_HEADER + (size_t)(4 * h->nblocks);
    h->size = (size_t)size;
    return 1;
}

void ckpz_grad_params_init(ckpz_grad_params *p)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->bits = 8;
    p->block = 256;
    p->density = 0.01;
}

/* The caller's params as a whole struct (defaults past its struct_size) into *q. */
static ckpz_error grad_params_copy(ckpz_ctx *ctx, const ckpz_grad_params *p, ckpz_grad_params *q)
{
    if (!p || p->struct_size < sizeof(size_t) || p->struct_size > sizeof *p)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_grad_params: struct_size not set (ckpz_grad_params_init)");
    ckpz_grad_params_init(q);
    memcpy(q, p, p->struct_size);
    if (q->kind > CKPZ_GRAD_THRESHOLD) return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: kind %u", q->kind);
    return CKPZ_OK;
}

/* The dense packet's layout for the resolved params q. */
static ckpz_error grad_params(ckpz_ctx *ctx, const ckpz_grad_params *p, uint64_t n, grad_head *h)
{
    ckpz_grad_params q = *p;
    if (q.bits != 8 && q.bits != 4 && q.bits != 1)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: bits %u (8, 4 or 1)", q.bits);
    if (q.block < 1 || q.block > GRAD_BLOCK_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: block %u (1..%u)", (unsigned)q.block, GRAD_BLOCK_MAX);
    if (q.stochastic != 0 && q.stochastic != 1)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: stochastic %d (0 or 1)", q.stochastic);
    if (n > GRAD_COUNT_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: %llu elements (at most 2^32 - 1 a packet)",
                        (unsigned long long)n);
    *h = (grad_head){
        .bits = q.bits, .flags = q.stochastic ? GRAD_FLAG_STOCHASTIC : 0, .block = q.block, .count = n, .seed = q.seed};
    if (!grad_layout(h)) return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: the packet exceeds the address space");
    return CKPZ_OK;
}

ckpz_error ckpz_grad_packet_size(ckpz_ctx *ctx, const ckpz_grad_params *p, uint64_t n, size_t *size)
{
    ctx_clear(ctx);
    if (size) *size = 0;
    ckpz_grad_params q;
    ckpz_error e = grad_params_copy(ctx, p, &q);
    if (e) return e;
    if (q.kind != CKPZ_GRAD_DENSE) return grad_sparse_size(ctx, &q, n, size);
    grad_head h;
    e = grad_params(ctx, &q, n, &h);
    if (size) *size = e ? 0 : h.size;
    return e;
}

/* The first element of block b whose value (plus the residual's) is not finite. */
static uint64_t grad_nonfinite(const grad_head *h, ckpz_dtype t, const void *grad, const float *res, uint64_t b)
{
    float tmp[GRAD_PIECE];
    uint64_t end = (b + 1) * h->block < h->count ? (b + 1) * h->block : h->count;
    for (uint64_t i = b * h->block; i < end; i += GRAD_PIECE) {
        size_t len = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
        const float *v = grad_stage(t, grad, i, len, tmp);
        for (size_t k = 0; k < len; k++) {
            float x = res ? v[k] + res[i + k] : v[k];
            if (x - x != 0) return i + k; /* NaN - NaN and inf - inf are NaN */
        }
    }
    return end;
}

/* Pass 1 over blocks [b0, b1): each block's largest magnitude, as float bits, into its
 * scale's slot. -1 (and the element in *bad) when one is not finite. */
static int grad_pass1(const grad_kernels *K, const grad_head *h, ckpz_dtype t, const void *grad, const float *res,
                      uint8_t *pkt, uint64_t b0, uint64_t b1, uint64_t *bad)
{
    float tmp[GRAD_PIECE];
    for (uint64_t b = b0; b < b1; b++) {
        uint64_t end = (b + 1) * h->block < h->count ? (b + 1) * h->block : h->count;
        uint32_t acc = 0;
        for (uint64_t i = b * h->block; i < end; i += GRAD_PIECE) {
            size_t len = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
            K->absmax(grad_stage(t, grad, i, len, tmp), res ? res + i : NULL, len, &acc);
        }
        if (acc >= 0x7f800000u) {
            *bad = grad_nonfinite(h, t, grad, res, b);
            return -1;
        }
        st32(pkt + h->scales + 4 * b, acc);
    }
    return 0;
}

/* Pass 2 of 1-bit codes over blocks [b0, b1): each block's values (grad + residual,
 * into the residual) and the sum of their magnitudes, then the scale (mean |v|) in
 * place of the largest magnitude, the signs and the residuals. */
static void grad_pass2_sign(const grad_kernels *K, const grad_head *h, ckpz_dtype t, const void *grad, float *res,
                            uint8_t *pkt, uint64_t b0, uint64_t b1)
{
    float tmp[GRAD_PIECE];
    for (uint64_t b = b0; b < b1; b++) {
        uint64_t start = b * h->block, end = start + h->block < h->count ? start + h->block : h->count;
        double sum = 0;
        for (uint64_t i = start; i < end; i += GRAD_PIECE) {
            size_t len = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
            const float *v = grad_stage(t, grad, i, len, tmp);
            if (res) {
                K->add(res + i, v, len);
                v = res + i;
            }
            grad_sign_sum(v, len, &sum);
        }
        float scale = grad_sign_scale(sum, end - start);
        uint32_t u;
        memcpy(&u, &scale, 4);
        st32(pkt + h->scales + 4 * b, u);
        for (uint64_t i = start; i < end; i += GRAD_PIECE) {
            size_t len = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
            const float *v = res ? res + i : grad_stage(t, grad, i, len, tmp);
            K->sign_quant(v, len, scale, pkt + h->codes, i, res ? res + i : NULL);
        }
    }
}

/* Pass 2 over blocks [b0, b1): scales in place of the magnitudes, codes, residuals. */
static void grad_pass2(const grad_kernels *K, const grad_head *h, ckpz_dtype t, const void *grad, float *res,
                       grad_key key, uint8_t *pkt, uint64_t b0, uint64_t b1)
{
    float tmp[GRAD_PIECE];
    int8_t q4[GRAD_PIECE];
    const int qmax = h->bits == 8 ? 127 : 7;
    uint8_t *codes = pkt + h->codes;
    for (uint64_t b = b0; b < b1; b++) {
        uint64_t end = (b + 1) * h->block < h->count ? (b + 1) * h->block : h->count;
        uint32_t bitsof = ld32(pkt + h->scales + 4 * b);
        float a, inv = 0, scale = 0;
        memcpy(&a, &bitsof, 4);
        if (a >= GRAD_TINY) inv = (float)qmax / a, scale = grad_scale(a, qmax);
        memcpy(&bitsof, &scale, 4);
        st32(pkt + h->scales + 4 * b, bitsof);
        for (uint64_t i = b * h->block; i < end; i += GRAD_PIECE) {
            size_t len = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
            const float *v = grad_stage(t, grad, i, len, tmp);
            if (res) {
                K->add(res + i, v, len); /* residual + grad, the values quantised */
                v = res + i;
            }
            grad_qjob j = {.v = v,
                           .n = len,
                           .idx = (uint32_t)i,
                           .inv = inv,
                           .scale = scale,
                           .qmax = qmax,
                           .stochastic = (h->flags & GRAD_FLAG_STOCHASTIC) != 0,
                           .key = key,
                           .codes = h->bits == 8 ? (int8_t *)(codes + i) : q4,
                           .resid = res ? res + i : NULL};
            K->quant(&j);
            if (h->bits == 4) grad_nib_put(K, q4, i, len, codes);
        }
    }
}

ckpz_error ckpz_grad_pack(ckpz_ctx *ctx, const ckpz_grad_params *p, ckpz_dtype dtype, const void *grad, uint64_t n,
                          float *residual, void *dst, size_t cap, size_t *written)
{
    ctx_clear(ctx);
    if (written) *written = 0;
    ckpz_grad_params q;
    ckpz_error e = grad_params_copy(ctx, p, &q);
    if (e) return e;
    if (!grad_dtype_ok(dtype))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: dtype %s (f32, bf16 or f16)",
                        ckpz_dtype_name(dtype) ? ckpz_dtype_name(dtype) : "?");
    if (q.kind != CKPZ_GRAD_DENSE) return grad_sparse_pack(ctx, &q, dtype, grad, n, residual, dst, cap, written);
    grad_head h;
    e = grad_params(ctx, &q, n, &h);
    if (e) return e;
    if (!dst || cap < h.size)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: %zu bytes of room for a packet of %zu", dst ? cap : 0,
                        h.size);
    if (n && !grad) return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packing: no gradient buffer");
    h.dtype = dtype;
    uint8_t *pkt = dst;
    memcpy(pkt, GRAD_MAGIC, 4);
    pkt[4] = GRAD_VERSION, pkt[5] = (uint8_t)h.bits, pkt[6] = (uint8_t)dtype, pkt[7] = (uint8_t)h.flags;
    st32(pkt + 8, h.block);
    st64(pkt + 12, h.count);
    st32(pkt + 20, 0); /* byte 20: the scales' format (0: FP32); 21..23 reserved */

    const grad_kernels *K = grad_kernels_get();
    grad_key key = grad_key_of(h.seed);
    uint64_t span = residual ? h.nblocks : 1;
    for (uint64_t b0 = 0; b0 < h.nblocks; b0 += span) {
        uint64_t b1 = b0 + span < h.nblocks ? b0 + span : h.nblocks, bad;
        if (grad_pass1(K, &h, dtype, grad, residual, pkt, b0, b1, &bad))
            return ctx_fail(ctx, CKPZ_ERR_INPUT, "gradient packing: element %llu (block %llu) is %s%s",
                            (unsigned long long)bad, (unsigned long long)(bad / h.block), "NaN or infinite",
                            residual ? " with the residual added; the residual is unchanged" : "");
        if (h.bits == 1) grad_pass2_sign(K, &h, dtype, grad, residual, pkt, b0, b1);
        else grad_pass2(K, &h, dtype, grad, residual, key, pkt, b0, b1);
    }
    if (h.bits == 4 && h.count & 1) pkt[h.codes + (h.count >> 1)] &= 0x0f; /* the padding half */
    if (h.bits == 1) grad_sign_pad(pkt + h.codes, h.count);
    size_t size = h.size;
    if (q.entropy && h.bits != 1) { /* signs are near 1 bit of entropy each: always raw */
        unsigned coding;
        size = h.codes + grad_codes_encode(pkt + h.codes, h.size - 4 - h.codes, &coding) + 4;
        pkt[21] = (uint8_t)coding;
    }
    st32(pkt + size - 4, crc32c(0, pkt, size - 4));
    if (written) *written = size;
    return CKPZ_OK;
}

/* A packet whose codes are entropy-coded (h->coding): its length against the layout
 * (coded codes shorter than raw ones, at least one byte), then the codes decoded into
 * h->owned. The raw codes take at most what the caller's unpacked buffer does (one byte
 * an element at most), so a hostile count costs no more memory than the output. */
static ckpz_error grad_parse_coded(ckpz_ctx *ctx, const uint8_t *src, size_t len, grad_head *h)
{
    size_t raw = h->size - 4 - h->codes;
    if (len < h->codes + 5 || len - 4 - h->codes >= raw)
        return ctx_fail(ctx, len < h->codes + 5 ? CKPZ_ERR_TRUNCATED : CKPZ_ERR_CORRUPT,
                        "gradient packet: %zu bytes of coded codes for %zu raw ones (%llu elements in blocks of %u; "
                        "coded codes are shorter than raw)",
                        len < h->codes + 4 ? (size_t)0 : len - 4 - h->codes, raw, (unsigned long long)h->count,
                        (unsigned)h->block);
    int r = grad_codes_decode(h->coding, src + h->codes, len - 4 - h->codes, raw, &h->owned);
    if (r == -2) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "gradient packet: no memory for %zu bytes of codes", raw);
    if (r)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "gradient packet: the %s-coded codes do not decode to %zu bytes",
                        h->coding == GRAD_CODES_CONST ? "constant" : "rANS", raw);
    h->cp = h->owned;
    return CKPZ_OK;
}

/* The header of src[0..len) and every check of the packet (grad_head filled). */
ckpz_error grad_parse(ckpz_ctx *ctx, const uint8_t *src, size_t len, grad_head *h)
{
    *h = (grad_head){0};
    if (!src && len) return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient packet: no buffer");
    if (len < 4 || memcmp(src, GRAD_MAGIC, 4))
        return ctx_fail(ctx, CKPZ_ERR_NOT_CKPZ, "gradient packet: no magic %s (%zu bytes)", GRAD_MAGIC, len);
    ckpz_error e = grad_frame_check(ctx, "gradient packet", src, len, GRAD_HEADER, GRAD_VERSION);
    if (e) return e;
    *h = (grad_head){
        .bits = src[5], .dtype = (ckpz_dtype)src[6], .flags = src[7], .block = ld32(src + 8), .count = ld64(src + 12)};
    if (h->bits != 8 && h->bits != 4 && h->bits != 1)
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "gradient packet: %u-bit codes (8, 4 or 1)", h->bits);
    if (!grad_dtype_ok(h->dtype)) return ctx_fail(ctx, CKPZ_ERR_VERSION, "gradient packet: dtype %u", src[6]);
    h->coding = src[21];
    if (h->flags & ~GRAD_FLAG_STOCHASTIC || src[20] || src[22] || src[23] || h->coding > GRAD_CODES_RANS0)
        return ctx_fail(ctx, CKPZ_ERR_VERSION,
                        "gradient packet: reserved fields set or a coding it does not know (flags %02x, bytes 20-23 "
                        "%08x)",
                        h->flags, (unsigned)ld32(src + 20));
    if (h->block < 1 || h->block > GRAD_BLOCK_MAX)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "gradient packet: block of %u elements (1..%u)", (unsigned)h->block,
                        GRAD_BLOCK_MAX);
    if (h->count > GRAD_COUNT_MAX)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "gradient packet: %llu elements (at most 2^32 - 1)",
                        (unsigned long long)h->count);
    if (grad_layout(h) && h->coding != GRAD_CODES_RAW) {
        e = grad_parse_coded(ctx, src, len, h);
        if (e) return e;
    } else if (!h->size || h->size != len)
        return ctx_fail(ctx, len < h->size ? CKPZ_ERR_TRUNCATED : CKPZ_ERR_CORRUPT,
                        "gradient packet: %llu elements in blocks of %u need %llu bytes, the packet has %zu",
                        (unsigned long long)h->count, (unsigned)h->block,
                        (unsigned long long)(GRAD_HEADER + 4 * h->nblocks + 4 + grad_code_bytes(h)), len);
    const float qmax = h->bits == 8 ? 127.0f : h->bits == 4 ? 7.0f : 1.0f;
    for (uint64_t b = 0; b < h->nblocks; b++) {
        uint32_t u = ld32(src + h->scales + 4 * b);
        float f;
        memcpy(&f, &u, 4);
        if (u >= 0x7f800000u || !(qmax * f <= 0x1.fffffep127f)) /* negative, not finite, or qmax * it not */
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT,
                            "gradient packet: block %llu's scale (bits %08x) is not a value >= 0 "
                            "whose multiples up to the largest code are finite",
                            (unsigned long long)b, (unsigned)u);
    }
    const uint8_t *c = h->cp ? h->cp : (h->cp = src + h->codes);
    uint64_t bad = h->count;
    if (h->bits == 1) { /* every sign is a code; only the padding bits are checked */
        if (h->count & 7 && c[h->count >> 3] >> (h->count & 7))
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "gradient packet: the last byte's bits past the count are not zero");
    } else if (h->bits == 8) {
        bad = grad_kernels_get()->check((const int8_t *)c, (size_t)h->count, 127);
    } else {
        const grad_kernels *K = grad_kernels_get();
        int8_t q4[GRAD_PIECE];
        for (uint64_t i = 0; i < h->count && bad == h->count; i += GRAD_PIECE) {
            size_t n = h->count - i < GRAD_PIECE ? (size_t)(h->count - i) : GRAD_PIECE;
            grad_nib_get(K, c, i, n, q4);
            size_t k = K->check(q4, n, 7);
            if (k < n) bad = i + k;
        }
        if (bad == h->count && h->count & 1 && c[h->count >> 1] >> 4)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "gradient packet: the last byte's unused half is not zero");
    }
    if (bad < h->count)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "gradient packet: element %llu's code is out of [-%d, %d]",
                        (unsigned long long)bad, h->bits == 8 ? 127 : 7, h->bits == 8 ? 127 : 7);
    return CKPZ_OK;
}

void grad_head_release(grad_head *h)
{
    free(h->owned);
    h->owned = NULL;
    h->cp = NULL;
}

ckpz_error ckpz_grad_info_read(ckpz_ctx *ctx, const void *src, size_t len, ckpz_grad_info *info)
{
    ctx_clear(ctx);
    if (OUT_CHECK(ctx, info, "ckpz_grad_info")) return CKPZ_ERR_PARAM;
    ckpz_grad_info mine;
    if (src && len >= 4 && !memcmp(src, GRAD_SPARSE_MAGIC, 4)) {
        ckpz_error e = grad_sparse_info(ctx, src, len, &mine);
        if (e) return e;
        OUT_GIVE(info, &mine);
        return CKPZ_OK;
    }
    grad_head h;
    ckpz_error e = grad_parse(ctx, src, len, &h);
    grad_head_release(&h);
    if (e) return e;
    mine = (ckpz_grad_info){.struct_size = sizeof mine,
                            .count = h.count,
                            .dtype = h.dtype,
                            .bits = h.bits,
                            .block = h.block,
                            .stochastic = (h.flags & GRAD_FLAG_STOCHASTIC) != 0,
                            .kind = CKPZ_GRAD_DENSE,
                            .nnz = h.count};
    OUT_GIVE(info, &mine);
    return CKPZ_OK;
}

/* ckpz_grad_unpack, and with add set ckpz_grad_unpack_add (out: FP32, added into). */
static ckpz_error grad_unpack(ckpz_ctx *ctx, const void *src, size_t len, ckpz_dtype dtype, void *out, uint64_t n,
                              int add)
{
    ctx_clear(ctx);
    if (!grad_dtype_ok(dtype))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient unpacking: dtype %s (f32, bf16 or f16)",
                        ckpz_dtype_name(dtype) ? ckpz_dtype_name(dtype) : "?");
    if (src && len >= 4 && !memcmp(src, GRAD_SPARSE_MAGIC, 4))
        return grad_sparse_unpack(ctx, src, len, dtype, out, n, add);
    grad_head h;
    ckpz_error e = grad_parse(ctx, src, len, &h);
    if (!e && n != h.count)
        e = ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient unpacking: room for %llu elements, the packet has %llu",
                     (unsigned long long)n, (unsigned long long)h.count);
    if (!e && n && !out) e = ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient unpacking: no output buffer");
    if (e) {
        grad_head_release(&h);
        return e;
    }
    const grad_kernels *K = grad_kernels_get();
    const uint8_t *pkt = src, *codes = h.cp;
    float tmp[GRAD_PIECE];
    int8_t q4[GRAD_PIECE];
    for (uint64_t b = 0; b < h.nblocks; b++) {
        uint64_t end = (b + 1) * h.block < h.count ? (b + 1) * h.block : h.count;
        uint32_t u = ld32(pkt + h.scales + 4 * b);
        float scale;
        memcpy(&scale, &u, 4);
        for (uint64_t i = b * h.block; i < end; i += GRAD_PIECE) {
            size_t len_ = end - i < GRAD_PIECE ? (size_t)(end - i) : GRAD_PIECE;
            const int8_t *c = (const int8_t *)(codes + i);
            if (h.bits == 4) {
                grad_nib_get(K, codes, i, len_, q4);
                c = q4;
            } else if (h.bits == 1) {
                K->sign_get(codes, i, len_, q4);
                c = q4;
            }
            float *o = dtype == CKPZ_DTYPE_F32 && !add ? (float *)out + i : tmp;
            K->dequant(c, len_, scale, o);
            if (add) K->add((float *)out + i, tmp, len_);
            if (dtype != CKPZ_DTYPE_F32 && !add) K->narrow(dtype == CKPZ_DTYPE_F16, tmp, len_, (uint8_t *)out + 2 * i);
        }
    }
    grad_head_release(&h);
    return CKPZ_OK;
}

ckpz_error ckpz_grad_unpack(ckpz_ctx *ctx, const void *src, size_t len, ckpz_dtype dtype, void *out, uint64_t n)
{
    return grad_unpack(ctx, src, len, dtype, out, n, 0);
}

ckpz_error ckpz_grad_unpack_add(ckpz_ctx *ctx, const void *src, size_t len, float *acc, uint64_t n)
{
    return grad_unpack(ctx, src, len, CKPZ_DTYPE_F32, acc, n, 1);
}
