/* safetensors.c — the safetensors reader (see formats.h).
 *
 * Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON (padded with
 * spaces by writers), then the tensor data; "data_offsets" are relative to the first
 * byte after the header.
 *
 * The JSON reader is strict (RFC 8259 syntax, UTF-8 validated, no lone surrogates,
 * nesting bounded) and reads only what is needed. What it allocates is bounded by the
 * header size: decoded names (<= N bytes), shape dimensions (<= N/2) and one record
 * per complete tensor entry (each needs more than 40 bytes of JSON).
 *
 * Structure errors (length, JSON syntax) mean "not safetensors" (FMT_ERROR). Problems
 * of one entry (unknown dtype, inconsistent size, offsets out of the file, overlap with
 * another entry) only turn that entry's bytes into opaque bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "formats.h"

#define ST_MAX_DEPTH 64 /* JSON nesting accepted (only 3 levels are meaningful) */
#define ST_MAX_NDIM 64  /* dimensions of one tensor */

/* The dtype named s[0..len) (the dtype table's safetensors names) and its size; NONE and
 * size 0 for a name the table does not have. */
static ckpz_dtype st_dtype(const char *s, size_t len, unsigned *size)
{
    ckpz_dtype t = dtype_find(DT_NAMES_SAFETENSORS, s, len);
    if (t == CKPZ_DTYPE_COUNT_) {
        *size = 0;
        return CKPZ_DTYPE_NONE;
    }
    *size = ckpz_dtype_size(t);
    return t;
}

/* ---- parser state ------------------------------------------------------------------ */

typedef struct {
    uint64_t begin, end; /* relative to the data start */
    size_t name_off, name_len;
    size_t shape_off;
    uint32_t ndim;
    ckpz_dtype dtype;
    size_t idx; /* position in the JSON: tie-breaker for sorting */
} st_ent;

typedef struct {
    const uint8_t *s;
    size_t n, i;
    const char *err; /* first error (static text) */
    size_t err_at;
    int oom;
    char *names;
    size_t nlen, ncap;
    uint64_t *dims;
    size_t dlen, dcap;
    st_ent *ent;
    size_t elen, ecap;
    uint64_t base, total; /* data start in the file; file size or CKPZ_SIZE_UNKNOWN */
} jp;

static int fail(jp *p, const char *msg)
{
    if (!p->err) {
        p->err = msg;
        p->err_at = p->i;
    }
    return -1;
}

static int oom(jp *p)
{
    p->oom = 1;
    return fail(p, "out of memory");
}

static void ws(jp *p)
{
    while (p->i < p->n) {
        uint8_t c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->i++;
    }
}

static int grow_buf(void **buf, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < want) {
        if (c > ((size_t)-1) / 2 / elem)
            return -1;
        c *= 2;
    }
    void *b = realloc(*buf, c * elem);
    if (!b)
        return -1;
    *buf = b;
    *cap = c;
    return 0;
}

static int put(jp *p, const void *b, size_t k)
{
    if (grow_buf((void **)&p->names, &p->ncap, p->nlen + k, 1))
        return oom(p);
    memcpy(p->names + p->nlen, b, k);
    p->nlen += k;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_len(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    size_t k;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t j = 2; j < k; j++)
        if (s[j] < 0x80 || s[j] > 0xBF)
            return 0;
    return k;
}

static int hex4(jp *p, unsigned *v)
{
    if (p->n - p->i < 4)
        return fail(p, "truncated \\u escape");
    unsigned x = 0;
    for (int j = 0; j < 4; j++) {
        uint8_t c = p->s[p->i + j];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= c - '0';
        else if (c >= 'a' && c <= 'f')
            x |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            x |= c - 'A' + 10;
        else
            return fail(p, "bad \\u escape");
    }
    p->i += 4;
    *v = x;
    return 0;
}

/* Parses a JSON string at p->i; when keep, appends its decoded UTF-8 to p->names. */
static int parse_string(jp *p, int keep)
{
    if (p->i >= p->n || p->s[p->i] != '"')
        return fail(p, "expected a string");
    p->i++;
    for (;;) {
        if (p->i >= p->n)
            return fail(p, "unterminated string");
        uint8_t c = p->s[p->i];
        if (c == '"') {
            p->i++;
            return 0;
        }
        if (c < 0x20)
            return fail(p, "control character in a string");
        if (c == '\\') {
            p->i++;
            if (p->i >= p->n)
                return fail(p, "unterminated string");
            uint8_t e = p->s[p->i++], o;
            switch (e) {
            case '"': case '\\': case '/': o = e; break;
            case 'b': o = '\b'; break;
            case 'f': o = '\f'; break;
            case 'n': o = '\n'; break;
            case 'r': o = '\r'; break;
            case 't': o = '\t'; break;
            case 'u': {
                unsigned cp, lo;
                if (hex4(p, &cp))
                    return -1;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail(p, "lone low surrogate in a \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                        return fail(p, "lone high surrogate in a \\u escape");
                    p->i += 2;
                    if (hex4(p, &lo))
                        return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail(p, "lone high surrogate in a \\u escape");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (keep) {
                    uint8_t u[4];
                    size_t k;
                    if (cp < 0x80) {
                        u[0] = (uint8_t)cp;
                        k = 1;
                    } else if (cp < 0x800) {
                        u[0] = (uint8_t)(0xC0 | (cp >> 6));
                        u[1] = (uint8_t)(0x80 | (cp & 0x3F));
                        k = 2;
                    } else if (cp < 0x10000) {
                        u[0] = (uint8_t)(0xE0 | (cp >> 12));
                        u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                        u[2] = (uint8_t)(0x80 | (cp & 0x3F));
                        k = 3;
                    } else {
                        u[0] = (uint8_t)(0xF0 | (cp >> 18));
                        u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                        u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                        u[3] = (uint8_t)(0x80 | (cp & 0x3F));
                        k = 4;
                    }
                    if (put(p, u, k))
                        return -1;
                }
                continue;
            }
            default:
                p->i--;
                return fail(p, "bad escape in a string");
            }
            if (keep && put(p, &o, 1))
                return -1;
            continue;
        }
        if (c < 0x80) {
            if (keep && put(p, &c, 1))
                return -1;
            p->i++;
            continue;
        }
        size_t k = utf8_len(p->s + p->i, p->n - p->i);
        if (!k)
            return fail(p, "invalid UTF-8 in a string");
        if (keep && put(p, p->s + p->i, k))
            return -1;
        p->i += k;
    }
}

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Parses a JSON number. *is_uint: it is a non-negative integer without fraction or
 * exponent that fits in 64 bits, whose value is *v. */
static int parse_number(jp *p, uint64_t *v, int *is_uint)
{
    size_t st = p->i;
    int plain = 1;
    if (p->i < p->n && p->s[p->i] == '-') {
        plain = 0;
        p->i++;
    }
    if (p->i >= p->n)
        return fail(p, "truncated number");
    if (p->s[p->i] == '0')
        p->i++;
    else if (p->s[p->i] >= '1' && p->s[p->i] <= '9')
        while (p->i < p->n && is_digit(p->s[p->i]))
            p->i++;
    else
        return fail(p, "bad number");
    size_t int_end = p->i;
    if (p->i < p->n && p->s[p->i] == '.') {
        plain = 0;
        p->i++;
        if (p->i >= p->n || !is_digit(p->s[p->i]))
            return fail(p, "bad number fraction");
        while (p->i < p->n && is_digit(p->s[p->i]))
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        plain = 0;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || !is_digit(p->s[p->i]))
            return fail(p, "bad number exponent");
        while (p->i < p->n && is_digit(p->s[p->i]))
            p->i++;
    }
    *is_uint = 0;
    *v = 0;
    if (plain) {
        uint64_t x = 0;
        for (size_t j = st; j < int_end; j++) {
            unsigned d = p->s[j] - '0';
            if (x > (UINT64_MAX - d) / 10)
                return 0; /* valid JSON, too large for us */
            x = x * 10 + d;
        }
        *v = x;
        *is_uint = 1;
    }
    return 0;
}

static int literal(jp *p, const char *w)
{
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k) != 0)
        return fail(p, "unexpected character");
    p->i += k;
    return 0;
}

static int skip_value(jp *p, int depth)
{
    if (depth > ST_MAX_DEPTH)
        return fail(p, "JSON nested too deeply");
    if (p->i >= p->n)
        return fail(p, "truncated JSON");
    uint64_t v;
    int u;
    switch (p->s[p->i]) {
    case '{':
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            return 0;
        }
        for (;;) {
            ws(p);
            if (parse_string(p, 0))
                return -1;
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                return fail(p, "expected ':'");
            p->i++;
            ws(p);
            if (skip_value(p, depth + 1))
                return -1;
            ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                return 0;
            }
            return fail(p, "expected ',' or '}'");
        }
    case '[':
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            return 0;
        }
        for (;;) {
            ws(p);
            if (skip_value(p, depth + 1))
                return -1;
            ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                return 0;
            }
            return fail(p, "expected ',' or ']'");
        }
    case '"':
        return parse_string(p, 0);
    case 't':
        return literal(p, "true");
    case 'f':
        return literal(p, "false");
    case 'n':
        return literal(p, "null");
    default:
        if (p->s[p->i] == '-' || is_digit(p->s[p->i]))
            return parse_number(p, &v, &u);
        return fail(p, "unexpected character");
    }
}

/* Parses an array of unsigned integers. Up to `max` values go to out (or, when out is
 * NULL, to p->dims); *count is the number of elements; *ok is cleared when an element
 * is not an unsigned 64-bit integer. */
static int parse_uint_array(jp *p, int depth, uint64_t *out, size_t max, size_t *count,
                            int *ok)
{
    if (depth > ST_MAX_DEPTH)
        return fail(p, "JSON nested too deeply");
    *count = 0;
    p->i++; /* '[' */
    ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
        return 0;
    }
    for (;;) {
        ws(p);
        if (p->i >= p->n)
            return fail(p, "truncated JSON");
        if (p->s[p->i] == '-' || is_digit(p->s[p->i])) {
            uint64_t v;
            int u;
            if (parse_number(p, &v, &u))
                return -1;
            if (!u)
                *ok = 0;
            else if (*count < max) {
                if (out)
                    out[*count] = v;
                else {
                    if (grow_buf((void **)&p->dims, &p->dcap, p->dlen + 1, sizeof(uint64_t)))
                        return oom(p);
                    p->dims[p->dlen++] = v;
                }
            }
        } else {
            if (skip_value(p, depth + 1))
                return -1;
            *ok = 0;
        }
        if (*count < SIZE_MAX)
            (*count)++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            return 0;
        }
        return fail(p, "expected ',' or ']'");
    }
}

static int key_is(const jp *p, size_t off, const char *w)
{
    size_t k = strlen(w);
    return p->nlen - off == k && memcmp(p->names + off, w, k) == 0;
}

enum { F_DTYPE = 1, F_SHAPE = 2, F_OFFSETS = 4 };

/* Parses one tensor entry (p->i at '{'); the tensor's decoded name is
 * p->names[name_off, p->nlen). Records it in p->ent when it is complete and
 * consistent; otherwise rolls the pools back (its bytes will be opaque). */
static int parse_entry(jp *p, int depth, size_t name_off)
{
    size_t name_len = p->nlen - name_off;
    size_t shape_off = p->dlen;
    unsigned seen = 0, esz = 0;
    int ok = 1;
    ckpz_dtype dt = CKPZ_DTYPE_NONE;
    size_t ndim = 0, noff = 0;
    uint64_t off[2] = {0, 0};

    if (depth > ST_MAX_DEPTH)
        return fail(p, "JSON nested too deeply");
    p->i++; /* '{' */
    ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        goto done;
    }
    for (;;) {
        ws(p);
        size_t mark = p->nlen;
        if (parse_string(p, 1))
            return -1;
        unsigned f = key_is(p, mark, "dtype")          ? F_DTYPE
                     : key_is(p, mark, "shape")        ? F_SHAPE
                     : key_is(p, mark, "data_offsets") ? F_OFFSETS
                                                       : 0;
        p->nlen = mark;
        ws(p);
        if (p->i >= p->n || p->s[p->i] != ':')
            return fail(p, "expected ':'");
        p->i++;
        ws(p);
        if (p->i >= p->n)
            return fail(p, "truncated JSON");
        if (f & seen)
            ok = 0; /* duplicate field */
        seen |= f;
        if (f == F_DTYPE && p->s[p->i] == '"') {
            if (parse_string(p, 1))
                return -1;
            dt = st_dtype(p->names + mark, p->nlen - mark, &esz);
            if (dt == CKPZ_DTYPE_NONE)
                ok = 0; /* unknown dtype: opaque bytes, not an error */
            p->nlen = mark;
        } else if (f == F_SHAPE && p->s[p->i] == '[') {
            p->dlen = shape_off;
            if (parse_uint_array(p, depth + 1, NULL, ST_MAX_NDIM, &ndim, &ok))
                return -1;
            if (ndim > ST_MAX_NDIM)
                ok = 0;
        } else if (f == F_OFFSETS && p->s[p->i] == '[') {
            if (parse_uint_array(p, depth + 1, off, 2, &noff, &ok))
                return -1;
            if (noff != 2)
                ok = 0;
        } else {
            if (f)
                ok = 0; /* a known field of the wrong type */
            if (skip_value(p, depth + 1))
                return -1;
        }
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            break;
        }
        return fail(p, "expected ',' or '}'");
    }
done:
    if (seen != (F_DTYPE | F_SHAPE | F_OFFSETS))
        ok = 0;
    if (ok && name_len && memchr(p->names + name_off, 0, name_len))
        ok = 0; /* "\u0000" in a name: cannot be a C string */
    if (ok && off[0] > off[1])
        ok = 0;
    if (ok && off[1] > UINT64_MAX - p->base)
        ok = 0;
    if (ok && p->total != CKPZ_SIZE_UNKNOWN && p->base + off[1] > p->total)
        ok = 0; /* data beyond the end of the file */
    if (ok) {
        /* product(shape) * element size, overflow-checked; any 0 dimension wins. */
        uint64_t prod = esz;
        int zero = 0, ovf = 0;
        for (size_t j = 0; j < ndim; j++) {
            uint64_t d = p->dims[shape_off + j];
            if (d == 0)
                zero = 1;
            else if (prod > UINT64_MAX / d)
                ovf = 1;
            else
                prod *= d;
        }
        if (zero)
            prod = 0;
        else if (ovf)
            ok = 0;
        if (ok && prod != off[1] - off[0])
            ok = 0;
    }
    if (!ok) {
        p->dlen = shape_off;
        p->nlen = name_off;
        return 0;
    }
    if (grow_buf((void **)&p->ent, &p->ecap, p->elen + 1, sizeof(st_ent)))
        return oom(p);
    st_ent *e = &p->ent[p->elen];
    e->begin = off[0];
    e->end = off[1];
    e->name_off = name_off;
    e->name_len = name_len;
    e->shape_off = shape_off;
    e->ndim = (uint32_t)ndim;
    e->dtype = dt;
    e->idx = p->elen;
    p->elen++;
    return 0;
}

static int parse_header(jp *p)
{
    /* The caller checked that the header starts with '{'. */
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
    } else {
        for (;;) {
            ws(p);
            size_t mark = p->nlen;
            if (parse_string(p, 1))
                return -1;
            int meta = key_is(p, mark, "__metadata__");
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                return fail(p, "expected ':'");
            p->i++;
            ws(p);
            if (p->i >= p->n)
                return fail(p, "truncated JSON");
            if (!meta && p->s[p->i] == '{') {
                if (parse_entry(p, 2, mark))
                    return -1;
            } else {
                p->nlen = mark;
                if (skip_value(p, 2))
                    return -1;
            }
            ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                break;
            }
            return fail(p, p->i >= p->n ? "truncated JSON" : "expected ',' or '}'");
        }
    }
    ws(p); /* writers pad the header with spaces */
    if (p->i != p->n)
        return fail(p, "unexpected bytes after the JSON object");
    return 0;
}

static int ent_cmp(const void *a, const void *b)
{
    const st_ent *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int push_ent(fmt_list *out, const jp *p, const st_ent *e)
{
    return fmt_push(out, e->dtype, p->names + e->name_off, e->name_len, e->ndim,
                    e->ndim ? p->dims + e->shape_off : NULL, p->base + e->begin,
                    e->end - e->begin);
}

/* Emits the entries sorted by offset. A run of entries that overlap one another is
 * left out entirely (its bytes become opaque); an empty tensor inside another
 * tensor's range is dropped (it holds no bytes). */
static int emit(fmt_list *out, jp *p)
{
    if (p->elen > 1)
        qsort(p->ent, p->elen, sizeof(st_ent), ent_cmp);
    int have = 0;
    size_t first = 0, cnt = 0;
    uint64_t ce = 0;
    for (size_t k = 0; k < p->elen; k++) {
        const st_ent *e = &p->ent[k];
        if (have && e->begin < ce) {
            if (e->begin == e->end)
                continue;
            cnt++;
            if (e->end > ce)
                ce = e->end;
            continue;
        }
        if (have && cnt == 1 && push_ent(out, p, &p->ent[first]))
            return -1;
        have = 0;
        if (e->begin == e->end) {
            if (push_ent(out, p, e))
                return -1;
            continue;
        }
        have = 1;
        first = k;
        cnt = 1;
        ce = e->end;
    }
    if (have && cnt == 1 && push_ent(out, p, &p->ent[first]))
        return -1;
    return 0;
}

static fmt_status st_describe(const uint8_t *b, size_t len, uint64_t total, const fmt_request *rq,
                              fmt_list *out, size_t *need, char *why, size_t whylen)
{
    (void)rq;
    if (fmt_begin(out, &len, total, need, why, whylen))
        return FMT_ERROR;

    if (len < 8) {
        if (total != CKPZ_SIZE_UNKNOWN && total < 8) {
            fmt_why(why, whylen, "file of %llu bytes is too short for a safetensors header",
                   (unsigned long long)total);
            return FMT_ERROR;
        }
        if (need)
            *need = 8;
        return FMT_NEED_MORE;
    }
    uint64_t n = 0;
    for (int j = 7; j >= 0; j--)
        n = (n << 8) | b[j];
    if (n < 2) {
        fmt_why(why, whylen, "safetensors header length %llu is too small",
               (unsigned long long)n);
        return FMT_ERROR;
    }
    if (total != CKPZ_SIZE_UNKNOWN && n > total - 8) {
        fmt_why(why, whylen, "safetensors header length %llu exceeds the file size %llu",
               (unsigned long long)n, (unsigned long long)total);
        return FMT_ERROR;
    }
    if (n > FMT_PROBE_MAX - 8) {
        fmt_why(why, whylen, "safetensors header length %llu exceeds the limit of %u bytes",
               (unsigned long long)n, (unsigned)(FMT_PROBE_MAX - 8));
        return FMT_ERROR;
    }
    size_t hend = (size_t)(8 + n);
    size_t avail = len < hend ? len : hend;
    if (avail > 8 && b[8] != '{') {
        fmt_why(why, whylen, "safetensors header does not start with '{' (byte 0x%02x)",
               b[8]);
        return FMT_ERROR;
    }
    /* Cheap check on what is there before asking for the rest: JSON text never holds
     * control bytes other than whitespace. */
    for (size_t j = 8; j < avail; j++) {
        uint8_t c = b[j];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            fmt_why(why, whylen, "safetensors header: control byte 0x%02x at offset %zu",
                   c, j);
            return FMT_ERROR;
        }
    }
    if (len < hend) {
        if (need)
            *need = hend;
        return FMT_NEED_MORE;
    }

    jp p;
    memset(&p, 0, sizeof(p));
    p.s = b + 8;
    p.n = (size_t)n;
    p.base = 8 + n;
    p.total = total;
    fmt_status st = FMT_ERROR;
    if (grow_buf((void **)&p.names, &p.ncap, 1, 1))
        return FMT_NOMEM;
    if (parse_header(&p)) {
        if (p.oom)
            st = FMT_NOMEM;
        else if (p.err_at >= p.n)
            fmt_why(why, whylen, "safetensors header: truncated JSON (%s) at offset %zu",
                   p.err, (size_t)(8 + p.err_at));
        else
            fmt_why(why, whylen, "safetensors header: %s at offset %zu", p.err,
                   (size_t)(8 + p.err_at));
        goto out;
    }
    out->format = CKPZ_INPUT_SAFETENSORS;
    if (fmt_push(out, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, 0, p.base) || emit(out, &p) ||
        fmt_finish(out)) {
        fmt_list_free(out);
        st = FMT_NOMEM;
        goto out;
    }
    st = FMT_DONE;
out:
    free(p.names);
    free(p.dims);
    free(p.ent);
    return st;
}

static int st_sniff(const uint8_t *p, size_t len)
{
    (void)p, (void)len;
    return 1; /* no magic: the header length and the JSON decide */
}

const fmt_reader fmt_reader_safetensors = {CKPZ_INPUT_SAFETENSORS, "safetensors", st_sniff, st_describe, NULL,
                                           NULL};
