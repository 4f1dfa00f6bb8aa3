/* fuzz_npy.c — libFuzzer harness for the .npy header parser (lib/formats/npy.c:
 * npy_parse_header, shared with the .npz reader, and the .npy row of the reader table).
 *
 * npy_parse_header runs on the whole input with the size known and unknown; the reader
 * with the whole input and through compress.c's probe protocol (fz_probe). Checks: a
 * failure leaves a message; the whole-input calls never ask for more, and an
 * incomplete header asks for more than it had; the header info is consistent (data
 * inside the file, the tensor's length its shape's); the reader's list tiles the file
 * with the tensor where the info says, and the probe ends with the same list.
 */
#include "fuzz_formats.h"

static void check_info(const npy_info *in, uint64_t total, const char *who)
{
    FZ_CHECK(total == CKPZ_SIZE_UNKNOWN || in->data_off <= total, "%s: data at %llu past the end (%llu)", who,
             (unsigned long long)in->data_off, (unsigned long long)total);
    if (in->dtype == CKPZ_DTYPE_NONE) return;
    FZ_CHECK((unsigned)in->dtype < CKPZ_DTYPE_COUNT_ && in->ndim <= NPY_MAX_NDIM, "%s: dtype %d, ndim %u", who,
             (int)in->dtype, in->ndim);
    uint64_t n = ckpz_dtype_size(in->dtype);
    int zero = 0;
    for (uint32_t i = 0; i < in->ndim; i++) zero |= !in->shape[i];
    for (uint32_t i = 0; i < in->ndim && !zero; i++) {
        FZ_CHECK(n <= UINT64_MAX / in->shape[i], "%s: shape overflows", who);
        n *= in->shape[i];
    }
    if (zero) n = 0; /* a 0 dimension makes it empty whatever the others are */
    FZ_CHECK(n == in->nbytes, "%s: %llu bytes for the shape, nbytes %llu", who, (unsigned long long)n,
             (unsigned long long)in->nbytes);
    FZ_CHECK(total == CKPZ_SIZE_UNKNOWN || in->nbytes <= total - in->data_off, "%s: data runs past the file", who);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int known = 0; known < 2; known++) {
        uint64_t total = known ? size : CKPZ_SIZE_UNKNOWN;
        npy_info info;
        size_t need = 0;
        char why[256] = "";
        fmt_status s = npy_parse_header(data, size, total, &info, &need, why, sizeof why);
        FZ_CHECK(s != FMT_ERROR || why[0], "npy_parse_header: FMT_ERROR without a message");
        if (s == FMT_NEED_MORE)
            FZ_CHECK(!known && need > size && need <= FMT_PROBE_MAX,
                     "npy_parse_header: asks for %zu bytes with %zu (size %s)", need, size,
                     known ? "known" : "unknown");
        if (s == FMT_DONE) check_info(&info, total, "npy_parse_header");
    }
    fmt_list a, b;
    size_t need = 0;
    char why[256] = "";
    fmt_status s = FZ_DESCRIBE(CKPZ_INPUT_NPY)(data, size, size, NULL, &a, &need, why, sizeof why);
    FZ_CHECK(s != FMT_NEED_MORE, "npy: asks for %zu bytes with the whole input (%zu) at hand", need, size);
    FZ_CHECK(s != FMT_ERROR || why[0], "npy: FMT_ERROR without a message");
    if (s == FMT_DONE) {
        FZ_CHECK(a.format == CKPZ_INPUT_NPY, "npy: format %d", (int)a.format);
        fz_check_segs(&a, 0, 0, size, 1, "npy");
        FZ_CHECK(a.n <= 3 && !a.seg[a.n - 1].resume, "npy: %zu segments", a.n);
    }
    fmt_status s2 = fz_probe(CKPZ_INPUT_NPY, CKPZ_DTYPE_NONE, data, size, 1, 1, 1, &b, "npy (probe)");
    FZ_CHECK(s2 == s, "npy: probe ends with %d, the whole input gives %d", (int)s2, (int)s);
    if (s == FMT_DONE) {
        FZ_CHECK(fz_same_list(&a, &b), "npy: the probe describes the file differently");
        fmt_list_free(&a);
        fmt_list_free(&b);
    }
    return 0;
}
