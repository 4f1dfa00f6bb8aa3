/* bytes.h — little-endian loads and stores, and short copies and compares. The container is little-endian on every
 * host; going through these (memcpy-based, so alignment never matters) keeps the
 * parsing code free of casts and of undefined behaviour on odd offsets. */
#ifndef CKPZ_BYTES_H
#define CKPZ_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) | ((uint64_t)ld32(p + 4) << 32); }
static inline void st16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void st32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void st64(uint8_t *p, uint64_t v)
{
    st32(p, (uint32_t)v);
    st32(p + 4, (uint32_t)(v >> 32));
}

static inline void stf64(uint8_t *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    st64(p, u);
}
static inline double ldf64(const uint8_t *p)
{
    uint64_t u = ld64(p);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* The set bits of n bytes at p (a bitmap's ones), eight bytes a step with the word's
 * bit count added up by halves, quarters and nibbles: __builtin_popcount without a popcnt
 * target is a call into libgcc for each byte or word. */
static inline size_t bits_set(const uint8_t *p, size_t n)
{
    size_t c = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        x -= (x >> 1) & 0x5555555555555555ull;
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
        c += (size_t)((x * 0x0101010101010101ull) >> 56);
    }
    for (; i < n; i++)
        for (unsigned v = p[i]; v; v &= v - 1) c++;
    return c;
}

/* Copies and compares of a few to some tens of bytes (an entry's name part or shape) in
 * 8-byte words, inline: a call to memcpy or memcmp for each was ~10% of decompressing
 * 4,800 small tensors (container/entlist.c: their index read and its entry frames
 * compared with it). The regions must not overlap. */
static inline void copy_short(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    uint64_t w;
    uint32_t h;
    uint16_t t;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) memcpy(&w, s + i, 8), memcpy(d + i, &w, 8);
        memcpy(&w, s + n - 8, 8), memcpy(d + n - 8, &w, 8); /* the last word, overlapping */
    } else if (n >= 4) {
        memcpy(&h, s, 4), memcpy(d, &h, 4);
        memcpy(&h, s + n - 4, 4), memcpy(d + n - 4, &h, 4);
    } else if (n >= 2) {
        memcpy(&t, s, 2), memcpy(d, &t, 2);
        memcpy(&t, s + n - 2, 2), memcpy(d + n - 2, &t, 2);
    } else if (n) {
        d[0] = s[0];
    }
}

static inline int same_short(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    uint64_t u, v;
    uint32_t h, k;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&u, x + i, 8), memcpy(&v, y + i, 8);
            if (u != v) return 0;
        }
        memcpy(&u, x + n - 8, 8), memcpy(&v, y + n - 8, 8);
        return u == v;
    }
    if (n >= 4) {
        memcpy(&h, x, 4), memcpy(&k, y, 4);
        if (h != k) return 0;
        memcpy(&h, x + n - 4, 4), memcpy(&k, y + n - 4, 4);
        return h == k;
    }
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return 0;
    return 1;
}

#endif
