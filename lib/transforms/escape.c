/* escape.c — the escape transform (see escape.h). One or two top bytes (K = 1, 2: the
 * residuals of bf16, f16 and f32 weights) have AVX-512 and AVX2 loops (escape_avx512.c,
 * escape_avx2.c, chosen at run time); the portable loops here handle every K, other
 * hosts and the last elements, and write the same bytes. */
#include "escape.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/cpu.h"
#include "simd.h"

/* ---- portable --------------------------------------------------------------------- */
static void fwd_scalar(unsigned K, unsigned T, const uint8_t *const *top, size_t i, size_t elems, uint8_t *a,
                       uint8_t *const *e, size_t *nesc)
{
    size_t ne = *nesc;
    for (; i < elems; i++) {
        unsigned high = 0;
        for (unsigned k = 0; k + 1 < K; k++) high |= top[k][i];
        unsigned last = top[K - 1][i];
        if (!high && last < T) {
            a[i] = (uint8_t)last;
            continue;
        }
        a[i] = (uint8_t)T;
        /* h - T, least-significant byte first, borrowing upwards (h >= T). */
        unsigned borrow = T;
        for (unsigned k = K; k-- > 0;) {
            unsigned v = top[k][i];
            e[k][ne] = (uint8_t)(v - borrow);
            borrow = v < borrow;
        }
        ne++;
    }
    *nesc = ne;
}

static int inv_scalar(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t i, size_t elems,
                      size_t ne, uint8_t *const *top)
{
    for (; i < elems; i++) {
        if (a[i] < T) {
            for (unsigned k = 0; k + 1 < K; k++) top[k][i] = 0;
            top[K - 1][i] = a[i];
            continue;
        }
        unsigned carry = T;
        for (unsigned k = K; k-- > 0;) {
            unsigned v = e[k][ne] + carry;
            top[k][i] = (uint8_t)v;
            carry = v >> 8;
        }
        if (carry) return -1;
        ne++;
    }
    return 0;
}

void esc_forward(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a, uint8_t *const *e,
                 size_t *nesc)
{
    size_t i = 0;
#ifdef XF_HAVE_X86
    if (K <= 2 && (cpu_features() & CPU_VBMI2)) i = esc_fwd_avx512(K, T, top, elems, a, e, nesc);
    else if (K <= 2 && cpu_level() >= CPU_AVX2) i = esc_fwd_avx2(K, T, top, elems, a, e, nesc);
#endif
    fwd_scalar(K, T, top, i, elems, a, e, nesc);
}

ptrdiff_t esc_count(unsigned T, const uint8_t *a, size_t elems)
{
    size_t n = 0, i = 0;
    unsigned over = 0;
#if defined(__SSE2__)
    /* 16 bytes a step: the decoder counts every chunk's A plane before its escapes. The
     * matches are added up in byte counters (a compare's -1 subtracted), summed every
     * 255 steps: a popcount of each step's mask was, without a popcnt target, a call
     * into libgcc per 16 bytes, 5% of restoring a BF16 delta file. */
    const __m128i t = _mm_set1_epi8((char)T), zero = _mm_setzero_si128();
    __m128i top = zero;
    while (i + 16 <= elems) {
        size_t steps = (elems - i) / 16 < 255 ? (elems - i) / 16 : 255;
        __m128i hits = zero;
        for (size_t k = 0; k < steps; k++, i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(a + i));
            hits = _mm_sub_epi8(hits, _mm_cmpeq_epi8(v, t));
            top = _mm_max_epu8(top, v);
        }
        __m128i s = _mm_sad_epu8(hits, zero);
        n += (size_t)_mm_cvtsi128_si32(s) + (size_t)_mm_cvtsi128_si32(_mm_unpackhi_epi64(s, s));
    }
    over = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(top, t), t)) != 0xffff;
#endif
    for (; i < elems; i++) {
        n += a[i] == T;
        over |= a[i] > T;
    }
    return over ? -1 : (ptrdiff_t)n;
}

int esc_inverse(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems, uint8_t *const *top)
{
    size_t i = 0, ne = 0;
#ifdef XF_HAVE_X86
    if (K <= 2 && cpu_level() >= CPU_AVX2) {
        int bad;
        i = cpu_features() & CPU_VBMI2 ? esc_inv_avx512(K, T, a, e, elems, &ne, top, &bad)
                                       : esc_inv_avx2(K, T, a, e, elems, &ne, top, &bad);
        if (bad) return -1;
    }
#endif
    return inv_scalar(K, T, a, e, i, elems, ne, top);
}
