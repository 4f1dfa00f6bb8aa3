/* entropy.h — fourth stage of the data path: code one byte plane of one chunk.
 *
 * A plane is a run of bytes with one statistical role (the exponents of a chunk of
 * floats, a mantissa byte, the high bytes of integers, opaque header bytes). ent_encode
 * picks the cheapest codec for it from measured or closely estimated sizes, so random
 * mantissa planes are stored without spending coder time, and returns the codec id that
 * the container records. ent_decode treats its input as hostile: it never reads or
 * writes outside the given buffers and reports corrupt input instead of crashing.
 */
#ifndef CKPZ_ENTROPY_H
#define CKPZ_ENTROPY_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"

/* Codec ids are stored in the container: the numbers are fixed. doc/format.md reserves
 * the ranges: 0-63 this format's codecs, assigned in order; 64-127 later versions of the
 * format; 128-255 private use, never written by ckpz. Each id has one row in the
 * registry (codecs.c). */
enum ent_codec {
    ENT_STORED = 0, /* bytes as they are */
    ENT_CONST = 1,  /* one byte value repeated n times (payload: the byte) */
    ENT_RANS0 = 2,  /* order-0 rANS */
    ENT_RANS1 = 3,  /* order-1 rANS (context: previous byte of the plane) */
    ENT_ZSTD = 4,   /* zstd frame */
    ENT_LZ4 = 5,    /* LZ4 block */
    ENT_SNAPPY = 6, /* snappy (raw format) */
    ENT_DEFLATE = 7, /* raw deflate stream (RFC 1951) */
    ENT_RANSCTX = 8,  /* rANS with a small context (bucket of the byte 16 back) */
    ENT_RANS0S = 9,   /* order-0 rANS with 4 states, for small planes */
    ENT_RANSCTXM = 10, /* the same as 8 with a round's context: the mean of the group's previous 16 bytes */
    ENT_RANS0T = 11    /* order-0 rANS, its last rounds coded into the states it starts from */
};
#define ENT_CODEC_LIMIT 64 /* ids of this format: below this */

/* What the plane holds; a hint for which codecs are worth trying. */
enum ent_hint {
    ENT_HINT_OPAQUE = 0,   /* headers, unknown bytes: zstd territory */
    ENT_HINT_EXPONENT = 1, /* float exponent plane: skewed, order-1 may pay */
    ENT_HINT_MANTISSA = 2, /* float mantissa bytes: mostly near-random */
    ENT_HINT_INT = 3,      /* integer bytes: runs, small values */
    ENT_HINT_RESIDUAL = 4, /* a delta residual's byte: skewed, sparse; zstd only for near-empty planes */
    ENT_HINT_SMALL = 5,    /* a few dozen small values in large planes (escape.h's A): counted from a
                            * sample, every value between the block's least and largest kept codable */
    ENT_HINT_LIST = 6      /* a coded entry list's column: repeats from entry to entry, zstd first */
};
/* OR-ed into ENT_HINT_EXPONENT: up to level 3 the plane may be counted from a sample
 * (the exponent byte of a 16-bit float, half its bytes). */
#define ENT_HINT_SAMPLE 0x100

typedef struct ent_ctx ent_ctx; /* per-thread scratch (tables, zstd contexts) */

ent_ctx *ent_ctx_create(void);
void ent_ctx_free(ent_ctx *c);
/* Buffer k (< ENT_KEEP) kept in c for its caller between calls (the entry lists'
 * columns, coded by the context kept for them), grown to at least n bytes with its
 * contents kept; NULL when out of memory (the buffer as it was). Kept, its pages stay
 * faulted in from one compression to the next. */
#define ENT_KEEP 5
uint8_t *ent_keep(ent_ctx *c, unsigned k, size_t n);
/* The coder choice for what c encodes from now on (ckpz_params.codec; AUTO on creation). */
void ent_ctx_set_codec(ent_ctx *c, ckpz_codec choice);

/* What the planes c encodes from now on come from (codec/repeats.h; ENT_LZ_OFF on
 * creation): ENT_LZ_RUNS, a chunk with runs of zeros, and ENT_LZ_REPEATS, one with repeated
 * content, have zstd tried on each plane, random-looking ones included (repeated rows and
 * zero runs stay in every byte plane); ENT_LZ_REPEATS also at zstd level 6, not 3, at the
 * fast levels; ENT_LZ_TEXT, a text header known as such (fmt_segment.text), at zstd
 * level 1 at the fast levels; ENT_LZ_LIST, an entry list's column, as ENT_LZ_REPEATS
 * with zstd's tables sized for small inputs (zstd_backend.c). */
enum { ENT_LZ_OFF = 0, ENT_LZ_RUNS = 1, ENT_LZ_REPEATS = 2, ENT_LZ_TEXT = 3, ENT_LZ_LIST = 4 };
void ent_ctx_set_lz(ent_ctx *c, int mode);

/* Worst-case encoded size of an n-byte plane (for any codec the selector may pick). */
size_t ent_bound(size_t n);

/* Encodes src[0..n) into dst (capacity >= ent_bound(n)) with the cheapest codec the
 * level allows (1 = fastest .. 9 = smallest), among those c's choice allows
 * (ent_ctx_set_codec). Returns the encoded size and sets *codec. Never fails: stored is
 * always possible. n may be 0. */
size_t ent_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level, int hint,
                  uint8_t *codec);

/* Decodes exactly n bytes from src[0..srclen) with the given codec.
 * Returns 0 on success, -1 if the input is corrupt or does not decode to exactly n bytes,
 * or the codec is not one this build has (ent_codec_known). */
int ent_decode(ent_ctx *c, uint8_t codec, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);

/* 1 when this build has the codec: a file using another was written by a newer ckpz
 * (or a private build) and must be refused as such, not as corrupt. */
int ent_codec_known(uint8_t codec);
/* "stored", "rans0", ...; "unknown" for an id without a codec. */
const char *ent_codec_name(uint8_t codec);
/* NULL when the codec can run in this process, else why not (its library could not be
 * loaded); for a choice (ckpz_params.codec), its back end's. */
const char *ent_codec_missing(uint8_t codec);
const char *ent_choice_missing(ckpz_codec choice);

#endif
