/* decode.c — see decode.h: reads a .ckpz stream front to back (so it works from a pipe),
 * hands each chunk frame to a job that verifies its checksum and decodes it (codec.c),
 * and writes the original bytes in order. At the end the index and trailer are read and
 * cross-checked against what the stream held, and the whole content's checksum is
 * compared. Nothing is decoded before its checksum is verified; every length is checked
 * against the limits before memory is reserved. */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/grow.h"
#include "container/base.h"
#include "transforms/planes.h"
#include "transforms/predict.h"

void decode_job(void *v, int worker, void *arg)
{
    djob *j = v;
    chunk_scratch *s = arg;
    j->why[0] = 0;
    if (j->h.pred == PRED_COPY) {
        j->out = j->base;
        j->err = chunk_copy_check(&j->h, j->base, j->why, sizeof j->why);
    } else if (!j->lent && chunk_is_stored(&j->h, j->payload)) {
        /* written from where it arrived: no room lent to decode it into */
        j->out = j->payload + CTR_PLANE_DESC;
        j->err = chunk_check_stored(&j->h, j->payload, j->why, sizeof j->why);
    } else {
        uint8_t *to = j->lent ? j->lent : j->raw;
        j->out = to;
        j->err = chunk_decode(s->ec[worker], &j->h, j->dtype, j->payload, j->base, s->planes[worker], to, j->why,
                              sizeof j->why);
    }
}

void reader_init(reader *d, ckpz_ctx *ctx, const ckpz_params *p, ckpz_read_fn rd, void *rd_opaque, ckpz_write_fn wr,
                 void *wr_opaque)
{
    *d = (reader){.ctx = ctx, .p = p, .rd = rd, .rd_opaque = rd_opaque, .wr = wr, .wr_opaque = wr_opaque};
}

void reader_free(reader *d)
{
    for (size_t i = 0; i < d->ne; i++) ctr_entry_clear(&d->e[i]);
    free(d->e);
    free(d->c);
}

static const char *entry_name(const reader *d, uint32_t i)
{
    if (i >= d->ne) return "?";
    return d->e[i].dtype != CKPZ_DTYPE_NONE ? d->e[i].name : "(opaque bytes)";
}

/* "tensor 'w'", or for a chunk that holds a group, "tensors 'a' to 'w' (packed)". */
static void chunk_owner(const reader *d, size_t first, uint32_t owner, char *buf, size_t size)
{
    if (first < owner)
        snprintf(buf, size, "tensors '%.60s' to '%.60s' (packed)", entry_name(d, (uint32_t)first),
                 entry_name(d, owner));
    else snprintf(buf, size, "tensor '%.100s'", entry_name(d, owner));
}

/* Reads exactly n bytes; a short read is a truncated stream. */
ckpz_error reader_exact(reader *d, void *buf, size_t n, const char *what)
{
    size_t got = 0;
    while (got < n) {
        ptrdiff_t r = d->rd(d->rd_opaque, (uint8_t *)buf + got, n - got);
        if (r < 0) return ctx_fail(d->ctx, CKPZ_ERR_READ, "read error in %s", what);
        if (r == 0)
            return ctx_fail(d->ctx, CKPZ_ERR_TRUNCATED, "file is truncated: it ends inside %s (at byte %llu)", what,
                            (unsigned long long)(d->in_pos + got));
        got += (size_t)r;
    }
    d->in_pos += n;
    return CKPZ_OK;
}

ckpz_error reader_emit(reader *d, djob *j)
{
    if (j->err) {
        char who[160];
        chunk_owner(d, j->group, j->entry, who, sizeof who);
        return ctx_fail(d->ctx, j->err, "chunk %llu (%s, bytes %llu..%llu of the original): %s",
                        (unsigned long long)j->chunk_no, who, (unsigned long long)d->original,
                        (unsigned long long)(d->original + j->h.raw_len), j->why);
    }
    if (d->wr && d->wr(d->wr_opaque, j->out, j->h.raw_len) != 0)
        return ctx_fail(d->ctx, CKPZ_ERR_WRITE, "write error at byte %llu of the output",
                        (unsigned long long)d->original);
    d->content_crc = crc32c_combine(d->content_crc, j->h.raw_crc, j->h.raw_len);
    d->original += j->h.raw_len;
    if (d->p->progress && d->p->progress(d->p->progress_opaque, d->original, CKPZ_SIZE_UNKNOWN))
        return ctx_fail(d->ctx, CKPZ_ERR_ABORTED, "aborted");
    return CKPZ_OK;
}

#define INDEX_PIECE (32u << 10)

/* Reads the index and trailer that follow the last frame and checks that they describe
 * exactly the stream that was decoded. */
ckpz_error reader_end(reader *d)
{
    ckpz_ctx *ctx = d->ctx;
    uint64_t index_offset = d->in_pos - 4;
    size_t cap = 1 << 16, len = 4;
    uint8_t *buf = malloc(cap);
    if (!buf) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    st32(buf, CTR_TAG_INDEX);
    for (;;) { /* the index runs to the end of the stream; its size is bounded */
        if (len == cap) {
            if (cap >= d->p->mem_limit) {
                free(buf);
                return ctx_fail(ctx, CKPZ_ERR_LIMIT, "index larger than the memory limit");
            }
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
            }
            buf = nb;
            cap *= 2;
        }
        /* under 64 KiB a read (ckpz.h: ckpz_decompress_io): the only read that may run
         * past the stream's end, which a reader of streams end to end looks for */
        size_t want = cap - len < INDEX_PIECE ? cap - len : INDEX_PIECE;
        ptrdiff_t r = d->rd(d->rd_opaque, buf + len, want);
        if (r < 0) {
            free(buf);
            return ctx_fail(ctx, CKPZ_ERR_READ, "read error in the index");
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    d->in_pos += len - 4;
    ckpz_error err;
    ctr_trailer t;
    ctr_entry *e = NULL;
    ctr_chunkrec *c = NULL;
    size_t ne = 0, nc = 0;
    if (len < 24 + CTR_TRAILER_SIZE) {
        err = ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated: index or trailer missing");
        goto out;
    }
    if ((err = ctr_trailer_read(ctx, buf + len - CTR_TRAILER_SIZE, index_offset + len, &t))) goto out;
    if (t.index_offset != index_offset || crc32c(0, buf, (size_t)t.index_len) != t.index_crc) {
        err = ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "index checksum mismatch");
        goto out;
    }
    if ((err = ctr_index_read(ctx, d->lists, buf, (size_t)t.index_len, t.index_offset, t.original_size, d->p->mem_limit,
                              d->flags, &e, &ne, &c, &nc)))
        goto out;
    int same = t.original_size == d->original && ne == d->ne && nc == d->nc;
    for (size_t i = 0; same && i < nc; i++)
        same = c[i].frame_offset == d->c[i].frame_offset && c[i].raw_len == d->c[i].raw_len &&
               c[i].frame_len == d->c[i].frame_len;
    for (size_t i = 0; same && i < ne; i++) same = ctr_entry_same(&e[i], &d->e[i]);
    if (!same) {
        err = ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index does not match the chunks in the file");
        goto out;
    }
    if (t.content_crc != d->content_crc) {
        err = ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "content checksum mismatch (expected %08x, got %08x)", t.content_crc,
                       d->content_crc);
        goto out;
    }
out:
    for (size_t i = 0; i < ne; i++) ctr_entry_clear(&e[i]);
    free(e);
    free(c);
    free(buf);
    return err;
}

/* The file header, and a delta file's base frame: the caller's base is checked before
 * anything else (a wrong base is refused at once). */
ckpz_error reader_start(reader *d, const ckpz_params *p)
{
    ckpz_ctx *ctx = d->ctx;
    ckpz_error err;
    uint8_t hb[CTR_HEADER_SIZE];
    ptrdiff_t got = 0;
    while (got < CTR_HEADER_SIZE) { /* an empty or tiny input is "not ckpz", not "truncated" */
        ptrdiff_t r = d->rd(d->rd_opaque, hb + got, CTR_HEADER_SIZE - (size_t)got);
        if (r < 0) return ctx_fail(ctx, CKPZ_ERR_READ, "read error");
        if (r == 0) break;
        got += r;
    }
    if (got < 8 || memcmp(hb, ctr_magic, 8) != 0) return ctx_fail(ctx, CKPZ_ERR_NOT_CKPZ, "not a ckpz file");
    if (got < CTR_HEADER_SIZE) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated inside its header");
    d->in_pos = CTR_HEADER_SIZE;
    if ((err = ctr_header_read(ctx, hb, &d->h))) return err;
    d->flags = ctr_file_flags(&d->h);
    if (!d->h.based) return CKPZ_OK;
    uint8_t bb[12 + CTR_BASE_FIXED + CTR_MAX_BASE_NAME];
    size_t used;
    if ((err = reader_exact(d, bb, 8, "the base frame"))) return err;
    uint32_t blen = ld32(bb + 4);
    if (ld32(bb) == CTR_TAG_BASE && blen >= CTR_BASE_FIXED && blen <= CTR_BASE_FIXED + CTR_MAX_BASE_NAME &&
        (err = reader_exact(d, bb + 8, blen + 4, "the base frame")))
        return err;
    if ((err = ctr_base_frame_read(ctx, bb, sizeof bb, &d->b, &used))) return err;
    if (p->base && (err = base_verify(ctx, &d->b, p))) return err;
    d->base_missing = !p->base;
    return CKPZ_OK;
}

/* An entry frame (its tag already read into fb): the entries it names, the last of
 * which owns the chunks that follow (a CKEN frame names one). */
ckpz_error reader_entry(reader *d, const uint8_t *fb)
{
    ckpz_ctx *ctx = d->ctx;
    ckpz_error err;
    uint8_t hb[8];
    uint32_t blen;
    uint64_t at = d->in_pos - 4;
    memcpy(hb, fb, 4);
    if ((err = reader_exact(d, hb + 4, 4, "an entry frame"))) return err;
    if ((err = ctr_eframe_len(ctx, hb, UINT64_MAX, d->flags, d->p->mem_limit, d->ne, at, &blen))) return err;
    /* The whole frame (tag, length, body, CRC), read into a buffer that grows with what
     * arrives: a damaged length (a list frame's may claim up to the memory limit) costs
     * at most twice the bytes the stream really holds before its end is found. */
    size_t want = 12 + (size_t)blen, have = 8, cap = want < 65536 ? want : 65536;
    uint8_t *fr = malloc(cap);
    if (!fr) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    memcpy(fr, hb, 8);
    ctr_entry *got = NULL;
    size_t n = 0;
    while (!err && have < want) {
        if (have == cap) {
            size_t grown = cap * 2 < want ? cap * 2 : want;
            uint8_t *more = realloc(fr, grown);
            if (!more) {
                err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
                break;
            }
            fr = more, cap = grown;
        }
        size_t k = cap - have;
        err = reader_exact(d, fr + have, k, "an entry frame");
        have += k;
    }
    if (!err) err = ctr_eframe_read(ctx, d->lists, fr, blen, d->flags, d->p->mem_limit, d->ne, at, &got, &n);
    free(fr);
    if (!err && grow_array((void **)&d->e, &d->cap_e, d->ne + n, sizeof *d->e))
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    if (err) {
        ctr_entries_free(got, n);
        return err;
    }
    for (size_t i = 0; i < n; i++) {
        if (!d->ne || !(d->e[d->ne - 1].flags & CTR_ENTRY_PACKED)) d->group = d->ne; /* a new group */
        d->e[d->ne++] = got[i];
        /* Only entries coded against the base need it: a delta file none of whose
         * entries matched its base restores without it. */
        if (d->base_missing && (got[i].flags & CTR_ENTRY_BASED)) {
            for (size_t k = i + 1; k < n; k++) ctr_entry_clear(&got[k]);
            free(got);
            return base_verify(ctx, &d->b, d->p); /* names the base the file needs */
        }
    }
    free(got);
    d->cur = &d->e[d->ne - 1];
    d->cur_pos = 0;
    return CKPZ_OK;
}

/* A chunk frame (its tag already read into fb): header checked against its entry,
 * payload read into the job, the chunk recorded for the seek table's check. */
ckpz_error reader_chunk(reader *d, uint8_t *fb, djob *j)
{
    ckpz_ctx *ctx = d->ctx;
    const ckpz_params *p = d->p;
    const ctr_entry *cur = d->cur;
    ckpz_error err;
    uint64_t frame_at = d->in_pos - 4;
    if ((err = reader_exact(d, fb + 4, CTR_FRAME_SIZE - 4, "a chunk frame header"))) return err;
    ctr_chunk *c = &j->h;
    char what[200], who[160];
    chunk_owner(d, d->group, (uint32_t)(d->ne ? d->ne - 1 : 0), who, sizeof who);
    snprintf(what, sizeof what, "chunk %llu (%s)", (unsigned long long)d->chunk_no, who);
    if ((err = ctr_chunk_read(ctx, fb, d->h.chunk_size, d->max_payload, what, c))) return err;
    if (d->ne == 0 || c->entry != d->ne - 1)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: belongs to entry %u, expected %zu", what, c->entry,
                        d->ne ? d->ne - 1 : 0);
    if (cur->flags & CTR_ENTRY_PACKED) /* its bytes are in its owner's chunk */
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: a chunk of a packed entry", what);
    if (c->xf == XF_QUANT && !(cur->flags & CTR_ENTRY_LOSSY))
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: lossy chunk in a lossless entry", what);
    /* the base's bytes for the chunk, when the base has them all (a chunk with a
     * predictor needs them: chunk_decode refuses one without); for the first chunk of a
     * group's owner in a file with feature 4, the group's base image */
    uint64_t group = 0; /* the packed entries' bytes at the chunk's start */
    size_t packed = d->ne - 1 - d->group;
    if (packed && d->cur_pos == 0 && (d->flags & CTR_FILE_GBASE) && c->pred != PRED_NONE) {
        if (c->raw_len > d->h.chunk_size)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: a group's chunk longer than the chunk size", what);
        if (!j->image && !(j->image = malloc(d->h.chunk_size))) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        if (base_group_image(d->e + d->group, packed + 1, p->base, p->base_size, c->raw_len, j->image, &group))
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: its group's base ranges run past the base's end", what);
        j->base = j->image;
    } else {
        if (packed && d->cur_pos == 0 && cur->offset >= d->e[d->group].offset)
            group = cur->offset - d->e[d->group].offset; /* stream records have offsets, no lengths */
        j->base = (cur->flags & CTR_ENTRY_BASED) && !group && cur->base_offset <= p->base_size &&
                          d->cur_pos <= p->base_size - cur->base_offset &&
                          c->raw_len <= p->base_size - cur->base_offset - d->cur_pos
                      ? p->base + cur->base_offset + d->cur_pos
                      : NULL;
    }
    d->cur_pos += c->raw_len - (group < c->raw_len ? group : c->raw_len);
    j->dtype = (ckpz_dtype)cur->dtype;
    if ((err = reader_exact(d, j->payload, c->payload_len, what))) return err;
    if (grow_array((void **)&d->c, &d->cap_c, d->nc + 1, sizeof *d->c))
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    d->c[d->nc++] = (ctr_chunkrec){frame_at, c->raw_len, CTR_FRAME_SIZE + c->payload_len};
    j->chunk_no = d->chunk_no++;
    j->entry = c->entry;
    j->group = d->group;
    return CKPZ_OK;
}
