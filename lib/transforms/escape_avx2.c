/* escape_avx2.c — the escape transform's AVX2 loops for one or two top bytes, for CPUs
 * without AVX-512's byte compress and expand (escape.c calls them when cpu_level() is
 * CPU_AVX2 and VBMI2 is missing): 32 elements a step. A and the top planes are vector
 * compares and blends, as in the AVX-512 loops; the escapes are packed (encoder,
 * escape256.h's step) and spread (decoder) eight elements at a time by byte shuffles from
 * tables of the escape bits. Writes and reads exactly what the portable loops do; stores
 * and loads of an escape plane reach at most 8 bytes past its last escape (ESC_SLACK). */
#include "simd.h"

#ifdef XF_HAVE_X86
#include <pthread.h>
#include <string.h>

#include "escape256.h"

static struct esc_tables tables;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void make_tables(void)
{
    memset(&tables, 0x80, sizeof tables);
    for (unsigned m = 0; m < 256; m++)
        for (unsigned j = 0, r = 0; j < 8; j++)
            if (m >> j & 1) {
                tables.pack[m][r] = (uint8_t)j;
                tables.spread[m][j] = (uint8_t)r++;
            }
}

const struct esc_tables *esc_tables256(void)
{
    pthread_once(&tables_once, make_tables);
    return &tables;
}

/* The next popcount(m) bytes of src from *ne, spread to the set bits of m (32), zeros
 * elsewhere. */
AI256 __m256i spread32(const struct esc_tables *t, const uint8_t *src, uint32_t m, size_t *ne)
{
    __m128i q[4];
    for (int g = 0; g < 4; g++) {
        unsigned bits = m >> (8 * g) & 0xff;
        q[g] = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(const void *)(src + *ne)),
                                _mm_loadu_si128((const __m128i *)(const void *)t->spread[bits]));
        *ne += (size_t)__builtin_popcount(bits);
    }
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(q[0], q[1])),
                                   _mm_unpacklo_epi64(q[2], q[3]), 1);
}

T256 size_t esc_fwd_avx2(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a, uint8_t *const *e,
                         size_t *nesc)
{
    size_t i = 0, ne = *nesc, nv = elems / 32 * 32;
    if (!nv) return 0;
    const struct esc_tables *tb = esc_tables256();
    const __m256i t = _mm256_set1_epi8((char)T);
    if (K == 1)
        for (; i < nv; i += 32) esc_step256(tb, 1, t, ld256(top[0] + i), t, a + i, e, &ne);
    else
        for (; i < nv; i += 32) esc_step256(tb, 2, t, ld256(top[0] + i), ld256(top[1] + i), a + i, e, &ne);
    *nesc = ne;
    return i;
}

T256 size_t esc_inv_avx2(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems, size_t *nesc,
                         uint8_t *const *top, int *bad)
{
    size_t i = 0, ne = *nesc, nv = elems / 32 * 32;
    *bad = 0;
    if (!nv) return 0;
    const struct esc_tables *tb = esc_tables256();
    const __m256i t = _mm256_set1_epi8((char)T), ff = _mm256_set1_epi8(-1);
    const __m256i wrap = _mm256_set1_epi8((char)(256 - T)); /* x + T carries where x >= 256 - T */
    __m256i over = _mm256_setzero_si256();
    for (; i < nv; i += 32) {
        __m256i v = ld256(a + i);
        __m256i escv = _mm256_cmpeq_epi8(v, t);
        uint32_t esc = (uint32_t)_mm256_movemask_epi8(escv);
        if (K == 1) {
            __m256i x = spread32(tb, e[0], esc, &ne);
            over = _mm256_or_si256(over, _mm256_and_si256(escv, esc_ge256(x, wrap)));
            st256(top[0] + i, _mm256_blendv_epi8(v, _mm256_add_epi8(x, t), escv));
            continue;
        }
        size_t at = ne;
        __m256i hi = spread32(tb, e[0], esc, &at);
        __m256i lo = spread32(tb, e[1], esc, &ne);
        __m256i carry = _mm256_and_si256(escv, esc_ge256(lo, wrap));
        over = _mm256_or_si256(over, _mm256_and_si256(carry, _mm256_cmpeq_epi8(hi, ff)));
        st256(top[1] + i, _mm256_blendv_epi8(v, _mm256_add_epi8(lo, t), escv));
        st256(top[0] + i, _mm256_sub_epi8(hi, carry)); /* carry is -1 where it adds one */
    }
    *nesc = ne;
    *bad = !_mm256_testz_si256(over, over);
    return i;
}
#endif
