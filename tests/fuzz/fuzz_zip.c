/* fuzz_zip.c — libFuzzer harness for the zip walker (lib/formats/zip.c: zip_walk,
 * zip_local_header, zip_first_member), called directly with a member callback that
 * behaves like the torch and npz readers in turn.
 *
 * Input: byte 0 the windows (bits 0-3: first window 1 << b, bit 4: the first call has
 * `progress` set, bits 5-7: later windows 1 << (2b)), then the archive. The callback
 * picks its behaviour from the first byte of the member's name: leave the member alone;
 * read a 16-bit size from the first data bytes (asking for them with ZIP_CB_NEED, as
 * npz does for the .npy header); derive a size without looking (as torch does from the
 * pickle); or take the header's size. It pushes one U8 tensor over the data it sized.
 * The walk is resumed at each resume segment it ends with, as fmt_resume would.
 * Checks: the need protocol (more than it had, at most FMT_PROBE_MAX, not at end of
 * input, no segment pushed and no state change with it); FMT_ERROR never (only out of
 * memory); the segments a call pushes start at or after where it started and do not
 * overlap; a resume segment is last and moves forward; the callback sees a consistent
 * member (name inside the header, data after it, avail within the input); the local
 * header parser's offsets add up.
 */
#include "formats/zip.h"
#include "fuzz_formats.h"

typedef struct {
    const uint8_t *base; /* the window the walker was given, and its absolute offset */
    uint64_t at;
    size_t len;
} zwin;

static int member(void *ctx, fmt_list *l, zip_member *m, size_t *need)
{
    const zwin *w = ctx;
    FZ_CHECK(m->hdr_off >= w->at && m->hdr_off - w->at + 30 + m->name_len <= w->len,
             "zip: member header at %llu outside the window", (unsigned long long)m->hdr_off);
    FZ_CHECK(m->name == w->base + (m->hdr_off - w->at) + 30, "zip: member name not in its header");
    FZ_CHECK(m->data_off >= m->hdr_off + 30 + m->name_len && m->data == w->base + (m->data_off - w->at) &&
                 m->data_off - w->at + m->avail == w->len,
             "zip: member data at %llu with %zu bytes does not match the window", (unsigned long long)m->data_off,
             m->avail);
    unsigned mode = m->name_len ? m->name[0] % 4 : 0;
    uint64_t size = ZIP_SIZE_UNKNOWN;
    switch (mode) {
    case 0: return ZIP_CB_OK;
    case 1: /* a size in the data's first two bytes */
        if (m->avail < 2) {
            if (m->eof) return ZIP_CB_OK;
            *need = 2;
            return ZIP_CB_NEED;
        }
        size = fz_le(m->data, 2);
        break;
    case 2: size = (uint64_t)m->name_len * 7; break; /* from elsewhere (torch: the pickle) */
    default: size = m->size; break;
    }
    if (size == ZIP_SIZE_UNKNOWN) return ZIP_CB_OK;
    if (m->size == ZIP_SIZE_UNKNOWN) m->size = size;
    else if (m->size != size) return ZIP_CB_OK;
    if (fmt_push(l, CKPZ_DTYPE_U8, (const char *)m->name, m->name_len, 1, &size, m->data_off, size))
        return ZIP_CB_NOMEM;
    return ZIP_CB_OK;
}

static void check_header(const uint8_t *p, size_t len)
{
    zip_member m;
    size_t need = 0;
    int h = zip_local_header(p, len, 1000, &m, &need);
    FZ_CHECK(h >= -1 && h <= 1, "zip_local_header returned %d", h);
    if (h == 0) FZ_CHECK(need > len, "zip_local_header: needs %zu bytes with %zu", need, len);
    if (h == 1)
        FZ_CHECK(m.name == p + 30 && 30 + m.name_len <= len && m.hdr_off == 1000 && m.data_off >= 1030 + m.name_len &&
                     m.data_off - 1000 <= len,
                 "zip_local_header: header of %zu bytes, name %zu, data at %llu", len, m.name_len,
                 (unsigned long long)m.data_off);
    char why[128] = "";
    need = 0;
    fmt_status s = zip_first_member(p, len, len, &m, &need, why, sizeof why);
    FZ_CHECK(s != FMT_ERROR || why[0], "zip_first_member: FMT_ERROR without a message");
    FZ_CHECK(s != FMT_NEED_MORE, "zip_first_member: asks for %zu bytes with the whole input (%zu)", need, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t want0 = (size_t)1 << (data[0] & 15), window = (size_t)1 << (2 * (data[0] >> 5));
    int progress = (data[0] >> 4) & 1;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    check_header(in, n);

    fmt_list l;
    memset(&l, 0, sizeof l);
    zip_walk_state st;
    memset(&st, 0, sizeof st);
    uint64_t at = 0;
    size_t want = want0, calls = 0;
    for (;;) {
        FZ_CHECK(++calls <= 4 * n + 16, "zip_walk does not progress");
        size_t avail = at < n ? n - (size_t)at : 0;
        size_t len = want < avail ? want : avail;
        int eof = want > avail;
        uint8_t *buf = fz_copy(in + (at < n ? at : n), len);
        zwin w = {buf, at, len};
        size_t before = l.n, need = 0;
        zip_walk_state saved = st;
        fmt_status s = zip_walk(&st, &l, at, buf, len, eof, progress, member, &w, &need);
        free(buf);
        FZ_CHECK(s != FMT_ERROR, "zip_walk failed at %llu (only running out of memory may)", (unsigned long long)at);
        if (s == FMT_NEED_MORE) {
            FZ_CHECK(!eof && need > len && need <= FMT_PROBE_MAX, "zip_walk at %llu: needs %zu with %zu (eof %d)",
                     (unsigned long long)at, need, len, eof);
            FZ_CHECK(l.n == before && !memcmp(&st, &saved, sizeof st),
                     "zip_walk asked for more but changed the list or its state");
            want = need;
            continue;
        }
        FZ_CHECK(s == FMT_DONE, "zip_walk: status %d", (int)s);
        uint64_t cur = at;
        for (size_t i = before; i < l.n; i++) {
            const fmt_segment *g = &l.seg[i];
            FZ_CHECK(g->offset >= cur, "zip_walk: segment %zu at %llu overlaps what ends at %llu", i,
                     (unsigned long long)g->offset, (unsigned long long)cur);
            if (g->resume) {
                FZ_CHECK(i + 1 == l.n, "zip_walk: resume segment %zu not last", i);
                FZ_CHECK(g->offset > at || (progress && g->offset == at), "zip_walk: resume at %llu from %llu",
                         (unsigned long long)g->offset, (unsigned long long)at);
            } else {
                FZ_CHECK(g->length != FMT_LEN_OPEN && g->length <= UINT64_MAX - g->offset,
                         "zip_walk: segment %zu of length %llu", i, (unsigned long long)g->length);
                cur = g->offset + g->length;
            }
        }
        if (l.n == before || !l.seg[l.n - 1].resume) break;
        at = l.seg[--l.n].offset; /* the resume segment owns no memory */
        want = window;
        progress = 0;
    }
    FZ_CHECK(fmt_finish(&l) == 0, "fmt_finish failed");
    fz_check_segs(&l, 0, 0, n, 0, "zip_walk");
    fmt_list_free(&l);
    return 0;
}
