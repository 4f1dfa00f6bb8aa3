/* escape_avx2.c — the escape transform's AVX2 loops for one or two top bytes, for CPUs
 * without AVX-512's byte compress and expand (escape.c calls them when cpu_level() is
 * CPU_AVX2): 32 elements a step. A and the top planes are vector compares and blends, as
 * in the AVX-512 loops; the escapes are packed (encoder) and spread (decoder) eight
 * elements at a time by a byte shuffle whose control comes from a table indexed by those
 * elements' escape bits (built on the caller's stack: 2 KiB each, a few hundred ns,
 * against the 64 KiB or more of a chunk), so that no branch depends on where the escapes
 * fall. Writes and reads exactly what the portable loops do; stores and loads of an
 * escape plane reach at most 8 bytes past its last escape (ESC_SLACK). */
#include "simd.h"

#ifdef XF_HAVE_X86
#include <immintrin.h>
#include <string.h>

#define T256 __attribute__((target("avx2,popcnt")))

/* pack[m]: the shuffle that gathers the bytes of the set bits of m, in order, to the
 * front; spread[m]: the one that puts the first popcount(m) bytes at the set bits of m
 * and zeros elsewhere (0x80: a zero byte). */
struct esc_tables {
    uint8_t pack[256][16], spread[256][16];
};

static void tables(struct esc_tables *t)
{
    memset(t, 0x80, sizeof *t);
    for (unsigned m = 0; m < 256; m++)
        for (unsigned j = 0, r = 0; j < 8; j++)
            if (m >> j & 1) {
                t->pack[m][r] = (uint8_t)j;
                t->spread[m][j] = (uint8_t)r++;
            }
}

/* Appends the bytes of v (32) whose bit in m is set to dst at *ne. */
static inline T256 void pack32(const struct esc_tables *t, __m256i v, uint32_t m, uint8_t *dst, size_t *ne)
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

/* The next popcount(m) bytes of src from *ne, spread to the set bits of m (32), zeros
 * elsewhere. */
static inline T256 __m256i spread32(const struct esc_tables *t, const uint8_t *src, uint32_t m, size_t *ne)
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

static inline T256 __m256i load(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
static inline T256 void store(uint8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)(void *)p, v); }
/* x >= y per unsigned byte, as 0xff / 0 */
static inline T256 __m256i ge_u8(__m256i x, __m256i y) { return _mm256_cmpeq_epi8(_mm256_max_epu8(x, y), x); }

T256 size_t esc_fwd_avx2(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a, uint8_t *const *e,
                         size_t *nesc)
{
    struct esc_tables tb;
    size_t i = 0, ne = *nesc, nv = elems / 32 * 32;
    if (!nv) return 0;
    tables(&tb);
    const __m256i t = _mm256_set1_epi8((char)T), zero = _mm256_setzero_si256();
    for (; i < nv; i += 32) {
        if (K == 1) {
            __m256i hi = load(top[0] + i);
            uint32_t esc = (uint32_t)_mm256_movemask_epi8(ge_u8(hi, t));
            store(a + i, _mm256_min_epu8(hi, t));
            pack32(&tb, _mm256_sub_epi8(hi, t), esc, e[0], &ne);
            continue;
        }
        /* h = hi:lo < T exactly where hi is 0 and lo < T; h - T borrows from hi where lo < T */
        __m256i hi = load(top[0] + i), lo = load(top[1] + i);
        __m256i borrow = _mm256_andnot_si256(ge_u8(lo, t), _mm256_set1_epi8(-1));
        __m256i small = _mm256_and_si256(borrow, _mm256_cmpeq_epi8(hi, zero));
        uint32_t esc = ~(uint32_t)_mm256_movemask_epi8(small);
        store(a + i, _mm256_blendv_epi8(t, lo, small));
        size_t at = ne;
        pack32(&tb, _mm256_add_epi8(hi, borrow), esc, e[0], &at);
        pack32(&tb, _mm256_sub_epi8(lo, t), esc, e[1], &ne);
    }
    *nesc = ne;
    return i;
}

T256 size_t esc_inv_avx2(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems, size_t *nesc,
                         uint8_t *const *top, int *bad)
{
    struct esc_tables tb;
    size_t i = 0, ne = *nesc, nv = elems / 32 * 32;
    *bad = 0;
    if (!nv) return 0;
    tables(&tb);
    const __m256i t = _mm256_set1_epi8((char)T), ff = _mm256_set1_epi8(-1);
    const __m256i wrap = _mm256_set1_epi8((char)(256 - T)); /* x + T carries where x >= 256 - T */
    __m256i over = _mm256_setzero_si256();
    for (; i < nv; i += 32) {
        __m256i v = load(a + i);
        __m256i escv = _mm256_cmpeq_epi8(v, t);
        uint32_t esc = (uint32_t)_mm256_movemask_epi8(escv);
        if (K == 1) {
            __m256i x = spread32(&tb, e[0], esc, &ne);
            over = _mm256_or_si256(over, _mm256_and_si256(escv, ge_u8(x, wrap)));
            store(top[0] + i, _mm256_blendv_epi8(v, _mm256_add_epi8(x, t), escv));
            continue;
        }
        size_t at = ne;
        __m256i hi = spread32(&tb, e[0], esc, &at);
        __m256i lo = spread32(&tb, e[1], esc, &ne);
        __m256i carry = _mm256_and_si256(escv, ge_u8(lo, wrap));
        over = _mm256_or_si256(over, _mm256_and_si256(carry, _mm256_cmpeq_epi8(hi, ff)));
        store(top[1] + i, _mm256_blendv_epi8(v, _mm256_add_epi8(lo, t), escv));
        store(top[0] + i, _mm256_sub_epi8(hi, carry)); /* carry is -1 where it adds one */
    }
    *nesc = ne;
    *bad = !_mm256_testz_si256(over, over);
    return i;
}
#endif
