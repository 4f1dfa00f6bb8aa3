/* escape.c — the escape transform (see escape.h). One or two top bytes (K = 1, 2: the
 * residuals of bf16, f16 and f32 weights) have AVX-512 loops, 64 elements per step:
 * compare, blend and vpcompressb/vpexpandb (VBMI2, chosen at run time); the portable
 * loops handle every K, other hosts and the last elements, and write the same bytes. */
#include "escape.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

int esc_simd_cap = 1;

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

/* ---- AVX-512 ---------------------------------------------------------------------- */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ESC_HAVE_AVX512 1
#include <immintrin.h>

#include "escape512.h"

#define T512 T512E

int esc_have_avx512(void)
{
    static int v = -1; /* racing threads compute the same value */
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0) {
        r = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
            __builtin_cpu_supports("avx512vbmi2");
        __atomic_store_n(&v, r, __ATOMIC_RELAXED);
    }
    return r && esc_simd_cap;
}

/* Whole steps of 64 elements; returns the elements done. */
T512 static size_t fwd_avx512(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a,
                              uint8_t *const *e, size_t *nesc)
{
    const __m512i t = _mm512_set1_epi8((char)T);
    size_t i = 0, nv = elems / 64 * 64;
    if (K == 1)
        for (; i < nv; i += 64)
            esc_step(1, t, _mm512_loadu_si512((const void *)(top[0] + i)), t, a + i, e, nesc);
    else
        for (; i < nv; i += 64)
            esc_step(2, t, _mm512_loadu_si512((const void *)(top[0] + i)),
                     _mm512_loadu_si512((const void *)(top[1] + i)), a + i, e, nesc);
    return i;
}

T512 static size_t inv_avx512(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems,
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
#else
int esc_have_avx512(void) { return 0; }
#endif

void esc_forward(unsigned K, unsigned T, const uint8_t *const *top, size_t elems, uint8_t *a, uint8_t *const *e,
                 size_t *nesc)
{
    size_t i = 0;
#ifdef ESC_HAVE_AVX512
    if (K <= 2 && esc_have_avx512()) i = fwd_avx512(K, T, top, elems, a, e, nesc);
#endif
    fwd_scalar(K, T, top, i, elems, a, e, nesc);
}

ptrdiff_t esc_count(unsigned T, const uint8_t *a, size_t elems)
{
    size_t n = 0, i = 0;
    unsigned over = 0;
#if defined(__SSE2__)
    /* 16 bytes a step: the decoder counts every chunk's A plane before its escapes. */
    const __m128i t = _mm_set1_epi8((char)T);
    __m128i top = _mm_setzero_si128();
    for (; i + 16 <= elems; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(a + i));
        n += (size_t)__builtin_popcount((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, t)));
        top = _mm_max_epu8(top, v);
    }
    over = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(top, t), t)) != 0xffff;
#endif
    for (; i < elems; i++) {
        n += a[i] == T;
        over |= a[i] > T;
    }
    return over ? -1 : (ptrdiff_t)n;
}

int esc_inverse(unsigned K, unsigned T, const uint8_t *a, const uint8_t *const *e, size_t elems,
                uint8_t *const *top)
{
    size_t i = 0, ne = 0;
#ifdef ESC_HAVE_AVX512
    if (K <= 2 && esc_have_avx512()) {
        int bad;
        i = inv_avx512(K, T, a, e, elems, &ne, top, &bad);
        if (bad) return -1;
    }
#endif
    return inv_scalar(K, T, a, e, i, elems, ne, top);
}
