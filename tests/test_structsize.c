/* test_structsize.c — the output structs' struct_size (include/ckpz.h): a caller built
 * against an older, smaller header passes that header's size and gets only the fields it
 * knows (the bytes past its size are left as they were: the library never writes past
 * the caller's struct); a size of 0 (never set), one too small to hold the size field, or
 * one larger than this library's struct (a newer header) is CKPZ_ERR_PARAM with a message
 * naming the struct. Checked for ckpz_stats (compression and decompression),
 * ckpz_archive_info, ckpz_entry, ckpz_base_info (read from a file's head, from an open
 * archive and from a chain link). The "older" sizes are prefixes ending at a field
 * boundary, as an older header's struct is. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "memfile.h"
#include "testutil.h"

#define JUNK 0xA5

/* The bytes of p[from, to) are all JUNK: the library left them alone. */
static int untouched(const void *p, size_t from, size_t to)
{
    const unsigned char *b = p;
    for (size_t i = from; i < to; i++)
        if (b[i] != JUNK) return 0;
    return 1;
}

int main(void)
{
    enum { N = 1 << 20 };
    float *src = malloc(N);
    for (size_t i = 0; i < N / 4; i++) src[i] = (float)rng_normal();
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_F32;

    /* ckpz_stats from compression: a prefix up to `chunks` gets the fields before it */
    ckpz_stats st;
    memset(&st, JUNK, sizeof st);
    st.struct_size = offsetof(ckpz_stats, chunks);
    ckpz_mem in = mem_in(src, N, 0), z = {.grow = 1};
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &in);
    ckpz_sink_mem(&k, &z);
    CHECKF(ckpz_compress_io(ctx, &p, &s, &k, &st) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    CHECK(st.struct_size == offsetof(ckpz_stats, chunks)); /* the caller's, kept */
    CHECK(st.original_bytes == N && st.compressed_bytes == z.size && st.tensors == 1);
    CHECK(untouched(&st, offsetof(ckpz_stats, chunks), sizeof st));

    /* the whole struct: every field */
    ckpz_stats full = {.struct_size = sizeof full};
    ckpz_mem zin = mem_in(z.data, z.size, 0);
    ckpz_source_mem(&s, &zin);
    CHECKF(ckpz_decompress_io(ctx, &p, &s, NULL, &full) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    CHECK(full.original_bytes == N && full.compressed_bytes == z.size && full.chunks >= 1 &&
          full.format == CKPZ_INPUT_RAW);

    /* bad sizes: refused before any work, with the struct named */
    size_t bad[] = {0, sizeof(size_t) - 1, sizeof(ckpz_stats) + 8};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ckpz_stats b;
        memset(&b, JUNK, sizeof b);
        b.struct_size = bad[i];
        zin = mem_in(z.data, z.size, 0);
        ckpz_source_mem(&s, &zin);
        CHECK(ckpz_decompress_io(ctx, &p, &s, NULL, &b) == CKPZ_ERR_PARAM);
        CHECKF(strstr(ckpz_ctx_message(ctx), "ckpz_stats.struct_size"), "%s", ckpz_ctx_message(ctx));
        CHECK(zin.pos == 0 && untouched(&b, sizeof(size_t), sizeof b));
        in = mem_in(src, N, 0);
        ckpz_source_mem(&s, &in);
        ckpz_mem none = {.grow = 1};
        ckpz_sink_mem(&k, &none);
        CHECK(ckpz_compress_io(ctx, &p, &s, &k, &b) == CKPZ_ERR_PARAM && none.size == 0);
        free(none.data);
    }
    CHECK(strstr(ckpz_ctx_message(ctx), "newer than the library"));

    /* ckpz_archive_info and ckpz_entry: older prefixes, bad sizes */
    ckpz_archive *a = NULL;
    CHECKF(ckpz_archive_open(ctx, &p, ckpz_mem_pread, &zin, z.size, &a) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    ckpz_archive_info ai;
    memset(&ai, JUNK, sizeof ai);
    ai.struct_size = offsetof(ckpz_archive_info, entries);
    CHECK(a && ckpz_archive_get_info(a, &ai) == CKPZ_OK);
    CHECK(ai.original_size == N && ai.compressed_size == z.size && ai.format == CKPZ_INPUT_RAW);
    CHECK(untouched(&ai, offsetof(ckpz_archive_info, entries), sizeof ai));
    ai.struct_size = 0;
    CHECK(ckpz_archive_get_info(a, &ai) == CKPZ_ERR_PARAM);
    ckpz_entry e;
    memset(&e, JUNK, sizeof e);
    e.struct_size = offsetof(ckpz_entry, compressed);
    CHECK(ckpz_archive_entry(a, 0, &e) == CKPZ_OK && e.length == N && e.dtype == CKPZ_DTYPE_F32 && e.ndim == 1);
    CHECK(untouched(&e, offsetof(ckpz_entry, compressed), sizeof e));
    e.struct_size = sizeof e + 1;
    CHECK(ckpz_archive_entry(a, 0, &e) == CKPZ_ERR_PARAM);
    ckpz_base_info bi;
    memset(&bi, JUNK, sizeof bi);
    bi.struct_size = sizeof bi;
    CHECK(ckpz_archive_get_base(a, &bi) == CKPZ_OK && bi.needed == 0 && bi.name[0] == 0);
    bi.struct_size = 0;
    CHECK(ckpz_archive_get_base(a, &bi) == CKPZ_ERR_PARAM);
    ckpz_archive_close(a);

    /* ckpz_base_info from a delta file's head: a prefix without the name */
    p.base = src;
    p.base_size = N;
    p.base_name = "prev.bin";
    in = mem_in(src, N, 0);
    ckpz_source_mem(&s, &in);
    ckpz_mem d = {.grow = 1};
    ckpz_sink_mem(&k, &d);
    CHECKF(ckpz_compress_io(ctx, &p, &s, &k, NULL) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    memset(&bi, JUNK, sizeof bi);
    bi.struct_size = offsetof(ckpz_base_info, name);
    CHECK(ckpz_base_info_read(ctx, d.data, d.size, &bi) == CKPZ_OK && bi.needed && bi.size == N && bi.depth == 1);
    CHECK(untouched(&bi, offsetof(ckpz_base_info, name), sizeof bi));
    bi.struct_size = sizeof bi;
    CHECK(ckpz_base_info_read(ctx, d.data, d.size, &bi) == CKPZ_OK && !strcmp(bi.name, "prev.bin"));
    bi.struct_size = 0;
    CHECK(ckpz_base_info_read(ctx, d.data, d.size, &bi) == CKPZ_ERR_PARAM);
    CHECKF(strstr(ckpz_ctx_message(ctx), "ckpz_base_info.struct_size is 0"), "%s", ckpz_ctx_message(ctx));

    /* a chain link: -1 for a bad size, as for a link out of range */
    ckpz_chain *c = NULL;
    CHECK(ckpz_chain_open(ctx, "samples/gpt-small.f32.safetensors", &c) == CKPZ_OK && ckpz_chain_length(c) == 1);
    bi.struct_size = 0;
    CHECK(ckpz_chain_link(c, 0, &bi) == -1);
    bi.struct_size = sizeof bi;
    CHECK(ckpz_chain_link(c, 0, &bi) == 0 && bi.needed == 0);
    ckpz_chain_free(c);

    free(z.data), free(d.data), free(src);
    ckpz_ctx_free(ctx);
    return test_summary("test_structsize");
}
