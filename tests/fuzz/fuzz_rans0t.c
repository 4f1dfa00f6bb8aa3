/* fuzz_rans0t.c — libFuzzer harness for codec 11 (lib/entropy/rans0.c: codec 2's loops
 * with its tails decoded from the states, and the tables and packed states of
 * lib/entropy/rans_ctab.c), called directly with arbitrary payloads and declared sizes;
 * encode mode codes the payload with codec 11 at every vector level and decodes it back.
 * Input layout and checks: fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(rans0t_decode, ENT_RANS0T, 1, data, size);
}
