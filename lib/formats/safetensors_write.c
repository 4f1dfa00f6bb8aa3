/* safetensors_write.c — the one place ckpz writes a safetensors header
 * (ckpz_safetensors_header, ckpz_experimental.h): the tuner's samples, libckpz_mpi's
 * shards, the Python package's ckpz.safetensors.save and target_bw=. It sits beside the
 * reader (safetensors.c) and refuses what that reader would not take back as the same
 * tensors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ctx.h"
#include "common/dtype.h"
#include "formats.h"
#include "json.h"

#define ST_MAX_NDIM 64 /* dimensions of one tensor, as the reader takes them */

/* ---- the writer ---------------------------------------------------------------------
 * ckpz_safetensors_header (ckpz_experimental.h): the one place ckpz writes a safetensors
 * header (the tuner's samples, libckpz_mpi's shards, the Python package's
 * ckpz.safetensors.save and target_bw=). Compact JSON in the caller's order, strings
 * escaped as serde_json (the safetensors package) and Python's json write them, padded
 * with spaces to a multiple of 8 bytes; refused is what this reader would not take back
 * as the same tensors (a dtype_name this reader does not know it keeps as opaque bytes). */

#define ST_MAX_DTYPE_NAME 32

/* Writes s (n bytes) at out + at when out is not NULL; returns the new length. */
static size_t emit_bytes(char *out, size_t at, const char *s, size_t n)
{
    if (out) memcpy(out + at, s, n);
    return at + n;
}

/* s as a JSON string, quotes included (s checked to be UTF-8 by the caller). */
static size_t emit_string(char *out, size_t at, const char *s)
{
    static const char shortcut[] = "\\b\\t\\n\\f\\r"; /* 8, 9, 10, 12, 13 */
    at = emit_bytes(out, at, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char tmp[8];
        if (*c == '"' || *c == '\\') {
            tmp[0] = '\\', tmp[1] = (char)*c;
            at = emit_bytes(out, at, tmp, 2);
        } else if (*c >= 8 && *c <= 13 && *c != 11) {
            unsigned k = *c - 8u - (*c > 11);
            at = emit_bytes(out, at, shortcut + 2 * k, 2);
        } else if (*c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", *c);
            at = emit_bytes(out, at, tmp, 6);
        } else {
            at = emit_bytes(out, at, (const char *)c, 1);
        }
    }
    return emit_bytes(out, at, "\"", 1);
}

/* The JSON of the metadata (when meta is not NULL) and the n tensors, their data back to
 * back from offset 0 (checked by the caller: sizes and offsets fit), padded with spaces
 * to a multiple of 8 bytes, at out + 8 when out is not NULL; returns its length. */
static size_t emit_json(const ckpz_st_tensor *t, size_t n, const ckpz_st_meta *meta, size_t nmeta,
                        const uint64_t *bytes, char *out)
{
    char num[80], *o = out ? out + 8 : NULL;
    size_t at = emit_bytes(o, 0, "{", 1);
    uint64_t off = 0;
    if (meta) {
        at = emit_bytes(o, at, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < nmeta; i++) {
            if (i) at = emit_bytes(o, at, ",", 1);
            at = emit_string(o, at, meta[i].key);
            at = emit_bytes(o, at, ":", 1);
            at = emit_string(o, at, meta[i].value);
        }
        at = emit_bytes(o, at, n ? "}," : "}", n ? 2 : 1);
    }
    for (size_t i = 0; i < n; i++) {
        if (i) at = emit_bytes(o, at, ",", 1);
        at = emit_string(o, at, t[i].name);
        at = emit_bytes(o, at, ":{\"dtype\":\"", 11);
        const char *dt = t[i].dtype_name;
        if (!dt) dt = ckpz_dtype_format_name(t[i].dtype, CKPZ_INPUT_SAFETENSORS);
        at = emit_bytes(o, at, dt, strlen(dt));
        at = emit_bytes(o, at, "\",\"shape\":[", 11);
        for (uint32_t d = 0; d < t[i].ndim; d++) {
            int k = snprintf(num, sizeof num, "%s%llu", d ? "," : "", (unsigned long long)t[i].shape[d]);
            at = emit_bytes(o, at, num, (size_t)k);
        }
        int k = snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                         (unsigned long long)(off + bytes[i]));
        at = emit_bytes(o, at, num, (size_t)k);
        off += bytes[i];
    }
    at = emit_bytes(o, at, "}", 1);
    while (at % 8) at = emit_bytes(o, at, " ", 1);
    return at;
}

static int is_utf8(const char *s)
{
    for (const uint8_t *c = (const uint8_t *)s; *c;) {
        size_t k = *c < 0x80 ? 1 : json_utf8_len(c, strlen((const char *)c));
        if (!k) return 0;
        c += k;
    }
    return 1;
}

/* Why t's dtype cannot be written, or NULL; its element size into *size. */
static const char *dtype_refusal(const ckpz_st_tensor *t, uint64_t *size)
{
    if (!t->dtype_name) {
        if (!ckpz_dtype_format_name(t->dtype, CKPZ_INPUT_SAFETENSORS)) return "dtype has no safetensors name";
        *size = ckpz_dtype_size(t->dtype);
        return NULL;
    }
    size_t k = strspn(t->dtype_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    if (!k || k > ST_MAX_DTYPE_NAME || t->dtype_name[k]) return "dtype_name is not 1 to 32 of A-Z, 0-9, _";
    if (t->dtype != CKPZ_DTYPE_NONE) return "has both a dtype and a dtype_name";
    if (t->elem_size < 1 || t->elem_size > 64) return "dtype_name's elem_size is not 1 to 64";
    *size = t->elem_size;
    return NULL;
}

/* Why tensor i cannot be written, or NULL; its data bytes into *bytes. */
static const char *st_refusal(const ckpz_st_tensor *t, uint64_t *bytes)
{
    if (!t->name) return "has no name";
    if (!is_utf8(t->name)) return "name is not UTF-8";
    if (!strcmp(t->name, "__metadata__")) return "name is the header's metadata key";
    uint64_t prod = 0;
    const char *why = dtype_refusal(t, &prod);
    if (why) return why;
    if (t->ndim > ST_MAX_NDIM) return "has more than 64 dimensions";
    if (t->ndim && !t->shape) return "has no shape";
    /* product(shape) * element size, as the reader computes it: any 0 dimension wins */
    int zero = 0, ovf = 0;
    for (uint32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) zero = 1;
        else if (prod > UINT64_MAX / t->shape[d]) ovf = 1;
        else prod *= t->shape[d];
    }
    if (ovf && !zero) return "holds more than 2^64 bytes";
    *bytes = zero ? 0 : prod;
    return NULL;
}

/* CKPZ_OK, or the refusal of the first metadata entry that cannot be written. */
static ckpz_error meta_refusal(ckpz_ctx *ctx, const ckpz_st_meta *meta, size_t nmeta)
{
    if (nmeta && !meta)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "safetensors header: %zu metadata entries, none given", nmeta);
    for (size_t i = 0; i < nmeta; i++) {
        const char *k = meta[i].key, *v = meta[i].value;
        if (!k || !v || !is_utf8(k) || !is_utf8(v))
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "safetensors header: metadata entry %zu ('%.100s') %s", i, k ? k : "",
                            !k || !v ? "has no key or no value" : "is not UTF-8");
    }
    return CKPZ_OK;
}

ckpz_error ckpz_safetensors_header(ckpz_ctx *ctx, const ckpz_st_tensor *t, size_t n, const ckpz_st_meta *meta,
                                   size_t nmeta, void *dst, size_t cap, size_t *len, uint64_t *data_bytes)
{
    ctx_clear(ctx);
    if (len) *len = 0;
    if (data_bytes) *data_bytes = 0;
    if ((n && !t) || !len) return ctx_fail(ctx, CKPZ_ERR_PARAM, "safetensors header: no tensors or no length");
    ckpz_error e = meta_refusal(ctx, meta, nmeta);
    if (e) return e;
    uint64_t *bytes = malloc((n ? n : 1) * sizeof *bytes), total = 0;
    if (!bytes) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "safetensors header: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *why = st_refusal(&t[i], &bytes[i]);
        if (!why && bytes[i] > UINT64_MAX - total) why = "ends past 2^64 bytes of data";
        if (why) {
            free(bytes);
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "safetensors header: tensor %zu ('%.100s') %s", i,
                            t[i].name ? t[i].name : "", why);
        }
        total += bytes[i];
    }
    size_t json = emit_json(t, n, meta, nmeta, bytes, NULL);
    if (json > FMT_PROBE_MAX - 8)
        e = ctx_fail(ctx, CKPZ_ERR_LIMIT, "safetensors header: %zu bytes of JSON, over the %u a reader takes", json,
                     (unsigned)(FMT_PROBE_MAX - 8));
    else if (dst && cap < 8 + json)
        e = ctx_fail(ctx, CKPZ_ERR_LIMIT, "safetensors header: needs %zu bytes, %zu given", 8 + json, cap);
    else if (dst) {
        uint8_t *h = dst;
        for (int b = 0; b < 8; b++) h[b] = (uint8_t)((uint64_t)json >> (8 * b));
        emit_json(t, n, meta, nmeta, bytes, (char *)h);
    }
    free(bytes);
    if (e) return e;
    *len = 8 + json;
    if (data_bytes) *data_bytes = total;
    return CKPZ_OK;
}
