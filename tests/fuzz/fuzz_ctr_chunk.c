/* fuzz_ctr_chunk.c — libFuzzer harness for the chunk frame header parser
 * (lib/container/format.c: ctr_chunk_read). Input: byte 0 picks the chunk size
 * (64 KiB << (b % 9)) and, with bit 7 set, bytes 1-4 give the payload bound (else
 * chunk_frame_bound's, as the readers pass it); then the 32-byte frame header, parsed
 * as it is and resealed (header CRC recomputed). Checks (fuzz_container.h): a failure
 * leaves a message; an accepted frame has a known predictor, a copy frame no planes
 * and no payload, any other 1..chunk_size original bytes, a payload within the bound
 * that holds its plane descriptors; ctr_chunk_write writes it back byte for byte.
 */
#include "codec/codec.h"
#include "fuzz_container.h"
#include "transforms/planes.h"
#include "transforms/predict.h"

static void one(const uint8_t *in, uint32_t cs, size_t maxp)
{
    ckpz_ctx *c = fz_ctx();
    ctr_chunk h;
    ckpz_error e = ctr_chunk_read(c, in, cs, maxp, "chunk 0", &h);
    fz_need_msg(c, e, "ctr_chunk_read");
    if (e) return;
    FZ_CHECK(h.pred < PRED_COUNT_, "chunk frame: predictor %u", h.pred);
    if (h.pred == PRED_COPY)
        FZ_CHECK(h.raw_len && !h.payload_len && !h.nplanes && h.xf == XF_NONE && h.esize == 1,
                 "chunk frame: copy frame with planes or payload");
    else
        FZ_CHECK(h.raw_len >= 1 && h.raw_len <= cs && h.payload_len <= maxp && h.nplanes >= 1 &&
                     (size_t)h.nplanes * CTR_PLANE_DESC <= h.payload_len,
                 "chunk frame: %u bytes, payload %u (bound %zu), %u planes accepted", h.raw_len, h.payload_len, maxp,
                 h.nplanes);
    uint8_t out[CTR_FRAME_SIZE];
    ctr_chunk_write(out, &h);
    size_t k = fz_diff(in, out, CTR_FRAME_SIZE);
    FZ_CHECK(k == CTR_FRAME_SIZE, "chunk frame: written back differently at byte %zu", k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5 + CTR_FRAME_SIZE) return 0;
    uint32_t cs = CKPZ_CHUNK_MIN << (data[0] % 9);
    size_t maxp = data[0] & 0x80 ? (size_t)fz_le(data + 1, 4) : chunk_frame_bound(cs) - CTR_FRAME_SIZE;
    uint8_t *in = fz_copy(data + 5, CTR_FRAME_SIZE);
    one(in, cs, maxp);
    st32(in + 28, crc32c(0, in, 28));
    one(in, cs, maxp);
    free(in);
    return 0;
}
