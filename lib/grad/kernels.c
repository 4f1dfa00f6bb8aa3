/* kernels.c — what the gradient calls share: the kernels of the level in force, BF16
 * and FP16 buffers staged as float32, and the dense codes' entropy coding. pack.c hands
 * sparse params to sparse.c, and pack.c and sum.c both read coded codes, so these live
 * here rather than in pack.c (no call circle).
 *
 * Entropy coding: absmax-quantised gradients are peaked around 0 (most codes small), so
 * the codes' order-0 entropy is well under their width; the container's order-0 rANS
 * (lib/entropy) codes them, with tables per 32 KiB, in one pass after a histogram. Only
 * rANS (no zstd, no order 1): the cheapest to decode, and what the codes' statistics
 * reward. */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/cpu.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "entropy/entropy.h"
#include "grad/grad.h"

/* The kernels of the level in force (common/cpu.h: the CPU, capped by CKPZ_CPU). Chosen
 * here, not beside the portable loops, which the vector files call for their tails. */
const grad_kernels *grad_kernels_get(void)
{
#ifdef GRAD_HAVE_X86
    if (cpu_level() >= CPU_AVX2) return &grad_kernels_avx2;
#endif
    return &grad_kernels_scalar;
}

int grad_dtype_ok(ckpz_dtype t) { return t == CKPZ_DTYPE_F32 || t == CKPZ_DTYPE_BF16 || t == CKPZ_DTYPE_F16; }

const float *grad_stage(ckpz_dtype t, const void *src, uint64_t i0, size_t n, float *tmp)
{
    if (t == CKPZ_DTYPE_F32) return (const float *)src + i0;
    grad_kernels_get()->widen(t == CKPZ_DTYPE_F16, (const uint8_t *)src + 2 * i0, n, tmp);
    return tmp;
}

ckpz_error grad_frame_check(ckpz_ctx *ctx, const char *what, const uint8_t *src, size_t len, size_t header,
                            unsigned version)
{
    if (len < header + 4) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "%s: %zu bytes, shorter than a header", what, len);
    if (src[4] != version)
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "%s: version %u (this ckpz reads %u)", what, src[4], version);
    uint32_t want = ld32(src + len - 4), got = crc32c(0, src, len - 4);
    if (want != got)
        return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "%s: CRC-32C %08x, packet says %08x (%zu bytes)", what, (unsigned)got,
                        (unsigned)want, len);
    return CKPZ_OK;
}

size_t grad_codes_encode(uint8_t *c, size_t n, unsigned *coding)
{
    *coding = GRAD_CODES_RAW;
    if (n < 2) return n;
    ent_ctx *e = ent_ctx_create();
    uint8_t *tmp = malloc(ent_bound(n));
    size_t len = n;
    if (e && tmp) {
        uint8_t codec = ENT_STORED;
        ent_ctx_set_codec(e, CKPZ_CODEC_RANS); /* no zstd; level 1: no order 1 */
        size_t r = ent_encode(e, c, n, tmp, ent_bound(n), 1, ENT_HINT_RESIDUAL, &codec);
        if ((codec == ENT_CONST || codec == ENT_RANS0) && r && r < n) {
            memcpy(c, tmp, r);
            *coding = codec;
            len = r;
        }
    }
    free(tmp);
    ent_ctx_free(e);
    return len;
}

int grad_codes_decode(unsigned coding, const uint8_t *src, size_t len, size_t n, uint8_t **out)
{
    *out = NULL;
    if ((coding != GRAD_CODES_CONST && coding != GRAD_CODES_RANS0) || !n || len >= n) return -1;
    ent_ctx *e = ent_ctx_create();
    uint8_t *dst = malloc(n);
    if (!e || !dst) {
        ent_ctx_free(e);
        free(dst);
        return -2;
    }
    int r = ent_decode(e, (uint8_t)coding, src, len, dst, n);
    ent_ctx_free(e);
    if (r) {
        free(dst);
        return -1;
    }
    *out = dst;
    return 0;
}
