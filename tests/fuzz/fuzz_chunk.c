/* fuzz_chunk.c — libFuzzer harness for the chunk decoder (lib/codec/codec.c: chunk_decode,
 * chunk_copy_check) with arbitrary frames: every dtype, transform (none, float, int,
 * lossy, escape), element size, plane count, predictor and codec.
 *
 * Input: byte 0 the entry's dtype (% 16); byte 1 flags (bit 0: the entry has base
 * bytes, fuzz_base.h's tiled; bits 1-2: vector level of the first decode, CKPZ_CPU 0
 * scalar, 1 avx2, 2-3 avx512; bit 3 set: at most avx2 for it); bytes 2-4
 * the original length (& 0x1ffff); bytes 5-8 the frame's transform, element size, plane
 * count and predictor; bytes 9-12 the original bytes' CRC; then the payload. The
 * harness writes the frame header (payload CRC computed, so the payload reaches the
 * decoders), and as archive.c does checks it with ctr_chunk_read and decodes it into
 * buffers that end where the original length and the plane scratch end (fz_take; ASan:
 * a write past them).
 * Checks: a failure leaves a message; a copy frame is accepted exactly when the base
 * matches its CRC; a predictor without a base fails. When a decode gets as far as the
 * original bytes' checksum (success, or a mismatch of that CRC only), a second decode
 * of the frame carrying the CRC of what the first produced, at another vector level,
 * into differently prefilled output and plane buffers, must succeed with the same
 * bytes: the decoded chunk depends on the frame alone, every byte of it is written.
 */
#include "../isa.h"
#include "codec/codec.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "entropy/ent_internal.h"
#include "fuzz_base.h"
#include "fuzz_util.h"
#include "transforms/escape.h"
#include "transforms/planes.h"
#include "transforms/predict.h"

static ent_ctx *ec; /* kept between inputs, as a worker keeps its context */
static ckpz_ctx *cx;

static void set_simd(int level, int others)
{
    static const char *const isa[3] = {"scalar", "avx2", "avx512"};
    force_isa(isa[!others && level > 1 ? 1 : level]);
}

static ckpz_error decode(const ctr_chunk *h, ckpz_dtype dt, const uint8_t *payload, const uint8_t *base, uint8_t *out,
                         uint32_t prefill, int level, int others, char *why, size_t whylen)
{
    static fz_buf bp;
    size_t pb = chunk_planes_bound(h->raw_len, h->xf == XF_QUANT);
    uint8_t *planes = fz_take(&bp, pb);
    fz_fill(planes, pb, prefill + 7);
    fz_fill(out, h->raw_len, prefill);
    why[0] = 0;
    set_simd(level, others);
    ckpz_error e = chunk_decode(ec, h, dt, payload, base, planes, out, why, whylen);
    top_isa();
    FZ_CHECK(e == CKPZ_OK || why[0], "chunk_decode failed with %s but left no message", ckpz_error_name(e));
    FZ_CHECK(e == CKPZ_OK || e == CKPZ_ERR_CORRUPT || e == CKPZ_ERR_CHECKSUM || e == CKPZ_ERR_VERSION,
             "chunk_decode: %s (%s)", ckpz_error_name(e), why);
    return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 13) return 0;
    if (!ec && !(ec = ent_ctx_create())) fz_die("ent_ctx_create failed");
    if (!cx && !(cx = ckpz_ctx_create())) fz_die("ckpz_ctx_create failed");
    ckpz_dtype dt = (ckpz_dtype)(data[0] % 16);
    unsigned flags = data[1];
    ctr_chunk h = {0};
    h.raw_len = (uint32_t)fz_le(data + 2, 3) & 0x1ffff;
    h.xf = data[5];
    h.esize = data[6];
    h.nplanes = data[7];
    h.pred = data[8];
    h.raw_crc = (uint32_t)fz_le(data + 9, 4);
    h.payload_len = (uint32_t)(size - 13);
    static fz_buf bpay, bbase, bout, bout2;
    uint8_t *payload = fz_take_copy(&bpay, data + 13, size - 13);
    h.payload_crc = crc32c(0, payload, h.payload_len);

    uint8_t frame[CTR_FRAME_SIZE];
    ctr_chunk_write(frame, &h);
    uint32_t cs = h.raw_len <= CKPZ_CHUNK_MIN ? CKPZ_CHUNK_MIN : (h.raw_len + 7) & ~7u;
    ctr_chunk c;
    ctx_clear(cx);
    ckpz_error e = ctr_chunk_read(cx, frame, cs, chunk_frame_bound(cs) - CTR_FRAME_SIZE, "chunk 0", &c);
    FZ_CHECK(e == CKPZ_OK || ckpz_ctx_message(cx)[0], "ctr_chunk_read failed without a message");
    if (e) return 0;
    uint8_t *base = NULL;
    if (flags & 1) {
        base = fz_take(&bbase, c.raw_len);
        for (size_t i = 0; i < c.raw_len; i += FUZZ_BASE_BYTES)
            memcpy(base + i, fuzz_base(), c.raw_len - i < FUZZ_BASE_BYTES ? c.raw_len - i : FUZZ_BASE_BYTES);
    }
    char why[256];
    if (c.pred == PRED_COPY) {
        why[0] = 0;
        e = chunk_copy_check(&c, base, why, sizeof why);
        FZ_CHECK(e == CKPZ_OK || why[0], "chunk_copy_check failed without a message");
        FZ_CHECK((e == CKPZ_OK) == (base && crc32c(0, base, c.raw_len) == c.raw_crc),
                 "chunk_copy_check: %s for a copy frame", ckpz_error_name(e));
    } else {
        int l1 = (int)((flags >> 1) & 3) > 2 ? 2 : (int)((flags >> 1) & 3), o1 = !((flags >> 3) & 1);
        uint8_t *out = fz_take(&bout, c.raw_len), *out2 = fz_take(&bout2, c.raw_len);
        e = decode(&c, dt, payload, base, out, 1, l1, o1, why, sizeof why);
        if (c.pred != PRED_NONE && !base)
            FZ_CHECK(e != CKPZ_OK, "a chunk with predictor %u decoded without a base", c.pred);
        if (e == CKPZ_OK || (e == CKPZ_ERR_CHECKSUM && !strcmp(why, "decoded data checksum mismatch"))) {
            ctr_chunk c2 = c;
            c2.raw_crc = crc32c(0, out, c.raw_len);
            char why2[256];
            ckpz_error e2 = decode(&c2, dt, payload, base, out2, 2, (l1 + 1) % 3, !o1, why2, sizeof why2);
            FZ_CHECK(e2 == CKPZ_OK, "the chunk decoded (%s), but not again with the CRC of what it decoded to: %s",
                     ckpz_error_name(e), why2);
            size_t k = 0;
            while (k < c.raw_len && out[k] == out2[k]) k++;
            FZ_CHECK(k == c.raw_len, "two decodes of the chunk differ at byte %zu of %u", k, c.raw_len);
        }
    }
    return 0;
}
