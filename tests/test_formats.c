/* test_formats.c — unit tests of lib/formats: safetensors, .npy and raw description,
 * the tiling invariants, the FMT_NEED_MORE flow, malformed input, and a mutation loop
 * over valid headers (run it under ASan/UBSan: every prefix handed to a reader is an
 * exactly-sized heap copy, so a read past it is caught).
 *
 * Standalone program: returns non-zero and prints each failed check. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/formats.h"

static int failures;
static const char *ctx = "";

#define CHECK(c)                                                                            \
    do {                                                                                    \
        if (!(c)) {                                                                         \
            fprintf(stderr, "%s:%d: [%s] check failed: %s\n", __FILE__, __LINE__, ctx, #c); \
            failures++;                                                                     \
        }                                                                                   \
    } while (0)

#define U CKPZ_SIZE_UNKNOWN
#define OPEN FMT_LEN_OPEN

static unsigned dsize(ckpz_dtype t)
{
    static const unsigned sz[CKPZ_DTYPE_COUNT_] = {1, 2, 2, 4, 8, 1, 1, 1, 2, 4, 8, 1, 2, 4, 8, 1};
    return (unsigned)t < CKPZ_DTYPE_COUNT_ ? sz[t] : 0;
}

/* ---- byte buffers ------------------------------------------------------------------- */

typedef struct {
    uint8_t *b;
    size_t n, cap;
} buf;

static void bput(buf *x, const void *p, size_t k)
{
    if (x->n + k > x->cap) {
        size_t c = x->cap ? x->cap : 256;
        while (c < x->n + k) c *= 2;
        x->b = realloc(x->b, c);
        if (!x->b) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        x->cap = c;
    }
    if (k) memcpy(x->b + x->n, p, k);
    x->n += k;
}

static void bbyte(buf *x, uint8_t c) { bput(x, &c, 1); }

static void bu64(buf *x, uint64_t v)
{
    for (int i = 0; i < 8; i++) bbyte(x, (uint8_t)(v >> (8 * i)));
}

static void bfree(buf *x)
{
    free(x->b);
    memset(x, 0, sizeof(*x));
}

/* A safetensors file: header length, json, `pad` spaces, then data_len bytes. */
static uint64_t make_st_pad(buf *x, const char *json, size_t pad, size_t data_len)
{
    size_t j = strlen(json);
    x->n = 0;
    bu64(x, j + pad);
    bput(x, json, j);
    for (size_t i = 0; i < pad; i++) bbyte(x, ' ');
    for (size_t i = 0; i < data_len; i++) bbyte(x, (uint8_t)(i * 31 + 7));
    return 8 + j + pad;
}

/* Same, padded to a multiple of 8 as the reference writer does. */
static uint64_t make_st(buf *x, const char *json, size_t data_len)
{
    size_t j = strlen(json);
    return make_st_pad(x, json, (8 - (8 + j) % 8) % 8, data_len);
}

/* ---- invariants ----------------------------------------------------------------------- */

/* The list tiles [0, end) without gaps, ends with one open segment, opaque runs are
 * merged, tensors are consistent with their shape and inside the file. */
static void check_tiling(const fmt_list *l, uint64_t total)
{
    CHECK(l->n >= 1);
    if (l->n < 1) return;
    uint64_t cur = 0;
    for (size_t i = 0; i < l->n; i++) {
        const fmt_segment *s = &l->seg[i];
        CHECK(s->offset == cur);
        CHECK((unsigned)s->dtype < CKPZ_DTYPE_COUNT_);
        if (i + 1 < l->n) {
            CHECK(s->length != OPEN);
        } else {
            CHECK(s->length == OPEN);
        }
        if (s->dtype == CKPZ_DTYPE_NONE) {
            CHECK(s->name == NULL);
            CHECK(s->ndim == 0 && s->shape == NULL);
            if (i + 1 < l->n) CHECK(s->length > 0);
            if (i > 0) CHECK(l->seg[i - 1].dtype != CKPZ_DTYPE_NONE);
        } else {
            CHECK(s->name != NULL);
            CHECK((s->ndim == 0) == (s->shape == NULL));
            if (s->length != OPEN) {
                uint64_t prod = dsize(s->dtype);
                int zero = 0;
                for (uint32_t d = 0; d < s->ndim; d++) {
                    if (s->shape[d] == 0) zero = 1;
                    else prod *= s->shape[d];
                }
                CHECK((zero ? 0 : prod) == s->length);
                if (total != U) CHECK(s->offset + s->length <= total);
            }
        }
        if (s->length == OPEN) break;
        CHECK(s->length <= UINT64_MAX - cur);
        cur += s->length;
    }
    if (total != U) CHECK(l->seg[l->n - 1].offset <= total);
}

/* Calls fmt_describe on an exactly-sized heap copy of b[0, len). */
static fmt_status describe(const uint8_t *b, size_t len, uint64_t total, ckpz_input_format f, ckpz_dtype raw,
                           fmt_list *l, size_t *need, char *why, size_t wl)
{
    uint8_t *c = malloc(len ? len : 1);
    if (len) memcpy(c, b, len);
    fmt_request rq = {.format = f, .raw_dtype = raw};
    fmt_status st = fmt_describe(c, len, total, &rq, l, need, why, wl);
    free(c);
    return st;
}

/* Whole input known. */
static fmt_status describe_all(const buf *x, ckpz_input_format f, fmt_list *l, char *why)
{
    size_t need = 0;
    fmt_status st = describe(x->b, x->n, x->n, f, CKPZ_DTYPE_NONE, l, &need, why, 256);
    CHECK(st != FMT_NEED_MORE);
    if (st == FMT_DONE) check_tiling(l, x->n);
    if (st == FMT_ERROR) CHECK(why[0] != '\0');
    return st;
}

/* A stream for the driver: exact-size heap copies of the input from byte 0, the size
 * known from the start or only once a fetch comes back short; checks what the driver
 * asks for after a reader's FMT_NEED_MORE. */
typedef struct {
    const buf *x;
    int size_known, rounds;
    uint8_t *copy;
    const fmt_list *l;
    size_t last;
} stream_src;

static fmt_status stream_fetch(void *opaque, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof)
{
    stream_src *s = opaque;
    CHECK(at == 0);
    if (s->copy) { /* a reader asked for more: more than it had, within the input's size */
        s->rounds++;
        CHECK(want > s->last && want <= FMT_PROBE_MAX);
        CHECK(!s->size_known || want <= s->x->n);
        CHECK(s->l->n == 0 && s->l->seg == NULL);
    }
    size_t n = want < s->x->n ? want : s->x->n;
    free(s->copy);
    s->copy = malloc(n ? n : 1);
    if (n) memcpy(s->copy, s->x->b, n);
    s->last = n;
    *p = s->copy;
    *len = n;
    *eof = want >= s->x->n;
    return FMT_DONE;
}

/* Streams through the driver: starts with `first` bytes and grows the prefix as the
 * reader asks. With size_known the total is given from the start, else only once the
 * input ends. */
static fmt_status describe_stream(const buf *x, size_t first, int size_known, ckpz_input_format f, ckpz_dtype raw,
                                  fmt_list *l, char *why, int *rounds)
{
    stream_src s = {x, size_known, 0, NULL, l, 0};
    fmt_source src = {stream_fetch, &s, size_known ? x->n : U};
    fmt_request rq = {.format = f, .raw_dtype = raw};
    fmt_status st = fmt_drive_describe(&src, first, &rq, l, why, 256);
    free(s.copy);
    *rounds = s.rounds;
    CHECK(st == FMT_DONE || st == FMT_ERROR);
    if (st == FMT_DONE) check_tiling(l, size_known || s.last == x->n ? x->n : U);
    return st;
}

typedef struct {
    ckpz_dtype dt;
    const char *name;
    uint64_t off, len;
} xseg;

static void expect(const fmt_list *l, const xseg *e, size_t n)
{
    CHECK(l->n == n);
    if (l->n != n) {
        for (size_t i = 0; i < l->n; i++)
            fprintf(stderr, "    seg %zu: dtype %d name %s off %" PRIu64 " len %" PRIu64 "\n", i, (int)l->seg[i].dtype,
                    l->seg[i].name ? l->seg[i].name : "(null)", l->seg[i].offset, l->seg[i].length);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const fmt_segment *s = &l->seg[i];
        CHECK(s->dtype == e[i].dt);
        CHECK(s->offset == e[i].off);
        CHECK(s->length == e[i].len);
        if (e[i].name) CHECK(s->name && strcmp(s->name, e[i].name) == 0);
        else CHECK(s->name == NULL);
    }
}

static void expect_shape(const fmt_segment *s, uint32_t ndim, const uint64_t *dims)
{
    CHECK(s->ndim == ndim);
    if (s->ndim == ndim)
        for (uint32_t i = 0; i < ndim; i++) CHECK(s->shape[i] == dims[i]);
}

/* ---- safetensors ------------------------------------------------------------------------ */

static void test_st_basic(void)
{
    ctx = "st basic";
    buf x = {0};
    fmt_list l;
    char why[256];
    const char *js = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}";
    uint64_t base = make_st(&x, js, 32);
    CHECK(base % 8 == 0);
    for (int f = 0; f < 2; f++) {
        CHECK(describe_all(&x, f ? CKPZ_INPUT_SAFETENSORS : CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
        CHECK(l.format == CKPZ_INPUT_SAFETENSORS);
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                    {CKPZ_DTYPE_F32, "a", base, 24},
                    {CKPZ_DTYPE_BF16, "b", base + 24, 8},
                    {CKPZ_DTYPE_NONE, NULL, base + 32, OPEN}};
        expect(&l, e, 4);
        if (l.n == 4) {
            expect_shape(&l.seg[1], 2, (uint64_t[]){2, 3});
            expect_shape(&l.seg[2], 1, (uint64_t[]){4});
            /* the JSON header alone is marked text (coded with LZ's fast level) */
            CHECK(l.seg[0].text && !l.seg[1].text && !l.seg[2].text && !l.seg[3].text);
        }
        fmt_list_free(&l);
        CHECK(l.n == 0 && l.seg == NULL);
    }
    /* Trailing bytes after the data: the open tail covers them. */
    bput(&x, "trailing", 8);
    CHECK(describe_all(&x, CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
    CHECK(l.n == 4 && l.seg[3].offset == base + 32);
    fmt_list_free(&l);
    /* Header with no padding at all, and with lots of padding and whitespace. */
    make_st_pad(&x, js, 0, 32);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    CHECK(l.n == 4 && l.seg[1].dtype == CKPZ_DTYPE_F32);
    fmt_list_free(&l);
    base = make_st_pad(&x, js, 100, 32);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    CHECK(l.n == 4 && l.seg[1].offset == base);
    fmt_list_free(&l);
    base = make_st(&x,
                   "{ \"a\" : {\n\t\"dtype\" : \"F32\" , \"shape\" : [ 2 , 3 ] ,\r\n"
                   "\"data_offsets\" : [ 0 , 24 ] } , \"__metadata__\" : { } }\n",
                   24);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                    {CKPZ_DTYPE_F32, "a", base, 24},
                    {CKPZ_DTYPE_NONE, NULL, base + 24, OPEN}};
        expect(&l, e, 3);
    }
    fmt_list_free(&l);
    /* Empty header "{}": header opaque, then the tail. */
    make_st(&x, "{}", 0);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, OPEN}};
        expect(&l, e, 1);
    }
    CHECK(l.format == CKPZ_INPUT_SAFETENSORS);
    fmt_list_free(&l);
    bfree(&x);
}

static void test_st_dtypes(void)
{
    ctx = "st dtypes";
    static const struct {
        const char *name;
        ckpz_dtype dt;
    } t[] = {{"F64", CKPZ_DTYPE_F64},   {"F32", CKPZ_DTYPE_F32},        {"F16", CKPZ_DTYPE_F16},
             {"BF16", CKPZ_DTYPE_BF16}, {"F8_E4M3", CKPZ_DTYPE_F8E4M3}, {"F8_E5M2", CKPZ_DTYPE_F8E5M2},
             {"I64", CKPZ_DTYPE_I64},   {"I32", CKPZ_DTYPE_I32},        {"I16", CKPZ_DTYPE_I16},
             {"I8", CKPZ_DTYPE_I8},     {"U64", CKPZ_DTYPE_U64},        {"U32", CKPZ_DTYPE_U32},
             {"U16", CKPZ_DTYPE_U16},   {"U8", CKPZ_DTYPE_U8},          {"BOOL", CKPZ_DTYPE_BOOL}};
    size_t nt = sizeof(t) / sizeof(t[0]);
    char js[4096];
    size_t k = 0;
    uint64_t off = 0;
    k += snprintf(js + k, sizeof(js) - k, "{");
    for (size_t i = 0; i < nt; i++) {
        uint64_t len = 3 * dsize(t[i].dt); /* odd element count */
        k += snprintf(js + k, sizeof(js) - k,
                      "%s\"t_%s\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                      i ? "," : "", t[i].name, t[i].name, off, off + len);
        off += len;
    }
    snprintf(js + k, sizeof(js) - k, "}");
    buf x = {0};
    fmt_list l;
    char why[256];
    uint64_t base = make_st(&x, js, off);
    CHECK(describe_all(&x, CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
    CHECK(l.n == nt + 2);
    if (l.n == nt + 2) {
        off = 0;
        for (size_t i = 0; i < nt; i++) {
            const fmt_segment *s = &l.seg[i + 1];
            char nm[32];
            snprintf(nm, sizeof(nm), "t_%s", t[i].name);
            CHECK(s->dtype == t[i].dt);
            CHECK(strcmp(s->name, nm) == 0);
            CHECK(s->offset == base + off);
            CHECK(s->length == 3 * dsize(t[i].dt));
            off += 3 * dsize(t[i].dt);
        }
    }
    fmt_list_free(&l);
    bfree(&x);
}

static void test_st_order_names_zero(void)
{
    ctx = "st shuffled order, names, empty tensors";
    buf x = {0};
    fmt_list l;
    char why[256];
    /* Listed out of order, metadata in the middle, unicode names, escapes. */
    const char *js = "{\"z\\u00e9ta\\ud83d\\ude00\":{\"data_offsets\":[16,24],\"shape\":[2],\"dtype\":\"F32\"},"
                     "\"__metadata__\":{\"format\":\"pt\",\"k\":\"v \\\" \\\\ \\u1234\"},"
                     "\"\xc3\xa9t\xc3\xa9\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                     "\"q\\\"\\\\\\/\\n\\t\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8,16]},"
                     "\"empty1\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[24,24]},"
                     "\"empty0\":{\"dtype\":\"F32\",\"shape\":[2,0,3],\"data_offsets\":[0,0]},"
                     "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[24,28]}}";
    uint64_t base = make_st(&x, js, 28);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                {CKPZ_DTYPE_F32, "empty0", base, 0},
                {CKPZ_DTYPE_I64, "\xc3\xa9t\xc3\xa9", base, 8},
                {CKPZ_DTYPE_U8, "q\"\\/\n\t", base + 8, 8},
                {CKPZ_DTYPE_F32, "z\xc3\xa9ta\xf0\x9f\x98\x80", base + 16, 8},
                {CKPZ_DTYPE_F16, "empty1", base + 24, 0},
                {CKPZ_DTYPE_F32, "scalar", base + 24, 4},
                {CKPZ_DTYPE_NONE, NULL, base + 28, OPEN}};
    expect(&l, e, 8);
    if (l.n == 8) {
        expect_shape(&l.seg[1], 3, (uint64_t[]){2, 0, 3});
        expect_shape(&l.seg[6], 0, NULL);
    }
    fmt_list_free(&l);

    /* Gaps between tensors and before the first one become opaque. */
    js = "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    base = make_st(&x, js, 40);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    {
        xseg g[] = {{CKPZ_DTYPE_NONE, NULL, 0, base + 8},
                    {CKPZ_DTYPE_F32, "a", base + 8, 8},
                    {CKPZ_DTYPE_NONE, NULL, base + 16, 8},
                    {CKPZ_DTYPE_F32, "b", base + 24, 8},
                    {CKPZ_DTYPE_NONE, NULL, base + 32, OPEN}};
        expect(&l, g, 5);
    }
    fmt_list_free(&l);

    /* An empty tensor inside another tensor's bytes holds nothing: dropped. */
    js = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}";
    base = make_st(&x, js, 16);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    {
        xseg g[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                    {CKPZ_DTYPE_F32, "a", base, 16},
                    {CKPZ_DTYPE_NONE, NULL, base + 16, OPEN}};
        expect(&l, g, 3);
    }
    fmt_list_free(&l);
    bfree(&x);
}

/* Many entries in offset order (pushed as parsed) with a gap before entry 200 (the
 * list's tiling leaves its in-place pass there), and the same with entry 0 listed last:
 * 299 entries already pushed, one of them with an escaped name, become records to be
 * sorted. Both describe the same list. */
static void test_st_many_in_order(void)
{
    ctx = "st many entries, in order and one late";
    enum { N = 300, GAP = 200 };
    buf x = {0};
    fmt_list l;
    char why[256], *js = malloc(N * 96 + 8);
    CHECK(js != NULL);
    for (int late = 0; js && late < 2; late++) {
        size_t at = 0;
        js[at++] = '{';
        for (int k = 0; k < N; k++) {
            int i = late ? (k + 1) % N : k;
            uint64_t off = 8 * (uint64_t)i + (i >= GAP ? 8 : 0);
            at += (size_t)sprintf(js + at,
                                  "%s\"t%s%03d\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%llu,%llu]}",
                                  k ? "," : "", i == 7 ? "\\u00e9" : "", i, (unsigned long long)off,
                                  (unsigned long long)off + 8);
        }
        js[at++] = '}';
        js[at] = '\0';
        uint64_t base = make_st(&x, js, 8 * N + 8);
        CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
        CHECK(l.n == N + 3);
        if (l.n == N + 3) {
            CHECK(l.seg[0].dtype == CKPZ_DTYPE_NONE && l.seg[0].length == base && l.seg[0].text);
            for (int i = 0; i < N; i++) {
                const fmt_segment *g = &l.seg[1 + i + (i >= GAP)];
                char nm[16];
                snprintf(nm, sizeof nm, "t%s%03d", i == 7 ? "\xc3\xa9" : "", i);
                CHECK(g->dtype == CKPZ_DTYPE_F32 && g->name && !strcmp(g->name, nm));
                CHECK(g->offset == base + 8 * (uint64_t)i + (i >= GAP ? 8 : 0) && g->length == 8);
                expect_shape(g, 1, (uint64_t[]){2});
            }
            const fmt_segment *gap = &l.seg[1 + GAP];
            CHECK(gap->dtype == CKPZ_DTYPE_NONE && gap->offset == base + 8 * GAP && gap->length == 8);
            CHECK(l.seg[N + 2].dtype == CKPZ_DTYPE_NONE && l.seg[N + 2].length == OPEN);
        }
        fmt_list_free(&l);
    }
    free(js);
    bfree(&x);
}

/* A list given a spare (fmt_request.spare) takes its segment array and name blocks before
 * allocating, and fmt_list_recycle hands them back: the second description of the same
 * header is the first one's, in the first one's memory. */
static void test_list_spare(void)
{
    ctx = "list spare";
    enum { N = 500 };
    buf x = {0};
    fmt_spare k = {0};
    fmt_request rq = {.format = CKPZ_INPUT_SAFETENSORS, .spare = &k};
    fmt_list l;
    char why[256], *js = malloc(N * 96 + 8), first[32] = "";
    CHECK(js != NULL);
    size_t at = 0;
    if (js) {
        js[at++] = '{';
        for (int i = 0; i < N; i++)
            at += (size_t)sprintf(js + at,
                                  "%s\"layer.%03d.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%d,%d]}",
                                  i ? "," : "", i, 8 * i, 8 * i + 8);
        js[at++] = '}';
        js[at] = '\0';
        make_st(&x, js, 8 * N);
    }
    fmt_segment *seg = NULL;
    for (int round = 0; js && round < 2; round++) {
        size_t need = 0;
        CHECK(fmt_describe(x.b, x.n, x.n, &rq, &l, &need, why, sizeof why) == FMT_DONE);
        CHECK(l.n == N + 2 && l.spare == &k);
        if (l.n == N + 2) {
            CHECK(l.seg[1].name && !strcmp(l.seg[1].name, "layer.000.w") && l.seg[N].ndim == 1);
            if (round) CHECK(l.seg == seg && !strcmp(first, l.seg[N].name) && k.seg == NULL); /* taken back */
            else snprintf(first, sizeof first, "%s", l.seg[N].name);
        }
        seg = l.seg;
        fmt_list_recycle(&l);
        CHECK(k.seg == seg && k.blocks != NULL && l.seg == NULL && l.blocks == NULL);
    }
    fmt_spare_free(&k);
    CHECK(k.seg == NULL && k.blocks == NULL);
    free(js);
    bfree(&x);
}

/* The reader's fast paths (keys, dtypes and number arrays as writers put them, plain
 * names) and json.c's general ones read the same: a compact header and the same JSON
 * with a space before every ':', ',' and ']' (which only the general paths take)
 * describe the same list: numbers of 1 to 19 digits (in the shapes of empty tensors),
 * escaped and long names, six dtypes, in offset order and not. */
static void test_st_fast_general_same(void)
{
    ctx = "st fast and general paths";
    enum { N = 64 };
    buf x = {0}, y = {0};
    fmt_list a, b;
    char why[256], *js = malloc(N * 200 + 8), *sp = malloc(2 * (N * 200 + 8));
    static const char *const dts[] = {"U8", "F16", "F32", "F64", "BF16", "I64"};
    static const unsigned esz[] = {1, 2, 4, 8, 2, 8};
    uint64_t start[N + 1] = {0}, big = 1;
    for (int i = 0; i < N; i++) start[i + 1] = start[i] + (i % 4 ? esz[i % 6] * (1 + (uint64_t)i) * 3 : 0);
    CHECK(js && sp);
    for (int shuffled = 0; js && sp && shuffled < 2; shuffled++) {
        size_t at = 0;
        js[at++] = '{';
        for (int k = 0; k < N; k++) {
            int i = shuffled ? (k * 37) % N : k;
            big = 1;
            for (int d = 0; d < i % 19; d++) big *= 10;
            uint64_t d0 = i % 4 ? 1 + (uint64_t)i : 0, d1 = i % 4 ? 3 : big + (uint64_t)i;
            at += (size_t)sprintf(js + at,
                                  "%s\"%s%d%s\":{\"dtype\":\"%s\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}",
                                  k ? "," : "", i % 4 == 1 ? "n\\u00e9\\\"" : "layers.", i,
                                  i % 7 == 3 ? ".a_rather_long_name_of_more_than_thirty_two_bytes" : "", dts[i % 6],
                                  (unsigned long long)d0, (unsigned long long)d1, (unsigned long long)start[i],
                                  (unsigned long long)start[i + 1]);
        }
        js[at++] = '}';
        js[at] = '\0';
        size_t m = 0;
        for (size_t j = 0; j < at; j++) { /* names hold none of ':', ',' and ']' */
            if (js[j] == ':' || js[j] == ',' || js[j] == ']') sp[m++] = ' ';
            sp[m++] = js[j];
        }
        sp[m] = '\0';
        uint64_t xb = make_st(&x, js, (size_t)start[N]), yb = make_st(&y, sp, (size_t)start[N]);
        CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &a, why) == FMT_DONE);
        CHECK(describe_all(&y, CKPZ_INPUT_SAFETENSORS, &b, why) == FMT_DONE);
        CHECK(a.n == b.n && a.n == N + 2);
        for (size_t j = 1; j < a.n && j < b.n; j++) {
            const fmt_segment *g = &a.seg[j], *h = &b.seg[j];
            CHECK(g->dtype == h->dtype && g->ndim == h->ndim && g->length == h->length);
            CHECK(g->offset - xb == h->offset - yb);
            CHECK((!g->name && !h->name) || (g->name && h->name && !strcmp(g->name, h->name)));
            for (uint32_t d = 0; d < g->ndim && d < h->ndim; d++) CHECK(g->shape[d] == h->shape[d]);
        }
        /* the 19-digit dimension read as such: entry 56's shape is [0, 10^18 + 56] */
        for (size_t j = 1; j < a.n; j++)
            if (a.seg[j].name && !strcmp(a.seg[j].name, "layers.56")) {
                CHECK(a.seg[j].ndim == 2 && a.seg[j].shape[1] == 1000000000000000056ull);
            }
        fmt_list_free(&a);
        fmt_list_free(&b);
    }
    free(js);
    free(sp);
    bfree(&x);
    bfree(&y);
}

/* The bad entry's bytes are opaque and the good ones stay tensors. */
static void test_st_bad_entries(void)
{
    buf x = {0};
    fmt_list l;
    char why[256];
    static const struct {
        const char *what, *bad;
    } cases[] = {
        {"unknown dtype", "{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[8,16]}"},
        {"dtype not a string", "{\"dtype\":4,\"shape\":[2],\"data_offsets\":[8,16]}"},
        {"size mismatch", "{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,16]}"},
        {"begin > end", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,8]}"},
        {"end past the file", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,999]}"},
        {"huge offsets", "{\"dtype\":\"U8\",\"shape\":[8],"
                         "\"data_offsets\":[18446744073709551600,18446744073709551608]}"},
        {"offset too big", "{\"dtype\":\"U8\",\"shape\":[8],"
                           "\"data_offsets\":[8,18446744073709551616]}"},
        {"negative offset", "{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[-8,16]}"},
        {"float offset", "{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8.0,16]}"},
        {"three offsets", "{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8,16,24]}"},
        {"missing shape", "{\"dtype\":\"U8\",\"data_offsets\":[8,16]}"},
        {"missing dtype", "{\"shape\":[8],\"data_offsets\":[8,16]}"},
        {"missing offsets", "{\"dtype\":\"U8\",\"shape\":[8]}"},
        {"duplicate field", "{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8,16]}"},
        {"shape of strings", "{\"dtype\":\"U8\",\"shape\":[\"8\"],\"data_offsets\":[8,16]}"},
        {"negative dim", "{\"dtype\":\"U8\",\"shape\":[-8],\"data_offsets\":[8,16]}"},
        {"shape overflow", "{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                           "\"data_offsets\":[8,16]}"},
        {"shape overflow wraps to size",
         "{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,1,8],\"data_offsets\":[8,16]}"},
        {"too many dims", "{\"dtype\":\"U8\",\"shape\":[8,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                          "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                          "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[8,16]}"},
        {"nul in name", NULL},
        {"overlap", "{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}"},
        {"same range twice", "{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        ctx = cases[c].what;
        char js[1024];
        if (cases[c].bad)
            snprintf(js, sizeof(js),
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"bad\":%s,"
                     "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
                     cases[c].bad);
        else
            snprintf(js, sizeof(js),
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\\u0000d\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                     "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}");
        uint64_t base = make_st(&x, js, 24);
        CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
        int overlap_a = strcmp(cases[c].what, "overlap") == 0 || strcmp(cases[c].what, "same range twice") == 0;
        if (overlap_a) {
            /* "a" and "bad" overlap: both opaque, up to the end of the longer one. */
            xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base + 16},
                        {CKPZ_DTYPE_F32, "c", base + 16, 8},
                        {CKPZ_DTYPE_NONE, NULL, base + 24, OPEN}};
            expect(&l, e, 3);
        } else {
            xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                        {CKPZ_DTYPE_F32, "a", base, 8},
                        {CKPZ_DTYPE_NONE, NULL, base + 8, 8},
                        {CKPZ_DTYPE_F32, "c", base + 16, 8},
                        {CKPZ_DTYPE_NONE, NULL, base + 24, OPEN}};
            expect(&l, e, 5);
        }
        fmt_list_free(&l);
    }
    /* A chain of overlaps: a-b overlap, b-c overlap: all three opaque, d stays. */
    ctx = "overlap chain";
    const char *js = "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[6,14]},"
                     "\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[12,16]},"
                     "\"d\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[16,20]}}";
    uint64_t base = make_st(&x, js, 20);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base + 16},
                    {CKPZ_DTYPE_U8, "d", base + 16, 4},
                    {CKPZ_DTYPE_NONE, NULL, base + 20, OPEN}};
        expect(&l, e, 3);
    }
    fmt_list_free(&l);

    /* Data past the end of a known-size file: opaque; size unknown: kept. */
    ctx = "truncated data";
    js = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    base = make_st(&x, js, 10);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, OPEN}};
        expect(&l, e, 1);
    }
    fmt_list_free(&l);
    size_t need;
    CHECK(describe(x.b, base, U, CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                    {CKPZ_DTYPE_F32, "a", base, 16},
                    {CKPZ_DTYPE_NONE, NULL, base + 16, OPEN}};
        expect(&l, e, 3);
    }
    check_tiling(&l, U);
    fmt_list_free(&l);

    /* Non-object values at the top level are ignored (their bytes are opaque). */
    ctx = "non-object entries";
    js = "{\"n\":1,\"s\":\"x\",\"l\":[1,2],\"t\":true,\"z\":null,"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":{\"k\":[1]}}}";
    base = make_st(&x, js, 4);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                    {CKPZ_DTYPE_F32, "a", base, 4},
                    {CKPZ_DTYPE_NONE, NULL, base + 4, OPEN}};
        expect(&l, e, 3);
    }
    fmt_list_free(&l);
    bfree(&x);
}

static int contains(const char *s, const char *w) { return strstr(s, w) != NULL; }

/* Structure errors: forced -> FMT_ERROR with a reason; AUTO -> raw opaque. */
static void test_st_malformed(void)
{
    buf x = {0};
    fmt_list l;
    char why[256];
    size_t need;
    static const struct {
        const char *what, *json, *reason;
    } cases[] = {
        {"truncated JSON", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_", "truncated"},
        {"truncated string", "{\"a", "unterminated"},
        {"not an object", "[1,2,3]", "start with"},
        {"leading space", " {}", "start with"},
        {"trailing comma", "{\"a\":1,}", "expected a string"},
        {"missing colon", "{\"a\" 1}", "expected ':'"},
        {"garbage after", "{}x", "after the JSON"},
        {"two objects", "{}{}", "after the JSON"},
        {"bad literal", "{\"a\":tru}", "unexpected"},
        {"bad number", "{\"a\":01}", "expected ','"},
        {"bad number 2", "{\"a\":1.}", "fraction"},
        {"bad number 3", "{\"a\":-}", "number"},
        {"bad escape", "{\"a\\x\":1}", "escape"},
        {"lone high surrogate", "{\"\\ud800\":1}", "surrogate"},
        {"lone low surrogate", "{\"\\udc00\":1}", "surrogate"},
        {"bad hex", "{\"\\u12g4\":1}", "escape"},
        {"raw tab in string", "{\"a\tb\":1}", "control"},
        {"invalid utf-8", "{\"a\xff\":1}", "UTF-8"},
        {"overlong utf-8", "{\"a\xc0\xaf\":1}", "UTF-8"},
        {"utf-8 surrogate", "{\"a\xed\xa0\x80\":1}", "UTF-8"},
        {"truncated utf-8", "{\"a\xe2\x82\":1}", "UTF-8"},
        {"unclosed metadata", "{\"__metadata__\":{\"a\":\"b\"", "truncated"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        ctx = cases[c].what;
        make_st(&x, cases[c].json, 16);
        CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
        CHECK(contains(why, cases[c].reason));
        if (!contains(why, cases[c].reason)) fprintf(stderr, "    why: %s\n", why);
        CHECK(l.n == 0 && l.seg == NULL);
        fmt_list_free(&l);
        CHECK(describe_all(&x, CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
        CHECK(l.format == CKPZ_INPUT_RAW);
        CHECK(l.n == 1);
        fmt_list_free(&l);
    }

    /* Deep nesting: 60 levels are fine, 100 are refused. */
    ctx = "deep nesting";
    char js[1024];
    for (int depth = 60; depth <= 100; depth += 40) {
        size_t k = 0;
        k += snprintf(js + k, sizeof(js) - k, "{\"__metadata__\":");
        for (int i = 0; i < depth; i++) js[k++] = '[';
        for (int i = 0; i < depth; i++) js[k++] = ']';
        snprintf(js + k, sizeof(js) - k, "}");
        make_st(&x, js, 0);
        fmt_status st = describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why);
        if (depth == 60) {
            CHECK(st == FMT_DONE);
        } else {
            CHECK(st == FMT_ERROR);
            CHECK(contains(why, "nested too deeply"));
        }
        fmt_list_free(&l);
    }

    /* Header length larger than the file. */
    ctx = "huge header length";
    x.n = 0;
    bu64(&x, 1234567890123ull);
    bput(&x, "{}      ", 8);
    for (int i = 0; i < 4080; i++) bbyte(&x, 0);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
    CHECK(contains(why, "safetensors header length 1234567890123 exceeds the file size 4096"));
    CHECK(describe_all(&x, CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, OPEN}};
        expect(&l, e, 1);
    }
    fmt_list_free(&l);
    /* Size unknown: the probe limit decides. */
    CHECK(describe(x.b, 64, U, CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_ERROR);
    CHECK(contains(why, "exceeds the limit"));
    /* Length fields 0, 1 and 2^64-1. */
    uint64_t lens[] = {0, 1, UINT64_MAX, FMT_PROBE_MAX};
    for (size_t i = 0; i < 4; i++) {
        x.n = 0;
        bu64(&x, lens[i]);
        bput(&x, "{}", 2);
        CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
        CHECK(describe(x.b, x.n, U, CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_ERROR);
    }
    /* Files shorter than the length field. */
    ctx = "tiny files";
    for (size_t n = 0; n < 8; n++) {
        x.n = n;
        memset(x.b, '{', n);
        CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
        CHECK(contains(why, "too short"));
        CHECK(describe_all(&x, CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
        CHECK(l.n == 1 && l.format == CKPZ_INPUT_RAW);
        fmt_list_free(&l);
    }

    /* Nonsense bytes. */
    ctx = "nonsense";
    uint64_t r = 88172645463325252ull;
    x.n = 0;
    for (int i = 0; i < 1000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        bbyte(&x, (uint8_t)r);
    }
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
    CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_ERROR);
    CHECK(describe_all(&x, CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
    CHECK(l.n == 1 && l.format == CKPZ_INPUT_RAW);
    fmt_list_free(&l);
    /* Plausible small length but binary JSON: declined before asking for more. */
    x.n = 0;
    bu64(&x, 100000);
    bbyte(&x, '{');
    for (int i = 0; i < 100; i++) bbyte(&x, (uint8_t)i);
    CHECK(describe(x.b, x.n, U, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_DONE);
    fmt_list_free(&l);
    bfree(&x);
}

/* The header parts the cases of test_st_in_place share: escaped keys and dtype, numbers a
 * dimension must not be (past 2^64, a fraction), an exponent and a 19-digit dimension. */
#define ST_ESCAPED                                                                      \
    "{\"\\u005f_metadata__\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}," \
    "\"e\\u0073c\":{\"dt\\u0079pe\":\"F\\u00332\",\"sh\\u0061pe\":[2],\"data\\u005foffsets\":[0,8]},"
#define ST_NOT_DIMS                                                                          \
    "\"big\":{\"dtype\":\"U8\",\"shape\":[18446744073709551615],\"data_offsets\":[12,16]},"  \
    "\"huge\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[16,20]}," \
    "\"frac\":{\"dtype\":\"U8\",\"shape\":[4.0],\"data_offsets\":[20,24]},"
#define ST_EXP_N19                                                                     \
    "\"exp\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[8,12]}," ST_NOT_DIMS \
    "\"n19\":{\"dtype\":\"U8\",\"shape\":[1000000000000000000],\"data_offsets\":[24,28]},"

/* A safetensors file of header JS and N data bytes, refused as a whole for a number that
 * is not JSON. */
static void st_refused(buf *x, const char *js, uint64_t n)
{
    fmt_list l;
    char why[256];
    make_st(x, js, n);
    CHECK(describe_all(x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
    CHECK(contains(why, "expected ','"));
    fmt_list_free(&l);
}

/* The reader takes keys, names and the dtype in place when they hold no escape, and
 * numbers in one pass: the same strings escaped, and the numbers it leaves to the full
 * parser (leading zeros, 20 digits, a fraction, an exponent), must read as before. */
static void test_st_in_place(void)
{
    buf x = {0};
    fmt_list l;
    char why[256];
    ctx = "st escaped keys, dtype and metadata key";
    /* leading zeros are not JSON: the whole header is refused */
    st_refused(&x,
               ST_ESCAPED
               "\"plain\":{\"dtype\":\"F32\",\"shape\":[00000000000000000001e0],\"data_offsets\":[8,12]}," ST_NOT_DIMS
               "\"ok19\":{\"dtype\":\"U8\",\"shape\":[0000004],\"data_offsets\":[24,28]}}",
               28);
    st_refused(&x,
               ST_ESCAPED ST_EXP_N19
               "\"four\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0000000000000000024,28]}}",
               28);
    const char *js = ST_ESCAPED ST_EXP_N19 "\"four\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[28,32]}}";
    uint64_t base = make_st(&x, js, 32);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_DONE);
    /* the escaped metadata key is still the metadata (no tensor), the escaped keys and
     * dtype still name the fields; 1e0, 4.0 and numbers past 2^64 are no dimension, a
     * 19-digit one is (and its size then does not match) */
    xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                {CKPZ_DTYPE_F32, "esc", base, 8},
                {CKPZ_DTYPE_NONE, NULL, base + 8, 20},
                {CKPZ_DTYPE_U8, "four", base + 28, 4},
                {CKPZ_DTYPE_NONE, NULL, base + 32, OPEN}};
    expect(&l, e, 5);
    if (l.n == 5) expect_shape(&l.seg[1], 1, (uint64_t[]){2});
    fmt_list_free(&l);

    /* A control byte after a syntax error: the message names the control byte, as when
     * the header was scanned for them before it was parsed. */
    ctx = "st control byte after a syntax error";
    make_st(&x, "{\"a\" 1, \"b\x01\":2}", 16);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
    CHECK(contains(why, "control byte 0x01"));
    fmt_list_free(&l);
    bfree(&x);
}

static void test_st_need_more(void)
{
    ctx = "st need more";
    buf x = {0};
    fmt_list l;
    char why[256];
    char js[20000];
    size_t k = 0;
    k += snprintf(js + k, sizeof(js) - k, "{\"__metadata__\":{\"big\":\"");
    for (int i = 0; i < 10000; i++) js[k++] = 'x';
    snprintf(js + k, sizeof(js) - k, "\"},\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]}}");
    uint64_t base = make_st(&x, js, 6);
    static const size_t firsts[] = {0, 1, 7, 8, 9, 64, 4096};
    for (int known = 0; known < 2; known++) {
        for (size_t f = 0; f < sizeof(firsts) / sizeof(firsts[0]); f++) {
            int rounds;
            CHECK(describe_stream(&x, firsts[f], known, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, &l, why, &rounds) ==
                  FMT_DONE);
            CHECK(rounds >= 1 && rounds <= 2);
            xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, base},
                        {CKPZ_DTYPE_BF16, "w", base, 6},
                        {CKPZ_DTYPE_NONE, NULL, base + 6, OPEN}};
            expect(&l, e, 3);
            fmt_list_free(&l);
        }
    }
    /* The exact request: 8 bytes first, then 8 + N. */
    size_t need = 0;
    CHECK(describe(x.b, 4, U, CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_NEED_MORE);
    CHECK(need == 8);
    CHECK(describe(x.b, 100, U, CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_NEED_MORE);
    CHECK(need == base);
    CHECK(describe(x.b, 100, x.n, CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) ==
          FMT_NEED_MORE);
    CHECK(need == base);
    /* The input ends before the header does. */
    CHECK(describe(x.b, 100, 100, CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_ERROR);
    CHECK(contains(why, "exceeds the file size 100"));
    CHECK(describe(x.b, 100, 100, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_DONE);
    CHECK(l.n == 1 && l.format == CKPZ_INPUT_RAW);
    fmt_list_free(&l);
    bfree(&x);
}

/* ---- npy -------------------------------------------------------------------------------- */

/* A .npy file: magic, version, header dict padded to a multiple of 64 with '\n'. */
static uint64_t make_npy(buf *x, int major, const char *dict, size_t data_len)
{
    size_t pre = major == 1 ? 10 : 12, d = strlen(dict);
    size_t hl = d + 1;
    hl += (64 - (pre + hl) % 64) % 64;
    x->n = 0;
    bput(x, "\x93NUMPY", 6);
    bbyte(x, (uint8_t)major);
    bbyte(x, 0);
    bbyte(x, (uint8_t)hl);
    bbyte(x, (uint8_t)(hl >> 8));
    if (major != 1) {
        bbyte(x, 0);
        bbyte(x, 0);
    }
    bput(x, dict, d);
    for (size_t i = d; i + 1 < hl; i++) bbyte(x, ' ');
    bbyte(x, '\n');
    for (size_t i = 0; i < data_len; i++) bbyte(x, (uint8_t)(i * 13 + 1));
    return pre + hl;
}

static void test_npy(void)
{
    buf x = {0};
    fmt_list l;
    char why[256];
    static const struct {
        const char *descr;
        ckpz_dtype dt;
    } t[] = {{"<f2", CKPZ_DTYPE_F16}, {"<f4", CKPZ_DTYPE_F32}, {"<f8", CKPZ_DTYPE_F64}, {"|i1", CKPZ_DTYPE_I8},
             {"<i2", CKPZ_DTYPE_I16}, {"<i4", CKPZ_DTYPE_I32}, {"<i8", CKPZ_DTYPE_I64}, {"|u1", CKPZ_DTYPE_U8},
             {"<u2", CKPZ_DTYPE_U16}, {"<u4", CKPZ_DTYPE_U32}, {"<u8", CKPZ_DTYPE_U64}, {"|b1", CKPZ_DTYPE_BOOL},
             {"<V2", CKPZ_DTYPE_BF16}};
    for (int major = 1; major <= 3; major++) {
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
            ctx = t[i].descr;
            char d[256];
            snprintf(d, sizeof(d), "{'descr': '%s', 'fortran_order': False, 'shape': (3, 5), }", t[i].descr);
            uint64_t len = 15 * dsize(t[i].dt);
            uint64_t ds = make_npy(&x, major, d, len);
            CHECK(ds % 64 == 0);
            for (int f = 0; f < 2; f++) {
                CHECK(describe_all(&x, f ? CKPZ_INPUT_NPY : CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
                CHECK(l.format == CKPZ_INPUT_NPY);
                xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, ds},
                            {t[i].dt, "array", ds, len},
                            {CKPZ_DTYPE_NONE, NULL, ds + len, OPEN}};
                expect(&l, e, 3);
                if (l.n == 3) expect_shape(&l.seg[1], 2, (uint64_t[]){3, 5});
                fmt_list_free(&l);
            }
        }
    }
    ctx = "npy shapes";
    static const struct {
        const char *dict;
        uint32_t ndim;
        uint64_t dims[3];
        uint64_t bytes;
    } s[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 0, {0}, 4},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }", 1, {7}, 28},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", 1, {0}, 0},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 99999999999999999), }",
         2,
         {0, 99999999999999999ull},
         0},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 1), }", 3, {2, 3, 1}, 24},
        {"{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i2\"}", 2, {2, 3}, 12},
        {"{'descr':'<u1','fortran_order':False,'shape':(5,)}", 1, {5}, 5},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        uint64_t ds = make_npy(&x, 1, s[i].dict, s[i].bytes + 3);
        CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_DONE);
        CHECK(l.n == 3);
        if (l.n == 3) {
            CHECK(l.seg[1].offset == ds && l.seg[1].length == s[i].bytes);
            CHECK(strcmp(l.seg[1].name, "array") == 0);
            expect_shape(&l.seg[1], s[i].ndim, s[i].dims);
            CHECK(l.seg[2].offset == ds + s[i].bytes);
        }
        fmt_list_free(&l);
    }
    /* Data the library does not model, or cannot trust: one opaque run. */
    static const char *opaque[] = {
        "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (3,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", /* truncated data */
    };
    for (size_t i = 0; i < sizeof(opaque) / sizeof(opaque[0]); i++) {
        ctx = opaque[i];
        make_npy(&x, 1, opaque[i], 12);
        CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_DONE);
        CHECK(l.format == CKPZ_INPUT_NPY);
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, OPEN}};
        expect(&l, e, 1);
        fmt_list_free(&l);
    }
    /* Not .npy: forced -> error with a reason; AUTO -> raw. */
    static const struct {
        const char *dict, *reason;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False}", "lacks"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", "unexpected key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", "fortran_order"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", "duplicate"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", "integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", "after"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", "expected"},
        {"['descr', '<f4']", "not a dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", "expected"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ctx = bad[i].dict;
        make_npy(&x, 1, bad[i].dict, 12);
        CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_ERROR);
        CHECK(contains(why, bad[i].reason));
        if (!contains(why, bad[i].reason)) fprintf(stderr, "    why: %s\n", why);
        CHECK(describe_all(&x, CKPZ_INPUT_AUTO, &l, why) == FMT_DONE);
        CHECK(l.format == CKPZ_INPUT_RAW && l.n == 1);
        fmt_list_free(&l);
    }
    ctx = "npy version and length";
    make_npy(&x, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12);
    x.b[6] = 4;
    CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_ERROR);
    CHECK(contains(why, "version 4.0"));
    x.b[6] = 1;
    x.b[7] = 1;
    CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_ERROR);
    x.b[7] = 0;
    x.b[8] = 0xff;
    x.b[9] = 0xff;
    CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_ERROR);
    CHECK(contains(why, "header length 65535 exceeds the file size"));
    make_npy(&x, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12);
    x.b[11] = 0x7f;
    CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_ERROR);
    size_t need;
    CHECK(describe(x.b, x.n, U, CKPZ_INPUT_NPY, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_ERROR);
    CHECK(contains(why, "limit"));

    ctx = "npy need more";
    uint64_t ds = make_npy(&x, 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", 32);
    static const size_t firsts[] = {0, 3, 6, 8, 10, 12, 20};
    for (int known = 0; known < 2; known++) {
        for (size_t f = 0; f < sizeof(firsts) / sizeof(firsts[0]); f++) {
            int rounds;
            CHECK(describe_stream(&x, firsts[f], known, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, &l, why, &rounds) ==
                  FMT_DONE);
            xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, ds},
                        {CKPZ_DTYPE_F64, "array", ds, 32},
                        {CKPZ_DTYPE_NONE, NULL, ds + 32, OPEN}};
            expect(&l, e, 3);
            fmt_list_free(&l);
        }
    }
    CHECK(describe(x.b, 10, U, CKPZ_INPUT_NPY, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_NEED_MORE);
    CHECK(need == 12);
    CHECK(describe(x.b, 12, U, CKPZ_INPUT_NPY, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_NEED_MORE);
    CHECK(need == ds);
    bfree(&x);
}

/* ---- raw and the dispatcher ------------------------------------------------------------ */

static void test_raw(void)
{
    buf x = {0};
    fmt_list l;
    char why[256];
    size_t need;
    ctx = "raw";
    for (int i = 0; i < 10; i++) bbyte(&x, (uint8_t)(i + 0x80));
    /* 10 bytes of f32: two elements, 2 opaque bytes. */
    CHECK(describe(x.b, x.n, x.n, CKPZ_INPUT_RAW, CKPZ_DTYPE_F32, &l, &need, why, sizeof(why)) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_F32, "data", 0, 8}, {CKPZ_DTYPE_NONE, NULL, 8, OPEN}};
        expect(&l, e, 2);
        if (l.n == 2) expect_shape(&l.seg[0], 1, (uint64_t[]){2});
    }
    CHECK(l.format == CKPZ_INPUT_RAW);
    check_tiling(&l, x.n);
    fmt_list_free(&l);
    /* A whole number of elements: the tail is empty. */
    CHECK(describe(x.b, x.n, x.n, CKPZ_INPUT_AUTO, CKPZ_DTYPE_BF16, &l, &need, why, sizeof(why)) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_BF16, "data", 0, 10}, {CKPZ_DTYPE_NONE, NULL, 10, OPEN}};
        expect(&l, e, 2);
    }
    CHECK(l.format == CKPZ_INPUT_RAW);
    CHECK(contains(why, "not safetensors"));
    fmt_list_free(&l);
    /* Size unknown: an open tensor. */
    CHECK(describe(x.b, x.n, U, CKPZ_INPUT_RAW, CKPZ_DTYPE_F16, &l, &need, why, sizeof(why)) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_F16, "data", 0, OPEN}};
        expect(&l, e, 1);
        if (l.n == 1) CHECK(l.seg[0].ndim == 0 && l.seg[0].shape == NULL);
    }
    fmt_list_free(&l);
    /* No dtype: one opaque run. Empty input too. */
    CHECK(describe(x.b, x.n, x.n, CKPZ_INPUT_RAW, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, OPEN}};
        expect(&l, e, 1);
    }
    fmt_list_free(&l);
    CHECK(fmt_describe(NULL, 0, 0, &(fmt_request){.format = CKPZ_INPUT_AUTO}, &l, &need, why, sizeof why) == FMT_DONE);
    CHECK(l.n == 1 && l.seg[0].length == OPEN);
    fmt_list_free(&l);
    CHECK(fmt_describe(NULL, 0, 0, &(fmt_request){.format = CKPZ_INPUT_RAW, .raw_dtype = CKPZ_DTYPE_F64}, &l, &need,
                       why, sizeof(why)) == FMT_DONE);
    {
        xseg e[] = {{CKPZ_DTYPE_F64, "data", 0, 0}, {CKPZ_DTYPE_NONE, NULL, 0, OPEN}};
        expect(&l, e, 2);
    }
    fmt_list_free(&l);
    /* Bad arguments. */
    CHECK(describe(x.b, x.n, x.n, (ckpz_input_format)42, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why)) == FMT_ERROR);
    CHECK(contains(why, "unknown input format"));
    CHECK(describe(x.b, x.n, x.n, CKPZ_INPUT_RAW, CKPZ_DTYPE_COUNT_, &l, &need, why, sizeof(why)) == FMT_ERROR);
    CHECK(describe(x.b, x.n, x.n, CKPZ_INPUT_RAW, CKPZ_DTYPE_NONE, &l, NULL, NULL, 0) == FMT_DONE);
    fmt_list_free(&l);
    /* A shape (--shape): the tensor has it when the size agrees, else an error naming
     * both; with the size unknown it is described closed, the rest opaque. */
    {
        x.n = 0;
        for (int i = 0; i < 24; i++) bbyte(&x, (uint8_t)i);
        uint64_t sh[2] = {2, 3}, bad[2] = {2, 4}, zero[2] = {2, 0};
        fmt_request rq = {.format = CKPZ_INPUT_RAW, .raw_dtype = CKPZ_DTYPE_F32, .raw_ndim = 2, .raw_shape = sh};
        CHECK(fmt_raw_bytes(&rq) == 24);
        for (int f = 0; f < 2; f++) { /* forced, and the fallback of detection */
            rq.format = f ? CKPZ_INPUT_AUTO : CKPZ_INPUT_RAW;
            CHECK(fmt_describe(x.b, x.n, x.n, &rq, &l, &need, why, sizeof why) == FMT_DONE);
            xseg e[] = {{CKPZ_DTYPE_F32, "data", 0, 24}, {CKPZ_DTYPE_NONE, NULL, 24, OPEN}};
            expect(&l, e, 2);
            if (l.n == 2) expect_shape(&l.seg[0], 2, sh);
            check_tiling(&l, x.n);
            fmt_list_free(&l);
        }
        rq.format = CKPZ_INPUT_RAW;
        CHECK(fmt_describe(x.b, 20, U, &rq, &l, &need, why, sizeof why) == FMT_DONE);
        {
            xseg e[] = {{CKPZ_DTYPE_F32, "data", 0, 24}, {CKPZ_DTYPE_NONE, NULL, 24, OPEN}};
            expect(&l, e, 2);
        }
        fmt_list_free(&l);
        rq.raw_shape = bad;
        CHECK(fmt_describe(x.b, x.n, x.n, &rq, &l, &need, why, sizeof why) == FMT_ERROR);
        CHECK(contains(why, "24 bytes are not a f32 tensor of shape 2x4 (32 bytes)"));
        rq.format = CKPZ_INPUT_AUTO; /* a dump whose size contradicts its shape is not raw either */
        CHECK(fmt_describe(x.b, x.n, x.n, &rq, &l, &need, why, sizeof why) == FMT_ERROR);
        rq.raw_shape = zero;
        CHECK(fmt_describe(x.b, x.n, x.n, &rq, &l, &need, why, sizeof why) == FMT_ERROR);
        CHECK(fmt_raw_bytes(&rq) == UINT64_MAX);
        uint64_t huge[2] = {UINT64_MAX / 2, 3};
        rq.raw_shape = huge;
        CHECK(fmt_raw_bytes(&rq) == UINT64_MAX);
        CHECK(fmt_describe(x.b, x.n, U, &rq, &l, &need, why, sizeof why) == FMT_ERROR);
        rq = (fmt_request){.format = CKPZ_INPUT_RAW, .raw_dtype = CKPZ_DTYPE_NONE, .raw_ndim = 2, .raw_shape = sh};
        CHECK(fmt_describe(x.b, x.n, x.n, &rq, &l, &need, why, sizeof why) == FMT_ERROR);
        CHECK(contains(why, "element type"));
    }
    /* Forced safetensors on an .npy file and the other way round. */
    make_npy(&x, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12);
    CHECK(describe_all(&x, CKPZ_INPUT_SAFETENSORS, &l, why) == FMT_ERROR);
    make_st(&x, "{}", 0);
    CHECK(describe_all(&x, CKPZ_INPUT_NPY, &l, why) == FMT_ERROR);
    CHECK(contains(why, "magic"));
    bfree(&x);
}

static void test_list(void)
{
    ctx = "list helpers";
    fmt_list l;
    memset(&l, 0, sizeof(l));
    uint64_t sh[2] = {2, 2};
    /* Gaps, overlaps and adjacent opaque runs given to fmt_finish directly. */
    CHECK(fmt_push(&l, CKPZ_DTYPE_NONE, "ignored", 7, 2, sh, 0, 4) == 0);
    CHECK(fmt_push(&l, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, 4, 4) == 0);
    CHECK(fmt_push(&l, CKPZ_DTYPE_F32, "t", 1, 2, sh, 16, 16) == 0);
    CHECK(fmt_push(&l, CKPZ_DTYPE_F32, "overlap", 7, 2, sh, 24, 16) == 0);
    CHECK(fmt_push(&l, CKPZ_DTYPE_F32, "inside", 6, 0, NULL, 20, 4) == 0);
    CHECK(fmt_push(&l, CKPZ_DTYPE_U8, NULL, 0, 0, NULL, 40, 2) == 0);
    CHECK(fmt_finish(&l) == 0);
    xseg e[] = {{CKPZ_DTYPE_NONE, NULL, 0, 16},
                {CKPZ_DTYPE_F32, "t", 16, 16},
                {CKPZ_DTYPE_NONE, NULL, 32, 8},
                {CKPZ_DTYPE_U8, "", 40, 2},
                {CKPZ_DTYPE_NONE, NULL, 42, OPEN}};
    expect(&l, e, 5);
    fmt_list_free(&l);
    /* An open segment in the middle ends the list. */
    CHECK(fmt_push(&l, CKPZ_DTYPE_U8, "a", 1, 0, NULL, 0, 3) == 0);
    CHECK(fmt_push(&l, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, 3, OPEN) == 0);
    CHECK(fmt_push(&l, CKPZ_DTYPE_U8, "b", 1, 0, NULL, 10, 3) == 0);
    CHECK(fmt_finish(&l) == 0);
    {
        xseg g[] = {{CKPZ_DTYPE_U8, "a", 0, 3}, {CKPZ_DTYPE_NONE, NULL, 3, OPEN}};
        expect(&l, g, 2);
    }
    fmt_list_free(&l);
    fmt_list_free(&l);
    fmt_list_free(NULL);
    CHECK(fmt_finish(&l) == 0);
    CHECK(l.n == 1 && l.seg[0].offset == 0 && l.seg[0].length == OPEN);
    fmt_list_free(&l);
}

/* ---- mutation loop ------------------------------------------------------------------------ */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void mutate(buf *x, size_t hdr_end)
{
    static const char alphabet[] = "{}[]\",:0123456789-.eE\\u \t\nabdfFtnlrsIUB_";
    int nm = 1 + (int)(rnd() % 4);
    for (int m = 0; m < nm && x->n > 0; m++) {
        size_t span = hdr_end < x->n ? hdr_end : x->n;
        size_t pos = (size_t)(rnd() % span);
        switch (rnd() % 8) {
        case 0: /* random byte */ x->b[pos] = (uint8_t)rnd(); break;
        case 1:
        case 2: /* JSON-ish byte */
            if (pos >= 8) x->b[pos] = (uint8_t)alphabet[rnd() % (sizeof(alphabet) - 1)];
            break;
        case 3: /* delete a byte */
            if (pos >= 8) {
                memmove(x->b + pos, x->b + pos + 1, x->n - pos - 1);
                x->n--;
            }
            break;
        case 4: /* insert a byte */
            if (pos >= 8) {
                bbyte(x, 0);
                memmove(x->b + pos + 1, x->b + pos, x->n - pos - 1);
                x->b[pos] = (uint8_t)alphabet[rnd() % (sizeof(alphabet) - 1)];
            }
            break;
        case 5: { /* nudge the length field */
            uint64_t n = 0;
            for (int j = 7; j >= 0; j--) n = (n << 8) | x->b[j];
            n += (uint64_t)(rnd() % 33) - 16;
            if (rnd() % 8 == 0) n = rnd() >> (rnd() % 64);
            for (int j = 0; j < 8; j++) x->b[j] = (uint8_t)(n >> (8 * j));
            break;
        }
        case 6: /* truncate */ x->n = (size_t)(rnd() % (x->n + 1)); break;
        default: { /* change a digit (offsets, shapes) */
            for (size_t t = 0; t < 64; t++) {
                size_t p2 = 8 + (size_t)(rnd() % (span > 8 ? span - 8 : 1));
                if (p2 < x->n && x->b[p2] >= '0' && x->b[p2] <= '9') {
                    x->b[p2] = (uint8_t)('0' + rnd() % 10);
                    break;
                }
            }
            break;
        }
        }
    }
}

static int fuzz_tensor_lists; /* mutated inputs still described with tensors */

static void fuzz_one(const buf *x, ckpz_input_format forced)
{
    fmt_list l;
    char why[256];
    size_t need;
    for (int mode = 0; mode < 2; mode++) {
        ckpz_input_format f = mode ? forced : CKPZ_INPUT_AUTO;
        fmt_status st = describe(x->b, x->n, x->n, f, CKPZ_DTYPE_NONE, &l, &need, why, sizeof(why));
        CHECK(st != FMT_NEED_MORE);
        if (f == CKPZ_INPUT_AUTO) CHECK(st == FMT_DONE);
        if (st == FMT_DONE) {
            check_tiling(&l, x->n);
            if (mode && l.n > 2) fuzz_tensor_lists++;
            fmt_list_free(&l);
        } else {
            CHECK(why[0] != '\0');
            CHECK(l.n == 0 && l.seg == NULL);
        }
        /* Streaming, total unknown until the end. */
        int rounds;
        st = describe_stream(x, (size_t)(rnd() % 80), 0, f, CKPZ_DTYPE_BF16, &l, why, &rounds);
        if (f == CKPZ_INPUT_AUTO) CHECK(st == FMT_DONE);
        if (st == FMT_DONE) fmt_list_free(&l);
    }
}

static void test_fuzz(void)
{
    ctx = "mutations";
    const char *js = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"layer.0.w\":{\"dtype\":\"BF16\",\"shape\":[4,3],\"data_offsets\":[0,24]},"
                     "\"layer.0.b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]},"
                     "\"n\\u00e9\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[40,48]},"
                     "\"e\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[48,48]},"
                     "\"m\":{\"dtype\":\"F16\",\"shape\":[1,2,1],\"data_offsets\":[48,52]}}";
    buf seed = {0}, x = {0};
    uint64_t base = make_st(&seed, js, 60);
    int iters = 20000;
    const char *env = getenv("CKPZ_FUZZ_ITERS");
    if (env) iters = atoi(env);
    env = getenv("CKPZ_FUZZ_SEED");
    if (env) rng ^= strtoull(env, NULL, 0) * 0x2545F4914F6CDD1Dull;
    if (!rng) rng = 1;
    int done = 0, before = failures;
    for (int it = 0; it < iters && failures - before < 20; it++) {
        x.n = 0;
        bput(&x, seed.b, seed.n);
        mutate(&x, (size_t)base);
        fuzz_one(&x, CKPZ_INPUT_SAFETENSORS);
        done++;
    }
    buf npy = {0};
    uint64_t ds = make_npy(&npy, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48);
    for (int it = 0; it < iters / 4 && failures - before < 20; it++) {
        x.n = 0;
        bput(&x, npy.b, npy.n);
        mutate(&x, (size_t)ds);
        fuzz_one(&x, CKPZ_INPUT_NPY);
        done++;
    }
    printf("mutation loop: %d inputs, %d still described with tensors\n", done, fuzz_tensor_lists);
    bfree(&seed);
    bfree(&npy);
    bfree(&x);
}

/* ---- the reader table and the driver ---------------------------------------------------- */

static fmt_status failing_fetch(void *opaque, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof)
{
    int *calls = opaque;
    static const uint8_t zeros[8];
    (void)at;
    if ((*calls)++) return FMT_READ; /* the second fetch fails */
    *p = zeros;
    *len = want < 4 ? want : 4; /* too short for any header: the reader asks for more */
    *eof = 0;
    return FMT_DONE;
}

static void test_table(void)
{
    ctx = "reader table";
    /* every format has exactly one row, its own id, a distinct name */
    CHECK(fmt_reader_count == CKPZ_INPUT_COUNT_);
    for (int f = 0; f < CKPZ_INPUT_COUNT_; f++) {
        const fmt_reader *r = fmt_reader_get((ckpz_input_format)f);
        CHECK(r && r->id == (ckpz_input_format)f && r->name && r->name[0]);
        if (!r) continue;
        CHECK(!strcmp(ckpz_input_format_name((ckpz_input_format)f), r->name));
        CHECK(f == CKPZ_INPUT_AUTO || r->describe);
        CHECK(!r->resume == !r->free_state);
        CHECK(!r->sniff || (f != CKPZ_INPUT_AUTO && f != CKPZ_INPUT_RAW));
        int seen = 0;
        for (size_t i = 0; i < fmt_reader_count; i++) {
            seen += fmt_readers[i] == r;
            if (fmt_readers[i] != r) CHECK(strcmp(fmt_readers[i]->name, r->name) != 0);
        }
        CHECK(seen == 1);
    }
    CHECK(fmt_reader_get(CKPZ_INPUT_COUNT_) == NULL);
    CHECK(!strcmp(ckpz_input_format_name((ckpz_input_format)99), "unknown"));

    /* errors are codes: a request the table cannot serve, a read error, each mapped to
     * the library's error with a message */
    fmt_list l;
    size_t need = 0;
    char why[256];
    CHECK(fmt_describe((const uint8_t *)"x", 1, 1, &(fmt_request){.format = (ckpz_input_format)99}, &l, &need, why,
                       sizeof why) == FMT_ERROR);
    CHECK(why[0] != '\0');
    int calls = 0;
    fmt_source src = {failing_fetch, &calls, U};
    CHECK(fmt_drive_describe(&src, 4, &(fmt_request){.format = CKPZ_INPUT_SAFETENSORS}, &l, why, sizeof why) ==
          FMT_READ);
    CHECK(calls == 2 && l.n == 0 && strstr(why, "read error"));
    ckpz_ctx *c = ckpz_ctx_create();
    fmt_request rq = {.format = CKPZ_INPUT_NPY};
    CHECK(fmt_fail(c, FMT_READ, &rq, why) == CKPZ_ERR_READ && strstr(ckpz_ctx_message(c), "read error"));
    ckpz_ctx_free(c);
    c = ckpz_ctx_create();
    CHECK(fmt_fail(c, FMT_ERROR, &rq, "bad magic") == CKPZ_ERR_INPUT &&
          !strcmp(ckpz_ctx_message(c), "input is not valid npy: bad magic"));
    ckpz_ctx_free(c);
    c = ckpz_ctx_create();
    CHECK(fmt_fail(c, FMT_NOMEM, &rq, "") == CKPZ_ERR_NOMEM);
    ckpz_ctx_free(c);
    c = ckpz_ctx_create();
    CHECK(fmt_fail(c, FMT_PROTOCOL, &rq, "asked for 3 bytes with 4 read") == CKPZ_ERR_INTERNAL);
    ckpz_ctx_free(c);
}

int main(void)
{
    test_table();
    test_list();
    test_st_basic();
    test_st_dtypes();
    test_st_order_names_zero();
    test_st_many_in_order();
    test_list_spare();
    test_st_fast_general_same();
    test_st_bad_entries();
    test_st_in_place();
    test_st_malformed();
    test_st_need_more();
    test_npy();
    test_raw();
    test_fuzz();
    if (failures) {
        fprintf(stderr, "test_formats: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_formats: all checks passed\n");
    return 0;
}
