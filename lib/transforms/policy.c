/* policy.c — see policy.h. */
#include "policy.h"

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "transforms/auto.h"

typedef struct rule {
    char *pattern;
    quant_spec spec;
    double auto_k;     /* > 0: mode auto at this knob (auto.h) */
    double auto_beta2; /* auto: the optimizer's beta2 (`beta2 B`), 0 = not known */
    double auto_lr;    /* auto: the optimizer's learning rate (`lr L`), 0 = the file's, if it states one */
} rule;

struct policy {
    rule *r;
    size_t n;
};

void policy_free(policy *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) free(p->r[i].pattern);
    free(p->r);
    free(p);
}

/* Next whitespace-separated word of the line (comments already cut), NUL-terminated
 * in place; NULL at the end of the line. */
static char *word(char **s)
{
    char *p = *s;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (!*p) {
        *s = p;
        return NULL;
    }
    char *w = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
    if (*p) *p++ = 0;
    *s = p;
    return w;
}

static int number(const char *w, double *v)
{
    if (!w) return -1;
    char *end;
    *v = strtod(w, &end);
    return *end || !isfinite(*v) ? -1 : 0;
}

static int parse_rule(char *line, rule *r, double default_max_mae, char *why, size_t whylen)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = line, *pat = word(&s);
    memset(r, 0, sizeof *r);
    if (!pat) return 1; /* blank or comment */
    char *mode = word(&s);
    if (!mode) {
        snprintf(why, whylen, "'%s' has no mode", pat);
        return -1;
    }
    quant_spec *q = &r->spec;
    q->group = 64;
    q->max_mae = default_max_mae;
    double v;
    if (!strcmp(mode, "lossless")) {
        q->mode = QM_NONE;
    } else if (!strcmp(mode, "auto")) {
        char *at = s, *k = word(&s);
        if (k && (!strcmp(k, "level") || !strcmp(k, "max-mae") || !strcmp(k, "beta2") ||
                  !strcmp(k, "lr"))) { /* no knob: put it back */
            if (s > k + strlen(k)) k[strlen(k)] = ' ';
            s = at;
            k = NULL;
        }
        if (auto_knob(k, &r->auto_k, why, whylen)) return -1;
        q->mode = QM_NONE;
    } else if (!strcmp(mode, "abs") || !strcmp(mode, "rel") || !strcmp(mode, "pointwise-rel") ||
               !strcmp(mode, "change-rel")) {
        q->mode = mode[0] == 'a' ? QM_ABS : mode[0] == 'r' ? QM_REL : mode[0] == 'c' ? QM_CREL : QM_PREL;
        if (number(word(&s), &v) || !(v > 0) || (q->mode == QM_PREL && !(v < 1))) {
            snprintf(why, whylen, "%s needs a bound > 0%s", mode, q->mode == QM_PREL ? " and < 1" : "");
            return -1;
        }
        q->bound = v;
    } else if (!strcmp(mode, "int8")) {
        q->mode = QM_AFFINE;
        q->bits = 8;
        q->sym = 1;
        q->per_row = 1;
    } else if (!strcmp(mode, "bits")) {
        q->mode = QM_AFFINE;
        if (number(word(&s), &v) || (v != 8 && v != 16)) {
            snprintf(why, whylen, "bits must be 8 or 16");
            return -1;
        }
        q->bits = (uint8_t)v;
    } else {
        snprintf(why, whylen, "unknown mode '%s' (lossless, auto, abs, rel, change-rel, pointwise-rel, int8, bits)",
                 mode);
        return -1;
    }
    for (char *o; (o = word(&s));) {
        int aff = q->mode == QM_AFFINE;
        if (aff && (!strcmp(o, "sym") || !strcmp(o, "asym"))) {
            q->sym = o[0] == 's';
        } else if (aff && !strcmp(o, "delta")) {
            q->delta = 1;
        } else if (aff && !strcmp(o, "per-channel")) {
            q->per_row = 1;
        } else if (aff && !strcmp(o, "block")) {
            if (number(word(&s), &v) || v < 16 || v > (1 << 24) || v != floor(v)) {
                snprintf(why, whylen, "block needs a whole number of elements, 16..16777216");
                return -1;
            }
            q->group = (uint32_t)v;
            q->per_row = 0;
        } else if (aff && !strcmp(o, "pct")) {
            if (number(word(&s), &v) || !(v > 50 && v <= 100)) {
                snprintf(why, whylen, "pct needs a percentile in (50, 100]");
                return -1;
            }
            q->pct = v;
        } else if (q->mode != QM_NONE && !strcmp(o, "no-base")) {
            q->no_base = 1;
        } else if ((q->mode == QM_ABS || q->mode == QM_REL || q->mode == QM_CREL || q->mode == QM_PREL) &&
                   !strcmp(o, "stochastic")) {
            q->stochastic = QR_VALUE;
        } else if (q->mode == QM_PREL && !strcmp(o, "stochastic-log")) {
            q->stochastic = QR_LOG;
        } else if (q->mode != QM_NONE && !strcmp(o, "prune")) {
            if (number(word(&s), &v) || !(v >= 0 && v <= 0.999)) {
                snprintf(why, whylen, "prune needs a rate in 0..0.999");
                return -1;
            }
            q->prune = v;
        } else if (!strcmp(o, "level")) {
            if (number(word(&s), &v) || v < 1 || v > 9 || v != floor(v)) {
                snprintf(why, whylen, "level needs a whole number 1..9");
                return -1;
            }
            q->level = (uint8_t)v;
        } else if (r->auto_k > 0 && !strcmp(o, "beta2")) {
            if (number(word(&s), &v) || !(v > 0 && v < 1)) {
                snprintf(why, whylen, "beta2 needs Adam's beta2, in (0, 1)");
                return -1;
            }
            r->auto_beta2 = v;
        } else if (r->auto_k > 0 && !strcmp(o, "lr")) {
            if (number(word(&s), &v) || !(v > 0 && v < 1e30)) {
                snprintf(why, whylen, "lr needs the optimizer's learning rate, > 0 and < 1e30");
                return -1;
            }
            r->auto_lr = v;
        } else if ((q->mode != QM_NONE || r->auto_k > 0) && !strcmp(o, "max-mae")) {
            if (number(word(&s), &v) || !(v >= 0)) {
                snprintf(why, whylen, "max-mae needs a value >= 0");
                return -1;
            }
            q->max_mae = v;
        } else {
            snprintf(why, whylen, "unexpected '%s' after %s", o, mode);
            return -1;
        }
    }
    if (!(r->pattern = strdup(pat))) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    return 0;
}

policy *policy_parse(const char *text, double default_max_mae, char *why, size_t whylen)
{
    policy *p = calloc(1, sizeof *p);
    char *copy = strdup(text ? text : "");
    if (!p || !copy) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    size_t line_no = 0;
    for (char *line = copy, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        line_no++;
        rule r;
        char msg[160];
        int rc = parse_rule(line, &r, default_max_mae, msg, sizeof msg);
        if (rc < 0) {
            snprintf(why, whylen, "policy line %zu: %s", line_no, msg);
            goto fail;
        }
        if (rc > 0) continue;
        rule *nr = realloc(p->r, (p->n + 1) * sizeof *nr);
        if (!nr) {
            free(r.pattern);
            snprintf(why, whylen, "out of memory");
            goto fail;
        }
        p->r = nr;
        p->r[p->n++] = r;
    }
    free(copy);
    return p;
fail:
    free(copy);
    policy_free(p);
    return NULL;
}

static int contains_ci(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s; s++)
        if (!strncasecmp(s, w, n)) return 1;
    return 0;
}

int policy_lossy(const policy *p)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (p->r[i].spec.mode != QM_NONE || p->r[i].auto_k > 0) return 1;
    return 0;
}

quant_spec policy_match(const policy *p, const char *name, ckpz_dtype dtype, uint32_t ndim, const uint64_t *shape,
                        double beta2)
{
    quant_spec none = {0};
    if (!p) return none;
    if (!name) name = ""; /* opaque bytes: "*" still gives them its level */
    size_t i = 0;
    while (i < p->n && fnmatch(p->r[i].pattern, name, 0) != 0) i++;
    if (i == p->n) return none;
    none.level = p->r[i].spec.level; /* a level applies to any tensor its rule matches */
    if (!quant_dtype_ok(dtype) || (ndim < 2 && p->r[i].auto_k <= 0)) return none; /* auto: its roles decide */
    if (contains_ci(name, "norm") || contains_ci(name, "bias") || contains_ci(name, "ln_")) return none;
    quant_spec q = p->r[i].spec;
    if (p->r[i].auto_k > 0) {
        double b2 = p->r[i].auto_beta2 > 0 ? p->r[i].auto_beta2 : beta2 > 0 && beta2 < 1 ? beta2 : 0;
        q = auto_spec(auto_role_of(name, dtype, ndim, shape, NULL), p->r[i].auto_k, b2);
        if (q.keyframe_steps > 0) q.keyframe_lr = p->r[i].auto_lr;
        q.level = p->r[i].spec.level;
        q.max_mae = p->r[i].spec.max_mae;
    }
    /* Adam's second moment divides the step: a value that became zero or negative makes
     * the update explode. Only the log grid guarantees neither, so other modes leave it
     * exact, and it is never pruned. */
    if (contains_ci(name, "exp_avg_sq")) {
        if (q.mode != QM_PREL) return none;
        q.prune = 0;
    }
    return q;
}
