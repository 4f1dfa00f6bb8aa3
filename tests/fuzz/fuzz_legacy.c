/* fuzz_legacy.c — libFuzzer harness for the legacy torch.save reader
 * (lib/formats/torch_legacy.c, reached through the torch row of the reader table, over
 * pickle.c's pkl_torch_storages and pkl_str_list), on the input as a whole file.
 *
 * Byte 0 picks the windows (bits 0-3: first prefix 1 << b; bits 4-6: resume window
 * 1 << (2b); bit 7: the probe knows the input size); the rest is the file.
 * The reader runs with the whole input, then through the library's driver (fz_probe)
 * from the chosen prefix, each list resumed to its end as lib/codec/chunker.c does
 * (fz_resume_all). Checks (fuzz_formats.h): the whole-input call never asks for more
 * and refuses (with a message) only an input that does not open with the magic
 * number's pickle; every stretch and the final lists tile the file, tensors have their
 * shape's length and, when the size is known, lie inside the file and after the five
 * pickles; a probe that knows the size ends with the same tensors as the whole-input
 * call, whatever the windows; the probe's status is the whole-input call's.
 * Seeds: tests/data/torch/legacy*.pt and damaged variants (make_seeds.c).
 */
#include "formats/torch_legacy.h"
#include "fuzz_formats.h"

/* 1 when the two lists have the same tensors (opaque runs may be cut differently). */
static int same_tensors(const fmt_list *a, const fmt_list *b)
{
    size_t i = 0, j = 0;
    for (;;) {
        while (i < a->n && a->seg[i].dtype == CKPZ_DTYPE_NONE) i++;
        while (j < b->n && b->seg[j].dtype == CKPZ_DTYPE_NONE) j++;
        if (i == a->n || j == b->n) return i == a->n && j == b->n;
        const fmt_segment *x = &a->seg[i++], *y = &b->seg[j++];
        if (x->dtype != y->dtype || x->offset != y->offset || x->length != y->length || x->ndim != y->ndim ||
            strcmp(x->name, y->name) || (x->ndim && memcmp(x->shape, y->shape, 8 * (size_t)x->ndim)))
            return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t want = (size_t)1 << (data[0] & 15), window = (size_t)1 << (2 * ((data[0] >> 4) & 7));
    int known = data[0] >> 7;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    fmt_list a, b;
    size_t need = 0;
    char why[256] = "";
    fmt_status s = FZ_DESCRIBE(CKPZ_INPUT_TORCH)(in, n, n, NULL, &a, &need, why, sizeof why);
    FZ_CHECK(s != FMT_NEED_MORE, "legacy: asks for %zu bytes with the whole input (%zu) at hand", need, n);
    FZ_CHECK(s != FMT_ERROR || why[0], "legacy: FMT_ERROR without a message");
    int legacy = torch_legacy_sniff(in, n) == 1;
    FZ_CHECK(s != FMT_ERROR || !legacy, "legacy: refused a file opening with the magic number (%s)", why);
    if (s == FMT_DONE) {
        FZ_CHECK(a.format == CKPZ_INPUT_TORCH, "legacy: format %d", (int)a.format);
        fz_check_segs(&a, 0, 0, n, legacy, "legacy");
        fz_resume_all(&a, in, n, 64u << 10, legacy, "legacy");
        fz_check_segs(&a, 0, 0, n, legacy, "legacy (resumed)");
        /* the opening pickles (magic 15 bytes, version 6, sys_info 3 at least) hold no tensor */
        for (size_t i = 0; legacy && i < a.n; i++)
            FZ_CHECK(a.seg[i].dtype == CKPZ_DTYPE_NONE || a.seg[i].offset >= 24, "legacy: tensor %zu in the header", i);
    }
    fmt_status s2 = fz_probe(CKPZ_INPUT_TORCH, CKPZ_DTYPE_NONE, in, n, want, known, 1, &b, "legacy (probe)");
    FZ_CHECK(s2 == s, "legacy: probe ends with %d, the whole input gives %d", (int)s2, (int)s);
    if (s2 == FMT_DONE) {
        fz_check_segs(&b, 0, 0, n, known && legacy, "legacy (probe)");
        fz_resume_all(&b, in, n, window, known && legacy, "legacy (probe)");
        fz_check_segs(&b, 0, 0, n, known && legacy, "legacy (probe, resumed)");
        if (known && legacy && s == FMT_DONE)
            FZ_CHECK(same_tensors(&a, &b), "legacy: the probe finds other tensors than the whole-input call");
        fmt_list_free(&b);
    }
    if (s == FMT_DONE) fmt_list_free(&a);
    return 0;
}
