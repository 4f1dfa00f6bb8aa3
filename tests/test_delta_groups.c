/* test_delta_groups.c — groups of packed entries coded against the base (format feature
 * 4, doc/format.md "Groups coded against the base"). A file of small tensors against its
 * previous step, in which tensors equal to the base's, tensors moved in their low bits and
 * a tensor the base does not have share one group: the header names the feature, the equal
 * and moved tensors are packed with their counterparts and the new one without, and the
 * file restores byte for byte through the stream reader, the random-access reader, each
 * tensor extracted alone and byte ranges read, at one and two threads. A file coded against itself is
 * made of copy frames. A base frame rewritten to name a base cut inside the group's
 * last counterpart (checksum and size its own) must be refused by every reader. */
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "memfile.h"
#include "testutil.h"

#define NT 10   /* tensors */
#define ELEMS 48 /* f32 elements each: 192 bytes, packed */

/* A safetensors file of NT f32 tensors named names[i], each ELEMS elements of data[i]. */
static uint8_t *write_st(const char *const *names, uint8_t *const *data, size_t *len, size_t *data_at)
{
    char json[4096];
    size_t jl = (size_t)snprintf(json, sizeof json, "{");
    for (size_t i = 0; i < NT; i++)
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                               "\"data_offsets\":[%zu,%zu]}",
                               i ? "," : "", names[i], ELEMS, i * ELEMS * 4, (i + 1) * ELEMS * 4);
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "}");
    size_t hl = (jl + 7) & ~(size_t)7, n = 8 + hl + NT * ELEMS * 4;
    uint8_t *p = malloc(n);
    st64(p, hl);
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, jl);
    for (size_t i = 0; i < NT; i++) memcpy(p + 8 + hl + i * ELEMS * 4, data[i], ELEMS * 4);
    *len = n;
    *data_at = 8 + hl;
    return p;
}

static uint8_t *compress(ckpz_ctx *ctx, const uint8_t *src, size_t n, const uint8_t *base, size_t blen, int threads,
                         size_t *zl)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = threads;
    p.base = base;
    p.base_size = blen;
    void *z = NULL;
    CHECKF(ckpz_compress_buffer(ctx, &p, src, n, &z, zl) == CKPZ_OK, "compress: %s", ckpz_ctx_message(ctx));
    return z;
}

/* The stream reader's and the random-access reader's outcomes for z against base. */
static void restore_both(ckpz_ctx *ctx, const uint8_t *z, size_t zl, const uint8_t *base, size_t blen, uint8_t *out,
                         size_t olen, int threads, ckpz_error *stream, ckpz_error *random)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = threads;
    p.base = base;
    p.base_size = blen;
    ckpz_mem in = mem_in(z, zl, 777), o = mem_out(out, olen);
    *stream = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &in, ckpz_mem_write, &o, NULL);
    if (*stream == CKPZ_OK && (o.size != olen)) *stream = CKPZ_ERR_CORRUPT;
    *random = ckpz_decompress_buffer(ctx, &p, z, zl, out, olen);
}

int main(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    uint8_t *bd[NT], *nd[NT];
    const char *bnames[NT] = {"g.a0", "g.a1", "g.a2", "g.m3", "g.m4", "g.m5", "g.old6", "g.a7", "g.a8", "g.a9"};
    const char *nnames[NT] = {"g.a0", "g.a1", "g.a2", "g.m3", "g.m4", "g.m5", "g.new6", "g.a7", "g.a8", "g.a9"};
    for (int i = 0; i < NT; i++) {
        bd[i] = malloc(ELEMS * 4);
        nd[i] = malloc(ELEMS * 4);
        for (int k = 0; k < ELEMS; k++) {
            float f = (float)(rng_normal() * 0.05);
            memcpy(bd[i] + 4 * k, &f, 4);
        }
        memcpy(nd[i], bd[i], ELEMS * 4);
        for (int k = 0; i >= 3 && i <= 5 && k < ELEMS; k++) { /* moved by a few units in the last place */
            uint32_t u;
            memcpy(&u, nd[i] + 4 * k, 4);
            u += (uint32_t)(rng() % 7) - 3u;
            memcpy(nd[i] + 4 * k, &u, 4);
        }
        for (int k = 0; i == 6 && k < ELEMS; k++) { /* a tensor the base does not have */
            float f = (float)(rng_normal() * 0.05);
            memcpy(nd[i] + 4 * k, &f, 4);
        }
    }
    size_t blen, nlen, bat, nat;
    uint8_t *base = write_st(bnames, bd, &blen, &bat), *next = write_st(nnames, nd, &nlen, &nat);
    uint8_t *out = malloc(nlen);

    for (int threads = 1; threads <= 2; threads++) {
        size_t zl;
        uint8_t *z = compress(ctx, next, nlen, base, blen, threads, &zl);
        CHECKF(ld16(z + 10) & 16, "header flags %#x: feature 4 (group base) not set", ld16(z + 10));
        ckpz_error es, er;
        restore_both(ctx, z, zl, base, blen, out, nlen, threads, &es, &er);
        CHECKF(es == CKPZ_OK, "stream: %s", ckpz_ctx_message(ctx));
        CHECKF(er == CKPZ_OK && !memcmp(out, next, nlen), "random access: %s", ckpz_ctx_message(ctx));
        /* the entries: equal and moved tensors packed with their counterparts, the new one
         * without, all in one group (no entry between them owns a chunk) */
        ckpz_mem f = mem_in(z, zl, 0);
        ckpz_params p;
        ckpz_params_init(&p);
        p.base = base;
        p.base_size = blen;
        ckpz_archive *a = NULL;
        CHECK(ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, zl, &a) == CKPZ_OK);
        ckpz_archive_info info = {.struct_size = sizeof info};
        CHECK(a && ckpz_archive_get_info(a, &info) == CKPZ_OK);
        int packed_based = 0, new_alone = 0, owners = 0;
        uint64_t first = UINT64_MAX, last = 0;
        for (uint64_t i = 0; a && i < info.entries; i++) {
            ckpz_entry e = {.struct_size = sizeof e};
            CHECK(ckpz_archive_entry(a, i, &e) == CKPZ_OK);
            if (!strncmp(e.name, "g.a", 3) || !strncmp(e.name, "g.m", 3)) packed_based += e.based && !e.chunks;
            if (!strcmp(e.name, "g.new6")) new_alone = !e.based && !e.chunks;
            if (!strcmp(e.name, "g.a0")) first = i;
            if (!strcmp(e.name, "g.a8")) last = i;
            /* each tensor alone, through its group's chunk */
            uint8_t *t = malloc(e.length + 1);
            ckpz_mem o = mem_out(t, e.length);
            CHECKF(ckpz_archive_extract(ctx, a, i, ckpz_mem_write, &o) == CKPZ_OK && o.size == e.length &&
                       !memcmp(t, next + e.offset, e.length),
                   "extract entry %llu ('%s'): %s", (unsigned long long)i, e.name, ckpz_ctx_message(ctx));
            free(t);
            owners += i > first && i <= last && e.chunks;
        }
        CHECKF(packed_based >= 8, "%d equal or moved tensors packed with their counterparts, want 8 or more",
               packed_based);
        CHECK(new_alone);
        CHECKF(first < last && !owners, "g.a0 (%llu) to g.a8 (%llu) not in one group", (unsigned long long)first,
               (unsigned long long)last);
        /* byte ranges: one inside a moved tensor, one across the new one into the owner */
        uint8_t r1[100], r2[640];
        ckpz_span sp[2] = {{nat + 3 * ELEMS * 4 + 10, sizeof r1, r1}, {nat + 6 * ELEMS * 4 + 50, sizeof r2, r2}};
        CHECKF(a && ckpz_archive_read(ctx, a, sp, 2) == CKPZ_OK && !memcmp(r1, next + sp[0].offset, sizeof r1) &&
                   !memcmp(r2, next + sp[1].offset, sizeof r2),
               "byte ranges: %s", ckpz_ctx_message(ctx));
        ckpz_archive_close(a);
        ckpz_free(z);
    }

    /* against itself: every chunk a copy frame (32 bytes, no payload) */
    {
        size_t zl;
        uint8_t *z = compress(ctx, next, nlen, next, nlen, 1, &zl);
        ckpz_error es, er;
        restore_both(ctx, z, zl, next, nlen, out, nlen, 1, &es, &er);
        CHECK(es == CKPZ_OK && er == CKPZ_OK && !memcmp(out, next, nlen));
        size_t frames = 0, copies = 0;
        for (size_t at = 32; at + 32 <= zl; at++)
            if (!memcmp(z + at, "CKCH", 4) && crc32c(0, z + at, 28) == ld32(z + at + 28)) {
                frames++;
                copies += z[at + 19] == 3;
            }
        CHECKF(frames >= 1 && copies == frames, "against itself: %zu chunk frames, %zu copies", frames, copies);
        ckpz_free(z);
    }

    /* a base frame rewritten to name the base cut 8 bytes into the last tensor's
     * counterpart: its range in the group's image runs past the end, and no entry starts
     * past it. Every reader must refuse the file, none may crash. */
    {
        size_t zl;
        uint8_t *z = compress(ctx, next, nlen, base, blen, 1, &zl);
        size_t cut = bat + (NT - 1) * ELEMS * 4 + 8;
        CHECK(!memcmp(z + 32, "CKBS", 4));
        uint32_t body = ld32(z + 36);
        st64(z + 40, cut);
        st32(z + 48, crc32c(0, base, cut));
        st32(z + 40 + body, crc32c(0, z + 32, 8 + body));
        ckpz_error es, er;
        restore_both(ctx, z, zl, base, cut, out, nlen, 1, &es, &er);
        CHECKF(es == CKPZ_ERR_CORRUPT, "stream: %s (%s)", ckpz_error_name(es), ckpz_ctx_message(ctx));
        CHECKF(er == CKPZ_ERR_CORRUPT, "random access: %s (%s)", ckpz_error_name(er), ckpz_ctx_message(ctx));
        ckpz_free(z);
    }

    for (int i = 0; i < NT; i++) free(bd[i]), free(nd[i]);
    free(base);
    free(next);
    free(out);
    ckpz_ctx_free(ctx);
    return test_summary("test_delta_groups");
}
