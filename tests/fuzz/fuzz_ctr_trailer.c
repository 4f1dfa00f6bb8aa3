/* fuzz_ctr_trailer.c — libFuzzer harness for the trailer parser
 * (lib/container/format.c: ctr_trailer_read). Input: the file size the caller knows
 * (8 bytes, little-endian), then the 40-byte trailer, parsed as it is and resealed
 * (trailer CRC recomputed). Checks (fuzz_container.h): a failure leaves a message; an
 * accepted trailer puts the index between the header and the trailer, ending exactly
 * where the trailer starts, and ctr_trailer_write writes it back byte for byte.
 */
#include "fuzz_container.h"

static void one(const uint8_t *in, uint64_t file_size)
{
    ckpz_ctx *c = fz_ctx();
    ctr_trailer t;
    ckpz_error e = ctr_trailer_read(c, in, file_size, &t);
    fz_need_msg(c, e, "ctr_trailer_read");
    if (e) return;
    FZ_CHECK(file_size >= CTR_TRAILER_SIZE && t.index_offset >= CTR_HEADER_SIZE && t.index_len >= 24 &&
                 t.index_offset <= file_size - CTR_TRAILER_SIZE &&
                 t.index_len == file_size - CTR_TRAILER_SIZE - t.index_offset,
             "trailer: index at %llu + %llu in a file of %llu bytes", (unsigned long long)t.index_offset,
             (unsigned long long)t.index_len, (unsigned long long)file_size);
    uint8_t out[CTR_TRAILER_SIZE];
    ctr_trailer_write(out, &t);
    size_t k = fz_diff(in, out, CTR_TRAILER_SIZE);
    FZ_CHECK(k == CTR_TRAILER_SIZE, "trailer: written back differently at byte %zu", k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8 + CTR_TRAILER_SIZE) return 0;
    uint64_t file_size = fz_le(data, 8);
    uint8_t *in = fz_copy(data + 8, CTR_TRAILER_SIZE);
    one(in, file_size);
    st32(in + 36, crc32c(0, in, 36));
    one(in, file_size);
    free(in);
    return 0;
}
