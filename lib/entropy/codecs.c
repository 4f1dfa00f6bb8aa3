/* codecs.c — the codec registry: one row per codec id the container records in a plane
 * descriptor (doc/format.md, "Codecs", and its reserved id ranges), with its name, its
 * encoder and decoder, an estimate of its coded size where one is cheaper than coding,
 * and the release of whatever it keeps in an ent_ctx. The selector (select.c) picks
 * codecs through these rows and the decoder dispatches through them, so a new back end
 * is one file (its descriptor: zstd_backend.c, lz4_backend.c, snappy_backend.c,
 * deflate_backend.c) and one row here; an id without a row is a codec this build does
 * not have, which the container reports as "written by a newer ckpz", not as corruption.
 */
#include <stdlib.h>
#include <string.h>

#include "rans_ctx.h"
#include "rans_ctxm.h"

static size_t stored_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)c, (void)level;
    if (cap < n) /* broken contract (cap < ent_bound): never write past dst */
        return 0;
    if (n) memcpy(dst, src, n);
    return n;
}

static int stored_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    (void)c;
    if (srclen != n) return -1;
    if (n) memcpy(dst, src, n);
    return 0;
}

static size_t const_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)c, (void)level;
    for (size_t i = 1; i < n; i++)
        if (src[i] != src[0]) return 0;
    if (n == 0 || cap < 1) return 0;
    dst[0] = src[0];
    return 1;
}

static int const_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    (void)c;
    if (srclen != 1 || n == 0) return -1;
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

static const ent_codec_desc stored_codec = {
    .id = ENT_STORED,
    .name = "stored",
    .encode = stored_encode,
    .decode = stored_decode,
};
static const ent_codec_desc const_codec = {
    .id = ENT_CONST,
    .name = "const",
    .encode = const_encode,
    .decode = const_decode,
};
static const ent_codec_desc rans0_codec = {
    .id = ENT_RANS0,
    .name = "rans0",
    .encode = rans0_encode,
    .decode = rans0_decode,
    .estimate = rans0_estimate,
};
static const ent_codec_desc rans0t_codec = {
    .id = ENT_RANS0T,
    .name = "rans0t",
    .encode = rans0t_encode,
    .decode = rans0t_decode,
    .estimate = rans0_estimate,
};
static const ent_codec_desc rans0s_codec = {
    .id = ENT_RANS0S,
    .name = "rans0s",
    .encode = rans0s_encode,
    .decode = rans0s_decode,
    .estimate = rans0_estimate,
};
static const ent_codec_desc rans1_codec = {
    .id = ENT_RANS1,
    .name = "rans1",
    .encode = rans1_code,
    .decode = rans1_decode,
    .estimate = rans1_estimate,
};

static const ent_codec_desc ransctx_codec = {
    .id = ENT_RANSCTX,
    .name = "ransctx",
    .encode = rc_encode,
    .decode = rc_decode,
    .estimate = rc_estimate,
    .free = rc_free,
};

static const ent_codec_desc ransctxm_codec = {
    .id = ENT_RANSCTXM,
    .name = "ransmean",
    .encode = rm_encode,
    .decode = rm_decode,
    .estimate = rm_estimate,
    .free = rm_free,
};

/* clang-format off */
static const ent_codec_desc *const codecs[ENT_CODEC_LIMIT] = {
    [ENT_STORED] = &stored_codec,
    [ENT_CONST] = &const_codec,
    [ENT_RANS0] = &rans0_codec,
    [ENT_RANS1] = &rans1_codec,
    [ENT_ZSTD] = &ent_zstd_codec,
    [ENT_LZ4] = &ent_lz4_codec,
    [ENT_SNAPPY] = &ent_snappy_codec,
    [ENT_DEFLATE] = &ent_deflate_codec,
    [ENT_RANSCTX] = &ransctx_codec,
    [ENT_RANS0S] = &rans0s_codec,
    [ENT_RANSCTXM] = &ransctxm_codec,
    [ENT_RANS0T] = &rans0t_codec,
};
/* clang-format on */

const ent_codec_desc *ent_codec_get(unsigned id) { return id < ENT_CODEC_LIMIT ? codecs[id] : NULL; }

const char *ent_codec_name(uint8_t codec)
{
    const ent_codec_desc *d = ent_codec_get(codec);
    return d ? d->name : "unknown";
}

/* ---- the public coder choice (ckpz_params.codec) --------------------------------------
 * AUTO and RANS are the selector's policies; every other choice is one back end, whose
 * name is its registry row's. */
static const uint8_t choice_codec[CKPZ_CODEC_COUNT_] = {[CKPZ_CODEC_ZSTD] = ENT_ZSTD,
                                                        [CKPZ_CODEC_LZ4] = ENT_LZ4,
                                                        [CKPZ_CODEC_SNAPPY] = ENT_SNAPPY,
                                                        [CKPZ_CODEC_DEFLATE] = ENT_DEFLATE};

const char *ckpz_codec_name(ckpz_codec choice)
{
    if ((unsigned)choice >= CKPZ_CODEC_COUNT_) return NULL;
    if (choice == CKPZ_CODEC_AUTO) return "auto";
    if (choice == CKPZ_CODEC_RANS) return "rans";
    return ent_codec_name(choice_codec[choice]);
}

ckpz_codec ckpz_codec_from_name(const char *name)
{
    for (int k = 0; name && k < CKPZ_CODEC_COUNT_; k++)
        if (!strcmp(name, ckpz_codec_name((ckpz_codec)k))) return (ckpz_codec)k;
    return CKPZ_CODEC_COUNT_;
}

const char *ent_codec_missing(uint8_t codec)
{
    const ent_codec_desc *d = ent_codec_get(codec);
    return !d ? "unknown codec" : d->missing ? d->missing() : NULL;
}

const char *ent_choice_missing(ckpz_codec choice)
{
    return (unsigned)choice < CKPZ_CODEC_COUNT_ && choice_codec[choice] ? ent_codec_missing(choice_codec[choice])
                                                                        : NULL;
}

void ent_ctx_set_codec(ent_ctx *c, ckpz_codec choice)
{
    c->only_rans = choice == CKPZ_CODEC_RANS;
    c->force = (unsigned)choice < CKPZ_CODEC_COUNT_ ? choice_codec[choice] : 0;
}

void ent_ctx_set_lz(ent_ctx *c, int mode) { c->lz = (uint8_t)mode; }

ent_ctx *ent_ctx_create(void) { return calloc(1, sizeof(ent_ctx)); }

void ent_ctx_free(ent_ctx *c)
{
    if (!c) return;
    for (unsigned id = 0; id < ENT_CODEC_LIMIT; id++)
        if (codecs[id] && codecs[id]->free) codecs[id]->free(c);
    free(c->scratch);
    free(c->bhist);
    free(c->o1cnt);
    free(c->o1dtab);
    free(c->o1etab);
    free(c->cand);
    for (unsigned k = 0; k < ENT_KEEP; k++) free(c->keep[k]);
    free(c);
}
