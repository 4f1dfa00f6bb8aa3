/* buffer.c — the one-shot in-memory calls. Compression adapts the streaming path (memory
 * reader, growing memory writer), so there is one implementation of it; decompression
 * restores through the index straight into the caller's buffer (archive.c). */
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "container/container.h"

typedef struct memrd {
    const uint8_t *p;
    size_t n, pos;
} memrd;

static ptrdiff_t mem_read(void *v, void *buf, size_t n)
{
    memrd *m = v;
    if (n > m->n - m->pos) n = m->n - m->pos;
    memcpy(buf, m->p + m->pos, n);
    m->pos += n;
    return (ptrdiff_t)n;
}

typedef struct memwr {
    uint8_t *p;
    size_t n, cap;
} memwr;

static int mem_write(void *v, const void *buf, size_t n)
{
    memwr *m = v;
    if (n > m->cap - m->n) {
        size_t cap = m->cap * 2 > m->n + n ? m->cap * 2 : m->n + n;
        uint8_t *q = realloc(m->p, cap);
        if (!q) return -1;
        m->p = q;
        m->cap = cap;
    }
    memcpy(m->p + m->n, buf, n);
    m->n += n;
    return 0;
}

/* ckpz_params.patch: the output is all in memory */
static int mem_patch(void *v, const void *buf, size_t n, uint64_t off)
{
    memwr *m = v;
    if (off > m->n || n > m->n - off) return -1;
    memcpy(m->p + off, buf, n);
    return 0;
}

ckpz_error ckpz_compress_buffer(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size,
                                void **dst, size_t *dst_size)
{
    memrd r = {src, src_size, 0};
    memwr w = {malloc(src_size / 2 + 4096), 0, src_size / 2 + 4096};
    *dst = NULL;
    *dst_size = 0;
    if (!w.p) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    ckpz_params q;
    ctx_clear(ctx);
    ckpz_error err = params_resolve(ctx, params, &q);
    if (err) {
        free(w.p);
        return err;
    }
    if (!q.patch) { /* the output can be rewritten: the base's CRC needs no pass of its own */
        q.patch = mem_patch;
        q.patch_opaque = &w;
    }
    err = ckpz_compress_stream(ctx, &q, mem_read, &r, src_size, mem_write, &w, NULL);
    if (err) {
        free(w.p);
        return err;
    }
    *dst = w.p;
    *dst_size = w.n;
    return CKPZ_OK;
}

ckpz_error ckpz_decompress_buffer(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size,
                                  void *dst, size_t dst_size)
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
