/* crc32c_avx512.c — CRC folding of 64-byte blocks with VPCLMULQDQ on zmm registers, four
 * accumulators, 256 bytes a step, for either polynomial (crc32c.c and crc32c_sse42.c call
 * it on long buffers when cpu.h has CPU_VPCLMUL), alone or fused with a copy. See
 * crc32c.c for why folding. */
#include "crc32c_impl.h"

#ifdef CRC_HAVE_X86
/* Bytes ahead of the fold that the loop asks the cache for: a chunk's payload is
 * checksummed before it is decoded, often straight from memory, where the hardware
 * prefetcher alone kept one core at 8.5 GB/s and this at 10.5 (256 MiB in 1 MiB
 * pieces); data already in cache lose nothing. */
#define CRC_PF 1024
#define CLMUL_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

static inline __attribute__((always_inline)) CLMUL_TARGET __m512i fold512(__m512i a, __m512i k, __m512i data)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11), data,
                                     0x96);
}

static inline __attribute__((always_inline)) CLMUL_TARGET __m512i ld_st512(const uint8_t *p, uint8_t *dst)
{
    __m512i v = _mm512_loadu_si512((const void *)p);
    if (dst) _mm512_storeu_si512((void *)dst, v);
    return v;
}

/* With dst, every block folded is also stored there (inlined twice: the stores are
 * compiled out of crc_fold512). */
static inline __attribute__((always_inline)) CLMUL_TARGET __m128i fold512_run(const crc_fold_tab k, uint32_t crc,
                                                                              uint8_t *dst, const uint8_t *p, size_t n)
{
#define K512(d) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)k[d]))
#define LD(o) ld_st512(p + (o), dst ? dst + (o) : NULL)
    /* The running state joins the first 32 bits of the message: c*x^len + M*x^32 =
     * (c*x^(len-32) + M)*x^32. */
    __m512i a0 = _mm512_xor_si512(LD(0), _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    __m512i a1 = LD(64), a2 = LD(128), a3 = LD(192);
    p += 256;
    dst = dst ? dst + 256 : NULL;
    n -= 256;
    const __m512i k4 = K512(FOLD_D2048);
    for (; n >= 256; p += 256, dst = dst ? dst + 256 : NULL, n -= 256) {
        if (n >= CRC_PF + 256) { /* inside the buffer only */
            _mm_prefetch((const char *)p + CRC_PF, _MM_HINT_T0);
            _mm_prefetch((const char *)p + CRC_PF + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)p + CRC_PF + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)p + CRC_PF + 192, _MM_HINT_T0);
        }
        a0 = fold512(a0, k4, LD(0));
        a1 = fold512(a1, k4, LD(64));
        a2 = fold512(a2, k4, LD(128));
        a3 = fold512(a3, k4, LD(192));
    }
    const __m512i k1 = K512(FOLD_D512);
    a3 = fold512(a0, K512(FOLD_D1536), fold512(a1, K512(FOLD_D1024), fold512(a2, k1, a3)));
    for (; n >= 64; p += 64, dst = dst ? dst + 64 : NULL, n -= 64) a3 = fold512(a3, k1, LD(0));
#undef LD
#undef K512
    __m128i r = fold128(_mm512_extracti32x4_epi32(a3, 0), k[FOLD_D384], _mm512_extracti32x4_epi32(a3, 3));
    r = fold128(_mm512_extracti32x4_epi32(a3, 1), k[FOLD_D256], r);
    return fold128(_mm512_extracti32x4_epi32(a3, 2), k[FOLD_D128], r);
}

CLMUL_TARGET __m128i crc_fold512(const crc_fold_tab k, uint32_t crc, const uint8_t *p, size_t n)
{
    return fold512_run(k, crc, NULL, p, n);
}

CLMUL_TARGET __m128i crc_fold512_copy(const crc_fold_tab k, uint32_t crc, uint8_t *dst, const uint8_t *p, size_t n)
{
    return fold512_run(k, crc, dst, p, n);
}

#endif
