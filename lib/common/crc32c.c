/* crc32c.c — the two CRC-32s ckpz computes, one implementation parametrised by the
 * reflected polynomial: CRC-32C (Castagnoli) for ckpz's own records and the zip CRC-32
 * (IEEE 802.3) for the members of torch.save archives. Each has a table-driven portable
 * path (slicing by 8) giving the same results as the hardware paths chosen at run time,
 * and combination of two CRCs by polynomial arithmetic mod P (multiplying crc(A) by
 * x^(8*len(B))).
 *
 * On long buffers the speed limit of the SSE4.2 crc32 instruction (8 bytes a cycle
 * with three streams) made checksums a tenth of compression time, so CPUs with
 * VPCLMULQDQ on zmm registers fold 64-byte blocks with carry-less multiplies instead
 * (four accumulators, 256 bytes a step), for either polynomial. The crc32 instruction
 * exists only for CRC-32C, where it reduces the final 128 bits and takes the tail; the
 * zip CRC does both with the tables, which alone manage 1.9 GB/s on Zen 5 (against 55
 * folding), so without VPCLMULQDQ it folds 16-byte blocks with PCLMULQDQ (14 GB/s).
 * The folding constants are powers of x mod P computed at first use with the same
 * arithmetic as the combination, not copied tables.
 */
#include "crc32c.h"

#include <string.h>

int crc32c_no_fold;
int crc32_zip_no_fold;

/* Distances an accumulator is folded forward by, in bits. */
enum { FOLD_D512, FOLD_D1024, FOLD_D1536, FOLD_D2048, FOLD_D128, FOLD_D256, FOLD_D384, FOLD_N };

/* One CRC: its polynomial and what is derived from it at first use. */
typedef struct {
    uint32_t poly;                /* reflected, x^32 implicit */
    int table_ready, x2n_ready;
    int fold_state;               /* 0: not computed, 1: being computed, 2: ready */
    uint32_t table[8][256];       /* table[t][b]: byte b followed by t zero bytes */
    uint32_t x2n[64];             /* x^(8*2^k) mod P */
    uint64_t fold_tab[FOLD_N][2]; /* {for H, for L} per distance */
} crc_poly;

static crc_poly castagnoli = {.poly = 0x82f63b78u};
static crc_poly ieee = {.poly = 0xedb88320u};

static void make_tables(crc_poly *P)
{
    for (unsigned i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (P->poly & (0u - (c & 1)));
        P->table[0][i] = c;
    }
    for (unsigned i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            P->table[t][i] = (P->table[t - 1][i] >> 8) ^ P->table[0][P->table[t - 1][i] & 0xff];
    __atomic_store_n(&P->table_ready, 1, __ATOMIC_RELEASE);
}

/* Raw state (no pre/post inversion) continuing from crc. */
static uint32_t crc_soft(crc_poly *P, uint32_t crc, const uint8_t *p, size_t n)
{
    if (!__atomic_load_n(&P->table_ready, __ATOMIC_ACQUIRE)) make_tables(P);
    const uint32_t(*table)[256] = P->table;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc; /* little-endian host assumed by the slicing tables */
        crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^
              table[4][(v >> 24) & 0xff] ^ table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
              table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

/* a*b mod P in the reflected representation. */
static uint32_t gf_mul(uint32_t poly, uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) r ^= b;
        a <<= 1;
        b = (b >> 1) ^ (poly & (0u - (b & 1)));
    }
    return r;
}

/* x^(8*n) mod P, by squaring: x2n[k] = x^(8*2^k). */
static uint32_t x_pow8n(crc_poly *P, uint64_t n)
{
    if (!__atomic_load_n(&P->x2n_ready, __ATOMIC_ACQUIRE)) {
        uint32_t p = 0x00800000u; /* x^8 reflected: bit (31-8) */
        for (int k = 0; k < 64; k++) {
            P->x2n[k] = p;
            p = gf_mul(P->poly, p, p);
        }
        __atomic_store_n(&P->x2n_ready, 1, __ATOMIC_RELEASE);
    }
    uint32_t r = 0x80000000u; /* 1 */
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1) r = gf_mul(P->poly, r, P->x2n[k]);
    return r;
}

#if defined(__x86_64__)
#include <nmmintrin.h>
#include <immintrin.h>

/* x^e mod P, by squaring (for the folding constants). */
static uint32_t x_pow(uint32_t poly, uint64_t e)
{
    uint32_t r = 0x80000000u, p = 0x40000000u; /* 1 and x, reflected */
    for (; e; e >>= 1, p = gf_mul(poly, p, p))
        if (e & 1) r = gf_mul(poly, r, p);
    return r;
}

/* Folding an accumulator forward by d bits: in the reflected bit order a 128-bit block
 * (bytes in stream order) is H*x^64 + L with H its first 8 bytes, and a carry-less
 * product of 64-bit values comes out multiplied by x. So H*x^(64+d) + L*x^d mod P is
 * clmul(H, x^(63+d) mod P) ^ clmul(L, x^(d-1) mod P), the 32-bit remainders placed in
 * the high half of each 64-bit operand (bit 63-e holds x^e). */
static uint64_t fold_k(uint32_t poly, uint64_t e)
{
    return (uint64_t)x_pow(poly, e) << 32;
}

/* 1 when P->fold_tab may be read. One thread computes it; others meanwhile take a
 * slower path instead of waiting or writing the table too. */
static int fold_ready(crc_poly *P)
{
    int st = __atomic_load_n(&P->fold_state, __ATOMIC_ACQUIRE), zero = 0;
    if (st == 2) return 1;
    if (st != 0 || !__atomic_compare_exchange_n(&P->fold_state, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return 0;
    static const unsigned dist[FOLD_N] = {512, 1024, 1536, 2048, 128, 256, 384};
    for (int i = 0; i < FOLD_N; i++) {
        P->fold_tab[i][0] = fold_k(P->poly, dist[i] + 63);
        P->fold_tab[i][1] = fold_k(P->poly, dist[i] - 1);
    }
    __atomic_store_n(&P->fold_state, 2, __ATOMIC_RELEASE);
    return 1;
}

enum { CPU_SSE42 = 1, CPU_PCLMUL = 2, CPU_FOLD512 = 4 };

static int cpu_features(void)
{
    static int v = -1; /* racing threads compute the same value */
    int r = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (r < 0) {
        r = (__builtin_cpu_supports("sse4.2") ? CPU_SSE42 : 0) |
            (__builtin_cpu_supports("pclmul") ? CPU_PCLMUL : 0);
        if (__builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512vl") && (r & CPU_PCLMUL))
            r |= CPU_FOLD512;
        __atomic_store_n(&v, r, __ATOMIC_RELAXED);
    }
    return r;
}

#define CLMUL_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))
#define PCLMUL_TARGET __attribute__((target("pclmul")))

static inline __attribute__((always_inline)) CLMUL_TARGET __m512i fold512(__m512i a, __m512i k,
                                                                         __m512i data)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                     _mm512_clmulepi64_epi128(a, k, 0x11), data, 0x96);
}

static inline __attribute__((always_inline)) PCLMUL_TARGET __m128i fold128(__m128i a, const uint64_t k2[2],
                                                                          __m128i data)
{
    __m128i k = _mm_loadu_si128((const __m128i *)(const void *)k2);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00),
                                       _mm_clmulepi64_si128(a, k, 0x11)), data);
}

/* The first n - n % 64 bytes (n >= 256, fold_ready(P)) folded, continuing from raw
 * state crc, to 128 bits R: the raw state after them is R*x^32 mod P. The caller
 * reduces R and takes the rest. */
CLMUL_TARGET static __m128i crc_fold512(const crc_poly *P, uint32_t crc, const uint8_t *p, size_t n)
{
#define K512(d) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)P->fold_tab[d]))
#define LD(o) _mm512_loadu_si512((const void *)(p + (o)))
    /* The running state joins the first 32 bits of the message: c*x^len + M*x^32 =
     * (c*x^(len-32) + M)*x^32. */
    __m512i a0 = _mm512_xor_si512(LD(0), _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    __m512i a1 = LD(64), a2 = LD(128), a3 = LD(192);
    p += 256;
    n -= 256;
    const __m512i k4 = K512(FOLD_D2048);
    for (; n >= 256; p += 256, n -= 256) {
        a0 = fold512(a0, k4, LD(0));
        a1 = fold512(a1, k4, LD(64));
        a2 = fold512(a2, k4, LD(128));
        a3 = fold512(a3, k4, LD(192));
    }
    const __m512i k1 = K512(FOLD_D512);
    a3 = fold512(a0, K512(FOLD_D1536), fold512(a1, K512(FOLD_D1024), fold512(a2, k1, a3)));
    for (; n >= 64; p += 64, n -= 64)
        a3 = fold512(a3, k1, LD(0));
#undef LD
#undef K512
    __m128i r = fold128(_mm512_extracti32x4_epi32(a3, 0), P->fold_tab[FOLD_D384], _mm512_extracti32x4_epi32(a3, 3));
    r = fold128(_mm512_extracti32x4_epi32(a3, 1), P->fold_tab[FOLD_D256], r);
    return fold128(_mm512_extracti32x4_epi32(a3, 2), P->fold_tab[FOLD_D128], r);
}

/* As crc_fold512 with 128-bit registers, for CPUs without VPCLMULQDQ: the first
 * n - n % 16 bytes (n >= 64) folded, four accumulators of 16 bytes. */
PCLMUL_TARGET static __m128i crc_fold128(const crc_poly *P, uint32_t crc, const uint8_t *p, size_t n)
{
#define LD(o) _mm_loadu_si128((const __m128i *)(const void *)(p + (o)))
    __m128i a0 = _mm_xor_si128(LD(0), _mm_cvtsi32_si128((int)crc)), a1 = LD(16), a2 = LD(32), a3 = LD(48);
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        a0 = fold128(a0, P->fold_tab[FOLD_D512], LD(0));
        a1 = fold128(a1, P->fold_tab[FOLD_D512], LD(16));
        a2 = fold128(a2, P->fold_tab[FOLD_D512], LD(32));
        a3 = fold128(a3, P->fold_tab[FOLD_D512], LD(48));
    }
    __m128i r = fold128(a0, P->fold_tab[FOLD_D384],
                        fold128(a1, P->fold_tab[FOLD_D256], fold128(a2, P->fold_tab[FOLD_D128], a3)));
    for (; n >= 16; p += 16, n -= 16)
        r = fold128(r, P->fold_tab[FOLD_D128], LD(0));
#undef LD
    return r;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    if (n >= 1024 && (cpu_features() & CPU_FOLD512) && !crc32c_no_fold && fold_ready(&castagnoli)) {
        size_t done = n - n % 64;
        __m128i r = crc_fold512(&castagnoli, crc, p, n);
        /* crc32 from state 0 over the last 128 bits multiplies them by x^32 mod P. */
        uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
        crc = (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(r, 1));
        p += done;
        n -= done;
    }
    uint64_t c = crc;
    /* Three independent streams of BLK bytes hide the instruction's 3-cycle latency;
     * they are joined by multiplying with x^(8*BLK), computed once. */
    enum { BLK = 8192 };
    static uint32_t shift;
    if (n >= 3 * BLK && !__atomic_load_n(&shift, __ATOMIC_ACQUIRE))
        __atomic_store_n(&shift, x_pow8n(&castagnoli, BLK), __ATOMIC_RELEASE);
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
        c = gf_mul(castagnoli.poly, shift, gf_mul(castagnoli.poly, shift, (uint32_t)c) ^ (uint32_t)c1) ^
            (uint32_t)c2;
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

/* The raw state after the 128 bits R left by folding, R*x^32 mod P: the tables from
 * state 0 over R compute exactly that, as the crc32 instruction does for CRC-32C. */
static uint32_t reduce_soft(crc_poly *P, __m128i r)
{
    uint8_t b[16];
    _mm_storeu_si128((__m128i *)(void *)b, r);
    return crc_soft(P, 0, b, 16);
}

static uint32_t crc_zip_raw(uint32_t crc, const uint8_t *p, size_t n)
{
    size_t done = 0;
    if (n >= 256 && crc32_zip_no_fold < 1 && (cpu_features() & CPU_FOLD512) && fold_ready(&ieee)) {
        done = n - n % 64;
        crc = reduce_soft(&ieee, crc_fold512(&ieee, crc, p, n));
    } else if (n >= 64 && crc32_zip_no_fold < 2 && (cpu_features() & CPU_PCLMUL) && fold_ready(&ieee)) {
        done = n - n % 16;
        crc = reduce_soft(&ieee, crc_fold128(&ieee, crc, p, n));
    }
    return crc_soft(&ieee, crc, p + done, n - done);
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
    crc = ~crc;
#if defined(__x86_64__)
    crc = (cpu_features() & CPU_SSE42) ? crc_hw(crc, buf, n) : crc_soft(&castagnoli, crc, buf, n);
#else
    crc = crc_soft(&castagnoli, crc, buf, n);
#endif
    return ~crc;
}

uint32_t crc32_zip(uint32_t crc, const void *buf, size_t n)
{
#if defined(__x86_64__)
    return ~crc_zip_raw(~crc, buf, n);
#else
    return ~crc_soft(&ieee, ~crc, buf, n);
#endif
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return gf_mul(castagnoli.poly, x_pow8n(&castagnoli, len_b), crc_a) ^ crc_b;
}

uint32_t crc32_zip_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return gf_mul(ieee.poly, x_pow8n(&ieee, len_b), crc_a) ^ crc_b;
}
