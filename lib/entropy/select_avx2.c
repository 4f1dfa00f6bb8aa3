/* select_avx2.c — the AVX2 loop of the selector's look at residual planes (select.c
 * decides from it whether zstd is worth trying): runs of nonzero bytes and nonzero
 * bytes, 32 a step, the same counts as the portable loop. */
#include "ent_internal.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>

__attribute__((target("avx2"))) size_t ent_runs_avx2(const uint8_t *src, size_t n, size_t *runs, size_t *nz)
{
    size_t i = 0;
    uint32_t prev = 0; /* top bit of the previous mask */
    const __m256i z = _mm256_setzero_si256();
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        uint32_t m = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, z));
        *runs += (size_t)__builtin_popcount(m & ~((m << 1) | prev));
        *nz += (size_t)__builtin_popcount(m);
        prev = m >> 31;
    }
    return i;
}
#endif
