/* bytes.h — little-endian loads and stores. The container is little-endian on every
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

#endif
