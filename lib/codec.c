/* codec.c — see codec.h. With a base, a predictor first turns each element into its
 * residual against the base's element (transforms/predict.h). The payload starts with
 * one 8-byte descriptor per plane (codec, reserved, encoded length) followed by the
 * planes' encoded bytes in order; plane sizes are not stored because the transform
 * derives them from the chunk's original length. */
#include "codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "transforms/planes.h"
#include "transforms/escape.h"
#include "transforms/predict.h"
#include "transforms/quant.h"

/* Bytes of original data split (or merged) and checksummed at a time: small enough to
 * stay in cache between the two passes, a multiple of the CRC's 24 KiB stride. */
#define SLICE (48u << 10)

/* Lossless planes take n bytes, plus for the escape transform its A plane (n / E) and
 * escape planes (at most n, each with ESC_SLACK after it). The buffer is not a multiple
 * of the chunk size on purpose: with buffers exactly the chunk's size (identically
 * aligned to the chunk buffers they are split from), compression with two threads
 * measured 1.33x the one-thread speed instead of 1.73x (bench: ckpz -b -T1/-T2, 371 MB),
 * most likely cache-set aliasing between them. */
#define ESC_EXTRA (ESC_SLACK * (XF_MAX_PLANES + 2))
size_t chunk_planes_bound(size_t n, int lossy)
{
    size_t lossless = n + n / 2 + n + ESC_EXTRA;
    size_t q = lossy ? quant_out_bound(n) : 0;
    return q > lossless ? q : lossless;
}

/* Where the escape transform's planes go in a chunk's scratch: after the n bytes of
 * byte planes, A (elems), then K escape planes of room elems + ESC_SLACK each. */
static uint8_t *esc_area(uint8_t *planes, size_t n, size_t elems, unsigned K, uint8_t **e)
{
    uint8_t *a = planes + n + ESC_SLACK;
    for (unsigned k = 0; k < K; k++) e[k] = a + elems + ESC_SLACK + k * (elems + ESC_SLACK);
    return a;
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
        if (!(s->ec[i] = ent_ctx_create()) || !(s->planes[i] = malloc(chunk_planes_bound(chunk_size, lossy))))
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

size_t chunk_frame_bound(size_t n)
{
    size_t worst = 0;
    for (size_t e = 1; e <= 8; e *= 2) {
        size_t b = e * ent_bound(n / e) + ent_bound(e - 1);
        if (b > worst) worst = b;
    }
    return CTR_FRAME_SIZE + XF_MAX_PLANES * CTR_PLANE_DESC + worst;
}

#define HINT_STORE (-1) /* code_planes: the plane goes in as it is */

/* Codes np planes (src[i], sizes[i] bytes) into the payload after the frame header,
 * each with the entropy stage's choice for its hint, and seals the frame: plane
 * descriptors, lengths, checksums. Returns the frame length. */
static size_t code_planes(ent_ctx *ec, int level, ctr_chunk *h, uint32_t entry, size_t n,
                          const uint8_t *const *src, const size_t *sizes, unsigned np, const int *hints,
                          uint8_t *out)
{
    uint8_t *payload = out + CTR_FRAME_SIZE, *dst = payload + (size_t)np * CTR_PLANE_DESC;
    for (unsigned i = 0; i < np; i++) {
        uint8_t codec = ENT_STORED;
        size_t len = sizes[i];
        if (hints[i] == HINT_STORE) memcpy(dst, src[i], len);
        else len = ent_encode(ec, src[i], sizes[i], dst, ent_bound(sizes[i]), level, hints[i], &codec);
        uint8_t *d = payload + (size_t)i * CTR_PLANE_DESC;
        d[0] = codec;
        d[1] = d[2] = d[3] = 0;
        st32(d + 4, (uint32_t)len);
        dst += len;
    }
    h->entry = entry;
    h->raw_len = (uint32_t)n;
    h->payload_len = (uint32_t)(dst - payload);
    h->nplanes = (uint8_t)np;
    h->payload_crc = crc32c(0, payload, h->payload_len);
    ctr_chunk_write(out, h);
    return CTR_FRAME_SIZE + h->payload_len;
}

/* Codes the chunk with one predictor. esc_low >= 0 (DIFF only): the residual's top
 * bytes go through the escape transform with threshold esc_t, keeping esc_low low bytes
 * as plain planes. */
static size_t encode_with(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                          const uint8_t *base, uint8_t pred, int esc_low, unsigned esc_t, uint8_t *planes,
                          uint8_t *out, uint32_t *raw_crc, uint32_t *base_crc)
{
    ctr_chunk h = {0};
    size_t sizes[XF_MAX_PLANES + 2];
    pred_transform(pred, dtype, &h.xf, &h.esize);
    h.pred = pred;
    unsigned np = xf_plane_sizes(h.xf, h.esize, n, sizes);
    int isf = pred_is_float(dtype);
    const uint8_t *src[XF_MAX_PLANES + 2];
    int hints[XF_MAX_PLANES + 2];
    /* base_crc: the CRC of the base's n bytes, taken slice by slice just before the
     * prediction reads them (from cache, then) when the predictor reads the base. */
    int slice_crc = base_crc && base && pred != PRED_NONE && h.xf != XF_NONE;
    if (base_crc && base && !slice_crc) *base_crc = crc32c(0, base, n);
    if (slice_crc) *base_crc = 0;
    if (h.xf == XF_NONE) {
        h.raw_crc = crc32c(0, raw, n);
        src[0] = raw;
        if (pred != PRED_NONE) {
            pred_forward(pred, 1, isf, raw, base, n, planes);
            src[0] = planes;
        }
        hints[0] = xf_plane_hint(dtype, h.esize, 0);
        *raw_crc = h.raw_crc;
        return code_planes(ec, level, &h, entry, n, src, sizes, np, hints, out);
    }
    /* Predict, split (and escape-code) and checksum in slices small enough to stay in
     * cache. */
    uint8_t *plane[XF_MAX_PLANES], res[SLICE];
    size_t at = 0;
    for (unsigned i = 0; i < np; i++) {
        plane[i] = planes + at;
        at += sizes[i];
    }
    size_t elems = n / h.esize, step = SLICE / h.esize, nesc = 0;
    int esc = pred == PRED_DIFF && h.xf == XF_INT && h.esize <= 4 && esc_low >= 0 && esc_low + 2 >= h.esize &&
              esc_low < h.esize;
    unsigned L = esc ? (unsigned)esc_low : 0, K = h.esize - L;
    uint8_t *e[4], *a = esc ? esc_area(planes, n, elems, K, e) : NULL;
    for (size_t e0 = 0; e0 < elems; e0 += step) {
        size_t cnt = elems - e0 < step ? elems - e0 : step, off = e0 * h.esize, len = cnt * h.esize;
        size_t fused = 0; /* elements predicted, split and escape-coded in one pass */
        if (slice_crc) *base_crc = crc32c(*base_crc, base + off, len);
        if (esc) {
            uint8_t *low[4];
            for (unsigned k = 0; k < L; k++) low[k] = plane[K + k] + e0;
            fused = pred_forward_esc(h.esize, isf, L, esc_t, raw + off, base + off, len, low, a + e0, e,
                                     &nesc);
        }
        if (fused < cnt) {
            size_t r0 = e0 + fused, roff = r0 * h.esize, rlen = (cnt - fused) * h.esize, done = 0;
            const uint8_t *x = raw + roff;
            uint8_t *part[XF_MAX_PLANES];
            for (unsigned b = 0; b < h.esize; b++) part[b] = plane[b] + r0;
            if (pred != PRED_NONE) {
                done = pred_forward_split(pred, h.xf, h.esize, isf, x, base + roff, rlen, part);
                if (done < rlen) {
                    pred_forward(pred, h.esize, isf, x + done, base + roff + done, rlen - done, res);
                    x = res;
                }
            }
            if (done < rlen) {
                uint8_t *rest[XF_MAX_PLANES];
                for (unsigned b = 0; b < h.esize; b++) rest[b] = part[b] + done / h.esize;
                xf_split(h.xf, h.esize, x, rlen - done, rest);
            }
            if (esc) esc_forward(K, esc_t, (const uint8_t *const *)part, cnt - fused, a + r0, e, &nesc);
        }
        h.raw_crc = crc32c(h.raw_crc, raw + off, len);
    }
    size_t tail = n % h.esize;
    if (tail) { /* the tail is kept as it is */
        memcpy(plane[h.esize], raw + elems * h.esize, tail);
        h.raw_crc = crc32c(h.raw_crc, raw + elems * h.esize, tail);
        if (slice_crc) *base_crc = crc32c(*base_crc, base + elems * h.esize, tail);
    }
    *raw_crc = h.raw_crc;
    if (!esc) {
        /* A residual's planes: skewed, sparse top two bytes (zstd only when nearly empty;
         * the integer hint would try it on every plane) and near-random lower ones, which
         * the mantissa hint judges from a sample before counting them. */
        for (unsigned i = 0; i < np; i++) {
            src[i] = plane[i];
            hints[i] = pred == PRED_NONE || i >= h.esize ? xf_plane_hint(dtype, h.esize, i)
                       : i + 1 == h.esize || i >= 2      ? ENT_HINT_MANTISSA
                                                         : ENT_HINT_RESIDUAL;
        }
        return code_planes(ec, level, &h, entry, n, src, sizes, np, hints, out);
    }
    /* Header, the low planes (near-random: the mantissa hint), A (small values, counted
     * from a sample), the escape planes (the lowest near-random, the others mostly
     * zero), the tail. */
    uint8_t hdr[ESC_HDR] = {(uint8_t)L, (uint8_t)esc_t};
    h.xf = XF_ESC;
    np = 0;
    src[np] = hdr, sizes[np] = ESC_HDR, hints[np++] = HINT_STORE;
    for (unsigned k = 0; k < L; k++) src[np] = plane[K + k], sizes[np] = elems, hints[np++] = ENT_HINT_MANTISSA;
    src[np] = a, sizes[np] = elems, hints[np++] = ENT_HINT_SMALL;
    for (unsigned k = 0; k < K; k++)
        src[np] = e[k], sizes[np] = nesc, hints[np++] = k + 1 == K ? ENT_HINT_MANTISSA : ENT_HINT_RESIDUAL;
    if (tail) src[np] = plane[h.esize], sizes[np] = tail, hints[np++] = ENT_HINT_OPAQUE;
    return code_planes(ec, level, &h, entry, n, src, sizes, np, hints, out);
}

size_t chunk_encode(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                    const uint8_t *base, uint8_t *planes, uint8_t *out, uint32_t *raw_crc, uint32_t *base_crc)
{
    if (!base) return encode_with(ec, level, dtype, entry, raw, n, NULL, PRED_NONE, -1, 0, planes, out, raw_crc, NULL);
    int low;
    unsigned esc_t;
    uint8_t pred = pred_choose(dtype, raw, base, n, &low, &esc_t);
    if (level < 7) {
        size_t len =
            encode_with(ec, level, dtype, entry, raw, n, base, pred, low, esc_t, planes, out, raw_crc, base_crc);
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
            size_t len0 =
                encode_with(ec, level, dtype, entry, raw, n, NULL, PRED_NONE, -1, 0, planes, out, raw_crc, NULL);
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

size_t chunk_encode_lossy(chunk_scratch *s, int worker, int level, const quant_plan *plan, ckpz_dtype dtype,
                          uint32_t entry, uint64_t elem0, const uint8_t *raw, size_t n, const uint8_t *base,
                          uint8_t *out, uint32_t *raw_crc, const uint8_t **restored, quant_stats *st)
{
    ent_ctx *ec = s->ec[worker];
    uint8_t *planes = s->planes[worker], *rest = s->restored[worker];
    size_t sizes[QUANT_PLANES_MAX];
    quant_stats cs;
    quant_stats_init(&cs);
    int np = quant_forward(s->qw[worker], plan, dtype, elem0, raw, base, n, planes, rest, sizes, &cs);
    if (np < 0) return 0;
    size_t total = 0;
    for (int i = 0; i < np; i++) total += sizes[i] + CTR_PLANE_DESC;
    if (np == 0 || total > n) { /* lossless after all: no error, the elements still count */
        quant_stats_init(&cs);
        cs.n = n / ckpz_dtype_size(dtype);
        quant_stats_add(st, &cs);
        *restored = raw;
        return chunk_encode(ec, level, dtype, entry, raw, n, base, planes, out, raw_crc, NULL);
    }
    ctr_chunk h = {0};
    h.xf = XF_QUANT;
    h.esize = (uint8_t)ckpz_dtype_size(dtype);
    h.raw_crc = crc32c(0, rest, n);
    /* Roles: the header is stored (the decoder reads it before anything else); group
     * parameters and exceptions are raw floats; the bitmap is a plane of set bits; the
     * first code plane is a skewed distribution around the centre, a second (low bytes
     * of 16-bit codes) near-random. */
    int hints[QUANT_PLANES_MAX];
    for (int i = 0; i < np; i++)
        hints[i] = i == 0 ? HINT_STORE : i == 2 ? ENT_HINT_INT : i == 3 ? ENT_HINT_EXPONENT
                   : (i == 4 && planes[1] == 2) ? ENT_HINT_MANTISSA : ENT_HINT_OPAQUE;
    const uint8_t *src[QUANT_PLANES_MAX];
    for (int i = 0, at = 0; i < np; at += (int)sizes[i], i++) src[i] = planes + at;
    size_t len = code_planes(ec, level, &h, entry, n, src, sizes, (unsigned)np, hints, out);
    *raw_crc = h.raw_crc;
    *restored = rest;
    quant_stats_add(st, &cs);
    return len;
}

/* Checks plane i's descriptor d against the payload bytes that remain after the planes
 * before it; *len = its coded length. */
static ckpz_error plane_desc(const uint8_t *d, unsigned i, size_t remaining, uint32_t *len, char *why, size_t whylen)
{
    *len = ld32(d + 4);
    if (d[1] | d[2] | d[3]) {
        snprintf(why, whylen, "plane %u: reserved bytes set", i);
        return CKPZ_ERR_VERSION;
    }
    if (*len > remaining) {
        snprintf(why, whylen, "plane %u: length %u exceeds the payload", i, *len);
        return CKPZ_ERR_CORRUPT;
    }
    return CKPZ_OK;
}

/* Decodes a lossy chunk: the header plane first (it gives the other planes' sizes),
 * then the group parameters and bitmap (the bitmap gives the code planes' sizes), then
 * the rest. */
static ckpz_error decode_quant(ent_ctx *ec, const ctr_chunk *h, ckpz_dtype dtype, const uint8_t *payload,
                               const uint8_t *base, uint8_t *planes, uint8_t *out, char *why, size_t whylen)
{
    quant_layout L;
    if (h->nplanes < 5 || h->nplanes > QUANT_PLANES_MAX || h->esize != ckpz_dtype_size(dtype) ||
        !quant_dtype_ok(dtype)) {
        snprintf(why, whylen, "invalid lossy chunk (%u planes, element size %u)", h->nplanes, h->esize);
        return CKPZ_ERR_CORRUPT;
    }
    size_t pos = (size_t)h->nplanes * CTR_PLANE_DESC;
    const uint8_t *plane[QUANT_PLANES_MAX];
    uint8_t *dst = planes;
    for (unsigned i = 0; i < h->nplanes; i++) {
        const uint8_t *d = payload + i * CTR_PLANE_DESC;
        uint32_t len;
        ckpz_error e = plane_desc(d, i, h->payload_len - pos, &len, why, whylen);
        if (e) return e;
        if (i == 0) {
            if (d[0] != ENT_STORED || len != QUANT_HDR ||
                quant_layout_read(payload + pos, dtype, h->raw_len, base != NULL, &L) != h->nplanes) {
                snprintf(why, whylen, "invalid lossy chunk header");
                return CKPZ_ERR_CORRUPT;
            }
            plane[0] = payload + pos;
        } else {
            if (d[0] >= ENT_CODEC_COUNT_ || ent_decode(ec, d[0], payload + pos, len, dst, L.size[i]) != 0) {
                snprintf(why, whylen, "plane %u (%s): corrupt coded data", i, ent_codec_name(d[0]));
                return CKPZ_ERR_CORRUPT;
            }
            plane[i] = dst;
            dst += L.size[i];
            if (i == 2 && (L.flags & QUANT_F_BITMAP) && quant_set_kept(&L, plane[2])) {
                snprintf(why, whylen, "invalid pruning bitmap");
                return CKPZ_ERR_CORRUPT;
            }
        }
        pos += len;
    }
    if (pos != h->payload_len) {
        snprintf(why, whylen, "payload has %zu unused bytes", (size_t)h->payload_len - pos);
        return CKPZ_ERR_CORRUPT;
    }
    if (quant_inverse(&L, dtype, plane, base, h->raw_len, out)) {
        snprintf(why, whylen, "lossy codes do not match their planes");
        return CKPZ_ERR_CORRUPT;
    }
    if (crc32c(0, out, h->raw_len) != h->raw_crc) {
        snprintf(why, whylen, "decoded data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    return CKPZ_OK;
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

/* Merges byte planes (plane[0 .. esize) and the tail plane) of transform xf into out,
 * undoes the chunk's predictor, and checks the original bytes' checksum: in slices small
 * enough to stay in cache between the passes. */
static ckpz_error merge_check(const ctr_chunk *h, uint8_t xf, int isf, const uint8_t *const *plane,
                              const uint8_t *base, uint8_t *out, char *why, size_t whylen)
{
    uint32_t crc = 0;
    size_t elems = h->raw_len / h->esize, step = SLICE / h->esize;
    for (size_t e0 = 0; e0 < elems; e0 += step) {
        size_t cnt = elems - e0 < step ? elems - e0 : step;
        const uint8_t *part[XF_MAX_PLANES];
        for (unsigned b = 0; b < h->esize; b++) part[b] = plane[b] + e0;
        size_t off = e0 * h->esize, len = cnt * h->esize;
        xf_merge(xf, h->esize, part, len, out + off);
        if (h->pred != PRED_NONE) pred_inverse(h->pred, h->esize, isf, out + off, base + off, len, out + off);
        crc = crc32c(crc, out + off, len);
    }
    size_t tail = h->raw_len - elems * h->esize;
    if (tail) {
        memcpy(out + elems * h->esize, plane[h->esize], tail);
        crc = crc32c(crc, out + elems * h->esize, tail);
    }
    if (crc != h->raw_crc) {
        snprintf(why, whylen, "decoded data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    return CKPZ_OK;
}

/* Decodes an escape-transform chunk (escape.h): header, low planes, A, then the escape
 * planes, whose size is the count of escapes in A; rebuilds the top byte planes and
 * merges as transform int. */
static ckpz_error decode_esc(ent_ctx *ec, const ctr_chunk *h, int isf, const uint8_t *payload,
                             const uint8_t *base, uint8_t *planes, uint8_t *out, char *why, size_t whylen)
{
    unsigned E = h->esize;
    size_t elems = h->raw_len / (E ? E : 1), tail = h->raw_len % (E ? E : 1);
    if (h->pred != PRED_DIFF || (E != 2 && E != 4) || elems == 0 ||
        h->nplanes != E + 2 + (tail != 0)) {
        snprintf(why, whylen, "invalid escape chunk (predictor %u, element size %u, %u planes)", h->pred, E,
                 h->nplanes);
        return CKPZ_ERR_CORRUPT;
    }
    unsigned L = 0, K = 0, T = 0;
    uint8_t *byte[XF_MAX_PLANES], *e[4], *a = NULL;
    const uint8_t *plane[XF_MAX_PLANES];
    size_t pos = (size_t)h->nplanes * CTR_PLANE_DESC, nesc = 0;
    for (unsigned i = 0; i < h->nplanes; i++) {
        const uint8_t *d = payload + i * CTR_PLANE_DESC;
        uint32_t len;
        ckpz_error err = plane_desc(d, i, h->payload_len - pos, &len, why, whylen);
        if (err) return err;
        uint8_t *dst;
        size_t size;
        if (i == 0) {
            const uint8_t *hp = payload + pos;
            if (d[0] != ENT_STORED || len != ESC_HDR || hp[0] >= E || hp[1] == 0) {
                snprintf(why, whylen, "invalid escape chunk header");
                return CKPZ_ERR_CORRUPT;
            }
            L = hp[0], T = hp[1], K = E - L;
            for (unsigned b = 0; b < E; b++) byte[b] = planes + b * elems;
            a = esc_area(planes, h->raw_len, elems, K, e);
            pos += len;
            continue;
        }
        if (i <= L) { /* low byte plane K + i - 1; a stored one is merged from the payload */
            dst = byte[K + i - 1], size = elems;
            if (d[0] == ENT_STORED && len == size) {
                plane[K + i - 1] = payload + pos;
                pos += len;
                continue;
            }
            plane[K + i - 1] = dst;
        } else if (i == L + 1) {
            dst = a, size = elems;
        } else if (i <= L + 1 + K) {
            dst = e[i - L - 2], size = nesc;
        } else { /* the tail */
            dst = planes + E * elems, size = tail;
            plane[E] = dst;
        }
        if (d[0] >= ENT_CODEC_COUNT_ || ent_decode(ec, d[0], payload + pos, len, dst, size) != 0) {
            snprintf(why, whylen, "plane %u (%s): corrupt coded data", i, ent_codec_name(d[0]));
            return CKPZ_ERR_CORRUPT;
        }
        pos += len;
        if (i == L + 1) {
            ptrdiff_t c = esc_count(T, a, elems);
            if (c < 0) {
                snprintf(why, whylen, "escape plane holds values above its threshold %u", T);
                return CKPZ_ERR_CORRUPT;
            }
            nesc = (size_t)c;
        }
    }
    if (pos != h->payload_len) {
        snprintf(why, whylen, "payload has %zu unused bytes", (size_t)h->payload_len - pos);
        return CKPZ_ERR_CORRUPT;
    }
    if (esc_inverse(K, T, a, (const uint8_t *const *)e, elems, byte)) {
        snprintf(why, whylen, "an escape does not fit its element");
        return CKPZ_ERR_CORRUPT;
    }
    for (unsigned k = 0; k < K; k++) plane[k] = byte[k];
    return merge_check(h, XF_INT, isf, plane, base, out, why, whylen);
}

ckpz_error chunk_decode(ent_ctx *ec, const ctr_chunk *h, ckpz_dtype dtype, const uint8_t *payload,
                        const uint8_t *base, uint8_t *planes, uint8_t *out, char *why, size_t whylen)
{
    if (h->pred != PRED_NONE && (h->pred == PRED_COPY || !base)) {
        snprintf(why, whylen, "%s predictor without base bytes to predict from", pred_name(h->pred));
        return CKPZ_ERR_CORRUPT;
    }
    int isf = pred_is_float(dtype);
    if (crc32c(0, payload, h->payload_len) != h->payload_crc) {
        snprintf(why, whylen, "compressed data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    if (h->xf == XF_QUANT) {
        if (h->pred != PRED_NONE) {
            snprintf(why, whylen, "lossy chunk with predictor %u", h->pred);
            return CKPZ_ERR_CORRUPT;
        }
        return decode_quant(ec, h, dtype, payload, base, planes, out, why, whylen);
    }
    if (h->xf == XF_ESC) return decode_esc(ec, h, isf, payload, base, planes, out, why, whylen);
    size_t sizes[XF_MAX_PLANES];
    unsigned np = xf_plane_sizes(h->xf, h->esize, h->raw_len, sizes);
    if (np == 0 || np != h->nplanes) {
        snprintf(why, whylen, "invalid transform %u/%u with %u planes", h->xf, h->esize, h->nplanes);
        return CKPZ_ERR_CORRUPT;
    }
    /* Planes are decoded into the scratch buffer, except stored ones, which the merge
     * reads straight from the payload. */
    size_t pos = (size_t)np * CTR_PLANE_DESC;
    const uint8_t *plane[XF_MAX_PLANES];
    uint8_t *dst = h->xf == XF_NONE ? out : planes;
    for (unsigned i = 0; i < np; i++) {
        const uint8_t *d = payload + i * CTR_PLANE_DESC;
        uint32_t len;
        ckpz_error e = plane_desc(d, i, h->payload_len - pos, &len, why, whylen);
        if (e) return e;
        if (d[0] == ENT_STORED && h->xf != XF_NONE && len == sizes[i]) {
            plane[i] = payload + pos;
        } else if (d[0] >= ENT_CODEC_COUNT_ || ent_decode(ec, d[0], payload + pos, len, dst, sizes[i]) != 0) {
            snprintf(why, whylen, "plane %u (%s): corrupt coded data", i, ent_codec_name(d[0]));
            return CKPZ_ERR_CORRUPT;
        } else {
            plane[i] = dst;
        }
        pos += len;
        dst += sizes[i];
    }
    if (pos != h->payload_len) {
        snprintf(why, whylen, "payload has %zu unused bytes", (size_t)h->payload_len - pos);
        return CKPZ_ERR_CORRUPT;
    }
    if (h->xf == XF_NONE) {
        if (h->pred != PRED_NONE) pred_inverse(h->pred, 1, isf, out, base, h->raw_len, out);
        if (crc32c(0, out, h->raw_len) != h->raw_crc) {
            snprintf(why, whylen, "decoded data checksum mismatch");
            return CKPZ_ERR_CHECKSUM;
        }
        return CKPZ_OK;
    }
    return merge_check(h, h->xf, isf, plane, base, out, why, whylen);
}
