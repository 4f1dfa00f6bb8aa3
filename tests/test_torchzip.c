/* test_torchzip.c — torch.save archives and .npz through lib/formats (torch.c, npz.c,
 * zip.c, pickle.c) and the public API.
 *
 * Inputs: the .pt and .npz files in tests/data/torch/, written by real torch/numpy
 * (tests/data/make_torch.py), each with FILE.expect listing the tensor segments the
 * reader must find: "offset length dtype name shape...".
 *
 * Checks: the description (whole file at once, and piecewise through tiny windows the
 * way the chunker feeds resume points, with the size known and unknown) tiles the file
 * and finds exactly the expected tensors; compression through the public API restores
 * the file byte for byte and reports the format; every truncation of a .pt and random
 * mutations of the pickle and headers neither crash nor break the tiling (run under
 * ASan: every window handed to a reader is an exactly-sized heap copy).
 *
 * Standalone program, run from the repository root; non-zero exit on failure. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "formats/formats.h"
#include "testutil.h"

#define DIR "tests/data/torch/"

typedef struct {
    uint64_t off, len;
    char dtype[16];
    char name[256];
    uint32_t ndim;
    uint64_t shape[16];
} want_t;

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static size_t read_expect(const char *path, want_t *w, size_t max)
{
    FILE *f = fopen(path, "r");
    if (!f) return (size_t)-1;
    char line[1024];
    size_t n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        want_t *x = &w[n];
        memset(x, 0, sizeof(*x));
        int used = 0;
        if (sscanf(line, "%" SCNu64 " %" SCNu64 " %15s %255s%n", &x->off, &x->len, x->dtype, x->name, &used) != 4)
            continue;
        char *s = line + used;
        for (;;) {
            char *e;
            unsigned long long v = strtoull(s, &e, 10);
            if (e == s || x->ndim >= 16) break;
            x->shape[x->ndim++] = v;
            s = e;
        }
        n++;
    }
    fclose(f);
    return n;
}

/* The list tiles [0, end of input): contiguous, non-overlapping, the last one open. */
static int tiles(const fmt_list *l)
{
    uint64_t cur = 0;
    for (size_t i = 0; i < l->n; i++) {
        const fmt_segment *s = &l->seg[i];
        if (s->offset != cur || s->resume) return 0;
        if (s->length == FMT_LEN_OPEN) return i + 1 == l->n && s->dtype == CKPZ_DTYPE_NONE;
        if (s->dtype != CKPZ_DTYPE_NONE && !s->name) return 0;
        cur += s->length;
    }
    return 0;
}

/* Describes buf[0..n) through windows of at most `win` bytes beyond what a reader asks
 * for (0: the whole rest); total_known: pass the size to fmt_describe. Each window is
 * an exact heap copy. Returns 0 or -1 (reader error). */
static int describe(const uint8_t *buf, size_t n, size_t win, int total_known, ckpz_input_format fmt, fmt_list *l)
{
    size_t want = win ? win : n;
    char why[256];
    for (;;) {
        size_t k = want < n ? want : n;
        uint8_t *c = malloc(k ? k : 1);
        memcpy(c, buf, k);
        size_t need = 0;
        fmt_status s = fmt_describe(c, k, total_known ? n : (k == n ? n : CKPZ_SIZE_UNKNOWN),
                                    &(fmt_request){.format = fmt}, l, &need, why, sizeof why);
        free(c);
        if (s < 0) return -1;
        if (s == FMT_DONE) break;
        if (need <= k || need > FMT_PROBE_MAX) {
            fprintf(stderr, "describe asked for %zu with %zu\n", need, k);
            return -1;
        }
        want = need;
    }
    /* resume points */
    int rounds = 0;
    while (l->n && l->seg[l->n - 1].resume) {
        uint64_t at = l->seg[l->n - 1].offset;
        if (++rounds > 1000000) {
            fprintf(stderr, "resume loop at %" PRIu64 "\n", at);
            return -1;
        }
        /* A resume point past the end (a member cut short): the chunker never gets
         * there; end the list the way an empty end of input would. */
        size_t rest = at < n ? n - (size_t)at : 0;
        want = win ? win : rest;
        for (;;) {
            size_t k = want < rest ? want : rest;
            uint8_t *c = malloc(k ? k : 1);
            memcpy(c, buf + (at < n ? at : n), k);
            size_t need = 0;
            fmt_status s = fmt_resume(l, c, k, k == rest, &need);
            free(c);
            if (s < 0) return -1;
            if (s == FMT_DONE) break;
            if (need <= k || need > FMT_PROBE_MAX || k == rest) {
                fprintf(stderr, "resume asked for %zu with %zu\n", need, k);
                return -1;
            }
            want = need;
        }
    }
    return 0;
}

static void check_list(const char *what, const fmt_list *l, const want_t *w, size_t nw, ckpz_input_format fmt)
{
    CHECKF(tiles(l), "%s: segments do not tile the file", what);
    CHECKF(l->format == fmt, "%s: format %d", what, (int)l->format);
    size_t j = 0;
    for (size_t i = 0; i < l->n; i++) {
        const fmt_segment *s = &l->seg[i];
        if (s->dtype == CKPZ_DTYPE_NONE) continue;
        if (j >= nw) {
            CHECKF(0, "%s: unexpected tensor %s at %" PRIu64, what, s->name, s->offset);
            j++;
            continue;
        }
        const want_t *x = &w[j++];
        CHECKF(s->offset == x->off && s->length == x->len,
               "%s: %s at %" PRIu64 "+%" PRIu64 ", want %" PRIu64 "+%" PRIu64, what, s->name, s->offset, s->length,
               x->off, x->len);
        CHECKF(!strcmp(ckpz_dtype_name(s->dtype), x->dtype), "%s: %s dtype %s, want %s", what, s->name,
               ckpz_dtype_name(s->dtype), x->dtype);
        CHECKF(!strcmp(s->name, x->name), "%s: name %s, want %s", what, s->name, x->name);
        int same = s->ndim == x->ndim;
        for (uint32_t d = 0; same && d < s->ndim; d++) same = s->shape[d] == x->shape[d];
        CHECKF(same, "%s: %s shape (ndim %u) differs from the expected (ndim %u)", what, s->name, s->ndim, x->ndim);
    }
    CHECKF(j == nw, "%s: %zu tensors, want %zu", what, j, nw);
}

/* ---- public API round trip ---------------------------------------------------------- */

/* Compresses through the stream API (size known or not, reads of `step` bytes) and
 * restores through decompress_buffer; returns the stats. */
static int roundtrip(const char *what, ckpz_ctx *ctx, const uint8_t *src, size_t n, int size_known, size_t step,
                     ckpz_stats *st)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    p.chunk_size = 64u << 10;
    ckpz_mem r = {.data = (void *)src, .size = n, .step = step}, w = {.grow = 1};
    ckpz_error e = ckpz_compress_stream(ctx, &p, ckpz_mem_read, &r, size_known ? n : CKPZ_SIZE_UNKNOWN, ckpz_mem_write,
                                        &w, st);
    CHECKF(e == CKPZ_OK, "%s: compress: %s", what, ckpz_ctx_message(ctx));
    if (e) {
        free(w.data);
        return -1;
    }
    uint8_t *back = malloc(n ? n : 1);
    e = ckpz_decompress_buffer(ctx, &p, w.data, w.size, back, n);
    CHECKF(e == CKPZ_OK && !memcmp(back, src, n), "%s: restore: %s", what, ckpz_ctx_message(ctx));
    free(back);
    free(w.data);
    return e ? -1 : 0;
}

/* ---- tests ----------------------------------------------------------------------------- */

static const struct {
    const char *file;
    ckpz_input_format fmt;
} files[] = {
    {"fp32_state.pt", CKPZ_INPUT_TORCH},
    {"bf16_state.pt", CKPZ_INPUT_TORCH},
    {"nested.pt", CKPZ_INPUT_TORCH},
    {"shared.pt", CKPZ_INPUT_TORCH},
    {"adamw.pt", CKPZ_INPUT_TORCH},
    {"optim_groups.pt", CKPZ_INPUT_TORCH},
    {"scalar.pt", CKPZ_INPUT_TORCH},
    {"empty.pt", CKPZ_INPUT_TORCH},
    {"arrays.npz", CKPZ_INPUT_NPZ},
    {"arrays_z.npz", CKPZ_INPUT_NPZ},
    /* the legacy format, written by torch 1.13 and 2.x */
    {"legacy1_fp32_state.pt", CKPZ_INPUT_TORCH},
    {"legacy1_bf16_state.pt", CKPZ_INPUT_TORCH},
    {"legacy1_nested.pt", CKPZ_INPUT_TORCH},
    {"legacy1_shared.pt", CKPZ_INPUT_TORCH},
    {"legacy1_scalar.pt", CKPZ_INPUT_TORCH},
    {"legacy1_empty.pt", CKPZ_INPUT_TORCH},
    {"legacy2_fp32_state.pt", CKPZ_INPUT_TORCH},
    {"legacy2_bf16_state.pt", CKPZ_INPUT_TORCH},
    {"legacy2_nested.pt", CKPZ_INPUT_TORCH},
    {"legacy2_shared.pt", CKPZ_INPUT_TORCH},
    {"legacy2_scalar.pt", CKPZ_INPUT_TORCH},
    {"legacy2_empty.pt", CKPZ_INPUT_TORCH},
};

static void test_file(ckpz_ctx *ctx, const char *file, ckpz_input_format fmt)
{
    char path[512], what[600];
    snprintf(path, sizeof path, DIR "%s", file);
    size_t n;
    uint8_t *buf = slurp(path, &n);
    CHECKF(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    snprintf(what, sizeof what, "%s.expect", path);
    want_t w[64];
    size_t nw = read_expect(what, w, 64);
    CHECKF(nw != (size_t)-1, "cannot read %s", what);
    if (nw == (size_t)-1) {
        free(buf);
        return;
    }

    static const size_t wins[] = {0, 1, 7, 64, 300, 4096};
    for (size_t i = 0; i < sizeof wins / sizeof wins[0]; i++) {
        for (int known = 0; known < 2; known++) {
            for (int forced = 0; forced < 2; forced++) {
                fmt_list l;
                snprintf(what, sizeof what, "%s window %zu size %s format %s", file, wins[i],
                         known ? "known" : "unknown", forced ? "forced" : "auto");
                int r = describe(buf, n, wins[i], known, forced ? fmt : CKPZ_INPUT_AUTO, &l);
                CHECKF(r == 0, "%s: reader error", what);
                if (!r) check_list(what, &l, w, nw, fmt);
                fmt_list_free(&l);
            }
        }
    }
    /* the other zip reader declines */
    fmt_list l;
    char why[256];
    size_t need = 0;
    fmt_status s = fmt_describe(buf, n, n,
                                &(fmt_request){.format = fmt == CKPZ_INPUT_TORCH ? CKPZ_INPUT_NPZ : CKPZ_INPUT_TORCH},
                                &l, &need, why, sizeof why);
    CHECKF(s == FMT_ERROR, "%s: the other zip reader accepted it", file);
    if (s == FMT_DONE) fmt_list_free(&l);
    s = fmt_describe(buf, n, n, &(fmt_request){.format = CKPZ_INPUT_SAFETENSORS}, &l, &need, why, sizeof why);
    CHECKF(s == FMT_ERROR, "%s: the safetensors reader accepted it", file);
    if (s == FMT_DONE) fmt_list_free(&l);

    ckpz_stats st = {.struct_size = sizeof st};
    if (!roundtrip(file, ctx, buf, n, 1, 0, &st)) {
        CHECKF(st.format == fmt, "%s: stats format %d", file, (int)st.format);
        CHECKF(st.tensors == nw, "%s: stats tensors %" PRIu64 ", want %zu", file, st.tensors, nw);
    }
    snprintf(what, sizeof what, "%s (size unknown, 13-byte reads)", file);
    if (!roundtrip(what, ctx, buf, n, 0, 13, &st))
        CHECKF(st.tensors == nw, "%s: stats tensors %" PRIu64 ", want %zu", what, st.tensors, nw);

    /* ckpz_compress_buffer too */
    void *z = NULL;
    size_t zn = 0;
    CHECK(ckpz_compress_buffer(ctx, NULL, buf, n, &z, &zn) == CKPZ_OK);
    uint8_t *back = malloc(n);
    CHECKF(z && ckpz_decompress_buffer(ctx, NULL, z, zn, back, n) == CKPZ_OK && !memcmp(back, buf, n),
           "%s: compress_buffer round trip", file);
    free(back);
    ckpz_free(z);
    free(buf);
}

/* Every truncation of a .pt: the description still tiles; some go through the API. */
static void test_truncations(ckpz_ctx *ctx, const char *file)
{
    char path[512], what[600];
    snprintf(path, sizeof path, DIR "%s", file);
    size_t n;
    uint8_t *buf = slurp(path, &n);
    CHECKF(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    for (size_t k = 0; k <= n; k++) {
        fmt_list l;
        uint8_t *c = malloc(k ? k : 1);
        memcpy(c, buf, k);
        snprintf(what, sizeof what, "%s cut to %zu", file, k);
        for (int forced = 0; forced < 2; forced++) {
            int r = describe(c, k, k % 3 ? 0 : 64, 1, forced ? CKPZ_INPUT_TORCH : CKPZ_INPUT_AUTO, &l);
            if (forced && r) continue; /* a forced format may refuse a cut header */
            CHECKF(r == 0, "%s: reader error", what);
            if (!r) CHECKF(tiles(&l), "%s: does not tile", what);
            fmt_list_free(&l);
        }
        if (k % 97 == 0 || k + 3 >= n) {
            ckpz_stats st = {.struct_size = sizeof st};
            roundtrip(what, ctx, c, k, k & 1, 0, &st);
        }
        free(c);
    }
    free(buf);
}

/* Random byte mutations in the pickle and the zip headers. */
static void test_mutations(ckpz_ctx *ctx, const char *file, int rounds)
{
    char path[512], what[600];
    snprintf(path, sizeof path, DIR "%s", file);
    size_t n;
    uint8_t *buf = slurp(path, &n);
    CHECKF(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    /* the pickle: from the first local header's data to the first "PK\7\b"; in a legacy
     * file, the five pickles and the first storage's count */
    size_t ps = 30 + (buf[26] | buf[27] << 8) + (buf[28] | buf[29] << 8), pe = ps;
    while (pe + 4 <= n && memcmp(buf + pe, "PK\x07\x08", 4)) pe++;
    if (buf[0] == 0x80) {
        want_t w[1];
        snprintf(path, sizeof path, DIR "%s.expect", file);
        ps = 0;
        pe = read_expect(path, w, 1) == 1 && w[0].off <= n ? (size_t)w[0].off : n;
    }
    uint8_t *m = malloc(n);
    for (int r = 0; r < rounds; r++) {
        memcpy(m, buf, n);
        int edits = 1 + (int)(rng() % 4);
        for (int e = 0; e < edits; e++) {
            size_t at;
            if (rng() % 4 == 0 || pe <= ps) at = (size_t)(rng() % n); /* anywhere, headers included */
            else at = ps + (size_t)(rng() % (pe - ps));
            switch (rng() % 3) {
            case 0: m[at] = (uint8_t)rng(); break;
            case 1: m[at] ^= (uint8_t)(1u << (rng() % 8)); break;
            default: m[at] = (uint8_t)"\x00\x01\x80\xff.()tQRhqXKM}]usae"[rng() % 20]; break;
            }
        }
        snprintf(what, sizeof what, "%s mutation %d", file, r);
        fmt_list l;
        for (int win = 0; win < 2; win++) {
            int rr = describe(m, n, win ? 50 : 0, win, CKPZ_INPUT_AUTO, &l);
            CHECKF(rr == 0, "%s: reader error", what);
            if (!rr) CHECKF(tiles(&l), "%s: does not tile", what);
            fmt_list_free(&l);
        }
        if (r % 16 == 0) {
            ckpz_stats st = {.struct_size = sizeof st};
            roundtrip(what, ctx, m, n, 1, 0, &st);
        }
    }
    free(m);
    free(buf);
}

/* ---- legacy files made from bytes: what the reader must not vouch for ------------------- */

typedef struct {
    uint8_t b[4096];
    size_t n;
} lbuf;

static void put(lbuf *o, const void *p, size_t n)
{
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put1(lbuf *o, uint8_t c) { o->b[o->n++] = c; }
static void put_le(lbuf *o, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) put1(o, (uint8_t)(v >> (8 * i)));
}
static void put_str(lbuf *o, const char *s)
{
    put1(o, 'X');
    put_le(o, strlen(s), 4);
    put(o, s, strlen(s));
}
static void put_num(lbuf *o, uint64_t v) /* BININT, or LONG1 of 8 bytes */
{
    put1(o, v < 0x80000000u ? 'J' : 0x8a);
    if (v >= 0x80000000u) put1(o, 8);
    put_le(o, v, v < 0x80000000u ? 4 : 8);
}

typedef struct {
    const char *name, *type, *key;
    uint64_t numel;
} ltensor;

typedef struct {
    const char *key;
    uint64_t count, bytes;
} lstorage;

/* The five pickles (sys_info's little_endian as given; the object a dict of tensors of
 * one dimension), the storages, then `tail` bytes. */
static void legacy_file(lbuf *o, int little, const ltensor *t, size_t nt, const lstorage *st, size_t ns, size_t tail)
{
    static const uint8_t magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a,
                                    0xa8, 0x50, 0x19, 0x2e, 0x80, 0x02, 0x4d, 0xe9, 0x03, 0x2e};
    o->n = 0;
    put(o, magic, sizeof magic);
    put(o, "\x80\x02}", 3);
    put_str(o, "little_endian");
    put(o, little ? "\x88s." : "\x89s.", 3);
    put(o, "\x80\x02}", 3);
    for (size_t i = 0; i < nt; i++) {
        put_str(o, t[i].name);
        put(o, "ctorch._utils\n_rebuild_tensor_v2\n((", 35);
        put_str(o, "storage");
        put(o, "ctorch\n", 7);
        put(o, t[i].type, strlen(t[i].type));
        put1(o, '\n');
        put_str(o, t[i].key);
        put_str(o, "cpu");
        put_num(o, t[i].numel);
        put(o, "NtQK\x00(", 6);
        put_num(o, t[i].numel);
        put(o, "t(K\x01t\x89tRs", 9);
    }
    put(o, ".\x80\x02](", 5);
    for (size_t i = 0; i < ns; i++) put_str(o, st[i].key);
    put(o, "e.", 2);
    for (size_t i = 0; i < ns; i++) {
        put_le(o, st[i].count, 8);
        for (uint64_t k = 0; k < st[i].bytes; k++) put1(o, (uint8_t)(k * 37 + i));
    }
    for (size_t k = 0; k < tail; k++) put1(o, 0xa5);
}

/* The description finds exactly the tensors named in `want` (in order), tiles the input
 * through every window, and the input round-trips through the API. */
static void check_legacy(ckpz_ctx *ctx, const char *what, const lbuf *f, const char *const *want, size_t nw)
{
    char w2[300];
    static const size_t wins[] = {0, 1, 9, 100};
    for (size_t i = 0; i < sizeof wins / sizeof wins[0]; i++) {
        for (int known = 0; known < 2; known++) {
            fmt_list l;
            snprintf(w2, sizeof w2, "legacy %s, window %zu, size %s", what, wins[i], known ? "known" : "unknown");
            int r = describe(f->b, f->n, wins[i], known, CKPZ_INPUT_AUTO, &l);
            CHECKF(r == 0, "%s: reader error", w2);
            if (r) continue;
            CHECKF(tiles(&l), "%s: does not tile", w2);
            CHECKF(l.format == CKPZ_INPUT_TORCH, "%s: format %d", w2, (int)l.format);
            size_t j = 0;
            for (size_t k = 0; k < l.n; k++) {
                if (l.seg[k].dtype == CKPZ_DTYPE_NONE) continue;
                CHECKF(j < nw && !strcmp(l.seg[k].name, want[j]), "%s: tensor %zu is %s, want %s", w2, j, l.seg[k].name,
                       j < nw ? want[j] : "none");
                j++;
            }
            CHECKF(j == nw, "%s: %zu tensors, want %zu", w2, j, nw);
            fmt_list_free(&l);
        }
    }
    ckpz_stats st = {.struct_size = sizeof st};
    snprintf(w2, sizeof w2, "legacy %s", what);
    if (!roundtrip(w2, ctx, f->b, f->n, 1, 0, &st)) CHECKF(st.tensors == nw, "%s: %" PRIu64 " tensors", w2, st.tensors);
    snprintf(w2, sizeof w2, "legacy %s (size unknown, 5-byte reads)", what);
    roundtrip(w2, ctx, f->b, f->n, 0, 5, &st);
}

/* Replaces every `from` in o by `to` (a GLOBAL's text: the pickle stays well formed). */
static void replace_all(lbuf *o, const char *from, const char *to)
{
    static lbuf t;
    size_t fl = strlen(from), tl = strlen(to);
    t.n = 0;
    for (size_t i = 0; i < o->n;) {
        if (i + fl <= o->n && !memcmp(o->b + i, from, fl)) {
            put(&t, to, tl);
            i += fl;
        } else {
            put1(&t, o->b[i++]);
        }
    }
    *o = t;
}

static void test_legacy_hostile(ckpz_ctx *ctx)
{
    static lbuf f;
    const ltensor t[] = {{"a", "FloatStorage", "10", 3}, {"b", "LongStorage", "20", 2}, {"c", "HalfStorage", "30", 5}};
    const lstorage ok[] = {{"10", 3, 12}, {"20", 2, 16}, {"30", 5, 10}};
    const char *abc[] = {"a", "b", "c"}, *ac[] = {"a", "c"};

    legacy_file(&f, 1, t, 3, ok, 3, 0);
    check_legacy(ctx, "valid", &f, abc, 3);
    replace_all(&f, "_rebuild_tensor_v2\n", "_rebuild_tensor\n");
    check_legacy(ctx, "tensors of torch < 0.4 (_rebuild_tensor)", &f, abc, 3);
    legacy_file(&f, 1, t, 3, ok, 3, 33);
    check_legacy(ctx, "bytes after the last storage", &f, abc, 3);
    legacy_file(&f, 1, t, 3, ok, 2, 0);
    check_legacy(ctx, "a storage of the pickle not in the key list", &f, abc, 2);
    legacy_file(&f, 1, t, 3, (const lstorage[]){{"10", 3, 12}, {"30", 5, 10}}, 2, 0);
    check_legacy(ctx, "keys skipping one of the pickle", &f, ac, 2);
    legacy_file(&f, 0, t, 3, ok, 3, 0);
    check_legacy(ctx, "sys_info big-endian", &f, abc, 0);
    legacy_file(&f, 1, t, 3, ok, 0, 0);
    check_legacy(ctx, "no keys", &f, abc, 0);

    /* the pickle lies about a count: in elements, or in bytes as if of 1-byte elements */
    legacy_file(&f, 1, t, 3, (const lstorage[]){{"10", 3, 12}, {"20", 3, 24}, {"30", 5, 10}}, 3, 0);
    check_legacy(ctx, "count other than the pickle's", &f, abc, 1);
    legacy_file(&f, 1, t, 3, (const lstorage[]){{"10", 3, 12}, {"20", 16, 16}, {"30", 5, 10}}, 3, 0);
    check_legacy(ctx, "count in bytes", &f, abc, 1);
    /* keys repeated, or unknown to the pickle */
    legacy_file(&f, 1, t, 3, (const lstorage[]){{"10", 3, 12}, {"10", 3, 12}, {"20", 2, 16}}, 3, 0);
    check_legacy(ctx, "key repeated", &f, abc, 1);
    legacy_file(&f, 1, t, 3, (const lstorage[]){{"10", 3, 12}, {"99", 2, 16}, {"20", 2, 16}}, 3, 0);
    check_legacy(ctx, "key not in the pickle", &f, abc, 1);
    /* storages past the end; huge counts */
    legacy_file(&f, 1, t, 3, ok, 3, 0);
    f.n -= 4;
    check_legacy(ctx, "last storage cut short", &f, abc, 2);
    f.n -= 10;
    check_legacy(ctx, "cut inside a count", &f, abc, 2);
    const ltensor huge[] = {{"a", "FloatStorage", "10", 3}, {"b", "LongStorage", "20", 0x7fffffff}};
    legacy_file(&f, 1, huge, 2, (const lstorage[]){{"10", 3, 12}, {"20", 0x7fffffff, 16}}, 2, 0);
    check_legacy(ctx, "numel past the end", &f, abc, 1);
    const ltensor over[] = {{"a", "FloatStorage", "10", 3}, {"b", "LongStorage", "20", 1ull << 61}};
    legacy_file(&f, 1, over, 2, (const lstorage[]){{"10", 3, 12}, {"20", 1ull << 61, 16}}, 2, 0);
    check_legacy(ctx, "numel whose bytes overflow", &f, abc, 1);
    /* a storage type of unknown element size */
    const ltensor odd[] = {{"a", "FloatStorage", "10", 3}, {"b", "ComplexFloatStorage", "20", 2}};
    legacy_file(&f, 1, odd, 2, (const lstorage[]){{"10", 3, 12}, {"20", 2, 16}, {"30", 5, 10}}, 2, 0);
    check_legacy(ctx, "unknown storage type", &f, abc, 1);
}

int main(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    if (!ctx) {
        fprintf(stderr, "no context\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) test_file(ctx, files[i].file, files[i].fmt);
    test_truncations(ctx, "nested.pt");
    test_truncations(ctx, "empty.pt");
    test_truncations(ctx, "arrays.npz");
    test_mutations(ctx, "adamw.pt", 1500);
    test_mutations(ctx, "shared.pt", 1500);
    test_mutations(ctx, "arrays.npz", 500);
    test_truncations(ctx, "legacy1_nested.pt");
    test_truncations(ctx, "legacy2_empty.pt");
    test_mutations(ctx, "legacy1_shared.pt", 1500);
    test_mutations(ctx, "legacy2_fp32_state.pt", 1500);
    test_legacy_hostile(ctx);
    ckpz_ctx_free(ctx);
    return test_summary("test_torchzip");
}
