/* crc32c.c — CRC-32C with a hardware path (SSE4.2 crc32 instruction, chosen at run
 * time) and a table-driven portable path giving identical results, plus combination of
 * two CRCs by polynomial arithmetic mod P (multiplying crc(A) by x^(8*len(B))). */
#include "crc32c.h"

#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static int table_ready;

static void make_tables(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        table[0][i] = c;
    }
    for (unsigned i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t n)
{
    if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) make_tables();
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

static uint32_t gf_mul(uint32_t a, uint32_t b);
static uint32_t x_pow8n(uint64_t n);

#if defined(__x86_64__)
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    /* Three independent streams of BLK bytes hide the instruction's 3-cycle latency;
     * they are joined by multiplying with x^(8*BLK), computed once. */
    enum { BLK = 8192 };
    static uint32_t shift;
    if (n >= 3 * BLK && !__atomic_load_n(&shift, __ATOMIC_ACQUIRE))
        __atomic_store_n(&shift, x_pow8n(BLK), __ATOMIC_RELEASE);
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
        c = gf_mul(shift, gf_mul(shift, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
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

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
    crc = ~crc;
#if defined(__x86_64__)
    static int hw = -1;
    if (hw < 0) hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    crc = hw ? crc_hw(crc, buf, n) : crc_soft(crc, buf, n);
#else
    crc = crc_soft(crc, buf, n);
#endif
    return ~crc;
}

/* a*b mod P in the reflected representation. */
static uint32_t gf_mul(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) r ^= b;
        a <<= 1;
        b = (b >> 1) ^ (POLY & (0u - (b & 1)));
    }
    return r;
}

/* x^(8*n) mod P, by squaring: x2n[k] = x^(8*2^k). */
static uint32_t x_pow8n(uint64_t n)
{
    static uint32_t x2n[64];
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        uint32_t p = 0x00800000u; /* x^8 reflected: bit (31-8) */
        for (int k = 0; k < 64; k++) {
            x2n[k] = p;
            p = gf_mul(p, p);
        }
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    uint32_t r = 0x80000000u; /* 1 */
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1) r = gf_mul(r, x2n[k]);
    return r;
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return gf_mul(x_pow8n(len_b), crc_a) ^ crc_b;
}
