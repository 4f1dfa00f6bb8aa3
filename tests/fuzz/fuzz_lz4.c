/* fuzz_lz4.c — libFuzzer harness for the LZ4 back end's decoder
 * (lib/entropy/lz4_backend.c: one block that decodes to exactly n bytes from exactly its
 * coded bytes), called through its registry row with arbitrary payloads and declared
 * sizes. Input layout and checks: fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(ent_lz4_codec.decode, ENT_LZ4, 0, data, size);
}
