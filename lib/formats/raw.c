/* raw.c — raw input (see formats.h): a dump of elements of the requested type, or, with
 * no type, bytes kept opaque. It is also what detection falls back to.
 *
 * Whole elements form one tensor named "data"; a partial element at the end is opaque.
 * When the size is not known the tensor is open: the consumer handles a partial last
 * element.
 */
#include "formats.h"

static fmt_status raw_describe(const uint8_t *p, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                               size_t *need, char *why, size_t whylen)
{
    (void)p;
    if (fmt_begin(out, &len, total, need, why, whylen))
        return FMT_ERROR;
    out->format = CKPZ_INPUT_RAW;
    ckpz_dtype dt = rq ? rq->raw_dtype : CKPZ_DTYPE_NONE;
    int rc = 0;
    if (dt != CKPZ_DTYPE_NONE) {
        unsigned esz = ckpz_dtype_size(dt);
        if (total != CKPZ_SIZE_UNKNOWN) {
            uint64_t n = total / esz;
            rc = fmt_push(out, dt, "data", 4, 1, &n, 0, n * esz);
        } else {
            rc = fmt_push(out, dt, "data", 4, 0, NULL, 0, FMT_LEN_OPEN);
        }
    }
    if (rc || fmt_finish(out)) {
        fmt_list_free(out);
        return FMT_NOMEM;
    }
    return FMT_DONE;
}

const fmt_reader fmt_reader_raw = {CKPZ_INPUT_RAW, "raw", NULL, raw_describe, NULL, NULL};
