/* fuzz_zstd.c — libFuzzer harness for the zstd back end's decoder
 * (lib/entropy/zstd_backend.c: exactly one frame that declares exactly n bytes), called
 * through its registry row with arbitrary payloads and declared sizes. Input layout and
 * checks: fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(ent_zstd_codec.decode, ENT_ZSTD, 0, data, size);
}
