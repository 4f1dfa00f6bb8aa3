/* format.c — serialisation and validation of every container structure (see
 * doc/format.md for the byte layout; the two must change together). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "container/container.h"
#include "transforms/ids.h"

const uint8_t ctr_magic[8] = {0x89, 'C', 'K', 'P', 'Z', '\r', '\n', 0x1a};

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* ---- file header ---- */
void ctr_header_write(uint8_t *out, const ctr_header *h)
{
    memset(out, 0, CTR_HEADER_SIZE);
    memcpy(out, ctr_magic, 8);
    st16(out + 8, CTR_VERSION_FEAT);
    st16(out + 10, (h->based ? CTR_FEAT_BASE : 0) | (h->lossy ? CTR_FEAT_LOSSY : 0) |
                       (h->packed ? CTR_FEAT_PACKED : 0) | (h->coded ? CTR_FEAT_CODED : 0) |
                       (h->gbase ? CTR_FEAT_GBASE : 0));
    st32(out + 12, h->chunk_size);
    out[16] = h->format;
    st32(out + 28, crc32c(0, out, 28));
}

ckpz_error ctr_header_read(ckpz_ctx *ctx, const uint8_t *in, ctr_header *h)
{
    if (memcmp(in, ctr_magic, 8) != 0) return ctx_fail(ctx, CKPZ_ERR_NOT_CKPZ, "not a ckpz file (bad magic)");
    if (crc32c(0, in, 28) != ld32(in + 28)) return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "file header checksum mismatch");
    unsigned v = ld16(in + 8), flags = ld16(in + 10);
    if (v < CTR_VERSION || v > CTR_VERSION_FEAT)
        return ctx_fail(ctx, CKPZ_ERR_VERSION,
                        "format version %u is not supported (this ckpz reads versions %u to %u: the file was written "
                        "by a newer ckpz?)",
                        v, CTR_VERSION, CTR_VERSION_FEAT);
    if (v == CTR_VERSION_FEAT && (flags & ~CTR_FEAT_KNOWN)) {
        unsigned bit = 0;
        while (!((flags & ~CTR_FEAT_KNOWN) >> bit & 1)) bit++;
        return ctx_fail(ctx, CKPZ_ERR_VERSION,
                        "the file needs format feature %u, which this ckpz does not have (it was written by a newer "
                        "ckpz)",
                        bit);
    }
    /* Version 2 is exactly "version 1 plus a base": flag 1 set, nothing else; version 3
     * sets flag 2 (lossy) and flag 1 when it has a base; version 4 (written for every
     * file with a base since the escape transform) sets flag 1 and maybe flag 2; version 5
     * names each feature it may use by a bit. */
    int ok = v == CTR_VERSION         ? flags == 0
             : v == CTR_VERSION_DELTA ? flags == 1
             : v == CTR_VERSION_LOSSY ? (flags & ~3u) == 0 && (flags & 2)
             : v == CTR_VERSION_ESC   ? (flags & ~3u) == 0 && (flags & 1)
                                      : 1;
    if (!ok || !all_zero(in + 17, 11))
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "file header has reserved flags or fields set");
    h->based = (flags & CTR_FEAT_BASE) != 0;
    h->lossy = (flags & CTR_FEAT_LOSSY) != 0;
    h->packed = v == CTR_VERSION_FEAT && (flags & CTR_FEAT_PACKED);
    h->coded = v == CTR_VERSION_FEAT && (flags & CTR_FEAT_CODED);
    h->gbase = v == CTR_VERSION_FEAT && (flags & CTR_FEAT_GBASE);
    h->version = (uint16_t)v;
    h->chunk_size = ld32(in + 12);
    h->format = in[16];
    if (h->chunk_size < CKPZ_CHUNK_MIN || h->chunk_size > CKPZ_CHUNK_MAX || (h->chunk_size & 7))
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "file header: invalid chunk size %u", h->chunk_size);
    if (h->format >= CKPZ_INPUT_COUNT_)
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "file header: unknown input format %u", h->format);
    return CKPZ_OK;
}

unsigned ctr_file_flags(const ctr_header *h)
{
    return (h->based ? CTR_FILE_BASED : 0u) | (h->lossy ? CTR_FILE_LOSSY : 0u) | (h->packed ? CTR_FILE_PACKED : 0u) |
           (h->coded ? CTR_FILE_CODED : 0u) | (h->gbase ? CTR_FILE_GBASE : 0u);
}

/* ---- base frame ---- */
size_t ctr_base_frame_size(const ctr_base *b) { return 8 + CTR_BASE_FIXED + (size_t)b->name_len + 4; }

void ctr_base_frame_write(uint8_t *out, const ctr_base *b)
{
    size_t body = CTR_BASE_FIXED + (size_t)b->name_len;
    st32(out, CTR_TAG_BASE);
    st32(out + 4, (uint32_t)body);
    st64(out + 8, b->size);
    st32(out + 16, b->crc);
    st32(out + 20, b->depth);
    st16(out + 24, b->name_len);
    st16(out + 26, 0);
    memcpy(out + 28, b->name, b->name_len);
    st32(out + 8 + body, crc32c(0, out, 8 + body));
}

ckpz_error ctr_base_frame_read(ckpz_ctx *ctx, const uint8_t *in, size_t avail, ctr_base *b, size_t *used)
{
    if (avail < 8) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated inside its base frame");
    if (ld32(in) != CTR_TAG_BASE) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "base frame missing after the header");
    uint32_t body = ld32(in + 4);
    if (body < CTR_BASE_FIXED || body > CTR_BASE_FIXED + CTR_MAX_BASE_NAME)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "base frame: invalid length %u", body);
    if (avail < 12 + (size_t)body) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated inside its base frame");
    if (crc32c(0, in, 8 + (size_t)body) != ld32(in + 8 + body))
        return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "base frame checksum mismatch");
    b->size = ld64(in + 8);
    b->crc = ld32(in + 16);
    b->depth = ld32(in + 20);
    b->name_len = ld16(in + 24);
    if (ld16(in + 26) != 0) return ctx_fail(ctx, CKPZ_ERR_VERSION, "base frame: reserved field set");
    if (b->name_len != body - CTR_BASE_FIXED || b->depth == 0)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "base frame: inconsistent fields");
    memcpy(b->name, in + 28, b->name_len);
    b->name[b->name_len] = 0;
    *used = 12 + (size_t)body;
    return CKPZ_OK;
}

/* ---- chunk frame header ---- */
void ctr_chunk_write(uint8_t *out, const ctr_chunk *c)
{
    st32(out, CTR_TAG_CHUNK);
    st32(out + 4, c->entry);
    st32(out + 8, c->raw_len);
    st32(out + 12, c->payload_len);
    out[16] = c->xf;
    out[17] = c->esize;
    out[18] = c->nplanes;
    out[19] = c->pred;
    st32(out + 20, c->raw_crc);
    st32(out + 24, c->payload_crc);
    st32(out + 28, crc32c(0, out, 28));
}

ckpz_error ctr_chunk_read(ckpz_ctx *ctx, const uint8_t *in, uint32_t chunk_size, size_t max_payload, const char *where,
                          ctr_chunk *c)
{
    if (ld32(in) != CTR_TAG_CHUNK) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: frame tag missing", where);
    if (crc32c(0, in, 28) != ld32(in + 28))
        return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "%s: frame header checksum mismatch", where);
    c->entry = ld32(in + 4);
    c->raw_len = ld32(in + 8);
    c->payload_len = ld32(in + 12);
    c->xf = in[16];
    c->esize = in[17];
    c->nplanes = in[18];
    c->pred = in[19];
    c->raw_crc = ld32(in + 20);
    c->payload_crc = ld32(in + 24);
    if (c->pred >= PRED_COUNT_) return ctx_fail(ctx, CKPZ_ERR_VERSION, "%s: unknown predictor %u", where, c->pred);
    if (c->pred == PRED_COPY) {
        if (c->raw_len == 0 || c->payload_len || c->nplanes || c->xf != XF_NONE || c->esize != 1)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: invalid copy frame", where);
        return CKPZ_OK;
    }
    if (c->raw_len == 0 || c->raw_len > chunk_size || c->payload_len > max_payload || c->nplanes == 0 ||
        (size_t)c->nplanes * CTR_PLANE_DESC > c->payload_len)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: invalid sizes (original %u, payload %u, planes %u)", where,
                        c->raw_len, c->payload_len, c->nplanes);
    return CKPZ_OK;
}

/* ---- entry records ---- */
size_t ctr_entry_size(const ctr_entry *e, int index_form)
{
    return 16 + (index_form ? 24 : 0) + (e->flags & CTR_ENTRY_BASED ? 8 : 0) +
           (e->flags & CTR_ENTRY_LOSSY ? CTR_LOSSY_STREAM + (index_form ? CTR_LOSSY_INDEX : 0) : 0) +
           (size_t)e->name_len + 8 * (size_t)e->ndim;
}

size_t ctr_lossy_write(uint8_t *p, const ctr_lossy *l, int index_form)
{
    p[0] = l->mode;
    p[1] = l->bits;
    p[2] = l->sym;
    p[3] = l->per_row;
    st32(p + 4, l->group);
    stf64(p + 8, l->bound);
    stf64(p + 16, l->abs_bound);
    stf64(p + 24, l->prune_thr);
    if (!index_form) return CTR_LOSSY_STREAM;
    p += CTR_LOSSY_STREAM;
    st64(p, l->n);
    st64(p + 8, l->exceptions);
    st64(p + 16, l->changed);
    st64(p + 24, l->frozen);
    stf64(p + 32, l->sum_abs);
    stf64(p + 40, l->sum_sq);
    stf64(p + 48, l->max_abs);
    stf64(p + 56, l->vmin);
    stf64(p + 64, l->vmax);
    return CTR_LOSSY_STREAM + CTR_LOSSY_INDEX;
}

ckpz_error ctr_lossy_read(ckpz_ctx *ctx, const uint8_t *q, int index_form, ctr_lossy *l)
{
    l->mode = q[0];
    l->bits = q[1];
    l->sym = q[2];
    l->per_row = q[3];
    l->group = ld32(q + 4);
    l->bound = ldf64(q + 8);
    l->abs_bound = ldf64(q + 16);
    l->prune_thr = ldf64(q + 24);
    if (index_form) {
        q += CTR_LOSSY_STREAM;
        l->n = ld64(q);
        l->exceptions = ld64(q + 8);
        l->changed = ld64(q + 16);
        l->frozen = ld64(q + 24);
        l->sum_abs = ldf64(q + 32);
        l->sum_sq = ldf64(q + 40);
        l->max_abs = ldf64(q + 48);
        l->vmin = ldf64(q + 56);
        l->vmax = ldf64(q + 64);
    }
    /* Information only (chunks describe their own coding), but a mode this reader
     * does not know is a newer file's. */
    if (l->mode == 0 || l->mode > 5 || l->sym > 1 || l->per_row > 1)
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "entry record: unknown lossy mode %u", l->mode);
    return CKPZ_OK;
}

ckpz_error ctr_entry_check_kind(ckpz_ctx *ctx, const ctr_entry *e, unsigned file_flags)
{
    if (e->flags & ~(((file_flags & CTR_FILE_BASED) ? CTR_ENTRY_BASED : 0u) |
                     ((file_flags & CTR_FILE_LOSSY) ? CTR_ENTRY_LOSSY : 0u) |
                     ((file_flags & CTR_FILE_PACKED) ? CTR_ENTRY_PACKED : 0u)))
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "entry record: reserved flags set");
    unsigned never = CTR_ENTRY_LOSSY | ((file_flags & CTR_FILE_GBASE) ? 0u : CTR_ENTRY_BASED);
    if ((e->flags & CTR_ENTRY_PACKED) && (e->flags & never))
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry record: a packed entry coded against the base or lossy");
    if (e->dtype >= CKPZ_DTYPE_COUNT_)
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "entry record: unknown dtype %u", e->dtype);
    return CKPZ_OK;
}

void ctr_entry_write(uint8_t *out, const ctr_entry *e, int index_form)
{
    out[0] = e->dtype;
    out[1] = e->flags;
    st16(out + 2, e->name_len);
    st32(out + 4, e->ndim);
    st64(out + 8, e->offset);
    uint8_t *p = out + 16;
    if (index_form) {
        st64(p, e->length);
        st64(p + 8, e->first_chunk);
        st64(p + 16, e->nchunks);
        p += 24;
    }
    if (e->flags & CTR_ENTRY_BASED) {
        st64(p, e->base_offset);
        p += 8;
    }
    if (e->flags & CTR_ENTRY_LOSSY) p += ctr_lossy_write(p, &e->lossy, index_form);
    if (e->name_len) memcpy(p, e->name, e->name_len); /* an unnamed entry may have no name buffer */
    p += e->name_len;
    for (uint32_t i = 0; i < e->ndim; i++, p += 8) st64(p, e->shape[i]);
}

int ctr_entry_alloc(ctr_entry *e)
{
    e->shape = malloc(8 * (size_t)e->ndim + (size_t)e->name_len + 1);
    e->name = e->shape ? (char *)(e->shape + e->ndim) : NULL;
    return e->shape ? 0 : -1;
}

void ctr_entry_clear(ctr_entry *e)
{
    free(e->shape); /* and the name in it */
    memset(e, 0, sizeof *e);
}

void ctr_entries_free(ctr_entry *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++) free(e[i].shape); /* the entries go: nothing to clear */
    free(e);
}

ckpz_error ctr_entry_read(ckpz_ctx *ctx, const uint8_t *p, size_t avail, int index_form, unsigned file_flags,
                          ctr_entry *e, size_t *used)
{
    memset(e, 0, sizeof *e);
    size_t fixed = 16 + (index_form ? 24 : 0);
    if (avail < fixed) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry record truncated");
    e->dtype = p[0];
    e->name_len = ld16(p + 2);
    e->ndim = ld32(p + 4);
    e->offset = ld64(p + 8);
    e->flags = p[1];
    ckpz_error err = ctr_entry_check_kind(ctx, e, file_flags);
    if (err) return err;
    if (e->ndim > CTR_MAX_NDIM) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry record: %u dimensions", e->ndim);
    if (index_form) {
        e->length = ld64(p + 16);
        e->first_chunk = ld64(p + 24);
        e->nchunks = ld64(p + 32);
    }
    if (e->flags & CTR_ENTRY_BASED) {
        if (avail < fixed + 8) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry record truncated");
        e->base_offset = ld64(p + fixed);
        fixed += 8;
    }
    if (e->flags & CTR_ENTRY_LOSSY) {
        size_t ln = CTR_LOSSY_STREAM + (index_form ? CTR_LOSSY_INDEX : 0);
        if (avail < fixed + ln) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry record truncated");
        if ((err = ctr_lossy_read(ctx, p + fixed, index_form, &e->lossy))) return err;
        fixed += ln;
    }
    size_t need = fixed + e->name_len + 8 * (size_t)e->ndim;
    if (avail < need) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry record truncated");
    if (ctr_entry_alloc(e)) {
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading an entry record");
    }
    memcpy(e->name, p + fixed, e->name_len);
    e->name[e->name_len] = 0;
    for (uint32_t i = 0; i < e->ndim; i++) e->shape[i] = ld64(p + fixed + e->name_len + 8 * (size_t)i);
    *used = need;
    return CKPZ_OK;
}

/* ---- entry frame ---- */
size_t ctr_entry_frame_size(const ctr_entry *e) { return 8 + ctr_entry_size(e, 0) + 4; }

void ctr_entry_frame_write(uint8_t *out, const ctr_entry *e)
{
    size_t body = ctr_entry_size(e, 0);
    st32(out, CTR_TAG_ENTRY);
    st32(out + 4, (uint32_t)body);
    ctr_entry_write(out + 8, e, 0);
    st32(out + 8 + body, crc32c(0, out, 8 + body));
}

ckpz_error ctr_frame_len(ckpz_ctx *ctx, const uint8_t *in, uint64_t room, uint32_t tag, uint32_t lo, uint64_t hi,
                         size_t no, uint64_t at, uint32_t *blen)
{
    if (ld32(in) != tag)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu missing at byte %llu", no, (unsigned long long)at);
    *blen = ld32(in + 4);
    if (*blen < lo || *blen > hi || 12 + (uint64_t)*blen > room)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu at byte %llu: invalid length %u", no,
                        (unsigned long long)at, *blen);
    return CKPZ_OK;
}

ckpz_error ctr_entry_frame_len(ckpz_ctx *ctx, const uint8_t *in, uint64_t room, size_t no, uint64_t at, uint32_t *blen)
{
    return ctr_frame_len(ctx, in, room, CTR_TAG_ENTRY, 16, CTR_ENTRY_MAX, no, at, blen);
}

ckpz_error ctr_entry_frame_read(ckpz_ctx *ctx, const uint8_t *in, uint32_t blen, unsigned file_flags, size_t no,
                                uint64_t at, ctr_entry *e)
{
    size_t used;
    memset(e, 0, sizeof *e);
    if (crc32c(0, in, 8 + (size_t)blen) != ld32(in + 8 + blen))
        return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "entry frame %zu at byte %llu: checksum mismatch", no,
                        (unsigned long long)at);
    ckpz_error err = ctr_entry_read(ctx, in + 8, blen, 0, file_flags, e, &used);
    if (err) { /* the record's own message, with the frame it is in */
        char why[sizeof ctx->msg];
        snprintf(why, sizeof why, "%s", ctx->msg);
        return ctx_fail(ctx, err, "entry frame %zu at byte %llu: %s", no, (unsigned long long)at, why);
    }
    if (used != blen) {
        ctr_entry_clear(e);
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry frame %zu at byte %llu: length mismatch", no,
                        (unsigned long long)at);
    }
    return CKPZ_OK;
}

int ctr_entry_same(const ctr_entry *a, const ctr_entry *b)
{
    return a->offset == b->offset && a->dtype == b->dtype && a->ndim == b->ndim && a->flags == b->flags &&
           a->base_offset == b->base_offset && a->name_len == b->name_len && !memcmp(a->name, b->name, a->name_len) &&
           !memcmp(a->shape, b->shape, 8 * (size_t)a->ndim);
}

/* ---- index ---- */
size_t ctr_index_size(const ctr_entry *e, size_t ne, size_t nc)
{
    size_t n = 24 + nc * CTR_CHUNK_REC;
    for (size_t i = 0; i < ne; i++) n += ctr_entry_size(&e[i], 1);
    return n;
}

void ctr_index_write(uint8_t *out, const ctr_entry *e, size_t ne, const ctr_chunkrec *c, size_t nc)
{
    st32(out, CTR_TAG_INDEX);
    st32(out + 4, 0);
    st64(out + 8, ne);
    st64(out + 16, nc);
    uint8_t *p = out + 24;
    for (size_t i = 0; i < ne; i++) {
        ctr_entry_write(p, &e[i], 1);
        p += ctr_entry_size(&e[i], 1);
    }
    for (size_t i = 0; i < nc; i++, p += CTR_CHUNK_REC) {
        st64(p, c[i].frame_offset);
        st32(p + 8, c[i].raw_len);
        st32(p + 12, c[i].frame_len);
    }
}

ckpz_error ctr_index_read_plain(ckpz_ctx *ctx, const uint8_t *p, size_t len, uint64_t index_offset,
                                uint64_t original_size, size_t mem_limit, unsigned file_flags, ctr_entry **entries,
                                size_t *ne, ctr_chunkrec **chunks, size_t *nc)
{
    *entries = NULL;
    *chunks = NULL;
    *ne = *nc = 0;
    if (len < 24 || ld32(p) != CTR_TAG_INDEX) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: tag missing");
    if (ld32(p + 4) != 0) return ctx_fail(ctx, CKPZ_ERR_VERSION, "index: reserved field set");
    uint64_t e_n = ld64(p + 8), c_n = ld64(p + 16);
    size_t pos = 24;
    /* Each entry takes at least 40 bytes and each chunk 16: bound counts by the length. */
    if (e_n > len / 40 || c_n > len / CTR_CHUNK_REC || e_n * 40 + c_n * CTR_CHUNK_REC > len - 24)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: %llu entries and %llu chunks do not fit in %zu bytes",
                        (unsigned long long)e_n, (unsigned long long)c_n, len);
    if (e_n * sizeof(ctr_entry) > mem_limit || c_n * sizeof(ctr_chunkrec) > mem_limit)
        return ctx_fail(ctx, CKPZ_ERR_LIMIT, "index: too many entries or chunks for the memory limit");
    ctr_entry *e = calloc(e_n ? e_n : 1, sizeof *e);
    if (!e) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading the index");
    for (size_t i = 0; i < e_n; i++) {
        size_t used;
        ckpz_error err = ctr_entry_read(ctx, p + pos, len - pos, 1, file_flags, &e[i], &used);
        if (err) {
            ctr_entries_free(e, i + 1); /* a failed read left its entry cleared */
            return err;
        }
        pos += used;
    }
    return ctr_index_check(ctx, p, len, pos, index_offset, original_size, file_flags, e, (size_t)e_n, 0, c_n, entries,
                           ne, chunks, nc);
}

ckpz_error ctr_index_check(ckpz_ctx *ctx, const uint8_t *p, size_t len, size_t pos, uint64_t index_offset,
                           uint64_t original_size, unsigned file_flags, ctr_entry *e, size_t e_n, int kept,
                           uint64_t c_n, ctr_entry **entries, size_t *ne, ctr_chunkrec **chunks, size_t *nc)
{
    ckpz_error err = CKPZ_OK;
    ctr_chunkrec *c = NULL;
    if (!(c = malloc((c_n ? c_n : 1) * sizeof *c))) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading the index");
        goto fail;
    }
    uint64_t at = 0, next_chunk = 0;
    int in_group = 0; /* the previous entry was packed: this one is packed too or owns the group */
    unsigned owner_never = CTR_ENTRY_LOSSY | ((file_flags & CTR_FILE_GBASE) ? 0u : CTR_ENTRY_BASED);
    for (size_t k = 0; k < e_n; k++) {
        /* Entries tile the original in order, and own consecutive chunk ranges: a
         * non-empty entry owns chunks, but for a packed one, whose bytes lead its group
         * owner's one chunk. */
        const ctr_entry *x = &e[k];
        int packed = (x->flags & CTR_ENTRY_PACKED) != 0;
        int owns_ok = packed     ? x->length > 0 && x->nchunks == 0
                      : in_group ? x->length > 0 && x->nchunks >= 1 && !(x->flags & owner_never)
                                 : (x->length == 0) == (x->nchunks == 0);
        if (x->offset != at || x->length > original_size - at || x->first_chunk != next_chunk ||
            x->nchunks > c_n - next_chunk || !owns_ok) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: entry %zu ('%s') is inconsistent", k, x->name);
            goto fail;
        }
        in_group = packed;
        at += x->length;
        next_chunk += x->nchunks;
    }
    if (in_group) {
        err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: the last entry is packed (its group has no owner)");
        goto fail;
    }
    if (at != original_size || next_chunk != c_n || len - pos != c_n * CTR_CHUNK_REC) {
        err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: entries do not cover the original exactly");
        goto fail;
    }
    uint64_t frame_at = CTR_HEADER_SIZE;
    for (size_t k = 0; k < c_n; k++, pos += CTR_CHUNK_REC) {
        c[k].frame_offset = ld64(p + pos);
        c[k].raw_len = ld32(p + pos + 8);
        c[k].frame_len = ld32(p + pos + 12);
        if (c[k].frame_offset < frame_at || c[k].frame_len < CTR_FRAME_SIZE || c[k].raw_len == 0 ||
            c[k].frame_offset > index_offset || c[k].frame_len > index_offset - c[k].frame_offset) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: seek table record %zu is out of range", k);
            goto fail;
        }
        frame_at = c[k].frame_offset + c[k].frame_len;
    }
    /* Chunk lengths must add up to each entry's length, the packed entries before it
     * included: a group leads its owner's first chunk, which holds some of the owner too. */
    uint64_t group = 0;
    for (size_t k = 0; k < e_n; k++) {
        if (e[k].flags & CTR_ENTRY_PACKED) {
            group += e[k].length;
            continue;
        }
        uint64_t sum = 0;
        for (uint64_t j = 0; j < e[k].nchunks; j++) sum += c[e[k].first_chunk + j].raw_len;
        uint64_t want = e[k].length + group;
        int lead_ok = !group || c[e[k].first_chunk].raw_len > group; /* the index read made nchunks >= 1 */
        group = 0;
        if (sum != want || !lead_ok) {
            err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: chunks of entry %zu ('%s') do not add up", k, e[k].name);
            goto fail;
        }
    }
    *entries = e;
    *ne = e_n;
    *chunks = c;
    *nc = c_n;
    return CKPZ_OK;
fail:
    if (!kept) ctr_entries_free(e, e_n);
    free(c);
    return err;
}

/* ---- trailer ---- */
void ctr_trailer_write(uint8_t *out, const ctr_trailer *t)
{
    st64(out, t->index_offset);
    st64(out + 8, t->index_len);
    st64(out + 16, t->original_size);
    st32(out + 24, t->content_crc);
    st32(out + 28, t->index_crc);
    st32(out + 32, CTR_TAG_TRAILER);
    st32(out + 36, crc32c(0, out, 36));
}

ckpz_error ctr_trailer_read(ckpz_ctx *ctx, const uint8_t *in, uint64_t file_size, ctr_trailer *t)
{
    if (ld32(in + 32) != CTR_TAG_TRAILER) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "trailer missing (file truncated?)");
    if (crc32c(0, in, 36) != ld32(in + 36)) return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "trailer checksum mismatch");
    t->index_offset = ld64(in);
    t->index_len = ld64(in + 8);
    t->original_size = ld64(in + 16);
    t->content_crc = ld32(in + 24);
    t->index_crc = ld32(in + 28);
    if (t->index_offset < CTR_HEADER_SIZE || t->index_len < 24 || file_size < CTR_TRAILER_SIZE ||
        t->index_offset > file_size - CTR_TRAILER_SIZE ||
        t->index_len != file_size - CTR_TRAILER_SIZE - t->index_offset)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "trailer: index position does not match the file size");
    return CKPZ_OK;
}
