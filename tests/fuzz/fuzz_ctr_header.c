/* fuzz_ctr_header.c — libFuzzer harness for the file header parser
 * (lib/container/format.c: ctr_header_read), on the input's first 32 bytes as they are
 * and resealed (header CRC recomputed). Checks (fuzz_container.h): a failure leaves a
 * message; an accepted header has a valid chunk size, input format and version, and
 * ctr_header_write writes it back byte for byte (headers of versions 1 to 4 are written
 * as version 5, with the feature bits of what they had: the only difference allowed).
 */
#include "fuzz_container.h"

static void one(const uint8_t *in)
{
    ckpz_ctx *c = fz_ctx();
    ctr_header h;
    memset(&h, 0, sizeof h);
    ckpz_error e = ctr_header_read(c, in, &h);
    fz_need_msg(c, e, "ctr_header_read");
    if (e) return;
    FZ_CHECK(h.chunk_size >= CKPZ_CHUNK_MIN && h.chunk_size <= CKPZ_CHUNK_MAX && !(h.chunk_size & 7) &&
                 h.format < CKPZ_INPUT_COUNT_ && h.version >= CTR_VERSION && h.version <= CTR_VERSION_FEAT,
             "header: chunk size %u, format %u, version %u accepted", h.chunk_size, h.format, h.version);
    FZ_CHECK(h.version != CTR_VERSION || (!h.based && !h.lossy), "header: version 1 with flags");
    FZ_CHECK(h.version == CTR_VERSION_FEAT || !h.packed, "header: version %u with packed entries", h.version);
    FZ_CHECK(!(ld16(in + 10) & ~CTR_FEAT_KNOWN) || h.version != CTR_VERSION_FEAT, "header: unknown feature accepted");
    uint8_t out[CTR_HEADER_SIZE];
    ctr_header_write(out, &h);
    if (h.version == CTR_VERSION_FEAT) {
        size_t k = fz_diff(in, out, CTR_HEADER_SIZE);
        FZ_CHECK(k == CTR_HEADER_SIZE, "header: written back differently at byte %zu", k);
    } else {
        unsigned feat = (h.based ? CTR_FEAT_BASE : 0u) | (h.lossy ? CTR_FEAT_LOSSY : 0u);
        FZ_CHECK(!memcmp(in, out, 8) && !memcmp(in + 12, out + 12, 16) && ld16(out + 8) == CTR_VERSION_FEAT &&
                     ld16(out + 10) == feat,
                 "header: version %u written back differently", h.version);
    }
    ctr_header h2;
    FZ_CHECK(ctr_header_read(fz_ctx(), out, &h2) == CKPZ_OK && h2.chunk_size == h.chunk_size && h2.format == h.format &&
                 h2.based == h.based && h2.lossy == h.lossy && h2.packed == h.packed,
             "header: the written header reads differently");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < CTR_HEADER_SIZE) return 0;
    uint8_t *in = fz_copy(data, CTR_HEADER_SIZE);
    one(in);
    st32(in + 28, crc32c(0, in, 28));
    one(in);
    free(in);
    return 0;
}
