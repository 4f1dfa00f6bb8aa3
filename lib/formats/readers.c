/* readers.c — the reader table and detection (see formats.h).
 *
 * One row per input format, in detection order: the formats with a magic first (the
 * zip formats, torch.save archives then .npz, which the first member tells apart;
 * GGUF), then safetensors (no magic: its reader judges the header), then .npy.
 * AUTO tries each row whose sniff accepts the prefix; when none describes the input it
 * is raw. A reader that runs out of memory ends detection at once (FMT_NOMEM): trying
 * the next would only misdescribe the input. The row order is the detection order and
 * the enum values are the numbers stored in the container; the two are independent.
 */
#include <stdio.h>

#include "formats.h"

/* The rows, in detection order: each is fmt_reader_NAME, defined in the reader's file. */
#define FMT_READERS(X) X(auto) X(raw) X(torch) X(npz) X(gguf) X(safetensors) X(npy)

#define FMT_DECLARE(name) extern const fmt_reader fmt_reader_##name;
FMT_READERS(FMT_DECLARE)
#define FMT_ROW(name) &fmt_reader_##name,
const fmt_reader *const fmt_readers[] = {FMT_READERS(FMT_ROW)};
const size_t fmt_reader_count = sizeof fmt_readers / sizeof fmt_readers[0];
/* A value added to ckpz_input_format needs its row (test_formats checks each id once). */
_Static_assert(sizeof fmt_readers / sizeof fmt_readers[0] == CKPZ_INPUT_COUNT_, "a format without a reader row");

const fmt_reader *fmt_reader_get(ckpz_input_format f)
{
    for (size_t i = 0; i < fmt_reader_count; i++)
        if (fmt_readers[i]->id == f) return fmt_readers[i];
    return NULL;
}

const char *ckpz_input_format_name(ckpz_input_format f)
{
    const fmt_reader *r = fmt_reader_get(f);
    return r ? r->name : "unknown";
}

/* AUTO: the first reader that describes the input, else raw. */
static fmt_status detect(const uint8_t *p, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                         size_t *need, char *why, size_t whylen)
{
    char note[512] = "", r[192];
    size_t used = 0;
    for (size_t i = 0; i < fmt_reader_count; i++) {
        const fmt_reader *rd = fmt_readers[i];
        if (!rd->sniff || !rd->sniff(p, len)) continue;
        r[0] = '\0';
        fmt_status st = rd->describe(p, len, total, rq, out, need, r, sizeof r);
        if (st == FMT_DONE) {
            out->reader = rd;
            return st;
        }
        if (st != FMT_ERROR) return st; /* more bytes wanted, or out of memory */
        if (used < sizeof note) {
            int k = snprintf(note + used, sizeof note - used, "%snot %s (%s)", used ? "; " : "", rd->name, r);
            if (k > 0) used += (size_t)k;
        }
    }
    fmt_status st = fmt_reader_raw.describe(p, len, total, rq, out, need, why, whylen);
    if (st == FMT_DONE) {
        out->reader = &fmt_reader_raw;
        if (used) fmt_why(why, whylen, "raw input: %s", note);
    }
    return st;
}

fmt_status fmt_describe(const uint8_t *prefix, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                        size_t *need, char *why, size_t whylen)
{
    if (!prefix) len = 0;
    if (fmt_begin(out, rq, &len, total, need, why, whylen)) return FMT_ERROR;
    static const uint8_t none = 0;
    if (!prefix) prefix = &none; /* readers compare 0 bytes of it */
    if (!rq || (unsigned)rq->raw_dtype >= CKPZ_DTYPE_COUNT_) {
        fmt_why(why, whylen, "unknown raw dtype %d", rq ? (int)rq->raw_dtype : -1);
        return FMT_ERROR;
    }
    const fmt_reader *rd = fmt_reader_get(rq->format);
    if (!rd) {
        fmt_why(why, whylen, "unknown input format %d", (int)rq->format);
        return FMT_ERROR;
    }
    if (rd->id == CKPZ_INPUT_AUTO) return detect(prefix, len, total, rq, out, need, why, whylen);
    fmt_status st = rd->describe(prefix, len, total, rq, out, need, why, whylen);
    if (st == FMT_DONE) out->reader = rd;
    return st;
}

/* AUTO's row: a name for the enum value; detection is fmt_describe's. */
const fmt_reader fmt_reader_auto = {CKPZ_INPUT_AUTO, "auto", NULL, NULL, NULL, NULL};
