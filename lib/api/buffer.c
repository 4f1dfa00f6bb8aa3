/* buffer.c — the one-shot in-memory calls. Compression adapts the streaming path (memory
 * reader, writer into a buffer of ckpz_compress_bound bytes), so there is one
 * implementation of it; decompression restores through the index straight into the
 * caller's buffer (archive.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "codec/workmem.h"
#include "container/container.h"

/* ckpz_compress_bound. Every .ckpz file is laid out as (doc/format.md)
 *
 *     header 32, [base frame], {entry frame, chunk frame*}*, index, trailer 40
 *
 * What a file with tensors takes has no useful bound in its input's size: each tensor
 * costs its name and shape twice (entry frame and index record: up to 220 + 2 N + 16 D
 * bytes) plus a chunk frame and its seek record (56 + its bytes), and a format can
 * describe a tensor in far fewer bytes than that (a safetensors header entry of ~45
 * bytes for a one-byte tensor; an empty tensor's name of 250 bytes is 3.3 times larger
 * out than in; test_buffer has such files). So the bound is that of the input coded as
 * opaque bytes (format RAW, no dtype), and ckpz_compress_into falls back to that coding
 * when the described file would pass the bound (compress_memory). Opaque coding of n
 * bytes with any params writes at most:
 *
 *   header                                        32
 *   base frame: tag, length, 20 fixed bytes, a name cut to 4096 (CTR_MAX_BASE_NAME),
 *     CRC                                         12 + 20 + 4096 = 4128
 *   one entry (none when n = 0): the reader gives one open opaque segment, so one
 *     entry frame: tag, length, stream record (16 + 8 base offset; opaque entries are
 *     never lossy, have no name and no shape), CRC 12 + 24 = 36
 *   C <= ceil(n / chunk_size) <= ceil(n / 65536) chunk frames (every chunk but the
 *     last is full; CKPZ_CHUNK_MIN = 65536; copy frames of a delta only merge chunks):
 *     opaque bytes have element size 1, so every predictor leaves them transform none
 *     with one plane, and the entropy stage never codes a plane in more than its size
 *     (each codec must beat stored, lib/entropy/select.c): 32 + 8 + R each; a copy
 *     frame is 32                                 40 C + n
 *   index: tag and counts 24, the entry (index form 40 + 8 base offset), 16 per chunk
 *                                                 24 + 48 + 16 C
 *   trailer                                       40
 *
 * in all n + 56 C + 4308 <= n + floor(n / 256) + 4365, as 56 C <= 56 n / 65536 + 56 and
 * 56 n / 65536 <= n / 256 < floor(n / 256) + 1. The bound adds 64 KiB, not 4365 bytes,
 * so that small described files (a few hundred bytes of names and frames a tensor) keep
 * their description unless they really outgrow it. */
#define BOUND_FIXED ((size_t)64 << 10)

size_t ckpz_compress_bound(size_t src_size)
{
    size_t extra = (src_size >> 8) + BOUND_FIXED;
    return src_size > SIZE_MAX - extra ? 0 : src_size + extra;
}

/* One compression of src into dst[0..cap): the bytes are kept while they fit in cap
 * and past it only counted (so that a too-small buffer still learns whether the file
 * fits the bound), up to limit: w->size > cap when it did not fit, w->full when it would
 * pass limit. The sink can be patched: the base's CRC needs no pass of its own (a patch
 * the caller set in the deprecated params field is used instead, as before). */
static ckpz_error compress_once(ckpz_ctx *ctx, const ckpz_params *q, const void *src, size_t src_size, void *dst,
                                size_t cap, size_t limit, ckpz_mem *w)
{
    ckpz_mem r = {.data = (void *)src, .size = src_size};
    ckpz_source in;
    ckpz_sink out;
    *w = (ckpz_mem){.data = dst, .capacity = cap < limit ? cap : limit, .limit = limit};
    ckpz_source_mem(&in, &r);
    ckpz_sink_mem(&out, w);
    if (q->patch) out.patch = NULL;
    ctx_clear(ctx);
    return ckpz_compress_io(ctx, q, &in, &out, NULL);
}

/* ckpz_compress_into. The file as the input is described, if it fits the bound; else
 * the input coded as opaque bytes, which always fits (see above). Either way the output
 * does not depend on cap, which only decides whether it can be kept. */
static ckpz_error compress_memory(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size, void *dst,
                                  size_t cap, size_t *written)
{
    ckpz_params q;
    ctx_clear(ctx);
    ckpz_error err = params_resolve(ctx, params, &q);
    if (err) return err;
    if ((!src && src_size) || (!dst && cap)) return ctx_fail(ctx, CKPZ_ERR_PARAM, "NULL buffer");
    size_t bound = ckpz_compress_bound(src_size);
    if (!bound) return ctx_fail(ctx, CKPZ_ERR_LIMIT, "input of %zu bytes too large", src_size);
    ckpz_mem w;
    err = compress_once(ctx, &q, src, src_size, dst, cap, bound, &w);
    if (err == CKPZ_ERR_WRITE && w.full) { /* the described file passes the bound: opaque bytes */
        q.format = CKPZ_INPUT_RAW;
        q.raw_dtype = CKPZ_DTYPE_NONE;
        err = compress_once(ctx, &q, src, src_size, dst, cap, bound, &w);
        if (err == CKPZ_ERR_WRITE && w.full)
            err = ctx_fail(ctx, CKPZ_ERR_INTERNAL, "output of %zu bytes exceeds ckpz_compress_bound", src_size);
    }
    if (err) return err;
    if (w.size > cap) {
        ctx_clear(ctx);
        return ctx_fail(ctx, CKPZ_ERR_LIMIT,
                        "output buffer too small: %zu bytes for an output of %zu "
                        "(ckpz_compress_bound(%zu) = %zu always suffices)",
                        cap, w.size, src_size, bound);
    }
    *written = w.size;
    return CKPZ_OK;
}

ckpz_error ckpz_compress_into(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size, void *dst,
                              size_t dst_capacity, size_t *written)
{
    if (!written) {
        ctx_clear(ctx);
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "NULL written");
    }
    *written = 0;
    return compress_memory(ctx, params, src, src_size, dst, dst_capacity, written);
}

ckpz_error ckpz_compress_buffer(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size, void **dst,
                                size_t *dst_size)
{
    *dst = NULL;
    *dst_size = 0;
    size_t bound = ckpz_compress_bound(src_size), n = 0;
    ctx_clear(ctx);
    if (!bound) return ctx_fail(ctx, CKPZ_ERR_LIMIT, "input of %zu bytes too large", src_size);
    /* The bound once (pages are only touched as the output reaches them; a room that
     * ckpz_free kept, already faulted in), then given back down to the size written or
     * kept whole (workmem_room_fit): no growth, no copy. */
    uint8_t *p = workmem_room(bound); /* released with ckpz_free (workmem_room_free) or free */
    if (!p) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    ckpz_error err = compress_memory(ctx, params, src, src_size, p, bound, &n);
    if (err) {
        workmem_room_free(p);
        return err;
    }
    *dst = workmem_room_fit(p, bound, n);
    *dst_size = n;
    return CKPZ_OK;
}

void ckpz_free(void *p) { workmem_room_free(p); }

ckpz_error ckpz_decompress_buffer(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size, void *dst,
                                  size_t dst_size)
{
    ctx_clear(ctx);
    return archive_restore_memory(ctx, params, src, src_size, dst, dst_size);
}

ckpz_error ckpz_original_size(ckpz_ctx *ctx, const void *src, size_t src_size, uint64_t *size)
{
    ctx_clear(ctx);
    ctr_trailer t;
    ctr_header h;
    if (src_size < 8 || memcmp(src, ctr_magic, 8) != 0) return ctx_fail(ctx, CKPZ_ERR_NOT_CKPZ, "not a ckpz file");
    if (src_size < CTR_HEADER_SIZE + CTR_TRAILER_SIZE) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated");
    ckpz_error err = ctr_header_read(ctx, src, &h);
    if (!err) err = ctr_trailer_read(ctx, (const uint8_t *)src + src_size - CTR_TRAILER_SIZE, src_size, &t);
    if (!err) *size = t.original_size;
    return err;
}
