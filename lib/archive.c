/* archive.c — random access to a complete .ckpz file: the trailer at the end locates
 * the index, whose seek table gives every chunk's position, so one tensor is decoded
 * without reading the others (ckpz -l, --extract). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "common/crc32c.h"

struct ckpz_archive {
    ckpz_pread_fn pr;
    void *opaque;
    ckpz_archive_info info;
    size_t mem_limit;
    ctr_entry *e;
    size_t ne;
    ctr_chunkrec *c;
    size_t nc;
    uint64_t *compressed; /* per entry */
};

void ckpz_archive_close(ckpz_archive *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->ne; i++) ctr_entry_clear(&a->e[i]);
    free(a->e);
    free(a->c);
    free(a->compressed);
    free(a);
}

ckpz_error ckpz_archive_open(ckpz_ctx *ctx, const ckpz_params *params, ckpz_pread_fn pr, void *opaque,
                             uint64_t file_size, ckpz_archive **out)
{
    ctx_clear(ctx);
    *out = NULL;
    ckpz_params p;
    ckpz_error err = params_resolve(ctx, params, &p);
    if (err) return err;
    uint8_t hb[CTR_HEADER_SIZE], tb[CTR_TRAILER_SIZE];
    ctr_header h;
    ctr_trailer t;
    if (file_size < 8 || pr(opaque, hb, 8, 0) != 0 || memcmp(hb, ctr_magic, 8) != 0)
        return ctx_fail(ctx, CKPZ_ERR_NOT_CKPZ, "not a ckpz file");
    if (file_size < CTR_HEADER_SIZE + 24 + CTR_TRAILER_SIZE)
        return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated (%llu bytes)", (unsigned long long)file_size);
    if (pr(opaque, hb, sizeof hb, 0) != 0 || pr(opaque, tb, sizeof tb, file_size - CTR_TRAILER_SIZE) != 0)
        return ctx_fail(ctx, CKPZ_ERR_READ, "read error");
    if ((err = ctr_header_read(ctx, hb, &h)) || (err = ctr_trailer_read(ctx, tb, file_size, &t))) return err;
    if (t.index_len > p.mem_limit) return ctx_fail(ctx, CKPZ_ERR_LIMIT, "index larger than the memory limit");
    if (chunk_frame_bound(h.chunk_size) > p.mem_limit)
        return ctx_fail(ctx, CKPZ_ERR_LIMIT, "chunk size %u needs buffers larger than the memory limit (%zu bytes)",
                        h.chunk_size, p.mem_limit);
    uint8_t *ib = malloc((size_t)t.index_len);
    ckpz_archive *a = calloc(1, sizeof *a);
    if (!ib || !a) {
        free(ib);
        free(a);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    if (pr(opaque, ib, (size_t)t.index_len, t.index_offset) != 0) {
        err = ctx_fail(ctx, CKPZ_ERR_READ, "read error in the index");
        goto fail;
    }
    if (crc32c(0, ib, (size_t)t.index_len) != t.index_crc) {
        err = ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "index checksum mismatch");
        goto fail;
    }
    if ((err = ctr_index_read(ctx, ib, (size_t)t.index_len, t.index_offset, t.original_size, p.mem_limit, &a->e,
                              &a->ne, &a->c, &a->nc)))
        goto fail;
    if (!(a->compressed = calloc(a->ne ? a->ne : 1, sizeof *a->compressed))) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < a->ne; i++)
        for (uint64_t k = 0; k < a->e[i].nchunks; k++) a->compressed[i] += a->c[a->e[i].first_chunk + k].frame_len;
    a->pr = pr;
    a->opaque = opaque;
    a->mem_limit = p.mem_limit;
    a->info = (ckpz_archive_info){CTR_VERSION, (ckpz_input_format)h.format, t.original_size, file_size,
                                  h.chunk_size, t.content_crc, a->ne, a->nc};
    free(ib);
    *out = a;
    return CKPZ_OK;
fail:
    free(ib);
    ckpz_archive_close(a);
    return err;
}

void ckpz_archive_get_info(const ckpz_archive *a, ckpz_archive_info *info) { *info = a->info; }

ckpz_error ckpz_archive_entry(const ckpz_archive *a, uint64_t i, ckpz_entry *out)
{
    if (i >= a->ne) return CKPZ_ERR_NOT_FOUND;
    const ctr_entry *e = &a->e[i];
    *out = (ckpz_entry){e->name, (ckpz_dtype)e->dtype, e->ndim, e->shape, e->offset, e->length,
                        a->compressed[i], e->nchunks};
    return CKPZ_OK;
}

ckpz_error ckpz_archive_find(ckpz_ctx *ctx, const ckpz_archive *a, const char *name, uint64_t *index)
{
    ctx_clear(ctx);
    for (size_t i = 0; i < a->ne; i++)
        if (a->e[i].dtype != CKPZ_DTYPE_NONE && !strcmp(a->e[i].name, name)) {
            *index = i;
            return CKPZ_OK;
        }
    return ctx_fail(ctx, CKPZ_ERR_NOT_FOUND, "no tensor named '%s'", name);
}

ckpz_error ckpz_archive_extract(ckpz_ctx *ctx, ckpz_archive *a, uint64_t i, ckpz_write_fn wr, void *opaque)
{
    ctx_clear(ctx);
    if (i >= a->ne) return ctx_fail(ctx, CKPZ_ERR_NOT_FOUND, "no entry %llu", (unsigned long long)i);
    const ctr_entry *e = &a->e[i];
    const char *name = e->dtype != CKPZ_DTYPE_NONE ? e->name : "(opaque bytes)";
    size_t cs = a->info.chunk_size, fbound = chunk_frame_bound(cs);
    uint8_t *frame = malloc(fbound), *planes = malloc(cs), *raw = malloc(cs);
    ent_ctx *ec = ent_ctx_create();
    ckpz_error err = CKPZ_OK;
    if (!frame || !planes || !raw || !ec) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (uint64_t k = 0; k < e->nchunks; k++) {
        uint64_t cn = e->first_chunk + k;
        const ctr_chunkrec *r = &a->c[cn];
        ctr_chunk h;
        char why[160];
        if (r->frame_len > fbound) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "chunk %llu (tensor '%s'): frame too large",
                           (unsigned long long)cn, name);
            goto out;
        }
        if (a->pr(a->opaque, frame, r->frame_len, r->frame_offset) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_READ, "chunk %llu (tensor '%s'): read error", (unsigned long long)cn, name);
            goto out;
        }
        char where[160];
        snprintf(where, sizeof where, "chunk %llu (tensor '%.100s')", (unsigned long long)cn, name);
        if ((err = ctr_chunk_read(ctx, frame, (uint32_t)cs, fbound - CTR_FRAME_SIZE, where, &h))) goto out;
        if (h.entry != i || h.raw_len != r->raw_len || CTR_FRAME_SIZE + h.payload_len != r->frame_len) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "chunk %llu (tensor '%s'): does not match the seek table",
                           (unsigned long long)cn, name);
            goto out;
        }
        if ((err = chunk_decode(ec, &h, frame + CTR_FRAME_SIZE, planes, raw, why, sizeof why))) {
            err = ctx_fail(ctx, err, "chunk %llu (tensor '%s'): %s", (unsigned long long)cn, name, why);
            goto out;
        }
        if (wr(opaque, raw, h.raw_len) != 0) {
            err = ctx_fail(ctx, CKPZ_ERR_WRITE, "write error");
            goto out;
        }
    }
out:
    free(frame);
    free(planes);
    free(raw);
    ent_ctx_free(ec);
    return err;
}
