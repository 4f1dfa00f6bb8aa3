/* test_io_lend.c — compression into room a sink lends (ckpz_lend_fn, ckpz_experimental.h):
 * every way a sink takes frames gives the bytes of a sink that lends nothing, byte for
 * byte. A sink that refuses every lend; one that lends poisoned room, declining some,
 * on one thread and three (each room written back once, with at most the bytes asked
 * for); one that lends only its next bytes (CKPZ_LEND_NEXT: asked on one thread, never
 * on three; a lender of the size before flags came lends, one of an unknown size never
 * is asked); a memory sink of each kind of room (a caller's buffer, grown, counting past
 * its buffer), whose lent room is its own bytes; the fd sink written behind by the
 * library's pump on a regular file; a restore into a memory sink, now lent too; and
 * restores into a lending sink (each room written back with its size; copy frames ask
 * for none; a corrupt chunk mid-stream fails with room lent and never written back). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CKPZ_EXPERIMENTAL /* ckpz_lender, ckpz_mem_lend */
#include "ckpz.h"
#include "testutil.h"

/* A sink whose writes land in m; lend: NULL for "refuses", else poisoned malloc'd room
 * declined every third time; over / wrong count rooms written back with more than / other
 * than the bytes lent. */
typedef struct lender_sink {
    ckpz_mem m;
    unsigned char *lent[64];
    size_t size[64], n;
    int asked, granted, back, over, wrong, refuse;
} lender_sink;

static void *ls_lend(void *o, size_t n)
{
    lender_sink *l = o;
    l->asked++;
    if (l->refuse || l->asked % 3 == 0 || l->n == 64) return NULL;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) return NULL;
    memset(b, 0xa5, n);
    l->lent[l->n] = b;
    l->size[l->n++] = n;
    l->granted++;
    return b;
}

static int ls_write(void *o, const void *buf, size_t n)
{
    lender_sink *l = o;
    for (size_t i = 0; i < l->n; i++)
        if (l->lent[i] == buf) {
            l->back++;
            l->over += n > l->size[i]; /* the caller commits m <= n */
            l->wrong += n != l->size[i];
            int r = ckpz_mem_write(&l->m, buf, n);
            free(l->lent[i]);
            l->lent[i] = l->lent[--l->n];
            l->size[i] = l->size[l->n];
            return r;
        }
    return ckpz_mem_write(&l->m, buf, n);
}

/* A plain sink: a write callback the library does not know, so nothing is lent. */
static int plain_write(void *o, const void *buf, size_t n) { return ckpz_mem_write(o, buf, n); }

/* BF16-like values with tensors of several sizes (a safetensors-shaped raw input is not
 * needed: raw BF16 of 5 MiB and a small tail, in 512 KiB chunks). */
static uint8_t *values(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n);
    uint32_t x = seed;
    for (size_t i = 0; i + 1 < n; i += 2) {
        x = x * 1103515245u + 12345u;
        float v = (float)((int)(x >> 16 & 0x7fff) - 16384) / 16384.0f * 0.02f;
        uint32_t b;
        memcpy(&b, &v, 4);
        p[i] = (uint8_t)(b >> 16);
        p[i + 1] = (uint8_t)(b >> 24);
    }
    return p;
}

static void params(ckpz_params *p, int threads)
{
    ckpz_params_init(p);
    p->format = CKPZ_INPUT_RAW;
    p->raw_dtype = CKPZ_DTYPE_BF16;
    p->chunk_size = 512u << 10;
    p->threads = threads;
}

/* Compresses src into sink k; CKPZ_OK or the error. */
static ckpz_error squeeze(const uint8_t *src, size_t n, int threads, ckpz_sink *k)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    params(&p, threads);
    ckpz_mem in = {.data = (void *)src, .size = n};
    ckpz_source s;
    ckpz_source_mem(&s, &in);
    ckpz_error e = ckpz_compress_io(ctx, &p, &s, k, NULL);
    ckpz_ctx_free(ctx);
    return e;
}

/* Through a ckpz_lender: the same bytes as ref; what the lender saw in *l. */
static void via_lender(const uint8_t *src, size_t n, int threads, unsigned flags, int refuse, const ckpz_mem *ref,
                       lender_sink *l)
{
    memset(l, 0, sizeof *l);
    l->m.grow = 1;
    l->refuse = refuse;
    ckpz_lender lender = {sizeof lender, ls_write, NULL, l, ls_lend, flags};
    if (refuse == 2) lender.struct_size = offsetof(ckpz_lender, flags); /* before flags came: 0 */
    if (refuse == 3) lender.struct_size = sizeof lender + 8;           /* unknown: no lending */
    l->refuse = refuse == 1;
    ckpz_sink k;
    ckpz_sink_lender(&k, &lender);
    CHECK(squeeze(src, n, threads, &k) == CKPZ_OK);
    CHECK(l->m.size == ref->size && !memcmp(l->m.data, ref->data, ref->size));
    CHECK(l->back == l->granted && l->n == 0 && l->over == 0);
    free(l->m.data);
}

static void test_lent_compression(void)
{
    size_t n = (5u << 20) + 1234;
    uint8_t *src = values(n, 12345);
    for (int t = 1; t <= 3; t += 2) {
        ckpz_mem ref = {.grow = 1};
        ckpz_sink k;
        ckpz_sink_init(&k);
        k.write = plain_write;
        k.opaque = &ref;
        CHECK(squeeze(src, n, t, &k) == CKPZ_OK && ref.size > 0 && ref.size < n);
        lender_sink l;
        via_lender(src, n, t, 0, 1, &ref, &l); /* refuses every lend */
        CHECK(l.asked >= 10 && l.granted == 0);
        via_lender(src, n, t, 0, 0, &ref, &l); /* lends, declines every third */
        CHECK(l.granted >= 6 && l.asked > l.granted);
        via_lender(src, n, t, CKPZ_LEND_NEXT, 0, &ref, &l); /* its next bytes: in turn only */
        CHECK(t == 1 ? l.granted >= 6 : l.asked == 0);
        via_lender(src, n, t, CKPZ_LEND_NEXT, 2, &ref, &l); /* the older size: flags 0 */
        CHECK(l.granted >= 6);
        via_lender(src, n, t, 0, 3, &ref, &l);
        CHECK(l.asked == 0);
        /* a memory sink of each kind: a buffer of the caller's, grown, counting past it */
        ckpz_mem grown = {.grow = 1};
        ckpz_sink_mem(&k, &grown);
        CHECK(squeeze(src, n, t, &k) == CKPZ_OK && grown.size == ref.size && !memcmp(grown.data, ref.data, ref.size));
        /* exactly the output's size: the last frames are lent only where their bound fits
         * (under ASan, a frame coded past its room would show) */
        uint8_t *exact = malloc(ref.size);
        ckpz_mem tight = {.data = exact, .capacity = ref.size};
        ckpz_sink_mem(&k, &tight);
        CHECK(squeeze(src, n, t, &k) == CKPZ_OK && tight.size == ref.size && !memcmp(exact, ref.data, ref.size));
        free(exact);
        uint8_t *buf = malloc(ref.size + 100);
        ckpz_mem fixed = {.data = buf, .capacity = ref.size + 100};
        ckpz_sink_mem(&k, &fixed);
        CHECK(squeeze(src, n, t, &k) == CKPZ_OK && fixed.size == ref.size && !memcmp(buf, ref.data, ref.size));
        /* kept up to half the output, counted past it: the lends stop where room ends */
        ckpz_mem counted = {.data = buf, .capacity = ref.size / 2, .limit = 2 * ref.size};
        memset(buf + ref.size / 2, 0x5a, ref.size + 100 - ref.size / 2);
        ckpz_sink_mem(&k, &counted);
        CHECK(squeeze(src, n, t, &k) == CKPZ_OK && counted.size == ref.size && !counted.full);
        CHECK(!memcmp(buf, ref.data, ref.size / 2));
        size_t past = ref.size / 2;
        while (past < ref.size + 100 && buf[past] == 0x5a) past++;
        CHECK(past == ref.size + 100); /* nothing written past the buffer's capacity */
        free(buf);
        free(grown.data);
        free(ref.data);
    }
    free(src);
}

/* The fd sink over a regular file, written behind by the library's pump at one thread
 * (its buffers lent to the encoder), and a restore into a memory sink (lent in turn):
 * the plain sink's bytes. */
static void test_fd_and_restore(void)
{
    size_t n = (9u << 20) + 77;
    uint8_t *src = values(n, 12345);
    ckpz_mem ref = {.grow = 1};
    ckpz_sink k;
    ckpz_sink_init(&k);
    k.write = plain_write;
    k.opaque = &ref;
    CHECK(squeeze(src, n, 1, &k) == CKPZ_OK);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        ckpz_fd fd = {fileno(f), 0, 0};
        ckpz_sink_fd(&k, &fd);
        CHECK(squeeze(src, n, 1, &k) == CKPZ_OK && fd.bytes == ref.size && fd.error == 0);
        uint8_t *back = malloc(ref.size + 1);
        CHECK(back && pread(fileno(f), back, ref.size + 1, 0) == (ssize_t)ref.size);
        CHECK(back && !memcmp(back, ref.data, ref.size));
        free(back);
        fclose(f);
    }
    for (int t = 1; t <= 2; t++) {
        ckpz_ctx *ctx = ckpz_ctx_create();
        ckpz_params p;
        params(&p, t);
        p.format = CKPZ_INPUT_AUTO;
        ckpz_mem z = ref, out = {.grow = 1};
        z.pos = 0;
        ckpz_source s;
        ckpz_source_mem(&s, &z);
        ckpz_sink_mem(&k, &out);
        CHECK(ckpz_decompress_io(ctx, &p, &s, &k, NULL) == CKPZ_OK);
        CHECK(out.size == n && !memcmp(out.data, src, n));
        free(out.data);
        ckpz_ctx_free(ctx);
    }
    /* ckpz_mem_lend itself: room past the bytes, none where a buffer cannot hold n */
    uint8_t small[64];
    ckpz_mem m = {.data = small, .capacity = sizeof small};
    CHECK(ckpz_mem_write(&m, "ab", 2) == 0);
    uint8_t *r = ckpz_mem_lend(&m, 10);
    CHECK(r == small + 2 && ckpz_mem_lend(&m, 63) == NULL && !m.full);
    ckpz_mem c = {.data = small, .capacity = 8, .limit = 1000}; /* counts past 8 bytes */
    CHECK(ckpz_mem_lend(&c, 8) == small && ckpz_mem_lend(&c, 9) == NULL && !c.full);
    if (r) memcpy(r, "cdef", 4);
    CHECK(ckpz_mem_write(&m, r, 4) == 0 && m.size == 6 && !memcmp(small, "abcdef", 6));
    free(ref.data);
    free(src);
}

/* The restore of z into a lending sink: its error; the bytes in l->m. */
static ckpz_error lent_restore(const ckpz_mem *z, const uint8_t *base, size_t bn, int threads, lender_sink *l)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = threads;
    p.base = base;
    p.base_size = bn;
    ckpz_mem in = *z;
    in.pos = 0;
    memset(l, 0, sizeof *l);
    l->m.grow = 1;
    ckpz_lender lender = {sizeof lender, ls_write, NULL, l, ls_lend, 0};
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &in);
    ckpz_sink_lender(&k, &lender);
    ckpz_error e = ckpz_decompress_io(ctx, &p, &s, &k, NULL);
    ckpz_ctx_free(ctx);
    for (size_t i = 0; i < l->n; i++) free(l->lent[i]); /* a failed call's: the sink's to reclaim */
    return e;
}

/* Chunks decoded into a lending sink's room: the same bytes as into a plain sink, on one
 * thread and three; a copy frame (the base's bytes) never asks for room; every room
 * granted comes back by a write of its size; a corrupt chunk mid-stream fails the call
 * with room lent and never written back. */
static void test_lending_sink(void)
{
    size_t n = 6u << 20;
    uint8_t *base = values(n, 1), *src = values(n, 2);
    for (size_t i = 0; i < n; i += 2) /* seven values in eight as in the base */
        if (rng() % 8) memcpy(src + i, base + i, 2);
    memcpy(src, base, 1u << 20); /* copy frames */
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_BF16;
    p.chunk_size = 256u << 10;
    p.base = base;
    p.base_size = n;
    ckpz_mem m = {.data = src, .size = n}, z = {.grow = 1};
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &m);
    ckpz_sink_mem(&k, &z);
    ckpz_stats st = {.struct_size = sizeof st};
    CHECK(ckpz_compress_io(ctx, &p, &s, &k, &st) == CKPZ_OK);
    p.format = CKPZ_INPUT_AUTO;
    uint8_t *plain = malloc(n);
    CHECK(plain && ckpz_decompress_buffer(ctx, &p, z.data, z.size, plain, n) == CKPZ_OK && !memcmp(plain, src, n));
    for (int t = 1; t <= 3; t += 2) {
        lender_sink l;
        CHECK(lent_restore(&z, base, n, t, &l) == CKPZ_OK);
        CHECK(l.m.size == n && !memcmp(l.m.data, plain, n));
        CHECK(l.granted > 8 && l.back == l.granted && l.wrong == 0 && l.n == 0);
        CHECK(l.asked < (int)st.chunks); /* none for the copy frames */
        free(l.m.data);
    }
    /* a byte of a chunk's payload in the middle of the stream flipped */
    ((uint8_t *)z.data)[z.size / 2] ^= 0x10;
    lender_sink l;
    ckpz_error e = lent_restore(&z, base, n, 3, &l);
    CHECK(e == CKPZ_ERR_CHECKSUM || e == CKPZ_ERR_CORRUPT);
    CHECK(l.granted > 0 && l.m.size < n);
    free(l.m.data);
    ckpz_ctx_free(ctx);
    free(z.data);
    free(plain);
    free(src);
    free(base);
}

int main(void)
{
    test_lent_compression();
    test_fd_and_restore();
    test_lending_sink();
    return test_summary("test_io_lend");
}
