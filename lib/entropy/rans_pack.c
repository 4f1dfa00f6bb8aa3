/* rans_pack.c — codec 11's final states, each in as many bits as its value needs.
 *
 * A final state x lies in [2^16, 2^32) with log2(x) spread evenly over that range (the
 * 3,040 order-0 states of the corpus's FP32 weights: 16 exponents of 170-223 each), so
 * four bytes a state spend ~4.6 bits more than needed: here a 4-bit e = floor(log2 x) - 16
 * per state (two a byte, state 0 in the low nibble), then the 16 + e bits of each x below
 * its leading one, least significant first, in state order, as one bit string filled from
 * bit 0 of each byte, the last byte padded with zero bits. 64 states: ~219 bytes, not 256.
 */
#include "ent_internal.h"

size_t rans_states_len(const uint32_t *st, unsigned nstates)
{
    size_t bits = 0;
    for (unsigned j = 0; j < nstates; j++) bits += 31u - (unsigned)__builtin_clz(st[j]);
    return (nstates + 1) / 2 + (bits + 7) / 8;
}

void rans_states_put(const uint32_t *st, unsigned nstates, uint8_t *out)
{
    size_t k = (nstates + 1) / 2;
    memset(out, 0, k);
    uint64_t acc = 0;
    unsigned nb = 0;
    for (unsigned j = 0; j < nstates; j++) {
        unsigned w = 31u - (unsigned)__builtin_clz(st[j]); /* bits below the leading one: 16..31 */
        out[j / 2] |= (uint8_t)((w - 16) << (4 * (j & 1)));
        acc |= (uint64_t)(st[j] & ((1u << w) - 1)) << nb;
        for (nb += w; nb >= 8; nb -= 8, acc >>= 8) out[k++] = (uint8_t)acc;
    }
    if (nb) out[k] = (uint8_t)acc;
}

int rans_states_get(const uint8_t **pp, const uint8_t *end, uint32_t *st, unsigned nstates)
{
    const uint8_t *p = *pp, *q = p + (nstates + 1) / 2;
    if (end - p < (ptrdiff_t)((nstates + 1) / 2)) return -1;
    uint64_t acc = 0;
    unsigned nb = 0;
    for (unsigned j = 0; j < nstates; j++) {
        unsigned w = 16u + ((p[j / 2] >> (4 * (j & 1))) & 15u);
        for (; nb < w; nb += 8) {
            if (q >= end) return -1;
            acc |= (uint64_t)*q++ << nb;
        }
        st[j] = (1u << w) | (uint32_t)(acc & ((1u << w) - 1));
        acc >>= w;
        nb -= w;
    }
    if ((nstates & 1) && p[nstates / 2] >> 4) return -1; /* the unused nibble */
    if (acc) return -1;                                  /* padding bits are zero: one byte string */
    *pp = q;
    return 0;
}
