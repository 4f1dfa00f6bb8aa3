/* test_units.c — unit tests of the stages under the codec: CRC-32C and the zip CRC-32
 * (known vectors, every path against the definition, combination, the zip CRC taken
 * while copying), byte-plane transforms (exact inverse, plane layout), the ordered
 * pipeline, and container records (round trip, reserved fields rejected). */
#define CKPZ_EXPERIMENTAL /* ckpz_dtype_to_double */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/dtype.h"
#include "common/pipeline.h"
#include "container/container.h"
#include "isa.h"
#include "testutil.h"
#include "transforms/planes.h"
#include "transforms/predict.h"

/* CRC from the definition, one bit at a time: reflected polynomial, init and xorout ~0. */
static uint32_t crc_ref(uint32_t poly, uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ poly : crc >> 1;
    }
    return ~crc;
}

typedef struct {
    const char *name;
    uint32_t (*crc)(uint32_t, const void *, size_t);
    uint32_t (*combine)(uint32_t, uint32_t, uint64_t);
    uint32_t poly, check; /* reflected polynomial; CRC of "123456789" */
} crc_kind;

static void test_crc(void)
{
    static const char *const isa[] = {"avx512", "avx2", "scalar"};
    static const char fox[] = "The quick brown fox jumps over the lazy dog";
    CHECK(crc32c(0, "123456789", 9) == 0xe3069283u); /* the standard check values */
    CHECK(crc32_zip(0, "123456789", 9) == 0xcbf43926u);
    CHECK(crc32c(0, fox, 43) == 0x22620404u);
    CHECK(crc32_zip(0, fox, 43) == 0x414fa339u);
    CHECK(crc32c(0, "", 0) == 0);
    CHECK(crc32_zip(0, "", 0) == 0);

    const crc_kind kinds[] = {
        {"crc32c", crc32c, crc32c_combine, 0x82f63b78u, 0xe3069283u},
        {"crc32_zip", crc32_zip, crc32_zip_combine, 0xedb88320u, 0xcbf43926u},
    };
    const size_t big = (4u << 20) + 64;
    uint8_t *buf = malloc(big);
    for (size_t i = 0; i < big; i++) buf[i] = (uint8_t)rng();
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        const crc_kind *K = &kinds[k];
        CHECKF(crc_ref(K->poly, 0, "123456789", 9) == K->check, "%s: reference", K->name);
        CHECKF(K->crc(0x12345678u, buf, 0) == 0x12345678u, "%s: empty input after data", K->name);

        /* every length 0..1100 at several misalignments, from 0 and from a running CRC,
         * on every path (VPCLMULQDQ folding; the crc32 instruction or PCLMULQDQ folding;
         * the tables), against the definition */
        static const size_t offs[] = {0, 1, 3, 8, 13, 63};
        for (int m = 0; m < 3; m++) {
            force_isa(isa[m]);
            size_t bad = 0, first_n = 0, first_off = 0;
            for (size_t o = 0; o < sizeof offs / sizeof *offs; o++)
                for (size_t n = 0; n <= 1100; n++) {
                    uint32_t init = o ? (uint32_t)(n * 0x9e3779b9u + o) : 0;
                    if (K->crc(init, buf + offs[o], n) != crc_ref(K->poly, init, buf + offs[o], n) && !bad++) {
                        first_n = n;
                        first_off = offs[o];
                    }
                }
            CHECKF(!bad, "%s with CKPZ_CPU=%s: %zu lengths wrong, first %zu at offset %zu", K->name, isa[m], bad,
                   first_n, first_off);
        }
        top_isa();

        /* incremental and combination at many split points */
        const size_t len = 100000;
        uint32_t whole = K->crc(0, buf, len);
        CHECKF(whole == crc_ref(K->poly, 0, buf, len), "%s: 100000 bytes", K->name);
        CHECKF(K->combine(whole, 0, 0) == whole && K->combine(0, whole, len) == whole, "%s: combine with empty",
               K->name);
        for (size_t c = 0;; c = c < 80 ? c + 1 : c * 5 / 4 + 13) {
            if (c > len) c = len;
            uint32_t a = K->crc(0, buf, c), b = K->crc(0, buf + c, len - c);
            CHECKF(K->crc(a, buf + c, len - c) == whole, "%s: incremental at %zu", K->name, c);
            CHECKF(K->combine(a, b, len - c) == whole, "%s: combine at %zu", K->name, c);
            if (c == len) break;
        }
        buf[5000] ^= 1;
        CHECKF(K->crc(0, buf, len) != whole, "%s: a flipped bit", K->name);
        buf[5000] ^= 1;

        /* long buffers: the same values on every path, against the definition once, and
         * combined from two parts */
        static const size_t longs[][2] = {
            {1u << 20, 0}, {(1u << 20) + 13, 3}, {(2u << 20) + 37, 1}, {(4u << 20) - 5, 7}, {4u << 20, 64}};
        for (size_t i = 0; i < sizeof longs / sizeof *longs; i++) {
            size_t n = longs[i][0];
            const uint8_t *p = buf + longs[i][1];
            uint32_t want = K->crc(0, p, n);
            for (int m = 1; m < 3; m++) {
                force_isa(isa[m]);
                CHECKF(K->crc(0, p, n) == want, "%s with CKPZ_CPU=%s: %zu bytes", K->name, isa[m], n);
            }
            top_isa();
            if (i == 1) CHECKF(want == crc_ref(K->poly, 0, p, n), "%s: %zu bytes against the definition", K->name, n);
            size_t c = n / 3 + 5;
            CHECKF(K->combine(K->crc(0, p, c), K->crc(0, p + c, n - c), n - c) == want, "%s: combine of %zu bytes",
                   K->name, n);
        }
    }
    free(buf);
}

/* crc32_zip_copy and crc32c_copy: the bytes copied (nothing written around them) and
 * the CRC of crc32_zip / crc32c, at every length 0..1100 and several misalignments of
 * both ends, on every path, and on a long buffer. */
static void test_crc_copy(void)
{
    static const char *const isa[] = {"avx512", "avx2", "scalar"};
    static const size_t offs[][2] = {{0, 0}, {1, 0}, {0, 5}, {3, 13}, {63, 1}};
    static const struct {
        const char *name;
        uint32_t poly;
        uint32_t (*copy)(uint32_t, void *, const void *, size_t);
        uint32_t (*crc)(uint32_t, const void *, size_t);
    } kinds[] = {{"crc32_zip_copy", 0xedb88320u, crc32_zip_copy, crc32_zip},
                 {"crc32c_copy", 0x82f63b78u, crc32c_copy, crc32c}};
    const size_t big = (4u << 20) + 64;
    uint8_t *src = malloc(big), *dst = malloc(big + 128);
    for (size_t i = 0; i < big; i++) src[i] = (uint8_t)rng();
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (int m = 0; m < 3; m++) {
            force_isa(isa[m]);
            size_t bad = 0, first_n = 0;
            for (size_t o = 0; o < sizeof offs / sizeof *offs; o++)
                for (size_t n = 0; n <= 1100; n++) {
                    const uint8_t *s = src + offs[o][0];
                    uint8_t *d = dst + 64 + offs[o][1];
                    memset(dst, 0xA5, n + 192);
                    uint32_t init = o ? (uint32_t)(n * 0x9e3779b9u + o) : 0;
                    int ok = kinds[k].copy(init, d, s, n) == crc_ref(kinds[k].poly, init, s, n) && !memcmp(d, s, n);
                    for (uint8_t *g = dst; ok && g < dst + n + 192; g++)
                        if ((g < d || g >= d + n) && *g != 0xA5) ok = 0;
                    if (!ok && !bad++) first_n = n;
                }
            CHECKF(!bad, "%s with CKPZ_CPU=%s: %zu cases wrong, first of %zu bytes", kinds[k].name, isa[m], bad,
                   first_n);
            size_t n = big - 7;
            memset(dst, 0, big + 128);
            CHECKF(kinds[k].copy(0x89abcdefu, dst + 1, src + 7, n) == kinds[k].crc(0x89abcdefu, src + 7, n) &&
                       !memcmp(dst + 1, src + 7, n) && dst[0] == 0 && dst[n + 1] == 0,
                   "%s with CKPZ_CPU=%s: %zu bytes", kinds[k].name, isa[m], n);
        }
    top_isa();
    free(src);
    free(dst);
}

static void test_planes(void)
{
    /* BF16 1.0 = 0x3f80: rotl1 = 0x7f00 -> plane0 0x7f (exponent), plane1 0x00 */
    uint8_t one[2] = {0x80, 0x3f}, out[2], back[2];
    uint8_t *const op2[2] = {out, out + 1};
    xf_split(XF_FLOAT, 2, one, 2, op2);
    CHECK(out[0] == 0x7f && out[1] == 0x00);
    /* -1.0 = 0xbf80: sign goes to the low bit of the last plane */
    uint8_t mone[2] = {0x80, 0xbf};
    xf_split(XF_FLOAT, 2, mone, 2, op2);
    CHECK(out[0] == 0x7f && out[1] == 0x01);
    const uint8_t *op[2] = {out, out + 1};
    xf_merge(XF_FLOAT, 2, op, 2, back);
    CHECK(!memcmp(back, mone, 2));
    /* FP32 1.0 = 0x3f800000 -> exponent plane 0x7f */
    uint8_t f1[4] = {0, 0, 0x80, 0x3f}, p4[4];
    uint8_t *const op4[4] = {p4, p4 + 1, p4 + 2, p4 + 3};
    xf_split(XF_FLOAT, 4, f1, 4, op4);
    CHECK(p4[0] == 0x7f && p4[1] == 0 && p4[2] == 0 && p4[3] == 0);

    size_t n = 10007; /* odd: a tail plane */
    uint8_t *src = malloc(n), *pl = malloc(n), *dst = malloc(n);
    for (size_t i = 0; i < n; i++) src[i] = (uint8_t)rng();
    uint8_t xfs[] = {XF_NONE, XF_FLOAT, XF_FLOAT, XF_FLOAT, XF_INT, XF_INT, XF_INT};
    uint8_t es[] = {1, 2, 4, 8, 2, 4, 8};
    for (int k = 0; k < 7; k++) {
        size_t sizes[XF_MAX_PLANES], sum = 0;
        unsigned np = xf_plane_sizes(xfs[k], es[k], n, sizes);
        CHECK(np == (es[k] == 1 ? 1u : es[k] + (n % es[k] ? 1u : 0u)));
        for (unsigned i = 0; i < np; i++) sum += sizes[i];
        CHECK(sum == n);
        {
            uint8_t *sp[XF_MAX_PLANES];
            size_t ssz[XF_MAX_PLANES], off = 0;
            unsigned snp = xf_plane_sizes(xfs[k], es[k], n, ssz);
            for (unsigned i = 0; i < snp; i++) {
                sp[i] = pl + off;
                off += ssz[i];
            }
            xf_split(xfs[k], es[k], src, n, sp);
        }
        /* against a plain reference of the documented layout */
        size_t elems = n / es[k];
        int layout_ok = 1;
        for (size_t e = 0; e < elems && xfs[k] != XF_NONE; e++) {
            uint64_t v = 0;
            for (unsigned b = 0; b < es[k]; b++) v |= (uint64_t)src[e * es[k] + b] << (8 * b);
            unsigned bits = 8u * es[k];
            if (xfs[k] == XF_FLOAT) v = ((v << 1) | (v >> (bits - 1))) & (bits == 64 ? ~0ull : ((1ull << bits) - 1));
            for (unsigned b = 0; b < es[k]; b++)
                layout_ok &= pl[b * elems + e] == (uint8_t)(v >> (8 * (es[k] - 1 - b)));
        }
        CHECKF(layout_ok, "plane layout %u/%u", xfs[k], es[k]);
        memset(dst, 0, n);
        const uint8_t *pp[XF_MAX_PLANES];
        size_t sz2[XF_MAX_PLANES], at = 0;
        unsigned np2 = xf_plane_sizes(xfs[k], es[k], n, sz2);
        for (unsigned i = 0; i < np2; i++) {
            pp[i] = pl + at;
            at += sz2[i];
        }
        xf_merge(xfs[k], es[k], pp, n, dst);
        CHECKF(!memcmp(src, dst, n), "transform %u/%u", xfs[k], es[k]);
    }
    size_t sizes[XF_MAX_PLANES];
    CHECK(xf_plane_sizes(XF_FLOAT, 3, 100, sizes) == 0);
    CHECK(xf_plane_sizes(XF_NONE, 2, 100, sizes) == 0);
    CHECK(xf_plane_sizes(7, 2, 100, sizes) == 0);
    free(src);
    free(pl);
    free(dst);
}

static void square(void *job, int worker, void *arg)
{
    (void)worker;
    (void)arg;
    long *v = job;
    for (volatile int i = 0; i < (int)(rng_state & 1023); i++) {
    } /* uneven job times */
    *v = *v * *v;
}

static void test_pipeline(void)
{
    for (int workers = 0; workers <= 4; workers++) {
        size_t depth = workers ? (size_t)workers * 2 : 1;
        pipeline *p = pipeline_create(workers, depth, square, NULL);
        CHECK(p != NULL);
        long vals[16];
        long next = 0, expect = 0;
        int ok = 1;
        for (int round = 0; round < 200; round++) {
            long *slot;
            if (pipeline_pending(p) == depth) {
                slot = pipeline_retire(p);
                ok &= *slot == expect * expect;
                expect++;
            } else {
                slot = &vals[pipeline_pending(p)];
            }
            *slot = next++;
            pipeline_submit(p, slot);
        }
        long *j;
        while ((j = pipeline_retire(p))) {
            ok &= *j == expect * expect;
            expect++;
        }
        CHECKF(ok && expect == next, "pipeline order with %d workers", workers);
        pipeline_destroy(p);
    }
    pipeline_destroy(NULL);
}

struct here_job {
    long v;
    int runs, worker; /* how often it ran, and on which worker (the last time) */
};

static void count_run(void *job, int worker, void *arg)
{
    (void)arg;
    struct here_job *h = job;
    for (volatile int i = 0; i < (int)(rng_state & 1023); i++) {
    }
    __atomic_add_fetch(&h->runs, 1, __ATOMIC_RELAXED);
    h->worker = worker;
}

/* Jobs submitted here (run at once by the caller, queued done) among queued ones: each
 * runs once, those on the caller, and every job retires in submission order, whether by
 * pipeline_retire or, when the oldest is done, by pipeline_retire_done. */
static void test_pipeline_here(void)
{
    for (int workers = 0; workers <= 3; workers++) {
        size_t depth = workers ? (size_t)workers * 3 + 2 : 1;
        pipeline *p = pipeline_create(workers, depth, count_run, NULL);
        CHECK(p != NULL);
        struct here_job jobs[64];
        struct here_job *free_jobs[64];
        size_t nfree = 0, used = 0;
        long next = 0, expect = 0;
        int ok = 1, here_on_caller = 1;
        for (int round = 0; round < 400; round++) {
            struct here_job *j;
            if (nfree) {
                j = free_jobs[--nfree];
            } else if (used < depth) {
                j = &jobs[used++];
            } else {
                j = pipeline_retire(p);
                ok &= j->v == expect++ && j->runs == 1;
            }
            *j = (struct here_job){next++, 0, -1};
            rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
            if ((rng_state >> 33) % 3 == 0) {
                pipeline_submit_here(p, j);
                here_on_caller &= j->runs == 1 && j->worker == workers;
                while ((j = pipeline_retire_done(p))) {
                    ok &= j->v == expect++ && j->runs == 1;
                    free_jobs[nfree++] = j;
                }
            } else {
                pipeline_submit(p, j);
            }
        }
        struct here_job *j;
        while ((j = pipeline_retire(p))) ok &= j->v == expect++ && j->runs == 1;
        CHECKF(ok && expect == next, "pipeline order and single runs with jobs submitted here, %d workers", workers);
        CHECKF(here_on_caller, "jobs submitted here run at once on the caller, %d workers", workers);
        CHECK(pipeline_retire_done(p) == NULL);
        pipeline_destroy(p);
    }
}

/* Reads back an index of the entries and chunks given; file_flags as a header allows. */
static ckpz_error index_roundtrip(ckpz_ctx *ctx, const ctr_entry *e, size_t ne, const ctr_chunkrec *c, size_t nc,
                                  uint64_t original, unsigned file_flags)
{
    size_t isz = ctr_index_size(e, ne, nc);
    uint8_t *ib = malloc(isz);
    ctr_index_write(ib, e, ne, c, nc);
    ctr_entry *pe;
    ctr_chunkrec *pc;
    size_t pne, pnc;
    ctx_clear(ctx);
    ckpz_error err = ctr_index_read(ctx, NULL, ib, isz, 100000, original, 1 << 20, file_flags, &pe, &pne, &pc, &pnc);
    if (!err) {
        for (size_t i = 0; i < pne; i++) ctr_entry_clear(&pe[i]);
        free(pe);
        free(pc);
    }
    free(ib);
    return err;
}

/* Packed entries (doc/format.md): the rules of a group in the index. */
static void test_packed_index(ckpz_ctx *ctx)
{
    const unsigned F = CTR_FILE_PACKED | CTR_FILE_BASED | CTR_FILE_LOSSY;
    /* bytes 0..9 opaque and 10..17 a tensor, packed; 18..29 their owner; 30..129 alone */
    ctr_entry ok[4] = {
        {.flags = CTR_ENTRY_PACKED, .offset = 0, .length = 10},
        {.dtype = 3, .flags = CTR_ENTRY_PACKED, .name = "a", .name_len = 1, .offset = 10, .length = 8},
        {.dtype = 3, .name = "b", .name_len = 1, .offset = 18, .length = 12, .nchunks = 1},
        {.dtype = 3, .name = "c", .name_len = 1, .offset = 30, .length = 100, .first_chunk = 1, .nchunks = 1}};
    ctr_chunkrec cr[3] = {{32, 30, 50}, {100, 100, 60}, {160, 0, 40}};
    ctr_entry e[4];
    CHECK(index_roundtrip(ctx, ok, 4, cr, 2, 130, F) == CKPZ_OK);
    CHECK(index_roundtrip(ctx, ok, 4, cr, 2, 130, CTR_FILE_BASED | CTR_FILE_LOSSY) == CKPZ_ERR_VERSION);
    {   /* an owner of two chunks, the first holding the group and the owner's first byte */
        ctr_chunkrec c2[3] = {{32, 19, 50}, {100, 11, 40}, {150, 100, 60}};
        memcpy(e, ok, sizeof e);
        e[2].nchunks = 2, e[3].first_chunk = 2;
        CHECK(index_roundtrip(ctx, e, 4, c2, 3, 130, F) == CKPZ_OK);
    }
    /* each case breaks one rule; all are corrupt */
    for (int k = 0; k < 9; k++) {
        memcpy(e, ok, sizeof e);
        ctr_chunkrec c[3] = {cr[0], cr[1], cr[2]};
        size_t nchunks = 2;
        switch (k) {
        case 0:
            e[1].nchunks = 1, e[2].first_chunk = 1, e[3].first_chunk = 2, nchunks = 3; /* a packed one owns one */
            c[1].raw_len = 8, c[2] = cr[1], c[0].raw_len = 22;
            break;
        case 1: e[3].flags = CTR_ENTRY_PACKED, e[3].nchunks = 0; break;          /* the last entry packed */
        case 2:
            e[2].nchunks = 2, e[3].first_chunk = 2, nchunks = 3; /* an owner of two chunks, the first */
            c[0].raw_len = 18, c[1].raw_len = 12, c[2] = cr[1];
            break;   /* holding only the group */
        case 3: c[0].raw_len = 29, c[1].raw_len = 101; break;                     /* the group's bytes differ */
        case 4: e[1].flags |= CTR_ENTRY_BASED; break;                              /* packed and based */
        case 5: e[2].flags |= CTR_ENTRY_LOSSY, e[2].lossy.mode = 1; break;         /* a lossy owner */
        case 6: e[2].flags |= CTR_ENTRY_BASED; break;                              /* a based owner */
        case 7: e[0].length = 0, e[1].offset = 0, e[1].length = 18; break;         /* an empty packed entry */
        case 8:
            e[2].length = 0, e[2].nchunks = 0, e[3].offset = 18, e[3].length = 112, e[3].first_chunk = 0; /* the */
            c[0].raw_len = 130, nchunks = 1;
            break; /* owner is an empty entry, the next owns the group: not allowed */
        }
        CHECKF(index_roundtrip(ctx, e, 4, c, nchunks, 130, F) == CKPZ_ERR_CORRUPT, "case %d: %s", k,
               ckpz_ctx_message(ctx));
    }
}

static void test_container(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    uint8_t hb[CTR_HEADER_SIZE];
    ctr_header h = {262144, CKPZ_INPUT_SAFETENSORS, 0, 0, 1, 0, 1, 0}, h2;
    ctr_header_write(hb, &h); /* what ckpz writes: version 5, feature bits */
    CHECK(ld16(hb + 8) == 5 && ld16(hb + 10) == (CTR_FEAT_PACKED | CTR_FEAT_CODED));
    CHECK(ctr_header_read(ctx, hb, &h2) == CKPZ_OK && h2.chunk_size == h.chunk_size && h2.format == h.format &&
          h2.packed && h2.coded && !h2.based && !h2.lossy && h2.version == 5);
    CHECK(ctr_file_flags(&h2) == (CTR_FILE_PACKED | CTR_FILE_CODED));
    hb[20] = 1; /* reserved byte, checksum fixed up: must still be refused */
    st32(hb + 28, crc32c(0, hb, 28));
    CHECK(ctr_header_read(ctx, hb, &h2) == CKPZ_ERR_VERSION);
    ctr_header_write(hb, &h);
    hb[13] ^= 0x10;
    CHECK(ctr_header_read(ctx, hb, &h2) == CKPZ_ERR_CHECKSUM);
    hb[0] = 'x';
    CHECK(ctr_header_read(ctx, hb, &h2) == CKPZ_ERR_NOT_CKPZ);
    /* a delta file: version 5 with the base bit (and the lossy one), then the base frame */
    ctr_header hd = {262144, CKPZ_INPUT_SAFETENSORS, 1, 0, 1, 0, 0, 0};
    ctr_header_write(hb, &hd);
    CHECK(ld16(hb + 8) == 5 && ld16(hb + 10) == 5 && ctr_header_read(ctx, hb, &h2) == CKPZ_OK && h2.based == 1);
    hd.lossy = 1;
    ctr_header_write(hb, &hd);
    CHECK(ld16(hb + 8) == 5 && ld16(hb + 10) == 7 && ctr_header_read(ctx, hb, &h2) == CKPZ_OK && h2.based && h2.lossy &&
          h2.packed);
    CHECK(ctr_file_flags(&h2) == (CTR_FILE_BASED | CTR_FILE_LOSSY | CTR_FILE_PACKED));
    hd.gbase = 1; /* feature 4: groups coded against the base */
    ctr_header_write(hb, &hd);
    CHECK(ld16(hb + 10) == 23 && ctr_header_read(ctx, hb, &h2) == CKPZ_OK && h2.gbase &&
          ctr_file_flags(&h2) == (CTR_FILE_BASED | CTR_FILE_LOSSY | CTR_FILE_PACKED | CTR_FILE_GBASE));
    /* a feature this reader does not know is named, and is "newer", not "corrupt" */
    for (unsigned bit = 5; bit < 16; bit++) {
        st16(hb + 10, (uint16_t)(1u << bit | 1u));
        st32(hb + 28, crc32c(0, hb, 28));
        char want[64];
        snprintf(want, sizeof want, "feature %u,", bit);
        ctx_clear(ctx); /* a context keeps its first message */
        CHECKF(ctr_header_read(ctx, hb, &h2) == CKPZ_ERR_VERSION && strstr(ckpz_ctx_message(ctx), want) &&
                   strstr(ckpz_ctx_message(ctx), "newer ckpz"),
               "bit %u: %s", bit, ckpz_ctx_message(ctx));
    }
    st16(hb + 10, 0); /* version 5 without any feature: a plain stand-alone file */
    st32(hb + 28, crc32c(0, hb, 28));
    CHECK(ctr_header_read(ctx, hb, &h2) == CKPZ_OK && !h2.based && !h2.lossy && !h2.packed && !h2.coded);
    /* versions 1 to 4, as earlier ckpz wrote them: their flags as each version defines them */
    static const struct {
        uint16_t v, flags;
        int ok, based, lossy;
    } old[] = {
        {1, 0, 1, 0, 0}, {1, 1, 0, 0, 0}, {1, 4, 0, 0, 0}, /* version 1: no flags */
        {2, 1, 1, 1, 0}, {2, 0, 0, 0, 0}, {2, 3, 0, 0, 0}, /* version 2: exactly "a base" */
        {3, 2, 1, 0, 1}, {3, 3, 1, 1, 1}, {3, 1, 0, 0, 0}, {3, 6, 0, 0, 0}, /* 3: lossy, maybe a base */
        {4, 1, 1, 1, 0}, {4, 3, 1, 1, 1}, {4, 2, 0, 0, 0}, {4, 5, 0, 0, 0}, /* 4: a base, maybe lossy */
        {6, 0, 0, 0, 0}, {0, 0, 0, 0, 0},                                   /* versions after and before */
    };
    for (size_t i = 0; i < sizeof old / sizeof *old; i++) {
        ctr_header_write(hb, &h);
        st16(hb + 8, old[i].v);
        st16(hb + 10, old[i].flags);
        st32(hb + 28, crc32c(0, hb, 28));
        ckpz_error e = ctr_header_read(ctx, hb, &h2);
        CHECK(old[i].ok ? e == CKPZ_OK && h2.based == old[i].based && h2.lossy == old[i].lossy && !h2.packed &&
                              h2.version == old[i].v
                        : e == CKPZ_ERR_VERSION);
    }
    {
        ctr_base b = {123456789, 0xdeadbeef, 3, 9, "step9.pt"}, b2;
        uint8_t bf[12 + CTR_BASE_FIXED + 16];
        size_t used;
        b.name_len = 8;
        ctr_base_frame_write(bf, &b);
        CHECK(ctr_base_frame_size(&b) == 40);
        CHECK(ctr_base_frame_read(ctx, bf, sizeof bf, &b2, &used) == CKPZ_OK && used == 40 && b2.size == b.size &&
              b2.crc == b.crc && b2.depth == 3 && !strcmp(b2.name, "step9.pt"));
        CHECK(ctr_base_frame_read(ctx, bf, 39, &b2, &used) == CKPZ_ERR_TRUNCATED);
        bf[20] ^= 1;
        CHECK(ctr_base_frame_read(ctx, bf, sizeof bf, &b2, &used) == CKPZ_ERR_CHECKSUM);
        bf[20] ^= 1;
        st32(bf + 20, 0); /* depth 0 is not a delta */
        st32(bf + 36, crc32c(0, bf, 36));
        CHECK(ctr_base_frame_read(ctx, bf, sizeof bf, &b2, &used) == CKPZ_ERR_CORRUPT);
    }

    uint8_t fb[CTR_FRAME_SIZE];
    ctr_chunk c = {.entry = 3,
                   .raw_len = 65536,
                   .payload_len = 40000,
                   .xf = 1,
                   .esize = 2,
                   .nplanes = 2,
                   .raw_crc = 0x1234,
                   .payload_crc = 0x5678},
              c2;
    ctr_chunk_write(fb, &c);
    CHECK(ctr_chunk_read(ctx, fb, 65536, 70000, "chunk 0", &c2) == CKPZ_OK && !memcmp(&c, &c2, sizeof c));
    CHECK(ctr_chunk_read(ctx, fb, 32768, 70000, "chunk 0", &c2) == CKPZ_ERR_CORRUPT);  /* raw > chunk size */
    CHECK(ctr_chunk_read(ctx, fb, 65536, 30000, "chunk 0", &c2) == CKPZ_ERR_CORRUPT);  /* payload > bound */
    fb[19] = 9; /* an unknown predictor */
    st32(fb + 28, crc32c(0, fb, 28));
    CHECK(ctr_chunk_read(ctx, fb, 65536, 70000, "chunk 0", &c2) == CKPZ_ERR_VERSION);
    /* a copy frame may cover more than a chunk, but carries nothing */
    chunk_copy_frame(5, 3u << 20, 0xabcd, fb);
    CHECK(ctr_chunk_read(ctx, fb, 65536, 70000, "chunk 0", &c2) == CKPZ_OK && c2.pred == PRED_COPY &&
          c2.raw_len == 3u << 20 && c2.payload_len == 0 && c2.entry == 5);
    fb[18] = 1; /* with a plane */
    st32(fb + 28, crc32c(0, fb, 28));
    CHECK(ctr_chunk_read(ctx, fb, 65536, 70000, "chunk 0", &c2) == CKPZ_ERR_CORRUPT);

    /* index round trip and consistency checks */
    uint64_t shape[2] = {4, 8};
    ctr_entry e[2] = {{.name = "", .length = 100, .nchunks = 1},
                      {.dtype = 1,
                       .name_len = 1,
                       .ndim = 2,
                       .name = "w",
                       .shape = shape,
                       .offset = 100,
                       .length = 64,
                       .first_chunk = 1,
                       .nchunks = 1}};
    ctr_chunkrec cr[2] = {{32, 100, 50}, {100, 64, 60}};
    size_t isz = ctr_index_size(e, 2, 2);
    uint8_t *ib = malloc(isz);
    ctr_index_write(ib, e, 2, cr, 2);
    ctr_entry *pe;
    ctr_chunkrec *pc;
    size_t ne, nc;
    CHECK(ctr_index_read(ctx, NULL, ib, isz, 1000, 164, 1 << 20, 0, &pe, &ne, &pc, &nc) == CKPZ_OK);
    CHECK(ne == 2 && nc == 2 && !strcmp(pe[1].name, "w") && pe[1].shape[1] == 8 && pc[1].frame_offset == 100);
    for (size_t i = 0; i < ne; i++) ctr_entry_clear(&pe[i]);
    free(pe);
    free(pc);
    CHECK(ctr_index_read(ctx, NULL, ib, isz, 1000, 165, 1 << 20, 0, &pe, &ne, &pc, &nc) == CKPZ_ERR_CORRUPT); /* size */
    CHECK(ctr_index_read(ctx, NULL, ib, isz, 120, 164, 1 << 20, 0, &pe, &ne, &pc, &nc) ==
          CKPZ_ERR_CORRUPT); /* frame past index */
    st64(ib + 8, 1ull << 40); /* entry count */
    CHECK(ctr_index_read(ctx, NULL, ib, isz, 1000, 164, 1 << 20, 0, &pe, &ne, &pc, &nc) == CKPZ_ERR_CORRUPT);
    free(ib);
    test_packed_index(ctx);

    uint8_t tb[CTR_TRAILER_SIZE];
    ctr_trailer t = {500, 460, 12345, 1, 2}, t2;
    ctr_trailer_write(tb, &t);
    CHECK(ctr_trailer_read(ctx, tb, 1000, &t2) == CKPZ_OK && t2.original_size == 12345);
    CHECK(ctr_trailer_read(ctx, tb, 1001, &t2) == CKPZ_ERR_CORRUPT);
    tb[3] ^= 1;
    CHECK(ctr_trailer_read(ctx, tb, 1000, &t2) == CKPZ_ERR_CHECKSUM);
    ckpz_ctx_free(ctx);
}

/* The dtype table (lib/common/dtype.c): names in every naming round trip, each row's bit
 * layout adds up, and the values against independent definitions: the compiler's
 * _Float16 and float for every 16-bit pattern, known FP8 values, integers. */
static double to_d(ckpz_dtype t, uint64_t bits)
{
    uint8_t b[8];
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(bits >> (8 * k));
    return dtype_get(t)->to_double(b);
}

static uint64_t from_d(ckpz_dtype t, double v)
{
    uint8_t b[8] = {0};
    dtype_get(t)->from_double(b, v);
    uint64_t u = 0;
    for (int k = 0; k < 8; k++) u |= (uint64_t)b[k] << (8 * k);
    return u;
}

static int same_value(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

static void test_dtypes(void)
{
    CHECK(ckpz_dtype_from_name("bf16") == CKPZ_DTYPE_BF16);
    CHECK(ckpz_dtype_from_name("Float32") == CKPZ_DTYPE_F32);
    CHECK(ckpz_dtype_from_name("nonsense") == CKPZ_DTYPE_NONE);
    CHECK(ckpz_dtype_size(CKPZ_DTYPE_F64) == 8 && ckpz_dtype_size(CKPZ_DTYPE_BF16) == 2);
    CHECK(ckpz_dtype_name(CKPZ_DTYPE_COUNT_) == NULL);
    CHECK(!strcmp(ckpz_error_name(CKPZ_ERR_CHECKSUM), "checksum mismatch"));
    CHECK(!strcmp(ckpz_dtype_format_name(CKPZ_DTYPE_BF16, CKPZ_INPUT_SAFETENSORS), "BF16"));
    CHECK(!strcmp(ckpz_dtype_format_name(CKPZ_DTYPE_F32, CKPZ_INPUT_NPY), "<f4"));
    CHECK(!strcmp(ckpz_dtype_format_name(CKPZ_DTYPE_F32, CKPZ_INPUT_TORCH), "FloatStorage"));
    CHECK(!strcmp(ckpz_dtype_format_name(CKPZ_DTYPE_F8E5M2, CKPZ_INPUT_RAW), "f8e5m2"));
    CHECK(ckpz_dtype_format_name(CKPZ_DTYPE_U16, CKPZ_INPUT_TORCH) == NULL);
    CHECK(ckpz_dtype_format_name(CKPZ_DTYPE_NONE, CKPZ_INPUT_SAFETENSORS) == NULL);
    CHECK(dtype_find(DT_NAMES_TORCH, "UntypedStorage", 14) == CKPZ_DTYPE_U8);
    CHECK(dtype_find(DT_NAMES_NUMPY, "|V2", 3) == CKPZ_DTYPE_BF16);
    CHECK(dtype_find(DT_NAMES_SAFETENSORS, "BF1", 3) == CKPZ_DTYPE_COUNT_);
    CHECK(dtype_find(DT_NAMES_SAFETENSORS, "bf16", 4) == CKPZ_DTYPE_COUNT_); /* case matters there */
    static const ckpz_input_format fmts[] = {CKPZ_INPUT_SAFETENSORS, CKPZ_INPUT_NPY, CKPZ_INPUT_TORCH, CKPZ_INPUT_RAW};
    static const enum dt_naming namings[] = {DT_NAMES_SAFETENSORS, DT_NAMES_NUMPY, DT_NAMES_TORCH, DT_NAMES_CKPZ};
    for (int t = 1; t < CKPZ_DTYPE_COUNT_; t++) {
        const dtype_info *d = dtype_get((ckpz_dtype)t);
        CHECKF(ckpz_dtype_from_name(ckpz_dtype_name((ckpz_dtype)t)) == (ckpz_dtype)t, "dtype %d", t);
        for (int a = 0; a < 4 && d->aliases[a]; a++)
            CHECKF(ckpz_dtype_from_name(d->aliases[a]) == (ckpz_dtype)t, "alias %s", d->aliases[a]);
        for (int f = 0; f < 4; f++) { /* each format's name finds its type back */
            const char *n = ckpz_dtype_format_name((ckpz_dtype)t, fmts[f]);
            CHECKF(!n || dtype_find(namings[f], n, strlen(n)) == (ckpz_dtype)t, "dtype %d format %d", t, f);
        }
        CHECKF(d->size >= 1 && d->size <= 8 && d->to_double, "dtype %d: size, value", t);
        CHECKF((d->layout == DT_LAYOUT_BYTES) == (d->size == 1), "dtype %d: layout of its size", t);
        if (d->cls == DT_FLOAT) {
            CHECKF(1u + d->ebits + d->mbits == 8 * d->size, "%s: sign, exponent and mantissa bits", d->name);
            CHECKF(d->exp_planes == (d->ebits + 7u) / 8, "%s: exponent planes", d->name);
            CHECKF((d->from_double != NULL) == (d->size >= 2), "%s: from_double", d->name);
        } else {
            CHECKF(d->exp_planes == 0 && d->ebits == 0 && !d->from_double, "%s: not a float", d->name);
        }
    }
    /* ckpz_dtype_to_double: the table's values, element by element; refusals */
    {
        const uint8_t b[8] = {0x80, 0x3f, 0x00, 0xc0, 0xff, 0x7f, 0x01, 0x00}; /* bf16 1, -2, NaN, tiny */
        double d[4];
        CHECK(ckpz_dtype_to_double(CKPZ_DTYPE_BF16, b, 4, d) == CKPZ_OK && d[0] == 1.0 && d[1] == -2.0 && isnan(d[2]) &&
              d[3] == ldexp(1, -133));
        CHECK(ckpz_dtype_to_double(CKPZ_DTYPE_I16, b, 4, d) == CKPZ_OK && d[0] == 16256 && d[1] == -16384 &&
              d[2] == 32767 && d[3] == 1);
        CHECK(ckpz_dtype_to_double(CKPZ_DTYPE_F8E4M3, b + 4, 1, d) == CKPZ_OK && isnan(d[0])); /* S.1111.111 */
        CHECK(ckpz_dtype_to_double(CKPZ_DTYPE_COUNT_, b, 1, d) == CKPZ_ERR_PARAM);
        CHECK(ckpz_dtype_to_double(CKPZ_DTYPE_F32, NULL, 1, d) == CKPZ_ERR_PARAM);
        CHECK(ckpz_dtype_to_double(CKPZ_DTYPE_F32, NULL, 0, NULL) == CKPZ_OK);
    }
    CHECK(dtype_b32(dtype_get(CKPZ_DTYPE_F32)) == 4 && dtype_b32(dtype_get(CKPZ_DTYPE_BF16)) == 2 &&
          dtype_b32(dtype_get(CKPZ_DTYPE_F16)) == 0 && dtype_b32(dtype_get(CKPZ_DTYPE_I32)) == 0);

    /* every bf16 and f16 pattern; random f32 and f64 ones */
    size_t bad16 = 0, badh = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t w = h << 16;
        float f;
        memcpy(&f, &w, 4);
        bad16 += !same_value(to_d(CKPZ_DTYPE_BF16, h), f) || (!isnan(f) && from_d(CKPZ_DTYPE_BF16, f) != h);
#ifdef __FLT16_MAX__
        _Float16 x;
        uint16_t h16 = (uint16_t)h;
        memcpy(&x, &h16, 2);
        badh += !same_value(to_d(CKPZ_DTYPE_F16, h), (double)x) || (!isnan(x) && from_d(CKPZ_DTYPE_F16, x) != h);
#else
        double v = to_d(CKPZ_DTYPE_F16, h);
        badh += !isnan(v) && from_d(CKPZ_DTYPE_F16, v) != h;
#endif
    }
    CHECKF(!bad16 && !badh, "%zu bf16 and %zu f16 patterns wrong", bad16, badh);
    size_t badr = 0;
    for (int i = 0; i < 100000; i++) {
        uint64_t u = rng();
        float f;
        double g;
        uint32_t u32 = (uint32_t)u;
        memcpy(&f, &u32, 4);
        memcpy(&g, &u, 8);
        badr += !same_value(to_d(CKPZ_DTYPE_F32, u32), f) || (!isnan(f) && from_d(CKPZ_DTYPE_F32, f) != u32);
        badr += !same_value(to_d(CKPZ_DTYPE_F64, u), g) || (!isnan(g) && from_d(CKPZ_DTYPE_F64, g) != u);
#ifdef __FLT16_MAX__
        double v = (double)(int64_t)(u >> 8) * 0x1p-40; /* rounding through float, then half */
        _Float16 x = (_Float16)(float)v;
        uint16_t want;
        memcpy(&want, &x, 2);
        badr += from_d(CKPZ_DTYPE_F16, v) != want;
#endif
        double b = (double)(int64_t)u * 0x1p-70;
        float fb = (float)b;
        uint32_t fbu;
        memcpy(&fbu, &fb, 4);
        uint32_t want_bf = (fbu + 0x7fffu + ((fbu >> 16) & 1u)) >> 16; /* to nearest, ties to even */
        badr += from_d(CKPZ_DTYPE_BF16, b) != want_bf;
    }
    CHECKF(!badr, "%zu f32/f64/f16/bf16 values wrong", badr);
    CHECK(from_d(CKPZ_DTYPE_BF16, NAN) == 0x7fc0 && from_d(CKPZ_DTYPE_F16, INFINITY) == 0x7c00 &&
          from_d(CKPZ_DTYPE_F16, 65520.0) == 0x7c00 && from_d(CKPZ_DTYPE_F16, 65519.0) == 0x7bff);

    /* FP8: e4m3fn has no infinities, its only NaNs are S.1111.111 */
    static const struct {
        ckpz_dtype t;
        uint8_t b;
        double v;
    } f8[] = {
        {CKPZ_DTYPE_F8E4M3, 0x00, 0.0},     {CKPZ_DTYPE_F8E4M3, 0x01, 0x1p-9},    {CKPZ_DTYPE_F8E4M3, 0x07, 7 * 0x1p-9},
        {CKPZ_DTYPE_F8E4M3, 0x08, 0x1p-6},  {CKPZ_DTYPE_F8E4M3, 0x38, 1.0},       {CKPZ_DTYPE_F8E4M3, 0x78, 256.0},
        {CKPZ_DTYPE_F8E4M3, 0x7e, 448.0},   {CKPZ_DTYPE_F8E4M3, 0x7f, NAN},       {CKPZ_DTYPE_F8E4M3, 0xfe, -448.0},
        {CKPZ_DTYPE_F8E4M3, 0xff, NAN},     {CKPZ_DTYPE_F8E4M3, 0x80, -0.0},      {CKPZ_DTYPE_F8E5M2, 0x3c, 1.0},
        {CKPZ_DTYPE_F8E5M2, 0x01, 0x1p-16}, {CKPZ_DTYPE_F8E5M2, 0x7b, 57344.0},   {CKPZ_DTYPE_F8E5M2, 0x7c, INFINITY},
        {CKPZ_DTYPE_F8E5M2, 0x7d, NAN},     {CKPZ_DTYPE_F8E5M2, 0xfc, -INFINITY}, {CKPZ_DTYPE_F8E5M2, 0xc0, -2.0},
    };
    for (size_t i = 0; i < sizeof f8 / sizeof *f8; i++)
        CHECKF(same_value(to_d(f8[i].t, f8[i].b), f8[i].v), "%s 0x%02x: %g, not %g", ckpz_dtype_name(f8[i].t), f8[i].b,
               to_d(f8[i].t, f8[i].b), f8[i].v);
    CHECK(to_d(CKPZ_DTYPE_I8, 0x80) == -128 && to_d(CKPZ_DTYPE_U8, 0x80) == 128 && to_d(CKPZ_DTYPE_BOOL, 1) == 1);
    CHECK(to_d(CKPZ_DTYPE_I16, 0xffff) == -1 && to_d(CKPZ_DTYPE_U16, 0xffff) == 65535);
    CHECK(to_d(CKPZ_DTYPE_I32, 0x80000000u) == -2147483648.0 && to_d(CKPZ_DTYPE_U32, 0xffffffffu) == 4294967295.0);
    CHECK(to_d(CKPZ_DTYPE_I64, ~0ull) == -1 && to_d(CKPZ_DTYPE_U64, ~0ull) == 18446744073709551615.0);
    CHECK(to_d(CKPZ_DTYPE_NONE, 0xab) == 0xab);
}

int main(void)
{
    test_crc();
    test_crc_copy();
    test_planes();
    test_pipeline();
    test_pipeline_here();
    test_container();
    test_dtypes();
    return test_summary("test_units");
}
