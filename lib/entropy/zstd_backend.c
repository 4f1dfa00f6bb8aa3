/* zstd_backend.c — the ENT_ZSTD codec (id 4): one plain zstd frame per plane.
 *
 * Headers and integer planes have repeats that an order-0/1 coder cannot see, so zstd
 * stays available for them (and for any plane at high levels). The contexts live in the
 * ent_ctx so that a thread creates them once; the decoder accepts a frame only if it
 * decodes to exactly n bytes with nothing left over.
 */
#include <stdlib.h>
#include <zstd.h>

#include "ent_internal.h"

typedef struct {
    ZSTD_CCtx *c;
    ZSTD_DCtx *d;
} zstd_state;

static zstd_state *state(ent_ctx *c)
{
    if (!c->state[ENT_ZSTD]) c->state[ENT_ZSTD] = calloc(1, sizeof(zstd_state));
    return c->state[ENT_ZSTD];
}

/* zstd at level zl with the hash table of 2^hash_log entries (and a chain table of
 * 2^chain_log: 0 keeps the level's), where zstd's own sizes, set for large inputs, cost
 * more than they find:
 * - a text header at zstd 1 (one of 64 KiB or more: encode.c, TEXT_FAST_MIN): it repeats
 *   its keys every few tens of bytes, and a small table, which keeps only their latest
 *   places, fits the first-level cache. 1 Ki entries (zstd's own: 16 Ki above 256 KB):
 *   on the 448 KB header of 5,174 small tensors 37.3 KB against 44.5 KB, in 0.29 ms
 *   against 0.47 (4 Ki: 40.4 KB, 0.33 ms); the corpus's other headers (5-18 KB) are
 *   below 64 KiB and coded as before;
 * - an entry list's column (ENT_LZ_LIST) at zstd 6: 4 Ki entries (zstd's own: 64 Ki for a
 *   32 KB column), the same bytes on the columns of every corpus file's lists, ~7% faster
 *   on 4,800 small tensors' and fewer table pages to clear (a chain table of 4 Ki too
 *   made the full.pt files' 6 bytes larger). */
static size_t tables_encode(ZSTD_CCtx *z, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int zl, int hash_log,
                            int chain_log)
{
    size_t e = ZSTD_CCtx_reset(z, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(e)) e = ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, zl);
    if (!ZSTD_isError(e)) e = ZSTD_CCtx_setParameter(z, ZSTD_c_hashLog, hash_log);
    if (!ZSTD_isError(e) && chain_log) e = ZSTD_CCtx_setParameter(z, ZSTD_c_chainLog, chain_log);
    return ZSTD_isError(e) ? e : ZSTD_compress2(z, dst, cap, src, n);
}

static size_t zstd_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    zstd_state *z = state(c);
    if (!z || (!z->c && !(z->c = ZSTD_createCCtx()))) return 0;
    /* A chunk with repeats (ENT_LZ_REPEATS) takes level 6 at the fast levels: its lazy
     * matching found repeated rows' matches in ~6% fewer bytes than level 3 (one 1 MiB
     * chunk of bench/repeats' rows, byte planes: 62.5 KB against 58.5 KB), at a few ms a
     * MiB, and only on chunks that hold repeats. The fast level takes zstd 1 elsewhere: on
     * the zero-run planes of step-300 grads_bf16's embedding it coded the exponents 12%
     * smaller than zstd 3 (the mantissas 0.04% larger), and faster. */
    int zl = level <= 3   ? (c->lz == ENT_LZ_REPEATS || c->lz == ENT_LZ_LIST   ? 6
                             : c->lz == ENT_LZ_TEXT || level <= ENT_FAST_LEVEL ? 1
                                                                               : 3)
             : level <= 6 ? 9
                          : 19;
    size_t r = zl == 1 && c->lz == ENT_LZ_TEXT   ? tables_encode(z->c, src, n, dst, cap, 1, 10, 0)
               : zl == 6 && c->lz == ENT_LZ_LIST ? tables_encode(z->c, src, n, dst, cap, 6, 12, 0)
                                                 : ZSTD_compressCCtx(z->c, dst, cap, src, n, zl);
    if (ZSTD_isError(r) || r >= n) return 0;
    return r;
}

static int zstd_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    zstd_state *z = state(c);
    if (!z || (!z->d && !(z->d = ZSTD_createDCtx()))) return -1;
    /* Exactly one frame, declaring exactly n bytes (the encoder always declares it). */
    if (ZSTD_findFrameCompressedSize(src, srclen) != srclen) return -1;
    unsigned long long fs = ZSTD_getFrameContentSize(src, srclen);
    if (fs != (unsigned long long)n) return -1;
    size_t r = ZSTD_decompressDCtx(z->d, dst, n, src, srclen);
    if (ZSTD_isError(r) || r != n) return -1;
    return 0;
}

static void zstd_free(ent_ctx *c)
{
    zstd_state *z = c->state[ENT_ZSTD];
    if (z) {
        ZSTD_freeCCtx(z->c);
        ZSTD_freeDCtx(z->d);
        free(z);
        c->state[ENT_ZSTD] = NULL;
    }
}

const ent_codec_desc ent_zstd_codec = {
    .id = ENT_ZSTD,
    .name = "zstd",
    .encode = zstd_encode,
    .decode = zstd_decode,
    .free = zstd_free,
};
