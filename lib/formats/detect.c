/* detect.c — fmt_describe: a forced format, or detection (see formats.h).
 *
 * AUTO tries torch.save zip archives and .npz (zip files whose first member is data.pkl
 * or a .npy file), then safetensors, then .npy; when none matches, the input is raw: one
 * tensor of raw_dtype named "data" (when raw_dtype != NONE) or one open opaque
 * segment. On FMT_DONE after a fallback to raw, why[] holds a note saying why the
 * readers declined (for verbose output); it is "" otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "formats.h"

/* Raw input: whole elements form the tensor, a partial element at the end is opaque. */
static fmt_status describe_raw(uint64_t total, ckpz_dtype dt, fmt_list *out, char *why,
                               size_t whylen)
{
    out->format = CKPZ_INPUT_RAW;
    int rc = 0;
    if (dt != CKPZ_DTYPE_NONE) {
        unsigned esz = ckpz_dtype_size(dt);
        if (total != CKPZ_SIZE_UNKNOWN) {
            uint64_t n = total / esz;
            rc = fmt_push(out, dt, "data", 4, 1, &n, 0, n * esz);
        } else {
            /* Size unknown: an open tensor; the consumer handles a partial last element. */
            rc = fmt_push(out, dt, "data", 4, 0, NULL, 0, FMT_LEN_OPEN);
        }
    }
    if (rc || fmt_finish(out)) {
        fmt_list_free(out);
        fmt_why(why, whylen, "out of memory");
        return FMT_ERROR;
    }
    return FMT_DONE;
}

fmt_status fmt_describe(const uint8_t *prefix, size_t len, uint64_t total,
                        ckpz_input_format requested, ckpz_dtype raw_dtype,
                        fmt_list *out, size_t *need, char *why, size_t whylen)
{
    if (!prefix)
        len = 0;
    if (fmt_begin(out, &len, total, need, why, whylen))
        return FMT_ERROR;
    static const uint8_t none = 0;
    if (!prefix)
        prefix = &none; /* readers compare 0 bytes of it */
    if ((unsigned)raw_dtype >= CKPZ_DTYPE_COUNT_) {
        fmt_why(why, whylen, "unknown raw dtype %d", (int)raw_dtype);
        return FMT_ERROR;
    }

    switch (requested) {
    case CKPZ_INPUT_SAFETENSORS:
        return fmt_safetensors(prefix, len, total, out, need, why, whylen);
    case CKPZ_INPUT_NPY:
        return fmt_npy(prefix, len, total, out, need, why, whylen);
    case CKPZ_INPUT_TORCH:
        return fmt_torch(prefix, len, total, out, need, why, whylen);
    case CKPZ_INPUT_NPZ:
        return fmt_npz(prefix, len, total, out, need, why, whylen);
    case CKPZ_INPUT_RAW:
        return describe_raw(total, raw_dtype, out, why, whylen);
    case CKPZ_INPUT_AUTO: {
        char r1[192], r2[192];
        if (len >= 4 && prefix[0] == 'P' && prefix[1] == 'K' && prefix[2] == 3 && prefix[3] == 4) {
            fmt_status zs = fmt_torch(prefix, len, total, out, need, r1, sizeof(r1));
            if (zs == FMT_ERROR && strcmp(r1, "out of memory") != 0)
                zs = fmt_npz(prefix, len, total, out, need, r1, sizeof(r1));
            if (zs != FMT_ERROR)
                return zs;
            if (strcmp(r1, "out of memory") == 0) {
                fmt_why(why, whylen, "%s", r1);
                return FMT_ERROR;
            }
        }
        fmt_status st = fmt_safetensors(prefix, len, total, out, need, r1, sizeof(r1));
        if (st != FMT_ERROR)
            return st;
        if (strcmp(r1, "out of memory") == 0) {
            fmt_why(why, whylen, "%s", r1);
            return FMT_ERROR;
        }
        st = fmt_npy(prefix, len, total, out, need, r2, sizeof(r2));
        if (st != FMT_ERROR)
            return st;
        if (strcmp(r2, "out of memory") == 0) {
            fmt_why(why, whylen, "%s", r2);
            return FMT_ERROR;
        }
        st = describe_raw(total, raw_dtype, out, why, whylen);
        if (st == FMT_DONE)
            fmt_why(why, whylen, "raw input: not safetensors (%s); not .npy (%s)", r1, r2);
        return st;
    }
    default:
        fmt_why(why, whylen, "unknown input format %d", (int)requested);
        return FMT_ERROR;
    }
}
