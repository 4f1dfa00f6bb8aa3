/* zstd_backend.c — the ENT_ZSTD codec: one plain zstd frame per plane.
 *
 * Headers and integer planes have repeats that an order-0/1 coder cannot see, so zstd
 * stays available for them (and for any plane at high levels). The contexts live in
 * ent_ctx so that a thread creates them once; the decoder accepts a frame only if it
 * decodes to exactly n bytes with nothing left over.
 */
#include <zstd.h>

#include "ent_internal.h"

size_t zstd_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                   int level)
{
    if (!c->zc && !(c->zc = ZSTD_createCCtx()))
        return 0;
    int zl = level <= 3 ? 3 : level <= 6 ? 9 : 19;
    size_t r = ZSTD_compressCCtx((ZSTD_CCtx *)c->zc, dst, cap, src, n, zl);
    if (ZSTD_isError(r) || r >= n)
        return 0;
    return r;
}

int zstd_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    if (!c->zd && !(c->zd = ZSTD_createDCtx()))
        return -1;
    /* Exactly one frame, declaring exactly n bytes (the encoder always declares it). */
    if (ZSTD_findFrameCompressedSize(src, srclen) != srclen)
        return -1;
    unsigned long long fs = ZSTD_getFrameContentSize(src, srclen);
    if (fs != (unsigned long long)n)
        return -1;
    size_t r = ZSTD_decompressDCtx((ZSTD_DCtx *)c->zd, dst, n, src, srclen);
    if (ZSTD_isError(r) || r != n)
        return -1;
    return 0;
}

void zstd_free_ctx(ent_ctx *c)
{
    ZSTD_freeCCtx((ZSTD_CCtx *)c->zc);
    ZSTD_freeDCtx((ZSTD_DCtx *)c->zd);
    c->zc = c->zd = NULL;
}
