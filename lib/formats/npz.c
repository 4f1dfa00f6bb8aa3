/* npz.c — the NumPy .npz reader (see formats.h, zip.h).
 *
 * np.savez writes a zip of NAME.npy members, stored (np.savez_compressed: deflated).
 * A stored member's .npy header stays opaque and its array data becomes a tensor named
 * NAME; deflated members, other members, the central directory and anything not
 * understood stay opaque. The members are walked piecewise (zip_walk).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "zip.h"

extern const fmt_reader fmt_reader_npz;

typedef struct npz_state {
    zip_walk_state ws;
} npz_state;

static int npz_member(void *ctx, fmt_list *l, zip_member *m, size_t *need)
{
    (void)ctx;
    if (m->method != 0 || !zip_name_ends(m, ".npy")) return ZIP_CB_OK;
    npy_info info;
    size_t nn = 0;
    size_t avail = m->avail;
    if (m->size != ZIP_SIZE_UNKNOWN && avail > m->size) avail = (size_t)m->size;
    fmt_status s = npy_parse_header(m->data, avail, m->size == ZIP_SIZE_UNKNOWN ? CKPZ_SIZE_UNKNOWN : m->size, &info,
                                    &nn, NULL, 0);
    if (s == FMT_NEED_MORE) {
        if (m->eof || nn <= m->avail) return ZIP_CB_OK;
        *need = nn;
        return ZIP_CB_NEED;
    }
    if (s != FMT_DONE || info.dtype == CKPZ_DTYPE_NONE || info.nbytes > UINT64_MAX - info.data_off) return ZIP_CB_OK;
    uint64_t len = info.data_off + info.nbytes;
    if (m->size == ZIP_SIZE_UNKNOWN) m->size = len; /* checked against the data descriptor by the walker */
    else if (m->size != len) return ZIP_CB_OK;
    if (fmt_push(l, info.dtype, (const char *)m->name, m->name_len - 4, info.ndim, info.shape,
                 m->data_off + info.data_off, info.nbytes))
        return ZIP_CB_NOMEM;
    return ZIP_CB_OK;
}

static fmt_status npz_resume(void *state, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof, size_t *need)
{
    npz_state *z = state;
    return zip_walk(&z->ws, l, at, p, len, eof, 0, npz_member, NULL, need);
}

static void npz_free(void *state) { free(state); }

static fmt_status npz_describe(const uint8_t *p, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                               size_t *need, char *why, size_t whylen)
{
    if (fmt_begin(out, rq, &len, total, need, why, whylen)) return FMT_ERROR;
    int eof = total != CKPZ_SIZE_UNKNOWN && len >= total;

    zip_member m;
    fmt_status first = zip_first_member(p, len, total, &m, need, why, whylen);
    if (first != FMT_DONE) return first;
    if (!zip_name_ends(&m, ".npy")) {
        fmt_why(why, whylen, "zip archive whose first member is not a .npy file");
        return FMT_ERROR;
    }
    npz_state *z = calloc(1, sizeof(*z));
    if (!z) return FMT_NOMEM;
    out->format = CKPZ_INPUT_NPZ;
    out->reader = &fmt_reader_npz;
    out->state = z;
    size_t nn = 0;
    fmt_status s = zip_walk(&z->ws, out, 0, p, len, eof, 0, npz_member, NULL, &nn);
    if (s == FMT_NEED_MORE) {
        fmt_list_free(out);
        if (nn <= len || nn > FMT_PROBE_MAX) { /* cannot happen; be safe */
            out->format = CKPZ_INPUT_NPZ;
            return fmt_finish(out) ? FMT_NOMEM : FMT_DONE;
        }
        *need = nn;
        return FMT_NEED_MORE;
    }
    if (s == FMT_NOMEM || fmt_finish(out)) {
        fmt_list_free(out);
        return FMT_NOMEM;
    }
    return FMT_DONE;
}

const fmt_reader fmt_reader_npz = {CKPZ_INPUT_NPZ, "npz", fmt_sniff_zip, npz_describe, npz_resume, npz_free};
