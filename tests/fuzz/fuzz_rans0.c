/* fuzz_rans0.c — libFuzzer harness for the order-0 rANS decoder (lib/entropy/rans0.c,
 * its scalar and AVX2 loops), called directly with arbitrary payloads and declared
 * sizes; encode mode codes the payload with rANS order 0 at every vector level
 * (scalar, AVX2, AVX-512) and decodes it back. Input layout and checks: fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(rans0_decode, ENT_RANS0, 1, data, size);
}
