/* fuzz_mlp.c — libFuzzer harness for the ratio predictor's model file parser
 * (lib/predict/mlp.c: mlp_parse, then mlp_forward on what it accepted).
 *
 * The input is the model text, parsed for FEAT_COUNT inputs (the library's use) and
 * for the count in its "inputs" line. Checks: a rejected file leaves a message naming
 * the line; an accepted one has what doc/predict.md promises (1..MLP_MAX_LAYERS layers
 * that chain from `inputs` to one linear output, widths within MLP_MAX_WIDTH, every
 * number finite and within MLP_MAX_ABS), and its output for bounded inputs is finite;
 * mlp_free is safe after either.
 */
#include <math.h>

#include "predict/features.h"
#include "predict/mlp.h"
#include "fuzz_util.h"

static void check_model(const mlp *m, unsigned inputs)
{
    FZ_CHECK(m->inputs == inputs && m->nlayers >= 1 && m->nlayers <= MLP_MAX_LAYERS, "mlp: %u inputs, %u layers",
             m->inputs, m->nlayers);
    for (unsigned i = 0; i < inputs; i++)
        FZ_CHECK(isfinite(m->mean[i]) && isfinite(m->scale[i]) && fabs(m->mean[i]) <= MLP_MAX_ABS &&
                     fabs(m->scale[i]) <= MLP_MAX_ABS,
                 "mlp: normalisation %u out of range", i);
    unsigned prev = inputs;
    for (unsigned l = 0; l < m->nlayers; l++) {
        const mlp_layer *L = &m->layer[l];
        FZ_CHECK(L->in == prev && L->out >= 1 && L->out <= MLP_MAX_WIDTH && L->w && L->b, "mlp: layer %u is %u x %u", l,
                 L->in, L->out);
        for (size_t k = 0; k < (size_t)L->in * L->out; k++)
            FZ_CHECK(isfinite(L->w[k]) && fabs(L->w[k]) <= MLP_MAX_ABS, "mlp: layer %u weight %zu", l, k);
        for (unsigned k = 0; k < L->out; k++)
            FZ_CHECK(isfinite(L->b[k]) && fabs(L->b[k]) <= MLP_MAX_ABS, "mlp: layer %u bias %u", l, k);
        prev = L->out;
    }
    FZ_CHECK(prev == 1 && !m->layer[m->nlayers - 1].relu, "mlp: the last layer has %u outputs", prev);
    double x[MLP_MAX_WIDTH];
    for (int trial = 0; trial < 3; trial++) {
        for (unsigned i = 0; i < inputs; i++) x[i] = trial == 0 ? 0 : trial == 1 ? 1.0 + i : -100.0 * (i % 7);
        double y = mlp_forward(m, x);
        FZ_CHECK(isfinite(y), "mlp: output %g for bounded inputs", y);
    }
}

static void parse(const char *text, size_t len, unsigned inputs)
{
    mlp m;
    char why[256] = "";
    int r = mlp_parse(text, len, inputs, &m, why, sizeof why);
    FZ_CHECK(r == 0 || r == -1, "mlp_parse returned %d", r);
    if (r) FZ_CHECK(!strncmp(why, "line ", 5), "mlp: rejected with message '%s'", why);
    else check_model(&m, inputs);
    mlp_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = (char *)fz_copy(data, size); /* exact size: the parser must stop at len */
    parse(text, size, FEAT_COUNT);
    /* the count its "inputs" line gives, if any, so that other widths get past that line */
    const char *k = size > 8 ? memchr(text, 'i', size < 64 ? size : 64) : NULL;
    if (k && (size_t)(text + size - k) > 7 && !memcmp(k, "inputs ", 7)) {
        unsigned v = 0;
        for (const char *q = k + 7; q < text + size && *q >= '0' && *q <= '9' && v < 1000; q++)
            v = v * 10 + (unsigned)(*q - '0');
        if (v >= 1 && v <= MLP_MAX_WIDTH && v != FEAT_COUNT) parse(text, size, v);
    }
    free(text);
    return 0;
}
