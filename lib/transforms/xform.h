/* xform.h — the transform registry: every transform a chunk frame can name (doc/format.md,
 * "Transforms", and its reserved id ranges), with its encoder, its decoder and the
 * scratch it needs. lib/codec/codec.c codes a chunk by running a transform's encoder, which
 * hands it planes with their roles for the entropy stage, and decodes one by giving the
 * transform's decoder a reader of the chunk's coded planes; what the planes are, how large
 * and where in the scratch, is the transform's own business. A transform id without a
 * row is one this build does not have: the frame was written by a newer ckpz (or a
 * private build), which the container reports as such, not as corruption.
 */
#ifndef CKPZ_XFORM_H
#define CKPZ_XFORM_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"
#include "ids.h" /* enum xf_id */

#define XF_ID_LIMIT 64      /* ids of this format: below this */
#define XF_MAX_PLANES 9     /* the most planes of any transform (8 byte planes + the tail) */
#define XF_KEEP (-1)        /* plane role: coded as it is (stored), e.g. a header */

/* A chunk's planes as a transform's encoder gives them to the entropy stage. */
typedef struct xf_out {
    unsigned n;
    const uint8_t *src[XF_MAX_PLANES];
    size_t size[XF_MAX_PLANES];
    int hint[XF_MAX_PLANES]; /* ent_hint (entropy/entropy.h), or XF_KEEP */
    uint8_t head[8];         /* room for a small header plane the encoder writes */
} xf_out;

/* One chunk to encode. */
typedef struct xf_enc {
    uint8_t xf;             /* the transform to run (xf_for_chunk) */
    uint8_t esize;          /* its element size */
    uint8_t pred;           /* the predictor (predict.h) applied first; PRED_NONE without base */
    ckpz_dtype dtype;
    const uint8_t *raw;     /* n bytes */
    size_t n;
    const uint8_t *base;    /* the base's n bytes, or NULL */
    uint8_t *scratch;       /* xf_scratch_bound(n) bytes */
    uint32_t *base_crc;     /* not NULL (with base): gets the CRC-32C of the base's n bytes */
    const void *opt;        /* the transform's own options (escape: xf_esc_opt; quant: quant_opt) */
} xf_enc;

/* Escape's options: L low bytes kept as planes, threshold T (pred_choose). */
typedef struct xf_esc_opt {
    unsigned low, t;
} xf_esc_opt;

/* One chunk to decode: the fields of its frame and where its bytes go. */
typedef struct xf_chunk {
    uint8_t xf, esize, nplanes, pred;
    uint32_t raw_len, raw_crc; /* the restored bytes' length and CRC-32C */
    ckpz_dtype dtype;
    const uint8_t *base;       /* the base's raw_len bytes, or NULL */
    uint8_t *scratch;          /* xf_scratch_bound(raw_len, lossy) bytes */
    uint8_t *out;              /* raw_len bytes */
    int stream;                /* out is written with streaming stores (mem_stream: a large cold
                                  destination, restored whole) */
} xf_chunk;

/* The decoder's reader of a chunk's coded planes, in order (lib/codec/codec.c implements it). */
enum { XF_IN_DECODE = 0, XF_IN_MAY_POINT = 1, XF_IN_HEADER = 2 };
typedef struct xf_in xf_in;
struct xf_in {
    /* Takes the next plane, of size bytes: decodes it into dst (XF_IN_DECODE), or, where
     * it is stored at exactly that size, points *plane into the payload (XF_IN_MAY_POINT,
     * else decodes; XF_IN_HEADER: a header plane, which must be stored). Returns CKPZ_OK,
     * or an error whose message it wrote to why, naming the plane: CKPZ_ERR_VERSION for a
     * codec this build does not have. */
    ckpz_error (*next)(xf_in *in, size_t size, uint8_t *dst, int mode, const uint8_t **plane);
    /* CKPZ_OK when every coded byte of the payload was taken, else an error (message). */
    ckpz_error (*end)(xf_in *in);
    char *why; /* the transforms write their own errors here too */
    size_t whylen;
};

typedef struct xf_desc {
    uint8_t id;
    const char *name;
    uint8_t lossy;        /* restores approximately: only in lossy entries */
    /* Scratch (xf_enc.scratch, xf_chunk.scratch) for a chunk of n bytes. */
    size_t (*scratch)(size_t n);
    /* Writes the chunk's planes to out (pointing into raw, scratch or out->head) and the
     * CRC-32C of the bytes the chunk restores to *raw_crc. Returns the plane count, 0 when
     * the transform declines the chunk (it is coded losslessly instead), -1 when out of
     * memory. */
    int (*encode)(const xf_enc *e, xf_out *out, uint32_t *raw_crc);
    /* Restores c->raw_len bytes to c->out from the planes in, checking their CRC-32C;
     * on failure an error code and a message in in->why. Hostile input: every plane is
     * decoded to the size the transform derives, every count checked before use. */
    ckpz_error (*decode)(const xf_chunk *c, xf_in *in);
} xf_desc;

/* The row of a transform id, NULL when this build has none. */
const xf_desc *xf_get(unsigned id);

/* The lossless transform and element size for a chunk of dtype with predictor pred:
 * the dtype's own (byte planes), int for diff residuals, escape where pred_choose gave
 * esc_low >= 0 and the residual is 2 or 4 bytes wide (escape.h). */
uint8_t xf_for_chunk(uint8_t pred, ckpz_dtype dtype, int esc_low, uint8_t *esize);

/* The largest scratch any transform (lossy: the lossy ones too) needs for n bytes. */
size_t xf_scratch_bound(size_t n, int lossy);
/* The largest coded planes of a lossless chunk of n bytes, desc bytes of descriptor per
 * plane, where every plane is coded within ent_bound of its size (escape chunks that grow
 * past it are coded again as opaque bytes: workmem.c). */
size_t xf_coded_bound(size_t n, size_t desc);

/* xf_lossless.c, xf_quant.c, q8.c: the rows' functions. */
size_t xf_lossless_scratch(size_t n);
size_t xf_bytes_coded(size_t n);
int xf_lossless_encode(const xf_enc *e, xf_out *out, uint32_t *raw_crc);
ckpz_error xf_bytes_decode(const xf_chunk *c, xf_in *in);
ckpz_error xf_esc_decode(const xf_chunk *c, xf_in *in);
size_t xf_quant_scratch(size_t n);
int xf_quant_encode(const xf_enc *e, xf_out *out, uint32_t *raw_crc);
ckpz_error xf_quant_decode(const xf_chunk *c, xf_in *in);
/* q8.c: GGML Q8_0 blocks; the encoder declines chunks that do not look like them. */
size_t xf_q8_scratch(size_t n);
int xf_q8_encode(const xf_enc *e, xf_out *out, uint32_t *raw_crc);
ckpz_error xf_q8_decode(const xf_chunk *c, xf_in *in);

#endif
