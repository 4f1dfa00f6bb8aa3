/* test_optim.c — Adam's beta2 read from the param groups of torch.save'd optimizer state
 * dicts (lib/formats/pickle.c, pkl_storage.optim) and handed to the policy
 * (policy_match's beta2, doc/lossy.md "auto").
 *
 * The pickles are written here opcode by opcode, as torch.save writes them (protocol 2,
 * memoized strings and tuples, a betas tuple shared by the groups made from one
 * optimizer's defaults): two optimizers in one dict, two groups each, an optimizer state
 * dict at the root, a state index listed by two groups (the first wins), the text
 * opcodes of protocol 0; then hostile param groups (betas of the wrong type or length or
 * out of (0, 1), params that are not ints, a group that is not a dict, param_groups that
 * is not a list, one params list shared by thousands of groups): each is read (PKL_OK,
 * every storage named) with no beta2 where the group is wrong, never a crash. The lr:
 * where every group read states one, the tensors outside the optimizers' state (a
 * model's) get a group of that lr alone (beta2 0); groups of two lrs, or a hostile lr (a
 * string, NaN, <= 0, huge, a tensor, None) give them none. Then the policy: an auto rule
 * without beta2 takes the file's, one with it keeps its own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/pickle.h"
#include "testutil.h"
#include "transforms/policy.h"

typedef struct {
    uint8_t b[4 << 20];
    size_t n;
    unsigned memo;
} pw;

static void op(pw *w, uint8_t c) { w->b[w->n++] = c; }
static void raw(pw *w, const void *p, size_t n)
{
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void str(pw *w, const char *s)
{
    size_t n = strlen(s);
    op(w, 'X');
    for (int i = 0; i < 4; i++) op(w, (uint8_t)(n >> (8 * i)));
    raw(w, s, n);
}
static void put(pw *w) { op(w, 'q'), op(w, (uint8_t)w->memo++); }
static void get(pw *w, unsigned m) { op(w, 'h'), op(w, (uint8_t)m); }
static void num(pw *w, int v) /* BININT */
{
    op(w, 'J');
    for (int i = 0; i < 4; i++) op(w, (uint8_t)((uint32_t)v >> (8 * i)));
}
static void flt(pw *w, double d) /* BINFLOAT, big-endian */
{
    uint64_t x;
    memcpy(&x, &d, 8);
    op(w, 'G');
    for (int i = 7; i >= 0; i--) op(w, (uint8_t)(x >> (8 * i)));
}
static void global(pw *w, const char *mod, const char *name)
{
    op(w, 'c');
    raw(w, mod, strlen(mod));
    op(w, '\n');
    raw(w, name, strlen(name));
    op(w, '\n');
}

/* A float tensor of 64 x 64 elements in storage KEY. */
static void tensor(pw *w, const char *key)
{
    global(w, "torch._utils", "_rebuild_tensor_v2");
    op(w, '(');
    op(w, '('), str(w, "storage"), global(w, "torch", "FloatStorage"), str(w, key), str(w, "cpu"), num(w, 4096);
    op(w, 't'), op(w, 'Q');
    num(w, 0);
    num(w, 64), num(w, 64), op(w, 0x86); /* size */
    num(w, 64), num(w, 1), op(w, 0x86);  /* stride */
    op(w, 0x89);
    global(w, "collections", "OrderedDict"), op(w, ')'), op(w, 'R');
    op(w, 't'), op(w, 'R');
}

/* {"state": {N: {"exp_avg": T, "exp_avg_sq": T}...}, "param_groups": [...]}: state
 * indices first..first+n-1, keys "K.N.m" and "K.N.v"; groups written by the callback. */
static void optimizer(pw *w, const char *k, int first, int n, void (*groups)(pw *, void *), void *arg)
{
    char key[64];
    op(w, '}'), op(w, '(');
    str(w, "state"), op(w, '}'), op(w, '(');
    for (int i = first; i < first + n; i++) {
        num(w, i), op(w, '}'), op(w, '(');
        snprintf(key, sizeof key, "%s.%d.m", k, i);
        str(w, "exp_avg"), tensor(w, key);
        snprintf(key, sizeof key, "%s.%d.v", k, i);
        str(w, "exp_avg_sq"), tensor(w, key);
        op(w, 'u');
    }
    op(w, 'u');
    str(w, "param_groups");
    groups(w, arg);
    op(w, 'u');
}

/* Groups: params lists given as "0,1|2,3" with their beta2 (0.95 and 0.999), the betas
 * tuple of the first written once and fetched from the memo for every group of that
 * beta2, as pickle does for the shared default tuple. */
typedef struct {
    const char *params[4];
    double beta2[4];
    int n;
    double lr[4]; /* 0: 1e-3 */
} gspec;

static void groups(pw *w, void *arg)
{
    const gspec *g = arg;
    unsigned memo_of[4];
    op(w, ']'), op(w, '(');
    for (int i = 0; i < g->n; i++) {
        op(w, '}'), op(w, '(');
        str(w, "lr"), flt(w, g->lr[i] ? g->lr[i] : 1e-3);
        str(w, "betas");
        int j = 0;
        while (j < i && g->beta2[j] != g->beta2[i]) j++;
        if (j < i) {
            get(w, memo_of[j]);
        } else {
            flt(w, 0.9), flt(w, g->beta2[i]), op(w, 0x86);
            memo_of[i] = w->memo;
            put(w);
        }
        str(w, "weight_decay"), num(w, 0);
        str(w, "params"), op(w, ']'), op(w, '(');
        for (const char *p = g->params[i]; *p;) {
            num(w, (int)strtol(p, (char **)&p, 10));
            if (*p == ',') p++;
        }
        op(w, 'e');
        op(w, 'u');
    }
    op(w, 'e');
}

static pkl_status read(const pw *w, pkl_storages *st)
{
    size_t end;
    pkl_status s = pkl_torch_storages(w->b, w->n, st, &end);
    CHECKF(s == PKL_OK && end == w->n, "status %d, end %zu of %zu", (int)s, end, w->n);
    return s;
}

static const pkl_storage *by_name(const pkl_storages *st, const char *name)
{
    for (size_t i = 0; i < st->n; i++)
        if (!strcmp(st->s[i].name, name)) return &st->s[i];
    return NULL;
}

static const char *what = ""; /* the case, for messages */

/* The storage named `name` has beta2 b (0: none) read from `from`. */
static void expect(const pkl_storages *st, const char *name, double b, const char *from)
{
    const pkl_storage *s = by_name(st, name);
    CHECKF(s != NULL, "no storage named '%s'", name);
    if (!s) return;
    if (!b) {
        CHECKF(!s->optim, "%s: '%s' has beta2 %g from %s", what, name, s->optim->beta2, s->optim->from);
        return;
    }
    CHECKF(s->optim && s->optim->beta2 == b && !strcmp(s->optim->from, from), "'%s': beta2 %g from %s, not %g from %s",
           name, s->optim ? s->optim->beta2 : 0, s->optim ? s->optim->from : "-", b, from);
}

/* The storage named `name` has the lr-only group: lr, read from `from` (lr 0: no group). */
static void expect_lr(const pkl_storages *st, const char *name, double lr, const char *from)
{
    const pkl_storage *s = by_name(st, name);
    CHECKF(s != NULL, "no storage named '%s'", name);
    if (!s) return;
    if (!lr) {
        CHECKF(!s->optim, "%s: '%s' has lr %g from %s", what, name, s->optim->lr, s->optim->from);
        return;
    }
    CHECKF(s->optim && s->optim->beta2 == 0 && s->optim->lr == lr && !strcmp(s->optim->from, from),
           "%s: '%s': lr %g beta2 %g from %s, not lr %g from %s", what, name, s->optim ? s->optim->lr : 0,
           s->optim ? s->optim->beta2 : 0, s->optim ? s->optim->from : "-", lr, from);
}

static void test_two_optimizers(void)
{
    static pw w;
    gspec a = {{"0,1", "2"}, {0.95, 0.999}, 2, {0}}, b = {{"0", "1", "1"}, {0.999, 0.95, 0.98}, 3, {0}};
    w.n = 0, w.memo = 0;
    op(&w, 0x80), op(&w, 2), op(&w, '}'), op(&w, '(');
    str(&w, "model"), op(&w, '}'), op(&w, '('), str(&w, "fc.weight"), tensor(&w, "w"), op(&w, 'u');
    str(&w, "optimizer"), optimizer(&w, "a", 0, 3, groups, &a);
    str(&w, "optimizer2"), optimizer(&w, "b", 0, 2, groups, &b);
    op(&w, 'u'), op(&w, '.');
    pkl_storages st;
    if (read(&w, &st)) return;
    CHECKF(st.ngroups == 6 && st.groups[5].beta2 == 0, "%zu groups, the last of beta2 %g", st.ngroups,
           st.ngroups ? st.groups[st.ngroups - 1].beta2 : 0);
    /* every group states lr 1e-3: the model's tensor gets it alone, no beta2 */
    expect_lr(&st, "model.fc.weight", 1e-3, "optimizer.param_groups");
    expect(&st, "optimizer.state.0.exp_avg", 0.95, "optimizer.param_groups[0]");
    expect(&st, "optimizer.state.1.exp_avg_sq", 0.95, "optimizer.param_groups[0]");
    expect(&st, "optimizer.state.2.exp_avg_sq", 0.999, "optimizer.param_groups[1]");
    expect(&st, "optimizer2.state.0.exp_avg_sq", 0.999, "optimizer2.param_groups[0]");
    /* 1 is listed by groups 1 and 2: the first wins */
    expect(&st, "optimizer2.state.1.exp_avg_sq", 0.95, "optimizer2.param_groups[1]");
    pkl_storages_free(&st);

    /* torch.save(optimizer.state_dict()): the state dict at the root */
    w.n = 0, w.memo = 0;
    op(&w, 0x80), op(&w, 2);
    optimizer(&w, "c", 5, 2, groups, &(gspec){{"5,6"}, {0.95}, 1, {0}});
    op(&w, '.');
    if (read(&w, &st)) return;
    expect(&st, "state.5.exp_avg", 0.95, "param_groups[0]");
    expect(&st, "state.6.exp_avg_sq", 0.95, "param_groups[0]");
    pkl_storages_free(&st);

    /* two lrs: no lr group, the model's tensor none */
    w.n = 0, w.memo = 0;
    op(&w, 0x80), op(&w, 2), op(&w, '}'), op(&w, '(');
    str(&w, "model"), op(&w, '}'), op(&w, '('), str(&w, "fc.weight"), tensor(&w, "w"), op(&w, 'u');
    str(&w, "optimizer"), optimizer(&w, "a", 0, 3, groups, &(gspec){{"0,1", "2"}, {0.95, 0.95}, 2, {1e-3, 5e-4}});
    op(&w, 'u'), op(&w, '.');
    if (read(&w, &st)) return;
    what = "two lrs";
    CHECKF(st.ngroups == 2 && st.groups[1].beta2 > 0, "%zu groups, the last of beta2 %g", st.ngroups,
           st.ngroups ? st.groups[st.ngroups - 1].beta2 : 0);
    expect_lr(&st, "model.fc.weight", 0, NULL);
    expect(&st, "optimizer.state.2.exp_avg_sq", 0.95, "optimizer.param_groups[1]");
    pkl_storages_free(&st);
}

/* Two groups whose "lr" `bad` writes (state 0 and 1), in {"model": ..., "optimizer": ...}. */
typedef void (*lr_fn)(pw *);
static void l_str(pw *w) { str(w, "0.001"); }
static void l_nan(pw *w) { flt(w, NAN); }
static void l_zero(pw *w) { flt(w, 0.0); }
static void l_neg(pw *w) { flt(w, -1e-3); }
static void l_huge(pw *w) { flt(w, 1e31); }
static void l_inf(pw *w) { flt(w, INFINITY); }
static void l_tensor(pw *w) { tensor(w, "lr"); }
static void l_none(pw *w) { op(w, 'N'); }
static void l_bool(pw *w) { op(w, 0x88); }
static void l_int(pw *w) { num(w, 2); }

static void lr_groups(pw *w, void *arg)
{
    lr_fn lr = (lr_fn)arg;
    op(w, ']'), op(w, '(');
    for (int g = 0; g < 2; g++) {
        op(w, '}'), op(w, '('), str(w, "lr"), lr(w);
        str(w, "betas"), flt(w, 0.9), flt(w, 0.95), op(w, 0x86);
        str(w, "params"), op(w, ']'), num(w, g), op(w, 'a'), op(w, 'u');
    }
    op(w, 'e');
}

static void test_lr(void)
{
    static pw w;
    static const struct {
        const char *what;
        lr_fn fn;
        double lr; /* what the model's tensor gets: 0 none */
    } L[] = {{"lr a str", l_str, 0}, {"lr NaN", l_nan, 0},      {"lr 0", l_zero, 0},          {"lr -1e-3", l_neg, 0},
             {"lr 1e31", l_huge, 0}, {"lr inf", l_inf, 0},      {"lr a tensor", l_tensor, 0}, {"lr None", l_none, 0},
             {"lr True", l_bool, 0}, {"lr the int 2", l_int, 2}};
    for (size_t i = 0; i < sizeof L / sizeof *L; i++) {
        w.n = 0, w.memo = 0;
        op(&w, 0x80), op(&w, 2), op(&w, '}'), op(&w, '(');
        str(&w, "model"), op(&w, '}'), op(&w, '('), str(&w, "fc.weight"), tensor(&w, "w"), op(&w, 'u');
        str(&w, "optimizer"), optimizer(&w, "o", 0, 2, lr_groups, (void *)L[i].fn);
        op(&w, 'u'), op(&w, '.');
        pkl_storages st;
        what = L[i].what;
        if (read(&w, &st)) continue;
        expect_lr(&st, "model.fc.weight", L[i].lr, "optimizer.param_groups");
        expect(&st, "optimizer.state.1.exp_avg_sq", 0.95, "optimizer.param_groups[1]"); /* beta2 as before */
        pkl_storages_free(&st);
    }
}

/* Protocol 0's text opcodes: FLOAT, INT, TUPLE. */
static void text_groups(pw *w, void *arg)
{
    (void)arg;
    op(w, ']'), op(w, '('), op(w, '}'), op(w, '(');
    str(w, "betas"), op(w, '('), raw(w, "F0.9\nF0.95\n", 11), op(w, 't');
    str(w, "params"), op(w, ']'), op(w, '('), raw(w, "I0\nI1\n", 6), op(w, 'e');
    op(w, 'u'), op(w, 'e');
}

static void test_text_opcodes(void)
{
    static pw w;
    w.n = 0, w.memo = 0;
    optimizer(&w, "t", 0, 2, text_groups, NULL);
    op(&w, '.');
    pkl_storages st;
    if (read(&w, &st)) return;
    expect(&st, "state.1.exp_avg", 0.95, "param_groups[0]");
    pkl_storages_free(&st);
}

/* One hostile group (written by `bad`) beside a good one for state 1. */
typedef void (*bad_fn)(pw *);
static void b_betas_str(pw *w) { str(w, "betas"), str(w, "0.9, 0.95"); }
static void b_betas_three(pw *w) { str(w, "betas"), flt(w, 0.9), flt(w, 0.95), flt(w, 0.97), op(w, 0x87); }
static void b_betas_int(pw *w) { str(w, "betas"), num(w, 0), num(w, 1), op(w, 0x86); }
static void b_beta2_big(pw *w) { str(w, "betas"), flt(w, 0.9), flt(w, 1.5), op(w, 0x86); }
static void b_beta2_one(pw *w) { str(w, "betas"), flt(w, 0.9), flt(w, 1.0), op(w, 0x86); }
static void b_beta2_neg(pw *w) { str(w, "betas"), flt(w, 0.9), flt(w, -0.1), op(w, 0x86); }
static void b_beta2_nan(pw *w) { str(w, "betas"), flt(w, 0.9), flt(w, NAN), op(w, 0x86); }
static void b_beta2_tensor(pw *w) { str(w, "betas"), flt(w, 0.9), tensor(w, "beta2"), op(w, 0x86); }
static void good_betas(pw *w) { str(w, "betas"), flt(w, 0.9), flt(w, 0.95), op(w, 0x86); }
static void b_params_str(pw *w)
{
    good_betas(w);
    str(w, "params"), op(w, ']'), op(w, '('), str(w, "0"), flt(w, 0.0), op(w, 0x88), num(w, -1), op(w, 'e');
}
static void b_params_dict(pw *w) { good_betas(w), str(w, "params"), op(w, '}'), num(w, 0), num(w, 0), op(w, 's'); }
static void b_params_none(pw *w) { good_betas(w), str(w, "params"), op(w, 'N'); }

static void hostile_groups(pw *w, void *arg)
{
    bad_fn bad = (bad_fn)arg;
    op(w, ']'), op(w, '(');
    op(w, '}'), op(w, '('), bad(w);
    if (bad != b_params_str && bad != b_params_dict && bad != b_params_none)
        str(w, "params"), op(w, ']'), op(w, '('), num(w, 0), op(w, 'e');
    op(w, 'u');
    op(w, '}'), op(w, '('), good_betas(w), str(w, "params"), op(w, ']'), num(w, 1), op(w, 'a'), op(w, 'u');
    op(w, 'e');
}

static void not_dict_groups(pw *w, void *arg)
{
    (void)arg; /* a group that is a list, then a good one */
    op(w, ']'), op(w, '('), op(w, ']'), str(w, "betas"), op(w, 'a');
    op(w, '}'), op(w, '('), good_betas(w), str(w, "params"), op(w, ']'), num(w, 1), op(w, 'a'), op(w, 'u');
    op(w, 'e');
}

static void dict_groups(pw *w, void *arg)
{
    (void)arg; /* param_groups a dict */
    op(w, '}'), num(w, 0), op(w, '}'), op(w, '('), good_betas(w), str(w, "params"), op(w, ']'), num(w, 1);
    op(w, 'a'), op(w, 'u'), op(w, 's');
}

/* 3000 groups sharing one params list of 400000 ints (looked into in log time an item: a scan
 * of the list per item took minutes): the pairs stop at the pickle's
 * items, the groups at PKL_MAX_GROUPS; quickly, whatever the result. */
static void shared_groups(pw *w, void *arg)
{
    (void)arg;
    op(w, ']'), op(w, '(');
    op(w, '}'), op(w, '('), good_betas(w), str(w, "params"), op(w, ']');
    unsigned m = w->memo;
    put(w);
    op(w, '(');
    for (int i = 0; i < 400000; i++) num(w, i);
    op(w, 'e'), op(w, 'u');
    for (int g = 0; g < 3000; g++) op(w, '}'), op(w, '('), good_betas(w), str(w, "params"), get(w, m), op(w, 'u');
    op(w, 'e');
}

static void test_hostile(void)
{
    static pw w;
    static const struct {
        const char *what;
        bad_fn fn;
    } B[] = {{"betas a str", b_betas_str},
             {"three betas", b_betas_three},
             {"betas ints", b_betas_int},
             {"beta2 1.5", b_beta2_big},
             {"beta2 1", b_beta2_one},
             {"beta2 -0.1", b_beta2_neg},
             {"beta2 NaN", b_beta2_nan},
             {"beta2 a tensor", b_beta2_tensor},
             {"params str, float, bool, -1", b_params_str},
             {"params a dict", b_params_dict},
             {"params None", b_params_none}};
    for (size_t i = 0; i < sizeof B / sizeof *B; i++) {
        w.n = 0, w.memo = 0;
        optimizer(&w, "h", 0, 2, hostile_groups, (void *)B[i].fn);
        op(&w, '.');
        pkl_storages st;
        what = B[i].what;
        if (read(&w, &st)) continue;
        expect(&st, "state.0.exp_avg_sq", 0, NULL);
        expect(&st, "state.1.exp_avg_sq", 0.95, "param_groups[1]");
        pkl_storages_free(&st);
    }
    w.n = 0, w.memo = 0;
    optimizer(&w, "h", 0, 2, not_dict_groups, NULL);
    op(&w, '.');
    pkl_storages st;
    if (!read(&w, &st)) {
        expect(&st, "state.1.exp_avg_sq", 0.95, "param_groups[1]");
        pkl_storages_free(&st);
    }
    w.n = 0, w.memo = 0;
    optimizer(&w, "h", 0, 2, dict_groups, NULL);
    op(&w, '.');
    if (!read(&w, &st)) {
        expect(&st, "state.1.exp_avg_sq", 0, NULL);
        pkl_storages_free(&st);
    }
    w.n = 0, w.memo = 0;
    optimizer(&w, "h", 0, 2, shared_groups, NULL);
    op(&w, '.');
    if (!read(&w, &st)) {
        CHECKF(st.ngroups <= 4096, "%zu groups", st.ngroups);
        expect(&st, "state.1.exp_avg_sq", 0.95, "param_groups[0]");
        pkl_storages_free(&st);
    }
}

static void test_policy(void)
{
    static const uint64_t shape[] = {64, 128};
    char why[256];
    policy *p = policy_parse("opt2.* auto beta2 0.999\n* auto\n", 0, why, sizeof why);
    CHECKF(p != NULL, "%s", why);
    if (!p) return;
    /* v rounded to nearest where beta2 <= 0.99: the file's beta2 where the rule has none */
    CHECK(policy_match(p, "opt.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, shape, 0).stochastic);
    CHECK(!policy_match(p, "opt.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, shape, 0.95).stochastic);
    CHECK(policy_match(p, "opt.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, shape, 0.999).stochastic);
    CHECK(policy_match(p, "opt2.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, shape, 0.95).stochastic); /* the rule's */
    CHECK(policy_match(p, "opt.state.1.exp_avg_sq", CKPZ_DTYPE_F32, 2, shape, 1.5).stochastic);   /* not a beta2 */
    policy_free(p);
}

/* tests/data/torch/optim_groups.pt, written by torch (tests/data/make_torch.py): two
 * optimizers, one with groups at 0.95 and 0.999 (state 2 listed by both: the first
 * wins), one with hostile groups only. */
static void test_torch_file(void)
{
    FILE *f = fopen("tests/data/torch/optim_groups.pt", "rb");
    CHECKF(f != NULL, "tests/data/torch/optim_groups.pt not found (run from the repository root)");
    if (!f) return;
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    pkl_storages st;
    CHECK(pkl_torch_archive(buf, n, &st) == PKL_OK);
    what = "optim_groups.pt";
    expect(&st, "optimizer.state.0.exp_avg_sq", 0.95, "optimizer.param_groups[0]");
    expect(&st, "optimizer.state.1.exp_avg", 0.95, "optimizer.param_groups[0]");
    expect(&st, "optimizer.state.2.exp_avg_sq", 0.999, "optimizer.param_groups[1]");
    expect(&st, "optimizer.state.3.exp_avg_sq", 0.95, "optimizer.param_groups[2]");
    char name[64];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "opt.bad.state.%d.exp_avg_sq", i);
        expect(&st, name, 0, NULL);
    }
    pkl_storages_free(&st);
    CHECK(pkl_torch_archive(buf, 200, &st) == PKL_NEED); /* cut inside data.pkl */
    CHECK(pkl_torch_archive(buf + 1, n - 1, &st) == PKL_BAD);
}

int main(void)
{
    test_torch_file();
    test_two_optimizers();
    test_lr();
    test_text_opcodes();
    test_hostile();
    test_policy();
    return test_summary("test_optim");
}
