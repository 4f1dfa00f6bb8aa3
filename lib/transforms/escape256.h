/* escape256.h — the AVX2 step of the escape transform's encoder (escape.h) on 32
 * elements' top bytes held in registers, shared by escape_avx2.c and by the prediction
 * fused with it (predict_avx2.c), so that both write the same bytes. The escapes are
 * packed eight elements at a time by a byte shuffle whose control comes from a table
 * indexed by those elements' escape bits, so that no branch depends on where the escapes
 * fall. x86-64 with GCC or clang; run only where cpu_level() allows CPU_AVX2. */
#ifndef CKPZ_ESCAPE256_H
#define CKPZ_ESCAPE256_H

#include <stddef.h>

#include "split256.h"

/* pack[m]: the shuffle that gathers the bytes at the set bits of m (8 bits), in order, to
 * the front; spread[m]: the one that puts the first popcount(m) bytes at the set bits of
 * m and zeros elsewhere (0x80: a zero byte). */
struct esc_tables {
    uint8_t pack[256][16], spread[256][16];
};

/* The tables, made on first use (escape_avx2.c). */
const struct esc_tables *esc_tables256(void);

/* Appends the bytes of v (32) whose bit in m is set to dst at *ne, storing 8 bytes per 8
 * elements (at most 8 past the last escape: ESC_SLACK). */
AI256 void esc_pack256(const struct esc_tables *t, __m256i v, uint32_t m, uint8_t *dst, size_t *ne)
{
    __m128i h[2] = {_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)};
    for (int g = 0; g < 4; g++) {
        unsigned bits = m >> (8 * g) & 0xff;
        __m128i src = g & 1 ? _mm_srli_si128(h[g >> 1], 8) : h[g >> 1];
        __m128i ctl = _mm_loadu_si128((const __m128i *)(const void *)t->pack[bits]);
        _mm_storel_epi64((__m128i *)(void *)(dst + *ne), _mm_shuffle_epi8(src, ctl));
        *ne += (size_t)__builtin_popcount(bits);
    }
}

/* x >= y per unsigned byte, as 0xff / 0 */
AI256 __m256i esc_ge256(__m256i x, __m256i y) { return _mm256_cmpeq_epi8(_mm256_max_epu8(x, y), x); }

/* K = 1: top byte hi. K = 2: top bytes hi (most significant) and lo. Writes 32 A bytes
 * to a and appends the escapes (h - T) to e[0] (and e[1]) at *ne; t = T in every byte.
 * h = hi:lo < T exactly where hi is 0 and lo < T; h - T borrows from hi where lo < T. */
AI256 void esc_step256(const struct esc_tables *tb, int K, __m256i t, __m256i hi, __m256i lo, uint8_t *a,
                       uint8_t *const *e, size_t *ne)
{
    if (K == 1) {
        uint32_t esc = (uint32_t)_mm256_movemask_epi8(esc_ge256(hi, t));
        st256(a, _mm256_min_epu8(hi, t));
        esc_pack256(tb, _mm256_sub_epi8(hi, t), esc, e[0], ne);
        return;
    }
    __m256i borrow = _mm256_andnot_si256(esc_ge256(lo, t), _mm256_set1_epi8(-1));
    __m256i small = _mm256_and_si256(borrow, _mm256_cmpeq_epi8(hi, _mm256_setzero_si256()));
    uint32_t esc = ~(uint32_t)_mm256_movemask_epi8(small);
    st256(a, _mm256_blendv_epi8(t, lo, small));
    size_t at = *ne;
    esc_pack256(tb, _mm256_add_epi8(hi, borrow), esc, e[0], &at); /* borrow is -1 where it takes one */
    esc_pack256(tb, _mm256_sub_epi8(lo, t), esc, e[1], ne);
}

#endif
