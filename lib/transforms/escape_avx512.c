/* escape_avx512.c — the escape transform's AVX-512 loops for one or two top bytes (the
 * residuals of bf16, f16 and f32 weights; escape.c calls them when cpu_features() has
 * VBMI2): 64 elements per step, compare, blend and vpcompressb/vpexpandb, writing the
 * same bytes as the portable loops. */
#include "simd.h"

#ifdef XF_HAVE_X86
#include "escape512.h"

#define T512 T512E

/* Whole steps of 64 elements; returns the elements done. */
T512 size_t esc_fwd_avx512(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a,
                           uint8_t *const *e, size_t *nesc)
{
    const __m512i t = _mm512_set1_epi8((char)T);
    size_t i = 0, nv = elems / 64 * 64;
    if (K == 1)
        for (; i < nv; i += 64) esc_step(1, t, _mm512_loadu_si512((const void *)(top[0] + i)), t, a + i, e, nesc);
    else
        for (; i < nv; i += 64)
            esc_step(2, t, _mm512_loadu_si512((const void *)(top[0] + i)),
                     _mm512_loadu_si512((const void *)(top[1] + i)), a + i, e, nesc);
    return i;
}

T512 size_t esc_inv_avx512(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems,
                           size_t *nesc, uint8_t *const *top, int *bad)
{
    const __m512i t = _mm512_set1_epi8((char)T), one = _mm512_set1_epi8(1);
    const __m512i ff = _mm512_set1_epi8((char)0xff);
    size_t i = 0, ne = *nesc, nv = elems / 64 * 64;
    __mmask64 over = 0;
    for (; i < nv; i += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(a + i));
        __mmask64 esc = _mm512_cmpeq_epi8_mask(v, t);
        if (K == 1) {
            __m512i x = _mm512_maskz_expand_epi8(esc, _mm512_loadu_si512((const void *)(e[0] + ne)));
            over |= _mm512_mask_cmpgt_epu8_mask(esc, x, _mm512_sub_epi8(ff, t));
            _mm512_storeu_si512((void *)(top[0] + i), _mm512_mask_add_epi8(v, esc, x, t));
        } else {
            __m512i lo = _mm512_maskz_expand_epi8(esc, _mm512_loadu_si512((const void *)(e[1] + ne)));
            __m512i hi = _mm512_maskz_expand_epi8(esc, _mm512_loadu_si512((const void *)(e[0] + ne)));
            /* lo + T carries where lo > 255 - T; hi + carry overflows where hi is 255. */
            __mmask64 carry = _mm512_mask_cmpgt_epu8_mask(esc, lo, _mm512_sub_epi8(ff, t));
            over |= _mm512_mask_cmpeq_epi8_mask(carry, hi, ff);
            _mm512_storeu_si512((void *)(top[1] + i), _mm512_mask_add_epi8(v, esc, lo, t));
            _mm512_storeu_si512((void *)(top[0] + i), _mm512_mask_add_epi8(hi, carry, hi, one));
        }
        ne += (size_t)__builtin_popcountll(esc);
    }
    *nesc = ne;
    *bad = over != 0;
    return i;
}
#endif
