/* fuzz_ctr_entry.c — libFuzzer harness for the entry records
 * (lib/container/format.c: ctr_entry_read, both forms) and entry frames as the
 * streaming reader and the archive's layout check parse them (ctr_entry_frame_len and
 * ctr_entry_frame_read: tag, body length, body in stream form, CRC).
 * Input: byte 0: bit 0 index form (bare records), bits 1-2 the file's flags
 * (CTR_FILE_BASED, CTR_FILE_LOSSY), bit 3 an entry frame (resealed: its CRC recomputed)
 * instead of a bare record, bit 4 CTR_FILE_PACKED, bit 5 CTR_FILE_CODED: a coded list
 * (lib/container/entlist.c: ctr_list_read, or a CKEL frame through ctr_eframe_len/_read;
 * a bare list in index form takes its count from the next 2 bytes); then the bytes.
 * Checks (fuzz_container.h): a failure leaves a message; an accepted record used no
 * more than it had, exactly ctr_entry_size, has only the flags the file allows, a
 * valid dtype, at most CTR_MAX_NDIM dimensions, a NUL-terminated name, and
 * ctr_entry_write writes it back byte for byte; an accepted frame (its record fills
 * its body) is written back byte for byte by ctr_entry_frame_write. An accepted coded
 * list has the same properties entry by entry, and coded again (a writer may code it
 * otherwise) reads back the same entries; a CKEL frame compared with its own entries as it
 * is read (ctr_eframe_same) matches them, and fails as its read does.
 */
#include "fuzz_container.h"

static void check_entry(const ctr_entry *e, const uint8_t *in, size_t used, int index_form, unsigned ff)
{
    unsigned allowed = ((ff & CTR_FILE_BASED) ? CTR_ENTRY_BASED : 0u) | ((ff & CTR_FILE_LOSSY) ? CTR_ENTRY_LOSSY : 0u) |
                       ((ff & CTR_FILE_PACKED) ? CTR_ENTRY_PACKED : 0u);
    FZ_CHECK(!(e->flags & ~allowed), "entry: flags %u in a file with flags %u", e->flags, ff);
    FZ_CHECK(!(e->flags & CTR_ENTRY_PACKED) || !(e->flags & (CTR_ENTRY_BASED | CTR_ENTRY_LOSSY)),
             "entry: packed with flags %u", e->flags);
    FZ_CHECK(e->dtype < CKPZ_DTYPE_COUNT_ && e->ndim <= CTR_MAX_NDIM && e->name && e->shape &&
                 e->name[e->name_len] == 0,
             "entry: dtype %u, %u dims", e->dtype, e->ndim);
    FZ_CHECK(used == ctr_entry_size(e, index_form), "entry: used %zu, size %zu", used, ctr_entry_size(e, index_form));
    uint8_t *out = malloc(used);
    if (!out) fz_die("out of memory");
    ctr_entry_write(out, e, index_form);
    size_t k = fz_diff(in, out, used);
    FZ_CHECK(k == used, "entry: written back differently at byte %zu of %zu", k, used);
    free(out);
}

static void check_list(ctr_entry *e, size_t n, int index_form, unsigned ff)
{
    uint8_t *out;
    size_t len, n2, used;
    ctr_entry *e2;
    ckpz_ctx *c = fz_ctx();
    for (size_t i = 0; i < n; i++) {
        FZ_CHECK(!(e[i].flags & CTR_ENTRY_PACKED) || !(e[i].flags & (CTR_ENTRY_BASED | CTR_ENTRY_LOSSY)),
                 "list: packed with flags %u", e[i].flags);
        FZ_CHECK(e[i].dtype < CKPZ_DTYPE_COUNT_ && e[i].ndim <= CTR_MAX_NDIM && e[i].name && e[i].shape &&
                     e[i].name[e[i].name_len] == 0 && (!i || index_form || e[i].offset >= e[i - 1].offset),
                 "list: entry %zu: dtype %u, %u dims", i, e[i].dtype, e[i].ndim);
    }
    if (ctr_list_write(c, e, n, index_form, &out, &len)) fz_die("out of memory");
    ckpz_error err = ctr_list_read(c, NULL, out, len, index_form, ff, (size_t)1 << 20, n, &e2, &n2, &used);
    FZ_CHECK(!err && n2 == n && used == len, "list: not read back after coding again: %s", ckpz_ctx_message(c));
    for (size_t i = 0; i < n; i++)
        FZ_CHECK(ctr_entry_same(&e[i], &e2[i]) &&
                     (!index_form || (e[i].length == e2[i].length && e[i].first_chunk == e2[i].first_chunk &&
                                      e[i].nchunks == e2[i].nchunks)),
                 "list: entry %zu read back differently", i);
    ctr_entries_free(e2, n2);
    free(out);
}

/* A coded list, bare or in a CKEL frame (resealed). */
static void coded(const uint8_t *in, size_t n, int index_form, int frame, unsigned ff)
{
    ckpz_ctx *c = fz_ctx();
    ctr_entry *e;
    size_t ne, used;
    if (!frame) {
        uint64_t count = 0;
        if (index_form) {
            if (n < 2) return;
            count = ld16(in);
            in += 2, n -= 2;
        }
        uint8_t *b = fz_copy(in, n); /* exact size: a read past it is caught */
        ckpz_error err = ctr_list_read(c, NULL, b, n, index_form, ff, (size_t)1 << 20, count, &e, &ne, &used);
        fz_need_msg(c, err, "ctr_list_read");
        if (!err) {
            FZ_CHECK(used <= n && (!index_form || ne == count), "list: used %zu of %zu bytes", used, n);
            check_list(e, ne, index_form, ff);
            ctr_entries_free(e, ne);
        }
        free(b);
        return;
    }
    if (n < 8) return;
    uint8_t *fr = fz_copy(in, n);
    uint32_t blen;
    ckpz_error err = ctr_eframe_len(c, fr, n, ff, (size_t)1 << 20, 0, 0, &blen);
    fz_need_msg(c, err, "ctr_eframe_len");
    if (!err) {
        FZ_CHECK(blen >= 2 && 12 + (size_t)blen <= n, "list frame: length %u of %zu", blen, n);
        st32(fr + 8 + blen, crc32c(0, fr, 8 + (size_t)blen));
        err = ctr_eframe_read(c, NULL, fr, blen, ff, (size_t)1 << 20, 0, 0, &e, &ne);
        fz_need_msg(c, err, "ctr_eframe_read");
        size_t n2;
        int same;
        ckpz_error err2 = ctr_eframe_same(c, NULL, fr, blen, ff, (size_t)1 << 20, 0, 0, err ? NULL : e, err ? 0 : ne,
                                          &n2, &same);
        FZ_CHECK(err2 == err && (err || (n2 == ne && same)), "list frame: compared, error %d (read: %d), same %d",
                 (int)err2, (int)err, same);
        if (!err) {
            FZ_CHECK(ne >= 1, "list frame: no entries");
            FZ_CHECK(ctr_eframe_same(c, NULL, fr, blen, ff, (size_t)1 << 20, 0, 0, e, ne - 1, &n2, &same) == 0 && !same,
                     "list frame: matched more entries than it was given");
            check_list(e, ne, 0, ff);
            ctr_entries_free(e, ne);
        }
    }
    free(fr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int index_form = data[0] & 1, frame = (data[0] >> 3) & 1;
    unsigned ff = ((data[0] >> 1) & 3) | ((data[0] >> 4) & 1 ? CTR_FILE_PACKED : 0u);
    if ((data[0] >> 5) & 1) {
        coded(data + 1, size - 1, index_form, frame, ff | CTR_FILE_CODED);
        return 0;
    }
    uint8_t *in = fz_copy(data + 1, size - 1);
    size_t n = size - 1;
    ckpz_ctx *c = fz_ctx();
    ctr_entry e;
    size_t used = 0;
    if (!frame) {
        ckpz_error err = ctr_entry_read(c, in, n, index_form, ff, &e, &used);
        fz_need_msg(c, err, "ctr_entry_read");
        if (!err) {
            FZ_CHECK(used <= n, "entry: used %zu of %zu bytes", used, n);
            check_entry(&e, in, used, index_form, ff);
            ctr_entry_clear(&e);
        }
        free(in);
        return 0;
    }
    /* an entry frame, as lib/codec/decode.c and ckpz_archive_check_frames read one */
    if (n < 8) goto out;
    uint32_t blen;
    ckpz_error err = ctr_entry_frame_len(c, in, n, 0, 0, &blen);
    fz_need_msg(c, err, "ctr_entry_frame_len");
    if (err) goto out;
    FZ_CHECK(blen >= 16 && blen <= CTR_ENTRY_MAX && 12 + (size_t)blen <= n, "entry frame: length %u of %zu", blen, n);
    st32(in + 8 + blen, crc32c(0, in, 8 + (size_t)blen));
    err = ctr_entry_frame_read(c, in, blen, ff, 0, 0, &e);
    fz_need_msg(c, err, "ctr_entry_frame_read");
    if (!err) {
        check_entry(&e, in + 8, blen, 0, ff);
        FZ_CHECK(ctr_entry_frame_size(&e) == 12 + (size_t)blen, "entry frame: size %zu for %u bytes of body",
                 ctr_entry_frame_size(&e), blen);
        uint8_t *out = malloc(12 + (size_t)blen);
        if (!out) fz_die("out of memory");
        ctr_entry_frame_write(out, &e);
        size_t k = fz_diff(in, out, 12 + (size_t)blen);
        FZ_CHECK(k == 12 + (size_t)blen, "entry frame: written back differently at byte %zu", k);
        free(out);
        ctr_entry_clear(&e);
    }
out:
    free(in);
    return 0;
}
