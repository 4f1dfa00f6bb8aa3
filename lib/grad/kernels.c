/* kernels.c — what the gradient calls share: the kernels of the level in force, and BF16
 * and FP16 buffers staged as float32. pack.c hands sparse params to sparse.c, and both
 * use these, so they live here rather than in pack.c (no call circle). */
#include "common/cpu.h"
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
