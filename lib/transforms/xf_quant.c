/* xf_quant.c — the lossy transform at chunk level (xform.h row quant; quant.h does the
 * coding): the planes of quant_forward with their roles for the entropy stage, and the
 * decoder that reads them in the order their sizes become known — the header plane first
 * (it gives the other planes' sizes), then the group parameters and the pruning bitmap
 * (the bitmap gives the code planes' sizes), then the rest.
 */
#include <stdio.h>

#include "common/crc32c.h"
#include "entropy/entropy.h"
#include "predict.h"
#include "quant.h"
#include "xform.h"

_Static_assert(QUANT_PLANES_MAX <= XF_MAX_PLANES, "a lossy chunk's planes fit the registry's");

size_t xf_quant_scratch(size_t n) { return quant_out_bound(n); }

int xf_quant_encode(const xf_enc *e, xf_out *o, uint32_t *raw_crc)
{
    const quant_opt *q = e->opt;
    size_t sizes[QUANT_PLANES_MAX];
    int np = quant_forward(q->work, q->plan, e->dtype, q->elem0, e->raw, e->base, e->n, e->scratch, q->restored, sizes,
                           q->stats);
    if (np <= 0) return np;
    *raw_crc = crc32c(0, q->restored, e->n);
    /* Roles: the header is stored (the decoder reads it before anything else); group
     * parameters and exceptions are raw floats; the bitmap is a plane of set bits; the
     * first code plane is a skewed distribution around the centre, a second (low bytes
     * of 16-bit codes) near-random. */
    o->n = (unsigned)np;
    for (int i = 0, at = 0; i < np; at += (int)sizes[i], i++) {
        o->src[i] = e->scratch + at;
        o->size[i] = sizes[i];
        o->hint[i] = i == 0                           ? XF_KEEP
                     : i == 2                         ? ENT_HINT_INT
                     : i == 3                         ? ENT_HINT_EXPONENT
                     : (i == 4 && e->scratch[1] == 2) ? ENT_HINT_MANTISSA
                                                      : ENT_HINT_OPAQUE;
    }
    return np;
}

ckpz_error xf_quant_decode(const xf_chunk *c, xf_in *in)
{
    quant_layout L;
    if (c->pred != PRED_NONE) {
        snprintf(in->why, in->whylen, "lossy chunk with predictor %u", c->pred);
        return CKPZ_ERR_CORRUPT;
    }
    if (c->nplanes < 5 || c->nplanes > QUANT_PLANES_MAX || c->esize != ckpz_dtype_size(c->dtype) ||
        !quant_dtype_ok(c->dtype)) {
        snprintf(in->why, in->whylen, "invalid lossy chunk (%u planes, element size %u)", c->nplanes, c->esize);
        return CKPZ_ERR_CORRUPT;
    }
    const uint8_t *plane[QUANT_PLANES_MAX];
    ckpz_error err;
    if ((err = in->next(in, QUANT_HDR, NULL, XF_IN_HEADER, &plane[0]))) return err;
    if (quant_layout_read(plane[0], c->dtype, c->raw_len, c->base != NULL, &L) != c->nplanes) {
        snprintf(in->why, in->whylen, "invalid lossy chunk header");
        return CKPZ_ERR_CORRUPT;
    }
    uint8_t *dst = c->scratch;
    for (unsigned i = 1; i < c->nplanes; i++) {
        if ((err = in->next(in, L.size[i], dst, XF_IN_DECODE, &plane[i]))) return err;
        dst += L.size[i];
        if (i == 2 && (L.flags & QUANT_F_BITMAP) && quant_set_kept(&L, plane[2])) {
            snprintf(in->why, in->whylen, "invalid pruning bitmap");
            return CKPZ_ERR_CORRUPT;
        }
    }
    if ((err = in->end(in))) return err;
    if (quant_inverse(&L, c->dtype, plane, c->base, c->raw_len, c->out)) {
        snprintf(in->why, in->whylen, "lossy codes do not match their planes");
        return CKPZ_ERR_CORRUPT;
    }
    if (crc32c(0, c->out, c->raw_len) != c->raw_crc) {
        snprintf(in->why, in->whylen, "decoded data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    return CKPZ_OK;
}
