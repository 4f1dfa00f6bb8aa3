/* safetensors.c — the safetensors reader (see formats.h).
 *
 * Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON (padded with
 * spaces by writers), then the tensor data; "data_offsets" are relative to the first
 * byte after the header.
 *
 * The JSON is read by the strict tokenizer of json.c (RFC 8259 syntax, UTF-8 validated,
 * no lone surrogates, nesting bounded: only 3 levels are meaningful), and only what is
 * needed. What it allocates is bounded by the header size: one segment a tensor entry
 * (each needs more than 40 bytes of JSON) with its name and shape in the list's blocks,
 * decoded names (<= N bytes), and, for entries out of offset order, one record each and
 * their dimensions (<= N/2).
 *
 * It reads in one pass and copies little. The usual text (keys as writers put them, a
 * dtype the entry before had, plain arrays of numbers, names of printable ASCII) is
 * matched where it lies without a call, eight bytes a step; anything else goes through
 * json.c from where it starts, so both read the same language. Entries in offset order
 * go straight to the list as they are parsed (shapes on the stack, names copied once);
 * the first one that starts before the end of the one before turns those into records,
 * which are sorted with the rest as before. The control-byte scan of a whole header runs
 * only when the parse fails (to name that byte). On the header of 5,174 small tensors
 * (448 KB) describing took 12.4M instructions, now 5.9M (callgrind).
 *
 * Structure errors (length, JSON syntax) mean "not safetensors" (FMT_ERROR). Problems
 * of one entry (unknown dtype, inconsistent size, offsets out of the file, overlap with
 * another entry) only turn that entry's bytes into opaque bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ctx.h"
#include "common/dtype.h"
#include "formats.h"
#include "json.h"

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
    uint64_t begin, end;  /* relative to the data start */
    const uint8_t *name;  /* the name in the header's text or the list's blocks, or NULL: at name_off in j.str */
    size_t name_off, name_len;
    const uint64_t *shape; /* in the list's blocks, or NULL: at shape_off in dims */
    size_t shape_off;
    uint32_t ndim;
    ckpz_dtype dtype;
    size_t idx; /* position in the JSON: tie-breaker for sorting */
} st_ent;

typedef struct {
    json_p j;       /* the tokenizer; j.str holds the decoded names */
    uint64_t *dims;
    size_t dlen, dcap;
    st_ent *ent;
    size_t elen, ecap;
    uint64_t base, total; /* data start in the file; file size or CKPZ_SIZE_UNKNOWN */
    fmt_list *out;        /* entries in offset order go straight here (direct) */
    size_t first;         /* out's first entry */
    int direct;           /* every entry so far after the one before: pushed as parsed */
    uint64_t last_end;    /* where the last entry pushed ends */
    const uint8_t *dt_name; /* the last dtype name looked up (in the text), its length, */
    size_t dt_len;          /* dtype and size: the next entry's is most often the same */
    ckpz_dtype dt;
    unsigned dt_size;
} jp;

/* json_number, with the usual number (a few digits, no sign, fraction or exponent)
 * read in the same pass. */
static int read_uint(json_p *j, uint64_t *v, int *u)
{
    size_t st = j->i, k = st;
    uint64_t x = 0;
    if (j->s[k] == '0') k++;
    else
        while (k < j->n && json_digit(j->s[k]) && k - st < 19) x = x * 10 + (unsigned)(j->s[k++] - '0');
    if (k > st && (k >= j->n || (!json_digit(j->s[k]) && j->s[k] != '.' && j->s[k] != 'e' && j->s[k] != 'E'))) {
        j->i = k;
        *v = x;
        *u = 1;
        return 0;
    }
    return json_number(j, v, u); /* anything else, from its first byte */
}

/* The number of digits (1 to 7) that start the eight bytes at s and their value in *v;
 * 8 where there are eight digits (then the caller reads them one by one). Eight bytes a
 * step: describing 4,800 small tensors read ~40,000 numbers of up to 7 digits, at ~25
 * instructions each byte by byte. A byte is a digit where its high nibble is 3 and adding
 * 6 keeps it so; a carry out of a byte only changes bytes after the first non-digit. */
static unsigned digits8(const uint8_t *s, uint64_t *v)
{
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t w, nd, hi;
    memcpy(&w, s, 8);
    nd = ((w & 0xf0 * ones) ^ 0x30 * ones) | (((w + 0x06 * ones) & 0xf0 * ones) ^ 0x30 * ones);
    hi = (((nd & 0x7f * ones) + 0x7f * ones) | nd) & 0x80 * ones; /* a non-digit's high bit */
    if (!hi) return 8;
    unsigned len = (unsigned)__builtin_ctzll(hi) / 8;
    /* the digits at the top, zero bytes (digit 0) below, then pairs, fours, eight */
    uint64_t d = len ? (w & 0x0f * ones) << (8 * (8 - len)) : 0;
    d = (d * 2561) >> 8;
    d = ((d & 0x00ff00ff00ff00ffull) * 6553601) >> 16;
    *v = ((d & 0x0000ffff0000ffffull) * 42949672960001ull) >> 32;
    return len;
}

/* Parses an array of unsigned integers. Up to `max` values go to out; *count is the
 * number of elements; *ok is cleared when an element is not an unsigned 64-bit integer. */
static int parse_uint_array(jp *p, int depth, uint64_t *out, size_t max, size_t *count, int *ok)
{
    if (depth > JSON_MAX_DEPTH) return json_fail(&p->j, "JSON nested too deeply");
    /* The usual array, as writers put it: numbers of 1 to 19 digits without a leading
     * zero (or 0 itself), commas, no spaces, at most max of them; anything else is read
     * again from the '[' below. */
    const uint8_t *s = p->j.s;
    size_t k = p->j.i + 1, n = p->j.n, c = 0;
    while (c < max && k < n && json_digit(s[k])) {
        size_t st = k;
        uint64_t x = 0;
        unsigned len = k + 8 <= n ? digits8(s + k, &x) : 8;
        if (len < 8) k += len;
        else
            while (k < n && json_digit(s[k]) && k - st < 19) x = x * 10 + (unsigned)(s[k++] - '0');
        if ((s[st] == '0' && k - st > 1) || k >= n || (s[k] != ',' && s[k] != ']')) break;
        out[c++] = x;
        if (s[k++] == ']') {
            p->j.i = k;
            *count = c;
            return 0;
        }
    }
    *count = 0;
    p->j.i++; /* '[' */
    json_ws(&p->j);
    if (p->j.i < p->j.n && p->j.s[p->j.i] == ']') {
        p->j.i++;
        return 0;
    }
    for (;;) {
        json_ws(&p->j);
        if (p->j.i >= p->j.n) return json_fail(&p->j, "truncated JSON");
        if (p->j.s[p->j.i] == '-' || json_digit(p->j.s[p->j.i])) {
            uint64_t v;
            int u;
            if (read_uint(&p->j, &v, &u)) return -1;
            if (!u) *ok = 0;
            else if (*count < max) out[*count] = v;
        } else {
            if (json_skip(&p->j, depth + 1)) return -1;
            *ok = 0;
        }
        if (*count < SIZE_MAX) (*count)++;
        json_ws(&p->j);
        if (p->j.i < p->j.n && p->j.s[p->j.i] == ',') {
            p->j.i++;
            continue;
        }
        if (p->j.i < p->j.n && p->j.s[p->j.i] == ']') {
            p->j.i++;
            return 0;
        }
        return json_fail(&p->j, "expected ',' or ']'");
    }
}

static int eq(const uint8_t *v, size_t len, const char *w, size_t wlen)
{
    return len == wlen && memcmp(v, w, wlen) == 0;
}
#define EQ(v, len, w) eq(v, len, w, sizeof(w) - 1)

/* Parses a string at p->j.i; *v, *len: its value, in the text when it holds no escape
 * (the usual case: nothing copied), else decoded at the pool's end (p->j.str from the
 * pool's length before the call: valid until the pool grows; the caller rolls it back
 * or keeps it). */
static int read_string(jp *p, const uint8_t **v, size_t *len)
{
    size_t st = p->j.i, mark = p->j.slen;
    /* the usual key, name or dtype: printable ASCII without a backslash to the closing
     * quote, read here without a call; anything else from its start by json.c */
    if (st < p->j.n && p->j.s[st] == '"') {
        const uint8_t *s = p->j.s;
        size_t k = st + 1;
        const uint64_t ones = 0x0101010101010101ull;
        for (uint64_t w, q, b; k + 8 <= p->j.n; k += 8) { /* eight bytes a step */
            memcpy(&w, s + k, 8);
            q = w ^ ('"' * ones);
            b = w ^ ('\\' * ones);
            if (((w - 0x20 * ones) | w | (q - ones) | (b - ones)) & 0x80 * ones) break; /* a byte to look at */
        }
        while (k < p->j.n && s[k] >= 0x20 && s[k] < 0x7f && s[k] != '"' && s[k] != '\\') k++;
        if (k < p->j.n && s[k] == '"') {
            *v = s + st + 1;
            *len = k - st - 1;
            p->j.i = k + 1;
            return 0;
        }
    }
    if (json_string_raw(&p->j, v, len)) return -1;
    if (*v) return 0;
    p->j.i = st;
    if (json_string(&p->j, 1)) return -1;
    *v = (const uint8_t *)p->j.str + mark;
    *len = p->j.slen - mark;
    return 0;
}

enum { F_DTYPE = 1, F_SHAPE = 2, F_OFFSETS = 4, F_OTHER = 8 };

/* The three keys of an entry as they are written (no escape), matched where they lie
 * and skipped; F_OTHER for any other text, read by the caller as a string. */
static unsigned known_key(json_p *j)
{
    const uint8_t *s = j->s + j->i;
    size_t left = j->n - j->i;
    uint64_t w, a, b;
    if (left < 16) return F_OTHER;
    memcpy(&w, s, 8); /* compared as words: a call to memcmp each key cost more */
    memcpy(&a, "\"dtype\":", 8);
    memcpy(&b, "\"shape\":", 8);
    if (w == a) return j->i += 7, F_DTYPE;
    if (w == b) return j->i += 7, F_SHAPE;
    memcpy(&a, "\"data_of", 8);
    memcpy(&b, "ffsets\":", 8);
    if (w != a) return F_OTHER;
    memcpy(&w, s + 7, 8);
    return w == b ? (j->i += 14, F_OFFSETS) : F_OTHER;
}

/* The dtype string at p->j.i: the last one looked up when it is the same text (most
 * entries share a dtype), else the table's. */
static int read_dtype(jp *p, size_t mark, ckpz_dtype *dt, unsigned *esz)
{
    const uint8_t *s = p->j.s + p->j.i;
    size_t k = p->dt_len, left = p->j.n - p->j.i;
    if (p->dt_name && left >= k + 2 && s[0] == '"' && s[k + 1] == '"' && !memcmp(s + 1, p->dt_name, k)) {
        p->j.i += k + 2;
        *dt = p->dt;
        *esz = p->dt_size;
        return 0;
    }
    const uint8_t *v;
    size_t vlen;
    if (read_string(p, &v, &vlen)) return -1;
    *dt = st_dtype((const char *)v, vlen, esz);
    if (p->j.slen == mark) { /* in the text (not decoded): stays valid */
        p->dt_name = v;
        p->dt_len = vlen;
        p->dt = *dt;
        p->dt_size = *esz;
    }
    p->j.slen = mark;
    return 0;
}

/* The entries pushed so far become records (their names and shapes stay in the list's
 * blocks), to be sorted with the rest: an entry came before the end of the one before. */
static int to_records(jp *p)
{
    size_t n = p->out->n - p->first, cap = (size_t)p->j.n / 40 + 1; /* as many as the header can hold, */
    if (cap > 65536) cap = 65536;                                    /* or doubling from 65,536 */
    if (json_grow((void **)&p->ent, &p->ecap, cap > n ? cap : n, sizeof(st_ent))) return json_oom(&p->j);
    for (size_t k = 0; k < n; k++) {
        const fmt_segment *g = &p->out->seg[p->first + k];
        st_ent *e = &p->ent[k];
        memset(e, 0, sizeof *e);
        e->begin = g->offset - p->base;
        e->end = e->begin + g->length;
        e->name = (const uint8_t *)g->name;
        e->name_len = strlen(g->name);
        e->shape = g->shape;
        e->ndim = g->ndim;
        e->dtype = g->dtype;
        e->idx = k;
    }
    p->elen = n;
    fmt_list_drop(p->out, p->first);
    p->direct = 0;
    return 0;
}

/* Keeps a complete, consistent entry: pushed while entries come in offset order, else
 * recorded (names decoded stay in the pool, shapes go to dims) for emit. */
static int keep_entry(jp *p, const uint8_t *name, size_t name_off, size_t name_len, const uint64_t *shape, size_t ndim,
                      ckpz_dtype dt, const uint64_t *off)
{
    if (p->direct && off[0] >= p->last_end) {
        const char *nm = name ? (const char *)name : p->j.str + name_off;
        if (fmt_push(p->out, dt, nm, name_len, (uint32_t)ndim, ndim ? shape : NULL, p->base + off[0], off[1] - off[0]))
            return json_oom(&p->j);
        p->last_end = off[1];
        p->j.slen = name_off; /* copied: the pool's room is free again */
        return 0;
    }
    if (p->direct && to_records(p)) return -1;
    if (p->dlen + ndim > p->dcap && json_grow((void **)&p->dims, &p->dcap, p->dlen + ndim, sizeof(uint64_t)))
        return json_oom(&p->j);
    if (p->elen == p->ecap && json_grow((void **)&p->ent, &p->ecap, p->elen + 1, sizeof(st_ent)))
        return json_oom(&p->j);
    st_ent *e = &p->ent[p->elen];
    memset(e, 0, sizeof *e);
    e->begin = off[0];
    e->end = off[1];
    e->name = name;
    e->name_off = name_off;
    e->name_len = name_len;
    e->shape_off = p->dlen;
    if (ndim) memcpy(p->dims + p->dlen, shape, ndim * sizeof(uint64_t));
    p->dlen += ndim;
    e->ndim = (uint32_t)ndim;
    e->dtype = dt;
    e->idx = p->elen;
    p->elen++;
    return 0;
}

/* 1 when an entry of esz-byte elements, shape[0..ndim) and data offsets off is one this
 * reader takes: offsets in order and in the file, their span the shape's bytes. */
static int consistent(const jp *p, unsigned esz, const uint64_t *shape, size_t ndim, const uint64_t *off)
{
    if (off[0] > off[1] || off[1] > UINT64_MAX - p->base) return 0;
    if (p->total != CKPZ_SIZE_UNKNOWN && p->base + off[1] > p->total) return 0; /* beyond the file's end */
    /* product(shape) * element size, overflow-checked; any 0 dimension wins. */
    uint64_t prod = esz;
    int zero = 0, ovf = 0;
    for (size_t j = 0; j < ndim; j++) {
        uint64_t d = shape[j];
        if (d == 0) zero = 1;
        else if (prod > UINT64_MAX / d) ovf = 1;
        else prod *= d;
    }
    if (zero) prod = 0;
    else if (ovf) return 0;
    return prod == off[1] - off[0];
}

/* Parses one tensor entry (p->j.i at '{'); the tensor's decoded name is
 * p->j.str[name_off, p->j.slen). Keeps it when it is complete and consistent
 * (keep_entry); otherwise rolls the pool back (its bytes will be opaque). */
static int parse_entry(jp *p, int depth, const uint8_t *name, size_t name_off, size_t name_len)
{
    unsigned seen = 0, esz = 0;
    int ok = 1;
    ckpz_dtype dt = CKPZ_DTYPE_NONE;
    size_t ndim = 0, noff = 0;
    uint64_t off[2] = {0, 0}, shape[ST_MAX_NDIM];

    if (depth > JSON_MAX_DEPTH) return json_fail(&p->j, "JSON nested too deeply");
    p->j.i++; /* '{' */
    json_ws(&p->j);
    if (p->j.i < p->j.n && p->j.s[p->j.i] == '}') {
        p->j.i++;
        goto done;
    }
    for (;;) {
        json_ws(&p->j);
        size_t mark = p->j.slen;
        unsigned f = known_key(&p->j);
        if (f == F_OTHER) {
            size_t klen;
            const uint8_t *key;
            if (read_string(p, &key, &klen)) return -1;
            f = EQ(key, klen, "dtype")          ? F_DTYPE
                : EQ(key, klen, "shape")        ? F_SHAPE
                : EQ(key, klen, "data_offsets") ? F_OFFSETS
                                                : 0;
            p->j.slen = mark;
        }
        json_ws(&p->j);
        if (p->j.i >= p->j.n || p->j.s[p->j.i] != ':') return json_fail(&p->j, "expected ':'");
        p->j.i++;
        json_ws(&p->j);
        if (p->j.i >= p->j.n) return json_fail(&p->j, "truncated JSON");
        if (f & seen) ok = 0; /* duplicate field */
        seen |= f;
        if (f == F_DTYPE && p->j.s[p->j.i] == '"') {
            if (read_dtype(p, mark, &dt, &esz)) return -1;
            if (dt == CKPZ_DTYPE_NONE) ok = 0; /* unknown dtype: opaque bytes, not an error */
        } else if (f == F_SHAPE && p->j.s[p->j.i] == '[') {
            if (parse_uint_array(p, depth + 1, shape, ST_MAX_NDIM, &ndim, &ok)) return -1;
            if (ndim > ST_MAX_NDIM) ok = 0;
        } else if (f == F_OFFSETS && p->j.s[p->j.i] == '[') {
            if (parse_uint_array(p, depth + 1, off, 2, &noff, &ok)) return -1;
            if (noff != 2) ok = 0;
        } else {
            if (f) ok = 0; /* a known field of the wrong type */
            if (json_skip(&p->j, depth + 1)) return -1;
        }
        json_ws(&p->j);
        if (p->j.i < p->j.n && p->j.s[p->j.i] == ',') {
            p->j.i++;
            continue;
        }
        if (p->j.i < p->j.n && p->j.s[p->j.i] == '}') {
            p->j.i++;
            break;
        }
        return json_fail(&p->j, "expected ',' or '}'");
    }
done:
    if (seen != (F_DTYPE | F_SHAPE | F_OFFSETS)) ok = 0;
    if (ok && !name && name_len && memchr(p->j.str + name_off, 0, name_len))
        ok = 0; /* "\u0000" in a name: cannot be a C string */
    if (ok) ok = consistent(p, esz, shape, ndim, off);
    if (!ok) {
        p->j.slen = name_off;
        return 0;
    }
    return keep_entry(p, name, name_off, name_len, shape, ndim, dt, off);
}

static int parse_header(jp *p)
{
    /* The caller checked that the header starts with '{'. */
    p->j.i++;
    json_ws(&p->j);
    if (p->j.i < p->j.n && p->j.s[p->j.i] == '}') {
        p->j.i++;
    } else {
        for (;;) {
            json_ws(&p->j);
            size_t mark = p->j.slen, klen;
            const uint8_t *key;
            if (read_string(p, &key, &klen)) return -1;
            int meta = EQ(key, klen, "__metadata__");
            if (p->j.slen != mark) key = NULL; /* decoded: kept at mark in the pool */
            json_ws(&p->j);
            if (p->j.i >= p->j.n || p->j.s[p->j.i] != ':') return json_fail(&p->j, "expected ':'");
            p->j.i++;
            json_ws(&p->j);
            if (p->j.i >= p->j.n) return json_fail(&p->j, "truncated JSON");
            if (!meta && p->j.s[p->j.i] == '{') {
                if (parse_entry(p, 2, key, mark, klen)) return -1;
            } else {
                p->j.slen = mark;
                if (json_skip(&p->j, 2)) return -1;
            }
            json_ws(&p->j);
            if (p->j.i < p->j.n && p->j.s[p->j.i] == ',') {
                p->j.i++;
                continue;
            }
            if (p->j.i < p->j.n && p->j.s[p->j.i] == '}') {
                p->j.i++;
                break;
            }
            return json_fail(&p->j, p->j.i >= p->j.n ? "truncated JSON" : "expected ',' or '}'");
        }
    }
    json_ws(&p->j); /* writers pad the header with spaces */
    if (p->j.i != p->j.n) return json_fail(&p->j, "unexpected bytes after the JSON object");
    return 0;
}

static int ent_cmp(const void *a, const void *b)
{
    const st_ent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int push_ent(fmt_list *out, const jp *p, const st_ent *e)
{
    const char *name = e->name ? (const char *)e->name : p->j.str + e->name_off;
    const uint64_t *shape = e->shape ? e->shape : e->ndim ? p->dims + e->shape_off : NULL; /* dims: NULL while none */
    return fmt_push(out, e->dtype, name, e->name_len, e->ndim, shape, p->base + e->begin, e->end - e->begin);
}

/* Emits the entries sorted by offset. A run of entries that overlap one another is
 * left out entirely (its bytes become opaque); an empty tensor inside another
 * tensor's range is dropped (it holds no bytes). */
static int emit(fmt_list *out, jp *p)
{
    if (fmt_reserve(out, p->elen + 1)) return -1; /* and the open tail */
    /* writers put the entries in offset order: sorted already, the sort is skipped */
    size_t k0 = 1;
    while (k0 < p->elen && ent_cmp(&p->ent[k0 - 1], &p->ent[k0]) < 0) k0++;
    if (k0 < p->elen) qsort(p->ent, p->elen, sizeof(st_ent), ent_cmp);
    int have = 0;
    size_t first = 0, cnt = 0;
    uint64_t ce = 0;
    for (size_t k = 0; k < p->elen; k++) {
        const st_ent *e = &p->ent[k];
        if (have && e->begin < ce) {
            if (e->begin == e->end) continue;
            cnt++;
            if (e->end > ce) ce = e->end;
            continue;
        }
        if (have && cnt == 1 && push_ent(out, p, &p->ent[first])) return -1;
        have = 0;
        if (e->begin == e->end) {
            if (push_ent(out, p, e)) return -1;
            continue;
        }
        have = 1;
        first = k;
        cnt = 1;
        ce = e->end;
    }
    if (have && cnt == 1 && push_ent(out, p, &p->ent[first])) return -1;
    return 0;
}

/* Names the first control byte other than whitespace in the header's b[8..end) in why;
 * 1 when there is one. */
static int control_byte(const uint8_t *b, size_t end, char *why, size_t whylen)
{
    const uint64_t ones = 0x0101010101010101ull;
    for (size_t j = 8; j < end; j++) {
        uint64_t w;
        /* eight bytes a step where none is below 0x20 (whitespace included) */
        while (j + 8 <= end && (memcpy(&w, b + j, 8), !((w - 0x20 * ones) & ~w & 0x80 * ones))) j += 8;
        if (j >= end) break;
        uint8_t c = b[j];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            fmt_why(why, whylen, "safetensors header: control byte 0x%02x at offset %zu", c, j);
            return 1;
        }
    }
    return 0;
}

static fmt_status st_describe(const uint8_t *b, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                              size_t *need, char *why, size_t whylen)
{
    if (fmt_begin(out, rq, &len, total, need, why, whylen)) return FMT_ERROR;

    if (len < 8) {
        if (total != CKPZ_SIZE_UNKNOWN && total < 8) {
            fmt_why(why, whylen, "file of %llu bytes is too short for a safetensors header", (unsigned long long)total);
            return FMT_ERROR;
        }
        if (need) *need = 8;
        return FMT_NEED_MORE;
    }
    uint64_t n = 0;
    for (int j = 7; j >= 0; j--) n = (n << 8) | b[j];
    if (n < 2) {
        fmt_why(why, whylen, "safetensors header length %llu is too small", (unsigned long long)n);
        return FMT_ERROR;
    }
    if (total != CKPZ_SIZE_UNKNOWN && n > total - 8) {
        fmt_why(why, whylen, "safetensors header length %llu exceeds the file size %llu", (unsigned long long)n,
                (unsigned long long)total);
        return FMT_ERROR;
    }
    if (n > FMT_PROBE_MAX - 8) {
        fmt_why(why, whylen, "safetensors header length %llu exceeds the limit of %u bytes", (unsigned long long)n,
                (unsigned)(FMT_PROBE_MAX - 8));
        return FMT_ERROR;
    }
    size_t hend = (size_t)(8 + n);
    size_t avail = len < hend ? len : hend;
    if (avail > 8 && b[8] != '{') {
        fmt_why(why, whylen, "safetensors header does not start with '{' (byte 0x%02x)", b[8]);
        return FMT_ERROR;
    }
    /* Cheap check on what is there before asking for the rest: JSON text never holds
     * control bytes other than whitespace. A whole header is not scanned first: the
     * parser refuses such a byte anyway, and only then is it looked for, so that the
     * message is the same. */
    if (len < hend) {
        if (control_byte(b, avail, why, whylen)) return FMT_ERROR;
        if (need) *need = hend;
        return FMT_NEED_MORE;
    }

    jp p;
    memset(&p, 0, sizeof(p));
    p.j.s = b + 8;
    p.j.n = (size_t)n;
    p.base = 8 + n;
    p.total = total;
    p.out = out;
    p.direct = 1;
    fmt_status st = FMT_NOMEM;
    /* The header's segment first, then the entries as they are parsed: sized once (an
     * entry takes more than 40 bytes of JSON), the open tail included, up to 65,536
     * segments (3.5 MiB; a larger header's list doubles as it grows). */
    size_t segs = (size_t)n / 40 + 3;
    int pushed = !fmt_reserve(out, segs < 65536 ? segs : 65536) &&
                 !fmt_push(out, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, 0, p.base);
    if (!pushed || json_grow((void **)&p.j.str, &p.j.scap, 1, 1)) goto out;
    out->seg[0].text = 1; /* the length and the JSON header */
    p.first = out->n;
    if (parse_header(&p)) {
        if (p.j.oom) goto out;
        st = FMT_ERROR;
        if (control_byte(b, hend, why, whylen)) goto out;
        if (p.j.err_at >= p.j.n)
            fmt_why(why, whylen, "safetensors header: truncated JSON (%s) at offset %zu", p.j.err,
                    (size_t)(8 + p.j.err_at));
        else fmt_why(why, whylen, "safetensors header: %s at offset %zu", p.j.err, (size_t)(8 + p.j.err_at));
        goto out;
    }
    out->format = CKPZ_INPUT_SAFETENSORS;
    if (emit(out, &p) || fmt_finish(out)) goto out;
    st = FMT_DONE;
out:
    if (st != FMT_DONE) fmt_list_free(out);
    free(p.j.str);
    free(p.dims);
    free(p.ent);
    return st;
}

static int st_sniff(const uint8_t *p, size_t len)
{
    (void)p, (void)len;
    return 1; /* no magic: the header length and the JSON decide */
}

const fmt_reader fmt_reader_safetensors = {CKPZ_INPUT_SAFETENSORS, "safetensors", st_sniff, st_describe, NULL, NULL};
