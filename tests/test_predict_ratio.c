/* test_predict_ratio.c — the ratio predictor (lib/predict): the model file parser
 * rejects malformed files, the forward pass matches a network computed by hand, the
 * features have known answers on synthetic data, the sample windows stay inside the
 * tensor, and ckpz_predict_file runs end to end on an in-memory safetensors file
 * with the built-in model and with a model file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "predict/features.h"
#include "predict/mlp.h"
#include "testutil.h"

/* A 16-input network: mean 1 on input 0, scale 2 on input 0, hidden layer of 2 ReLU
 * units, one linear output. */
static const char *tiny_model(void)
{
    return "# test network\n"
           "ckpz-ratio-mlp 1\ninputs 16\nlayers 2\n"
           "mean 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
           "scale 2 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n"
           "layer 16 2 relu\nweights\n"
           " 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
           " -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0.5\n"
           "bias 0.25 -1\n"
           "layer 2 1 linear\nweights 2 -3\nbias 0.125\n"
           "end\n";
}

static int parses(const char *text)
{
    mlp m;
    char why[256];
    int r = mlp_parse(text, strlen(text), FEAT_COUNT, &m, why, sizeof why);
    mlp_free(&m);
    return r == 0;
}

/* The tiny model with `from` replaced by `to` (first occurrence). */
static char *variant(const char *from, const char *to)
{
    const char *t = tiny_model(), *at = strstr(t, from);
    if (!at) return NULL;
    char *s = malloc(strlen(t) + strlen(to) + 1);
    memcpy(s, t, (size_t)(at - t));
    strcpy(s + (at - t), to);
    strcat(s, at + strlen(from));
    return s;
}

static void test_parse(void)
{
    CHECK(parses(tiny_model()));
    static const char *const bad[][2] = {
        {"inputs 16", "inputs 15"},           /* wrong input count */
        {"layers 2", "layers 3"},             /* more layers declared than given */
        {"layers 2", "layers 0"},
        {"layers 2", "layers 99"},
        {"bias 0.25 -1", "bias 0.25"},        /* too few biases: next token is 'layer' */
        {"bias 0.25 -1", "bias 0.25 -1 7"},   /* one too many */
        {"bias 0.25 -1", "bias nan -1"},      /* NaN */
        {"bias 0.25 -1", "bias inf -1"},
        {"bias 0.25 -1", "bias 1e300 -1"},    /* out of range */
        {"bias 0.25 -1", "bias 0.25x -1"},    /* trailing garbage */
        {"layer 2 1 linear", "layer 3 1 linear"}, /* does not chain */
        {"layer 2 1 linear", "layer 2 2 linear"}, /* two outputs */
        {"layer 2 1 linear", "layer 2 1 relu"},   /* ReLU output */
        {"layer 16 2 relu", "layer 16 2 tanh"},
        {"ckpz-ratio-mlp 1", "ckpz-ratio-mlp 2"}, /* version */
        {"ckpz-ratio-mlp 1", "something 1"},
        {"layer 16 2 relu", "layer 16 -2 relu"},
        {"end\n", "end\nextra\n"},
        {"end\n", ""},                        /* truncated: no end */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *v = variant(bad[i][0], bad[i][1]);
        CHECKF(v && !parses(v), "accepted a model with '%s' -> '%s'", bad[i][0], bad[i][1]);
        free(v);
    }
    /* every truncation of the file is rejected */
    const char *t = tiny_model();
    size_t n = strlen(t) - 1; /* without the final newline it still ends in "end" */
    for (size_t k = 0; k < n - 3; k++) {
        mlp m;
        int r = mlp_parse(t, k, FEAT_COUNT, &m, NULL, 0);
        mlp_free(&m);
        CHECKF(r != 0, "accepted the model cut at %zu bytes", k);
    }
    /* the message names the line */
    {
        char *v = variant("bias 0.25 -1", "bias nan -1");
        mlp m;
        char why[256];
        CHECK(mlp_parse(v, strlen(v), FEAT_COUNT, &m, why, sizeof why) != 0);
        CHECKF(strstr(why, "line 11") != NULL, "message '%s'", why);
        mlp_free(&m);
        free(v);
    }
    /* the built-in model is valid */
    CHECK(parses(mlp_builtin_text));
}

static void test_forward(void)
{
    mlp m;
    const char *t = tiny_model();
    CHECK(mlp_parse(t, strlen(t), FEAT_COUNT, &m, NULL, 0) == 0);
    double x[FEAT_COUNT] = {0};
    /* x0 = 2, x1 = 3, x15 = 4: normalised a0 = (2-1)*2 = 2, a1 = 3, a15 = 4
     * h0 = relu(2 + 3 + 0.25) = 5.25; h1 = relu(-2 + 2 - 1) = 0; y = 10.5 + 0.125 */
    x[0] = 2;
    x[1] = 3;
    x[15] = 4;
    CHECKF(fabs(mlp_forward(&m, x) - 10.625) < 1e-12, "%g", mlp_forward(&m, x));
    /* x0 = -1: a0 = -4; h0 = relu(-4 + 0 + 0.25) = 0; h1 = relu(4 + 0.5 - 1) = 3.5;
     * x15 = 1; y = -10.5 + 0.125 */
    memset(x, 0, sizeof x);
    x[0] = -1;
    x[15] = 1;
    CHECKF(fabs(mlp_forward(&m, x) - (-10.375)) < 1e-12, "%g", mlp_forward(&m, x));
    mlp_free(&m);
}

static void put_f32(uint8_t *p, float f) { memcpy(p, &f, 4); }

static void test_features(void)
{
    double f[FEAT_COUNT];
    uint8_t *buf = calloc(1, 1 << 16);
    /* all zeros, f32 */
    feat_compute(CKPZ_DTYPE_F32, 1 << 16, buf, 1 << 16, 3, f);
    CHECK(f[FEAT_ZERO_FRAC] == 1);
    CHECK(f[FEAT_EXP_ENTROPY] == 0);
    CHECK(f[FEAT_MANT_ENTROPY] == 0);
    CHECK(f[FEAT_F32] == 1 && f[FEAT_BF16] == 0);
    CHECK(f[FEAT_ELEM_SIZE] == 0.5);
    CHECK(fabs(f[FEAT_LOG2_BYTES] - 0.5) < 1e-12); /* log2(65536) / 32 */
    CHECK(f[FEAT_EXP_DISTINCT] == 1.0 / 256);
    CHECK(f[FEAT_LOG_STD] == -4 && f[FEAT_LOG_MEANABS] == -4);
    CHECK(fabs(f[FEAT_LEVEL] - 3.0 / 9) < 1e-12 && f[FEAT_LOSSLESS] == 1);
    /* half 1.0, half -2.0 (f32): zero fraction 0, two exponents (1 bit / 8), mean |x|
     * 1.5, std 1.5, mantissa all zero */
    for (int i = 0; i < 1024; i++) put_f32(buf + 4 * i, i % 2 ? -2.0f : 1.0f);
    feat_compute(CKPZ_DTYPE_F32, 4096, buf, 4096, 3, f);
    CHECK(f[FEAT_ZERO_FRAC] == 0);
    CHECKF(fabs(f[FEAT_EXP_ENTROPY] - 1.0 / 8) < 1e-12, "%g", f[FEAT_EXP_ENTROPY]);
    CHECK(f[FEAT_MANT_ENTROPY] == 0);
    CHECK(f[FEAT_EXP_DISTINCT] == 2.0 / 256);
    CHECKF(fabs(f[FEAT_LOG_MEANABS] - log2(1.5) / 32) < 1e-12, "%g", f[FEAT_LOG_MEANABS]);
    CHECKF(fabs(f[FEAT_LOG_STD] - log2(1.5) / 32) < 1e-12, "%g", f[FEAT_LOG_STD]);
    /* bf16: one quarter zeros, the rest 1.0 (0x3F80) */
    for (int i = 0; i < 1024; i++) {
        buf[2 * i] = i % 4 ? 0x80 : 0;
        buf[2 * i + 1] = i % 4 ? 0x3F : 0;
    }
    feat_compute(CKPZ_DTYPE_BF16, 2048, buf, 2048, 3, f);
    CHECK(f[FEAT_BF16] == 1 && f[FEAT_ELEM_SIZE] == 0.25);
    CHECK(f[FEAT_ZERO_FRAC] == 0.25);
    double h = -(0.25 * log2(0.25) + 0.75 * log2(0.75));
    CHECKF(fabs(f[FEAT_EXP_ENTROPY] - h / 8) < 1e-12, "%g", f[FEAT_EXP_ENTROPY]);
    /* random bytes as f32 mantissas: entropy near 8 bits */
    for (int i = 0; i < 16384; i++) put_f32(buf + 4 * i, (float)(1.0 + (double)(rng() >> 40) / 16777216.0));
    feat_compute(CKPZ_DTYPE_F32, 65536, buf, 65536, 3, f);
    CHECKF(f[FEAT_MANT_ENTROPY] > 0.97, "%g", f[FEAT_MANT_ENTROPY]);
    CHECK(f[FEAT_EXP_ENTROPY] == 0); /* all in [1, 2) */
    free(buf);
}

static void test_windows(void)
{
    uint64_t off[FEAT_WINDOWS];
    size_t len[FEAT_WINDOWS];
    unsigned n;
    feat_windows(1000, 4, 65536, off, len, &n); /* small: all of it */
    CHECK(n == 1 && off[0] == 0 && len[0] == 1000);
    feat_windows(10000002, 2, 65536, off, len, &n);
    CHECK(n == FEAT_WINDOWS);
    size_t total = 0;
    for (unsigned k = 0; k < n; k++) {
        CHECK(off[k] % 2 == 0 && len[k] % 2 == 0);
        CHECK(off[k] + len[k] <= 10000002);
        if (k) CHECK(off[k] >= off[k - 1] + len[k - 1]);
        total += len[k];
    }
    CHECK(total <= 65536 && total >= 65536 - 8);
    CHECK(off[0] == 0 && off[n - 1] + len[n - 1] == 10000002);
    feat_windows(3, 4, 65536, off, len, &n); /* less than an element */
    CHECK(n == 0);
}

/* ---- end to end on an in-memory safetensors file ---- */
typedef struct mem {
    const uint8_t *p;
    size_t n;
} mem;

static int mem_pread(void *o, void *dst, size_t n, uint64_t off)
{
    mem *m = o;
    if (off > m->n || n > m->n - off) return -1;
    memcpy(dst, m->p + off, n);
    return 0;
}

static int count_cb(void *o, const ckpz_prediction *t)
{
    if (t->dtype != CKPZ_DTYPE_NONE) ++*(int *)o;
    return 0;
}

static void test_file(void)
{
    /* two f32 tensors: zeros (64 KiB) and gaussians (256 KiB) */
    const char *hdr = "{\"z\":{\"dtype\":\"F32\",\"shape\":[16384],\"data_offsets\":[0,65536]},"
                      "\"g\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[65536,327680]}}";
    size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8, n = 8 + hl + pad + 327680;
    uint8_t *f = calloc(1, n);
    uint64_t h = hl + pad;
    memcpy(f, &h, 8);
    memcpy(f + 8, hdr, hl);
    memset(f + 8 + hl, ' ', pad);
    for (int i = 0; i < 65536; i++) put_f32(f + 8 + h + 65536 + 4 * (size_t)i, (float)(0.02 * rng_normal()));
    mem m = {f, n};
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_predict_params p;
    ckpz_predict_params_init(&p);
    ckpz_predict_total tot;
    int count = 0;
    CHECK(ckpz_predict_file(ctx, &p, mem_pread, &m, n, count_cb, &count, &tot) == CKPZ_OK);
    CHECK(count == 2 && tot.tensors == 2 && tot.original_bytes == n && tot.tensor_bytes == 327680);
    /* a zero tensor and gaussian floats: well above 1, well below the zeros' ratio */
    CHECKF(tot.ratio > 1.1 && tot.ratio < 20, "%g", tot.ratio);
    /* a bad model file fails with a message naming the file */
    const char *bad = "/tmp/ckpz-test-bad-model.txt";
    FILE *fp = fopen(bad, "w");
    if (fp) {
        fputs("ckpz-ratio-mlp 1\ninputs 16\nlayers 1\n", fp);
        fclose(fp);
        p.model_path = bad;
        CHECK(ckpz_predict_file(ctx, &p, mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
        CHECK(strstr(ckpz_ctx_message(ctx), bad) != NULL);
        remove(bad);
    }
    p.model_path = "/nonexistent/model.txt";
    CHECK(ckpz_predict_file(ctx, &p, mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
    p.model_path = NULL;
    p.level = 42;
    CHECK(ckpz_predict_file(ctx, &p, mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
    /* a forced format that does not match */
    p.level = 3;
    p.format = CKPZ_INPUT_NPY;
    CHECK(ckpz_predict_file(ctx, &p, mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_INPUT);
    /* a pread that fails */
    p.format = CKPZ_INPUT_AUTO;
    mem shortm = {f, 100};
    CHECK(ckpz_predict_file(ctx, &p, mem_pread, &shortm, n, NULL, NULL, NULL) == CKPZ_ERR_READ);
    ckpz_ctx_free(ctx);
    free(f);
    CHECK(ckpz_predict_feature_name(0) && !strcmp(ckpz_predict_feature_name(FEAT_ZERO_FRAC), "zero_frac"));
    CHECK(ckpz_predict_feature_name(FEAT_COUNT) == NULL);
}

int main(void)
{
    test_parse();
    test_forward();
    test_features();
    test_windows();
    test_file();
    return test_summary("test_predict_ratio");
}
