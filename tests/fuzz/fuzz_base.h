/* fuzz_base.h — the base every delta seed of the fuzz corpus was coded against, and the
 * harness hands to the readers for any input whose header says it has a base: 48 KiB of
 * gaussian f32 values (read as bf16, f16 or f32 by the seeds), the same bytes on every
 * run, so that the seeds' recorded base checksum matches and mutated delta chunks reach
 * the predictors and the escape decoder. The seeds whose small tensors are packed into
 * groups coded against the base (format feature 4) need a base with tensors of the same
 * names: fuzz_gbase(), a safetensors file of those values, which the harness hands to a
 * delta file whose base frame names its size. */
#ifndef CKPZ_FUZZ_BASE_H
#define CKPZ_FUZZ_BASE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FUZZ_BASE_BYTES (48u << 10)

static const uint8_t *fuzz_base(void)
{
    static uint8_t b[FUZZ_BASE_BYTES];
    static int made;
    if (!made) {
        uint64_t s = 0x5eed5eed5eed5eedull;
        for (size_t i = 0; i < FUZZ_BASE_BYTES; i += 4) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            /* a sum of four uniforms: close enough to a gaussian for exponent planes */
            double g = 0;
            for (int k = 0; k < 4; k++) g += (double)((s >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
            float f = (float)(g * 0.05);
            memcpy(b + i, &f, 4);
        }
        made = 1;
    }
    return b;
}

#define FUZZ_GBASE_TENSORS 12
#define FUZZ_GBASE_ELEMS 64 /* f32 elements a tensor: 256 bytes, packed */

/* The safetensors base of tensors "g.00".."g.11" (FUZZ_GBASE_ELEMS f32 each, fuzz_base()'s
 * first bytes); its size in *n. */
static inline const uint8_t *fuzz_gbase(size_t *n)
{
    static uint8_t b[8 + 2048 + FUZZ_GBASE_TENSORS * FUZZ_GBASE_ELEMS * 4];
    static size_t len;
    if (!len) {
        char json[2048];
        size_t jl = 0, bytes = FUZZ_GBASE_ELEMS * 4;
        for (size_t i = 0; i < FUZZ_GBASE_TENSORS; i++)
            jl += (size_t)snprintf(json + jl, sizeof json - jl,
                                   "%s\"g.%02zu\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "{", i, FUZZ_GBASE_ELEMS, i * bytes, (i + 1) * bytes);
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "}");
        size_t hl = (jl + 7) & ~(size_t)7;
        for (int k = 0; k < 8; k++) b[k] = (uint8_t)((uint64_t)hl >> (8 * k));
        memset(b + 8, ' ', hl);
        memcpy(b + 8, json, jl);
        memcpy(b + 8 + hl, fuzz_base(), FUZZ_GBASE_TENSORS * bytes);
        len = 8 + hl + FUZZ_GBASE_TENSORS * bytes;
    }
    *n = len;
    return b;
}

#endif
