/* test_small_tables.c — zstd with tables sized for what it codes (zstd_backend.c,
 * tables_encode) and the buffers an ent_ctx keeps for its caller (ent_keep):
 * - a safetensors-like JSON header of 5,000 tensors (~450 KB) coded as a text header
 *   (ENT_LZ_TEXT) restores exactly and comes out smaller than zstd 1 with its own
 *   tables codes it (the header of 5,174 small tensors: 37.3 KB against 44.5 KB);
 * - entry list columns (ENT_LZ_LIST: names front-coded, varints, kinds) restore exactly
 *   and come out no larger than at ENT_LZ_REPEATS, whose level they share;
 * - ent_keep grows a buffer with its contents kept and refuses a slot past ENT_KEEP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "ckpz.h"
#include "entropy/entropy.h"
#include "testutil.h"

/* A header as safetensors writers put it: names of blocks, shapes, offsets in order. */
static size_t json_header(char *s, size_t cap, unsigned tensors)
{
    static const char *part[4] = {"fc.weight", "fc.bias", "ln.weight", "ln.bias"};
    size_t n = (size_t)snprintf(s, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    unsigned long long off = 0;
    for (unsigned i = 0; i < tensors && n < cap; i++) {
        unsigned rows = 16 + 16 * (i % 3), len = (i % 4 ? rows : rows * rows) * 4;
        n += (size_t)snprintf(s + n, cap - n, ",\"blocks.%u.%s\":{\"dtype\":\"F32\",\"shape\":[%u", i / 4, part[i % 4],
                              rows);
        if (n < cap && !(i % 4)) n += (size_t)snprintf(s + n, cap - n, ",%u", rows);
        if (n < cap) n += (size_t)snprintf(s + n, cap - n, "],\"data_offsets\":[%llu,%llu]}", off, off + len);
        off += len;
    }
    if (n + 1 < cap) s[n++] = '}';
    return n;
}

static void test_text(void)
{
    size_t cap = 600000, n;
    char *s = malloc(cap);
    uint8_t *enc = malloc(ent_bound(cap)), *dec = malloc(cap), *own = malloc(ZSTD_compressBound(cap)), got = 0;
    n = json_header(s, cap, 5000);
    CHECKF(n > 300000 && n < cap, "header of %zu bytes", n);
    ent_ctx *c = ent_ctx_create();
    ent_ctx_set_codec(c, CKPZ_CODEC_ZSTD);
    ent_ctx_set_lz(c, ENT_LZ_TEXT);
    size_t len = ent_encode(c, (const uint8_t *)s, n, enc, ent_bound(n), 3, ENT_HINT_OPAQUE, &got);
    CHECKF(got == ENT_ZSTD && len < n / 4, "text header: %s, %zu bytes of %zu", ent_codec_name(got), len, n);
    CHECKF(ent_decode(c, got, enc, len, dec, n) == 0 && !memcmp(dec, s, n), "text header: round trip");
    size_t zl = ZSTD_compress(own, ZSTD_compressBound(n), s, n, 1);
    CHECKF(!ZSTD_isError(zl) && len < zl, "text header: %zu bytes, zstd 1 with its own tables %zu", len, zl);
    ent_ctx_free(c);
    free(s), free(enc), free(dec), free(own);
}

/* One column of n bytes: 0 names, 1 numbers (varints of shapes and prefix lengths), 2 kinds. */
static void column(uint8_t *b, size_t n, int kind)
{
    static const char *part[4] = {"fc.weight", "fc.bias", "ln.weight", "ln.bias"};
    size_t k = 0;
    for (unsigned i = 0; k < n; i++) {
        char t[64];
        int m = kind == 0   ? snprintf(t, sizeof t, "%u.%s", i / 4, part[i % 4])
                : kind == 1 ? snprintf(t, sizeof t, "%c%c%c%c", 1 + (i % 4 == 0), 16 + 16 * (i % 3), 7, 9 + i % 2)
                            : snprintf(t, sizeof t, "%c%c", 8, 0);
        for (int j = 0; j < m && k < n; j++) b[k++] = (uint8_t)t[j];
    }
}

static void test_list(void)
{
    static const size_t sizes[] = {300, 5000, 12000, 40000};
    size_t cap = ent_bound(40000);
    uint8_t *b = malloc(40000), *enc = malloc(cap), *ref = malloc(cap), *dec = malloc(40000), gl, gr;
    ent_ctx *list = ent_ctx_create(), *rep = ent_ctx_create();
    ent_ctx_set_lz(list, ENT_LZ_LIST);
    ent_ctx_set_lz(rep, ENT_LZ_REPEATS);
    for (int kind = 0; kind < 3; kind++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            column(b, n, kind);
            size_t l = ent_encode(list, b, n, enc, cap, 3, ENT_HINT_LIST, &gl);
            size_t r = ent_encode(rep, b, n, ref, cap, 3, ENT_HINT_LIST, &gr);
            CHECKF(ent_decode(list, gl, enc, l, dec, n) == 0 && !memcmp(dec, b, n), "list column %d, %zu: round trip",
                   kind, n);
            CHECKF(l <= r, "list column %d, %zu: %zu bytes, %zu with zstd's own tables", kind, n, l, r);
        }
    ent_ctx_free(list);
    ent_ctx_free(rep);
    free(b), free(enc), free(ref), free(dec);
}

static void test_keep(void)
{
    ent_ctx *c = ent_ctx_create();
    uint8_t *p = ent_keep(c, 0, 100);
    CHECKF(p != NULL, "ent_keep 100 bytes");
    for (int i = 0; p && i < 100; i++) p[i] = (uint8_t)i;
    uint8_t *q = ent_keep(c, 0, 1 << 20);
    int same = q != NULL;
    for (int i = 0; q && i < 100; i++) same &= q[i] == (uint8_t)i;
    CHECKF(same, "ent_keep: contents kept as it grows");
    CHECKF(ent_keep(c, 0, 50) == q, "ent_keep: a smaller request keeps the buffer");
    CHECKF(ent_keep(c, ENT_KEEP - 1, 10) != NULL && ent_keep(c, ENT_KEEP, 10) == NULL, "ent_keep: slots");
    ent_ctx_free(c);
}

int main(void)
{
    test_text();
    test_list();
    test_keep();
    return test_summary("test_small_tables");
}
