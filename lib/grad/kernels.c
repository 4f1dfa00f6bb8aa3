/* kernels.c — what the gradient calls share: the kernels of the level in force, and BF16
 * and FP16 buffers staged as float32. pack.c hands sparse params to sparse.c, and both
 * use these, so they live here rather than in pack.c (no call circle). */
#include "common/bytes.h"
#include "common/cpu.h"
#include "common/crc32c.h"
#include "common/ctx.h"
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
