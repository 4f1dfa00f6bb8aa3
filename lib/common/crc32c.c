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
 * folding), so without AVX-512 it folds 32-byte blocks with VPCLMULQDQ on ymm registers
 * where the CPU has it, else 16-byte blocks with PCLMULQDQ (14 GB/s). The zip CRC of a
 * torch.save member is taken while its bytes are copied into a chunk (crc32_zip_copy):
 * the folding loops store each block they load, so the copy and the CRC are one pass
 * over the data instead of two (on a Zen 3 core, 364 MB in 4 MiB chunks: copy, then
 * CRC 0.058 s; fused with PCLMULQDQ 0.035 s; the copy alone 0.022 s).
 * The folding constants are powers of x mod P computed at first use with the same
 * arithmetic as the combination, not copied tables. The x86-64 kernels sit in files of
 * their own (crc32c_sse42.c, crc32c_avx2.c, crc32c_avx512.c: crc32c_impl.h), chosen here
 * through cpu.h.
 */
#include "crc32c.h"

#include "ckpz.h"

#include <string.h>

#include "cpu.h"
#include "crc32c_impl.h"

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
        for (int t = 1; t < 8; t++) P->table[t][i] = (P->table[t - 1][i] >> 8) ^ P->table[0][P->table[t - 1][i] & 0xff];
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
        crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^ table[4][(v >> 24) & 0xff] ^
              table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^ table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

/* x^(8*n) mod P, by squaring: x2n[k] = x^(8*2^k). */
static uint32_t x_pow8n(crc_poly *P, uint64_t n)
{
    if (!__atomic_load_n(&P->x2n_ready, __ATOMIC_ACQUIRE)) {
        uint32_t p = 0x00800000u; /* x^8 reflected: bit (31-8) */
        for (int k = 0; k < 64; k++) {
            P->x2n[k] = p;
            p = crc_gf_mul(P->poly, p, p);
        }
        __atomic_store_n(&P->x2n_ready, 1, __ATOMIC_RELEASE);
    }
    uint32_t r = 0x80000000u; /* 1 */
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1) r = crc_gf_mul(P->poly, r, P->x2n[k]);
    return r;
}

#ifdef CRC_HAVE_X86
/* x^e mod P, by squaring (for the folding constants). */
static uint32_t x_pow(uint32_t poly, uint64_t e)
{
    uint32_t r = 0x80000000u, p = 0x40000000u; /* 1 and x, reflected */
    for (; e; e >>= 1, p = crc_gf_mul(poly, p, p))
        if (e & 1) r = crc_gf_mul(poly, r, p);
    return r;
}

/* Folding an accumulator forward by d bits: in the reflected bit order a 128-bit block
 * (bytes in stream order) is H*x^64 + L with H its first 8 bytes, and a carry-less
 * product of 64-bit values comes out multiplied by x. So H*x^(64+d) + L*x^d mod P is
 * clmul(H, x^(63+d) mod P) ^ clmul(L, x^(d-1) mod P), the 32-bit remainders placed in
 * the high half of each 64-bit operand (bit 63-e holds x^e). */
static uint64_t fold_k(uint32_t poly, uint64_t e) { return (uint64_t)x_pow(poly, e) << 32; }

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

/* The raw state after the 128 bits R left by folding, R*x^32 mod P: the tables from
 * state 0 over R compute exactly that, as the crc32 instruction does for CRC-32C. */
static uint32_t reduce_soft(crc_poly *P, __m128i r)
{
    uint8_t b[16];
    _mm_storeu_si128((__m128i *)(void *)b, r);
    return crc_soft(P, 0, b, 16);
}

/* The raw state of P's CRC over p[0..n) continuing from crc, by folding where the CPU
 * can; with dst, the bytes are also copied there, in the same pass as the folding. */
static uint32_t crc_fold_raw(crc_poly *P, uint32_t crc, uint8_t *dst, const uint8_t *p, size_t n)
{
    size_t done = 0;
    if (n >= 256 && (cpu_features() & CPU_VPCLMUL) && fold_ready(P)) {
        done = n - n % 64;
        crc = reduce_soft(P, dst ? crc_fold512_copy(P->fold_tab, crc, dst, p, n) : crc_fold512(P->fold_tab, crc, p, n));
    } else if (n >= 128 && (cpu_features() & CPU_VPCLMUL256) && fold_ready(P)) {
        done = n - n % 16;
        crc = reduce_soft(P, dst ? crc_fold256_copy(P->fold_tab, crc, dst, p, n) : crc_fold256(P->fold_tab, crc, p, n));
    } else if (n >= 64 && (cpu_features() & CPU_PCLMUL) && fold_ready(P)) {
        done = n - n % 16;
        crc = reduce_soft(P, dst ? crc_fold128_copy(P->fold_tab, crc, dst, p, n) : crc_fold128(P->fold_tab, crc, p, n));
    }
    if (dst) memcpy(dst + done, p + done, n - done);
    return crc_soft(P, crc, p + done, n - done);
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t n)
{
    crc = ~crc;
#ifdef CRC_HAVE_X86
    unsigned f = cpu_features();
    if (f & CPU_SSE42) {
        const uint64_t(*fold)[2] = n >= 1024 && (f & CPU_VPCLMUL) && fold_ready(&castagnoli) ? castagnoli.fold_tab
                                                                                             : NULL;
        crc = crc32c_sse42(crc, buf, n, fold);
    } else {
        crc = crc_soft(&castagnoli, crc, buf, n);
    }
#else
    crc = crc_soft(&castagnoli, crc, buf, n);
#endif
    return ~crc;
}

uint32_t crc32_zip(uint32_t crc, const void *buf, size_t n)
{
#ifdef CRC_HAVE_X86
    return ~crc_fold_raw(&ieee, ~crc, NULL, buf, n);
#else
    return ~crc_soft(&ieee, ~crc, buf, n);
#endif
}

#ifndef CRC_HAVE_X86
/* In steps small enough that the CRC reads what the copy just wrote from cache. */
static uint32_t copy_soft(crc_poly *P, uint32_t crc, uint8_t *d, const uint8_t *s, size_t n)
{
    enum { STEP = 64u << 10 };
    while (n) {
        size_t k = n < STEP ? n : STEP;
        memcpy(d, s, k);
        crc = crc_soft(P, crc, d, k);
        d += k;
        s += k;
        n -= k;
    }
    return crc;
}
#endif

uint32_t crc32_zip_copy(uint32_t crc, void *dst, const void *src, size_t n)
{
    if (!n) return crc;
#ifdef CRC_HAVE_X86
    return ~crc_fold_raw(&ieee, ~crc, dst, src, n);
#else
    return ~copy_soft(&ieee, ~crc, dst, src, n);
#endif
}

uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n)
{
    if (!n) return crc;
#ifdef CRC_HAVE_X86
    /* folding stores each block it loads; beside the crc32 instruction the copy is a
     * pass of its own */
    if (cpu_features() & (CPU_VPCLMUL | CPU_VPCLMUL256 | CPU_PCLMUL))
        return ~crc_fold_raw(&castagnoli, ~crc, dst, src, n);
    memcpy(dst, src, n);
    return crc32c(crc, dst, n);
#else
    return ~copy_soft(&castagnoli, ~crc, dst, src, n);
#endif
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return crc_gf_mul(castagnoli.poly, x_pow8n(&castagnoli, len_b), crc_a) ^ crc_b;
}

uint32_t crc32_zip_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return crc_gf_mul(ieee.poly, x_pow8n(&ieee, len_b), crc_a) ^ crc_b;
}

/* The public names (ckpz.h), for front ends that check what they restore themselves. */
uint32_t ckpz_crc32c(uint32_t crc, const void *buf, size_t n) { return crc32c(crc, buf, n); }
uint32_t ckpz_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return crc32c_combine(crc_a, crc_b, len_b);
}
