/* mlp.c — parsing and evaluating the ratio predictor's network (see mlp.h).
 *
 * The format is a list of whitespace-separated tokens ('#' starts a comment to the end
 * of the line), read with a tiny tokenizer that tracks line numbers for the messages.
 * Numbers go through strtod and are rejected unless the whole token is a finite
 * number within MLP_MAX_ABS; counts must be small positive integers.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predict/mlp.h"

typedef struct tok {
    const char *p, *end;
    unsigned line;
    char buf[64];
    char *why;
    size_t whylen;
} tok;

static int fail(tok *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(tok *t, const char *fmt, ...)
{
    if (t->why && t->whylen) {
        int k = snprintf(t->why, t->whylen, "line %u: ", t->line);
        if (k >= 0 && (size_t)k < t->whylen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(t->why + k, t->whylen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

/* Next token into t->buf; 0, or -1 at the end of the text or for an over-long token. */
static int next(tok *t)
{
    for (;;) {
        while (t->p < t->end && (*t->p == ' ' || *t->p == '\t' || *t->p == '\r' || *t->p == '\n')) {
            if (*t->p == '\n') t->line++;
            t->p++;
        }
        if (t->p < t->end && *t->p == '#') {
            while (t->p < t->end && *t->p != '\n') t->p++;
            continue;
        }
        break;
    }
    if (t->p >= t->end) return fail(t, "unexpected end of the model file (truncated?)");
    size_t n = 0;
    while (t->p < t->end && !(*t->p == ' ' || *t->p == '\t' || *t->p == '\r' || *t->p == '\n' || *t->p == '#')) {
        if (*t->p == 0) return fail(t, "NUL byte in the model file");
        if (n + 1 >= sizeof t->buf) return fail(t, "token too long");
        t->buf[n++] = *t->p++;
    }
    t->buf[n] = 0;
    return 0;
}

static int expect(tok *t, const char *word)
{
    if (next(t)) return -1;
    if (strcmp(t->buf, word)) return fail(t, "expected '%s', found '%s'", word, t->buf);
    return 0;
}

static int number(tok *t, double *v)
{
    char *e;
    if (next(t)) return -1;
    errno = 0;
    double x = strtod(t->buf, &e);
    if (e == t->buf || *e || errno == ERANGE) return fail(t, "'%s' is not a number", t->buf);
    if (!isfinite(x) || fabs(x) > MLP_MAX_ABS) return fail(t, "number '%s' out of range", t->buf);
    *v = x;
    return 0;
}

static int count(tok *t, unsigned lo, unsigned hi, unsigned *v)
{
    char *e;
    if (next(t)) return -1;
    if (t->buf[0] < '0' || t->buf[0] > '9') return fail(t, "'%s' is not a count", t->buf);
    errno = 0;
    unsigned long x = strtoul(t->buf, &e, 10);
    if (*e || errno || x < lo || x > hi) return fail(t, "count '%s' not in %u..%u", t->buf, lo, hi);
    *v = (unsigned)x;
    return 0;
}

static int numbers(tok *t, double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (number(t, &v[i])) return -1;
    return 0;
}

void mlp_free(mlp *m)
{
    if (!m) return;
    free(m->mean);
    free(m->scale);
    for (unsigned i = 0; i < MLP_MAX_LAYERS; i++) {
        free(m->layer[i].w);
        free(m->layer[i].b);
    }
    memset(m, 0, sizeof *m);
}

int mlp_parse(const char *text, size_t len, unsigned inputs, mlp *m, char *why, size_t whylen)
{
    tok t = {.p = text, .end = text + len, .line = 1, .why = why, .whylen = whylen};
    unsigned version, nin, prev;
    memset(m, 0, sizeof *m);
    if (why && whylen) why[0] = 0;
    if (!text) return fail(&t, "no model text");
    if (expect(&t, "ckpz-ratio-mlp") || count(&t, 1, 1, &version)) return -1;
    if (expect(&t, "inputs") || count(&t, 1, MLP_MAX_WIDTH, &nin)) return -1;
    if (nin != inputs) return fail(&t, "the model takes %u inputs, the features are %u", nin, inputs);
    m->inputs = nin;
    if (expect(&t, "layers") || count(&t, 1, MLP_MAX_LAYERS, &m->nlayers)) return -1;
    m->mean = malloc(sizeof(double) * nin);
    m->scale = malloc(sizeof(double) * nin);
    if (!m->mean || !m->scale) return fail(&t, "out of memory");
    if (expect(&t, "mean") || numbers(&t, m->mean, nin)) return -1;
    if (expect(&t, "scale") || numbers(&t, m->scale, nin)) return -1;
    prev = nin;
    for (unsigned l = 0; l < m->nlayers; l++) {
        mlp_layer *L = &m->layer[l];
        if (expect(&t, "layer") || count(&t, 1, MLP_MAX_WIDTH, &L->in) || count(&t, 1, MLP_MAX_WIDTH, &L->out))
            return -1;
        if (L->in != prev) return fail(&t, "layer %u takes %u inputs, the previous gives %u", l + 1, L->in, prev);
        if (next(&t)) return -1;
        if (!strcmp(t.buf, "relu")) L->relu = 1;
        else if (strcmp(t.buf, "linear")) return fail(&t, "activation '%s' (relu or linear)", t.buf);
        if (l + 1 == m->nlayers && (L->out != 1 || L->relu))
            return fail(&t, "the last layer must be 'linear' with one output");
        L->w = malloc(sizeof(double) * L->in * L->out);
        L->b = malloc(sizeof(double) * L->out);
        if (!L->w || !L->b) return fail(&t, "out of memory");
        if (expect(&t, "weights") || numbers(&t, L->w, (size_t)L->in * L->out)) return -1;
        if (expect(&t, "bias") || numbers(&t, L->b, L->out)) return -1;
        prev = L->out;
    }
    if (expect(&t, "end")) return -1;
    /* only comments and blanks may follow */
    if (next(&t) == 0) return fail(&t, "unexpected '%s' after 'end'", t.buf);
    if (why && whylen) why[0] = 0;
    return 0;
}

double mlp_forward(const mlp *m, const double *x)
{
    double a[MLP_MAX_WIDTH], b[MLP_MAX_WIDTH];
    for (unsigned i = 0; i < m->inputs; i++) a[i] = (x[i] - m->mean[i]) * m->scale[i];
    for (unsigned l = 0; l < m->nlayers; l++) {
        const mlp_layer *L = &m->layer[l];
        for (unsigned o = 0; o < L->out; o++) {
            double s = L->b[o];
            const double *w = L->w + (size_t)o * L->in;
            for (unsigned i = 0; i < L->in; i++) s += w[i] * a[i];
            b[o] = L->relu && s < 0 ? 0 : s;
        }
        memcpy(a, b, sizeof(double) * L->out);
    }
    return a[0];
}
