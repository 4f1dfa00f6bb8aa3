/* crc32c_impl.h — what crc32c.c shares with its x86-64 kernels (crc32c.c calls them when
 * cpu.h allows): the crc32 instruction and PCLMULQDQ folding in crc32c_sse42.c,
 * VPCLMULQDQ folding on ymm registers in crc32c_avx2.c and on zmm registers in
 * crc32c_avx512.c. Every kernel gives the table
 * path's values. Raw states throughout: no pre or post inversion. */
#ifndef CKPZ_CRC32C_IMPL_H
#define CKPZ_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* a*b mod P in the reflected representation. */
static inline uint32_t crc_gf_mul(uint32_t poly, uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) r ^= b;
        a <<= 1;
        b = (b >> 1) ^ (poly & (0u - (b & 1)));
    }
    return r;
}

/* Distances an accumulator is folded forward by, in bits. */
enum { FOLD_D512, FOLD_D1024, FOLD_D1536, FOLD_D2048, FOLD_D128, FOLD_D256, FOLD_D384, FOLD_N };
/* The folding constants of one polynomial: {for H, for L} per distance (crc32c.c). */
typedef uint64_t crc_fold_tab[FOLD_N][2];

#if defined(__x86_64__)
#define CRC_HAVE_X86 1
#include <immintrin.h>
#include <nmmintrin.h>

#define PCLMUL_TARGET __attribute__((target("pclmul")))

/* Folds the 128-bit accumulator a forward by the distance of k2 onto data. */
static inline __attribute__((always_inline)) PCLMUL_TARGET __m128i fold128(__m128i a, const uint64_t k2[2],
                                                                           __m128i data)
{
    __m128i k = _mm_loadu_si128((const __m128i *)(const void *)k2);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), data);
}

/* A 16-byte load from p, also stored to dst unless dst is NULL (for the folding loops
 * that copy as they go). */
static inline __attribute__((always_inline)) __m128i ld_st128(const uint8_t *p, uint8_t *dst)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (dst) _mm_storeu_si128((__m128i *)(void *)dst, v);
    return v;
}

/* crc32c_avx512.c: the first n - n % 64 bytes (n >= 256) folded, continuing from raw
 * state crc, to 128 bits R: the raw state after them is R*x^32 mod P. The caller
 * reduces R and takes the rest. Needs CPU_VPCLMUL. */
__m128i crc_fold512(const crc_fold_tab k, uint32_t crc, const uint8_t *p, size_t n);
/* ... and copies those bytes to dst (a CRC taken while copying, in one pass). */
__m128i crc_fold512_copy(const crc_fold_tab k, uint32_t crc, uint8_t *dst, const uint8_t *p, size_t n);
/* crc32c_avx2.c: as crc_fold512 with ymm registers: the first n - n % 16 bytes
 * (n >= 128). Needs CPU_VPCLMUL256. */
__m128i crc_fold256(const crc_fold_tab k, uint32_t crc, const uint8_t *p, size_t n);
__m128i crc_fold256_copy(const crc_fold_tab k, uint32_t crc, uint8_t *dst, const uint8_t *p, size_t n);
/* crc32c_sse42.c: as crc_fold512 with 128-bit registers: the first n - n % 16 bytes
 * (n >= 64). Needs CPU_PCLMUL. */
__m128i crc_fold128(const crc_fold_tab k, uint32_t crc, const uint8_t *p, size_t n);
__m128i crc_fold128_copy(const crc_fold_tab k, uint32_t crc, uint8_t *dst, const uint8_t *p, size_t n);
/* crc32c_sse42.c: CRC-32C with the crc32 instruction (needs CPU_SSE42), folding the
 * bulk of buffers of 1 KiB and more with crc_fold512 when fold is not NULL (CRC-32C's
 * constants; the caller passes them only with CPU_VPCLMUL). */
uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n, const crc_fold_tab fold);
#endif

#endif
