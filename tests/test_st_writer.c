/* test_st_writer.c — ckpz_safetensors_header, the one safetensors header writer (the
 * tuner's samples, libckpz_mpi's shards and Python's target_bw= use it): what it writes
 * is read back by the library's own reader as the same tensors (names with quotes,
 * backslashes, control bytes and UTF-8; every dtype; empty and 0-d tensors; no
 * tensors), its bytes are the ones the safetensors package writes for a plain entry, and
 * what the reader would not take back (names that are not UTF-8, the metadata key,
 * dtypes without a safetensors name, sizes past 2^64, too little room) is refused with a
 * message naming the tensor. Metadata and dtypes ckpz has no type for (by name and size:
 * the Python package's save_file) are written as Python's json writes them, every
 * control byte escaped as json.dumps escapes it.
 *
 * Standalone program: returns non-zero and prints each failed check. */
#define CKPZ_EXPERIMENTAL /* ckpz_safetensors_header */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/formats.h"
#include "testutil.h"

static ckpz_st_tensor st(const char *name, ckpz_dtype dtype, uint32_t ndim, const uint64_t *shape)
{
    return (ckpz_st_tensor){.name = name, .dtype = dtype, .ndim = ndim, .shape = shape};
}

/* The JSON the writer makes of t[0..n) and meta (as the call takes them), the padding
 * stripped, equals want; the padding is spaces to a multiple of 8. */
static void writes(const ckpz_st_tensor *t, size_t n, const ckpz_st_meta *meta, size_t nmeta, const char *want)
{
    static char out[4096];
    size_t len = 0, k = strlen(want);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_error e = ckpz_safetensors_header(ctx, t, n, meta, nmeta, out, sizeof out, &len, NULL);
    CHECKF(e == CKPZ_OK, "error %d: %s", (int)e, ckpz_ctx_message(ctx));
    CHECKF(len >= 8 + k && len % 8 == 0 && !memcmp(out + 8, want, k), "wrote '%.*s', not '%s'",
           len > 8 ? (int)(len - 8) : 0, out + 8, want);
    for (size_t i = 8 + k; i < len; i++) CHECK(out[i] == ' ');
    CHECK(len >= 8 && (uint8_t)out[0] == (uint8_t)(len - 8) && (uint8_t)out[1] == (uint8_t)((len - 8) >> 8));
    ckpz_ctx_free(ctx);
}

/* The header of t[0..n) followed by its data (byte k of the data is k % 251), parsed
 * back by the safetensors reader: every tensor comes back with its name, dtype, shape
 * and byte range, in order, between the header's opaque bytes and the open end. */
static void round_trip(const ckpz_st_tensor *t, size_t n, const ckpz_st_meta *meta, size_t nmeta)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t need = 0, len = 0;
    uint64_t data = 0;
    CHECK(ckpz_safetensors_header(ctx, t, n, meta, nmeta, NULL, 0, &need, &data) == CKPZ_OK);
    CHECK(need >= 8 + 8 && need % 8 == 0);
    uint8_t *file = malloc(need + (size_t)data + 1);
    CHECK(ckpz_safetensors_header(ctx, t, n, meta, nmeta, file, need, &len, NULL) == CKPZ_OK && len == need);
    for (uint64_t k = 0; k < data; k++) file[need + k] = (uint8_t)(k % 251);
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--) hlen = hlen << 8 | file[b];
    CHECK(hlen == need - 8);
    CHECK(file[8] == '{');

    fmt_request rq = {.format = CKPZ_INPUT_SAFETENSORS};
    fmt_list l;
    char why[256] = "";
    memset(&l, 0, sizeof l);
    fmt_status st = fmt_describe(file, need + (size_t)data, need + data, &rq, &l, NULL, why, sizeof why);
    CHECKF(st == FMT_DONE, "%s", why);
    if (st == FMT_DONE) {
        size_t seg = n ? 1 : 0; /* segment 0: the header, opaque (and all, with no tensor) */
        uint64_t off = need;
        CHECK(l.seg[0].dtype == CKPZ_DTYPE_NONE && l.seg[0].length == (n ? need : FMT_LEN_OPEN));
        for (size_t i = 0; i < n; i++) {
            uint64_t bytes = ckpz_dtype_size(t[i].dtype);
            for (uint32_t d = 0; d < t[i].ndim; d++) bytes *= t[i].shape[d];
            CHECK(seg < l.n);
            if (seg >= l.n) break;
            const fmt_segment *s = &l.seg[seg++];
            CHECKF(s->name && !strcmp(s->name, t[i].name), "tensor %zu: '%s' back as '%s'", i, t[i].name,
                   s->name ? s->name : "(none)");
            CHECK(s->dtype == t[i].dtype && s->ndim == t[i].ndim);
            for (uint32_t d = 0; d < t[i].ndim && d < s->ndim; d++) CHECK(s->shape[d] == t[i].shape[d]);
            CHECK(s->offset == off && s->length == bytes);
            off += bytes;
        }
        CHECK(seg == l.n - 1 && l.seg[seg].dtype == CKPZ_DTYPE_NONE && l.seg[seg].length == FMT_LEN_OPEN);
        fmt_list_free(&l);
    }
    free(file);
    ckpz_ctx_free(ctx);
}

/* The tensor is refused with CKPZ_ERR_PARAM and a message naming it. */
static void refused(ckpz_st_tensor bad, const char *says)
{
    static const uint64_t dim = 4;
    ckpz_st_tensor t[2] = {st("fine", CKPZ_DTYPE_F32, 1, &dim), bad};
    ckpz_ctx *ctx = ckpz_ctx_create();
    uint8_t out[4096];
    size_t len = 99;
    ckpz_error e = ckpz_safetensors_header(ctx, t, 2, NULL, 0, out, sizeof out, &len, NULL);
    const char *msg = ckpz_ctx_message(ctx);
    CHECKF(e == CKPZ_ERR_PARAM && len == 0, "%s: error %d", says, (int)e);
    CHECKF(strstr(msg, "tensor 1") && strstr(msg, says), "message '%s' lacks '%s'", msg, says);
    ckpz_ctx_free(ctx);
}

/* The metadata entry 1 is refused with CKPZ_ERR_PARAM and a message naming it. */
static void meta_refused(ckpz_st_meta bad, const char *says)
{
    static const uint64_t dim = 4;
    ckpz_st_tensor t = st("fine", CKPZ_DTYPE_F32, 1, &dim);
    ckpz_st_meta m[2] = {{"k", "v"}, bad};
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t len = 99;
    ckpz_error e = ckpz_safetensors_header(ctx, &t, 1, m, 2, NULL, 0, &len, NULL);
    const char *msg = ckpz_ctx_message(ctx);
    CHECKF(e == CKPZ_ERR_PARAM && len == 0, "%s: error %d", says, (int)e);
    CHECKF(strstr(msg, "metadata entry 1") && strstr(msg, says), "message '%s' lacks '%s'", msg, says);
    ckpz_ctx_free(ctx);
}

int main(void)
{
    /* the bytes for a plain entry: what safetensors.torch.save_file writes */
    {
        static const uint64_t shape[2] = {2, 3};
        ckpz_st_tensor t = st("w", CKPZ_DTYPE_BF16, 2, shape);
        uint8_t out[128];
        size_t len = 0;
        uint64_t data = 0;
        const char *want = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}";
        CHECK(ckpz_safetensors_header(NULL, &t, 1, NULL, 0, out, sizeof out, &len, &data) == CKPZ_OK);
        CHECK(data == 12 && len == 8 + 64 && out[0] == 64 && !out[1]);
        CHECK(!memcmp(out + 8, want, strlen(want)));
        for (size_t k = 8 + strlen(want); k < len; k++) CHECK(out[k] == ' ');
        /* names escaped as serde_json and Python's json escape them */
        ckpz_st_tensor q = st("a\"b\\c\n\t\x01\x7f\xc3\xa9", CKPZ_DTYPE_U8, 0, NULL);
        const char *qwant = "{\"a\\\"b\\\\c\\n\\t\\u0001\x7f\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[]";
        CHECK(ckpz_safetensors_header(NULL, &q, 1, NULL, 0, out, sizeof out, &len, NULL) == CKPZ_OK);
        CHECK(!memcmp(out + 8, qwant, strlen(qwant)));
    }

    /* read back: every dtype; odd names; empty, 0-d and many-dimensional tensors */
    {
        static const uint64_t s1[1] = {5}, s3[3] = {2, 1, 3}, s0[2] = {4, 0};
        ckpz_st_tensor t[CKPZ_DTYPE_COUNT_ + 8];
        char names[CKPZ_DTYPE_COUNT_][32];
        size_t n = 0;
        for (int d = 1; d < CKPZ_DTYPE_COUNT_; d++) {
            snprintf(names[d], sizeof names[d], "layer.%d.%s", d, ckpz_dtype_name((ckpz_dtype)d));
            t[n++] = st(names[d], (ckpz_dtype)d, d % 2 ? 1 : 3, d % 2 ? s1 : s3);
        }
        t[n++] = st("quote\" back\\slash", CKPZ_DTYPE_F32, 1, s1);
        t[n++] = st("ctl\b\f\r\x1f\x0b", CKPZ_DTYPE_I16, 3, s3);
        t[n++] = st("utf8 \xe2\x82\xac \xf0\x9f\x98\x80", CKPZ_DTYPE_F16, 1, s1);
        t[n++] = st("", CKPZ_DTYPE_F64, 0, NULL);
        t[n++] = st("empty", CKPZ_DTYPE_F32, 2, s0);
        round_trip(t, n, NULL, 0);
        round_trip(t, 0, NULL, 0); /* no tensors: "{}" */
        static const ckpz_st_meta meta[2] = {{"format", "pt"}, {"q\"\n", "\xc3\xa9\\"}};
        round_trip(t, n, meta, 2); /* the reader skips "__metadata__" */
        round_trip(t, 0, meta, 1);
    }

    /* refused: what the reader would not give back as the same tensor */
    {
        static const uint64_t huge[2] = {1ull << 40, 1ull << 30}, dim = 4;
        refused(st(NULL, CKPZ_DTYPE_F32, 1, &dim), "no name");
        refused(st("bad \xc3(", CKPZ_DTYPE_F32, 1, &dim), "not UTF-8");
        refused(st("surrogate \xed\xa0\x80", CKPZ_DTYPE_F32, 1, &dim), "not UTF-8");
        refused(st("cut \xe2\x82", CKPZ_DTYPE_F32, 1, &dim), "not UTF-8");
        refused(st("__metadata__", CKPZ_DTYPE_F32, 1, &dim), "metadata");
        refused(st("opaque", CKPZ_DTYPE_NONE, 1, &dim), "dtype");
        refused(st("no such", (ckpz_dtype)99, 1, &dim), "dtype");
        refused(st("negative", (ckpz_dtype)-1, 1, &dim), "dtype");
        refused(st("deep", CKPZ_DTYPE_F32, 65, &dim), "64 dimensions");
        refused(st("shapeless", CKPZ_DTYPE_F32, 2, NULL), "no shape");
        refused(st("huge", CKPZ_DTYPE_F64, 2, huge), "2^64");
        /* each fits, together they pass 2^64 bytes of data */
        static const uint64_t half[1] = {1ull << 62};
        ckpz_st_tensor two[2] = {st("a", CKPZ_DTYPE_F16, 1, half), st("b", CKPZ_DTYPE_F16, 1, half)};
        size_t len;
        CHECK(ckpz_safetensors_header(NULL, two, 1, NULL, 0, NULL, 0, &len, NULL) == CKPZ_OK);
        CHECK(ckpz_safetensors_header(NULL, two, 2, NULL, 0, NULL, 0, &len, NULL) == CKPZ_ERR_PARAM);
        /* too little room: nothing written past cap, the size needed said */
        uint8_t out[64];
        memset(out, 0xAA, sizeof out);
        ckpz_ctx *ctx = ckpz_ctx_create();
        CHECK(ckpz_safetensors_header(ctx, two, 1, NULL, 0, out, 40, &len, NULL) == CKPZ_ERR_LIMIT && len == 0);
        CHECK(strstr(ckpz_ctx_message(ctx), "needs") != NULL);
        for (size_t k = 0; k < sizeof out; k++) CHECK(out[k] == 0xAA);
        ckpz_ctx_free(ctx);
        CHECK(ckpz_safetensors_header(NULL, NULL, 1, NULL, 0, NULL, 0, &len, NULL) == CKPZ_ERR_PARAM);
        CHECK(ckpz_safetensors_header(NULL, two, 1, NULL, 0, NULL, 0, NULL, NULL) == CKPZ_ERR_PARAM);
    }

    /* escaping, byte by byte, as Python's json.dumps(s, ensure_ascii=False) writes s
     * (ckpz.safetensors.save_file's bytes before it used this writer): in names, keys
     * and values alike */
    {
        char all[48], *a = all;
        for (int c = 1; c < 0x20; c++) *a++ = (char)c;
        strcpy(a, "\"\\\x7f/\xc3\xa9");
        const char *esc = "\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e"
                          "\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a"
                          "\\u001b\\u001c\\u001d\\u001e\\u001f\\\"\\\\\x7f/\xc3\xa9\"";
        char want[1024];
        ckpz_st_tensor t = st(all, CKPZ_DTYPE_U8, 0, NULL);
        ckpz_st_meta m = {all, all};
        snprintf(want, sizeof want,
                 "{\"__metadata__\":{%s:%s},%s:{\"dtype\":\"U8\",\"shape\":[],"
                 "\"data_offsets\":[0,1]}}",
                 esc, esc, esc);
        writes(&t, 1, &m, 1, want);
    }

    /* metadata first, in the order given; {} when there are no pairs; none without meta;
     * what test_safetensors.py expects of ckpz.safetensors.save_file */
    {
        static const uint64_t two = 2;
        ckpz_st_tensor x = st("x", CKPZ_DTYPE_F32, 1, &two);
        const ckpz_st_meta m[3] = {{"a", "\xc3\xa9\n\x01\""}, {"m", ""}, {"z", "1"}};
        const char *xj = "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
        char want[256];
        snprintf(want, sizeof want, "{\"__metadata__\":{\"a\":\"\xc3\xa9\\n\\u0001\\\"\",\"m\":\"\",\"z\":\"1\"},%s}",
                 xj);
        writes(&x, 1, m, 3, want);
        snprintf(want, sizeof want, "{\"__metadata__\":{},%s}", xj);
        writes(&x, 1, m, 0, want);
        snprintf(want, sizeof want, "{%s}", xj);
        writes(&x, 1, NULL, 0, want);
        writes(NULL, 0, m + 2, 1, "{\"__metadata__\":{\"z\":\"1\"}}");
        writes(NULL, 0, m, 0, "{\"__metadata__\":{}}");
        meta_refused((ckpz_st_meta){NULL, "v"}, "no key");
        meta_refused((ckpz_st_meta){"k", NULL}, "no value");
        meta_refused((ckpz_st_meta){"k", "bad \xc3("}, "not UTF-8");
        meta_refused((ckpz_st_meta){"bad \xed\xa0\x80", "v"}, "not UTF-8");
        size_t len;
        CHECK(ckpz_safetensors_header(NULL, &x, 1, NULL, 1, NULL, 0, &len, NULL) == CKPZ_ERR_PARAM);
    }

    /* dtypes ckpz has no type for, by name and element size: written as given (the reader
     * keeps their bytes opaque); a malformed name or size is refused */
    {
        static const uint64_t s2[2] = {3, 2}, dim = 4;
        ckpz_st_tensor t[2] = {st("c", CKPZ_DTYPE_NONE, 2, s2), st("e", CKPZ_DTYPE_NONE, 1, &dim)};
        t[0].dtype_name = "C64", t[0].elem_size = 8;
        t[1].dtype_name = "F8_E8M0", t[1].elem_size = 1;
        writes(t, 2, NULL, 0,
               "{\"c\":{\"dtype\":\"C64\",\"shape\":[3,2],\"data_offsets\":[0,48]},"
               "\"e\":{\"dtype\":\"F8_E8M0\",\"shape\":[4],\"data_offsets\":[48,52]}}");
        static const char *bad_names[] = {"", "c64", "F8-E8M0", "C64 ", "\"", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"};
        for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
            ckpz_st_tensor b = st("n", CKPZ_DTYPE_NONE, 1, &dim);
            b.dtype_name = bad_names[i], b.elem_size = 1;
            refused(b, "dtype_name");
        }
        ckpz_st_tensor b = st("both", CKPZ_DTYPE_F32, 1, &dim);
        b.dtype_name = "C64", b.elem_size = 8;
        refused(b, "both");
        b.dtype = CKPZ_DTYPE_NONE, b.elem_size = 0;
        refused(b, "elem_size");
        b.elem_size = 65;
        refused(b, "elem_size");
        static const uint64_t huge[1] = {1ull << 61};
        b = st("huge", CKPZ_DTYPE_NONE, 1, huge);
        b.dtype_name = "C64", b.elem_size = 8;
        refused(b, "2^64");
    }

    if (test_failures) fprintf(stderr, "test_st_writer: %d check(s) failed\n", test_failures);
    return test_failures != 0;
}
