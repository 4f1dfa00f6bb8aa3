/* test_entlist.c — coded entry lists (format feature 3: lib/container/entlist.c,
 * doc/format.md "Coded entry lists"): lists of every kind of entry come back field for
 * field in both forms, in an index and in a CKEL frame; hand-made hostile lists are
 * refused with the error each rule gives (counts over the limit before allocating,
 * front-coding out of range, columns too short or too long, unknown codecs, overflowing
 * offsets); a frame compared with the index as it is read matches exactly the equal
 * entries; and a file of many small tensors, which its description used to make larger
 * than itself, compresses below its size and reads back whole and one tensor at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "container/container.h"
#include "memfile.h"
#include "testutil.h"

#define ALL_FLAGS (CTR_FILE_BASED | CTR_FILE_LOSSY | CTR_FILE_PACKED | CTR_FILE_CODED)
#define LIMIT ((size_t)1 << 20)

/* n entries that tile an original from 0 with one chunk each but for packed and empty
 * ones: names sharing prefixes, shapes, packed groups, a lossy and a based entry. */
static ctr_entry *make_entries(size_t n, uint64_t *original, uint64_t *chunks)
{
    ctr_entry *e = calloc(n, sizeof *e);
    uint64_t at = 0, ch = 0;
    for (size_t i = 0; i < n; i++) {
        ctr_entry *x = &e[i];
        char name[64];
        snprintf(name, sizeof name, i % 7 == 6 ? "" : "blocks.%zu.%s", i / 3, i % 3 ? "conv.weight" : "bn.bias");
        x->name_len = (uint16_t)strlen(name);
        x->dtype = i % 7 == 6 ? CKPZ_DTYPE_NONE : CKPZ_DTYPE_F32;
        x->ndim = x->dtype ? (uint32_t)(i % 4) : 0;
        CHECK(ctr_entry_alloc(x) == 0); /* shape and name in one block, as a reader's */
        memcpy(x->name, name, (size_t)x->name_len + 1);
        for (uint32_t d = 0; d < x->ndim; d++) x->shape[d] = d ? 3 : (uint64_t)i * 1000003;
        x->flags = i % 5 == 1 && i + 1 < n ? CTR_ENTRY_PACKED : 0;
        int empty = i % 11 == 10 && !x->flags && !(i && (e[i - 1].flags & CTR_ENTRY_PACKED)); /* not an owner */
        x->length = empty ? 0 : 16 + i;
        if (i == 4) x->flags = CTR_ENTRY_BASED, x->base_offset = 77777777777ull;
        if (i == 8) {
            x->flags = CTR_ENTRY_LOSSY;
            x->lossy = (ctr_lossy){2, 8, 1, 0, 64, 1e-3, 2e-4, 0.5, 10, 1, 2, 3, 0.25, 0.125, 0.5, -1, 1};
        }
        x->offset = at;
        x->first_chunk = ch;
        x->nchunks = x->flags & CTR_ENTRY_PACKED || !x->length ? 0 : 1;
        at += x->length;
        ch += x->nchunks;
    }
    *original = at;
    *chunks = ch;
    return e;
}

static int same_entry(const ctr_entry *a, const ctr_entry *b, int index_form)
{
    if (!ctr_entry_same(a, b)) return 0;
    if ((a->flags & CTR_ENTRY_LOSSY) &&
        memcmp(&a->lossy, &b->lossy, index_form ? sizeof a->lossy : offsetof(ctr_lossy, n)) != 0)
        return 0;
    return !index_form || (a->length == b->length && a->first_chunk == b->first_chunk && a->nchunks == b->nchunks);
}

static void test_roundtrip(ckpz_ctx *ctx)
{
    uint64_t original, nch;
    size_t n = 300;
    ctr_entry *e = make_entries(n, &original, &nch);
    for (int index_form = 0; index_form <= 1; index_form++) {
        uint8_t *buf;
        size_t len, used, got;
        ctr_entry *r;
        CHECK(ctr_list_write(ctx, e, n, index_form, &buf, &len) == CKPZ_OK);
        ckpz_error err = ctr_list_read(ctx, NULL, buf, len, index_form, ALL_FLAGS, LIMIT, n, &r, &got, &used);
        CHECKF(err == CKPZ_OK && got == n && used == len, "form %d: %s", index_form, ckpz_ctx_message(ctx));
        for (size_t i = 0; !err && i < n; i++)
            CHECKF(same_entry(&e[i], &r[i], index_form), "form %d: entry %zu", index_form, i);
        if (!err) ctr_entries_free(r, got);
        /* the description is smaller than one plain record per entry */
        size_t plain = 0;
        for (size_t i = 0; i < n; i++) plain += ctr_entry_size(&e[i], index_form);
        CHECKF(len * 4 < plain, "form %d: %zu bytes coded, %zu plain", index_form, len, plain);
        /* a file without the entry flags the list uses refuses it */
        ctx_clear(ctx);
        CHECK(ctr_list_read(ctx, NULL, buf, len, index_form, CTR_FILE_PACKED | CTR_FILE_CODED, LIMIT, n, &r, &got,
                            &used) == CKPZ_ERR_VERSION);
        free(buf);
    }
    /* as an index: the seek table after the list, and the tiling checks */
    ctr_chunkrec *c = calloc(nch + 1, sizeof *c);
    uint64_t pos = CTR_HEADER_SIZE;
    for (size_t i = 0, k = 0; i < n; i++) {
        if (!e[i].nchunks) continue;
        uint64_t group = 0;
        for (size_t j = i; j > 0 && (e[j - 1].flags & CTR_ENTRY_PACKED); j--) group += e[j - 1].length;
        c[k] = (ctr_chunkrec){pos, (uint32_t)(e[i].length + group), 100};
        pos += 100;
        k++;
    }
    uint8_t *ib;
    size_t isz, rne, rnc;
    ctr_entry *re;
    ctr_chunkrec *rc;
    CHECK(ctr_index_encode(ctx, NULL, e, n, c, nch, &ib, &isz) == CKPZ_OK);
    ctx_clear(ctx);
    ckpz_error err = ctr_index_read(ctx, NULL, ib, isz, pos, original, LIMIT, ALL_FLAGS, &re, &rne, &rc, &rnc);
    CHECKF(err == CKPZ_OK && rne == n && rnc == nch, "coded index: %s", ckpz_ctx_message(ctx));
    for (size_t i = 0; !err && i < n; i++) CHECKF(same_entry(&e[i], &re[i], 1), "coded index: entry %zu", i);
    if (!err) ctr_entries_free(re, rne), free(rc);
    /* into kept memory (a whole-file restore's): the same entries, read again into it, and
     * an index that it holds a smaller part of; refusals leave it to its owner */
    ctr_keep keep = {0};
    int kept = 0;
    for (int round = 0; round < 2; round++) {
        ctx_clear(ctx);
        err = ctr_index_read_kept(ctx, NULL, &keep, ib, isz, pos, original, LIMIT, ALL_FLAGS, &re, &rne, &kept, &rc,
                                  &rnc);
        CHECKF(err == CKPZ_OK && kept && re == keep.e && rne == n && rnc == nch, "kept index %d: %s", round,
               ckpz_ctx_message(ctx));
        for (size_t i = 0; !err && i < n; i++) CHECKF(same_entry(&e[i], &re[i], 1), "kept index: entry %zu", i);
        if (!err) free(rc);
    }
    ctx_clear(ctx);
    CHECK(ctr_index_read_kept(ctx, NULL, &keep, ib, isz - 1, pos, original, LIMIT, ALL_FLAGS, &re, &rne, &kept, &rc,
                              &rnc) == CKPZ_ERR_CORRUPT &&
          !kept);
    ctr_keep_free(&keep);
    /* the same bytes read as a plain index, or cut short, or with a chunk that does not add up: refused */
    ctx_clear(ctx);
    CHECK(ctr_index_read(ctx, NULL, ib, isz, pos, original, LIMIT, ALL_FLAGS & ~CTR_FILE_CODED, &re, &rne, &rc, &rnc) !=
          0);
    ctx_clear(ctx);
    CHECK(ctr_index_read(ctx, NULL, ib, isz - 1, pos, original, LIMIT, ALL_FLAGS, &re, &rne, &rc, &rnc) ==
          CKPZ_ERR_CORRUPT);
    st32(ib + isz - 8, ld32(ib + isz - 8) + 1); /* the last chunk's original length */
    ctx_clear(ctx);
    CHECK(ctr_index_read(ctx, NULL, ib, isz, pos, original, LIMIT, ALL_FLAGS, &re, &rne, &rc, &rnc) ==
              CKPZ_ERR_CORRUPT &&
          strstr(ckpz_ctx_message(ctx), "do not add up"));
    free(ib);
    /* an empty original: the index is no larger than a plain one (24 bytes) */
    CHECK(ctr_index_encode(ctx, NULL, NULL, 0, NULL, 0, &ib, &isz) == CKPZ_OK && isz == 24);
    free(ib);
    /* a CKEL frame: read back by the readers' frame calls; refused where the file has no feature 3 */
    size_t flen, fn;
    uint8_t *fr;
    uint32_t blen;
    ctr_entry *fe;
    CHECK(ctr_list_frame_write(ctx, NULL, e + 1, 4, &fr, &flen) == CKPZ_OK);
    CHECK(ctr_eframe_len(ctx, fr, flen, ALL_FLAGS, LIMIT, 0, 0, &blen) == CKPZ_OK && 12 + (size_t)blen == flen);
    CHECK(ctr_eframe_read(ctx, NULL, fr, blen, ALL_FLAGS, LIMIT, 0, 0, &fe, &fn) == CKPZ_OK && fn == 4);
    for (size_t i = 0; i < fn; i++) CHECKF(same_entry(&e[1 + i], &fe[i], 0), "frame: entry %zu", i);
    ctr_entries_free(fe, fn);
    ctx_clear(ctx);
    CHECK(ctr_eframe_len(ctx, fr, flen, ALL_FLAGS & ~CTR_FILE_CODED, LIMIT, 0, 0, &blen) == CKPZ_ERR_CORRUPT);
    fr[flen / 2] ^= 1;
    ctx_clear(ctx);
    CHECK(ctr_eframe_read(ctx, NULL, fr, (uint32_t)(flen - 12), ALL_FLAGS, LIMIT, 0, 0, &fe, &fn) == CKPZ_ERR_CHECKSUM);
    free(fr);
    ctr_entries_free(e, n);
    free(c);
}

/* ---- hand-made lists: stored columns ---- */
typedef struct {
    uint8_t b[512];
    size_t n;
} buf;

static void uv(buf *o, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) o->b[o->n++] = (uint8_t)(v | 0x80);
    o->b[o->n++] = (uint8_t)v;
}

static void column(buf *o, const void *p, size_t len)
{
    uv(o, len);
    if (!len) return;
    o->b[o->n++] = 0; /* stored */
    uv(o, len);
    memcpy(o->b + o->n, p, len);
    o->n += len;
}

/* A stream-form list of count entries from its columns (numbers as bytes). */
static buf list(uint64_t count, uint64_t first, const char *kinds, size_t nk, const uint8_t *nums, size_t nn,
                const char *names)
{
    buf o = {{0}, 0};
    uv(&o, count);
    uv(&o, first);
    column(&o, kinds, nk);
    column(&o, nums, nn);
    column(&o, names, strlen(names));
    column(&o, NULL, 0);
    return o;
}

static ckpz_error read_list(ckpz_ctx *ctx, const buf *b, ctr_entry **e, size_t *n)
{
    size_t used;
    ctx_clear(ctx);
    ckpz_error err = ctr_list_read(ctx, NULL, b->b, b->n, 0, ALL_FLAGS, LIMIT, 0, e, n, &used);
    if (!err && used != b->n) err = CKPZ_ERR_INTERNAL;
    return err;
}

/* The list b in a CKEL frame, compared as it is read with entries e[0..n) (NULL: none). */
static ckpz_error frame_same(ckpz_ctx *ctx, const buf *b, const ctr_entry *e, size_t n, int *same)
{
    uint8_t fr[sizeof b->b + 12];
    size_t k;
    st32(fr, CTR_TAG_LIST);
    st32(fr + 4, (uint32_t)b->n);
    memcpy(fr + 8, b->b, b->n);
    st32(fr + 8 + b->n, crc32c(0, fr, 8 + b->n));
    ctx_clear(ctx);
    return ctr_eframe_same(ctx, NULL, fr, (uint32_t)b->n, ALL_FLAGS, LIMIT, 0, 0, e, n, &k, same);
}

/* b read as a list fails with want (saying says), and compared in a frame as it is read
 * fails alike (or, read, matches its own entries). */
static void expect(ckpz_ctx *ctx, const buf *b, ckpz_error want, const char *says, const char *what)
{
    ctr_entry *e;
    size_t n;
    int same;
    ckpz_error err = read_list(ctx, b, &e, &n);
    CHECKF(err == want && (!says || strstr(ckpz_ctx_message(ctx), says)), "%s: got %d (%s)", what, (int)err,
           ckpz_ctx_message(ctx));
    ckpz_error err2 = frame_same(ctx, b, err ? NULL : e, err ? 0 : n, &same);
    CHECKF(err2 == want && (!says || strstr(ckpz_ctx_message(ctx), says)) && (err || same),
           "%s, compared in a frame: got %d (%s)", what, (int)err2, ckpz_ctx_message(ctx));
    if (!err) ctr_entries_free(e, n);
}

static void test_hostile(ckpz_ctx *ctx)
{
    static const char k2[] = {CKPZ_DTYPE_F32, 0, CKPZ_DTYPE_F32, 0};
    /* "abc" [2], then 5 bytes on: "abd" [] (2 shared bytes, 1 of its own) */
    static const uint8_t ok[] = {1, 2, 0, 3, 5, 0, 2, 1};
    buf b = list(2, 40, k2, 4, ok, sizeof ok, "abcd");
    ctr_entry *e;
    size_t n;
    CHECK(read_list(ctx, &b, &e, &n) == CKPZ_OK && n == 2);
    if (n == 2) {
        CHECK(!strcmp(e[0].name, "abc") && !strcmp(e[1].name, "abd") && e[0].offset == 40 && e[1].offset == 45 &&
              e[0].ndim == 1 && e[0].shape[0] == 2 && e[1].ndim == 0);
        ctr_entries_free(e, n);
    }
    static const uint8_t pre_long[] = {1, 2, 0, 3, 5, 0, 4, 0}; /* shares 4 bytes of a 3-byte name */
    b = list(2, 40, k2, 4, pre_long, sizeof pre_long, "abc");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "name's lengths", "prefix longer than the previous name");
    static const uint8_t pre_first[] = {1, 2, 1, 2, 5, 0, 2, 1}; /* the first name shares a byte */
    b = list(2, 40, k2, 4, pre_first, sizeof pre_first, "abd");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "name's lengths", "prefix on the first entry");
    b = list(2, 40, k2, 4, ok, sizeof ok, "abc"); /* the second name's byte is missing */
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "name's lengths", "names column short");
    b = list(2, 40, k2, 4, ok, sizeof ok, "abcde");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "columns hold more", "names column long");
    b = list(2, 40, k2, 3, ok, sizeof ok, "abcd");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "kinds column", "kinds column of 3 bytes for 2 entries");
    b = list(2, 40, k2, 4, ok, sizeof ok - 1, "abcd");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "truncated", "numbers column short");
    static const uint8_t long_uv[] = {1, 2, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 2, 1};
    b = list(2, 40, k2, 4, long_uv, sizeof long_uv, "abcd");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "truncated", "a varint over 64 bits");
    static const uint8_t wrap[] = {1, 2, 0, 3, 1, 0, 2, 1}; /* first offset 2^64 - 1, then one more */
    b = list(2, UINT64_MAX, k2, 4, wrap, sizeof wrap, "abcd");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "overflow", "offsets past 2^64");
    static const uint8_t dims[] = {65};
    b = list(1, 0, k2, 2, dims, sizeof dims, "");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "dimensions", "65 dimensions");
    static const char bad_dtype[] = {(char)200, 0}, bad_flags[] = {CKPZ_DTYPE_F32, 16};
    static const uint8_t one[] = {0, 0, 0};
    b = list(1, 0, bad_dtype, 2, one, sizeof one, "");
    expect(ctx, &b, CKPZ_ERR_VERSION, "dtype", "unknown dtype");
    b = list(1, 0, bad_flags, 2, one, sizeof one, "");
    expect(ctx, &b, CKPZ_ERR_VERSION, "reserved flags", "reserved entry flag");
    b = list(0, 0, "", 0, one, 0, "");
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "no entries", "a frame of no entries");
    /* counts and lengths over the limit are refused before anything is allocated */
    b = list((uint64_t)1 << 40, 0, k2, 2, one, sizeof one, "");
    expect(ctx, &b, CKPZ_ERR_LIMIT, "memory limit", "2^40 entries");
    b = (buf){{0}, 0};
    uv(&b, 1), uv(&b, 0), uv(&b, (uint64_t)1 << 40), b.b[b.n++] = 0, uv(&b, 2), b.b[b.n++] = 3, b.b[b.n++] = 0;
    expect(ctx, &b, CKPZ_ERR_LIMIT, "memory limit", "a column of 2^40 bytes");
    b = (buf){{0}, 0};
    uv(&b, 1), uv(&b, 0), uv(&b, 2), b.b[b.n++] = 0, uv(&b, 1), b.b[b.n++] = 3; /* stored: 1 byte for 2 */
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "does not decode", "a stored column shorter than its length");
    b = (buf){{0}, 0};
    uv(&b, 1), uv(&b, 0), uv(&b, 2), b.b[b.n++] = 63, uv(&b, 2), b.b[b.n++] = 3, b.b[b.n++] = 0;
    expect(ctx, &b, CKPZ_ERR_VERSION, "needs codec id 63", "a codec this build does not have");
    b = (buf){{0}, 0};
    uv(&b, 1), uv(&b, 0), uv(&b, 2), b.b[b.n++] = 0, uv(&b, 9);
    expect(ctx, &b, CKPZ_ERR_CORRUPT, "truncated", "a coded length past the end");
}

/* A safetensors file of n tensors of 16 F32 values each, named like a residual net's. */
static uint8_t *small_tensors(size_t n, size_t *len)
{
    size_t cap = n * 128 + 64, hn = 0;
    char *h = malloc(cap);
    hn += (size_t)snprintf(h + hn, cap - hn, "{");
    for (size_t i = 0; i < n; i++)
        hn += (size_t)snprintf(h + hn, cap - hn,
                               "%s\"blocks.%zu.%s\":{\"dtype\":\"F32\",\"shape\":[16],"
                               "\"data_offsets\":[%zu,%zu]}",
                               i ? "," : "", i / 4,
                               (const char *[]){"conv.weight", "conv.bias", "ln.weight", "ln.bias"}[i % 4], i * 64,
                               (i + 1) * 64);
    hn += (size_t)snprintf(h + hn, cap - hn, "}");
    size_t hl = (hn + 7) & ~(size_t)7;
    *len = 8 + hl + n * 64;
    uint8_t *p = malloc(*len);
    st64(p, hl);
    memset(p + 8, ' ', hl);
    memcpy(p + 8, h, hn);
    for (size_t i = 0; i < n * 16; i++) {
        float v = (float)(rng_normal() * (i % 64 < 32 ? 0.02 : 1.0));
        memcpy(p + 8 + hl + 4 * i, &v, 4);
    }
    free(h);
    return p;
}

static int entry_of(void *m, const void *b, size_t n) { return ckpz_mem_write(m, b, n); }

/* A CKEL frame compared with the index's entries as it is read (ctr_eframe_same, what a
 * whole-file restore checks its frames with): equal entries match; each field that
 * differs (offset, dtype, flags, a dimension, a name's own or shared bytes, its length)
 * and a frame longer than the entries left do not; a damaged frame is an error. */
static void test_frame_same(ckpz_ctx *ctx)
{
    uint64_t original, nch;
    size_t n = 40, flen, k;
    ctr_entry *e = make_entries(n, &original, &nch);
    uint8_t *fr;
    uint32_t blen;
    int same;
    const size_t first = 21, cnt = 12; /* entries with shared name prefixes, shapes, empty names */
    CHECK(ctr_list_frame_write(ctx, NULL, e + first, cnt, &fr, &flen) == CKPZ_OK);
    CHECK(ctr_eframe_len(ctx, fr, flen, ALL_FLAGS, LIMIT, 0, 0, &blen) == CKPZ_OK);
#define SAME(room) (ctr_eframe_same(ctx, NULL, fr, blen, ALL_FLAGS, LIMIT, 0, 0, e + first, room, &k, &same))
    CHECK(SAME(n - first) == CKPZ_OK && k == cnt && same == 1);
    CHECK(SAME(cnt) == CKPZ_OK && k == cnt && same == 1);
    CHECK(SAME(cnt - 1) == CKPZ_OK && k == cnt && same == 0);
    ctr_entry *x = &e[first + 4], *y = &e[first + 5];
    CHECK(x->name_len > 10 && x->ndim >= 1 && y->ndim >= 2 && !strcmp(e[first + 9].name, "blocks.10.bn.bias"));
    x->offset++;
    CHECK(SAME(cnt) == CKPZ_OK && same == 0);
    x->offset--;
    x->dtype = CKPZ_DTYPE_BF16;
    CHECK(SAME(cnt) == CKPZ_OK && same == 0);
    x->dtype = CKPZ_DTYPE_F32;
    y->shape[1]++;
    CHECK(SAME(cnt) == CKPZ_OK && same == 0);
    y->shape[1]--;
    ctr_entry *z = &e[first + 9]; /* "blocks.10.bn.bias": the next one shares "blocks.10." only */
    z->name[z->name_len - 1] ^= 1; /* its own bytes */
    CHECK(SAME(cnt) == CKPZ_OK && same == 0);
    z->name[z->name_len - 1] ^= 1;
    x->name[1] ^= 1; /* the bytes it shares with the entry before */
    CHECK(SAME(cnt) == CKPZ_OK && same == 0);
    x->name[1] ^= 1;
    x->name_len--;
    CHECK(SAME(cnt) == CKPZ_OK && same == 0);
    x->name_len++;
    e[first + cnt - 1].flags ^= CTR_ENTRY_PACKED;
    CHECK(SAME(cnt) == CKPZ_OK && same == 0);
    e[first + cnt - 1].flags ^= CTR_ENTRY_PACKED;
    CHECK(SAME(cnt) == CKPZ_OK && same == 1); /* all put back */
    fr[flen / 2] ^= 1;
    ctx_clear(ctx);
    CHECK(SAME(cnt) == CKPZ_ERR_CHECKSUM && same == 0 && k == 0);
    free(fr);
    /* a based and a lossy entry among them (their fields read, the lossy ones not compared) */
    CHECK(e[4].flags == CTR_ENTRY_BASED && e[8].flags == CTR_ENTRY_LOSSY);
    CHECK(ctr_list_frame_write(ctx, NULL, e + 3, 7, &fr, &flen) == CKPZ_OK);
    CHECK(ctr_eframe_len(ctx, fr, flen, ALL_FLAGS, LIMIT, 0, 0, &blen) == CKPZ_OK);
    CHECK(ctr_eframe_same(ctx, NULL, fr, blen, ALL_FLAGS, LIMIT, 0, 0, e + 3, 7, &k, &same) == CKPZ_OK && k == 7 &&
          same == 1);
    e[4].base_offset++;
    CHECK(ctr_eframe_same(ctx, NULL, fr, blen, ALL_FLAGS, LIMIT, 0, 0, e + 3, 7, &k, &same) == CKPZ_OK && !same);
    e[4].base_offset--;
#undef SAME
    free(fr);
    ctr_entries_free(e, n);
}

static void test_small_tensors(ckpz_ctx *ctx)
{
    size_t n, zn;
    uint8_t *src = small_tensors(4000, &n), *back = malloc(n);
    void *z = NULL;
    ckpz_params p;
    ckpz_params_init(&p);
    CHECK(ckpz_compress_buffer(ctx, &p, src, n, &z, &zn) == CKPZ_OK);
    CHECKF(zn < n, "4000 small tensors: %zu bytes coded to %zu", n, zn);
    CHECK(z && (ld16((uint8_t *)z + 10) & CTR_FEAT_CODED));
    CHECK(ckpz_decompress_buffer(ctx, &p, z, zn, back, n) == CKPZ_OK && !memcmp(back, src, n));
    ckpz_mem f = mem_in(z, zn, 0);
    ckpz_archive *a = NULL;
    uint64_t i;
    uint8_t one[64];
    ckpz_mem out = mem_out(one, sizeof one);
    CHECK(ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, zn, &a) == CKPZ_OK);
    CHECK(a && ckpz_archive_check_frames(ctx, a) == CKPZ_OK);
    CHECK(a && ckpz_archive_find(ctx, a, "blocks.777.ln.weight", &i) == CKPZ_OK);
    CHECK(a && ckpz_archive_extract(ctx, a, i, entry_of, &out) == CKPZ_OK && out.size == 64);
    size_t hl = ld64(src);
    CHECK(!memcmp(one, src + 8 + hl + (777 * 4 + 2) * 64, 64));
    ckpz_archive_close(a);
    /* whole-file restores on one context, which keeps the index's entries from one to the
     * next: a file of fewer tensors between two of this one */
    size_t n2, zn2;
    uint8_t *src2 = small_tensors(700, &n2), *back2 = malloc(n2);
    void *z2 = NULL;
    CHECK(ckpz_compress_buffer(ctx, &p, src2, n2, &z2, &zn2) == CKPZ_OK);
    for (int round = 0; round < 2; round++) {
        memset(back, 0, n);
        memset(back2, 0, n2);
        CHECK(ckpz_decompress_buffer(ctx, &p, z2, zn2, back2, n2) == CKPZ_OK && !memcmp(back2, src2, n2));
        CHECK(ckpz_decompress_buffer(ctx, &p, z, zn, back, n) == CKPZ_OK && !memcmp(back, src, n));
    }
    ckpz_free(z2);
    free(back2);
    free(src2);
    ckpz_free(z);
    free(back);
    free(src);
}

/* An index read into kept memory in one pass: its block of names and shapes grows as the
 * entries come, the entries before moved with it (300 entries from an empty keep); an
 * index whose block outgrows keep part way, or of more entries than keep takes, is read
 * again, allocated, the same. */
static void test_kept_growth(ckpz_ctx *ctx)
{
    size_t max = CTR_KEEP_MAX / sizeof(ctr_entry), sizes[] = {300, max - max / 20, max + 1};
    for (int t = 0; t < 3; t++) {
        uint64_t original, nch;
        size_t n = sizes[t], isz, rne, rnc;
        ctr_entry *e = make_entries(n, &original, &nch), *re;
        ctr_chunkrec *c = calloc(nch + 1, sizeof *c), *rc;
        uint64_t pos = CTR_HEADER_SIZE;
        for (size_t i = 0, k = 0; i < n; i++) {
            if (!e[i].nchunks) continue;
            uint64_t group = 0;
            for (size_t j = i; j > 0 && (e[j - 1].flags & CTR_ENTRY_PACKED); j--) group += e[j - 1].length;
            c[k++] = (ctr_chunkrec){pos, (uint32_t)(e[i].length + group), 100};
            pos += 100;
        }
        uint8_t *ib;
        CHECK(ctr_index_encode(ctx, NULL, e, n, c, nch, &ib, &isz) == CKPZ_OK);
        ctr_keep keep = {0};
        int kept = -1;
        ctx_clear(ctx);
        ckpz_error err = ctr_index_read_kept(ctx, NULL, &keep, ib, isz, pos, original, (size_t)64 << 20, ALL_FLAGS, &re,
                                             &rne, &kept, &rc, &rnc);
        CHECKF(err == CKPZ_OK && rne == n && rnc == nch && kept == (t == 0), "%zu entries, kept %d: %s", n, kept,
               ckpz_ctx_message(ctx));
        size_t bad = 0;
        for (size_t i = 0; !err && i < n; i++) bad += !same_entry(&e[i], &re[i], 1);
        CHECKF(bad == 0, "%zu entries: %zu differ", n, bad);
        if (!err) {
            if (!kept) ctr_entries_free(re, rne);
            free(rc);
        }
        ctr_keep_free(&keep);
        ctr_entries_free(e, n);
        free(c);
        free(ib);
    }
}

int main(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    test_roundtrip(ctx);
    test_hostile(ctx);
    test_frame_same(ctx);
    test_kept_growth(ctx);
    test_small_tensors(ctx);
    ckpz_ctx_free(ctx);
    return test_summary("test_entlist");
}
