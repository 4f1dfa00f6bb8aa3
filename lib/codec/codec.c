/* codec.c — see codec.h. A chunk goes through the transform registry
 * (transforms/xform.h): the transform's encoder turns it (after the predictor, with a
 * base: transforms/predict.h) into planes with their roles, which the entropy stage codes
 * one by one; the decoder looks the frame's transform up and hands it a reader of the
 * coded planes. The payload starts with one 8-byte descriptor per plane (codec, reserved,
 * encoded length) followed by the planes' encoded bytes in order; plane sizes are not
 * stored because the transform derives them from the chunk's original length. Nothing
 * here knows a transform's planes or a codec's bytes: an id the registries do not have
 * is refused as "written by a newer ckpz" (CKPZ_ERR_VERSION), not as corruption.
 */
#include "codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/dtype.h"
#include "common/prefault.h"
#include "repeats.h"
#include "transforms/predict.h"
#include "transforms/quant.h"
#include "transforms/xform.h"

size_t chunk_planes_bound(size_t n, int lossy) { return xf_scratch_bound(n, lossy); }

/* The planes on a cache line's start: the split loops store 64 bytes at a time at
 * plane + 64k, each store one line instead of two (a malloc'd block starts at any
 * 16 bytes: whole-file compression of FP32 weights ran 3-5% slower on some). */
static uint8_t *alloc_line(size_t n)
{
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 1) ? NULL : p;
}

chunk_scratch *chunk_scratch_create(int n, size_t chunk_size, int lossy)
{
    chunk_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n = n;
    s->ec = calloc((size_t)n, sizeof *s->ec);
    s->planes = calloc((size_t)n, sizeof *s->planes);
    s->qw = calloc((size_t)n, sizeof *s->qw);
    s->restored = calloc((size_t)n, sizeof *s->restored);
    if (!s->ec || !s->planes || !s->qw || !s->restored) goto fail;
    for (int i = 0; i < n; i++) {
        if (!(s->ec[i] = ent_ctx_create()) || !(s->planes[i] = alloc_line(chunk_planes_bound(chunk_size, lossy))))
            goto fail;
        if (lossy == CHUNK_SCRATCH_ENCODE_LOSSY &&
            (!(s->qw[i] = quant_work_create()) || !(s->restored[i] = malloc(chunk_size))))
            goto fail;
    }
    return s;
fail:
    chunk_scratch_free(s);
    return NULL;
}

void chunk_scratch_free(chunk_scratch *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        if (s->ec) ent_ctx_free(s->ec[i]);
        if (s->planes) free(s->planes[i]);
        if (s->qw) quant_work_free(s->qw[i]);
        if (s->restored) free(s->restored[i]);
    }
    free(s->ec);
    free(s->planes);
    free(s->qw);
    free(s->restored);
    free(s);
}

size_t chunk_frame_bound(size_t n) { return CTR_FRAME_SIZE + xf_coded_bound(n, CTR_PLANE_DESC); }

/* Codes the transform's planes into the payload after the frame header, each with the
 * entropy stage's choice for its role, and seals the frame: plane descriptors, lengths,
 * checksums. Returns the frame length. */
static size_t code_planes(ent_ctx *ec, int level, ctr_chunk *h, uint32_t entry, size_t n, const xf_out *o, uint8_t *out)
{
    uint8_t *payload = out + CTR_FRAME_SIZE, *dst = payload + (size_t)o->n * CTR_PLANE_DESC;
    uint32_t crc = 0; /* of the planes' bytes, each taken while it is in cache */
    for (unsigned i = 0; i < o->n; i++) {
        uint8_t codec = ENT_STORED;
        size_t len = o->size[i];
        if (o->hint[i] == XF_KEEP) memcpy(dst, o->src[i], len);
        else len = ent_encode(ec, o->src[i], o->size[i], dst, ent_bound(o->size[i]), level, o->hint[i], &codec);
        /* a stored plane's bytes are the plane's, which was just read (the copy may
         * have gone around the cache: mem_copy_far) */
        crc = crc32c(crc, codec == ENT_STORED && len == o->size[i] ? o->src[i] : dst, len);
        uint8_t *d = payload + (size_t)i * CTR_PLANE_DESC;
        d[0] = codec;
        d[1] = d[2] = d[3] = 0;
        st32(d + 4, (uint32_t)len);
        dst += len;
    }
    h->entry = entry;
    h->raw_len = (uint32_t)n;
    h->payload_len = (uint32_t)(dst - payload);
    h->nplanes = (uint8_t)o->n;
    h->payload_crc = crc32c_combine(crc32c(0, payload, (size_t)o->n * CTR_PLANE_DESC), crc,
                                    dst - payload - (size_t)o->n * CTR_PLANE_DESC);
    ctr_chunk_write(out, h);
    return CTR_FRAME_SIZE + h->payload_len;
}

/* Runs the chunk through one predictor's transform (and, for diff residuals with
 * esc_low >= 0, the escape transform with threshold esc_t, keeping esc_low low bytes as
 * plain planes) into its planes *o and the frame header's transform fields *h. */
static void transform(ckpz_dtype dtype, const uint8_t *raw, size_t n, const uint8_t *base, uint8_t pred, int esc_low,
                      unsigned esc_t, uint8_t *planes, uint32_t *raw_crc, uint32_t *base_crc, ctr_chunk *h, xf_out *o)
{
    xf_esc_opt eo = {(unsigned)esc_low, esc_t};
    xf_enc e = {.pred = pred,
                .dtype = dtype,
                .raw = raw,
                .n = n,
                .base = base,
                .scratch = planes,
                .base_crc = base_crc,
                .opt = &eo};
    e.xf = xf_for_chunk(pred, dtype, esc_low, &e.esize);
    xf_get(e.xf)->encode(&e, o, raw_crc); /* lossless transforms take every chunk */
    *h = (ctr_chunk){0};
    h->xf = e.xf;
    h->esize = e.esize;
    h->pred = pred;
    h->raw_crc = *raw_crc;
}

/* Codes the chunk with one predictor (transform's arguments). */
static size_t encode_with(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                          const uint8_t *base, uint8_t pred, int esc_low, unsigned esc_t, uint8_t *planes, uint8_t *out,
                          uint32_t *raw_crc, uint32_t *base_crc)
{
    ctr_chunk h;
    xf_out o;
    transform(dtype, raw, n, base, pred, esc_low, esc_t, planes, raw_crc, base_crc, &h, &o);
    return code_planes(ec, level, &h, entry, n, &o, out);
}

/* The frame of a chunk of one plane, transform none, coded by codec: the descriptor,
 * then the header with the checksums (plane_crc: of the plane_len bytes the caller puts
 * after the descriptor). */
static size_t frame_one_plane(uint32_t entry, size_t n, uint32_t raw_crc, uint8_t codec, uint32_t plane_len,
                              uint32_t plane_crc, uint8_t *out)
{
    ctr_chunk h = {0};
    uint8_t *payload = out + CTR_FRAME_SIZE;
    payload[0] = codec;
    payload[1] = payload[2] = payload[3] = 0;
    st32(payload + 4, plane_len);
    h.xf = XF_NONE;
    h.esize = 1;
    h.pred = PRED_NONE;
    h.raw_crc = raw_crc;
    h.entry = entry;
    h.raw_len = (uint32_t)n;
    h.nplanes = 1;
    h.payload_len = CTR_PLANE_DESC + plane_len;
    h.payload_crc = crc32c_combine(crc32c(0, payload, CTR_PLANE_DESC), plane_crc, plane_len);
    ctr_chunk_write(out, &h);
    return CTR_FRAME_SIZE + h.payload_len;
}

/* CKPZ_LEVEL_STORE: the chunk as it is, one stored plane (XF_NONE, no predictor), so
 * that a link faster than every coding level costs no more than copying and one CRC
 * pass; a base's bytes are not predicted from, only their CRC is taken, as the
 * container records it (the file still names its base). The plane's CRC is the chunk's:
 * the payload's follows from it and its descriptor's (crc32c_combine), not from a second
 * pass; raw read where the frame holds its bytes (CHUNK_STORED_AT) is not copied, other
 * raw is copied as its CRC is taken (crc32c_copy). On 662 MB of torch.save through a
 * pipe, `-0 -T1` had cost 0.4-0.55 s of CPU against `cat`'s 0.2 s: two CRC passes and a
 * copy more than cat's. */
static size_t encode_stored(uint32_t entry, const uint8_t *raw, size_t n, const uint8_t *base, uint8_t *out,
                            uint32_t *raw_crc, uint32_t *base_crc)
{
    uint8_t *data = out + CHUNK_STORED_AT;
    if (base && base_crc) *base_crc = crc32c(0, base, n);
    *raw_crc = raw == data ? crc32c(0, raw, n) : crc32c_copy(0, data, raw, n);
    return frame_one_plane(entry, n, *raw_crc, ENT_STORED, (uint32_t)n, *raw_crc, out);
}

/* A chunk of one byte value n times (a lossy chunk restored as zeros): one constant
 * plane of transform none, 41 bytes, without the coders' passes; 0 when its bytes differ. */
static size_t encode_constant(uint32_t entry, const uint8_t *raw, size_t n, uint8_t *out, uint32_t *raw_crc)
{
    if (!n || memcmp(raw, raw + 1, n - 1)) return 0;
    out[CTR_FRAME_SIZE + CTR_PLANE_DESC] = raw[0];
    *raw_crc = crc32c(0, raw, n);
    return frame_one_plane(entry, n, *raw_crc, ENT_CONST, 1, crc32c(0, raw, 1), out);
}

/* LZ pays on a plane of bytes through repeats, runs of zeros or zero bytes in most of
 * it. Where a sample (repeats.h) of a chunk of 1-byte integers found not one repeat
 * share nor one zero block share (1/256 of the samples) and few zero bytes, the entropy
 * stage, which tries zstd on every integer plane, is left to rANS. On the Q8_0 blocks of
 * a GGUF (int8 values under a per-block scale) zstd never won a chunk and took a third
 * of the file's compression time. LZ content the grid cannot meet (text-like bytes,
 * matches at short irregular distances) would lose it: not seen in checkpoints. Not at
 * levels >= 6, which try zstd on every plane, nor under a codec the caller chose. */
static int lz_cannot_pay(ckpz_dtype dtype, int level, size_t n, unsigned rep, unsigned zero, unsigned zbytes)
{
    const dtype_info *d = dtype_get(dtype);
    return level < 6 && n >= (64u << 10) && d && d->size == 1 && (d->cls == DT_SINT || d->cls == DT_UINT) && !rep &&
           !zero && zbytes < ZERO_BYTES_LZ;
}

/* GGML Q8_0 blocks: a chunk of 1-byte integers that the q8 transform takes (its sample
 * of blocks shows a largest quant magnitude of 127 in nearly all: transforms/q8.c) is
 * coded as its planes, scales apart from the quants' bit fields; 0 where it declines.
 * Not where a sample finds repeats or zero runs, which LZ on the bytes codes better. */
static size_t encode_q8(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                        uint8_t *planes, uint8_t *out, uint32_t *raw_crc)
{
    const dtype_info *d = dtype_get(dtype);
    if (!d || d->size != 1 || (d->cls != DT_SINT && d->cls != DT_UINT)) return 0;
    xf_enc e = {.xf = XF_Q8, .esize = 1, .pred = PRED_NONE, .dtype = dtype, .raw = raw, .n = n, .scratch = planes};
    xf_out o;
    if (xf_get(XF_Q8)->encode(&e, &o, raw_crc) <= 0) return 0;
    ctr_chunk h = {0};
    h.xf = XF_Q8;
    h.esize = 1;
    h.pred = PRED_NONE;
    h.raw_crc = *raw_crc;
    return code_planes(ec, level, &h, entry, n, &o, out);
}

/* A chunk coded alone. Where a sample shows repeated content (repeats.h: rows, blocks),
 * LZ pays where byte planes coded order-0 or stored do not: the chunk is coded as its
 * bytes unsplit (LZ on whole values: quantised blocks, values repeated one by one) and as
 * its planes with zstd tried on every one (repeated rows keep their repeats in each plane,
 * whose literals then cost less than interleaved bytes), and the smaller kept. Where it
 * shows runs of zeros only (padding, rows no gradient reached), the planes alone, zstd
 * tried on every one: the second coding (unsplit, zstd 6 on random bytes) cost more than
 * the ~0.3% it saved on the zero rows of an Adam state's embedding. The chunk is split
 * before it is sampled, so that the sample reads it from cache (an input in memory is
 * coded where it lies: sampled first, its 2,048 scattered loads a MiB were 3-4% of the
 * compression time of FP32 moments). auto_codec: the caller's codec choice is auto. */
static size_t encode_alone(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                           uint8_t *planes, uint8_t *out, uint32_t *raw_crc, int auto_codec)
{
    ctr_chunk h;
    xf_out o;
    transform(dtype, raw, n, NULL, PRED_NONE, -1, 0, planes, raw_crc, NULL, &h, &o);
    unsigned rep, zero, zbytes;
    chunk_repeats(raw, n, &rep, &zero, &zbytes);
    int mode = rep >= REPEATS_LIKELY ? ENT_LZ_REPEATS : zero >= ZEROS_LIKELY ? ENT_LZ_RUNS : ENT_LZ_OFF;
    size_t q8 = mode == ENT_LZ_OFF ? encode_q8(ec, level, dtype, entry, raw, n, planes, out, raw_crc) : 0;
    if (q8) return q8;
    if (mode == ENT_LZ_OFF) {
        int rans = auto_codec && lz_cannot_pay(dtype, level, n, rep, zero, zbytes);
        if (rans) ent_ctx_set_codec(ec, CKPZ_CODEC_RANS);
        size_t len = code_planes(ec, level, &h, entry, n, &o, out);
        if (rans) ent_ctx_set_codec(ec, CKPZ_CODEC_AUTO);
        return len;
    }
    size_t whole = SIZE_MAX, split;
    uint8_t es;
    ent_ctx_set_lz(ec, mode);
    /* unsplit: a candidate; its one plane is raw itself, so the planes stay as split */
    if (mode == ENT_LZ_REPEATS && xf_for_chunk(PRED_NONE, dtype, -1, &es) != XF_NONE)
        whole = encode_with(ec, level, CKPZ_DTYPE_NONE, entry, raw, n, NULL, PRED_NONE, -1, 0, planes, out, raw_crc,
                            NULL);
    split = code_planes(ec, level, &h, entry, n, &o, out);
    if (split > whole)
        split = encode_with(ec, level, CKPZ_DTYPE_NONE, entry, raw, n, NULL, PRED_NONE, -1, 0, planes, out, raw_crc,
                            NULL);
    ent_ctx_set_lz(ec, ENT_LZ_OFF);
    return split;
}

size_t chunk_encode_alone(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                          uint8_t *planes, uint8_t *out, uint32_t *raw_crc)
{
    if (level == CKPZ_LEVEL_STORE) return encode_stored(entry, raw, n, NULL, out, raw_crc, NULL);
    return encode_alone(ec, level, dtype, entry, raw, n, planes, out, raw_crc, 1);
}

/* Under the codec choice auto, zstd alone: on JSON it won against the table coders by
 * far (a 448 KB header of 5,174 tensors: 44 KB against ~290 KB for order 0), and the
 * histogram, estimate and order-0 coding the selector spends first were half of the
 * header's coding time, a tenth of its file's compression. */
size_t chunk_encode_text(ent_ctx *ec, int level, uint32_t entry, const uint8_t *raw, size_t n, uint8_t *planes,
                         uint8_t *out, uint32_t *raw_crc, int auto_codec)
{
    if (level == CKPZ_LEVEL_STORE) return encode_stored(entry, raw, n, NULL, out, raw_crc, NULL);
    ent_ctx_set_lz(ec, ENT_LZ_TEXT);
    if (auto_codec) ent_ctx_set_codec(ec, CKPZ_CODEC_ZSTD);
    size_t len = encode_with(ec, level, CKPZ_DTYPE_NONE, entry, raw, n, NULL, PRED_NONE, -1, 0, planes, out, raw_crc,
                             NULL);
    if (auto_codec) ent_ctx_set_codec(ec, CKPZ_CODEC_AUTO);
    ent_ctx_set_lz(ec, ENT_LZ_OFF);
    return len;
}

size_t chunk_encode(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                    const uint8_t *base, uint8_t *planes, uint8_t *out, uint32_t *raw_crc, uint32_t *base_crc)
{
    if (level == CKPZ_LEVEL_STORE) return encode_stored(entry, raw, n, base, out, raw_crc, base_crc);
    if (!base) return encode_alone(ec, level, dtype, entry, raw, n, planes, out, raw_crc, 0);
    int low;
    unsigned esc_t;
    uint8_t pred = pred_choose(dtype, raw, base, n, &low, &esc_t);
    if (level < 7) {
        size_t len = encode_with(ec, level, dtype, entry, raw, n, base, pred, low, esc_t, planes, out, raw_crc,
                                 base_crc);
        /* The estimate is order-0: it cannot see the zero runs that stand-alone coding
         * turns into almost nothing (sparse gradients). Where a sample of elements is a
         * quarter zero or more, code stand-alone too and keep the smaller. */
        unsigned es = ckpz_dtype_size(dtype), zeros = 0, seen = 0;
        for (size_t at = 0; pred != PRED_NONE && at + 8 <= n; at += 64 * (size_t)es, seen++) {
            uint64_t v; /* one load per sampled element (es <= 8), masked to its size */
            memcpy(&v, raw + at, 8);
            zeros += (es >= 8 ? v : v & ((1ull << (8 * es)) - 1)) == 0;
        }
        if (pred != PRED_NONE && zeros * 4 >= seen && seen) {
            size_t len0 = encode_with(ec, level, dtype, entry, raw, n, NULL, PRED_NONE, -1, 0, planes, out, raw_crc,
                                      NULL);
            if (len0 <= len) return len0;
            len = encode_with(ec, level, dtype, entry, raw, n, base, pred, low, esc_t, planes, out, raw_crc, NULL);
        }
        return len;
    }
    /* Slow levels code every candidate and keep the smallest (coded again if it was not
     * the last). */
    size_t best = SIZE_MAX;
    uint8_t best_pred = PRED_NONE;
    for (uint8_t p = PRED_NONE; p <= PRED_DIFF; p++) {
        size_t len = encode_with(ec, level, dtype, entry, raw, n, base, p, low, esc_t, planes, out, raw_crc,
                                 p == PRED_NONE ? base_crc : NULL);
        if (len < best) {
            best = len;
            best_pred = p;
        }
    }
    if (best_pred != PRED_DIFF)
        best = encode_with(ec, level, dtype, entry, raw, n, base, best_pred, low, esc_t, planes, out, raw_crc, NULL);
    return best;
}

size_t chunk_encode_as(ent_ctx *ec, int level, ckpz_dtype as, ckpz_dtype entry_dtype, uint32_t entry,
                       const uint8_t *raw, size_t n, const uint8_t *base, uint8_t *planes, uint8_t *out,
                       uint32_t *raw_crc, uint32_t *base_crc)
{
    if (!base || level == CKPZ_LEVEL_STORE || dtype_is_float(as) == dtype_is_float(entry_dtype))
        return chunk_encode(ec, level, as, entry, raw, n, base, planes, out, raw_crc, base_crc);
    if (base_crc) *base_crc = crc32c(0, base, n);
    size_t alone = chunk_encode(ec, level, as, entry, raw, n, NULL, planes, out, raw_crc, NULL);
    size_t x = encode_with(ec, level, as, entry, raw, n, base, PRED_XOR, -1, 0, planes, out, raw_crc, NULL);
    return x <= alone ? x : chunk_encode(ec, level, as, entry, raw, n, NULL, planes, out, raw_crc, NULL);
}

/* A lossy frame this small is mostly framing (chunk_encode_lossy). */
#define LOSSY_FRAMING 256

/* A lossy-planned chunk coded lossless after all: it restores as raw, with no error,
 * and its elements still count in the entry's statistics. */
static void restores_exactly(ckpz_dtype dtype, const uint8_t *raw, size_t n, const uint8_t **restored, quant_stats *st)
{
    quant_stats cs;
    quant_stats_init(&cs);
    cs.n = n / ckpz_dtype_size(dtype);
    quant_stats_add(st, &cs);
    *restored = raw;
}

/* The lossy frame of len bytes in out against src coded plain, as `as` (an entry of
 * dtype): the plain frame's length (and *crc) when it is no longer, left in out; 0 when
 * the lossy one stays (put back in out); SIZE_MAX when out of memory. */
static size_t plain_if_smaller(ent_ctx *ec, int level, ckpz_dtype as, ckpz_dtype dtype, uint32_t entry,
                               const uint8_t *src, size_t n, const uint8_t *base, uint8_t *planes, uint8_t *out,
                               size_t len, uint32_t *crc)
{
    uint8_t *lossy = malloc(len);
    if (!lossy) return SIZE_MAX;
    memcpy(lossy, out, len);
    size_t plain = chunk_encode_as(ec, level, as, dtype, entry, src, n, base, planes, out, crc, NULL);
    if (plain && plain <= len) {
        free(lossy);
        return plain;
    }
    memcpy(out, lossy, len);
    free(lossy);
    return 0;
}

size_t chunk_encode_lossy(chunk_scratch *s, int worker, int level, const quant_plan *plan, ckpz_dtype dtype,
                          uint32_t entry, uint64_t elem0, const uint8_t *raw, size_t n, const uint8_t *base,
                          uint8_t *out, uint32_t *raw_crc, const uint8_t **restored, quant_stats *st)
{
    ent_ctx *ec = s->ec[worker];
    uint8_t *planes = s->planes[worker], *rest = s->restored[worker];
    quant_stats cs;
    quant_stats_init(&cs);
    quant_opt q = {s->qw[worker], plan, elem0, rest, &cs};
    xf_enc e = {.xf = XF_QUANT,
                .esize = (uint8_t)ckpz_dtype_size(dtype),
                .pred = PRED_NONE,
                .dtype = dtype,
                .raw = raw,
                .n = n,
                .base = base,
                .scratch = planes,
                .opt = &q};
    xf_out o;
    uint32_t crc = 0;
    int np = xf_get(XF_QUANT)->encode(&e, &o, &crc);
    if (np < 0) return 0;
    size_t total = 0;
    for (int i = 0; i < np; i++) total += o.size[i] + CTR_PLANE_DESC;
    if (np == 0 || total > n) { /* lossless after all */
        restores_exactly(dtype, raw, n, restored, st);
        return chunk_encode(ec, level, dtype, entry, raw, n, base, planes, out, raw_crc, NULL);
    }
    ctr_chunk h = {0};
    h.xf = e.xf;
    h.esize = e.esize;
    h.raw_crc = crc;
    size_t len = code_planes(ec, level, &h, entry, n, &o, out);
    /* Two cases where coding bytes as they are may take less than the lossy frame:
     * - a frame of half the chunk or more: the raw bytes, exact (BF16 at --rel 1e-3:
     *   the grid is finer than BF16's own steps, every error is 0, and the quantised
     *   planes coded 0.5% larger than the lossless ones);
     * - a frame of at most LOSSY_FRAMING bytes: its codes cost next to nothing and the
     *   rest is the framing of five planes (105 bytes); the restored bytes, with the
     *   same errors, may code in fewer: one value repeated (a chunk that restores as
     *   zeros, at a bound above its values) as one constant plane of transform none, 41
     *   bytes, others, mostly one value, unsplit (LZ's runs, or a predictor from a base).
     * The smaller of the two, plain on a tie. */
    const uint8_t *src = len >= n / 2 ? raw : len <= LOSSY_FRAMING ? rest : NULL;
    if (src) {
        uint32_t plain_crc = 0;
        size_t plain = src == rest ? encode_constant(entry, rest, n, out, &plain_crc) : 0;
        if (!plain)
            plain = plain_if_smaller(ec, level, src == raw ? dtype : CKPZ_DTYPE_NONE, dtype, entry, src, n, base,
                                     planes, out, len, &plain_crc);
        if (plain == SIZE_MAX) return 0;
        if (plain) {
            if (src == raw) {
                restores_exactly(dtype, raw, n, restored, st);
            } else {
                *restored = rest;
                quant_stats_add(st, &cs);
            }
            *raw_crc = plain_crc;
            return plain;
        }
    }
    *raw_crc = h.raw_crc;
    *restored = rest;
    quant_stats_add(st, &cs);
    return len;
}

void chunk_copy_frame(uint32_t entry, uint64_t n, uint32_t raw_crc, uint8_t *out)
{
    ctr_chunk h = {0};
    h.entry = entry;
    h.raw_len = (uint32_t)n;
    h.xf = XF_NONE;
    h.esize = 1;
    h.pred = PRED_COPY;
    h.raw_crc = raw_crc;
    h.payload_crc = crc32c(0, NULL, 0);
    ctr_chunk_write(out, &h);
}

ckpz_error chunk_copy_check(const ctr_chunk *h, const uint8_t *base, char *why, size_t whylen)
{
    if (!base) {
        snprintf(why, whylen, "copy frame without base bytes to copy");
        return CKPZ_ERR_CORRUPT;
    }
    if (crc32c(0, base, h->raw_len) != h->raw_crc) {
        snprintf(why, whylen, "the base's bytes do not match the checksum of the copied data");
        return CKPZ_ERR_CHECKSUM;
    }
    return CKPZ_OK;
}

/* The transforms' reader of a chunk's coded planes (transforms/xform.h: xf_in). */
typedef struct plane_reader {
    xf_in in; /* first: the transforms hold a pointer to it */
    ent_ctx *ec;
    const uint8_t *payload;
    size_t pos, len; /* the next plane's coded bytes start at pos; the payload's length */
    unsigned i, nplanes;
} plane_reader;

static ckpz_error read_plane(xf_in *in, size_t size, uint8_t *dst, int mode, const uint8_t **plane)
{
    plane_reader *r = (plane_reader *)(void *)in;
    if (r->i >= r->nplanes) {
        snprintf(in->why, in->whylen, "fewer planes (%u) than the transform needs", r->nplanes);
        return CKPZ_ERR_CORRUPT;
    }
    const uint8_t *d = r->payload + (size_t)r->i * CTR_PLANE_DESC, *src = r->payload + r->pos;
    uint32_t len = ld32(d + 4);
    unsigned i = r->i;
    const char *miss;
    if (d[1] | d[2] | d[3]) {
        snprintf(in->why, in->whylen, "plane %u: reserved bytes set", i);
        return CKPZ_ERR_VERSION;
    }
    if (len > r->len - r->pos) {
        snprintf(in->why, in->whylen, "plane %u: length %u exceeds the payload", i, len);
        return CKPZ_ERR_CORRUPT;
    }
    if (mode != XF_IN_DECODE && d[0] == ENT_STORED && len == size) {
        *plane = src;
    } else if (mode == XF_IN_HEADER) {
        snprintf(in->why, in->whylen, "plane %u: header not stored in %zu bytes", i, size);
        return CKPZ_ERR_CORRUPT;
    } else if (!ent_codec_known(d[0])) {
        snprintf(in->why, in->whylen, "plane %u: needs codec id %u (written by a newer ckpz?)", i, d[0]);
        return CKPZ_ERR_VERSION;
    } else if ((miss = ent_codec_missing(d[0]))) {
        snprintf(in->why, in->whylen, "plane %u: needs codec %s, which cannot run here (%s)", i, ent_codec_name(d[0]),
                 miss);
        return CKPZ_ERR_VERSION;
    } else if (ent_decode(r->ec, d[0], src, len, dst, size) != 0) {
        snprintf(in->why, in->whylen, "plane %u (%s): corrupt coded data", i, ent_codec_name(d[0]));
        return CKPZ_ERR_CORRUPT;
    } else {
        *plane = dst;
    }
    r->pos += len;
    r->i++;
    return CKPZ_OK;
}

static ckpz_error read_end(xf_in *in)
{
    plane_reader *r = (plane_reader *)(void *)in;
    if (r->i != r->nplanes) {
        snprintf(in->why, in->whylen, "%u planes, the transform took %u", r->nplanes, r->i);
        return CKPZ_ERR_CORRUPT;
    }
    if (r->pos != r->len) {
        snprintf(in->why, in->whylen, "payload has %zu unused bytes", r->len - r->pos);
        return CKPZ_ERR_CORRUPT;
    }
    return CKPZ_OK;
}

int chunk_is_stored(const ctr_chunk *h, const uint8_t *payload)
{
    return h->xf == XF_NONE && h->pred == PRED_NONE && h->nplanes == 1 &&
           h->payload_len == (uint64_t)CTR_PLANE_DESC + h->raw_len && payload[0] == ENT_STORED && !payload[1] &&
           !payload[2] && !payload[3] && ld32(payload + 4) == h->raw_len;
}

/* A stored chunk's checks from the CRC of its bytes: the payload's CRC is the
 * descriptor's combined with the bytes' (crc32c_combine), and the bytes' is the chunk's
 * raw_crc, the general path's two checks and messages without their two passes. */
static ckpz_error stored_crcs(const ctr_chunk *h, const uint8_t *payload, uint32_t crc, char *why, size_t whylen)
{
    if (crc32c_combine(crc32c(0, payload, CTR_PLANE_DESC), crc, h->raw_len) != h->payload_crc) {
        snprintf(why, whylen, "compressed data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    if (crc != h->raw_crc) {
        snprintf(why, whylen, "decoded data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    return CKPZ_OK;
}

ckpz_error chunk_check_stored(const ctr_chunk *h, const uint8_t *payload, char *why, size_t whylen)
{
    return stored_crcs(h, payload, crc32c(0, payload + CTR_PLANE_DESC, h->raw_len), why, whylen);
}

/* A stored chunk's bytes copied to out as their CRC is taken (crc32c_copy): one pass
 * where the general path takes three (the payload's CRC, the plane's copy, the
 * restored bytes' CRC). Nothing leaves out before the caller sees CKPZ_OK. */
static ckpz_error decode_stored(const ctr_chunk *h, const uint8_t *payload, uint8_t *out, char *why, size_t whylen)
{
    return stored_crcs(h, payload, crc32c_copy(0, out, payload + CTR_PLANE_DESC, h->raw_len), why, whylen);
}

ckpz_error chunk_decode(ent_ctx *ec, const ctr_chunk *h, ckpz_dtype dtype, const uint8_t *payload, const uint8_t *base,
                        uint8_t *planes, uint8_t *out, char *why, size_t whylen)
{
    return chunk_decode_to(ec, h, dtype, payload, base, planes, out, 0, why, whylen);
}

ckpz_error chunk_decode_to(ent_ctx *ec, const ctr_chunk *h, ckpz_dtype dtype, const uint8_t *payload,
                           const uint8_t *base, uint8_t *planes, uint8_t *out, int stream, char *why, size_t whylen)
{
    if (h->pred != PRED_NONE && (h->pred == PRED_COPY || !base)) {
        snprintf(why, whylen, "%s predictor without base bytes to predict from", pred_name(h->pred));
        return CKPZ_ERR_CORRUPT;
    }
    const xf_desc *t = xf_get(h->xf);
    if (!t) {
        snprintf(why, whylen, "needs transform id %u (written by a newer ckpz?)", h->xf);
        return CKPZ_ERR_VERSION;
    }
    mem_prefault(out, h->raw_len); /* a fresh destination: its pages in one call, not a fault each */
    if (chunk_is_stored(h, payload)) return decode_stored(h, payload, out, why, whylen);
    if (crc32c(0, payload, h->payload_len) != h->payload_crc) {
        snprintf(why, whylen, "compressed data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    plane_reader r = {{read_plane, read_end, why, whylen},
                      ec,
                      payload,
                      (size_t)h->nplanes * CTR_PLANE_DESC,
                      h->payload_len,
                      0,
                      h->nplanes};
    xf_chunk c = {h->xf, h->esize, h->nplanes, h->pred, h->raw_len, h->raw_crc, dtype, base, planes, out, stream};
    return t->decode(&c, &r.in);
}
