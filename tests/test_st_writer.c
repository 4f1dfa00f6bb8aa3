/* test_st_writer.c — ckpz_safetensors_header, the one safetensors header writer (the
 * tuner's samples, libckpz_mpi's shards and Python's target_bw= use it): what it writes
 * is read back by the library's own reader as the same tensors (names with quotes,
 * backslashes, control bytes and UTF-8; every dtype; empty and 0-d tensors; no
 * tensors), its bytes are the ones the safetensors package writes for a plain entry, and
 * what the reader would not take back (names that are not UTF-8, the metadata key,
 * dtypes without a safetensors name, sizes past 2^64, too little room) is refused with a
 * message naming the tensor.
 *
 * Standalone program: returns non-zero and prints each failed check. */
#define CKPZ_EXPERIMENTAL /* ckpz_safetensors_header */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/formats.h"
#include "testutil.h"

/* The header of t[0..n) followed by its data (byte k of the data is k % 251), parsed
 * back by the safetensors reader: every tensor comes back with its name, dtype, shape
 * and byte range, in order, between the header's opaque bytes and the open end. */
static void round_trip(const ckpz_st_tensor *t, size_t n)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    size_t need = 0, len = 0;
    uint64_t data = 0;
    CHECK(ckpz_safetensors_header(ctx, t, n, NULL, 0, &need, &data) == CKPZ_OK);
    CHECK(need >= 8 + 8 && need % 8 == 0);
    uint8_t *file = malloc(need + (size_t)data + 1);
    CHECK(ckpz_safetensors_header(ctx, t, n, file, need, &len, NULL) == CKPZ_OK && len == need);
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
    ckpz_st_tensor t[2] = {{"fine", CKPZ_DTYPE_F32, 1, &dim}, bad};
    ckpz_ctx *ctx = ckpz_ctx_create();
    uint8_t out[4096];
    size_t len = 99;
    ckpz_error e = ckpz_safetensors_header(ctx, t, 2, out, sizeof out, &len, NULL);
    const char *msg = ckpz_ctx_message(ctx);
    CHECKF(e == CKPZ_ERR_PARAM && len == 0, "%s: error %d", says, (int)e);
    CHECKF(strstr(msg, "tensor 1") && strstr(msg, says), "message '%s' lacks '%s'", msg, says);
    ckpz_ctx_free(ctx);
}

int main(void)
{
    /* the bytes for a plain entry: what safetensors.torch.save_file writes */
    {
        static const uint64_t shape[2] = {2, 3};
        ckpz_st_tensor t = {"w", CKPZ_DTYPE_BF16, 2, shape};
        uint8_t out[128];
        size_t len = 0;
        uint64_t data = 0;
        const char *want = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}";
        CHECK(ckpz_safetensors_header(NULL, &t, 1, out, sizeof out, &len, &data) == CKPZ_OK);
        CHECK(data == 12 && len == 8 + 64 && out[0] == 64 && !out[1]);
        CHECK(!memcmp(out + 8, want, strlen(want)));
        for (size_t k = 8 + strlen(want); k < len; k++) CHECK(out[k] == ' ');
        /* names escaped as serde_json and Python's json escape them */
        ckpz_st_tensor q = {"a\"b\\c\n\t\x01\x7f\xc3\xa9", CKPZ_DTYPE_U8, 0, NULL};
        const char *qwant = "{\"a\\\"b\\\\c\\n\\t\\u0001\x7f\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[]";
        CHECK(ckpz_safetensors_header(NULL, &q, 1, out, sizeof out, &len, NULL) == CKPZ_OK);
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
            t[n++] = (ckpz_st_tensor){names[d], (ckpz_dtype)d, d % 2 ? 1 : 3, d % 2 ? s1 : s3};
        }
        t[n++] = (ckpz_st_tensor){"quote\" back\\slash", CKPZ_DTYPE_F32, 1, s1};
        t[n++] = (ckpz_st_tensor){"ctl\b\f\r\x1f\x0b", CKPZ_DTYPE_I16, 3, s3};
        t[n++] = (ckpz_st_tensor){"utf8 \xe2\x82\xac \xf0\x9f\x98\x80", CKPZ_DTYPE_F16, 1, s1};
        t[n++] = (ckpz_st_tensor){"", CKPZ_DTYPE_F64, 0, NULL};
        t[n++] = (ckpz_st_tensor){"empty", CKPZ_DTYPE_F32, 2, s0};
        round_trip(t, n);
        round_trip(t, 0); /* no tensors: "{}" */
    }

    /* refused: what the reader would not give back as the same tensor */
    {
        static const uint64_t huge[2] = {1ull << 40, 1ull << 30}, dim = 4;
        refused((ckpz_st_tensor){NULL, CKPZ_DTYPE_F32, 1, &dim}, "no name");
        refused((ckpz_st_tensor){"bad \xc3(", CKPZ_DTYPE_F32, 1, &dim}, "not UTF-8");
        refused((ckpz_st_tensor){"surrogate \xed\xa0\x80", CKPZ_DTYPE_F32, 1, &dim}, "not UTF-8");
        refused((ckpz_st_tensor){"cut \xe2\x82", CKPZ_DTYPE_F32, 1, &dim}, "not UTF-8");
        refused((ckpz_st_tensor){"__metadata__", CKPZ_DTYPE_F32, 1, &dim}, "metadata");
        refused((ckpz_st_tensor){"opaque", CKPZ_DTYPE_NONE, 1, &dim}, "dtype");
        refused((ckpz_st_tensor){"no such", (ckpz_dtype)99, 1, &dim}, "dtype");
        refused((ckpz_st_tensor){"negative", (ckpz_dtype)-1, 1, &dim}, "dtype");
        refused((ckpz_st_tensor){"deep", CKPZ_DTYPE_F32, 65, &dim}, "64 dimensions");
        refused((ckpz_st_tensor){"shapeless", CKPZ_DTYPE_F32, 2, NULL}, "no shape");
        refused((ckpz_st_tensor){"huge", CKPZ_DTYPE_F64, 2, huge}, "2^64");
        /* each fits, together they pass 2^64 bytes of data */
        static const uint64_t half[1] = {1ull << 62};
        ckpz_st_tensor two[2] = {{"a", CKPZ_DTYPE_F16, 1, half}, {"b", CKPZ_DTYPE_F16, 1, half}};
        size_t len;
        CHECK(ckpz_safetensors_header(NULL, two, 1, NULL, 0, &len, NULL) == CKPZ_OK);
        CHECK(ckpz_safetensors_header(NULL, two, 2, NULL, 0, &len, NULL) == CKPZ_ERR_PARAM);
        /* too little room: nothing written past cap, the size needed said */
        uint8_t out[64];
        memset(out, 0xAA, sizeof out);
        ckpz_ctx *ctx = ckpz_ctx_create();
        CHECK(ckpz_safetensors_header(ctx, two, 1, out, 40, &len, NULL) == CKPZ_ERR_LIMIT && len == 0);
        CHECK(strstr(ckpz_ctx_message(ctx), "needs") != NULL);
        for (size_t k = 0; k < sizeof out; k++) CHECK(out[k] == 0xAA);
        ckpz_ctx_free(ctx);
        CHECK(ckpz_safetensors_header(NULL, NULL, 1, NULL, 0, &len, NULL) == CKPZ_ERR_PARAM);
        CHECK(ckpz_safetensors_header(NULL, two, 1, NULL, 0, NULL, NULL) == CKPZ_ERR_PARAM);
    }

    if (test_failures) fprintf(stderr, "test_st_writer: %d check(s) failed\n", test_failures);
    return test_failures != 0;
}
