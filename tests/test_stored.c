/* test_stored.c — stored chunks (CKPZ_LEVEL_STORE, codec.c's encode_stored and its
 * decoder's one-pass check, decode_stored): the frame is the container's ordinary
 * stored frame (payload = one plane descriptor + the bytes, payload CRC over both, taken
 * here independently), the same whether the bytes were read into the frame
 * (CHUNK_STORED_AT) or copied there; it restores; and the decoder refuses a frame whose
 * bytes, payload CRC or chunk CRC disagree, each with the general path's message. A
 * frame that only looks stored (a descriptor length that is not the chunk's) takes the
 * general path and is refused there. */
#define CKPZ_EXPERIMENTAL /* CKPZ_LEVEL_STORE */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "codec/codec.h"
#include "common/bytes.h"
#include "common/crc32c.h"

/* Reads the frame header back (its own checksum checked); 0 on success. */
static int header(const uint8_t *frame, size_t n, ctr_chunk *h)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_error e = ctr_chunk_read(ctx, frame, 1u << 20, chunk_frame_bound(n), "test", h);
    if (e) printf("header: %s\n", ckpz_ctx_message(ctx));
    ckpz_ctx_free(ctx);
    return e;
}

/* Decodes frame (n original bytes) into out; the error, and the reason in why. */
static ckpz_error decode(const uint8_t *frame, size_t n, uint8_t *out, char *why, size_t whylen)
{
    ctr_chunk h;
    if (header(frame, n, &h)) return CKPZ_ERR_CORRUPT;
    ent_ctx *ec = ent_ctx_create();
    uint8_t *planes = malloc(chunk_planes_bound(n, 0));
    why[0] = 0;
    ckpz_error e = chunk_decode(ec, &h, CKPZ_DTYPE_F32, frame + CTR_FRAME_SIZE, NULL, planes, out, why, whylen);
    free(planes);
    ent_ctx_free(ec);
    return e;
}

/* Rewrites the header of frame with h (the header's own CRC resealed by the writer). */
static void reseal(uint8_t *frame, const ctr_chunk *h) { ctr_chunk_write(frame, h); }

static void one_size(size_t n)
{
    size_t bound = chunk_frame_bound(n);
    uint8_t *raw = malloc(n), *a = malloc(bound), *b = malloc(bound), *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) raw[i] = (uint8_t)rng();
    uint32_t ca, cb;
    char why[200];
    /* copied into the frame, and read into it first */
    size_t la = chunk_encode(NULL, CKPZ_LEVEL_STORE, CKPZ_DTYPE_F32, 7, raw, n, NULL, NULL, a, &ca, NULL);
    memcpy(b + CHUNK_STORED_AT, raw, n);
    size_t lb = chunk_encode(NULL, CKPZ_LEVEL_STORE, CKPZ_DTYPE_F32, 7, b + CHUNK_STORED_AT, n, NULL, NULL, b, &cb,
                             NULL);
    CHECKF(la == CTR_FRAME_SIZE + CTR_PLANE_DESC + n && lb == la && ca == cb && !memcmp(a, b, la),
           "%zu bytes: in the frame and copied differ (%zu, %zu)", n, la, lb);
    ctr_chunk h;
    CHECK(header(a, n, &h) == 0);
    const uint8_t *pl = a + CTR_FRAME_SIZE;
    CHECKF(h.raw_len == n && h.payload_len == CTR_PLANE_DESC + n && h.nplanes == 1 && h.raw_crc == crc32c(0, raw, n) &&
               ca == h.raw_crc && h.payload_crc == crc32c(0, pl, h.payload_len) && pl[0] == ENT_STORED &&
               ld32(pl + 4) == n && !memcmp(pl + CTR_PLANE_DESC, raw, n),
           "%zu bytes: not a stored frame", n);

    memset(out, 0xA5, n + 1);
    CHECKF(decode(a, n, out, why, sizeof why) == CKPZ_OK && !memcmp(out, raw, n) && out[n] == 0xA5,
           "%zu bytes: restored wrong (%s)", n, why);

    /* a byte of the bytes changed: the payload's CRC */
    a[CHUNK_STORED_AT + n / 2] ^= 0x10;
    CHECKF(decode(a, n, out, why, sizeof why) == CKPZ_ERR_CHECKSUM && strstr(why, "compressed data checksum"),
           "%zu bytes: a changed byte: %s", n, why);
    a[CHUNK_STORED_AT + n / 2] ^= 0x10;
    /* the payload's CRC changed (the header resealed) */
    ctr_chunk k = h;
    k.payload_crc ^= 1;
    reseal(a, &k);
    CHECKF(decode(a, n, out, why, sizeof why) == CKPZ_ERR_CHECKSUM && strstr(why, "compressed data checksum"),
           "%zu bytes: a changed payload CRC: %s", n, why);
    /* the chunk's CRC changed, the payload's intact: the restored bytes' check */
    k = h;
    k.raw_crc ^= 1;
    reseal(a, &k);
    CHECKF(decode(a, n, out, why, sizeof why) == CKPZ_ERR_CHECKSUM && strstr(why, "decoded data checksum"),
           "%zu bytes: a changed chunk CRC: %s", n, why);
    reseal(a, &h);
    /* the descriptor's length not the chunk's (payload CRC resealed): the general path,
     * which finds the plane longer than the payload */
    st32(a + CTR_FRAME_SIZE + 4, (uint32_t)n + 1);
    k = h;
    k.payload_crc = crc32c(0, a + CTR_FRAME_SIZE, h.payload_len);
    reseal(a, &k);
    CHECKF(decode(a, n, out, why, sizeof why) == CKPZ_ERR_CORRUPT && strstr(why, "exceeds the payload"),
           "%zu bytes: a descriptor's length: %s", n, why);
    free(raw), free(a), free(b), free(out);
}

int main(void)
{
    static const size_t sizes[] = {1, 63, 64, 255, 256, 1000, 4096, 65537, 1u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) one_size(sizes[i]);
    return test_summary("test_stored");
}
