/* fuzz_detect.c — libFuzzer harness for format detection and description as the
 * compressor drives it: fmt_describe (lib/formats/readers.c: every row of the reader
 * table) through the driver (lib/formats/drive.c) as lib/codec/chunker.c runs it, then
 * fmt_resume at every resume segment, to the end of the input.
 *
 * Input: byte 0 the requested format (% 16: 0-5 the formats, 6 an invalid one, 7 AUTO
 * again, 8 + k format 6 + k while there is one (8: GGUF), else AUTO), byte 1 the raw dtype (% 18: 16-17 invalid), byte 2 the windows (bits 0-3:
 * first prefix 1 << b; bit 4: the input size is known; bits 5-7: resume window
 * 1 << (2b)), then the file.
 * Checks (fuzz_formats.h): the need protocol (more than it had, at most
 * FMT_PROBE_MAX, never at end of input); FMT_ERROR only for a forced format or an
 * invalid request, always with a message (AUTO and RAW with a valid dtype never fail);
 * a forced format is the list's format; the driver never reports a reader out of
 * protocol; fmt_resume never fails; every stretch and the
 * final list tile the input, tensors have their shape's length.
 */
#include "fuzz_formats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    unsigned r = data[0] % 16, d = data[1] % 18;
    ckpz_input_format req = r == 6                                ? (ckpz_input_format)99
                            : r < 6                               ? (ckpz_input_format)r
                            : r >= 8 && r - 2 < CKPZ_INPUT_COUNT_ ? (ckpz_input_format)(r - 2)
                                                                  : CKPZ_INPUT_AUTO;
    ckpz_dtype raw = d >= 16 ? (ckpz_dtype)(d == 16 ? 99 : -1) : (ckpz_dtype)d;
    size_t want = (size_t)1 << (data[2] & 15), window = (size_t)1 << (2 * (data[2] >> 5));
    int known = (data[2] >> 4) & 1;
    const uint8_t *in = data + 3;
    size_t n = size - 3;
    int invalid = r == 6 || d >= 16;
    int may_fail = invalid || (req != CKPZ_INPUT_AUTO && req != CKPZ_INPUT_RAW);
    fmt_list l;
    fmt_status s = fz_probe(req, raw, in, n, want, known, may_fail, &l, "fmt_describe");
    if (invalid) FZ_CHECK(s == FMT_ERROR, "fmt_describe accepted format %u / raw dtype %u", r, d);
    if (s != FMT_DONE) return 0;
    if (req != CKPZ_INPUT_AUTO)
        FZ_CHECK(l.format == req, "fmt_describe: asked for format %d, got %d", (int)req, (int)l.format);
    else
        FZ_CHECK((unsigned)l.format < CKPZ_INPUT_COUNT_ && l.format != CKPZ_INPUT_AUTO, "fmt_describe: format %d",
                 (int)l.format);
    fz_check_segs(&l, 0, 0, CKPZ_SIZE_UNKNOWN, 0, "fmt_describe");
    fz_resume_all(&l, in, n, window, 0, "fmt_resume");
    fz_check_segs(&l, 0, 0, CKPZ_SIZE_UNKNOWN, 0, "fmt_describe + fmt_resume");
    fmt_list_free(&l);
    return 0;
}
