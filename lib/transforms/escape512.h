/* escape512.h — the AVX-512 step of the escape transform's encoder (escape.h) on 64
 * elements' top bytes held in registers, shared by escape_avx512.c and by the prediction
 * fused with it (predict_avx512.c), so that both write the same bytes. x86-64 with GCC or
 * clang only; needs CPU_VBMI2 (common/cpu.h: AVX-512 BW and vpcompressb) at run time. */
#ifndef CKPZ_ESCAPE512_H
#define CKPZ_ESCAPE512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define T512E __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2")))

/* K = 1: top byte hi. K = 2: top bytes hi (most significant) and lo. Writes 64 A bytes
 * to a and appends the escapes (h - T) to e[0] (and e[1]) at *ne, writing 64 bytes
 * there (ESC_SLACK); t = T in every byte. */
static inline __attribute__((always_inline)) T512E void esc_step(int K, __m512i t, __m512i hi, __m512i lo, uint8_t *a,
                                                                 uint8_t *const *e, size_t *ne)
{
    if (K == 1) {
        __mmask64 esc = _mm512_cmpge_epu8_mask(hi, t);
        _mm512_storeu_si512((void *)a, _mm512_min_epu8(hi, t));
        _mm512_storeu_si512((void *)(e[0] + *ne), _mm512_maskz_compress_epi8(esc, _mm512_sub_epi8(hi, t)));
        *ne += (size_t)__builtin_popcountll(esc);
        return;
    }
    __mmask64 borrow = _mm512_cmplt_epu8_mask(lo, t);
    __mmask64 small = _mm512_mask_cmpeq_epi8_mask(borrow, hi, _mm512_setzero_si512());
    __mmask64 esc = ~small;
    _mm512_storeu_si512((void *)a, _mm512_mask_blend_epi8(small, t, lo));
    __m512i h2 = _mm512_mask_sub_epi8(hi, borrow, hi, _mm512_set1_epi8(1));
    _mm512_storeu_si512((void *)(e[0] + *ne), _mm512_maskz_compress_epi8(esc, h2));
    _mm512_storeu_si512((void *)(e[1] + *ne), _mm512_maskz_compress_epi8(esc, _mm512_sub_epi8(lo, t)));
    *ne += (size_t)__builtin_popcountll(esc);
}

#endif
