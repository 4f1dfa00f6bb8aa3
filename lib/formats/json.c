/* json.c — the strict JSON tokenizer of the format readers (json.h).
 *
 * RFC 8259 syntax, UTF-8 validated, no lone surrogates, nesting bounded by the caller's
 * depth (json_skip refuses past JSON_MAX_DEPTH). It reads in place and allocates only
 * the decoded strings a caller asks to keep, so what it allocates is bounded by the
 * text's length. Errors are static texts with the offset of the first one: a reader
 * turns them into its own message ("safetensors header: ... at offset N").
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

int json_fail(json_p *p, const char *msg)
{
    if (!p->err) {
        p->err = msg;
        p->err_at = p->i;
    }
    return -1;
}

int json_oom(json_p *p)
{
    p->oom = 1;
    return json_fail(p, "out of memory");
}

int json_grow(void **buf, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < want) {
        if (c > ((size_t)-1) / 2 / elem) return -1;
        c *= 2;
    }
    void *b = realloc(*buf, c * elem);
    if (!b) return -1;
    *buf = b;
    *cap = c;
    return 0;
}

static int json_put(json_p *p, const void *b, size_t k)
{
    if (json_grow((void **)&p->str, &p->scap, p->slen + k, 1)) return json_oom(p);
    memcpy(p->str + p->slen, b, k);
    p->slen += k;
    return 0;
}

size_t json_utf8_len(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    size_t k;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t j = 2; j < k; j++)
        if (s[j] < 0x80 || s[j] > 0xBF) return 0;
    return k;
}

static int hex4(json_p *p, unsigned *v)
{
    if (p->n - p->i < 4) return json_fail(p, "truncated \\u escape");
    unsigned x = 0;
    for (int j = 0; j < 4; j++) {
        uint8_t c = p->s[p->i + j];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= c - '0';
        else if (c >= 'a' && c <= 'f') x |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') x |= c - 'A' + 10;
        else return json_fail(p, "bad \\u escape");
    }
    p->i += 4;
    *v = x;
    return 0;
}

/* Bytes a string may hold as they are, one test a byte: printable ASCII but the quote
 * (0x22) and the backslash (0x5c). */
/* clang-format off */
#define J4(x) x, x, x, x
#define J16(x) J4(x), J4(x), J4(x), J4(x)
static const uint8_t plain_ascii[256] = {
    J16(0), J16(0),                  /* 0x00-0x1f: control bytes */
    1, 1, 0, 1, J4(1), J4(1), J4(1), /* 0x20-0x2f */
    J16(1), J16(1),                  /* 0x30-0x4f */
    J4(1), J4(1), J4(1), 0, 1, 1, 1, /* 0x50-0x5f */
    J16(1), J16(1),                  /* 0x60-0x7f; 0x80-0xff: 0 */
};
#undef J16
#undef J4
/* clang-format on */

static int is_plain(uint8_t c) { return plain_ascii[c]; }

int json_string_raw(json_p *p, const uint8_t **raw, size_t *rlen)
{
    *raw = NULL;
    *rlen = 0;
    if (p->i >= p->n || p->s[p->i] != '"') return json_fail(p, "expected a string");
    size_t st = p->i + 1, k = st;
    /* the usual string (a name, a key, a dtype): plain ASCII to its closing quote, seen
     * once; anything else (escapes, UTF-8, an error) goes through json_string */
    while (k < p->n && is_plain(p->s[k])) k++;
    if (k < p->n && p->s[k] == '"') {
        p->i = k + 1;
        *raw = p->s + st;
        *rlen = k - st;
        return 0;
    }
    if (json_string(p, 0)) return -1;
    if (!memchr(p->s + st, '\\', p->i - 1 - st)) {
        *raw = p->s + st;
        *rlen = p->i - 1 - st;
    }
    return 0;
}

int json_string(json_p *p, int keep)
{
    if (p->i >= p->n || p->s[p->i] != '"') return json_fail(p, "expected a string");
    p->i++;
    for (;;) {
        if (p->i >= p->n) return json_fail(p, "unterminated string");
        uint8_t c = p->s[p->i];
        if (c == '"') {
            p->i++;
            return 0;
        }
        if (c < 0x20) return json_fail(p, "control character in a string");
        if (c == '\\') {
            p->i++;
            if (p->i >= p->n) return json_fail(p, "unterminated string");
            uint8_t e = p->s[p->i++], o;
            switch (e) {
            case '"':
            case '\\':
            case '/': o = e; break;
            case 'b': o = '\b'; break;
            case 'f': o = '\f'; break;
            case 'n': o = '\n'; break;
            case 'r': o = '\r'; break;
            case 't': o = '\t'; break;
            case 'u': {
                unsigned cp, lo;
                if (hex4(p, &cp)) return -1;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return json_fail(p, "lone low surrogate in a \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                        return json_fail(p, "lone high surrogate in a \\u escape");
                    p->i += 2;
                    if (hex4(p, &lo)) return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return json_fail(p, "lone high surrogate in a \\u escape");
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
                    if (json_put(p, u, k)) return -1;
                }
                continue;
            }
            default: p->i--; return json_fail(p, "bad escape in a string");
            }
            if (keep && json_put(p, &o, 1)) return -1;
            continue;
        }
        if (c < 0x80) {
            /* a run of plain ASCII (no quote, backslash or control byte) is kept with one
             * copy: byte by byte, a safetensors header of 4,800 names took a tenth of the
             * whole compression of its file */
            size_t k = p->i + 1;
            while (k < p->n && is_plain(p->s[k])) k++;
            if (keep && json_put(p, p->s + p->i, k - p->i)) return -1;
            p->i = k;
            continue;
        }
        size_t k = json_utf8_len(p->s + p->i, p->n - p->i);
        if (!k) return json_fail(p, "invalid UTF-8 in a string");
        if (keep && json_put(p, p->s + p->i, k)) return -1;
        p->i += k;
    }
}

int json_number(json_p *p, uint64_t *v, int *is_uint)
{
    size_t st = p->i;
    int plain = 1;
    if (p->i < p->n && p->s[p->i] == '-') {
        plain = 0;
        p->i++;
    }
    if (p->i >= p->n) return json_fail(p, "truncated number");
    if (p->s[p->i] == '0') p->i++;
    else if (p->s[p->i] >= '1' && p->s[p->i] <= '9')
        while (p->i < p->n && json_digit(p->s[p->i])) p->i++;
    else return json_fail(p, "bad number");
    size_t int_end = p->i;
    if (p->i < p->n && p->s[p->i] == '.') {
        plain = 0;
        p->i++;
        if (p->i >= p->n || !json_digit(p->s[p->i])) return json_fail(p, "bad number fraction");
        while (p->i < p->n && json_digit(p->s[p->i])) p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        plain = 0;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || !json_digit(p->s[p->i])) return json_fail(p, "bad number exponent");
        while (p->i < p->n && json_digit(p->s[p->i])) p->i++;
    }
    *is_uint = 0;
    *v = 0;
    if (plain) {
        uint64_t x = 0;
        for (size_t j = st; j < int_end; j++) {
            unsigned d = p->s[j] - '0';
            if (x > (UINT64_MAX - d) / 10) return 0; /* valid JSON, too large for us */
            x = x * 10 + d;
        }
        *v = x;
        *is_uint = 1;
    }
    return 0;
}

static int json_literal(json_p *p, const char *w)
{
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k) != 0) return json_fail(p, "unexpected character");
    p->i += k;
    return 0;
}

int json_skip(json_p *p, int depth)
{
    if (depth > JSON_MAX_DEPTH) return json_fail(p, "JSON nested too deeply");
    if (p->i >= p->n) return json_fail(p, "truncated JSON");
    uint64_t v;
    int u;
    switch (p->s[p->i]) {
    case '{':
        p->i++;
        json_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            return 0;
        }
        for (;;) {
            json_ws(p);
            if (json_string(p, 0)) return -1;
            json_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return json_fail(p, "expected ':'");
            p->i++;
            json_ws(p);
            if (json_skip(p, depth + 1)) return -1;
            json_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                return 0;
            }
            return json_fail(p, "expected ',' or '}'");
        }
    case '[':
        p->i++;
        json_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            return 0;
        }
        for (;;) {
            json_ws(p);
            if (json_skip(p, depth + 1)) return -1;
            json_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                return 0;
            }
            return json_fail(p, "expected ',' or ']'");
        }
    case '"': return json_string(p, 0);
    case 't': return json_literal(p, "true");
    case 'f': return json_literal(p, "false");
    case 'n': return json_literal(p, "null");
    default:
        if (p->s[p->i] == '-' || json_digit(p->s[p->i])) return json_number(p, &v, &u);
        return json_fail(p, "unexpected character");
    }
}
