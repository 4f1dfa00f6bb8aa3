/* test_q8.c — transform q8 (lib/transforms/q8.c) on GGML Q8_0 blocks, as codec.c routes
 * chunks to it: blocks quantised as GGML does (scale = largest magnitude / 127, quants
 * rounded) restore bit for bit at every phase and tail (the bytes before the first whole
 * block and after the last, as a chunk cut from a tensor at any byte has them), by the
 * portable merge, the AVX2 one and the AVX-512 one (where the CPU has them) alike, with
 * transform q8 and the true phase in the frame and a frame smaller than the same bytes
 * coded as one plane;
 * bytes that are not Q8_0 (random, int8 values not scaled to 127, too few blocks) are
 * declined and coded as before. Hostile frames are refused with a message: a payload cut
 * short (a plane, and so its last block, truncated), a phase of 34, a plane count of 6,
 * a header plane not stored, and a flipped quant bit (the restored bytes' checksum). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "codec/codec.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "isa.h"
#include "testutil.h"
#include "transforms/ids.h"

/* n bytes of a Q8_0 block stream starting phase bytes into a block: weights ~ N(0, 0.02)
 * with a row of outliers now and then, quantised as GGML's quantize_row_q8_0. */
static void q8_bytes(uint8_t *out, size_t n, size_t phase)
{
    size_t total = n + phase + 34;
    uint8_t *s = malloc(total);
    for (size_t b = 0; b + 34 <= total; b += 34) {
        float x[32], amax = 0;
        for (int i = 0; i < 32; i++) {
            x[i] = (float)(0.02 * rng_normal() * (rng() % 50 ? 1.0 : 4.0));
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        }
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        _Float16 h = (_Float16)d;
        memcpy(s + b, &h, 2);
        for (int i = 0; i < 32; i++) s[b + 2 + i] = (uint8_t)(int8_t)lrintf(x[i] * id);
    }
    memcpy(out, s + (34 - phase) % 34, n);
    free(s);
}

typedef struct {
    ent_ctx *ec;
    ckpz_ctx *cx;
    uint8_t *planes, *frame, *out;
} kit;

/* Codes raw as a stand-alone chunk of dtype dt and reads its frame header; the frame's
 * length, 0 on failure. */
static size_t code(kit *k, ckpz_dtype dt, const uint8_t *raw, size_t n, ctr_chunk *h)
{
    uint32_t crc;
    size_t len = chunk_encode_alone(k->ec, 3, dt, 0, raw, n, k->planes, k->frame, &crc);
    if (!len || ctr_chunk_read(k->cx, k->frame, CKPZ_CHUNK_MAX, len, "chunk", h) != CKPZ_OK) return 0;
    return len;
}

/* stream: the blocks merged in the scratch's bounce slice and streamed out, as a whole
 * restore in memory writes them (chunk_decode_to). */
static ckpz_error decode_to(kit *k, const ctr_chunk *h, int stream, char *why, size_t whylen)
{
    memset(k->out, 0xa5, h->raw_len);
    why[0] = 0;
    return chunk_decode_to(k->ec, h, CKPZ_DTYPE_U8, k->frame + CTR_FRAME_SIZE, NULL, k->planes, k->out, stream, why,
                           whylen);
}

static ckpz_error decode(kit *k, const ctr_chunk *h, char *why, size_t whylen)
{
    return decode_to(k, h, 0, why, whylen);
}

/* Every phase and tail restores exactly through transform q8, smaller than as bytes. */
static void round_trips(kit *k, uint8_t *raw)
{
    static const size_t blocks[] = {16, 97, 30840};
    static const size_t phases[] = {0, 1, 17, 33}, tails[] = {0, 5, 33};
    char why[256];
    for (size_t bi = 0; bi < 3; bi++)
        for (size_t pi = 0; pi < 4; pi++)
            for (size_t ti = 0; ti < 3; ti++) {
                size_t n = phases[pi] + 34 * blocks[bi] + tails[ti];
                q8_bytes(raw, n, phases[pi]);
                ctr_chunk h;
                size_t len = code(k, CKPZ_DTYPE_U8, raw, n, &h);
                CHECKF(len && h.xf == XF_Q8 && h.nplanes == 7, "n %zu phase %zu: transform %u", n, phases[pi], h.xf);
                /* the header plane (stored, after 7 descriptors): the phase found */
                CHECKF(k->frame[CTR_FRAME_SIZE + 7 * 8] == phases[pi], "n %zu: phase %u found, %zu written", n,
                       k->frame[CTR_FRAME_SIZE + 7 * 8], phases[pi]);
                /* every vector path of the merge, and the portable loop, restore the same bytes,
                 * into the output or streamed to it */
                static const char *const isas[3] = {"scalar", "avx2", "avx512"};
                for (int isa = 0; isa < 6; isa++) {
                    int level = force_isa(isas[isa % 3]);
                    ckpz_error e = decode_to(k, &h, isa / 3, why, sizeof why);
                    CHECKF(e == CKPZ_OK && !memcmp(k->out, raw, n), "n %zu phase %zu at %s%s: %s %s", n, phases[pi],
                           cpu_level_name(level), isa / 3 ? ", streamed" : "", ckpz_error_name(e), why);
                }
                if (blocks[bi] == 30840 && ti == 0) {
                    ctr_chunk hb;
                    size_t bytes = 0;
                    uint32_t crc;
                    bytes = chunk_encode(k->ec, 3, CKPZ_DTYPE_NONE, 0, raw, n, NULL, k->planes, k->frame, &crc, NULL);
                    CHECK(ctr_chunk_read(k->cx, k->frame, CKPZ_CHUNK_MAX, bytes, "chunk", &hb) == CKPZ_OK &&
                          hb.xf == XF_NONE);
                    printf("%zu bytes at phase %zu: q8 %zu, as bytes %zu (%.2f%% smaller)\n", n, phases[pi], len, bytes,
                           100.0 * (1.0 - (double)len / (double)bytes));
                    CHECKF(len < bytes - bytes / 400, "q8 frame %zu not 0.25%% under %zu", len, bytes);
                }
            }
}

/* Bytes that are not Q8_0 blocks are declined and still restore. */
static void declines(kit *k, uint8_t *raw)
{
    char why[256];
    size_t n = 34 * 2000;
    for (int c = 0; c < 3; c++) {
        size_t m = c == 2 ? 34 * 15 : n;
        for (size_t i = 0; i < m; i++) raw[i] = (uint8_t)rng();
        if (c == 1) /* int8 values under a scale, never reaching 127 */
            for (size_t i = 0; i < m; i++) raw[i] = (uint8_t)(int8_t)(30.0 * rng_normal());
        if (c == 2) q8_bytes(raw, m, 0); /* 15 blocks: too few */
        ctr_chunk h;
        size_t len = code(k, CKPZ_DTYPE_I8, raw, m, &h);
        CHECKF(len && h.xf != XF_Q8, "case %d: taken as q8", c);
        CHECKF(decode(k, &h, why, sizeof why) == CKPZ_OK && !memcmp(k->out, raw, m), "case %d: %s", c, why);
    }
}

/* Re-seals the payload's checksum after an edit and decodes; the error and its message. */
static ckpz_error broken(kit *k, ctr_chunk *h, char *why, size_t whylen)
{
    h->payload_crc = crc32c(0, k->frame + CTR_FRAME_SIZE, h->payload_len);
    return decode(k, h, why, whylen);
}

static void hostile(kit *k, uint8_t *raw)
{
    size_t n = 5 + 34 * 500 + 7;
    q8_bytes(raw, n, 5);
    char why[256];
    ctr_chunk h, g;
    size_t len = code(k, CKPZ_DTYPE_U8, raw, n, &h);
    CHECK(len && h.xf == XF_Q8);
    uint8_t *keep = malloc(len);
    memcpy(keep, k->frame, len);
    uint8_t *pay = k->frame + CTR_FRAME_SIZE;

    g = h; /* truncated: the last plane's bytes, and then part of the quants, missing */
    g.payload_len -= 20;
    ckpz_error e = broken(k, &g, why, sizeof why);
    printf("payload cut short: %s: %s\n", ckpz_error_name(e), why);
    CHECKF(e == CKPZ_ERR_CORRUPT && strstr(why, "plane"), "cut short: %s %s", ckpz_error_name(e), why);

    g = h; /* phase 34 */
    pay[7 * 8] = 34;
    e = broken(k, &g, why, sizeof why);
    CHECKF(e == CKPZ_ERR_CORRUPT && strstr(why, "q8 phase 34"), "phase 34: %s %s", ckpz_error_name(e), why);
    memcpy(k->frame, keep, len);

    g = h; /* six planes */
    g.nplanes = 6;
    e = broken(k, &g, why, sizeof why);
    CHECKF(e == CKPZ_ERR_CORRUPT && strstr(why, "invalid q8 chunk"), "6 planes: %s %s", ckpz_error_name(e), why);

    g = h; /* header plane not stored: codec byte of descriptor 0 */
    pay[0] = 1;
    e = broken(k, &g, why, sizeof why);
    CHECKF(e == CKPZ_ERR_CORRUPT && strstr(why, "header not stored"), "header coded: %s %s", ckpz_error_name(e), why);
    memcpy(k->frame, keep, len);

    g = h; /* one bit of the stored low fields flipped: the restored bytes' checksum */
    pay[len - CTR_FRAME_SIZE - 20] ^= 4;
    e = broken(k, &g, why, sizeof why);
    CHECKF(e == CKPZ_ERR_CHECKSUM && strstr(why, "checksum"), "bit flip: %s %s", ckpz_error_name(e), why);
    memcpy(k->frame, keep, len);
    CHECK(decode(k, &h, why, sizeof why) == CKPZ_OK && !memcmp(k->out, raw, n));
    free(keep);
}

int main(void)
{
    size_t cap = 34 * 30840 + 80;
    kit k = {ent_ctx_create(), ckpz_ctx_create(), malloc(chunk_planes_bound(cap, 0)), malloc(chunk_frame_bound(cap)),
             malloc(cap)};
    uint8_t *raw = malloc(cap);
    round_trips(&k, raw);
    declines(&k, raw);
    hostile(&k, raw);
    free(raw), free(k.planes), free(k.frame), free(k.out);
    ent_ctx_free(k.ec);
    ckpz_ctx_free(k.cx);
    return test_summary("test_q8");
}
