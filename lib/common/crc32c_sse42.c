/* crc32c_sse42.c — the CRC kernels of CPUs with SSE4.2 and PCLMULQDQ (cpu.h level avx2):
 * CRC-32C with the crc32 instruction, three streams to hide its latency, and 16-byte
 * folding with PCLMULQDQ for the zip CRC, whose polynomial has no instruction (also
 * fused with a copy). See crc32c.c for the choice between them. */
#include <string.h>

#include "crc32c_impl.h"

#ifdef CRC_HAVE_X86
/* Four accumulators of 16 bytes (crc32c_impl.h). With dst, every block folded is also
 * stored there: the copy costs no second pass over the data (inlined twice, the stores
 * compiled out of crc_fold128). */
static inline __attribute__((always_inline)) PCLMUL_TARGET __m128i fold128_run(const crc_fold_tab k, uint32_t crc,
                                                                               uint8_t *dst, const uint8_t *p, size_t n)
{
#define LD(o) ld_st128(p + (o), dst ? dst + (o) : NULL)
    __m128i a0 = _mm_xor_si128(LD(0), _mm_cvtsi32_si128((int)crc)), a1 = LD(16), a2 = LD(32), a3 = LD(48);
    p += 64;
    dst = dst ? dst + 64 : NULL;
    n -= 64;
    for (; n >= 64; p += 64, dst = dst ? dst + 64 : NULL, n -= 64) {
        a0 = fold128(a0, k[FOLD_D512], LD(0));
        a1 = fold128(a1, k[FOLD_D512], LD(16));
        a2 = fold128(a2, k[FOLD_D512], LD(32));
        a3 = fold128(a3, k[FOLD_D512], LD(48));
    }
    __m128i r = fold128(a0, k[FOLD_D384], fold128(a1, k[FOLD_D256], fold128(a2, k[FOLD_D128], a3)));
    for (; n >= 16; p += 16, dst = dst ? dst + 16 : NULL, n -= 16) r = fold128(r, k[FOLD_D128], LD(0));
#undef LD
    return r;
}

PCLMUL_TARGET __m128i crc_fold128(const crc_fold_tab k, uint32_t crc, const uint8_t *p, size_t n)
{
    return fold128_run(k, crc, NULL, p, n);
}

PCLMUL_TARGET __m128i crc_fold128_copy(const crc_fold_tab k, uint32_t crc, uint8_t *dst, const uint8_t *p, size_t n)
{
    return fold128_run(k, crc, dst, p, n);
}

#define CASTAGNOLI 0x82f63b78u

/* x^(8*BLK) mod P for BLK = 2^13: x^8 squared 13 times. */
static uint32_t x_pow8_8192(void)
{
    uint32_t r = 0x00800000u; /* x^8 reflected: bit (31-8) */
    for (int k = 0; k < 13; k++) r = crc_gf_mul(CASTAGNOLI, r, r);
    return r;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n,
                                                        const crc_fold_tab fold)
{
    if (n >= 1024 && fold) {
        size_t done = n - n % 64;
        __m128i r = crc_fold512(fold, crc, p, n);
        /* crc32 from state 0 over the last 128 bits multiplies them by x^32 mod P. */
        uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
        crc = (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(r, 1));
        p += done;
        n -= done;
    }
    uint64_t c = crc;
    /* Three independent streams of BLK bytes hide the instruction's 3-cycle latency;
     * they are joined by multiplying with x^(8*BLK), computed once. */
    enum { BLK = 8192 }; /* x_pow8_8192 */
    static uint32_t shift;
    if (n >= 3 * BLK && !__atomic_load_n(&shift, __ATOMIC_ACQUIRE))
        __atomic_store_n(&shift, x_pow8_8192(), __ATOMIC_RELEASE);
    while (n >= 3 * BLK) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *p1 = p + BLK, *p2 = p + 2 * BLK;
        for (size_t i = 0; i < BLK; i += 8) {
            uint64_t a, b, d;
            memcpy(&a, p + i, 8);
            memcpy(&b, p1 + i, 8);
            memcpy(&d, p2 + i, 8);
            c = _mm_crc32_u64(c, a);
            c1 = _mm_crc32_u64(c1, b);
            c2 = _mm_crc32_u64(c2, d);
        }
        /* c1 and c2 started from 0, not from the running state: append them as raw
         * CRC states (no pre/post inversion inside this function). */
        c = crc_gf_mul(CASTAGNOLI, shift, crc_gf_mul(CASTAGNOLI, shift, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * BLK;
        n -= 3 * BLK;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}

#endif
