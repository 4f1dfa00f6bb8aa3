/* fuzz_gguf.c — libFuzzer harness for the GGUF reader (lib/formats/gguf.c, the gguf row
 * of the reader table), on the input as a whole file.
 *
 * Like fuzz_safetensors: once with the whole input (len == total), and through the
 * library's driver from a one-byte prefix (fz_probe), with the size known and unknown.
 * Checks (fuzz_formats.h): FMT_ERROR only without the magic or with an unknown version,
 * always with a message, and the whole-input call never asks for more; the list tiles
 * the file, tensors have their shape's length and lie inside the file, and nothing
 * before the end of the tensor infos is a tensor; the probe with the size known ends
 * with the same list as the whole-input call, and without the size at the same status.
 * Seeds: tests/data/make_gguf.py --seeds (a valid file and its damaged variants).
 */
#include "fuzz_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fmt_list a, b, c;
    size_t need = 0;
    char why[256] = "";
    fmt_status s = FZ_DESCRIBE(CKPZ_INPUT_GGUF)(data, size, size, NULL, &a, &need, why, sizeof why);
    FZ_CHECK(s != FMT_NEED_MORE, "gguf: asks for %zu bytes with the whole input (%zu) at hand", need, size);
    FZ_CHECK(s == FMT_DONE || s == FMT_ERROR || s == FMT_NOMEM, "gguf: status %d", (int)s);
    FZ_CHECK(s != FMT_ERROR || why[0], "gguf: FMT_ERROR without a message");
    if (s == FMT_ERROR) /* only a file without the magic and a known version is not GGUF */
        FZ_CHECK(size < 8 || memcmp(data, "GGUF", 4) || (data[4] != 2 && data[4] != 3) || data[5] || data[6] || data[7],
                 "gguf: refused a file with the magic and version %u", data[4]);
    if (s == FMT_DONE) {
        FZ_CHECK(a.format == CKPZ_INPUT_GGUF && !a.state, "gguf: format %d", (int)a.format);
        fz_check_segs(&a, 0, 0, size, 1, "gguf");
        FZ_CHECK(!a.seg[a.n - 1].resume, "gguf: resume segment");
        /* the header (magic, version, counts: 24 bytes at least) is never a tensor */
        for (size_t i = 0; i < a.n; i++)
            FZ_CHECK(a.seg[i].dtype == CKPZ_DTYPE_NONE || a.seg[i].offset >= 24, "gguf: tensor %zu in the header", i);
    }
    fmt_status s2 = fz_probe(CKPZ_INPUT_GGUF, CKPZ_DTYPE_NONE, data, size, 1, 1, 1, &b, "gguf (probe)");
    FZ_CHECK(s2 == s, "gguf: probe ends with %d, the whole input gives %d", (int)s2, (int)s);
    if (s2 == FMT_DONE) {
        FZ_CHECK(fz_same_list(&a, &b), "gguf: the probe describes the file differently");
        fmt_list_free(&b);
    }
    fmt_status s3 = fz_probe(CKPZ_INPUT_GGUF, CKPZ_DTYPE_NONE, data, size, 1, 0, 1, &c, "gguf (size unknown)");
    FZ_CHECK(s3 == s, "gguf: probe without the size ends with %d, the whole input gives %d", (int)s3, (int)s);
    if (s3 == FMT_DONE) {
        fz_check_segs(&c, 0, 0, CKPZ_SIZE_UNKNOWN, 0, "gguf (size unknown)");
        fmt_list_free(&c);
    }
    if (s == FMT_DONE) fmt_list_free(&a);
    return 0;
}
