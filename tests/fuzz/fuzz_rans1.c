/* fuzz_rans1.c — libFuzzer harness for the order-1 rANS decoder (lib/entropy/rans1.c),
 * called directly with arbitrary payloads and declared sizes. Input layout and checks:
 * fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(rans1_decode, ENT_RANS1, 0, data, size);
}
