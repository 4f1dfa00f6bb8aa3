/* fuzz_deflate.c — libFuzzer harness for the deflate back end's decoder
 * (lib/entropy/deflate_backend.c: one raw deflate stream that decodes to exactly n bytes
 * and ends at its last coded byte), called through its registry row with arbitrary
 * payloads and declared sizes. Input layout and checks: fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(ent_deflate_codec.decode, ENT_DEFLATE, 0, data, size);
}
