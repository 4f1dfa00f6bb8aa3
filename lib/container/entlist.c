/* entlist.c — coded entry lists (format feature 3; doc/format.md "Coded entry lists").
 *
 * A checkpoint of thousands of small tensors spent a third of its .ckpz on describing
 * them: every entry had a frame and an index record, each with its name and shape as
 * they are. Here a run of entries is written as four columns (kinds; numbers as
 * LEB128 varints, offsets and first chunks implied by the lengths and counts before
 * them; names front-coded against the previous name; lossy fields), each coded by the
 * entropy stage's selector, so what repeats from one entry to the next costs little.
 * One coding serves the index (index form) and the entry frames (stream form: one CKEL
 * frame names a group and its owner). The reader checks each count and length against
 * the bytes it has and the memory limit before it allocates, and every field as
 * ctr_entry_read does; the tiling of the original is the index reader's (format.c). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "container/container.h"
#include "entropy/entropy.h"

enum { COL_KIND, COL_NUM, COL_NAME, COL_LOSSY, NCOL };
/* The entropy level of the columns: zstd -6, as a chunk with repeats is coded at the
 * fast levels (ENT_LZ_LIST at level 3: ENT_LZ_REPEATS's zstd level, smaller tables).
 * Level 9 (zstd -19) saved 56 bytes of 1.26 MB on 4,800 small tensors and doubled their
 * compression time; level 6 (zstd -9) took 351 us to code the 100 columns of 5,174 small
 * tensors' lists, zstd -6 199 us for 11 bytes more, zstd -3 84 us for 426 more (the
 * names' column wants lazy matching). */
#define LIST_LEVEL 3

typedef struct bbuf {
    uint8_t *p;
    size_t n, cap;
    int bad;      /* out of memory */
    ent_ctx *ec;  /* a column: its bytes are ec's kept buffer `slot` (ent_keep), else its own */
    unsigned slot;
} bbuf;

/* Room for n more bytes: 0, or -1 (b->bad) out of memory. */
static int reserve_more(bbuf *b, size_t n)
{
    if (b->bad) return -1;
    if (n <= b->cap - b->n) return 0;
    size_t c = b->cap ? b->cap : 256;
    while (c - b->n < n) c *= 2;
    uint8_t *q = b->ec ? ent_keep(b->ec, b->slot, c) : realloc(b->p, c);
    if (!q) {
        b->bad = 1;
        return -1;
    }
    b->p = q;
    b->cap = c;
    return 0;
}

/* reserve_more's test inline: the columns of 5,174 entries make ~80,000 calls. */
static inline int reserve(bbuf *b, size_t n) { return !b->bad && n <= b->cap - b->n ? 0 : reserve_more(b, n); }

static inline void put_bytes(bbuf *b, const void *src, size_t n)
{
    if (!n || reserve(b, n)) return;
    if (n <= 64) copy_short(b->p + b->n, src, n); /* kinds and names' suffixes */
    else memcpy(b->p + b->n, src, n);
    b->n += n;
}

/* A varint at p, in room reserved for it (at most 10 bytes); returns its end. */
static inline uint8_t *uv_at(uint8_t *p, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) *p++ = (uint8_t)(v | 0x80);
    *p++ = (uint8_t)v;
    return p;
}

/* A varint written in place. */
static inline void put_uv(bbuf *b, uint64_t v)
{
    if (reserve(b, 10)) return;
    b->n = (size_t)(uv_at(b->p + b->n, v) - b->p);
}

/* A varint from p[*pos..len): 0, or -1 when it runs past the end or over 64 bits. */
static int get_uv(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned sh = 0; *pos < len; sh += 7) {
        uint8_t c = p[(*pos)++];
        if (sh == 63 && c > 1) return -1;
        r |= (uint64_t)(c & 0x7f) << sh;
        if (!(c & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Eight bytes a step (names of many tensors share tens of bytes; a difference found from
 * the lowest set bit of the XOR of little-endian loads), then the last bytes one by one. */
static size_t shared_prefix(const ctr_entry *a, const ctr_entry *b)
{
    size_t k = 0, n = a->name_len < b->name_len ? a->name_len : b->name_len;
    const uint8_t *x = (const uint8_t *)a->name, *y = (const uint8_t *)b->name;
    for (; k + 8 <= n; k += 8) {
        uint64_t d = ld64(x + k) ^ ld64(y + k);
        if (d) return k + (size_t)__builtin_ctzll(d) / 8;
    }
    while (k < n && x[k] == y[k]) k++;
    return k;
}

static void fill_columns(const ctr_entry *e, size_t n, int index_form, bbuf *col)
{
    for (size_t i = 0; i < n; i++) {
        const ctr_entry *x = &e[i];
        uint8_t kind[2] = {x->dtype, x->flags}, lossy[CTR_LOSSY_STREAM + CTR_LOSSY_INDEX];
        bbuf *num = &col[COL_NUM];
        put_bytes(&col[COL_KIND], kind, 2);
        /* the entry's numbers (at most 6 + ndim varints) in room reserved once */
        if (reserve(num, 10 * (6 + (size_t)x->ndim))) return;
        uint8_t *p = num->p + num->n;
        if (index_form) {
            p = uv_at(p, x->length);
            p = uv_at(p, x->nchunks);
        } else if (i) {
            p = uv_at(p, x->offset - e[i - 1].offset);
        }
        p = uv_at(p, x->ndim);
        for (uint32_t d = 0; d < x->ndim; d++) p = uv_at(p, x->shape[d]);
        if (x->flags & CTR_ENTRY_BASED) p = uv_at(p, x->base_offset);
        size_t pre = i ? shared_prefix(x, &e[i - 1]) : 0;
        p = uv_at(p, pre);
        p = uv_at(p, x->name_len - pre);
        num->n = (size_t)(p - num->p);
        put_bytes(&col[COL_NAME], x->name + pre, x->name_len - pre);
        if (x->flags & CTR_ENTRY_LOSSY)
            put_bytes(&col[COL_LOSSY], lossy, ctr_lossy_write(lossy, &x->lossy, index_form));
    }
}

/* Column: raw length; when not 0, the codec id, the coded length and the coded bytes. */
static void put_column(ent_ctx *ec, bbuf *out, const bbuf *c)
{
    put_uv(out, c->n);
    if (!c->n || out->bad) return;
    size_t cap = ent_bound(c->n);
    uint8_t *tmp = ent_keep(ec, NCOL, cap), codec;
    if (!tmp) {
        out->bad = 1;
        return;
    }
    ent_ctx_set_lz(ec, ENT_LZ_LIST);
    size_t m = ent_encode(ec, c->p, c->n, tmp, cap, LIST_LEVEL, ENT_HINT_LIST, &codec);
    ent_ctx_set_lz(ec, ENT_LZ_OFF);
    put_bytes(out, &codec, 1);
    put_uv(out, m);
    put_bytes(out, tmp, m);
}

/* Appends the list's coding to out (stream form: count and first offset first). */
static void put_list(ent_ctx *ec, bbuf *out, const ctr_entry *e, size_t n, int index_form)
{
    /* in buffers ec keeps (slots 0 .. NCOL): fresh ones faulted ~50 pages a compression */
    bbuf col[NCOL];
    for (unsigned k = 0; k < NCOL; k++) col[k] = (bbuf){NULL, 0, 0, 0, ec, k};
    if (index_form && !n) return; /* an index without entries has no list */
    if (!index_form) {
        put_uv(out, n);
        put_uv(out, n ? e[0].offset : 0);
    }
    /* sized once for the usual entry: two kind bytes, a few varints, a name's suffix */
    if (reserve(&col[COL_KIND], 2 * n) || reserve(&col[COL_NUM], 8 * n) || reserve(&col[COL_NAME], 16 * n))
        out->bad = 1;
    fill_columns(e, n, index_form, col);
    for (int k = 0; k < NCOL; k++) {
        if (col[k].bad) out->bad = 1;
        put_column(ec, out, &col[k]);
    }
}

ckpz_error ctr_list_write(ckpz_ctx *ctx, const ctr_entry *e, size_t n, int index_form, uint8_t **out, size_t *len)
{
    bbuf b = {0};
    ent_ctx *ec = ent_ctx_create();
    if (ec) put_list(ec, &b, e, n, index_form);
    ent_ctx_free(ec);
    if (!ec || b.bad) {
        free(b.p);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory coding the entry list");
    }
    *out = b.p;
    *len = b.n;
    return CKPZ_OK;
}

ckpz_error ctr_index_encode(ckpz_ctx *ctx, ent_ctx *ec, const ctr_entry *e, size_t ne, const ctr_chunkrec *c, size_t nc,
                            uint8_t **out, size_t *len)
{
    bbuf b = {0};
    uint8_t head[24], rec[CTR_CHUNK_REC];
    st32(head, CTR_TAG_INDEX);
    st32(head + 4, 0);
    st64(head + 8, ne);
    st64(head + 16, nc);
    put_bytes(&b, head, sizeof head);
    ent_ctx *own = ne && !ec ? ent_ctx_create() : NULL; /* no entries: nothing coded (an empty original) */
    if (ne && !ec && !own) b.bad = 1;
    else if (ne) put_list(ec ? ec : own, &b, e, ne, 1);
    ent_ctx_free(own);
    for (size_t i = 0; i < nc; i++) {
        st64(rec, c[i].frame_offset);
        st32(rec + 8, c[i].raw_len);
        st32(rec + 12, c[i].frame_len);
        put_bytes(&b, rec, sizeof rec);
    }
    if (b.bad) {
        free(b.p);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory writing the index");
    }
    *out = b.p;
    *len = b.n;
    return CKPZ_OK;
}

ckpz_error ctr_list_frame_write(ckpz_ctx *ctx, ent_ctx *ec, const ctr_entry *e, size_t n, uint8_t **out, size_t *len)
{
    bbuf b = {0};
    uint8_t head[8] = {0}, crc[4];
    put_bytes(&b, head, sizeof head);
    ent_ctx *own = ec ? NULL : ent_ctx_create();
    if (!ec && !own) b.bad = 1;
    else put_list(ec ? ec : own, &b, e, n, 0);
    ent_ctx_free(own);
    if (!b.bad && b.n - 8 > UINT32_MAX) b.bad = 1;
    if (!b.bad) {
        st32(b.p, CTR_TAG_LIST);
        st32(b.p + 4, (uint32_t)(b.n - 8));
        st32(crc, crc32c(0, b.p, b.n));
        put_bytes(&b, crc, 4);
    }
    if (b.bad) {
        free(b.p);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory writing an entry frame");
    }
    *out = b.p;
    *len = b.n;
    return CKPZ_OK;
}

/* ---- reading ---- */
typedef struct col {
    uint8_t *p;
    size_t n, pos;
} col;

static ckpz_error bad(ckpz_ctx *ctx, const char *why) { return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry list: %s", why); }

/* Decodes the four columns at p[*pos..len), their raw sizes together at most mem_limit,
 * with ec (NULL: a context of its own, made when a column needs one). */
static ckpz_error get_columns(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *p, size_t len, size_t *pos, size_t mem_limit,
                              col *cols)
{
    ent_ctx *own = NULL;
    ckpz_error err = CKPZ_OK;
    size_t total = 0;
    for (int k = 0; k < NCOL && !err; k++) {
        uint64_t rl, cl;
        if (get_uv(p, len, pos, &rl)) {
            err = bad(ctx, "truncated column");
            break;
        }
        if (!rl) continue;
        if (rl > mem_limit - total) {
            err = ctx_fail(ctx, CKPZ_ERR_LIMIT, "entry list: a column of %llu bytes is over the memory limit",
                           (unsigned long long)rl);
            break;
        }
        total += (size_t)rl;
        if (*pos >= len) {
            err = bad(ctx, "truncated column");
            break;
        }
        uint8_t codec = p[(*pos)++];
        if (get_uv(p, len, pos, &cl) || cl > len - *pos) {
            err = bad(ctx, "truncated column");
            break;
        }
        if (!ent_codec_known(codec)) {
            err = ctx_fail(ctx, CKPZ_ERR_VERSION, "entry list: needs codec id %u (written by a newer ckpz?)", codec);
            break;
        }
        if (!(cols[k].p = malloc((size_t)rl)) || (!ec && !(ec = own = ent_ctx_create()))) {
            err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading an entry list");
            break;
        }
        cols[k].n = (size_t)rl;
        if (ent_decode(ec, codec, p + *pos, (size_t)cl, cols[k].p, (size_t)rl) != 0)
            err = bad(ctx, "a column does not decode");
        *pos += (size_t)cl;
    }
    ent_ctx_free(own);
    return err;
}

/* A number of the numbers column: one byte (below 128) for most fields of most entries
 * (ranks, small dimensions, name lengths) read without get_uv's loop. */
static inline int num(col *c, uint64_t *v)
{
    if (c->pos < c->n && c->p[c->pos] < 0x80) {
        *v = c->p[c->pos++];
        return 0;
    }
    return get_uv(c->p, c->n, &c->pos, v);
}

/* Entry i's fields from the columns, but for its name's bytes and lossy fields (prev:
 * entry i - 1, or NULL); at: its offset (stream form) or the running offset and first
 * chunk (index form), advanced past it. Its dimensions go to dims, its name's lengths
 * (checked) to *pre (shared with prev's) and *suf (its own, next in the names column). */
static ckpz_error get_fields(ckpz_ctx *ctx, col *cols, int index_form, unsigned file_flags, const ctr_entry *prev,
                             uint64_t *at, uint64_t *chunk, ctr_entry *x, uint64_t *dims, uint64_t *pre, uint64_t *suf)
{
    uint64_t v;
    col *nc = &cols[COL_NUM], *names = &cols[COL_NAME];
    x->dtype = cols[COL_KIND].p[cols[COL_KIND].pos++];
    x->flags = cols[COL_KIND].p[cols[COL_KIND].pos++];
    ckpz_error err = ctr_entry_check_kind(ctx, x, file_flags);
    if (err) return err;
    if (index_form) {
        if (num(nc, &x->length) || num(nc, &x->nchunks)) return bad(ctx, "numbers truncated");
        if (x->length > UINT64_MAX - *at || x->nchunks > UINT64_MAX - *chunk) return bad(ctx, "lengths overflow");
        x->offset = *at;
        x->first_chunk = *chunk;
        *at += x->length;
        *chunk += x->nchunks;
    } else {
        if (prev) {
            if (num(nc, &v)) return bad(ctx, "numbers truncated");
            if (v > UINT64_MAX - prev->offset) return bad(ctx, "offsets overflow");
            *at = prev->offset + v;
        }
        x->offset = *at;
    }
    if (num(nc, &v)) return bad(ctx, "numbers truncated");
    if (v > CTR_MAX_NDIM)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "entry record: %llu dimensions", (unsigned long long)v);
    x->ndim = (uint32_t)v;
    for (uint32_t d = 0; d < x->ndim; d++)
        if (num(nc, &dims[d])) return bad(ctx, "numbers truncated");
    if ((x->flags & CTR_ENTRY_BASED) && num(nc, &x->base_offset)) return bad(ctx, "numbers truncated");
    /* the name: pre bytes of the previous one, then suf of its own */
    if (num(nc, pre) || num(nc, suf)) return bad(ctx, "numbers truncated");
    if (*pre > (prev ? prev->name_len : 0u) || *suf > CTR_MAX_NAME - *pre || *suf > names->n - names->pos)
        return bad(ctx, "a name's lengths are out of range");
    x->name_len = (uint16_t)(*pre + *suf);
    return CKPZ_OK;
}

/* Entry x's lossy fields, when its flags say it has them. */
static ckpz_error get_lossy(ckpz_ctx *ctx, col *lc, int index_form, ctr_entry *x)
{
    if (!(x->flags & CTR_ENTRY_LOSSY)) return CKPZ_OK;
    size_t ln = CTR_LOSSY_STREAM + (index_form ? CTR_LOSSY_INDEX : 0);
    if (lc->n - lc->pos < ln) return bad(ctx, "lossy fields truncated");
    memset(&x->lossy, 0, sizeof x->lossy);
    ckpz_error err = ctr_lossy_read(ctx, lc->p + lc->pos, index_form, &x->lossy);
    lc->pos += ln;
    return err;
}

/* Bytes of a kept block an entry's shape and name take (8-aligned for the next shape). */
static size_t kept_size(const ctr_entry *x) { return (8 * (size_t)x->ndim + x->name_len + 1 + 7) & ~(size_t)7; }

/* x's shape and name, their room given, from dims and the names column. */
static void put_name_shape(col *names, const ctr_entry *prev, ctr_entry *x, const uint64_t *dims, uint64_t pre,
                           uint64_t suf)
{
    /* each guarded: an empty column's bytes may be a null pointer (no offset may be added) */
    if (x->ndim) copy_short(x->shape, dims, 8 * (size_t)x->ndim);
    if (pre) copy_short(x->name, prev->name, (size_t)pre); /* pre is 0 without prev */
    if (suf) copy_short(x->name + pre, names->p + names->pos, (size_t)suf);
    names->pos += (size_t)suf;
    x->name[x->name_len] = 0;
}

/* Entry i from the columns, with its name and shape (get_fields) in one block of their
 * own (ctr_entry_alloc). */
static ckpz_error get_entry(ckpz_ctx *ctx, col *cols, int index_form, unsigned file_flags, const ctr_entry *prev,
                            uint64_t *at, uint64_t *chunk, ctr_entry *x)
{
    uint64_t pre, suf, dims[CTR_MAX_NDIM];
    col *names = &cols[COL_NAME];
    ckpz_error err = get_fields(ctx, cols, index_form, file_flags, prev, at, chunk, x, dims, &pre, &suf);
    if (err) return err;
    if (ctr_entry_alloc(x)) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    put_name_shape(names, prev, x, dims, pre, suf);
    return get_lossy(ctx, &cols[COL_LOSSY], index_form, x);
}

/* The count and first offset of a stream-form list, its columns decoded: the start both
 * readers of lists share (index form: the count is the index's, n_index). */
static ckpz_error list_begin(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *p, size_t len, int index_form, size_t mem_limit,
                             uint64_t *n, uint64_t *at, size_t *pos, col *cols)
{
    if (!index_form && (get_uv(p, len, pos, n) || get_uv(p, len, pos, at))) return bad(ctx, "truncated count");
    if (!index_form && *n == 0) return bad(ctx, "no entries");
    /* two kind bytes each: the count is bounded by the limit before anything is read */
    if (*n > mem_limit / 2 || *n > mem_limit / sizeof(ctr_entry))
        return ctx_fail(ctx, CKPZ_ERR_LIMIT, "entry list: %llu entries are over the memory limit",
                        (unsigned long long)*n);
    if (*n == 0) return CKPZ_OK; /* an index without entries has no list */
    ckpz_error err = get_columns(ctx, ec, p, len, pos, mem_limit, cols);
    if (!err && cols[COL_KIND].n != 2 * *n) err = bad(ctx, "the kinds column does not match the count");
    return err;
}

static ckpz_error list_end(ckpz_ctx *ctx, const col *cols)
{
    if (cols[COL_NUM].pos != cols[COL_NUM].n || cols[COL_NAME].pos != cols[COL_NAME].n ||
        cols[COL_LOSSY].pos != cols[COL_LOSSY].n)
        return bad(ctx, "columns hold more than the entries");
    return CKPZ_OK;
}

void ctr_keep_free(ctr_keep *k)
{
    if (!k) return;
    free(k->e);
    free(k->blk);
    memset(k, 0, sizeof *k);
}

/* Grows keep's block to hold need bytes, the first used of them (the names and shapes
 * of e[0..ne)) moved with it; 0, or -1 when it would pass CTR_KEEP_MAX - ents or memory
 * runs out. */
static int keep_grow(ctr_keep *keep, ctr_entry *e, size_t ne, size_t used, size_t need, size_t ents)
{
    if (need > CTR_KEEP_MAX - ents) return -1;
    size_t cap = keep->blk_cap ? keep->blk_cap : 4096;
    while (cap < need) cap *= 2;
    if (cap > CTR_KEEP_MAX - ents) cap = CTR_KEEP_MAX - ents;
    uint8_t *b = malloc(cap), *old = keep->blk;
    if (!b) return -1;
    if (used) memcpy(b, old, used);
    for (size_t j = 0; j < ne; j++) {
        e[j].shape = (uint64_t *)(void *)(b + ((uint8_t *)e[j].shape - old));
        e[j].name = (char *)(e[j].shape + e[j].ndim);
    }
    free(old);
    keep->blk = b;
    keep->blk_cap = cap;
    return 0;
}

/* The n entries of a list into keep, in one pass over its columns: the entries' array
 * sized first, the block of names and shapes grown as they come (a first pass to size it
 * took a sixth of reading the index of 4,800 entries). 1 when they do not fit (over
 * CTR_KEEP_MAX, out of memory: the caller reads them again, allocated; the columns are
 * rewound), else 0 with *err the reading's outcome (entries read belong to keep). */
static int read_kept(ckpz_ctx *ctx, ctr_keep *keep, col *cols, int index_form, unsigned file_flags, uint64_t n,
                     uint64_t at, ckpz_error *err)
{
    uint64_t chunk = 0, pre, suf, dims[CTR_MAX_NDIM];
    size_t ents = (size_t)n * sizeof(ctr_entry), used = 0;
    if (n > CTR_KEEP_MAX / sizeof(ctr_entry)) return 1;
    if (keep->e_cap < n) {
        ctr_entry *e = realloc(keep->e, ents);
        if (!e) return 1;
        keep->e = e;
        keep->e_cap = (size_t)n;
    }
    ctr_entry *e = keep->e;
    for (size_t i = 0; i < n; i++) {
        ctr_entry *x = &e[i];
        memset(x, 0, offsetof(ctr_entry, lossy)); /* the lossy fields only where the flags say (get_lossy) */
        *err = get_fields(ctx, cols, index_form, file_flags, i ? &e[i - 1] : NULL, &at, &chunk, x, dims, &pre, &suf);
        if (*err) return 0;
        size_t k = kept_size(x);
        if (k > keep->blk_cap - used && keep_grow(keep, e, i, used, used + k, ents)) {
            for (int c = 0; c < NCOL; c++) cols[c].pos = 0;
            return 1;
        }
        x->shape = (uint64_t *)(void *)(keep->blk + used);
        x->name = (char *)(x->shape + x->ndim);
        used += k;
        put_name_shape(&cols[COL_NAME], i ? &e[i - 1] : NULL, x, dims, pre, suf);
        if ((*err = get_lossy(ctx, &cols[COL_LOSSY], index_form, x))) return 0;
    }
    *err = list_end(ctx, cols);
    return 0;
}

/* ctr_list_read, into keep where the list fits it (*kept = 1), else allocated. */
static ckpz_error list_read(ckpz_ctx *ctx, ent_ctx *ec, ctr_keep *keep, const uint8_t *p, size_t len, int index_form,
                            unsigned file_flags, size_t mem_limit, uint64_t n_index, ctr_entry **out, size_t *n_out,
                            size_t *used, int *kept)
{
    *out = NULL;
    *n_out = 0;
    *kept = 0;
    size_t pos = 0, i = 0;
    uint64_t n = n_index, at = 0, chunk = 0;
    col cols[NCOL] = {{0}};
    ctr_entry *e = NULL;
    ckpz_error err = list_begin(ctx, ec, p, len, index_form, mem_limit, &n, &at, &pos, cols);
    if (err || n == 0) goto out;
    if (keep && !read_kept(ctx, keep, cols, index_form, file_flags, n, at, &err)) {
        *kept = 1;
        e = keep->e;
        goto out;
    }
    if (!(e = calloc((size_t)n, sizeof *e))) {
        err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading an entry list");
        goto out;
    }
    for (i = 0; i < n; i++) {
        if ((err = get_entry(ctx, cols, index_form, file_flags, i ? &e[i - 1] : NULL, &at, &chunk, &e[i]))) {
            i++;
            goto out;
        }
    }
    err = list_end(ctx, cols);
out:
    for (int k = 0; k < NCOL; k++) free(cols[k].p);
    if (err) {
        if (!*kept) ctr_entries_free(e, i);
        *kept = 0;
        return err;
    }
    *out = e;
    *n_out = (size_t)n;
    *used = pos;
    return CKPZ_OK;
}

ckpz_error ctr_list_read(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *p, size_t len, int index_form, unsigned file_flags,
                         size_t mem_limit, uint64_t n_index, ctr_entry **out, size_t *n_out, size_t *used)
{
    int kept;
    return list_read(ctx, ec, NULL, p, len, index_form, file_flags, mem_limit, n_index, out, n_out, used, &kept);
}

/* A stream-form list compared with idx[0..room) as it is read, nothing allocated but its
 * columns: *n its count, *same whether its entries equal idx's first *n (ctr_entry_same).
 * Errors as ctr_list_read's, whether or not the entries matched so far. */
static ckpz_error list_same(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *p, size_t len, unsigned file_flags,
                            size_t mem_limit, const ctr_entry *idx, size_t room, size_t *n_out, size_t *used, int *same)
{
    size_t pos = 0;
    uint64_t n = 0, at = 0, pre, suf, dims[CTR_MAX_NDIM];
    col cols[NCOL] = {{0}}, *names = &cols[COL_NAME];
    ctr_entry two[2]; /* this entry and the one before, in turn: no copy of 168 bytes an entry */
    ckpz_error err = list_begin(ctx, ec, p, len, 0, mem_limit, &n, &at, &pos, cols);
    *same = !err && n <= room;
    for (uint64_t i = 0; !err && i < n; i++) {
        ctr_entry *x = &two[i & 1];
        memset(x, 0, offsetof(ctr_entry, lossy)); /* the lossy fields: get_lossy's, where the flags say */
        if ((err = get_fields(ctx, cols, 0, file_flags, i ? &two[(i - 1) & 1] : NULL, &at, NULL, x, dims, &pre, &suf)))
            break;
        if (*same) { /* the entries before matched: the shared part of the name is idx[i - 1]'s */
            const ctr_entry *y = &idx[i];
            *same = x->offset == y->offset && x->dtype == y->dtype && x->ndim == y->ndim && x->flags == y->flags &&
                    x->base_offset == y->base_offset && x->name_len == y->name_len &&
                    (!pre || same_short(y->name, idx[i - 1].name, (size_t)pre)) &&
                    (!suf || same_short(y->name + pre, names->p + names->pos, (size_t)suf)) &&
                    (!x->ndim || same_short(y->shape, dims, 8 * (size_t)x->ndim));
        }
        names->pos += (size_t)suf;
        err = get_lossy(ctx, &cols[COL_LOSSY], 0, x); /* checked, not compared (ctr_entry_same) */
    }
    if (!err) err = list_end(ctx, cols);
    for (int k = 0; k < NCOL; k++) free(cols[k].p);
    *n_out = (size_t)n;
    *used = pos;
    return err;
}

/* ---- the index ---- */
ckpz_error ctr_index_read_kept(ckpz_ctx *ctx, ent_ctx *ec, ctr_keep *keep, const uint8_t *p, size_t len,
                               uint64_t index_offset, uint64_t original_size, size_t mem_limit, unsigned file_flags,
                               ctr_entry **entries, size_t *ne, int *kept, ctr_chunkrec **chunks, size_t *nc)
{
    *kept = 0;
    if (!(file_flags & CTR_FILE_CODED))
        return ctr_index_read_plain(ctx, p, len, index_offset, original_size, mem_limit, file_flags, entries, ne,
                                    chunks, nc);
    *entries = NULL;
    *chunks = NULL;
    *ne = *nc = 0;
    if (len < 24 || ld32(p) != CTR_TAG_INDEX) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: tag missing");
    if (ld32(p + 4) != 0) return ctx_fail(ctx, CKPZ_ERR_VERSION, "index: reserved field set");
    uint64_t e_n = ld64(p + 8), c_n = ld64(p + 16);
    /* the seek table's length first, then the list (its counts checked against its bytes
     * and the limit) fills what is left */
    if (c_n > (len - 24) / CTR_CHUNK_REC || c_n * sizeof(ctr_chunkrec) > mem_limit)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: %llu chunks do not fit in %zu bytes", (unsigned long long)c_n,
                        len);
    size_t list_len = len - 24 - (size_t)c_n * CTR_CHUNK_REC, got, used;
    ctr_entry *e;
    int in_keep;
    ckpz_error err = list_read(ctx, ec, keep, p + 24, list_len, 1, file_flags, mem_limit, e_n, &e, &got, &used,
                               &in_keep);
    if (err) {
        char why[sizeof ctx->msg];
        snprintf(why, sizeof why, "%s", ctx->msg);
        return ctx_fail(ctx, err, "index: %s", why);
    }
    if (used != list_len) {
        if (!in_keep) ctr_entries_free(e, got);
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "index: its entry list and seek table do not fill it");
    }
    err = ctr_index_check(ctx, p, len, 24 + used, index_offset, original_size, file_flags, e, got, in_keep, c_n,
                          entries, ne, chunks, nc);
    if (!err) *kept = in_keep;
    return err;
}

ckpz_error ctr_index_read(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *p, size_t len, uint64_t index_offset,
                          uint64_t original_size, size_t mem_limit, unsigned file_flags, ctr_entry **entries,
                          size_t *ne, ctr_chunkrec **chunks, size_t *nc)
{
    int kept;
    return ctr_index_read_kept(ctx, ec, NULL, p, len, index_offset, original_size, mem_limit, file_flags, entries, ne,
                               &kept, chunks, nc);
}

/* ---- entry frames of either kind ---- */
ckpz_error ctr_eframe_len(ckpz_ctx *ctx, const uint8_t *in, uint64_t room, unsigned file_flags, size_t mem_limit,
                          size_t no, uint64_t at, uint32_t *blen)
{
    if (!(file_flags & CTR_FILE_CODED)) return ctr_entry_frame_len(ctx, in, room, no, at, blen);
    return ctr_frame_len(ctx, in, room, CTR_TAG_LIST, 2, mem_limit, no, at, blen);
}

ckpz_error ctr_eframe_read(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *in, uint32_t blen, unsigned file_flags,
                           size_t mem_limit, size_t no, uint64_t at, ctr_entry **e, size_t *n)
{
    *e = NULL;
    *n = 0;
    if (!(file_flags & CTR_FILE_CODED)) {
        ctr_entry *one = calloc(1, sizeof *one);
        if (!one) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        ckpz_error err = ctr_entry_frame_read(ctx, in, blen, file_flags, no, at, one);
        if (err) {
            free(one);
            return err;
        }
        *e = one;
        *n = 1;
        return CKPZ_OK;
    }
    size_t used;
    if (crc32c(0, in, 8 + (size_t)blen) != ld32(in + 8 + blen))
        return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "entry frame %zu at byte %llu: checksum mismatch", no,
                        (unsigned long long)at);
    ckpz_error err = ctr_list_read(ctx, ec, in + 8, blen, 0, file_flags, mem_limit, 0, e, n, &used);
    if (!err && used != blen) {
        ctr_entries_free(*e, *n);
        *e = NULL;
        *n = 0;
        err = bad(ctx, "its frame holds more");
    }
    if (err) { /* the list's own message, with the frame it is in */
        char why[sizeof ctx->msg];
        snprintf(why, sizeof why, "%s", ctx->msg);
        return ctx_fail(ctx, err, "entry frame %zu at byte %llu: %s", no, (unsigned long long)at, why);
    }
    return CKPZ_OK;
}

ckpz_error ctr_eframe_same(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *in, uint32_t blen, unsigned file_flags,
                           size_t mem_limit, size_t no, uint64_t at, const ctr_entry *idx, size_t room, size_t *n,
                           int *same)
{
    *n = 0;
    *same = 0;
    if (!(file_flags & CTR_FILE_CODED)) {
        ctr_entry *f;
        ckpz_error err = ctr_eframe_read(ctx, ec, in, blen, file_flags, mem_limit, no, at, &f, n);
        if (err) return err;
        *same = *n <= room && ctr_entry_same(f, idx);
        ctr_entries_free(f, *n);
        return CKPZ_OK;
    }
    size_t used;
    if (crc32c(0, in, 8 + (size_t)blen) != ld32(in + 8 + blen))
        return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "entry frame %zu at byte %llu: checksum mismatch", no,
                        (unsigned long long)at);
    ckpz_error err = list_same(ctx, ec, in + 8, blen, file_flags, mem_limit, idx, room, n, &used, same);
    if (!err && used != blen) err = bad(ctx, "its frame holds more");
    if (err) { /* the list's own message, with the frame it is in */
        char why[sizeof ctx->msg];
        snprintf(why, sizeof why, "%s", ctx->msg);
        *n = 0;
        *same = 0;
        return ctx_fail(ctx, err, "entry frame %zu at byte %llu: %s", no, (unsigned long long)at, why);
    }
    return CKPZ_OK;
}
