/* lossyopt.c — see lossyopt.h. Apart from cli.c so that the option parser stays one
 * screenful per job; every error is a sentence for cli.c to print as a usage error. */
#include "lossyopt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

#define SAY(...) (snprintf(why, whylen, __VA_ARGS__), -1)
#define ONE_MODE "give one lossy mode (or write a --policy file for several)"

int lossy_takes(const char *name, size_t len)
{
    static const struct {
        const char *name;
        int kind;
    } OPTS[] = {{"abs", LOSSY_NEEDS_VAL},        {"rel", LOSSY_NEEDS_VAL},        {"pointwise-rel", LOSSY_NEEDS_VAL},
                {"change-rel", LOSSY_NEEDS_VAL}, {"int8", LOSSY_MAY_VAL},         {"bits", LOSSY_NEEDS_VAL},
                {"block", LOSSY_NEEDS_VAL},      {"percentile", LOSSY_NEEDS_VAL}, {"prune", LOSSY_NEEDS_VAL},
                {"policy", LOSSY_NEEDS_VAL},     {"stochastic", LOSSY_NO_VAL},    {"col-delta", LOSSY_NO_VAL},
                {"lossy", LOSSY_NEEDS_VAL},      {"stochastic-log", LOSSY_NO_VAL}};
    for (size_t i = 0; i < sizeof OPTS / sizeof *OPTS; i++)
        if (len == strlen(OPTS[i].name) && !strncmp(name, OPTS[i].name, len)) return OPTS[i].kind;
    return LOSSY_NOT_MINE;
}

int lossy_fraction(const char *opt, const char *val, double lo, double hi, double *out, char *why, size_t whylen)
{
    char *end;
    double v = strtod(val, &end);
    if (!*val || *end || !(v >= lo && v <= hi)) return SAY("--%s needs a value in %g..%g, not '%s'", opt, lo, hi, val);
    *out = v;
    return 0;
}

static int set_bound(lossy_flags *l, const char *mode, const char *val, char *why, size_t whylen)
{
    char *end;
    double v = strtod(val, &end);
    int prel = !strcmp(mode, "pointwise-rel");
    if (!*val || *end || !(v > 0) || v > 1e30 || (prel && !(v < 1)))
        return SAY("--%s needs a bound > 0%s, not '%s'", mode, prel ? " and < 1" : "", val);
    if (l->mode) return SAY(ONE_MODE);
    snprintf(l->buf, sizeof l->buf, "%s %.17g", mode, v);
    l->mode = l->buf;
    return 0;
}

/* --lossy=auto or --lossy=auto:K. The knob's range is the library's (lib/transforms/auto.h,
 * AUTO_K_MIN..AUTO_K_MAX), checked here too so that a bad one is a usage error before
 * any file is touched. */
static int set_lossy(lossy_flags *l, const char *val, char *why, size_t whylen)
{
    const char *k = val + 5;
    char *end;
    if (strncmp(val, "auto", 4) || (val[4] && val[4] != ':'))
        return SAY("--lossy takes auto or auto:K (K = tight, default, aggressive or a number), not '%s'", val);
    if (val[4] == ':' && strcmp(k, "tight") && strcmp(k, "default") && strcmp(k, "aggressive")) {
        double v = strtod(k, &end);
        if (!*k || *end || !(v >= 1.0 / 64 && v <= 16))
            return SAY("--lossy=auto:K takes tight, default, aggressive or a number in 0.015625..16, not '%s'", k);
    }
    if (l->mode) return SAY(ONE_MODE);
    snprintf(l->buf, sizeof l->buf, "auto%s%s", val[4] ? " " : "", val[4] ? val + 5 : "");
    l->mode = l->buf;
    return 0;
}

int lossy_option(lossy_flags *l, const char *name, size_t len, const char *val, char *why, size_t whylen)
{
    char opt[16];
    snprintf(opt, sizeof opt, "%.*s", (int)(len < 15 ? len : 15), name);
    if (!strcmp(opt, "abs") || !strcmp(opt, "rel") || !strcmp(opt, "pointwise-rel") || !strcmp(opt, "change-rel"))
        return set_bound(l, opt, val, why, whylen);
    if (!strcmp(opt, "lossy")) return set_lossy(l, val, why, whylen);
    if (!strcmp(opt, "int8")) {
        if (l->mode) return SAY(ONE_MODE);
        if (val && strcmp(val, "sym") && strcmp(val, "asym")) return SAY("--int8 takes sym or asym");
        if (val) l->sym = val[0] == 's';
        l->mode = "int8";
    } else if (!strcmp(opt, "bits")) {
        if (l->mode) return SAY(ONE_MODE);
        if (strcmp(val, "8") && strcmp(val, "16")) return SAY("--bits takes 8 or 16");
        l->mode = val[0] == '8' ? "bits 8" : "bits 16";
    } else if (!strcmp(opt, "block")) {
        double v;
        if (lossy_fraction("block", val, 16, 1 << 24, &v, why, whylen) || v != (int)v)
            return SAY("--block needs a number of elements, 16..16777216");
        l->block = (int)v;
        l->block_set = 1;
    } else if (!strcmp(opt, "percentile")) {
        l->pct_set = 1;
        return lossy_fraction("percentile", val, 50.000001, 100, &l->pct, why, whylen);
    } else if (!strcmp(opt, "prune")) {
        l->prune_set = 1;
        return lossy_fraction("prune", val, 0, 0.999, &l->prune, why, whylen);
    } else if (!strcmp(opt, "policy")) {
        l->policy_file = val;
    } else if (!strcmp(opt, "stochastic")) {
        l->stochastic = 1;
    } else if (!strcmp(opt, "stochastic-log")) {
        l->stochastic = 2;
    } else if (!strcmp(opt, "col-delta")) {
        l->delta = 1;
    }
    return 0;
}

static int check_flags(const lossy_flags *l, char *why, size_t whylen)
{
    if (!l->mode && (l->pct_set || l->prune_set || l->block_set || l->sym >= 0 || l->stochastic))
        return SAY("--prune, --percentile, --block, --stochastic[-log] and --int8/--bits options need a lossy mode");
    if (l->mode && !strncmp(l->mode, "auto", 4) &&
        (l->pct_set || l->prune_set || l->block_set || l->stochastic || l->delta))
        return SAY("--lossy=auto sets every tensor's options itself: it takes no --prune, --percentile, --block, "
                   "--stochastic[-log] or --col-delta");
    if (l->stochastic == 2 && strncmp(l->mode, "pointwise-rel", 13))
        return SAY("--stochastic-log applies to --pointwise-rel");
    if (l->stochastic && strncmp(l->mode, "abs", 3) && strncmp(l->mode, "rel", 3) &&
        strncmp(l->mode, "change-rel", 10) && strncmp(l->mode, "pointwise-rel", 13))
        return SAY("--stochastic applies to --abs, --rel, --change-rel and --pointwise-rel");
    if (l->mode && strncmp(l->mode, "bits", 4) && strncmp(l->mode, "int8", 4) &&
        (l->pct_set || l->block_set || l->delta))
        return SAY("--percentile, --block and --col-delta apply to --int8 and --bits");
    if (!l->mode && l->delta) return SAY("--col-delta needs --int8 or --bits");
    return 0;
}

int lossy_build_policy(const lossy_flags *l, char **text, char *why, size_t whylen)
{
    void *file = NULL;
    size_t flen = 0;
    *text = NULL;
    if (check_flags(l, why, whylen)) return -1;
    if (!l->mode && !l->policy_file) return 0;
    if (l->policy_file && fio_load_file(l->policy_file, &file, &flen) != 0) return 2;
    size_t cap = flen + 256;
    char *t = malloc(cap);
    if (!t) {
        free(file);
        fputs("ckpz: out of memory\n", stderr);
        return 2;
    }
    memcpy(t, file ? file : "", flen);
    free(file);
    t[flen] = 0;
    if (memchr(t, 0, flen)) {
        free(t);
        return SAY("%s: not a text file", l->policy_file);
    }
    if (l->mode) {
        size_t at = flen;
        at += (size_t)snprintf(t + at, cap - at, "\n* %s", l->mode);
        if (l->sym >= 0) at += (size_t)snprintf(t + at, cap - at, " %s", l->sym ? "sym" : "asym");
        if (l->block_set) at += (size_t)snprintf(t + at, cap - at, " block %d", l->block);
        if (l->pct_set) at += (size_t)snprintf(t + at, cap - at, " pct %.17g", l->pct);
        if (l->prune_set) at += (size_t)snprintf(t + at, cap - at, " prune %.17g", l->prune);
        if (l->stochastic)
            at += (size_t)snprintf(t + at, cap - at, l->stochastic == 2 ? " stochastic-log" : " stochastic");
        if (l->delta) at += (size_t)snprintf(t + at, cap - at, " delta");
        snprintf(t + at, cap - at, "\n");
    }
    *text = t;
    return 0;
}
