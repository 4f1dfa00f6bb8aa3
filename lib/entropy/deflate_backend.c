/* deflate_backend.c — the ENT_DEFLATE codec (id 7): each plane as one raw deflate stream
 * (RFC 1951, no zlib or gzip wrapper), coded with libdeflate.
 *
 * Deflate is the codec every platform can read (zlib, browsers, Java); libdeflate codes
 * whole buffers two to three times faster than zlib. Levels 1-3 use libdeflate's level
 * 1, 4-6 its 6 and 7-9 its 12; a compressor for the current level and a decompressor
 * live in the ent_ctx. The decoder takes a stream only if it decodes to exactly n bytes
 * and ends exactly at its last coded byte (libdeflate checks every code and distance
 * against its buffers).
 */
#include <libdeflate.h>
#include <stdlib.h>

#include "ent_internal.h"

typedef struct {
    struct libdeflate_compressor *c;
    int level; /* c's */
    struct libdeflate_decompressor *d;
} deflate_state;

static deflate_state *state(ent_ctx *c)
{
    if (!c->state[ENT_DEFLATE]) c->state[ENT_DEFLATE] = calloc(1, sizeof(deflate_state));
    return c->state[ENT_DEFLATE];
}

static size_t deflate_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    deflate_state *z = state(c);
    int dl = level <= 3 ? 1 : level <= 6 ? 6 : 12;
    if (!z) return 0;
    if (z->c && z->level != dl) {
        libdeflate_free_compressor(z->c);
        z->c = NULL;
    }
    if (!z->c && !(z->c = libdeflate_alloc_compressor(dl))) return 0;
    z->level = dl;
    /* anything not below n loses to stored; 0 when it does not fit */
    return libdeflate_deflate_compress(z->c, src, n, dst, cap < n ? cap : n - 1);
}

static int deflate_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    deflate_state *z = state(c);
    if (!z || (!z->d && !(z->d = libdeflate_alloc_decompressor()))) return -1;
    size_t used = 0;
    /* no actual-size pointer: anything but exactly n bytes fails */
    enum libdeflate_result r = libdeflate_deflate_decompress_ex(z->d, src, srclen, dst, n, &used, NULL);
    return r == LIBDEFLATE_SUCCESS && used == srclen ? 0 : -1;
}

static void deflate_free(ent_ctx *c)
{
    deflate_state *z = c->state[ENT_DEFLATE];
    if (z) {
        libdeflate_free_compressor(z->c);
        libdeflate_free_decompressor(z->d);
        free(z);
        c->state[ENT_DEFLATE] = NULL;
    }
}

const ent_codec_desc ent_deflate_codec = {
    .id = ENT_DEFLATE,
    .name = "deflate",
    .encode = deflate_encode,
    .decode = deflate_decode,
    .free = deflate_free,
};
