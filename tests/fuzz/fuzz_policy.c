/* fuzz_policy.c — libFuzzer harness for the lossy policy text parser
 * (lib/transforms/policy.c: policy_parse, policy_match, policy_lossy).
 *
 * The input is the policy text (cut at its first NUL, as a C string is). Checks: a
 * rejected text leaves a message naming the line; an accepted one gives, for a set of
 * tensor names, dtypes and ranks, specs within what the syntax allows (mode, bound > 0
 * and < 1 for pointwise-rel, 8 or 16 bits, block >= 16, prune in 0..0.999, level
 * 0..9, max-mae >= 0, pct in (50, 100]), never a lossy spec for a tensor that must stay
 * lossless (integers, fewer than two dimensions, norm/bias/ln_ names), and a lossy
 * spec only when policy_lossy says the policy has one (mode auto included); parsing is
 * deterministic.
 */
#include "transforms/policy.h"
#include "fuzz_util.h"

static const char *const names[] = {"model.layers.0.mlp.weight",
                                    "h.1.attn.c_attn.weight",
                                    "ln_f.weight",
                                    "optimizer.state.3.exp_avg_sq",
                                    "optimizer.state.3.exp_avg",
                                    "layer.norm.weight",
                                    "w",
                                    "",
                                    "data/7"};
static const ckpz_dtype dtypes[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16,
                                    CKPZ_DTYPE_F64, CKPZ_DTYPE_I32,  CKPZ_DTYPE_NONE};
static const uint64_t shape[] = {128, 64}; /* large enough for auto's lossy roles */

/* Kept lossless whatever the policy: integers, scalars, names of norms and biases, and
 * 1-D tensors but Adam's moments of a 1-D parameter (auto codes those from 64
 * elements: the shape's first dimension, 128, when a 1-D tensor is matched). */
static int must_stay(const char *name, ckpz_dtype dt, uint32_t ndim)
{
    if (!(dt == CKPZ_DTYPE_F32 || dt == CKPZ_DTYPE_BF16 || dt == CKPZ_DTYPE_F16 || dt == CKPZ_DTYPE_F64) || ndim < 1)
        return 1;
    if (ndim < 2 && !strstr(name, "exp_avg")) return 1;
    return strstr(name, "norm") || strstr(name, "bias") || strstr(name, "ln_");
}

static int same_spec(const quant_spec *a, const quant_spec *b)
{
    return a->mode == b->mode && a->bits == b->bits && a->sym == b->sym && a->per_row == b->per_row &&
           a->stochastic == b->stochastic && a->delta == b->delta && a->no_base == b->no_base && a->group == b->group &&
           a->bound == b->bound && a->pct == b->pct && a->prune == b->prune && a->max_mae == b->max_mae &&
           a->level == b->level;
}

static void check_spec(const quant_spec *q, const char *name, ckpz_dtype dt, uint32_t ndim, int lossy)
{
    FZ_CHECK(q->mode < QM_COUNT_ && q->level <= 9, "policy: '%s': mode %u level %u", name, q->mode, q->level);
    if (q->mode == QM_NONE) return;
    FZ_CHECK(lossy, "policy: '%s' is lossy but policy_lossy says 0", name);
    FZ_CHECK(!must_stay(name, dt, ndim), "policy: '%s' (dtype %d, %u dims) must stay lossless", name, (int)dt, ndim);
    FZ_CHECK(q->prune >= 0 && q->prune <= 0.999 && q->max_mae >= 0, "policy: '%s': prune %g max-mae %g", name, q->prune,
             q->max_mae);
    if (q->mode == QM_AFFINE)
        FZ_CHECK((q->bits == 8 || q->bits == 16) && q->group >= 16 && q->group <= (1u << 24) &&
                     (q->pct == 0 || (q->pct > 50 && q->pct <= 100)),
                 "policy: '%s': bits %u group %u pct %g", name, q->bits, q->group, q->pct);
    else FZ_CHECK(q->bound > 0 && (q->mode != QM_PREL || q->bound < 1), "policy: '%s': bound %g", name, q->bound);
    if (strstr(name, "exp_avg_sq")) FZ_CHECK(q->mode == QM_PREL && q->prune == 0, "policy: exp_avg_sq not kept safe");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char why[256] = "", why2[256] = "";
    policy *p = policy_parse(text, 0.5, why, sizeof why);
    policy *p2 = policy_parse(text, 0.5, why2, sizeof why2);
    FZ_CHECK(!p == !p2 && (p || !strcmp(why, why2)), "policy: two parses of the same text differ");
    if (!p) {
        FZ_CHECK(why[0], "policy: rejected without a message");
        FZ_CHECK(!strncmp(why, "policy line ", 12) || !strcmp(why, "out of memory"), "policy: message '%s'", why);
        free(text);
        return 0;
    }
    int lossy = policy_lossy(p);
    FZ_CHECK(lossy == 0 || lossy == 1, "policy_lossy returned %d", lossy);
    FZ_CHECK(lossy == policy_lossy(p2), "policy: two parses of the same text differ");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        for (size_t j = 0; j < sizeof dtypes / sizeof *dtypes; j++)
            for (uint32_t nd = 0; nd <= 2; nd++) {
                quant_spec q = policy_match(p, names[i], dtypes[j], nd, shape, 0),
                           q2 = policy_match(p2, names[i], dtypes[j], nd, shape, 0);
                FZ_CHECK(same_spec(&q, &q2), "policy: two parses match '%s' differently", names[i]);
                check_spec(&q, names[i], dtypes[j], nd, lossy);
            }
    quant_spec q = policy_match(p, NULL, CKPZ_DTYPE_NONE, 0, NULL, 0);
    FZ_CHECK(q.mode == QM_NONE && q.level <= 9, "policy: opaque bytes get mode %u level %u", q.mode, q.level);
    policy_free(p);
    policy_free(p2);
    free(text);
    return 0;
}
