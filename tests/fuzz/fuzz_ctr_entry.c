/* fuzz_ctr_entry.c — libFuzzer harness for the entry records
 * (lib/container/format.c: ctr_entry_read, both forms) and entry frames as the
 * streaming reader and the archive's layout check parse them (ctr_entry_frame_len and
 * ctr_entry_frame_read: tag, body length, body in stream form, CRC).
 * Input: byte 0: bit 0 index form (bare records), bits 1-2 the file's flags
 * (CTR_FILE_BASED, CTR_FILE_LOSSY), bit 3 an entry frame (resealed: its CRC recomputed)
 * instead of a bare record, bit 4 CTR_FILE_PACKED; then the bytes.
 * Checks (fuzz_container.h): a failure leaves a message; an accepted record used no
 * more than it had, exactly ctr_entry_size, has only the flags the file allows, a
 * valid dtype, at most CTR_MAX_NDIM dimensions, a NUL-terminated name, and
 * ctr_entry_write writes it back byte for byte; an accepted frame (its record fills
 * its body) is written back byte for byte by ctr_entry_frame_write.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int index_form = data[0] & 1, frame = (data[0] >> 3) & 1;
    unsigned ff = ((data[0] >> 1) & 3) | ((data[0] >> 4) & 1 ? CTR_FILE_PACKED : 0u);
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
