/* fuzz_grad.c — libFuzzer harness for the gradient packet decoders (lib/grad/pack.c,
 * lib/grad/sparse.c: ckpz_grad_info_read, ckpz_grad_unpack, ckpz_grad_unpack_add), dense
 * (CKGQ) and sparse (CKGS) packets alike.
 *
 * Input: byte 0 is control, the rest the packet. Control bit 0: the packet's last four
 * bytes are resealed (its CRC-32C recomputed) so that mutations reach the field checks.
 * Checks: info_read and unpack agree (the same error, a message with it); an accepted
 * packet's fields are in range (count <= 2^32 - 1, nnz <= count, 8, 4, 1 or 32 bits) and it
 * decodes in full: finite FP32 values (a sparse packet's at most nnz of them non-zero),
 * unpack_add into zeros giving the same values, BF16 and FP16 outputs each the dtype
 * table's nearest of the FP32 value; a room of another size is CKPZ_ERR_PARAM; a dense
 * packet summed with itself (ckpz_grad_sum) decodes to within half its new step of twice
 * the values (1-bit: to exactly twice them), or overflows (CKPZ_ERR_INPUT), its codes raw whatever the input's (rANS-coded
 * or constant codes are decoded first, the same checks). Packets of over 2^20 elements are checked up
 * to the decoding. */
#include <math.h>

#define CKPZ_EXPERIMENTAL
#include "ckpz.h"
#include "common/crc32c.h"
#include "common/dtype.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t len = size - 1;
    uint8_t *pkt = fz_copy(data + 1, len);
    if (data[0] & 1 && len >= 8) {
        uint32_t c = crc32c(0, pkt, len - 4);
        for (int k = 0; k < 4; k++) pkt[len - 4 + k] = (uint8_t)(c >> 8 * k);
    }
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_grad_info info = {.struct_size = sizeof info};
    ckpz_error e = ckpz_grad_info_read(ctx, pkt, len, &info);
    float one[1];
    if (e != CKPZ_OK) {
        FZ_CHECK(ckpz_ctx_message(ctx)[0], "info_read failed (%s) without a message", ckpz_error_name(e));
        ckpz_error u = ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, one, 1);
        FZ_CHECK(u != CKPZ_OK && ckpz_ctx_message(ctx)[0], "unpack of a refused packet: %s", ckpz_error_name(u));
        FZ_CHECK(u == e || (u == CKPZ_ERR_PARAM && e == CKPZ_ERR_PARAM), "info_read %s, unpack %s", ckpz_error_name(e),
                 ckpz_error_name(u));
        goto out;
    }
    FZ_CHECK(info.count <= 0xffffffffull && info.nnz <= info.count, "count %llu, nnz %llu",
             (unsigned long long)info.count, (unsigned long long)info.nnz);
    FZ_CHECK(info.kind == CKPZ_GRAD_DENSE
                 ? (info.bits == 8 || info.bits == 4 || info.bits == 1) && info.nnz == info.count
                 : info.bits == 8 || info.bits == 32,
             "kind %u with %u bits", info.kind, info.bits);
    if (info.count != 1)
        FZ_CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, one, 1) == CKPZ_ERR_PARAM, "a room of 1 accepted");
    if (info.count > (1u << 20)) goto out;
    size_t n = (size_t)info.count;
    float *y = malloc(n * 4 + 4), *acc = calloc(n + 1, 4);
    uint8_t *h = malloc(n * 2 + 2), w[2];
    FZ_CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, n) == CKPZ_OK, "accepted, then unpack: %s",
             ckpz_ctx_message(ctx));
    FZ_CHECK(ckpz_grad_unpack_add(ctx, pkt, len, acc, n) == CKPZ_OK, "unpack_add: %s", ckpz_ctx_message(ctx));
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) {
        FZ_CHECK(isfinite(y[i]) && acc[i] == y[i], "element %zu: %g, added %g", i, y[i], acc[i]);
        nonzero += y[i] != 0;
    }
    FZ_CHECK(nonzero <= info.nnz, "%zu non-zero of %llu values", nonzero, (unsigned long long)info.nnz);
    for (int t = 0; t < 2; t++) {
        ckpz_dtype dt = t ? CKPZ_DTYPE_F16 : CKPZ_DTYPE_BF16;
        const dtype_info *d = dtype_get(dt);
        FZ_CHECK(ckpz_grad_unpack(ctx, pkt, len, dt, h, n) == CKPZ_OK, "unpack to %s: %s", d->name,
                 ckpz_ctx_message(ctx));
        for (size_t i = 0; i < n; i++) {
            d->from_double(w, y[i]);
            FZ_CHECK(!memcmp(w, h + 2 * i, 2), "%s element %zu is not the nearest of %g", d->name, i, y[i]);
        }
    }
    if (info.kind == CKPZ_GRAD_DENSE) { /* the packet plus itself: within half its new step of 2y */
        const void *two[2] = {pkt, pkt};
        size_t lens[2] = {len, len}, w = 0, raw = 0;
        ckpz_grad_params p; /* the sum's codes are raw: the room of a raw packet */
        ckpz_grad_params_init(&p);
        p.bits = info.bits, p.block = info.block;
        FZ_CHECK(ckpz_grad_packet_size(ctx, &p, info.count, &raw) == CKPZ_OK && raw >= len, "raw size %zu of %zu", raw,
                 len);
        uint8_t *sum = malloc(raw);
        ckpz_error se = ckpz_grad_sum(ctx, two, lens, 2, sum, raw, &w);
        FZ_CHECK(se == CKPZ_OK || se == CKPZ_ERR_INPUT, "sum of an accepted packet: %s", ckpz_ctx_message(ctx));
        if (se == CKPZ_OK) {
            FZ_CHECK(w == raw && ckpz_grad_unpack(ctx, sum, w, CKPZ_DTYPE_F32, acc, n) == CKPZ_OK,
                     "the sum does not decode: %s", ckpz_ctx_message(ctx));
            for (size_t i = 0; i < n; i++) {
                float two_y = y[i] + y[i], step = 0;
                uint32_t u = (uint32_t)sum[24 + 4 * (i / info.block)] | (uint32_t)sum[25 + 4 * (i / info.block)] << 8 |
                             (uint32_t)sum[26 + 4 * (i / info.block)] << 16 |
                             (uint32_t)sum[27 + 4 * (i / info.block)] << 24;
                memcpy(&step, &u, 4);
                float bound = step == 0 ? 0x1p-118f : 0.5f * step * 1.0001f + 1e-37f; /* a tiny block: 0 */
                if (info.bits == 1) /* signs doubled, the mean magnitude doubled: exact */
                    bound = step == 0 ? 0x1p-117f : 0;
                FZ_CHECK(fabsf(acc[i] - two_y) <= bound, "sum element %zu: %g, 2y %g", i, acc[i], two_y);
            }
        }
        free(sum);
    }
    free(y), free(acc), free(h);
out:
    ckpz_ctx_free(ctx);
    free(pkt);
    return 0;
}
