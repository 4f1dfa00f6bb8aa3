/* fuzz_safetensors.c — libFuzzer harness for the safetensors header parser
 * (lib/formats/safetensors.c, the safetensors row of the reader table), on the input as a whole file.
 *
 * It is called three ways: once with the whole input (len == total), and through
 * the library's driver from a one-byte prefix (fz_probe), with the size known
 * and unknown. Checks (fuzz_formats.h): a failure leaves a message and the whole-input
 * call never asks for more; the list tiles the file, tensors have their shape's length
 * and lie inside the file; the probe with the size known ends with the same list as
 * the whole-input call, and without the size at the same status.
 */
#include "fuzz_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fmt_list a, b, c;
    size_t need = 0;
    char why[256] = "";
    fmt_status s = FZ_DESCRIBE(CKPZ_INPUT_SAFETENSORS)(data, size, size, NULL, &a, &need, why, sizeof why);
    FZ_CHECK(s != FMT_NEED_MORE, "safetensors: asks for %zu bytes with the whole input (%zu) at hand", need, size);
    FZ_CHECK(s != FMT_ERROR || why[0], "safetensors: FMT_ERROR without a message");
    if (s == FMT_DONE) {
        FZ_CHECK(a.format == CKPZ_INPUT_SAFETENSORS && !a.state, "safetensors: format %d", (int)a.format);
        fz_check_segs(&a, 0, 0, size, 1, "safetensors");
        FZ_CHECK(!a.seg[a.n - 1].resume, "safetensors: resume segment");
    }
    fmt_status s2 = fz_probe(CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, data, size, 1, 1, 1, &b, "safetensors (probe)");
    FZ_CHECK(s2 == s, "safetensors: probe ends with %d, the whole input gives %d", (int)s2, (int)s);
    if (s2 == FMT_DONE) {
        FZ_CHECK(fz_same_list(&a, &b), "safetensors: the probe describes the file differently");
        fmt_list_free(&b);
    }
    fmt_status s3 = fz_probe(CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, data, size, 1, 0, 1, &c,
                             "safetensors (size unknown)");
    FZ_CHECK(s3 == s, "safetensors: probe without the size ends with %d, the whole input gives %d", (int)s3, (int)s);
    if (s3 == FMT_DONE) {
        fz_check_segs(&c, 0, 0, CKPZ_SIZE_UNKNOWN, 0, "safetensors (size unknown)");
        fmt_list_free(&c);
    }
    if (s == FMT_DONE) fmt_list_free(&a);
    return 0;
}
