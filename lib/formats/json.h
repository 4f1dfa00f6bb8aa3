/* json.h — the strict JSON tokenizer the format readers share (json.c): safetensors'
 * header today, any JSON a later reader meets. A json_p walks text s[0..n) in place;
 * every call returns 0, or -1 after recording the first error (static text, and where)
 * in the json_p, so that a reader can stop at once and name the offset. Strings a caller
 * keeps are decoded (escapes resolved, UTF-8) into one growing pool, str[0..slen), which
 * the caller frees.
 */
#ifndef CKPZ_JSON_H
#define CKPZ_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 64 /* nesting json_skip accepts */

typedef struct json_p {
    const uint8_t *s;
    size_t n, i;       /* text length, position */
    const char *err;   /* first error (static text), NULL while none */
    size_t err_at;     /* position of the first error */
    int oom;           /* the first error was a failed allocation */
    char *str;         /* decoded strings kept by json_string(p, 1), malloc'd */
    size_t slen, scap;
} json_p;

static inline int json_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* Records msg (when no error is recorded yet) at the current position; returns -1. */
int json_fail(json_p *p, const char *msg);
/* json_fail for a failed allocation (sets oom). */
int json_oom(json_p *p);
/* Skips JSON whitespace (inline: it runs between every two tokens). */
static inline void json_ws(json_p *p)
{
    while (p->i < p->n) {
        uint8_t c = p->s[p->i];
        if (c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r')) break;
        p->i++;
    }
}
/* Grows *buf (of *cap elements of elem bytes) to hold want elements: doubling, 0 or -1. */
int json_grow(void **buf, size_t *cap, size_t want, size_t elem);
/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
size_t json_utf8_len(const uint8_t *s, size_t n);
/* Parses a JSON string at p->i; when keep, appends its decoded UTF-8 to p->str. */
int json_string(json_p *p, int keep);
/* Parses a JSON string at p->i as json_string(p, 0) does; when it holds no escape, *raw
 * points at its bytes in the text (between the quotes, *rlen of them: valid UTF-8, no
 * control byte), else *raw is NULL and a caller wanting its value decodes it again. */
int json_string_raw(json_p *p, const uint8_t **raw, size_t *rlen);
/* Parses a JSON number. *is_uint: it is a non-negative integer without fraction or
 * exponent that fits in 64 bits, whose value is *v. */
int json_number(json_p *p, uint64_t *v, int *is_uint);
/* Skips one value of any kind at nesting depth (refused past JSON_MAX_DEPTH). */
int json_skip(json_p *p, int depth);

#endif /* CKPZ_JSON_H */
