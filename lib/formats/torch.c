/* torch.c — the torch.save archive reader (see formats.h, zip.h, pickle.h).
 *
 * torch.save (since 1.6) writes a stored zip: ARCHIVE/data.pkl first (the pickle of the
 * object, where each tensor's storage is a persistent id naming its type, key and
 * element count), then one member ARCHIVE/data/KEY per storage (raw little-endian
 * bytes, 64-byte aligned), then ARCHIVE/version, ARCHIVE/byteorder,
 * ARCHIVE/.data/serialization_id, ... and the central directory. torch sets flag bit 3
 * on every member: the sizes follow each member's data in a data descriptor.
 *
 * The reader needs the whole pickle in the prefix; it describes the local header and the
 * pickle as opaque bytes and then walks the members piecewise (zip_walk): a storage's
 * data becomes a tensor of the pickle's dtype named after the first tensor using it,
 * everything else is opaque. A pickle it cannot read leaves the whole file opaque.
 *
 * A file that opens with the pickle of torch's magic number is in the legacy format
 * (torch < 1.6), which torch_legacy.c describes; this row reads both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "pickle.h"
#include "torch_legacy.h"
#include "zip.h"

extern const fmt_reader fmt_reader_torch;

typedef struct torch_state {
    legacy_state *legacy; /* a legacy file (torch_legacy.c): the rest is unused */
    zip_walk_state ws;
    pkl_storages st;
    char *prefix;     /* "ARCHIVE/" (may be empty) */
    size_t prefix_len;
} torch_state;

static int torch_member(void *ctx, fmt_list *l, zip_member *m, size_t *need)
{
    torch_state *t = ctx;
    (void)need;
    size_t pl = t->prefix_len;
    if (m->method != 0 || m->name_len <= pl + 5 || memcmp(m->name, t->prefix, pl) != 0 ||
        memcmp(m->name + pl, "data/", 5) != 0)
        return ZIP_CB_OK;
    const pkl_storage *s = pkl_find(&t->st, m->name + pl + 5, m->name_len - pl - 5);
    unsigned esz = s && s->dtype != CKPZ_DTYPE_NONE ? ckpz_dtype_size(s->dtype) : 0;
    if (!esz || s->numel > UINT64_MAX / esz) return ZIP_CB_OK;
    uint64_t bytes = s->numel * esz;
    if (m->size == ZIP_SIZE_UNKNOWN) m->size = bytes; /* checked against the data descriptor by the walker */
    else if (m->size != bytes) return ZIP_CB_OK;
    if (fmt_push(l, s->dtype, s->name, strlen(s->name), s->ndim, s->shape, m->data_off, bytes)) return ZIP_CB_NOMEM;
    l->seg[l->n - 1].optim = s->optim; /* the reader's state owns it */
    return ZIP_CB_OK;
}

static fmt_status torch_resume(void *state, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof,
                               size_t *need)
{
    torch_state *t = state;
    if (t->legacy) return torch_legacy_resume(t->legacy, l, at, p, len, eof, need);
    return zip_walk(&t->ws, l, at, p, len, eof, 0, torch_member, t, need);
}

static void torch_free(void *state)
{
    torch_state *t = state;
    torch_legacy_free(t->legacy);
    pkl_storages_free(&t->st);
    free(t->prefix);
    free(t);
}

static fmt_status describe_legacy(const uint8_t *p, size_t len, uint64_t total, fmt_list *out, size_t *need, char *why,
                                  size_t whylen)
{
    torch_state *t = calloc(1, sizeof(*t));
    if (!t) return FMT_NOMEM;
    fmt_status s = torch_legacy_describe(p, len, total, out, need, why, whylen, &t->legacy);
    if (s == FMT_DONE && t->legacy) {
        out->state = t;
        out->reader = &fmt_reader_torch;
    } else {
        free(t);
    }
    return s;
}

static fmt_status torch_describe(const uint8_t *p, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                                 size_t *need, char *why, size_t whylen)
{
    if (fmt_begin(out, rq, &len, total, need, why, whylen)) return FMT_ERROR;
    int eof = total != CKPZ_SIZE_UNKNOWN && len >= total;
    int legacy = torch_legacy_sniff(p, len);
    if (legacy == -1 && !eof) {
        *need = total != CKPZ_SIZE_UNKNOWN && total < 32 ? (size_t)total : 32;
        return FMT_NEED_MORE;
    }
    if (legacy == 1) return describe_legacy(p, len, total, out, need, why, whylen);

    zip_member m;
    fmt_status first = zip_first_member(p, len, total, &m, need, why, whylen);
    if (first != FMT_DONE) return first;
    if (!zip_name_ends(&m, "data.pkl") || (m.name_len > 8 && m.name[m.name_len - 9] != '/')) {
        fmt_why(why, whylen, "zip archive without data.pkl first");
        return FMT_ERROR;
    }
    if (m.method != 0) return fmt_all_opaque(out, CKPZ_INPUT_TORCH, why, whylen, "torch archive: compressed data.pkl");

    /* The pickle: all of it must be in the prefix. */
    size_t ds = (size_t)m.data_off, avail = len - ds;
    if (m.size != ZIP_SIZE_UNKNOWN) {
        if (m.size > FMT_PROBE_MAX - ds)
            return fmt_all_opaque(out, CKPZ_INPUT_TORCH, why, whylen, "torch archive: data.pkl too large");
        if (avail < m.size) {
            if (eof) return fmt_all_opaque(out, CKPZ_INPUT_TORCH, why, whylen, "torch archive: data.pkl cut short");
            *need = ds + (size_t)m.size;
            return FMT_NEED_MORE;
        }
        avail = (size_t)m.size;
    }
    pkl_storages st;
    size_t plen = 0;
    pkl_status ps = pkl_torch_storages(p + ds, avail, &st, &plen);
    if (ps == PKL_NOMEM) return FMT_NOMEM;
    if (ps == PKL_NEED) {
        if (eof || m.size != ZIP_SIZE_UNKNOWN || len >= FMT_PROBE_MAX)
            return fmt_all_opaque(out, CKPZ_INPUT_TORCH, why, whylen, "torch archive: data.pkl cut short");
        size_t want = len < (FMT_PROBE_MAX / 2) ? 2 * len : FMT_PROBE_MAX;
        if (want < len + (64u << 10)) want = len + (64u << 10) < FMT_PROBE_MAX ? len + (64u << 10) : FMT_PROBE_MAX;
        *need = want;
        return FMT_NEED_MORE;
    }
    if (ps == PKL_BAD)
        return fmt_all_opaque(out, CKPZ_INPUT_TORCH, why, whylen, "torch archive: data.pkl not understood");

    torch_state *t = calloc(1, sizeof(*t));
    if (!t || !(t->prefix = malloc(m.name_len - 8 + 1))) {
        free(t);
        pkl_storages_free(&st);
        return FMT_NOMEM;
    }
    t->st = st;
    t->prefix_len = m.name_len - 8;
    memcpy(t->prefix, m.name, t->prefix_len);
    t->prefix[t->prefix_len] = '\0';
    out->format = CKPZ_INPUT_TORCH;
    out->reader = &fmt_reader_torch;
    out->state = t;

    /* The members after the pickle. */
    uint64_t at;
    if (m.size == ZIP_SIZE_UNKNOWN) {
        at = ds + plen;
        t->ws.desc_pending = 1;
        t->ws.desc_size = plen;
        t->ws.desc_method = 0;
    } else {
        at = ds + m.size;
    }
    fmt_status s = FMT_DONE;
    size_t nn = 0;
    if (at <= len) s = zip_walk(&t->ws, out, at, p + at, len - (size_t)at, eof, 1, torch_member, t, &nn);
    if (s == FMT_NOMEM || fmt_finish(out)) {
        fmt_list_free(out);
        return FMT_NOMEM;
    }
    return FMT_DONE;
}

pkl_status pkl_torch_archive(const uint8_t *p, size_t len, pkl_storages *out)
{
    zip_member m;
    size_t need, end;
    char why[64];
    memset(out, 0, sizeof *out);
    if (zip_first_member(p, len, CKPZ_SIZE_UNKNOWN, &m, &need, why, sizeof why) != FMT_DONE ||
        !zip_name_ends(&m, "data.pkl") || m.method != 0 || m.data_off > len)
        return PKL_BAD;
    size_t avail = len - (size_t)m.data_off;
    if (m.size != ZIP_SIZE_UNKNOWN && m.size < avail) avail = (size_t)m.size;
    return pkl_torch_storages(p + m.data_off, avail, out, &end);
}

/* Detection: a zip archive, or the magic number's pickle that opens a legacy file (or
 * a prefix too short to tell that starts like it: describe then asks for more). */
static int torch_sniff(const uint8_t *p, size_t len)
{
    return fmt_sniff_zip(p, len) || torch_legacy_sniff(p, len) != 0;
}

const fmt_reader fmt_reader_torch = {CKPZ_INPUT_TORCH, "torch", torch_sniff, torch_describe, torch_resume, torch_free};
