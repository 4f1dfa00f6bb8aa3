/* npy.c — the NumPy .npy reader (see formats.h).
 *
 * Layout: "\x93NUMPY", major, minor (1.0, 2.0 or 3.0), header length (u16 LE for 1.0,
 * u32 LE for 2.0/3.0), then a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and ended by '\n'; the array data follows.
 *
 * The header must hold exactly the keys descr, fortran_order and shape (as numpy
 * requires); anything else means "not .npy". A descr this library does not model
 * (big-endian, object, structured, strings, ...) leaves the data as opaque bytes.
 * The tensor's shape is the logical shape as written, also for Fortran-order arrays.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "formats.h"

#define NPY_MAX_DEPTH 32

typedef struct {
    const uint8_t *s;
    size_t n, i;
    const char *err;
    size_t err_at;
} pl;

static int pfail(pl *p, const char *msg)
{
    if (!p->err) {
        p->err = msg;
        p->err_at = p->i;
    }
    return -1;
}

static void pws(pl *p)
{
    while (p->i < p->n) {
        uint8_t c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static int peek(const pl *p) { return p->i < p->n ? p->s[p->i] : -1; }

/* A Python string literal in single or double quotes: [*off, *off + *len) is its raw
 * text; *esc is set when it holds a backslash (we do not decode escapes). */
static int pstr(pl *p, size_t *off, size_t *len, int *esc)
{
    int q = peek(p);
    if (q != '\'' && q != '"') return pfail(p, "expected a string");
    p->i++;
    size_t st = p->i;
    *esc = 0;
    for (;;) {
        if (p->i >= p->n) return pfail(p, "unterminated string");
        uint8_t c = p->s[p->i];
        if (c == q) break;
        if (c == '\n' || c == '\r') return pfail(p, "newline in a string");
        if (c == '\\') {
            *esc = 1;
            p->i++;
            if (p->i >= p->n) return pfail(p, "unterminated string");
        }
        p->i++;
    }
    *off = st;
    *len = p->i - st;
    p->i++;
    return 0;
}

static int pdigit(int c) { return c >= '0' && c <= '9'; }

/* A non-negative integer (optionally with Python 2's L suffix); *ovf when > 2^64-1. */
static int pint(pl *p, uint64_t *v, int *ovf)
{
    if (!pdigit(peek(p))) return pfail(p, "expected an integer");
    uint64_t x = 0;
    while (pdigit(peek(p))) {
        unsigned d = p->s[p->i] - '0';
        if (x > (UINT64_MAX - d) / 10) *ovf = 1;
        else x = x * 10 + d;
        p->i++;
    }
    if (peek(p) == 'L' || peek(p) == 'l') p->i++;
    *v = x;
    return 0;
}

static int pword(pl *p, const char *w)
{
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k) != 0) return -1;
    /* not followed by an identifier character */
    if (p->i + k < p->n) {
        uint8_t c = p->s[p->i + k];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || pdigit(c) || c == '_') return -1;
    }
    p->i += k;
    return 0;
}

/* Skips a Python literal: string, number, True/False/None, tuple, list or dict. */
static int pskip(pl *p, int depth)
{
    if (depth > NPY_MAX_DEPTH) return pfail(p, "header nested too deeply");
    int c = peek(p);
    size_t off, len;
    int esc;
    if (c == '\'' || c == '"') return pstr(p, &off, &len, &esc);
    if (c == '(' || c == '[' || c == '{') {
        int close = c == '(' ? ')' : c == '[' ? ']' : '}';
        p->i++;
        for (;;) {
            pws(p);
            if (peek(p) == close) {
                p->i++;
                return 0;
            }
            if (pskip(p, depth + 1)) return -1;
            pws(p);
            if (c == '{') {
                if (peek(p) != ':') return pfail(p, "expected ':'");
                p->i++;
                pws(p);
                if (pskip(p, depth + 1)) return -1;
                pws(p);
            }
            if (peek(p) == ',') {
                p->i++;
                continue;
            }
            if (peek(p) == close) {
                p->i++;
                return 0;
            }
            return pfail(p, "expected ',' or a closing bracket");
        }
    }
    if (c == '-' || c == '+' || pdigit(c) || c == '.') {
        if (c == '-' || c == '+') p->i++;
        int any = 0;
        while (p->i < p->n) {
            uint8_t d = p->s[p->i];
            if (pdigit(d) || d == '.' || d == 'e' || d == 'E' || d == 'L' || d == 'j' ||
                ((d == '-' || d == '+') && (p->s[p->i - 1] == 'e' || p->s[p->i - 1] == 'E'))) {
                any = 1;
                p->i++;
            } else break;
        }
        return any ? 0 : pfail(p, "bad number");
    }
    if (!pword(p, "True") || !pword(p, "False") || !pword(p, "None")) return 0;
    return pfail(p, "unexpected character");
}

typedef struct {
    int have_descr, have_fortran, have_shape;
    int descr_plain;   /* descr is a simple string without escapes */
    size_t descr_off, descr_len;
    uint32_t ndim;
    int shape_ok;      /* all dimensions fit, ndim <= NPY_MAX_NDIM */
    uint64_t shape[NPY_MAX_NDIM];
} npy_hdr;

static int key_eq(const pl *p, size_t off, size_t len, const char *w)
{
    return strlen(w) == len && memcmp(p->s + off, w, len) == 0;
}

static int parse_shape(pl *p, npy_hdr *h)
{
    if (peek(p) != '(') return pfail(p, "shape is not a tuple");
    p->i++;
    size_t count = 0;
    int trailing = 0;
    h->shape_ok = 1;
    for (;;) {
        pws(p);
        if (peek(p) == ')') {
            p->i++;
            break;
        }
        uint64_t v;
        int ovf = 0;
        if (pint(p, &v, &ovf)) return -1;
        if (ovf) h->shape_ok = 0;
        if (count < NPY_MAX_NDIM) h->shape[count] = v;
        else h->shape_ok = 0;
        count++;
        trailing = 0;
        pws(p);
        if (peek(p) == ',') {
            p->i++;
            trailing = 1;
            continue;
        }
        if (peek(p) == ')') {
            p->i++;
            break;
        }
        return pfail(p, "expected ',' or ')' in the shape");
    }
    if (count == 1 && !trailing) return pfail(p, "shape is not a tuple");
    h->ndim = count <= NPY_MAX_NDIM ? (uint32_t)count : 0;
    return 0;
}

static int parse_dict(pl *p, npy_hdr *h)
{
    pws(p);
    if (peek(p) != '{') return pfail(p, "header is not a dict");
    p->i++;
    for (;;) {
        pws(p);
        if (peek(p) == '}') {
            p->i++;
            break;
        }
        size_t ko, kl;
        int esc;
        if (pstr(p, &ko, &kl, &esc)) return -1;
        pws(p);
        if (peek(p) != ':') return pfail(p, "expected ':'");
        p->i++;
        pws(p);
        if (!esc && key_eq(p, ko, kl, "descr")) {
            if (h->have_descr) return pfail(p, "duplicate key 'descr'");
            h->have_descr = 1;
            int c = peek(p);
            if (c == '\'' || c == '"') {
                if (pstr(p, &h->descr_off, &h->descr_len, &esc)) return -1;
                h->descr_plain = !esc;
            } else if (c == '[' || c == '(') {
                if (pskip(p, 1)) /* structured dtype: the data stays opaque */
                    return -1;
            } else return pfail(p, "bad 'descr' value");
        } else if (!esc && key_eq(p, ko, kl, "fortran_order")) {
            if (h->have_fortran) return pfail(p, "duplicate key 'fortran_order'");
            h->have_fortran = 1;
            if (pword(p, "True") && pword(p, "False")) return pfail(p, "bad 'fortran_order' value");
        } else if (!esc && key_eq(p, ko, kl, "shape")) {
            if (h->have_shape) return pfail(p, "duplicate key 'shape'");
            h->have_shape = 1;
            if (parse_shape(p, h)) return -1;
        } else {
            return pfail(p, "unexpected key in the header");
        }
        pws(p);
        if (peek(p) == ',') {
            p->i++;
            continue;
        }
        if (peek(p) == '}') {
            p->i++;
            break;
        }
        return pfail(p, "expected ',' or '}'");
    }
    pws(p);
    if (p->i != p->n) return pfail(p, "unexpected bytes after the header dict");
    if (!h->have_descr || !h->have_fortran || !h->have_shape)
        return pfail(p, "header lacks descr, fortran_order or shape");
    return 0;
}

fmt_status npy_parse_header(const uint8_t *b, size_t len, uint64_t total, npy_info *info, size_t *need, char *why,
                            size_t whylen)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (need) *need = 0;
    if (why && whylen) why[0] = '\0';
    if (total != CKPZ_SIZE_UNKNOWN && len > total) len = (size_t)total;

    size_t k = len < 6 ? len : 6;
    if (memcmp(b, magic, k) != 0) {
        fmt_why(why, whylen, "no .npy magic (\\x93NUMPY)");
        return FMT_ERROR;
    }
    if (len < 8) {
        if (total != CKPZ_SIZE_UNKNOWN && total < 8) {
            fmt_why(why, whylen, "file of %llu bytes is too short for a .npy header", (unsigned long long)total);
            return FMT_ERROR;
        }
        if (need) *need = 8;
        return FMT_NEED_MORE;
    }
    unsigned major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0) {
        fmt_why(why, whylen, "unsupported .npy version %u.%u", major, minor);
        return FMT_ERROR;
    }
    size_t pre = major == 1 ? 10 : 12;
    if (len < pre) {
        if (total != CKPZ_SIZE_UNKNOWN && total < pre) {
            fmt_why(why, whylen, "file of %llu bytes is too short for a .npy header", (unsigned long long)total);
            return FMT_ERROR;
        }
        if (need) *need = pre;
        return FMT_NEED_MORE;
    }
    uint64_t hl = major == 1 ? (uint64_t)b[8] | (uint64_t)b[9] << 8
                             : (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
    uint64_t dstart = pre + hl;
    if (total != CKPZ_SIZE_UNKNOWN && dstart > total) {
        fmt_why(why, whylen, ".npy header length %llu exceeds the file size %llu", (unsigned long long)hl,
                (unsigned long long)total);
        return FMT_ERROR;
    }
    if (dstart > FMT_PROBE_MAX) {
        fmt_why(why, whylen, ".npy header length %llu exceeds the limit of %u bytes", (unsigned long long)hl,
                (unsigned)FMT_PROBE_MAX);
        return FMT_ERROR;
    }
    size_t avail = len < dstart ? len : (size_t)dstart;
    for (size_t j = pre; j < avail; j++) {
        uint8_t c = b[j];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            fmt_why(why, whylen, ".npy header: control byte 0x%02x at offset %zu", c, j);
            return FMT_ERROR;
        }
    }
    if (len < dstart) {
        if (need) *need = (size_t)dstart;
        return FMT_NEED_MORE;
    }

    pl p = {b + pre, (size_t)hl, 0, NULL, 0};
    npy_hdr h;
    memset(&h, 0, sizeof(h));
    if (parse_dict(&p, &h)) {
        fmt_why(why, whylen, ".npy header: %s at offset %zu", p.err, pre + p.err_at);
        return FMT_ERROR;
    }

    ckpz_dtype dt = CKPZ_DTYPE_NONE;
    unsigned esz = 0;
    if (h.descr_plain) { /* the dtype table's numpy names */
        ckpz_dtype t = dtype_find(DT_NAMES_NUMPY, (const char *)p.s + h.descr_off, h.descr_len);
        if (t != CKPZ_DTYPE_COUNT_) {
            dt = t;
            esz = ckpz_dtype_size(t);
        }
    }
    int tensor = dt != CKPZ_DTYPE_NONE && h.shape_ok;
    uint64_t nbytes = esz;
    if (tensor) {
        int zero = 0, ovf = 0;
        for (uint32_t j = 0; j < h.ndim; j++) {
            uint64_t d = h.shape[j];
            if (d == 0) zero = 1;
            else if (nbytes > UINT64_MAX / d) ovf = 1;
            else nbytes *= d;
        }
        if (zero) nbytes = 0; /* a 0 dimension makes it empty whatever the others are */
        else if (ovf) tensor = 0;
    }
    if (tensor && nbytes > UINT64_MAX - dstart) tensor = 0;
    if (tensor && total != CKPZ_SIZE_UNKNOWN && dstart + nbytes > total)
        tensor = 0; /* truncated data: keep it as opaque bytes */

    memset(info, 0, sizeof(*info));
    info->dtype = tensor ? dt : CKPZ_DTYPE_NONE;
    info->data_off = dstart;
    if (tensor) {
        info->ndim = h.ndim;
        memcpy(info->shape, h.shape, (size_t)h.ndim * sizeof(uint64_t));
        info->nbytes = nbytes;
    }
    return FMT_DONE;
}

static fmt_status npy_describe(const uint8_t *b, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                               size_t *need, char *why, size_t whylen)
{
    if (fmt_begin(out, rq, &len, total, need, why, whylen)) return FMT_ERROR;
    npy_info info;
    fmt_status st = npy_parse_header(b, len, total, &info, need, why, whylen);
    if (st != FMT_DONE) return st;

    out->format = CKPZ_INPUT_NPY;
    if (fmt_push(out, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, 0, info.data_off) ||
        (info.dtype != CKPZ_DTYPE_NONE &&
         fmt_push(out, info.dtype, "array", 5, info.ndim, info.shape, info.data_off, info.nbytes)) ||
        fmt_finish(out)) {
        fmt_list_free(out);
        return FMT_NOMEM;
    }
    return FMT_DONE;
}

static int npy_sniff(const uint8_t *p, size_t len)
{
    (void)p, (void)len;
    return 1; /* the reader's own magic check gives the reason for the note */
}

const fmt_reader fmt_reader_npy = {CKPZ_INPUT_NPY, "npy", npy_sniff, npy_describe, NULL, NULL};
