/* raw.c — raw input (see formats.h): a dump of elements of the requested type, or, with
 * no type, bytes kept opaque. It is also what detection falls back to.
 *
 * Without a shape, whole elements form one tensor named "data" of one dimension and a
 * partial element at the end is opaque; when the size is not known the tensor is open
 * (the consumer handles a partial last element). With a shape (--shape 2000x2000) the
 * tensor has it, and the input must be exactly its bytes: a size that disagrees is an
 * error, not a guess, since a wrong shape would code rows that are not rows. When the
 * size is not known, the tensor is described with the shape's length and the consumer
 * checks the size at the end (plan.c).
 */
#include <stdio.h>

#include "formats.h"

uint64_t fmt_raw_bytes(const fmt_request *rq)
{
    if (!rq || !rq->raw_ndim || !rq->raw_shape || rq->raw_dtype == CKPZ_DTYPE_NONE) return UINT64_MAX;
    uint64_t n = ckpz_dtype_size(rq->raw_dtype);
    for (uint32_t d = 0; d < rq->raw_ndim; d++) {
        uint64_t k = rq->raw_shape[d];
        if (k == 0 || n > (UINT64_MAX - 1) / k) return UINT64_MAX;
        n *= k;
    }
    return n;
}

void fmt_raw_mismatch(const fmt_request *rq, uint64_t size, char *why, size_t whylen)
{
    char shape[96] = "";
    size_t k = 0;
    for (uint32_t d = 0; d < rq->raw_ndim && k < sizeof shape; d++) {
        int w = snprintf(shape + k, sizeof shape - k, "%s%llu", d ? "x" : "", (unsigned long long)rq->raw_shape[d]);
        k += w > 0 ? (size_t)w : 0;
    }
    fmt_why(why, whylen, "%llu bytes are not a %s tensor of shape %s (%llu bytes)", (unsigned long long)size,
            ckpz_dtype_name(rq->raw_dtype), shape, (unsigned long long)fmt_raw_bytes(rq));
}

static fmt_status raw_describe(const uint8_t *p, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                               size_t *need, char *why, size_t whylen)
{
    (void)p;
    if (fmt_begin(out, rq, &len, total, need, why, whylen)) return FMT_ERROR;
    ckpz_dtype dt = rq ? rq->raw_dtype : CKPZ_DTYPE_NONE;
    int rc = 0;
    if (rq && rq->raw_ndim) {
        uint64_t bytes = fmt_raw_bytes(rq);
        if (bytes == UINT64_MAX) {
            fmt_why(why, whylen, "%s",
                    dt == CKPZ_DTYPE_NONE ? "a raw shape needs an element type"
                                          : "a raw shape with a zero or too many elements");
            return FMT_ERROR;
        }
        if (total != CKPZ_SIZE_UNKNOWN && total != bytes) {
            fmt_raw_mismatch(rq, total, why, whylen);
            return FMT_ERROR;
        }
        rc = fmt_push(out, dt, "data", 4, rq->raw_ndim, rq->raw_shape, 0, bytes);
    } else if (dt != CKPZ_DTYPE_NONE) {
        unsigned esz = ckpz_dtype_size(dt);
        if (total != CKPZ_SIZE_UNKNOWN) {
            uint64_t n = total / esz;
            rc = fmt_push(out, dt, "data", 4, 1, &n, 0, n * esz);
        } else {
            rc = fmt_push(out, dt, "data", 4, 0, NULL, 0, FMT_LEN_OPEN);
        }
    }
    out->format = CKPZ_INPUT_RAW;
    if (rc || fmt_finish(out)) {
        fmt_list_free(out);
        return FMT_NOMEM;
    }
    return FMT_DONE;
}

const fmt_reader fmt_reader_raw = {CKPZ_INPUT_RAW, "raw", NULL, raw_describe, NULL, NULL};
