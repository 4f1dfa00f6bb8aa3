/* fuzz_ctr_index.c — libFuzzer harness for the index parser
 * (lib/container/format.c: ctr_index_read; its CRC is the caller's to check). Input:
 * the index offset (8 bytes) and the original size (8 bytes) the trailer gave, the
 * file's flags (1 byte: CTR_FILE_BASED, CTR_FILE_LOSSY, CTR_FILE_PACKED, CTR_FILE_CODED:
 * the records a coded list, lib/container/entlist.c), then the index section.
 * Checks (fuzz_container.h): a failure leaves a message and returns nothing; an
 * accepted index has entries that tile the original in order with consecutive chunk
 * ranges whose lengths add up (a group's owner's first chunk holding the packed entries
 * before it too), seek-table records in file order between the header
 * and the index, only allowed entry flags; ctr_index_size is its length and
 * ctr_index_write writes it back byte for byte, or for a coded index (whose coding a
 * writer may choose) ctr_index_encode codes it to an index that reads back the same;
 * read into kept memory (ctr_index_read_kept, reused from input to input) it gives the
 * same error or the same entries.
 */
#include "fuzz_container.h"

/* ctr_index_read_kept, into memory kept from one input to the next as a context keeps
 * it, gives what ctr_index_read gave: the same error, or the same entries and chunks. */
static void check_kept(const uint8_t *in, size_t len, uint64_t index_offset, uint64_t original, unsigned ff,
                       ckpz_error want, const ctr_entry *e, size_t ne, const ctr_chunkrec *k, size_t nc)
{
    static ctr_keep keep;
    ckpz_ctx *c = fz_ctx();
    ctr_entry *e2;
    ctr_chunkrec *k2;
    size_t ne2, nc2;
    int kept;
    ckpz_error err = ctr_index_read_kept(c, NULL, &keep, in, len, index_offset, original, (size_t)1 << 20, ff, &e2,
                                         &ne2, &kept, &k2, &nc2);
    FZ_CHECK(err == want, "kept index: error %d, ctr_index_read's %d", (int)err, (int)want);
    if (err || want) return;
    FZ_CHECK(ne2 == ne && nc2 == nc && !memcmp(k, k2, nc * sizeof *k), "kept index: %zu entries, %zu chunks", ne2, nc2);
    for (size_t i = 0; i < ne && i < ne2; i++)
        FZ_CHECK(ctr_entry_same(&e[i], &e2[i]) && e[i].length == e2[i].length && e[i].nchunks == e2[i].nchunks &&
                     (!(e[i].flags & CTR_ENTRY_LOSSY) || !memcmp(&e[i].lossy, &e2[i].lossy, sizeof e[i].lossy)),
                 "kept index: entry %zu differs", i);
    if (kept) free(k2);
    else ctr_entries_free(e2, ne2), free(k2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 17) return 0;
    uint64_t index_offset = fz_le(data, 8), original = fz_le(data + 8, 8);
    unsigned ff = data[16] & 15;
    size_t len = size - 17;
    uint8_t *in = fz_copy(data + 17, len);
    ckpz_ctx *c = fz_ctx();
    ctr_entry *e = (ctr_entry *)1;
    ctr_chunkrec *k = (ctr_chunkrec *)1;
    size_t ne = 99, nc = 99;
    ckpz_error err = ctr_index_read(c, NULL, in, len, index_offset, original, (size_t)1 << 20, ff, &e, &ne, &k, &nc);
    fz_need_msg(c, err, "ctr_index_read");
    check_kept(in, len, index_offset, original, ff, err, e, ne, k, nc);
    if (err) {
        FZ_CHECK(!e && !k && !ne && !nc, "index: failed but returned entries or chunks");
        free(in);
        return 0;
    }
    uint64_t at = 0, chunk = 0, frame_end = CTR_HEADER_SIZE;
    unsigned allowed = ((ff & CTR_FILE_BASED) ? CTR_ENTRY_BASED : 0u) | ((ff & CTR_FILE_LOSSY) ? CTR_ENTRY_LOSSY : 0u) |
                       ((ff & CTR_FILE_PACKED) ? CTR_ENTRY_PACKED : 0u);
    uint64_t group = 0; /* bytes of the packed entries before the current one */
    for (size_t i = 0; i < ne; i++) {
        FZ_CHECK(e[i].offset == at && e[i].first_chunk == chunk && e[i].nchunks <= nc - chunk,
                 "index: entry %zu at %llu, chunks %llu+%llu", i, (unsigned long long)e[i].offset,
                 (unsigned long long)e[i].first_chunk, (unsigned long long)e[i].nchunks);
        FZ_CHECK(!(e[i].flags & ~allowed) && e[i].dtype < CKPZ_DTYPE_COUNT_ && e[i].ndim <= CTR_MAX_NDIM,
                 "index: entry %zu: flags %u dtype %u ndim %u", i, e[i].flags, e[i].dtype, e[i].ndim);
        uint64_t sum = 0;
        for (uint64_t j = 0; j < e[i].nchunks; j++) sum += k[chunk + j].raw_len;
        if (e[i].flags & CTR_ENTRY_PACKED) {
            FZ_CHECK(!e[i].nchunks && e[i].length && i + 1 < ne, "index: packed entry %zu owns chunks", i);
            group += e[i].length;
        } else {
            FZ_CHECK(!group || (e[i].nchunks >= 1 && k[chunk].raw_len > group),
                     "index: the owner %zu of a group has %llu chunks, the first not holding the group", i,
                     (unsigned long long)e[i].nchunks);
            FZ_CHECK(sum == e[i].length + group, "index: entry %zu: chunks add up to %llu, length %llu + %llu packed",
                     i, (unsigned long long)sum, (unsigned long long)e[i].length, (unsigned long long)group);
            group = 0;
        }
        at += e[i].length;
        chunk += e[i].nchunks;
    }
    FZ_CHECK(at == original && chunk == nc, "index: entries cover %llu of %llu bytes, %llu of %zu chunks",
             (unsigned long long)at, (unsigned long long)original, (unsigned long long)chunk, nc);
    for (size_t j = 0; j < nc; j++) {
        FZ_CHECK(k[j].frame_offset >= frame_end && k[j].frame_len >= CTR_FRAME_SIZE && k[j].raw_len &&
                     k[j].frame_offset + k[j].frame_len <= index_offset,
                 "index: seek record %zu at %llu + %u", j, (unsigned long long)k[j].frame_offset, k[j].frame_len);
        frame_end = k[j].frame_offset + k[j].frame_len;
    }
    if (ff & CTR_FILE_CODED) {
        uint8_t *out;
        size_t olen, ne2, nc2;
        ctr_entry *e2;
        ctr_chunkrec *k2;
        if (ctr_index_encode(c, NULL, e, ne, k, nc, &out, &olen)) fz_die("out of memory");
        ctx_clear(c);
        err = ctr_index_read(c, NULL, out, olen, index_offset, original, (size_t)1 << 20, ff, &e2, &ne2, &k2, &nc2);
        FZ_CHECK(!err && ne2 == ne && nc2 == nc, "coded index: not read back after coding again: %s",
                 ckpz_ctx_message(c));
        for (size_t i = 0; i < ne; i++)
            FZ_CHECK(ctr_entry_same(&e[i], &e2[i]) && e[i].length == e2[i].length && e[i].nchunks == e2[i].nchunks &&
                         !memcmp(&e[i].lossy, &e2[i].lossy, sizeof e[i].lossy),
                     "coded index: entry %zu read back differently", i);
        FZ_CHECK(!memcmp(k, k2, nc * sizeof *k), "coded index: seek table read back differently");
        ctr_entries_free(e2, ne2);
        free(k2);
        free(out);
    } else {
        FZ_CHECK(ctr_index_size(e, ne, nc) == len, "index: %zu bytes, ctr_index_size %zu", len,
                 ctr_index_size(e, ne, nc));
        uint8_t *out = malloc(len ? len : 1);
        if (!out) fz_die("out of memory");
        ctr_index_write(out, e, ne, k, nc);
        size_t d = fz_diff(in, out, len);
        FZ_CHECK(d == len, "index: written back differently at byte %zu of %zu", d, len);
        free(out);
    }
    for (size_t i = 0; i < ne; i++) ctr_entry_clear(&e[i]);
    free(e);
    free(k);
    free(in);
    return 0;
}
