/* auto.c — see auto.h. The bounds per role are one table (AUTO_BOUNDS): what a bound
 * is at the default knob, and the most it may become as the knob grows. */
#include "auto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AUTO_STR_(x) #x
#define AUTO_STR(x) AUTO_STR_(x)

static const char *const ROLE_NAMES[AUTO_ROLE_COUNT_] = {"exact", "weight", "exp_avg", "exp_avg_sq"};

const char *auto_role_name(auto_role r) { return (unsigned)r < AUTO_ROLE_COUNT_ ? ROLE_NAMES[r] : "?"; }

static int contains_ci(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s; s++)
        if (!strncasecmp(s, w, n)) return 1;
    return 0;
}

/* The name's last component (after the last '.' or '/'). */
static const char *leaf(const char *name)
{
    const char *l = name;
    for (const char *p = name; *p; p++)
        if (*p == '.' || *p == '/') l = p + 1;
    return l;
}

/* Whether w is a whole component of the name ('.' or '/' around it): the moment's key
 * last (`optimizer.state.3.exp_avg`, `state.3.exp_avg`) or before the parameter's name
 * (`optim.exp_avg.transformer.wte.weight`, as a flattened state dict writes it). */
static int has_component(const char *name, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = name; (p = strstr(p, w)) != NULL; p++)
        if ((p == name || p[-1] == '.' || p[-1] == '/') && (p[n] == 0 || p[n] == '.' || p[n] == '/')) return 1;
    return 0;
}

/* Optimizer state by its place: torch.save'd {'optimizer': ...} (`optimizer.state.N.*`),
 * distributed checkpoints (`state.N.*`, `optim.*`), or any `.state.` level below. */
static int optimizer_state(const char *name)
{
    return !strncmp(name, "optimizer.", 10) || !strncmp(name, "optim.", 6) || !strncmp(name, "state.", 6) ||
           strstr(name, ".state.") || strstr(name, "optimizer_state") || strstr(name, "optim_state");
}

auto_role auto_role_of(const char *name, ckpz_dtype dtype, uint32_t ndim, const uint64_t *shape, const char **why)
{
    const char *w;
    auto_role r = AUTO_EXACT;
    uint64_t n = 1;
    for (uint32_t i = 0; shape && i < ndim; i++) n *= shape[i];
    if (!name) name = "";
    const char *l = leaf(name);
    int sq = has_component(name, "exp_avg_sq"), moment = sq || has_component(name, "exp_avg");
    if (dtype == CKPZ_DTYPE_NONE) w = "not a tensor";
    else if (!quant_dtype_ok(dtype)) w = "integer or bool";
    else if (ndim < 2 && !(moment && ndim == 1)) w = "fewer than 2 dimensions (bias, norm gain, scalar)";
    else if (!shape || n < (ndim == 1 ? AUTO_MIN_MOMENT_1D : AUTO_MIN_ELEMS))
        w = ndim == 1 ? "fewer than " AUTO_STR(AUTO_MIN_MOMENT_1D) " elements (a 1-D moment)"
                      : "fewer than " AUTO_STR(AUTO_MIN_ELEMS) " elements";
    else if (contains_ci(name, "norm") || contains_ci(name, "bias") || contains_ci(name, "ln_")) w = "norm or bias";
    else if (sq) r = AUTO_EXP_AVG_SQ, w = ndim < 2 ? "Adam second moment (name), 1-D" : "Adam second moment (name)";
    else if (moment) r = AUTO_EXP_AVG, w = ndim < 2 ? "Adam first moment (name), 1-D" : "Adam first moment (name)";
    else if (!strcmp(l, "grad")) w = "gradient";
    else if (optimizer_state(name)) w = "other optimizer state";
    else r = AUTO_WEIGHT, w = "float parameter of >= 2 dimensions";
    if (why) *why = w;
    return r;
}

int auto_knob(const char *word, double *k, char *why, size_t whylen)
{
    static const struct {
        const char *name;
        double k;
    } NAMED[] = {{"tight", 0.25}, {"default", 1}, {"aggressive", 4}};
    *k = 1;
    if (!word) return 0;
    for (size_t i = 0; i < sizeof NAMED / sizeof *NAMED; i++)
        if (!strcmp(word, NAMED[i].name)) {
            *k = NAMED[i].k;
            return 0;
        }
    char *end;
    double v = strtod(word, &end);
    if (!*word || *end || !(v >= AUTO_K_MIN && v <= AUTO_K_MAX)) {
        snprintf(why, whylen, "auto takes tight, default, aggressive or a number in %g..%g, not '%s'", AUTO_K_MIN,
                 AUTO_K_MAX, word);
        return -1;
    }
    *k = v;
    return 0;
}

/* Per role: the mode, its bound at K = 1 (scaled by K) and the most it may grow to; without
 * a base (weights: abs keyframe_steps x the learning rate the file's param_groups state,
 * one optimizer step at K = 1, scaled by K, at most keyframe_steps_max; where the file
 * states none, the keyframe's pointwise-rel bound at K = 1, scaled by K, at most
 * keyframe_max); the share pruned at K = 1 (scaled by K, at most prune_max); and whether
 * it is coded stand-alone in a delta file. A weight's error in a chain's first file never
 * fades, but what the next steps absorb follows the lr, not the weight's size: a relative
 * 1/16 instead of 1/128 (~6 bits, not ~9.2) held parity restored at step 100 or later
 * but moved the matrix's cells whose first file is at step 10 of the warm-up (15 of 18,
 * the GPT cosine every-10 cell +0.36% where 1/128 gave +0.23%); within one step of lr it
 * costs ~8.5 bits late in a cosine schedule and ~5.2 at lr 1e-3 (doc/lossy.md "The
 * chain's first file"). Measured on the corpus' GPT checkpoints 10 steps
 * apart (doc/lossy.md "auto"): a weight costs ~2.2 bits at change-rel 1 and ~1.4 at 2;
 * exp_avg ~3.1 bits unpruned whatever the log grid's bound, ~2.0 with half of it pruned,
 * ~0.6 with 90%; exp_avg_sq ~1.3 bits at pointwise-rel 0.5, ~2.0 at 0.25 and ~1.1 at 0.9.
 * Adam's steps lr m / sqrt(v) are of about one size across a tensor, so pruning a share of
 * m by magnitude drops nearly as large a share of the next ~10 steps' progress (measured:
 * pruning 50% drops 29% of sum |m| / sqrt(v), 90% drops 81%): the default prunes little
 * and spends the bits there, the weights' bound grows fastest with K. exp_avg_sq is
 * rounded without bias: rounded to nearest, a v that grows by less than a grid cell
 * between restores (beta2 = 0.999: ~1% per 10 steps) came back on its old grid point
 * every time, held low, every step too large (doc/lossy.md "Where the bytes go"); it
 * costs ~0.7-0.85 bit more where v is renewed fast (beta2 = 0.95: ~1.9 bits, not ~1.2),
 * so where the rule states beta2 <= AUTO_BETA2_FAST (ckpz.save reads it) v is rounded to
 * nearest (stochastic_fast): the quick GPT's six cells then pass 6 of 6 at 5.53-9.38x
 * per checkpoint (without: 5 of 6 at 5.24-8.66x; cosine every 10 -0.10 / -0.44%, not
 * -0.43 / -0.64%); on the LSTM (0.999) nearest fails (-1.16 / -1.74%). exp_avg's log grid
 * rounded to nearest (not its pruning) is what moved the quick GPT and LSTM below run A
 * (exp_avg exact: +0.11 / -0.14%; unpruned `pointwise-rel 0.6` -0.41 / -0.76%): it gave
 * m back ~4% larger on average, every step too large. So exp_avg is rounded without bias
 * whatever beta2, on the log grid of `pointwise-rel 0.9` (its cap: above K = 1 the knob
 * moves only its pruning): on the corpus ~3.3 bits, not ~2.85 (the chain 12.8x per delta
 * file, not 13.6x). Without bias in m's value (QR_VALUE): rounded so as to keep log2 |m|
 * (QR_LOG, as v is), m still came back 3.4% larger on average (the corpus' step 290), and
 * the default-size LSTM const every-10 cell ended 0.60% below run A (floor 0.17%: FAIL);
 * keeping m itself, -0.06% at the same 14.5x (GPT cosine every 10: +0.26%, was +0.02%;
 * GPT const: -0.31%, was -0.24%). v keeps QR_LOG: kept in value, its steps grew by ~1% on
 * average (Jensen: the step divides by sqrt(v)) and the LSTM cell went to -0.45%. Pruning
 * stays biased (the smallest m become 0): pruned without bias (0 or the grid's least value
 * past the threshold, with the odds that keep m), a quarter of m passed 15 of the default
 * matrix's 18 cells over two seeds, not 17, and more of it got the LSTM 19-21x at parity
 * (75-85% pruned) but failed the GPT const every-10 cell (+1.05% at 75%, +1.32% at 50%;
 * floor 0.87%): the noise it puts into m costs the GPT what the bits save (doc/lossy.md
 * "exp_avg without bias in its value"). A uniform grid relative to the tensor's RMS
 * (`change-rel R no-base`) passes there from R = 0.1 but costs ~0.5 bit more, and at the
 * log grid's bits (R = 0.5) it zeroes most of m and fails by 4%; at R = 0.15 it passes
 * the default-size LSTM cell auto failed (+0.32 / +0.31% at 15.5x / 15.3x, auto then -0.63%
 * at 14.4x / 14.5x) but fails the quick GPT cosine one (+0.67%): not the default
 * (doc/lossy.md "exp_avg's grid and Adam's beta2"). */
static const struct auto_bound {
    uint8_t mode;
    double bound, bound_max, keyframe, keyframe_max, keyframe_steps, keyframe_steps_max, prune, prune_max;
    uint8_t stochastic, stochastic_fast, no_base; /* enum quant_rounding; stochastic_fast: where
                                                     beta2 <= AUTO_BETA2_FAST */
} AUTO_BOUNDS[AUTO_ROLE_COUNT_] = {
    [AUTO_EXACT] = {QM_NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    [AUTO_WEIGHT] = {QM_CREL, 1, 2, 1.0 / 128, 1.0 / 32, 1, 4, 0, 0, QR_VALUE, QR_VALUE, 0},
    [AUTO_EXP_AVG] = {QM_PREL, 0.9, 0.9, 0, 0, 0, 0, 0.25, 0.9, QR_VALUE, QR_VALUE, 1},
    [AUTO_EXP_AVG_SQ] = {QM_PREL, 0.5, 0.5, 0, 0, 0, 0, 0, 0, QR_LOG, QR_NEAREST, 0},
};

quant_spec auto_spec(auto_role r, double k, double beta2)
{
    quant_spec q = {0};
    if ((unsigned)r >= AUTO_ROLE_COUNT_ || AUTO_BOUNDS[r].mode == QM_NONE) return q;
    const struct auto_bound *b = &AUTO_BOUNDS[r];
    q.mode = b->mode;
    q.bound = fmin(b->bound * k, b->bound_max);
    q.keyframe = fmin(b->keyframe * k, b->keyframe_max);
    q.keyframe_steps = fmin(b->keyframe_steps * k, b->keyframe_steps_max);
    q.prune = fmin(b->prune * k, b->prune_max);
    q.stochastic = beta2 > 0 && beta2 <= AUTO_BETA2_FAST ? b->stochastic_fast : b->stochastic;
    q.no_base = b->no_base;
    q.group = 64;
    return q;
}
