/* codec.h — one chunk through transforms/ and entropy/, shared by the compressor,
 * the streaming decompressor and the random-access reader. */
#ifndef CKPZ_CODEC_H
#define CKPZ_CODEC_H

#include "container/container.h"
#include "entropy/entropy.h"
#include "transforms/quant.h"

/* Per-thread working memory for chunk_encode and chunk_decode: an entropy context and a
 * chunk-sized plane buffer for each of n threads. */
typedef struct chunk_scratch {
    int n;
    ent_ctx **ec;
    uint8_t **planes;      /* chunk_planes_bound(chunk_size) bytes each */
    quant_work **qw;       /* lossy coding only: encoder state and */
    uint8_t **restored;    /* the chunk as the decoder will restore it */
} chunk_scratch;

/* NULL when out of memory. lossy: 0 for lossless files only, CHUNK_SCRATCH_DECODE_LOSSY
 * to decode lossy chunks (their planes can outgrow the chunk), CHUNK_SCRATCH_ENCODE_LOSSY
 * to code them (also the encoder's state). */
enum { CHUNK_SCRATCH_DECODE_LOSSY = 1, CHUNK_SCRATCH_ENCODE_LOSSY = 2 };
chunk_scratch *chunk_scratch_create(int n, size_t chunk_size, int lossy);
/* Scratch a chunk of n original bytes needs for its planes (lossy: larger). */
size_t chunk_planes_bound(size_t n, int lossy);
void chunk_scratch_free(chunk_scratch *s); /* accepts NULL */

/* Largest frame (header + payload) for a chunk of n original bytes. */
size_t chunk_frame_bound(size_t n);
/* Where a stored chunk's bytes lie in its frame (CKPZ_LEVEL_STORE: after the header and
 * the one plane's descriptor): a caller that reads the chunk there before coding it
 * stored saves the copy. */
#define CHUNK_STORED_AT (CTR_FRAME_SIZE + CTR_PLANE_DESC)

/* Codes n bytes of dtype into out (chunk_frame_bound(n) bytes): frame header then
 * payload. base: the base's matching n bytes (delta coding: the predictor is chosen
 * per chunk, by estimate, or at levels >= 7 by coding every candidate), or NULL.
 * planes is scratch of n bytes. Returns the frame length and the CRC of the original
 * bytes, and when base_crc is not NULL (and base is given) the CRC of the base's n
 * bytes, taken while the prediction has them in cache. */
size_t chunk_encode(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                    const uint8_t *base, uint8_t *planes, uint8_t *out, uint32_t *raw_crc, uint32_t *base_crc);

/* chunk_encode of a chunk of an entry of entry_dtype coded as dtype `as` (a float tensor's
 * bytes as they are: CKPZ_DTYPE_NONE). The decoder undoes a predictor with the map of
 * the entry's dtype (doc/format.md, "Predictors"); where `as` is of another float class,
 * diff would be undone with the other map, so against a base only xor, which no map
 * changes, or no predictor is tried, the smaller kept (a group's chunk, encode.c; the
 * restored bytes of a tiny lossy frame, chunk_encode_lossy). */
size_t chunk_encode_as(ent_ctx *ec, int level, ckpz_dtype as, ckpz_dtype entry_dtype, uint32_t entry,
                       const uint8_t *raw, size_t n, const uint8_t *base, uint8_t *planes, uint8_t *out,
                       uint32_t *raw_crc, uint32_t *base_crc);
/* chunk_encode without a base, its context under the codec choice auto
 * (ent_ctx_set_codec): where a sample shows that LZ cannot pay on a chunk of 1-byte
 * integers, its plane is coded without trying zstd (codec.c: lz_cannot_pay). */
size_t chunk_encode_alone(ent_ctx *ec, int level, ckpz_dtype dtype, uint32_t entry, const uint8_t *raw, size_t n,
                          uint8_t *planes, uint8_t *out, uint32_t *raw_crc);
/* A text header's n bytes (fmt_segment.text), coded alone as bytes with LZ's fastest
 * level (ENT_LZ_TEXT): under the codec choice auto (auto_codec) by zstd alone, else as
 * the choice allows. */
size_t chunk_encode_text(ent_ctx *ec, int level, uint32_t entry, const uint8_t *raw, size_t n, uint8_t *planes,
                         uint8_t *out, uint32_t *raw_crc, int auto_codec);

/* Lossy: codes the chunk's n bytes (elements elem0.. of their tensor) with the plan,
 * writing what the decoder will restore to `restored` (n bytes), its CRC to raw_crc,
 * and adding the errors to *st. Falls back to lossless coding (restored = raw) where
 * the plan asks for it (max_mae), where the lossy form would be larger than the original,
 * and where it would be no smaller than the chunk's lossless frame (tried when the lossy
 * frame is half the chunk or more).
 * Returns the frame length, 0 when out of memory. */
size_t chunk_encode_lossy(chunk_scratch *s, int worker, int level, const quant_plan *plan, ckpz_dtype dtype,
                          uint32_t entry, uint64_t elem0, const uint8_t *raw, size_t n, const uint8_t *base,
                          uint8_t *out, uint32_t *raw_crc, const uint8_t **restored, quant_stats *st);

/* Writes a copy frame (PRED_COPY: n bytes equal to the base's, no payload) to out
 * (CTR_FRAME_SIZE bytes). */
void chunk_copy_frame(uint32_t entry, uint64_t n, uint32_t raw_crc, uint8_t *out);

/* Verifies the payload checksum, decodes into out (h->raw_len bytes) using planes
 * (h->raw_len bytes of scratch) and verifies the original bytes' checksum. base: the
 * base's bytes for this chunk when its entry has one, else NULL (a chunk with a
 * predictor is then corrupt). Copy frames are not decoded here: their bytes are the
 * base's, checked with chunk_copy_check. On failure returns an error code and writes
 * the reason to why. */
ckpz_error chunk_decode(ent_ctx *ec, const ctr_chunk *h, ckpz_dtype dtype, const uint8_t *payload, const uint8_t *base,
                        uint8_t *planes, uint8_t *out, char *why, size_t whylen);
/* The same; stream: out is part of a large destination just handed out and read by no
 * one soon (a whole restore in memory), written with streaming stores where a transform
 * merges its planes (transforms/planes.h, mem_stream). */
ckpz_error chunk_decode_to(ent_ctx *ec, const ctr_chunk *h, ckpz_dtype dtype, const uint8_t *payload,
                           const uint8_t *base, uint8_t *planes, uint8_t *out, int stream, char *why, size_t whylen);

/* Whether the frame is a stored chunk as CKPZ_LEVEL_STORE writes it (no transform, no
 * predictor, one plane stored whole: its bytes are payload + CTR_PLANE_DESC), and
 * chunk_decode's checks of such a frame without copying its bytes anywhere (one CRC
 * pass: a caller may write them from the payload). */
int chunk_is_stored(const ctr_chunk *h, const uint8_t *payload);
ckpz_error chunk_check_stored(const ctr_chunk *h, const uint8_t *payload, char *why, size_t whylen);

/* Checks a copy frame against the base's bytes it stands for (h->raw_len bytes). */
ckpz_error chunk_copy_check(const ctr_chunk *h, const uint8_t *base, char *why, size_t whylen);

#endif
