/* repeats.c — see repeats.h. One 16-byte block every 512 bytes is looked at: a block of
 * zeros (padding, rows no gradient reached) is counted as such, any other is hashed into a
 * table of 2^12 tags, and one whose tag is already there counts as a repeat. Blocks on a
 * fixed grid find repeats whose distance is a multiple of 512 bytes, which rows of 128
 * FP32 (256 BF16) values or any multiple of that are. A 1 MiB chunk costs 2,048 loads,
 * hashes and probes: ~2.6 us on one loaded core, 0.6% of the instructions of `ckpz -T1 -3`
 * on BF16 weights (a grid of 256 bytes cost 1.2% and found the same chunks of the corpus
 * and of bench/repeats). Random data almost never meets a 128-bit repeat, so ordinary
 * weights pay the look and nothing else; a tag collision (1 in 2^32 a probe) can only
 * make a chunk try LZ for nothing. */
#include "repeats.h"

#include <string.h>

#define GRID 512u
#define TAB_BITS 12
#define MIN_BYTES (64u << 10) /* smaller chunks: too few samples, and small groups stay as they were */
#define GROUP_SAMPLES 256u    /* a group's blocks looked at: a 64 KiB group every 256 bytes */

/* Zero bytes of x. The nonzero bytes' flags, one bit a byte, are added up by a multiply
 * into the top byte (at most 8: no carry out), not by __builtin_popcountll, which without
 * a popcnt target is a call into libgcc on every block looked at. */
static unsigned zero_bytes(uint64_t x)
{
    const uint64_t lo7 = 0x7F7F7F7F7F7F7F7Full;
    uint64_t nz = (((x & lo7) + lo7) | x) & ~lo7; /* the top bit of each nonzero byte */
    return 8u - (unsigned)(((nz >> 7) * 0x0101010101010101ull) >> 56);
}

/* The shares of one 16-byte block every `grid` bytes (a multiple of 16); zbytes, when
 * not NULL, the share of zero bytes in them. */
static void sample(const uint8_t *raw, size_t n, size_t grid, unsigned *repeats, unsigned *zeros, unsigned *zbytes)
{
    uint32_t tab[1u << TAB_BITS];
    memset(tab, 0, sizeof tab);
    size_t seen = 0, hits = 0, zero = 0, zb = 0;
    for (size_t at = 0; at + 16 <= n; at += grid, seen++) {
        uint64_t a, b;
        memcpy(&a, raw + at, 8);
        memcpy(&b, raw + at + 8, 8);
        if (!(a | b)) {
            zero++;
            continue;
        }
        if (zbytes) zb += zero_bytes(a) + zero_bytes(b);
        uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xC2B2AE3D27D4EB4Full;
        h ^= h >> 31;
        uint32_t tag = (uint32_t)(h >> 32) | 1u, *slot = &tab[h & ((1u << TAB_BITS) - 1)];
        if (*slot == tag) hits++;
        else *slot = tag;
    }
    *repeats = seen ? (unsigned)(hits * 256 / seen) : 0;
    *zeros = seen ? (unsigned)(zero * 256 / seen) : 0;
    if (zbytes) *zbytes = seen ? (unsigned)((zb + 16 * zero) * 16 / seen) : 0;
}

void chunk_repeats(const uint8_t *raw, size_t n, unsigned *repeats, unsigned *zeros, unsigned *zbytes)
{
    *repeats = *zeros = 0;
    if (zbytes) *zbytes = 0;
    if (n >= MIN_BYTES) sample(raw, n, GRID, repeats, zeros, zbytes);
}

unsigned group_repeats(const uint8_t *raw, size_t n)
{
    unsigned rep, zero;
    size_t grid = n / GROUP_SAMPLES & ~(size_t)15;
    sample(raw, n, grid ? grid : 16, &rep, &zero, NULL);
    return rep;
}
