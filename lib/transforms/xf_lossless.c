/* xf_lossless.c — the lossless transforms at chunk level (xform.h rows none, float, int
 * and escape): a chunk's elements, after its predictor (predict.h), split into byte
 * planes (planes.h), their top bytes escape-coded for diff residuals (escape.h).
 *
 * The encoder predicts, splits (and escape-codes) and checksums in slices small enough to
 * stay in cache between the passes, fused into one pass where a vector loop exists, and
 * tells the entropy stage what each plane holds: the dtype table's roles for a chunk
 * coded as it is; for a residual, skewed sparse top bytes and near-random lower ones.
 * The decoder reads the planes through codec.c's reader (stored planes are merged
 * straight from the payload), merges, undoes the predictor and checks the restored
 * bytes' CRC-32C, again slice by slice.
 */
#include <stdio.h>
#include <string.h>

#include "common/copy.h"
#include "common/crc32c.h"
#include "entropy/entropy.h"
#include "escape.h"
#include "planes.h"
#include "predict.h"
#include "xform.h"

/* Bytes of original data split (or merged) and checksummed at a time: small enough to
 * stay in cache between the two passes, a multiple of the CRC's 24 KiB stride. */
#define SLICE (48u << 10)

/* Scratch: the n bytes of byte planes, then for the escape transform its A plane (n / E)
 * and escape planes (at most n, each with ESC_SLACK after it). Not a multiple of the
 * chunk size on purpose: with buffers exactly the chunk's size (identically aligned to the
 * chunk buffers they are split from), compression with two threads measured 1.33x the
 * one-thread speed instead of 1.73x (bench: ckpz -b -T1/-T2, 371 MB), most likely
 * cache-set aliasing between them. */
#define ESC_EXTRA (ESC_SLACK * (XF_MAX_PLANES + 2))
size_t xf_lossless_scratch(size_t n) { return n + n / 2 + n + ESC_EXTRA + XF_BOUNCE(SLICE); }

/* Every byte-plane split of n bytes coded within ent_bound of each plane's size. */
size_t xf_bytes_coded(size_t n)
{
    size_t worst = 0;
    for (size_t e = 1; e <= 8; e *= 2) {
        size_t b = e * ent_bound(n / e) + ent_bound(e - 1);
        if (b > worst) worst = b;
    }
    return worst;
}

uint8_t xf_for_chunk(uint8_t pred, ckpz_dtype dtype, int esc_low, uint8_t *esize)
{
    uint8_t xf;
    pred_transform(pred, dtype, &xf, esize);
    int esc = pred == PRED_DIFF && xf == XF_INT && *esize <= 4 && esc_low >= 0 && esc_low + 2 >= *esize &&
              esc_low < *esize;
    return esc ? XF_ESC : xf;
}

/* Where the escape transform's planes go in a chunk's scratch: after the n bytes of
 * byte planes, A (elems), then K escape planes of room elems + ESC_SLACK each. */
static uint8_t *esc_area(uint8_t *planes, size_t n, size_t elems, unsigned K, uint8_t **e)
{
    uint8_t *a = planes + n + ESC_SLACK;
    for (unsigned k = 0; k < K; k++) e[k] = a + elems + ESC_SLACK + k * (elems + ESC_SLACK);
    return a;
}

static void add(xf_out *o, const uint8_t *src, size_t size, int hint)
{
    o->src[o->n] = src;
    o->size[o->n] = size;
    o->hint[o->n++] = hint;
}

int xf_lossless_encode(const xf_enc *en, xf_out *o, uint32_t *raw_crc)
{
    const uint8_t *raw = en->raw, *base = en->base;
    size_t n = en->n, sizes[XF_MAX_PLANES];
    uint8_t pred = en->pred, es = en->esize, xf = en->xf == XF_ESC ? XF_INT : en->xf;
    ckpz_dtype dtype = en->dtype;
    unsigned np = xf_plane_sizes(xf, es, n, sizes);
    int isf = pred_is_float(dtype);
    uint32_t crc = 0;
    o->n = 0;
    /* base_crc: the CRC of the base's n bytes, taken slice by slice just before the
     * prediction reads them (from cache, then) when the predictor reads the base. */
    uint32_t *base_crc = base ? en->base_crc : NULL;
    int slice_crc = base_crc && pred != PRED_NONE && xf != XF_NONE;
    if (base_crc && !slice_crc) *base_crc = crc32c(0, base, n);
    if (slice_crc) *base_crc = 0;
    if (xf == XF_NONE) {
        *raw_crc = crc32c(0, raw, n);
        const uint8_t *src = raw;
        if (pred != PRED_NONE) {
            pred_forward(pred, 1, isf, raw, base, n, en->scratch);
            src = en->scratch;
        }
        add(o, src, n, xf_plane_hint(dtype, es, 0));
        return 1;
    }
    uint8_t *plane[XF_MAX_PLANES], res[SLICE];
    size_t at = 0;
    for (unsigned i = 0; i < np; i++) {
        plane[i] = en->scratch + at;
        at += sizes[i];
    }
    size_t elems = n / es, step = SLICE / es, nesc = 0;
    int esc = en->xf == XF_ESC;
    const xf_esc_opt *eo = en->opt;
    unsigned L = esc ? eo->low : 0, K = es - L, T = esc ? eo->t : 0;
    uint8_t *e[4], *a = esc ? esc_area(en->scratch, n, elems, K, e) : NULL;
    for (size_t e0 = 0; e0 < elems; e0 += step) {
        size_t cnt = elems - e0 < step ? elems - e0 : step, off = e0 * es, len = cnt * es;
        size_t fused = 0; /* elements predicted, split and escape-coded in one pass */
        if (slice_crc) *base_crc = crc32c(*base_crc, base + off, len);
        if (esc) {
            uint8_t *low[4];
            for (unsigned k = 0; k < L; k++) low[k] = plane[K + k] + e0;
            fused = pred_forward_esc(es, isf, L, T, raw + off, base + off, len, low, a + e0, e, &nesc);
        }
        if (fused < cnt) {
            size_t r0 = e0 + fused, roff = r0 * es, rlen = (cnt - fused) * es, done = 0;
            const uint8_t *x = raw + roff;
            uint8_t *part[XF_MAX_PLANES];
            for (unsigned b = 0; b < es; b++) part[b] = plane[b] + r0;
            if (pred != PRED_NONE) {
                done = pred_forward_split(pred, xf, es, isf, x, base + roff, rlen, part);
                if (done < rlen) {
                    pred_forward(pred, es, isf, x + done, base + roff + done, rlen - done, res);
                    x = res;
                }
            }
            if (done < rlen) {
                uint8_t *rest[XF_MAX_PLANES];
                for (unsigned b = 0; b < es; b++) rest[b] = part[b] + done / es;
                xf_split(xf, es, x, rlen - done, rest);
            }
            if (esc) esc_forward(K, T, (const uint8_t *const *)part, cnt - fused, a + r0, e, &nesc);
        }
        crc = crc32c(crc, raw + off, len);
    }
    size_t tail = n % es;
    if (tail) { /* the tail is kept as it is */
        memcpy(plane[es], raw + elems * es, tail);
        crc = crc32c(crc, raw + elems * es, tail);
        if (slice_crc) *base_crc = crc32c(*base_crc, base + elems * es, tail);
    }
    *raw_crc = crc;
    if (!esc) {
        /* A residual's planes: skewed, sparse top two bytes (zstd only when nearly empty;
         * the integer hint would try it on every plane) and near-random lower ones, which
         * the mantissa hint judges from a sample before counting them. */
        for (unsigned i = 0; i < np; i++)
            add(o, plane[i], sizes[i],
                pred == PRED_NONE || i >= es ? xf_plane_hint(dtype, es, i)
                : i + 1 == es || i >= 2      ? ENT_HINT_MANTISSA
                                             : ENT_HINT_RESIDUAL);
        return (int)o->n;
    }
    /* Header, the low planes (near-random: the mantissa hint), A (small values, counted
     * from a sample), the escape planes (the lowest near-random, the others mostly
     * zero), the tail. */
    o->head[0] = (uint8_t)L;
    o->head[1] = (uint8_t)T;
    add(o, o->head, ESC_HDR, XF_KEEP);
    for (unsigned k = 0; k < L; k++) add(o, plane[K + k], elems, ENT_HINT_MANTISSA);
    add(o, a, elems, ENT_HINT_SMALL);
    for (unsigned k = 0; k < K; k++) add(o, e[k], nesc, k + 1 == K ? ENT_HINT_MANTISSA : ENT_HINT_RESIDUAL);
    if (tail) add(o, plane[es], tail, ENT_HINT_OPAQUE);
    return (int)o->n;
}

/* Merges byte planes (plane[0 .. esize) and the tail plane) of transform xf into out,
 * undoes the chunk's predictor, and checks the original bytes' checksum: in slices small
 * enough to stay in cache between the passes (c->stream: in the scratch's bounce slice,
 * then streamed out, planes.h). */
static ckpz_error merge_check(const xf_chunk *c, uint8_t xf, const uint8_t *const *plane, xf_in *in)
{
    uint32_t crc = 0;
    int isf = pred_is_float(c->dtype);
    size_t elems = c->raw_len / c->esize, step = SLICE / c->esize;
    uint8_t *bounce = c->stream ? xf_bounce(c->scratch + xf_lossless_scratch(c->raw_len) - XF_BOUNCE(SLICE)) : NULL;
    for (size_t e0 = 0; e0 < elems; e0 += step) {
        size_t cnt = elems - e0 < step ? elems - e0 : step;
        const uint8_t *part[XF_MAX_PLANES];
        for (unsigned b = 0; b < c->esize; b++) part[b] = plane[b] + e0;
        size_t off = e0 * c->esize, len = cnt * c->esize;
        uint8_t *to = bounce ? bounce : c->out + off;
        xf_merge(xf, c->esize, part, len, to);
        if (c->pred != PRED_NONE) pred_inverse(c->pred, c->esize, isf, to, c->base + off, len, to);
        crc = crc32c(crc, to, len);
        if (bounce) mem_stream(c->out + off, bounce, len);
    }
    size_t tail = c->raw_len - elems * c->esize;
    if (tail) {
        memcpy(c->out + elems * c->esize, plane[c->esize], tail);
        crc = crc32c(crc, c->out + elems * c->esize, tail);
    }
    if (crc != c->raw_crc) {
        snprintf(in->why, in->whylen, "decoded data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    return CKPZ_OK;
}

ckpz_error xf_bytes_decode(const xf_chunk *c, xf_in *in)
{
    size_t sizes[XF_MAX_PLANES];
    unsigned np = xf_plane_sizes(c->xf, c->esize, c->raw_len, sizes);
    if (np == 0 || np != c->nplanes) {
        snprintf(in->why, in->whylen, "invalid transform %u/%u with %u planes", c->xf, c->esize, c->nplanes);
        return CKPZ_ERR_CORRUPT;
    }
    /* Planes are decoded into the scratch buffer (the output for transform none),
     * except stored ones, which the merge reads straight from the payload. */
    const uint8_t *plane[XF_MAX_PLANES];
    uint8_t *dst = c->xf == XF_NONE ? c->out : c->scratch;
    int mode = c->xf == XF_NONE ? XF_IN_DECODE : XF_IN_MAY_POINT;
    ckpz_error err;
    for (unsigned i = 0; i < np; i++) {
        if ((err = in->next(in, sizes[i], dst, mode, &plane[i]))) return err;
        dst += sizes[i];
    }
    if ((err = in->end(in))) return err;
    if (c->xf == XF_NONE) {
        int isf = pred_is_float(c->dtype);
        if (c->pred != PRED_NONE) pred_inverse(c->pred, 1, isf, c->out, c->base, c->raw_len, c->out);
        uint32_t crc = crc32c(0, c->out, c->raw_len);
        if (crc != c->raw_crc && c->pred == PRED_DIFF && isf) {
            /* Writers before the fix of chunk_encode_as (CHANGELOG) could code a float
             * entry's bytes with diff under the bytes' own map, against the format: its
             * residuals back (the forward map inverts the inverse) and undone that way,
             * kept only where they restore the recorded checksum. */
            pred_forward(PRED_DIFF, 1, 1, c->out, c->base, c->raw_len, c->out);
            pred_inverse(PRED_DIFF, 1, 0, c->out, c->base, c->raw_len, c->out);
            crc = crc32c(0, c->out, c->raw_len);
        }
        if (crc != c->raw_crc) {
            snprintf(in->why, in->whylen, "decoded data checksum mismatch");
            return CKPZ_ERR_CHECKSUM;
        }
        return CKPZ_OK;
    }
    return merge_check(c, c->xf, plane, in);
}

/* Header, low planes, A, then the escape planes, whose size is the count of escapes in
 * A; rebuilds the top byte planes and merges as transform int. */
ckpz_error xf_esc_decode(const xf_chunk *c, xf_in *in)
{
    unsigned E = c->esize;
    size_t elems = c->raw_len / (E ? E : 1), tail = c->raw_len % (E ? E : 1);
    if (c->pred != PRED_DIFF || (E != 2 && E != 4) || elems == 0 || c->nplanes != E + 2 + (tail != 0)) {
        snprintf(in->why, in->whylen, "invalid escape chunk (predictor %u, element size %u, %u planes)", c->pred, E,
                 c->nplanes);
        return CKPZ_ERR_CORRUPT;
    }
    const uint8_t *hp, *plane[XF_MAX_PLANES], *got;
    ckpz_error err;
    if ((err = in->next(in, ESC_HDR, NULL, XF_IN_HEADER, &hp))) return err;
    if (hp[0] >= E || hp[1] == 0) {
        snprintf(in->why, in->whylen, "invalid escape chunk header");
        return CKPZ_ERR_CORRUPT;
    }
    unsigned L = hp[0], T = hp[1], K = E - L;
    uint8_t *byte[XF_MAX_PLANES], *e[4];
    for (unsigned b = 0; b < E; b++) byte[b] = c->scratch + b * elems;
    uint8_t *a = esc_area(c->scratch, c->raw_len, elems, K, e);
    for (unsigned k = 0; k < L; k++) /* low byte plane K + k; a stored one is merged from the payload */
        if ((err = in->next(in, elems, byte[K + k], XF_IN_MAY_POINT, &plane[K + k]))) return err;
    if ((err = in->next(in, elems, a, XF_IN_DECODE, &got))) return err;
    ptrdiff_t nesc = esc_count(T, a, elems);
    if (nesc < 0) {
        snprintf(in->why, in->whylen, "escape plane holds values above its threshold %u", T);
        return CKPZ_ERR_CORRUPT;
    }
    for (unsigned k = 0; k < K; k++)
        if ((err = in->next(in, (size_t)nesc, e[k], XF_IN_DECODE, &got))) return err;
    if (tail && (err = in->next(in, tail, c->scratch + E * elems, XF_IN_DECODE, &plane[E]))) return err;
    if ((err = in->end(in))) return err;
    if (esc_inverse(K, T, a, (const uint8_t *const *)e, elems, byte)) {
        snprintf(in->why, in->whylen, "an escape does not fit its element");
        return CKPZ_ERR_CORRUPT;
    }
    for (unsigned k = 0; k < K; k++) plane[k] = byte[k];
    return merge_check(c, XF_INT, plane, in);
}
