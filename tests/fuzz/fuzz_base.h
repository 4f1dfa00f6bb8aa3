/* fuzz_base.h — the base every delta seed of the fuzz corpus was coded against, and the
 * harness hands to the readers for any input whose header says it has a base: 48 KiB of
 * gaussian f32 values (read as bf16, f16 or f32 by the seeds), the same bytes on every
 * run, so that the seeds' recorded base checksum matches and mutated delta chunks reach
 * the predictors and the escape decoder. */
#ifndef CKPZ_FUZZ_BASE_H
#define CKPZ_FUZZ_BASE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
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

#endif
