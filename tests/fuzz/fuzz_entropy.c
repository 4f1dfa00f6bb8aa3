/* fuzz_entropy.c — libFuzzer harness for ent_decode, the dispatcher of
 * lib/entropy/select.c: stored and constant planes (checked against their exact
 * definition), the three coders, and unknown codec ids (byte 0: the codec id, any
 * value), with arbitrary payloads and declared sizes. Input layout and checks:
 * fuzz_entropy.h. */
#include "fuzz_entropy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fz_entropy_run(NULL, -1, 0, data, size); }
