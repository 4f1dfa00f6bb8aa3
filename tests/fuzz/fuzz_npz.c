/* fuzz_npz.c — libFuzzer harness for the NumPy .npz reader (lib/formats/npz.c over the
 * zip walker, with npy_parse_header for each member), on the input as a whole file.
 *
 * Byte 0 picks the window sizes (bits 0-3: first prefix 1 << b; bits 4-7: the resume
 * window 1 << b); the rest is the file. the reader runs with the whole input and then,
 * through the library's driver (fz_probe), from the chosen prefix; each list is
 * resumed to its end as lib/codec/chunker.c does (fz_resume_all). Checks (fuzz_formats.h): a
 * failure leaves a message, the need protocol holds, fmt_resume never fails, every
 * stretch and the final list tile the file, tensors have their shape's length.
 */
#include "fuzz_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t want = (size_t)1 << (data[0] & 15), window = (size_t)1 << (data[0] >> 4);
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    fmt_list a, b;
    size_t need = 0;
    char why[256] = "";
    fmt_status s = FZ_DESCRIBE(CKPZ_INPUT_NPZ)(in, n, n, NULL, &a, &need, why, sizeof why);
    FZ_CHECK(s != FMT_NEED_MORE, "npz: asks for %zu bytes with the whole input (%zu) at hand", need, n);
    FZ_CHECK(s != FMT_ERROR || why[0], "npz: FMT_ERROR without a message");
    if (s == FMT_DONE) {
        FZ_CHECK(a.format == CKPZ_INPUT_NPZ, "npz: format %d", (int)a.format);
        fz_check_segs(&a, 0, 0, n, 0, "npz");
        fz_resume_all(&a, in, n, 64u << 10, 0, "npz");
        fz_check_segs(&a, 0, 0, n, 0, "npz (resumed)");
        fmt_list_free(&a);
    }
    fmt_status s2 = fz_probe(CKPZ_INPUT_NPZ, CKPZ_DTYPE_NONE, in, n, want, data[0] & 8, 1, &b, "npz (probe)");
    FZ_CHECK(s2 == s, "npz: probe ends with %d, the whole input gives %d", (int)s2, (int)s);
    if (s2 == FMT_DONE) {
        fz_check_segs(&b, 0, 0, n, 0, "npz (probe)");
        fz_resume_all(&b, in, n, window, 0, "npz (probe)");
        fz_check_segs(&b, 0, 0, n, 0, "npz (probe, resumed)");
        fmt_list_free(&b);
    }
    return 0;
}
