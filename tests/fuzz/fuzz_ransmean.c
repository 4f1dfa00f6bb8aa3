/* fuzz_ransmean.c — libFuzzer harness for rANS with a round's mean as context (codec 10,
 * lib/entropy/rans_ctxm.c and its AVX2 and AVX-512 loops), called directly with arbitrary
 * payloads and declared sizes; encode mode codes the payload with codec 10 at every
 * vector level (scalar, AVX2, AVX-512: the same bytes) and decodes it back. Input
 * layout and checks: fuzz_entropy.h. */
#include "entropy/rans_ctxm.h"
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(rm_decode, ENT_RANSCTXM, 1, data, size);
}
