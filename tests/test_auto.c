/* test_auto.c — the lossy mode `auto` (lib/transforms/auto.c, doc/lossy.md "auto").
 *
 * Roles from names as torch.save, safetensors and distributed checkpoints spell them,
 * and the reasons tensors stay exact; the knob's words, numbers and refusals; the bound
 * of every role at tight, default and aggressive (all moving together, exp_avg_sq never
 * pruned and always on the log grid); the policy syntax `auto [K] [level N]`. Then a
 * two-file chain through the public API: a keyframe and a delta file against its
 * restored content, where each tensor's entry carries its role and the mode and bound
 * auto_spec gives it, every element is within that bound, every exp_avg_sq value stays
 * > 0, exact tensors come back byte for byte, and a larger knob writes smaller files.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "memfile.h"
#include "testutil.h"
#include "transforms/auto.h"
#include "transforms/policy.h"

static void test_roles(void)
{
    static const uint64_t big[] = {64, 128}, small[] = {8, 8}, vec[] = {8192}, mid[] = {16, 16}, under[] = {15, 17},
                          conv[] = {32, 3, 3, 3}, vec64[] = {64}, vec63[] = {63};
    static const struct {
        const char *name;
        ckpz_dtype dt;
        uint32_t ndim;
        const uint64_t *shape;
        auto_role role;
    } R[] = {
        {"model.transformer.h.0.attn.c_attn.weight", CKPZ_DTYPE_F32, 2, big, AUTO_WEIGHT},
        {"model.layers.0.mlp.weight", CKPZ_DTYPE_BF16, 2, big, AUTO_WEIGHT},
        {"optimizer.state.16.exp_avg", CKPZ_DTYPE_F32, 2, big, AUTO_EXP_AVG},
        {"optimizer.state.16.exp_avg_sq", CKPZ_DTYPE_F32, 2, big, AUTO_EXP_AVG_SQ},
        {"state.3.exp_avg", CKPZ_DTYPE_F32, 2, big, AUTO_EXP_AVG},           /* DCP */
        {"optim.state.fc.weight.exp_avg_sq", CKPZ_DTYPE_F32, 2, big, AUTO_EXP_AVG_SQ},
        {"fc.weight.exp_avg", CKPZ_DTYPE_F16, 2, big, AUTO_EXP_AVG},          /* safetensors */
        {"optim.exp_avg.transformer.wte.weight", CKPZ_DTYPE_F32, 2, big, AUTO_EXP_AVG}, /* flattened */
        {"optim.exp_avg_sq.transformer.wte.weight", CKPZ_DTYPE_F32, 2, big, AUTO_EXP_AVG_SQ},
        {"optim.exp_avgx.fc.weight", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},      /* not the key */
        {"optimizer.state.16.step", CKPZ_DTYPE_F32, 0, NULL, AUTO_EXACT},
        {"optimizer.state.2.momentum_buffer", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        {"optimizer.state.2.max_exp_avg_sq", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        {"state.7.other", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        {"optim.fc.weight.momentum", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        {"model.ln_f.weight", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        {"model.layer_norm.weight", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        {"model.fc.bias", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        {"model.fc.weight", CKPZ_DTYPE_F32, 1, vec, AUTO_EXACT},
        {"model.fc.weight", CKPZ_DTYPE_F32, 2, small, AUTO_EXACT},
        {"model.embed.ids", CKPZ_DTYPE_I64, 2, big, AUTO_EXACT},
        {"model.fc.weight.grad", CKPZ_DTYPE_F32, 2, big, AUTO_EXACT},
        /* >= 2 dimensions: from AUTO_MIN_ELEMS (256) elements, weights and moments alike */
        {"model.transformer.wpe.weight", CKPZ_DTYPE_F32, 2, mid, AUTO_WEIGHT},
        {"optimizer.state.1.exp_avg", CKPZ_DTYPE_F32, 2, mid, AUTO_EXP_AVG},
        {"optimizer.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, mid, AUTO_EXP_AVG_SQ},
        {"model.features.0.weight", CKPZ_DTYPE_F32, 4, conv, AUTO_WEIGHT}, /* a first conv, 864 */
        {"model.transformer.wpe.weight", CKPZ_DTYPE_F32, 2, under, AUTO_EXACT},
        {"optimizer.state.1.exp_avg", CKPZ_DTYPE_F32, 2, under, AUTO_EXACT},
        {"optimizer.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, under, AUTO_EXACT},
        /* Adam's moments of a 1-D parameter (torch.save does not say bias or gain) */
        {"optimizer.state.5.exp_avg", CKPZ_DTYPE_F32, 1, vec, AUTO_EXP_AVG},
        {"optimizer.state.5.exp_avg_sq", CKPZ_DTYPE_F32, 1, vec64, AUTO_EXP_AVG_SQ},
        {"optimizer.state.5.exp_avg_sq", CKPZ_DTYPE_F32, 1, vec63, AUTO_EXACT},
        {"optimizer.state.5.exp_avg", CKPZ_DTYPE_F32, 0, NULL, AUTO_EXACT},
        {"optimizer.state.5.step", CKPZ_DTYPE_F32, 1, vec, AUTO_EXACT},
        {"optimizer.state.5.momentum_buffer", CKPZ_DTYPE_F32, 1, vec, AUTO_EXACT},
        {"optim.exp_avg.transformer.ln_f.weight", CKPZ_DTYPE_F32, 1, vec, AUTO_EXACT}, /* named a norm */
        {"optim.exp_avg_sq.fc.bias", CKPZ_DTYPE_F32, 1, vec, AUTO_EXACT},
        {"model.fc.bias", CKPZ_DTYPE_F32, 1, vec, AUTO_EXACT},
        {"", CKPZ_DTYPE_NONE, 0, NULL, AUTO_EXACT},
    };
    for (size_t i = 0; i < sizeof R / sizeof *R; i++) {
        const char *why = NULL;
        auto_role r = auto_role_of(R[i].name, R[i].dt, R[i].ndim, R[i].shape, &why);
        CHECKF(r == R[i].role && why && *why, "role of '%s' (%u dims): %s (%s), not %s", R[i].name, R[i].ndim,
               auto_role_name(r), why ? why : "no reason", auto_role_name(R[i].role));
    }
}

static void test_knobs(void)
{
    static const struct {
        const char *w;
        double k;
    } ok[] = {{NULL, 1},    {"tight", 0.25},        {"default", 1}, {"aggressive", 4},
              {"2.5", 2.5}, {"0.015625", 1.0 / 64}, {"16", 16}};
    static const char *const bad[] = {"", "0", "17", "-1", "abc", "1x", "nan", "inf", "0.01"};
    char why[160];
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        double k = -1;
        CHECKF(auto_knob(ok[i].w, &k, why, sizeof why) == 0 && k == ok[i].k, "knob '%s' gave %g", ok[i].w, k);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double k;
        why[0] = 0;
        CHECKF(auto_knob(bad[i], &k, why, sizeof why) == -1 && strstr(why, "tight, default, aggressive") &&
                   strstr(why, bad[i]),
               "knob '%s' accepted or unclear: '%s'", bad[i], why);
    }
}

/* Every lossy role's bound grows with the knob (strictly until its cap), within what
 * its mode allows; exp_avg_sq stays on the log grid and is never pruned. */
static void test_bounds(void)
{
    const double ks[] = {1.0 / 64, 0.25, 1, 4, 16};
    for (auto_role r = AUTO_EXACT; r < AUTO_ROLE_COUNT_; r++) {
        quant_spec prev = {0};
        for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
            quant_spec q = auto_spec(r, ks[i], 0);
            const char *role = auto_role_name(r);
            if (r == AUTO_EXACT) {
                CHECKF(q.mode == QM_NONE, "exact role got mode %u", q.mode);
                continue;
            }
            CHECKF(q.bound > 0 && (q.mode != QM_PREL || q.bound < 1), "%s at %g: bound %g", role, ks[i], q.bound);
            CHECKF(q.prune >= 0 && q.prune <= 0.999, "%s at %g: prune %g", role, ks[i], q.prune);
            if (r == AUTO_WEIGHT)
                CHECKF(q.mode == QM_CREL && q.stochastic && q.keyframe > 0 && q.keyframe < 1 && !q.no_base,
                       "weight at %g: mode %u stochastic %u keyframe %g", ks[i], q.mode, q.stochastic, q.keyframe);
            if (r == AUTO_EXP_AVG) {
                /* m rounded without bias in its value whatever beta2: to nearest on the log
                 * grid, each restored m came back ~4% larger on average, unbiased in log2 |m|
                 * ~3.5% (doc/lossy.md) */
                quant_spec fast = auto_spec(r, ks[i], 0.95);
                CHECKF(q.mode == QM_PREL && q.no_base && q.stochastic == QR_VALUE && fast.stochastic == QR_VALUE,
                       "exp_avg at %g: mode %u stochastic %u (beta2 0.95: %u)", ks[i], q.mode, q.stochastic,
                       fast.stochastic);
            }
            if (r == AUTO_EXP_AVG_SQ)
                CHECKF(q.mode == QM_PREL && q.prune == 0 && !q.no_base, "exp_avg_sq at %g: mode %u prune %g", ks[i],
                       q.mode, q.prune);
            if (i) {
                CHECKF(q.bound >= prev.bound && q.keyframe >= prev.keyframe && q.prune >= prev.prune,
                       "%s: knob %g loosens nothing or tightens (bound %g -> %g)", role, ks[i], prev.bound, q.bound);
                if (ks[i] <= 1)
                    CHECKF(q.bound > prev.bound, "%s: knob %g does not move the bound (%g)", role, ks[i], q.bound);
            }
            prev = q;
        }
    }
}

/* auto takes a 1-D moment lossy where its role says so, any other rule leaves 1-D
 * tensors exact (doc/lossy.md "Which tensors"). */
static void test_policy_1d(void)
{
    static const uint64_t vec[] = {4096}, tiny[] = {63};
    static const struct {
        const char *policy, *name;
        const uint64_t *shape;
        unsigned mode;
    } C[] = {
        {"* auto", "optimizer.state.3.exp_avg_sq", vec, QM_PREL},
        {"* auto", "optimizer.state.3.exp_avg", vec, QM_PREL},
        {"* auto", "optimizer.state.3.exp_avg", tiny, QM_NONE},
        {"* auto", "model.h.0.attn.c_attn.weight", vec, QM_NONE},
        {"* auto", "optim.exp_avg_sq.h.0.ln_1.weight", vec, QM_NONE},
        {"* pointwise-rel 0.5", "optimizer.state.3.exp_avg_sq", vec, QM_NONE},
        {"* abs 1e-3", "optimizer.state.3.exp_avg", vec, QM_NONE},
    };
    char why[160];
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        policy *p = policy_parse(C[i].policy, 0, why, sizeof why);
        CHECKF(p != NULL, "'%s': %s", C[i].policy, why);
        if (!p) continue;
        quant_spec q = policy_match(p, C[i].name, CKPZ_DTYPE_F32, 1, C[i].shape, 0);
        CHECKF(q.mode == C[i].mode, "'%s' on 1-D %s [%llu]: mode %u, not %u", C[i].policy, C[i].name,
               (unsigned long long)C[i].shape[0], q.mode, C[i].mode);
        if (q.mode == QM_PREL && strstr(C[i].name, "exp_avg_sq"))
            CHECKF(q.prune == 0 && q.stochastic && !q.no_base, "1-D exp_avg_sq: prune %g stochastic %u", q.prune,
                   q.stochastic);
        else if (q.mode == QM_PREL)
            CHECKF(q.no_base && q.stochastic && q.prune > 0, "1-D exp_avg: no_base %u prune %g", q.no_base, q.prune);
        policy_free(p);
    }
}

static void test_policy_syntax(void)
{
    static const uint64_t shape[] = {64, 128};
    char why[256];
    static const char *const good[] = {"* auto",
                                       "* auto aggressive",
                                       "* auto 0.5 level 5",
                                       "* auto level 5",
                                       "* auto max-mae 1",
                                       "*.bias lossless\n* auto tight",
                                       "* auto beta2 0.95",
                                       "* auto 0.5 beta2 0.999 level 5",
                                       "* auto lr 3e-4",
                                       "* auto 0.5 lr 0.001 beta2 0.95"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        policy *p = policy_parse(good[i], 0, why, sizeof why);
        CHECKF(p && policy_lossy(p), "'%s': %s", good[i], p ? "not lossy" : why);
        if (!p) continue;
        quant_spec q = policy_match(p, "optimizer.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, shape, 0);
        CHECKF(q.mode == QM_PREL && q.prune == 0, "'%s': exp_avg_sq got mode %u", good[i], q.mode);
        /* v rounded to nearest only where beta2 says it is renewed fast */
        CHECKF(q.stochastic == (strstr(good[i], "0.95") ? QR_NEAREST : QR_LOG), "'%s': exp_avg_sq stochastic %u",
               good[i], q.stochastic);
        if (strstr(good[i], "level")) CHECKF(q.level == 5, "'%s': level %u", good[i], q.level);
        q = policy_match(p, "model.fc.weight", CKPZ_DTYPE_F32, 2, shape, 0);
        double k = strstr(good[i], "aggressive") ? 4
                   : strstr(good[i], "0.5")      ? 0.5
                   : strstr(good[i], "tight")    ? 0.25
                                                 : 1;
        CHECKF(q.mode == QM_CREL && q.bound == auto_spec(AUTO_WEIGHT, k, 0).bound, "'%s': weight mode %u bound %g",
               good[i], q.mode, q.bound);
        double lr = strstr(good[i], "lr 3e-4") ? 3e-4 : strstr(good[i], "lr 0.001") ? 1e-3 : 0;
        CHECKF(q.keyframe_lr == lr, "'%s': weight keyframe lr %g", good[i], q.keyframe_lr);
        policy_free(p);
    }
    static const char *const bad[] = {"* auto bogus",    "* auto 0",        "* auto 2 prune 0.5", "* auto 2 3",
                                      "* auto beta2",    "* auto beta2 1",  "* abs 1 beta2 0.9",  "* auto lr",
                                      "* auto lr 0",     "* auto lr -1e-3", "* auto lr nan",      "* auto lr 1e30",
                                      "* abs 1 lr 0.001"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        policy *p = policy_parse(bad[i], 0, why, sizeof why);
        CHECKF(!p && strstr(why, "policy line 1"), "'%s' accepted or unclear: %s", bad[i], why);
        policy_free(p);
    }
}

/* ---- a chain through the public API --------------------------------------------------- */

enum { W, M, V, NORM, STEP, NT };
static const char *const NAMES[NT] = {"model.fc.weight", "optimizer.state.0.exp_avg", "optimizer.state.0.exp_avg_sq",
                                      "model.norm.weight", "optimizer.state.0.step"};
#define ROWS 64
#define COLS 1000
#define NEL (ROWS * COLS)

/* A safetensors file of the five tensors (step: 1-D, one element). */
static uint8_t *make_file(float *t[NT], size_t *len, size_t off[NT])
{
    char json[1024];
    size_t jl = 0, at = 0;
    jl += (size_t)snprintf(json, sizeof json, "{");
    for (int i = 0; i < NT; i++) {
        size_t n = i == STEP ? 1 : NEL;
        if (i == STEP)
            jl += (size_t)snprintf(json + jl, sizeof json - jl,
                                   "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", NAMES[i], at, at + 4 * n);
        else
            jl += (size_t)snprintf(json + jl, sizeof json - jl,
                                   "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", NAMES[i], ROWS, COLS, at, at + 4 * n);
        off[i] = at;
        at += 4 * n;
    }
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "}");
    size_t hl = (jl + 7) & ~(size_t)7;
    uint8_t *p = calloc(1, 8 + hl + at);
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)((uint64_t)hl >> (8 * k));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, jl);
    for (int i = 0; i < NT; i++) {
        off[i] += 8 + hl;
        memcpy(p + off[i], t[i], 4 * (i == STEP ? 1 : NEL));
    }
    *len = 8 + hl + at;
    return p;
}

static uint8_t *pack(ckpz_ctx *ctx, const char *policy, const uint8_t *src, size_t n, const uint8_t *base, size_t bl,
                     size_t *zl)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.policy = policy;
    p.base = base;
    p.base_size = bl;
    void *z = NULL;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, src, n, &z, zl);
    CHECKF(e == CKPZ_OK, "compress '%s': %s", policy, ckpz_ctx_message(ctx));
    return z;
}

static uint8_t *unpack(ckpz_ctx *ctx, const uint8_t *z, size_t zl, size_t n, const uint8_t *base, size_t bl)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.base = base;
    p.base_size = bl;
    uint8_t *out = calloc(1, n);
    CHECKF(ckpz_decompress_buffer(ctx, &p, z, zl, out, n) == CKPZ_OK, "decompress: %s", ckpz_ctx_message(ctx));
    return out;
}

/* Checks one file of the chain (prev: the restored base, NULL for the keyframe) at knob k. */
static void check_file(ckpz_ctx *ctx, const uint8_t *z, size_t zl, const uint8_t *orig, const uint8_t *rest,
                       const uint8_t *prev, const size_t off[NT], double k)
{
    ckpz_mem f = mem_in(z, zl, 0);
    ckpz_archive *a = NULL;
    if (ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &f, zl, &a) != CKPZ_OK) {
        CHECKF(0, "archive_open: %s", ckpz_ctx_message(ctx));
        return;
    }
    static const auto_role roles[NT] = {AUTO_WEIGHT, AUTO_EXP_AVG, AUTO_EXP_AVG_SQ, AUTO_EXACT, AUTO_EXACT};
    for (int i = 0; i < NT; i++) {
        uint64_t idx;
        ckpz_entry e = {.struct_size = sizeof e};
        if (ckpz_archive_find(ctx, a, NAMES[i], &idx) || ckpz_archive_entry(a, idx, &e)) {
            CHECKF(0, "no entry %s", NAMES[i]);
            continue;
        }
        CHECKF(e.role && !strcmp(e.role, auto_role_name(roles[i])) && e.role_why && *e.role_why, "%s: role %s",
               NAMES[i], e.role ? e.role : "(none)");
        quant_spec q = auto_spec(roles[i], k, 0);
        const float *x = (const float *)(orig + off[i]), *y = (const float *)(rest + off[i]);
        if (q.mode == QM_NONE) {
            CHECKF(!e.lossy && !memcmp(x, y, 4 * (i == STEP ? 1 : NEL)), "%s: not exact", NAMES[i]);
            continue;
        }
        int keyframe = i == W && !prev;
        const char *mode = keyframe ? "pointwise-rel" : quant_mode_name(q.mode);
        double bound = keyframe ? q.keyframe : q.bound;
        CHECKF(e.lossy && !strcmp(e.lossy_mode, mode) && e.lossy_bound == bound, "%s (k %g): %s %g, not %s %g",
               NAMES[i], k, e.lossy ? e.lossy_mode : "lossless", e.lossy_bound, mode, bound);
        double rms = 0;
        for (size_t j = 0; i == W && prev && j < NEL; j++) {
            double d = (double)x[j] - ((const float *)(prev + off[i]))[j];
            rms += d * d;
        }
        rms = sqrt(rms / NEL);
        if (i == W && prev) { /* the update survives the restore on average (bench/resume-test's freeze) */
            double up = 0, kept = 0;
            for (size_t j = 0; j < NEL; j++) {
                double p = ((const float *)(prev + off[i]))[j], u = x[j] - p;
                up += fabs(u);
                kept += (u > 0 ? 1 : u < 0 ? -1 : 0) * (y[j] - p);
            }
            CHECKF(kept >= 0.8 * up, "%s (k %g): the restore kept %.0f%% of the update", NAMES[i], k, 100 * kept / up);
        }
        if (i == W && prev)
            CHECKF(fabs(e.abs_bound - bound * rms) <= 1e-3 * bound * rms, "%s: abs bound %g, not %g x RMS %g", NAMES[i],
                   e.abs_bound, bound, rms);
        size_t bad = 0, nonpos = 0;
        for (size_t j = 0; j < NEL; j++) {
            double err = fabs((double)y[j] - x[j]);
            double lim = i == W && prev ? e.abs_bound : bound * fabs(x[j]);
            int pruned = q.prune > 0 && y[j] == 0;
            bad += !(err <= lim * (1 + 1e-9)) && !pruned;
            nonpos += i == V && !(y[j] > 0);
        }
        CHECKF(!bad, "%s (k %g): %zu elements beyond the bound", NAMES[i], k, bad);
        CHECKF(!nonpos, "%s (k %g): %zu values restored <= 0", NAMES[i], k, nonpos);
    }
    ckpz_archive_close(a);
}

static void test_chain(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    float *t0[NT], *t1[NT];
    for (int i = 0; i < NT; i++) t0[i] = malloc(4 * NEL), t1[i] = malloc(4 * NEL);
    for (size_t j = 0; j < NEL; j++) {
        double g = rng_normal(), v = exp(rng_normal() * 3 - 14);
        t0[W][j] = (float)(0.02 * rng_normal());
        t0[M][j] = (float)(1e-3 * g * sqrt(v) * 100);
        t0[V][j] = (float)v;
        t0[NORM][j] = (float)(1 + 0.01 * rng_normal());
        /* some steps later: weights moved by ~lr, m renewed, v drifted */
        t1[W][j] = (float)(t0[W][j] - 1e-3 * (0.5 + rng_normal()));
        t1[M][j] = (float)(1e-3 * rng_normal() * sqrt(v) * 100);
        t1[V][j] = (float)(v * exp(0.3 * rng_normal()));
        t1[NORM][j] = t0[NORM][j];
    }
    t0[STEP][0] = 100, t1[STEP][0] = 140;
    size_t off[NT], n0, n1;
    uint8_t *f0 = make_file(t0, &n0, off), *f1 = make_file(t1, &n1, off);
    static const char *const knobs[] = {"* auto tight", "* auto", "* auto aggressive"};
    static const double ks[] = {0.25, 1, 4};
    size_t sizes[3][2];
    for (int c = 0; c < 3; c++) {
        uint8_t *z0 = pack(ctx, knobs[c], f0, n0, NULL, 0, &sizes[c][0]);
        uint8_t *r0 = z0 ? unpack(ctx, z0, sizes[c][0], n0, NULL, 0) : NULL;
        if (r0) check_file(ctx, z0, sizes[c][0], f0, r0, NULL, off, ks[c]);
        uint8_t *z1 = r0 ? pack(ctx, knobs[c], f1, n1, r0, n0, &sizes[c][1]) : NULL;
        uint8_t *r1 = z1 ? unpack(ctx, z1, sizes[c][1], n1, r0, n0) : NULL;
        if (r1) check_file(ctx, z1, sizes[c][1], f1, r1, r0, off, ks[c]);
        ckpz_free(z0), ckpz_free(z1), free(r0), free(r1);
    }
    for (int c = 1; c < 3; c++)
        for (int f = 0; f < 2; f++)
            CHECKF(sizes[c][f] < sizes[c - 1][f], "file %d: %s wrote %zu bytes, %s %zu", f, knobs[c], sizes[c][f],
                   knobs[c - 1], sizes[c - 1][f]);
    printf("auto chain: keyframe %zu / %zu / %zu B, delta %zu / %zu / %zu B (tight / default / aggressive; %zu B)\n",
           sizes[0][0], sizes[1][0], sizes[2][0], sizes[0][1], sizes[1][1], sizes[2][1], n1);
    for (int i = 0; i < NT; i++) free(t0[i]), free(t1[i]);
    free(f0), free(f1);
    ckpz_ctx_free(ctx);
}

/* Adam's v grows by a few percent between checkpoints (beta2 = 0.999): far less than a
 * cell of the log grid. Rounded to nearest, every restore would put each value back on the
 * grid point it had, the growth erased (the restored v held low, every step too large); the
 * unbiased rounding keeps it on average, within the bound and > 0. */
static void test_v_growth(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    float *t0[NT];
    for (int i = 0; i < NT; i++) t0[i] = malloc(4 * NEL);
    for (size_t j = 0; j < NEL; j++) {
        t0[W][j] = (float)(0.02 * rng_normal());
        t0[M][j] = (float)(1e-5 * rng_normal());
        t0[V][j] = (float)exp(rng_normal() * 3 - 14);
        t0[NORM][j] = 1;
    }
    t0[STEP][0] = 100;
    size_t off[NT], n, zl0, zl1;
    uint8_t *f0 = make_file(t0, &n, off);
    uint8_t *z0 = pack(ctx, "* auto", f0, n, NULL, 0, &zl0), *r0 = z0 ? unpack(ctx, z0, zl0, n, NULL, 0) : NULL;
    uint8_t *f1 = malloc(n);
    memcpy(f1, r0 ? r0 : f0, n);
    float *v1 = (float *)(f1 + off[V]);
    for (size_t j = 0; j < NEL; j++) v1[j] *= 1.05f;
    uint8_t *z1 = r0 ? pack(ctx, "* auto", f1, n, r0, n, &zl1) : NULL;
    uint8_t *r1 = z1 ? unpack(ctx, z1, zl1, n, r0, n) : NULL;
    if (r1) {
        check_file(ctx, z1, zl1, f1, r1, r0, off, 1);
        const float *a = (const float *)(r0 + off[V]), *b = (const float *)(r1 + off[V]);
        double lg = 0;
        for (size_t j = 0; j < NEL; j++) lg += log((double)b[j] / a[j]);
        lg /= NEL;
        CHECKF(fabs(lg - log(1.05)) < 0.2 * log(1.05), "v grew 5%%, restored %+.2f%% on average (geometric)",
               100 * (exp(lg) - 1));
    }
    for (int i = 0; i < NT; i++) free(t0[i]);
    ckpz_free(z0), ckpz_free(z1), free(r0), free(r1), free(f0), free(f1);
    ckpz_ctx_free(ctx);
}

/* change-rel no-base (a grid relative to the tensor's own RMS, for exp_avg): every value
 * within R x the RMS of the values, the small ones rounded to zero, coded alone (the same
 * restored values with a base as without one), and lossy in a chain's first file too. */
static void test_rms_no_base(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    float *t0[NT];
    for (int i = 0; i < NT; i++) t0[i] = calloc(NEL, 4);
    double sq = 0;
    for (size_t j = 0; j < NEL; j++) {
        double g = rng_normal();
        t0[M][j] = (float)(1e-5 * g * g * g); /* heavy tails, like Adam's m */
        sq += (double)t0[M][j] * t0[M][j];
        t0[W][j] = (float)(0.02 * rng_normal());
    }
    double lim = 0.5 * sqrt(sq / NEL);
    const char *pol = "*.exp_avg change-rel 0.5 no-base";
    size_t off[NT], n, zl0, zl1;
    uint8_t *f0 = make_file(t0, &n, off);
    uint8_t *z0 = pack(ctx, pol, f0, n, NULL, 0, &zl0), *r0 = z0 ? unpack(ctx, z0, zl0, n, NULL, 0) : NULL;
    uint8_t *fb = malloc(n); /* a base whose m differs (an unchanged tensor is a reference) */
    memcpy(fb, f0, n);
    for (size_t j = 0; j < NEL; j++) ((float *)(fb + off[M]))[j] *= 0.5f;
    uint8_t *z1 = z0 ? pack(ctx, pol, f0, n, fb, n, &zl1) : NULL;
    uint8_t *r1 = z1 ? unpack(ctx, z1, zl1, n, fb, n) : NULL;
    if (r0 && r1) {
        const float *a = (const float *)(f0 + off[M]), *b = (const float *)(r0 + off[M]);
        size_t bad = 0, zeroed = 0, moved = 0;
        for (size_t j = 0; j < NEL; j++) {
            bad += !(fabs((double)b[j] - a[j]) <= lim);
            zeroed += b[j] == 0 && a[j] != 0;
            moved += b[j] != a[j];
        }
        CHECKF(bad == 0 && zeroed > NEL / 2 && moved > NEL * 9 / 10, "rms grid: %zu beyond %g, %zu zeroed, %zu moved",
               bad, lim, zeroed, moved);
        CHECKF(!memcmp(r0 + off[M], r1 + off[M], 4 * NEL), "rms grid: a base changed a no-base tensor");
        CHECKF(!memcmp(r1 + off[W], f0 + off[W], 4 * NEL), "rms grid: a tensor no rule names is not exact");
    }
    for (int i = 0; i < NT; i++) free(t0[i]);
    ckpz_free(z0), ckpz_free(z1), free(r0), free(r1), free(f0), free(fb);
    ckpz_ctx_free(ctx);
}

/* The entry of tensor `name` in the .ckpz file z, into *e: 0, or -1 (a check failed). */
static int entry_of(ckpz_ctx *ctx, const uint8_t *z, size_t zl, const char *name, ckpz_entry *e)
{
    ckpz_mem fm = mem_in(z, zl, 0);
    ckpz_archive *a = NULL;
    uint64_t idx;
    *e = (ckpz_entry){.struct_size = sizeof *e};
    int bad = ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &fm, zl, &a) || ckpz_archive_find(ctx, a, name, &idx) ||
              ckpz_archive_entry(a, idx, e);
    CHECKF(!bad, "no entry %s: %s", name, ckpz_ctx_message(ctx));
    ckpz_archive_close(a); /* e's name and shape go with it: callers read its numbers and lossy_mode (static) */
    return bad ? -1 : 0;
}

/* `* auto lr L`: a file that states no learning rate (safetensors: no param_groups) codes
 * its weights without a base as abs L (one step of L), within L of the original; without
 * the rule, pointwise-rel as before; with a base, against their change. */
static void test_rule_lr(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    float *t0[NT];
    for (int i = 0; i < NT; i++) t0[i] = calloc(NEL, 4);
    for (size_t j = 0; j < NEL; j++) {
        t0[W][j] = (float)(0.02 * rng_normal());
        t0[M][j] = (float)(1e-5 * rng_normal());
        t0[V][j] = (float)exp(rng_normal() - 20);
    }
    size_t off[NT], n, zl[3];
    uint8_t *f0 = make_file(t0, &n, off), *z[3], *r[3];
    static const char *const pol[3] = {"* auto lr 0.001", "* auto", "* auto 2 lr 2.5e-4"};
    static const char *const want[3] = {"abs", "pointwise-rel", "abs"};
    const double bound[3] = {1e-3, auto_spec(AUTO_WEIGHT, 1, 0).keyframe, 2 * 2.5e-4};
    for (int f = 0; f < 3; f++) {
        z[f] = pack(ctx, pol[f], f0, n, NULL, 0, &zl[f]);
        r[f] = z[f] ? unpack(ctx, z[f], zl[f], n, NULL, 0) : NULL;
        ckpz_entry e;
        if (r[f] && !entry_of(ctx, z[f], zl[f], NAMES[W], &e)) {
            double b = bound[f];
            CHECKF(e.lossy && !strcmp(e.lossy_mode, want[f]) && fabs(e.lossy_bound - b) <= 1e-12 * b,
                   "rule lr '%s': weight %s %g, not %s %g", pol[f], e.lossy ? e.lossy_mode : "lossless", e.lossy_bound,
                   want[f], b);
            const float *x = (const float *)(f0 + off[W]), *y = (const float *)(r[f] + off[W]);
            size_t beyond = 0, same = 0;
            for (size_t j = 0; f != 1 && j < NEL; j++) {
                beyond += !(fabs((double)y[j] - x[j]) <= b * (1 + 1e-6));
                same += y[j] == x[j];
            }
            CHECKF(!beyond && same < NEL / 10, "rule lr '%s': %zu weights beyond %g, %zu unchanged", pol[f], beyond, b,
                   same);
        }
    }
    /* with a base, the weights follow their change whatever the rule's lr */
    uint8_t *f1 = malloc(n);
    memcpy(f1, f0, n);
    for (size_t j = 0; j < NEL; j++) ((float *)(f1 + off[W]))[j] += (float)(1e-4 * rng_normal());
    size_t zl1;
    uint8_t *z1 = r[0] ? pack(ctx, pol[0], f1, n, r[0], n, &zl1) : NULL;
    ckpz_entry e;
    if (z1 && !entry_of(ctx, z1, zl1, NAMES[W], &e))
        CHECKF(e.lossy && !strcmp(e.lossy_mode, "change-rel"), "rule lr, delta file: weight %s",
               e.lossy ? e.lossy_mode : "lossless");
    for (int f = 0; f < 3; f++) ckpz_free(z[f]), free(r[f]);
    for (int i = 0; i < NT; i++) free(t0[i]);
    ckpz_free(z1), free(f0), free(f1);
    ckpz_ctx_free(ctx);
}

int main(void)
{
    test_roles();
    test_knobs();
    test_bounds();
    test_policy_syntax();
    test_policy_1d();
    test_chain();
    test_v_growth();
    test_rms_no_base();
    test_rule_lr();
    return test_summary("test_auto");
}
