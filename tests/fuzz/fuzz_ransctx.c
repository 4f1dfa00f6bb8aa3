/* fuzz_ransctx.c — libFuzzer harness for rANS with a small context (codec 8,
 * lib/entropy/rans_ctx.c and its AVX2 and AVX-512 loops), called directly with arbitrary
 * payloads and declared sizes; encode mode codes the payload with codec 8 at every
 * vector level (scalar, AVX2, AVX-512: the same bytes) and decodes it back. Input
 * layout and checks: fuzz_entropy.h. */
#include "entropy/rans_ctx.h"
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_entropy_run(rc_decode, ENT_RANSCTX, 1, data, size);
}
