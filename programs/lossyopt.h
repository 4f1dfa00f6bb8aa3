/* lossyopt.h — the command line's lossy options (--abs, --rel, ..., --policy,
 * --lossy=auto[:K]) gathered into the policy text the library takes (doc/lossy.md). */
#ifndef CKPZ_LOSSYOPT_H
#define CKPZ_LOSSYOPT_H

#include <stddef.h>

typedef struct lossy_flags {
    const char *mode; /* "abs 0.001", ... (points into buf or a constant) */
    char buf[64];
    const char *policy_file;
    int block, sym; /* block 0 = default; sym -1 = default */
    double pct, prune;
    int pct_set, prune_set, block_set, delta;
    int stochastic; /* 0 none, 1 --stochastic, 2 --stochastic-log */
} lossy_flags;

/* What a long option NAME (len bytes) is to the lossy flags: not one of them, one that
 * takes no value, one that needs a value, or one whose value is optional (--int8[=V]). */
enum { LOSSY_NOT_MINE = 0, LOSSY_NO_VAL, LOSSY_NEEDS_VAL, LOSSY_MAY_VAL };
int lossy_takes(const char *name, size_t len);

/* Takes the option (val: its value or NULL). Returns 0, or -1 with the usage error in why. */
int lossy_option(lossy_flags *l, const char *name, size_t len, const char *val, char *why, size_t whylen);

/* A number in lo..hi for option opt (also used by --max-mae). 0, or -1 with why. */
int lossy_fraction(const char *opt, const char *val, double lo, double hi, double *out, char *why, size_t whylen);

/* The policy text: the --policy file, then a catch-all rule from the flags; *text is
 * malloc'd, NULL when lossless. Returns 0; -1 with a usage error in why; 2 when the
 * policy file cannot be read or memory runs out (said on stderr). */
int lossy_build_policy(const lossy_flags *l, char **text, char *why, size_t whylen);

#endif
