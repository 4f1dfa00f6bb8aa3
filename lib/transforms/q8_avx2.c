/* q8_avx2.c — transform q8's block merge (q8.c, merge_blocks) in AVX2: one Q8_0 block a
 * vector, for CPUs without AVX-512. A block's 32 quants are four runs of eight, run j
 * taking bits 2j..2j+1 of each of the block's eight top-field and eight middle-field
 * bytes and the low or high nibble of one of its two low-field words. Each field word is
 * broadcast to the four 64-bit lanes (lane j: run j); shifting a lane left by 6 - 2j puts
 * bits 2j..2j+1 of every byte at bits 6..7 of the same byte (a shift of less than 8 moves
 * no wanted bit across bytes; the masks drop the rest), the middle fields two below that,
 * the low nibbles right by 0 or 4. Then the zigzag is undone (bit 0 the sign) and the
 * block goes out as its 2-byte scale and one 32-byte store. Writes exactly what
 * merge_blocks writes. */
#include "simd.h"

#ifdef XF_HAVE_X86
#include <immintrin.h>
#include <string.h>

#define T256 __attribute__((target("avx2")))

T256 size_t q8_merge_avx2(const uint8_t *const *pl, size_t b0, size_t cnt, uint8_t *out)
{
    const uint8_t *slo = pl[1] + b0, *shi = pl[2] + b0, *top = pl[3] + 8 * b0, *mid = pl[4] + 8 * b0,
                  *lo = pl[5] + 16 * b0;
    const __m256i up = _mm256_set_epi64x(0, 2, 4, 6), low = _mm256_set_epi64x(4, 4, 0, 0);
    const __m256i mC0 = _mm256_set1_epi8((char)0xc0), m30 = _mm256_set1_epi8(0x30), m0F = _mm256_set1_epi8(0x0f);
    const __m256i m7F = _mm256_set1_epi8(0x7f), m01 = _mm256_set1_epi8(1), zero = _mm256_setzero_si256();
    size_t b = 0;
    for (; b < cnt; b++, out += 34) {
        long long a, m;
        memcpy(&a, top + 8 * b, 8);
        memcpy(&m, mid + 8 * b, 8);
        __m256i t = _mm256_and_si256(_mm256_sllv_epi64(_mm256_set1_epi64x(a), up), mC0);
        __m256i u = _mm256_and_si256(_mm256_srli_epi64(_mm256_sllv_epi64(_mm256_set1_epi64x(m), up), 2), m30);
        /* lanes l0, l1, l0, l1: low nibbles for runs 0 and 1, high ones for 2 and 3 */
        __m256i l = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(lo + 16 * b)));
        l = _mm256_and_si256(_mm256_srlv_epi64(l, low), m0F);
        __m256i z = _mm256_or_si256(_mm256_or_si256(t, u), l);
        __m256i s = _mm256_sub_epi8(zero, _mm256_and_si256(z, m01));
        __m256i q = _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(z, 1), m7F), s);
        out[0] = slo[b];
        out[1] = shi[b];
        _mm256_storeu_si256((__m256i *)(void *)(out + 2), q);
    }
    return b;
}
#endif
