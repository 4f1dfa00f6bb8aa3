/* fuzz_rans0s.c — libFuzzer harness for order-0 rANS for small planes (codec 9,
 * lib/entropy/rans0.c with the compact tables of rans_ctab.c; scalar loops only), called
 * directly with arbitrary payloads and declared sizes; encode mode codes the payload with
 * codec 9 and decodes it back. Input layout and checks: fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(rans0s_decode, ENT_RANS0S, 1, data, size);
}
