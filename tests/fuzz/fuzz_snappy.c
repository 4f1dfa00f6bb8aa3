/* fuzz_snappy.c — libFuzzer harness for the snappy back end's decoder
 * (lib/entropy/snappy_backend.c: a raw snappy stream whose varint declares exactly n
 * bytes and that decodes to them), called through its registry row with arbitrary
 * payloads and declared sizes. Input layout and checks: fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(ent_snappy_codec.decode, ENT_SNAPPY, 0, data, size);
}
