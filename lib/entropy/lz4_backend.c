/* lz4_backend.c — the ENT_LZ4 codec (id 5): one LZ4 block per plane, lz4's raw block
 * format without a frame (the plane's size is known from its chunk).
 *
 * For links so fast that zstd's speed, not the bytes, is the limit: LZ4 decodes at
 * several GB/s a core. Levels 1-3 use the fast coder, 4-6 LZ4HC level 6 and 7-9 LZ4HC
 * level 12; their states live in the ent_ctx, allocated on first use. The decoder
 * takes a block only if it decodes to exactly n bytes from exactly its coded bytes
 * (LZ4_decompress_safe never reads or writes outside the buffers, and a block must end
 * on its last literals at the end of its input).
 */
#include <limits.h>
#include <lz4.h>
#include <lz4hc.h>
#include <stdlib.h>

#include "ent_internal.h"

typedef struct {
    void *fast, *hc; /* LZ4_compress_fast_extState's and LZ4_compress_HC_extStateHC's */
} lz4_state;

static size_t lz4_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    if (n > LZ4_MAX_INPUT_SIZE) return 0;
    lz4_state *z = c->state[ENT_LZ4];
    if (!z && !(z = c->state[ENT_LZ4] = calloc(1, sizeof *z))) return 0;
    int hc = level >= 4;
    void **st = hc ? &z->hc : &z->fast;
    if (!*st && !(*st = malloc(hc ? (size_t)LZ4_sizeofStateHC() : (size_t)LZ4_sizeofState()))) return 0;
    /* anything not below n loses to stored */
    int lim = (int)(cap < n ? cap : n - 1);
    int r = hc ? LZ4_compress_HC_extStateHC(*st, (const char *)src, (char *)dst, (int)n, lim, level <= 6 ? 6 : 12)
               : LZ4_compress_fast_extState(*st, (const char *)src, (char *)dst, (int)n, lim, 1);
    return r > 0 ? (size_t)r : 0;
}

static int lz4_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    (void)c;
    if (srclen == 0 || srclen > INT_MAX || n > INT_MAX) return -1;
    int r = LZ4_decompress_safe((const char *)src, (char *)dst, (int)srclen, (int)n);
    return r >= 0 && (size_t)r == n ? 0 : -1;
}

static void lz4_free(ent_ctx *c)
{
    lz4_state *z = c->state[ENT_LZ4];
    if (z) {
        free(z->fast);
        free(z->hc);
        free(z);
        c->state[ENT_LZ4] = NULL;
    }
}

const ent_codec_desc ent_lz4_codec = {
    .id = ENT_LZ4,
    .name = "lz4",
    .encode = lz4_encode,
    .decode = lz4_decode,
    .free = lz4_free,
};
