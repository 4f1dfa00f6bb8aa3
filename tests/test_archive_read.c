/* test_archive_read.c — ckpz_archive_read through the public API: byte ranges of the
 * original decoded into the caller's memory must equal the original (or, for a lossy
 * file, the whole-file restore) for whole entries, the whole file, and many random
 * spans at once in any order (crossing chunk and entry boundaries, inside one chunk,
 * empty, repeated), at one, two and four threads; a delta file reads with its base and
 * fails without it only for the entries coded against it; bad spans fail before
 * anything is read; a damaged chunk or a failing read fails naming the chunk and tensor
 * while spans that avoid it still read; progress reports every chunk and can abort. */
#include <stdlib.h>
#include <string.h>

#define CKPZ_DISABLE_DEPRECATE_WARNINGS /* checks that the deprecated params fields still work */
#include "ckpz.h"
#include "memfile.h"
#include "testutil.h"

#define CHUNK CKPZ_CHUNK_MIN

typedef struct {
    const char *name, *dtype;
    ckpz_dtype t;
    size_t rows, cols;
} tdesc;

/* A smooth random walk (what trained weights look like to the coder) in dtype t. */
static void fill(uint8_t *d, size_t n, ckpz_dtype t)
{
    double x = 0;
    for (size_t i = 0; i < n; i++) {
        x += rng_normal() * 0.01;
        if (x > 1 || x < -1) x *= 0.5;
        float f = (float)x;
        uint32_t fb;
        memcpy(&fb, &f, 4);
        switch (t) {
        case CKPZ_DTYPE_F32: memcpy(d + 4 * i, &f, 4); break;
        case CKPZ_DTYPE_F64: memcpy(d + 8 * i, &x, 8); break;
        case CKPZ_DTYPE_BF16: {
            uint16_t h = (uint16_t)(fb >> 16);
            memcpy(d + 2 * i, &h, 2);
            break;
        }
        case CKPZ_DTYPE_F16: { /* |x| <= 1: normal or flushed to zero */
            int ex = (int)((fb >> 23) & 0xff) - 112;
            uint16_t h = (uint16_t)(((fb >> 16) & 0x8000) | (ex > 0 ? ((unsigned)ex << 10) | ((fb >> 13) & 0x3ff) : 0));
            memcpy(d + 2 * i, &h, 2);
            break;
        }
        default: {
            int64_t v = (int64_t)(x * 1000);
            memcpy(d + ckpz_dtype_size(t) * i, &v, ckpz_dtype_size(t));
        }
        }
    }
}

/* A safetensors file of the tensors in t (data[i] when given, else filled here), with
 * `tail` opaque bytes after the data. */
static uint8_t *make_st(const tdesc *t, size_t nt, uint8_t *const *data, size_t tail, size_t *len)
{
    char json[4096];
    size_t jl = 0, off = 0;
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < nt; i++) {
        size_t b = t[i].rows * t[i].cols * ckpz_dtype_size(t[i].t);
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu,%zu],\"data_offsets\":[%zu,%zu]}", t[i].name,
                               t[i].dtype, t[i].rows, t[i].cols, off, off + b);
        off += b;
    }
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "}");
    size_t hl = (jl + 7) & ~(size_t)7, n = 8 + hl + off + tail;
    uint8_t *p = malloc(n), *d = p + 8 + hl;
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)((uint64_t)hl >> (8 * k));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, jl);
    for (size_t i = 0; i < nt; i++) {
        size_t b = t[i].rows * t[i].cols * ckpz_dtype_size(t[i].t);
        if (data && data[i]) memcpy(d, data[i], b);
        else fill(d, t[i].rows * t[i].cols, t[i].t);
        d += b;
    }
    for (size_t i = 0; i < tail; i++) d[i] = (uint8_t)rng();
    *len = n;
    return p;
}

/* Several dtypes, most over many chunks (none a whole number of them), one tiny, one
 * empty (an entry that owns no chunk). */
static const tdesc tensors[] = {{"emb.weight", "BF16", CKPZ_DTYPE_BF16, 300, 1001},
                                {"h.0.attn.w", "F32", CKPZ_DTYPE_F32, 250, 401},
                                {"empty", "F16", CKPZ_DTYPE_F16, 0, 5},
                                {"h.0.mlp.w", "F16", CKPZ_DTYPE_F16, 130, 999},
                                {"step", "I64", CKPZ_DTYPE_I64, 1, 1},
                                {"h.0.ln.w", "F32", CKPZ_DTYPE_F32, 2, 77},
                                {"head.w", "F64", CKPZ_DTYPE_F64, 64, 500}};
#define NT (sizeof tensors / sizeof *tensors)

/* A pread over memory that counts its calls and the ones that go back in the file, and
 * fails for frames starting in [fail_lo, fail_hi). */
typedef struct {
    ckpz_mem f;
    int calls, back;
    uint64_t fail_lo, fail_hi, last;
} cfile;

static int c_pread(void *v, void *buf, size_t n, uint64_t off)
{
    cfile *c = v;
    c->back += c->calls++ && off < c->last;
    c->last = off;
    if (off >= c->fail_lo && off < c->fail_hi) return -1;
    return ckpz_mem_pread(&c->f, buf, n, off);
}

static uint8_t *compress(ckpz_ctx *ctx, const uint8_t *src, size_t n, const char *policy, const uint8_t *base,
                         size_t blen, size_t *zl)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.chunk_size = CHUNK;
    p.threads = 2;
    p.policy = policy;
    p.base = base;
    p.base_size = blen;
    void *z = NULL;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, src, n, &z, zl);
    CHECKF(e == CKPZ_OK, "compress: %s", ckpz_ctx_message(ctx));
    return z;
}

static ckpz_archive *open_z(ckpz_ctx *ctx, cfile *cf, const uint8_t *z, size_t zl, int threads, const uint8_t *base,
                            size_t blen, ckpz_progress_fn progress, void *opaque)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = threads;
    p.base = base;
    p.base_size = blen;
    p.progress = progress;
    p.progress_opaque = opaque;
    *cf = (cfile){.f = mem_in(z, zl, 0), .fail_lo = 1};
    ckpz_archive *a = NULL;
    ckpz_error e = ckpz_archive_open(ctx, &p, c_pread, cf, zl, &a);
    CHECKF(e == CKPZ_OK, "open: %s", ckpz_ctx_message(ctx));
    cf->calls = cf->back = 0;
    return e ? NULL : a;
}

/* Spans with their own buffers (so that the sanitizer sees any write past one). */
typedef struct {
    ckpz_span *s;
    size_t n, cap;
} spanset;

static void spans_alloc(spanset *ss, size_t n)
{
    ss->cap = n ? n : 1;
    ss->s = calloc(ss->cap, sizeof *ss->s);
    ss->n = 0;
}
static void spans_add(spanset *ss, uint64_t off, uint64_t len)
{
    if (ss->n == ss->cap) ss->s = realloc(ss->s, (ss->cap *= 2) * sizeof *ss->s);
    ckpz_span *s = &ss->s[ss->n++];
    s->offset = off;
    s->length = len;
    s->dst = len ? malloc(len) : NULL;
    if (len) memset(s->dst, 0xa5, len);
}
static void spans_free(spanset *ss)
{
    for (size_t i = 0; i < ss->n; i++) free(ss->s[i].dst);
    free(ss->s);
}
/* Index of the first span whose bytes differ from want's, or -1. */
static long spans_diff(const spanset *ss, const uint8_t *want)
{
    for (size_t i = 0; i < ss->n; i++)
        if (ss->s[i].length && memcmp(ss->s[i].dst, want + ss->s[i].offset, ss->s[i].length)) return (long)i;
    return -1;
}

static void check_read(ckpz_ctx *ctx, ckpz_archive *a, const spanset *ss, const uint8_t *want, const char *what)
{
    ckpz_error e = ckpz_archive_read(ctx, a, ss->s, ss->n);
    CHECKF(e == CKPZ_OK, "%s: %s", what, ckpz_ctx_message(ctx));
    long bad = e ? -1 : spans_diff(ss, want);
    CHECKF(bad < 0, "%s: span %ld (offset %llu, %llu bytes) differs", what, bad,
           bad < 0 ? 0ull : (unsigned long long)ss->s[bad].offset,
           bad < 0 ? 0ull : (unsigned long long)ss->s[bad].length);
}

/* Every entry as a span (in reverse order), then the whole file as one. */
static void check_entries(ckpz_ctx *ctx, ckpz_archive *a, const uint8_t *want, const char *what)
{
    ckpz_archive_info info = {.struct_size = sizeof info};
    ckpz_archive_get_info(a, &info);
    spanset ss;
    spans_alloc(&ss, info.entries);
    for (uint64_t i = info.entries; i-- > 0;) {
        ckpz_entry en = {.struct_size = sizeof en};
        CHECK(ckpz_archive_entry(a, i, &en) == CKPZ_OK);
        spans_add(&ss, en.offset, en.length);
    }
    check_read(ctx, a, &ss, want, what);
    spans_free(&ss);
    spans_alloc(&ss, 1);
    spans_add(&ss, 0, info.original_size);
    check_read(ctx, a, &ss, want, what);
    spans_free(&ss);
}

/* n random spans, in random order: at entry boundaries (crossing them), at chunk
 * boundaries of the first tensor, inside one chunk, over several, tiny, empty, and two
 * that repeat an earlier span's range. */
static void random_spans(spanset *ss, ckpz_archive *a, size_t n)
{
    ckpz_archive_info info = {.struct_size = sizeof info};
    ckpz_archive_get_info(a, &info);
    uint64_t size = info.original_size;
    spans_alloc(ss, n);
    while (ss->n < n) {
        uint64_t off, len;
        ckpz_entry en = {.struct_size = sizeof en};
        switch (rng() % 7) {
        case 0: /* across an entry boundary */
            ckpz_archive_entry(a, rng() % info.entries, &en);
            off = en.offset - (en.offset ? rng() % (en.offset < 3000 ? en.offset : 3000) : 0);
            len = rng() % (3 * CHUNK);
            break;
        case 1: /* inside one chunk of the first tensor */
            ckpz_archive_entry(a, 1, &en);
            off = en.offset + (rng() % 4) * CHUNK + 1 + rng() % 1000;
            len = 1 + rng() % (CHUNK - 2000);
            break;
        case 2: /* across a chunk boundary of the first tensor */
            ckpz_archive_entry(a, 1, &en);
            off = en.offset + (1 + rng() % 4) * CHUNK - rng() % 5000;
            len = 1 + rng() % 10000;
            break;
        case 3: /* tiny */
            off = rng() % size;
            len = 1 + rng() % 7;
            break;
        case 4: /* empty */
            off = rng() % (size + 1);
            len = 0;
            break;
        case 5: /* repeats an earlier range */
            if (!ss->n) continue;
            off = ss->s[rng() % ss->n].offset;
            len = 0;
            for (size_t i = 0; i < ss->n; i++)
                if (ss->s[i].offset == off && ss->s[i].length > len) len = ss->s[i].length;
            break;
        default: /* anywhere, up to four chunks */
            off = rng() % size;
            len = rng() % (4 * CHUNK);
            break;
        }
        if (off > size) off = size;
        if (len > size - off) len = size - off;
        spans_add(ss, off, len);
    }
    for (size_t i = n; i > 1; i--) { /* shuffle */
        size_t k = rng() % i;
        ckpz_span t = ss->s[i - 1];
        ss->s[i - 1] = ss->s[k];
        ss->s[k] = t;
    }
}

static void test_lossless(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t n, zl;
    uint8_t *src = make_st(tensors, NT, NULL, 12345, &n);
    uint8_t *z = compress(ctx, src, n, NULL, NULL, 0, &zl);
    for (int threads = 1; z && threads <= 4; threads *= 2) {
        char what[64];
        cfile cf;
        ckpz_archive *a = open_z(ctx, &cf, z, zl, threads, NULL, 0, NULL, NULL);
        if (!a) continue;
        ckpz_archive_info info = {.struct_size = sizeof info};
        ckpz_archive_get_info(a, &info);
        CHECK(info.chunks > 20 && info.entries >= NT + 1);
        snprintf(what, sizeof what, "entries T%d", threads);
        cf.calls = 0;
        check_entries(ctx, a, src, what);
        /* given last to first, read first to last (read-ahead works for a file) */
        CHECKF(cf.back == 1, "%d reads went back in the file", cf.back - 1);
        for (int round = 0; round < 4; round++) {
            spanset ss;
            random_spans(&ss, a, round == 0 ? 1 : round == 1 ? 5 : 300);
            snprintf(what, sizeof what, "random spans T%d round %d", threads, round);
            check_read(ctx, a, &ss, src, what);
            spans_free(&ss);
        }
        /* every byte its own span, over the end of the first tensor */
        {
            ckpz_entry en = {.struct_size = sizeof en};
            CHECK(ckpz_archive_entry(a, 2, &en) == CKPZ_OK);
            spanset ss;
            spans_alloc(&ss, 64);
            for (int i = 0; i < 64; i++) spans_add(&ss, en.offset - 32 + (uint64_t)i, 1);
            check_read(ctx, a, &ss, src, "single bytes");
            spans_free(&ss);
        }
        /* chunk boundaries tile the file; pieces of whole chunks, one call each on the same
         * context (its job buffers reused call after call), read every chunk once */
        {
            uint64_t off, len, at = 0, end;
            int tiled = 1;
            for (uint64_t k = 0; k < info.chunks; k++) {
                ckpz_archive_chunk(a, k, &off, &len);
                tiled &= off == at && len > 0;
                at = off + len;
            }
            ckpz_archive_chunk(a, info.chunks, &end, &len);
            CHECKF(tiled && at == n && end == n && len == 0, "chunks do not tile the %zu bytes", n);
            uint8_t *back = malloc(n);
            cf.calls = 0;
            int ok = back != NULL;
            for (uint64_t k = 0; ok && k < info.chunks; k += 3) {
                uint64_t lo, hi;
                ckpz_archive_chunk(a, k, &lo, &len);
                ckpz_archive_chunk(a, k + 3 < info.chunks ? k + 3 : info.chunks, &hi, &len);
                ckpz_span sp = {lo, hi - lo, back + lo};
                ok = ckpz_archive_read(ctx, a, &sp, 1) == CKPZ_OK;
            }
            CHECKF(ok && memcmp(back, src, n) == 0, "pieces of whole chunks T%d", threads);
            CHECKF(cf.calls == (int)info.chunks, "%d frame reads for %llu chunks", cf.calls,
                   (unsigned long long)info.chunks);
            /* and pieces that cut chunks, one after the other on the context (straddling
             * chunks decoded into its kept buffers) */
            memset(back, 0, n);
            for (uint64_t at2 = 0; ok && at2 < n; at2 += 100003) {
                ckpz_span sp = {at2, n - at2 < 100003 ? n - at2 : 100003, back + at2};
                ok = ckpz_archive_read(ctx, a, &sp, 1) == CKPZ_OK;
            }
            CHECKF(ok && memcmp(back, src, n) == 0, "pieces across chunks T%d", threads);
            free(back);
        }
        /* nothing to do: no spans, only empty ones (no destination needed), and no reads */
        ckpz_span empty[3] = {{0, 0, NULL}, {n, 0, NULL}, {100, 0, NULL}};
        cf.calls = 0;
        CHECK(ckpz_archive_read(ctx, a, NULL, 0) == CKPZ_OK);
        CHECK(ckpz_archive_read(ctx, a, empty, 3) == CKPZ_OK);
        CHECK(cf.calls == 0);
        ckpz_archive_close(a);
    }
    ckpz_free(z);
    free(src);
    ckpz_ctx_free(ctx);
}

/* A span outside the original, overflowing, or without a destination fails before any
 * read, whatever comes before it. */
static void test_bad_spans(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t n, zl;
    uint8_t *src = make_st(tensors, NT, NULL, 100, &n);
    uint8_t *z = compress(ctx, src, n, NULL, NULL, 0, &zl);
    cfile cf;
    ckpz_archive *a = z ? open_z(ctx, &cf, z, zl, 2, NULL, 0, NULL, NULL) : NULL;
    if (a) {
        uint8_t good[100], bad[8];
        memset(good, 0x5a, sizeof good);
        struct {
            uint64_t off, len;
            int null_dst;
        } cases[] = {{n, 1, 0}, {n - 3, 4, 0}, {n + 1, 0, 0}, {5, UINT64_MAX, 0}, {UINT64_MAX, 2, 0}, {10, 5, 1}};
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            ckpz_span s[2] = {{0, sizeof good, good}, {cases[c].off, cases[c].len, cases[c].null_dst ? NULL : bad}};
            ckpz_error e = ckpz_archive_read(ctx, a, s, 2);
            CHECKF(e == CKPZ_ERR_PARAM && strstr(ckpz_ctx_message(ctx), "span 1"), "case %zu: %d '%s'", c, (int)e,
                   ckpz_ctx_message(ctx));
            CHECKF(cf.calls == 0 && good[0] == 0x5a && good[99] == 0x5a, "case %zu: read before failing", c);
        }
        /* the last byte is fine */
        ckpz_span last = {n - 1, 1, bad};
        CHECK(ckpz_archive_read(ctx, a, &last, 1) == CKPZ_OK && bad[0] == src[n - 1]);
        ckpz_archive_close(a);
    }
    ckpz_free(z);
    free(src);
    ckpz_ctx_free(ctx);
}

/* Lossy: the spans hold what the whole-file restore gives. */
static void test_lossy(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t n, zl;
    uint8_t *src = make_st(tensors, NT, NULL, 999, &n);
    uint8_t *z = compress(ctx, src, n, "* abs 1e-3", NULL, 0, &zl);
    uint8_t *full = malloc(n);
    ckpz_error e = z ? ckpz_decompress_buffer(ctx, NULL, z, zl, full, n) : CKPZ_ERR_PARAM;
    CHECKF(e == CKPZ_OK, "lossy restore: %s", ckpz_ctx_message(ctx));
    CHECK(e || memcmp(full, src, n) != 0); /* it is lossy */
    for (int threads = 1; !e && threads <= 4; threads *= 2) {
        cfile cf;
        ckpz_archive *a = open_z(ctx, &cf, z, zl, threads, NULL, 0, NULL, NULL);
        if (!a) continue;
        ckpz_archive_info info = {.struct_size = sizeof info};
        ckpz_archive_get_info(a, &info);
        CHECK(info.lossy);
        check_entries(ctx, a, full, "lossy entries");
        spanset ss;
        random_spans(&ss, a, 200);
        check_read(ctx, a, &ss, full, "lossy random spans");
        spans_free(&ss);
        ckpz_archive_close(a);
    }
    free(full);
    ckpz_free(z);
    free(src);
    ckpz_ctx_free(ctx);
}

/* Delta: with the base every span reads (an unchanged tensor is one copy frame longer
 * than a chunk); without it, the spans in entries coded against the base fail with the
 * base's message and the others read. */
static void test_delta(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    tdesc tb[] = {{"same", "F32", CKPZ_DTYPE_F32, 100, 1000},
                  {"moved", "F32", CKPZ_DTYPE_F32, 60, 1000},
                  {"half", "BF16", CKPZ_DTYPE_BF16, 90, 1000}};
    tdesc tn[] = {{"same", "F32", CKPZ_DTYPE_F32, 100, 1000},
                  {"moved", "F32", CKPZ_DTYPE_F32, 60, 1000},
                  {"half", "BF16", CKPZ_DTYPE_BF16, 90, 1000},
                  {"new", "F32", CKPZ_DTYPE_F32, 30, 1000}};
    uint8_t *db[3], *dn[4];
    for (int i = 0; i < 3; i++) {
        size_t b = tb[i].rows * tb[i].cols * ckpz_dtype_size(tb[i].t);
        db[i] = malloc(b);
        fill(db[i], tb[i].rows * tb[i].cols, tb[i].t);
        dn[i] = malloc(b);
        memcpy(dn[i], db[i], b);
    }
    for (size_t i = 0; i < 60000; i += 3) dn[1][4 * i] ^= 1; /* a training step */
    for (size_t i = 0; i < 90000; i += 5) dn[2][2 * i] ^= 1;
    dn[3] = NULL;
    size_t bl, nl, zl;
    uint8_t *base = make_st(tb, 3, db, 0, &bl), *next = make_st(tn, 4, dn, 0, &nl);
    uint8_t *z = compress(ctx, next, nl, NULL, base, bl, &zl);
    for (int threads = 1; z && threads <= 4; threads *= 2) {
        cfile cf;
        ckpz_archive *a = open_z(ctx, &cf, z, zl, threads, base, bl, NULL, NULL);
        if (!a) continue;
        uint64_t idx;
        ckpz_entry en = {.struct_size = sizeof en};
        CHECK(ckpz_archive_find(ctx, a, "same", &idx) == CKPZ_OK && ckpz_archive_entry(a, idx, &en) == CKPZ_OK);
        CHECKF(en.based && en.chunks == 1 && en.length > 4 * CHUNK, "'same': %llu chunks",
               (unsigned long long)en.chunks);
        check_entries(ctx, a, next, "delta entries");
        spanset ss;
        random_spans(&ss, a, 200);
        spans_add(&ss, en.offset + CHUNK + 17, 3 * CHUNK); /* inside the copy frame */
        spans_add(&ss, en.offset - 5, 2 * CHUNK);          /* across its start */
        spans_add(&ss, en.offset + en.length - 9, 20);     /* across its end */
        check_read(ctx, a, &ss, next, "delta random spans");
        spans_free(&ss);
        ckpz_archive_close(a);

        /* without the base */
        a = open_z(ctx, &cf, z, zl, threads, NULL, 0, NULL, NULL);
        if (!a) continue;
        ckpz_archive_info info = {.struct_size = sizeof info};
        ckpz_archive_get_info(a, &info);
        int based = 0, alone = 0;
        for (uint64_t i = 0; i < info.entries; i++) {
            CHECK(ckpz_archive_entry(a, i, &en) == CKPZ_OK);
            spans_alloc(&ss, 2);
            spans_add(&ss, en.offset, en.length);
            spans_add(&ss, en.offset, 0); /* empty spans never need anything */
            ckpz_error e = ckpz_archive_read(ctx, a, ss.s, ss.n);
            if (en.based && en.length) {
                based++;
                CHECKF(e == CKPZ_ERR_BASE && strstr(ckpz_ctx_message(ctx), "needs its base"),
                       "entry %llu without base: %d '%s'", (unsigned long long)i, (int)e, ckpz_ctx_message(ctx));
            } else if (en.length) {
                alone++;
                CHECKF(e == CKPZ_OK && spans_diff(&ss, next) < 0, "entry %llu ('%s') without base: %s",
                       (unsigned long long)i, en.name, ckpz_ctx_message(ctx));
            }
            spans_free(&ss);
        }
        CHECKF(based >= 3 && alone >= 1, "%d entries based, %d not", based, alone);
        ckpz_archive_close(a);
    }
    ckpz_free(z);
    free(base);
    free(next);
    for (int i = 0; i < 3; i++) {
        free(db[i]);
        free(dn[i]);
    }
    ckpz_ctx_free(ctx);
}

/* The file offset of chunk frame k (frames are in order; a "CKCH" tag inside a payload
 * is told apart by its entry number and length). */
static size_t frame_of(const uint8_t *z, size_t zl, uint64_t k)
{
    uint64_t seen = 0;
    for (size_t at = 32; at + 32 <= zl; at++)
        if (!memcmp(z + at, "CKCH", 4) && seen++ == k) return at;
    return 0;
}

/* A damaged payload byte, or a failing read, fails naming the chunk and tensor; spans
 * that do not touch that chunk still read. */
static void test_damage(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t n, zl;
    uint8_t *src = make_st(tensors, NT, NULL, 100, &n);
    uint8_t *z = compress(ctx, src, n, NULL, NULL, 0, &zl);
    for (int threads = 1; z && threads <= 4; threads *= 2) {
        cfile cf;
        ckpz_archive *a = open_z(ctx, &cf, z, zl, threads, NULL, 0, NULL, NULL);
        if (!a) continue;
        /* chunk 5 is the fifth of "emb.weight" (entry 1; the header, opaque bytes, is
         * chunk 0: it does not lead a tensor's chunk) */
        ckpz_entry en = {.struct_size = sizeof en}, hdr = {.struct_size = sizeof hdr};
        CHECK(ckpz_archive_entry(a, 0, &hdr) == CKPZ_OK && hdr.chunks == 1);
        CHECK(ckpz_archive_entry(a, 1, &en) == CKPZ_OK && !strcmp(en.name, "emb.weight") && en.chunks > 6);
        uint64_t k = 5, coff = en.offset + (k - 1) * CHUNK;
        size_t at = frame_of(z, zl, k);
        CHECK(at > 0 && z[at + 4] == 1);
        uint8_t *zz = malloc(zl);
        memcpy(zz, z, zl);
        zz[at + 32 + 100] ^= 0x10;
        cfile cf2;
        ckpz_archive *b = open_z(ctx, &cf2, zz, zl, threads, NULL, 0, NULL, NULL);
        spanset ss;
        spans_alloc(&ss, 3);
        spans_add(&ss, en.offset, en.length); /* over the damaged chunk */
        spans_add(&ss, 0, 1000);
        spans_add(&ss, coff + CHUNK, 1000);
        ckpz_error e = b ? ckpz_archive_read(ctx, b, ss.s, ss.n) : CKPZ_OK;
        CHECKF((e == CKPZ_ERR_CHECKSUM || e == CKPZ_ERR_CORRUPT) && strstr(ckpz_ctx_message(ctx), "chunk 5 ") &&
                   strstr(ckpz_ctx_message(ctx), "emb.weight"),
               "damaged payload T%d: %d '%s'", threads, (int)e, ckpz_ctx_message(ctx));
        spans_free(&ss);
        /* only the bytes around it */
        spans_alloc(&ss, 3);
        spans_add(&ss, coff - 10, 10);
        spans_add(&ss, coff + CHUNK, 10);
        spans_add(&ss, 0, en.offset);
        if (b) check_read(ctx, b, &ss, src, "spans around a damaged chunk");
        spans_add(&ss, coff + CHUNK - 1, 1);
        e = b ? ckpz_archive_read(ctx, b, ss.s, ss.n) : CKPZ_OK;
        CHECKF(e == CKPZ_ERR_CHECKSUM || e == CKPZ_ERR_CORRUPT, "last byte of a damaged chunk: %d", (int)e);
        spans_free(&ss);
        ckpz_archive_close(b);
        free(zz);

        /* a read that fails */
        cf.fail_lo = at;
        cf.fail_hi = at + 1;
        spans_alloc(&ss, 2);
        spans_add(&ss, coff + 7, 7);
        spans_add(&ss, 0, n);
        e = ckpz_archive_read(ctx, a, ss.s, ss.n);
        CHECKF(e == CKPZ_ERR_READ && strstr(ckpz_ctx_message(ctx), "chunk 5 ") &&
                   strstr(ckpz_ctx_message(ctx), "emb.weight") && strstr(ckpz_ctx_message(ctx), "read"),
               "failing read T%d: %d '%s'", threads, (int)e, ckpz_ctx_message(ctx));
        spans_free(&ss);
        ckpz_archive_close(a);
    }
    ckpz_free(z);
    free(src);
    ckpz_ctx_free(ctx);
}

typedef struct {
    uint64_t calls, done, total, abort_at;
    int regress;
} prog;

static int progress(void *v, uint64_t done, uint64_t total)
{
    prog *p = v;
    if (p->calls && (done <= p->done || total != p->total)) p->regress = 1;
    p->calls++;
    p->done = done;
    p->total = total;
    return p->abort_at && p->calls >= p->abort_at;
}

/* Progress comes once per chunk and span, done growing to the spans' total; non-zero
 * aborts at once. */
static void test_progress(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t n, zl;
    uint8_t *src = make_st(tensors, NT, NULL, 100, &n);
    uint8_t *z = compress(ctx, src, n, NULL, NULL, 0, &zl);
    for (int threads = 1; z && threads <= 4; threads *= 2) {
        prog pr = {0};
        cfile cf;
        ckpz_archive *a = open_z(ctx, &cf, z, zl, threads, NULL, 0, progress, &pr);
        if (!a) continue;
        ckpz_archive_info info = {.struct_size = sizeof info};
        ckpz_archive_get_info(a, &info);
        spanset ss;
        spans_alloc(&ss, info.entries + 1);
        uint64_t chunks = 0, total = 0;
        for (uint64_t i = 0; i < info.entries; i++) {
            ckpz_entry en = {.struct_size = sizeof en};
            CHECK(ckpz_archive_entry(a, i, &en) == CKPZ_OK);
            if (i == 0 || i == 2 || i + 1 == info.entries) continue;
            spans_add(&ss, en.offset, en.length);
            chunks += en.chunks ? en.chunks : en.length > 0; /* a packed entry lies in its owner's chunk */
            total += en.length;
        }
        spans_add(&ss, 3, 0);
        check_read(ctx, a, &ss, src, "progress");
        CHECKF(pr.calls == chunks && pr.done == total && pr.total == total && !pr.regress,
               "T%d: %llu calls (want %llu), done %llu of %llu (want %llu)", threads, (unsigned long long)pr.calls,
               (unsigned long long)chunks, (unsigned long long)pr.done, (unsigned long long)pr.total,
               (unsigned long long)total);
        for (uint64_t k = 1; k <= 3; k++) {
            pr = (prog){.abort_at = k};
            ckpz_error e = ckpz_archive_read(ctx, a, ss.s, ss.n);
            CHECKF(e == CKPZ_ERR_ABORTED && pr.calls == k && pr.done < total, "T%d abort at %llu: %d, %llu calls",
                   threads, (unsigned long long)k, (int)e, (unsigned long long)pr.calls);
        }
        spans_free(&ss);
        ckpz_archive_close(a);
    }
    ckpz_free(z);
    free(src);
    ckpz_ctx_free(ctx);
}

int main(void)
{
    test_lossless();
    test_bad_spans();
    test_lossy();
    test_delta();
    test_damage();
    test_progress();
    return test_summary("test_archive_read");
}
