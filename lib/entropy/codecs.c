/* codecs.c — the codec registry: one row per codec id the container records in a plane
 * descriptor (doc/format.md, "Codecs", and its reserved id ranges), with its name, its
 * encoder and decoder, an estimate of its coded size where one is cheaper than coding,
 * and the release of whatever it keeps in an ent_ctx. The selector (select.c) picks
 * codecs through these rows and the decoder dispatches through them, so a new back end
 * is one file and one row here; an id without a row is a codec this build does not
 * have, which the container reports as "written by a newer ckpz", not as corruption.
 */
#include <stdlib.h>
#include <string.h>

#include "ent_internal.h"

static size_t stored_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)c, (void)level;
    if (cap < n) /* broken contract (cap < ent_bound): never write past dst */
        return 0;
    if (n)
        memcpy(dst, src, n);
    return n;
}

static int stored_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    (void)c;
    if (srclen != n)
        return -1;
    if (n)
        memcpy(dst, src, n);
    return 0;
}

static size_t const_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)c, (void)level;
    for (size_t i = 1; i < n; i++)
        if (src[i] != src[0])
            return 0;
    if (n == 0 || cap < 1)
        return 0;
    dst[0] = src[0];
    return 1;
}

static int const_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    (void)c;
    if (srclen != 1 || n == 0)
        return -1;
    memset(dst, src[0], n);
    return 0;
}

/* Order 0 codes close to the plane's order-0 entropy; its tables are left out. */
static double rans0_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled)
{
    (void)c, (void)src, (void)sampled;
    return ent_bits(hist, n) / 8;
}

static size_t rans1_code(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)level;
    return rans1_encode(c, src, n, dst, cap);
}

#define ROW(id_, name_, enc, dec, est, fr) [id_] = {.id = id_, .name = name_, .encode = enc, .decode = dec, \
                                                   .estimate = est, .free = fr}
static const ent_codec_desc codecs[ENT_CODEC_LIMIT] = {
    ROW(ENT_STORED, "stored", stored_encode, stored_decode, NULL, NULL),
    ROW(ENT_CONST, "const", const_encode, const_decode, NULL, NULL),
    ROW(ENT_RANS0, "rans0", rans0_encode, rans0_decode, rans0_estimate, NULL),
    ROW(ENT_RANS1, "rans1", rans1_code, rans1_decode, rans1_estimate, NULL),
    ROW(ENT_ZSTD, "zstd", zstd_encode, zstd_decode, NULL, zstd_free_ctx),
};
#undef ROW

const ent_codec_desc *ent_codec_get(unsigned id)
{
    return id < ENT_CODEC_LIMIT && codecs[id].encode ? &codecs[id] : NULL;
}

const char *ent_codec_name(uint8_t codec)
{
    const ent_codec_desc *d = ent_codec_get(codec);
    return d ? d->name : "unknown";
}

ent_ctx *ent_ctx_create(void)
{
    return calloc(1, sizeof(ent_ctx));
}

void ent_ctx_free(ent_ctx *c)
{
    if (!c)
        return;
    for (unsigned id = 0; id < ENT_CODEC_LIMIT; id++)
        if (codecs[id].free)
            codecs[id].free(c);
    free(c->scratch);
    free(c->bhist);
    free(c->o1cnt);
    free(c->o1dtab);
    free(c->o1etab);
    free(c->cand);
    free(c);
}
