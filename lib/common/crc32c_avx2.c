/* crc32c_avx2.c — CRC folding with VPCLMULQDQ on ymm registers, for CPUs that have it
 * without AVX-512 (AMD Zen 3, Intel Alder Lake): four accumulators of 32 bytes, 128
 * bytes a step, twice the PCLMULQDQ loop's bytes per multiply. crc32c.c calls it for
 * the zip CRC, alone or fused with a copy, when cpu.h has CPU_VPCLMUL256. */
#include "crc32c_impl.h"

#ifdef CRC_HAVE_X86
#define YMM_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul")))

/* Each 16-byte lane of a folded forward onto the same lane of data (k broadcast). */
static inline __attribute__((always_inline)) YMM_TARGET __m256i fold256(__m256i a, __m256i k, __m256i data)
{
    return _mm256_xor_si256(
        _mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00), _mm256_clmulepi64_epi128(a, k, 0x11)), data);
}

static inline __attribute__((always_inline)) YMM_TARGET __m256i ld_st256(const uint8_t *p, uint8_t *dst)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
    if (dst) _mm256_storeu_si256((__m256i *)(void *)dst, v);
    return v;
}

/* With dst, every block folded is also stored there (inlined twice: the stores are
 * compiled out of crc_fold256). */
static inline __attribute__((always_inline)) YMM_TARGET __m128i fold256_run(const crc_fold_tab k, uint32_t crc,
                                                                            uint8_t *dst, const uint8_t *p, size_t n)
{
#define K256(d) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)k[d]))
#define LD(o) ld_st256(p + (o), dst ? dst + (o) : NULL)
    /* The running state joins the first 32 bits of the message (crc32c_avx512.c). */
    __m256i a0 = _mm256_xor_si256(LD(0),
                                  _mm256_inserti128_si256(_mm256_setzero_si256(), _mm_cvtsi32_si128((int)crc), 0));
    __m256i a1 = LD(32), a2 = LD(64), a3 = LD(96);
    p += 128;
    dst = dst ? dst + 128 : NULL;
    n -= 128;
    const __m256i k4 = K256(FOLD_D1024);
    for (; n >= 128; p += 128, dst = dst ? dst + 128 : NULL, n -= 128) {
        a0 = fold256(a0, k4, LD(0));
        a1 = fold256(a1, k4, LD(32));
        a2 = fold256(a2, k4, LD(64));
        a3 = fold256(a3, k4, LD(96));
    }
    /* Each accumulator is 32 bytes (256 bits) ahead of the next one. */
    const __m256i k1 = K256(FOLD_D256);
    a3 = fold256(fold256(fold256(a0, k1, a1), k1, a2), k1, a3);
    for (; n >= 32; p += 32, dst = dst ? dst + 32 : NULL, n -= 32) a3 = fold256(a3, k1, LD(0));
#undef LD
#undef K256
    __m128i r = fold128(_mm256_castsi256_si128(a3), k[FOLD_D128], _mm256_extracti128_si256(a3, 1));
    for (; n >= 16; p += 16, dst = dst ? dst + 16 : NULL, n -= 16) r = fold128(r, k[FOLD_D128], ld_st128(p, dst));
    return r;
}

YMM_TARGET __m128i crc_fold256(const crc_fold_tab k, uint32_t crc, const uint8_t *p, size_t n)
{
    return fold256_run(k, crc, NULL, p, n);
}

YMM_TARGET __m128i crc_fold256_copy(const crc_fold_tab k, uint32_t crc, uint8_t *dst, const uint8_t *p, size_t n)
{
    return fold256_run(k, crc, dst, p, n);
}

#endif
