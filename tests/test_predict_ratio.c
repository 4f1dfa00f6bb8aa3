/* test_predict_ratio.c — the ratio predictor (lib/predict): the model file parser
 * rejects malformed files (an input count other than the features' included), the
 * forward pass matches a network computed by hand, the features have known answers on
 * synthetic data (the candidate's columns too), the quantiser run on a sample gives
 * known code entropies and says "exact" where the compressor codes exactly, the sample
 * windows stay inside the tensor, and ckpz_predict_file runs end to end on an
 * in-memory safetensors file with the built-in model, a model file and a policy; an F64
 * tensor, outside the model's float families, is predicted by coding its sample. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPZ_EXPERIMENTAL /* ckpz_predict_file */
#include "ckpz.h"
#include "predict/features.h"
#include "predict/lossy_sample.h"
#include "predict/mlp.h"
#include "memfile.h"
#include "testutil.h"

/* FEAT_COUNT numbers: the nhead of head, then `rest` up to the last, which is `last`. */
static size_t row(char *b, size_t cap, const char *const *head, unsigned nhead, const char *rest, const char *last)
{
    size_t at = 0;
    for (unsigned i = 0; i < FEAT_COUNT; i++)
        at += (size_t)snprintf(b + at, cap - at, "%s%s", i ? " " : "",
                               i < nhead             ? head[i]
                               : i + 1 == FEAT_COUNT ? last
                                                     : rest);
    return at;
}

/* A FEAT_COUNT-input network: mean 1 and scale 2 on input 0, a hidden layer of 2 ReLU
 * units, one linear output. Its line 11 is the first layer's bias. */
static const char *tiny_model(void)
{
    static char t[4096];
    static const char *const one[] = {"1"}, *const two[] = {"2"}, *const ones[] = {"1", "1"}, *const minus[] = {"-1"};
    if (t[0]) return t;
    size_t at = (size_t)snprintf(t, sizeof t, "# test network\nckpz-ratio-mlp 1\ninputs %u\nlayers 2\nmean ",
                                 (unsigned)FEAT_COUNT);
    at += row(t + at, sizeof t - at, one, 1, "0", "0");
    at += (size_t)snprintf(t + at, sizeof t - at, "\nscale ");
    at += row(t + at, sizeof t - at, two, 1, "1", "1");
    at += (size_t)snprintf(t + at, sizeof t - at, "\nlayer %u 2 relu\nweights\n ", (unsigned)FEAT_COUNT);
    at += row(t + at, sizeof t - at, ones, 2, "0", "0");
    at += (size_t)snprintf(t + at, sizeof t - at, "\n ");
    at += row(t + at, sizeof t - at, minus, 1, "0", "0.5");
    snprintf(t + at, sizeof t - at,
             "\nbias 0.25 -1\n"
             "layer 2 1 linear\nweights 2 -3\nbias 0.125\n"
             "end\n");
    return t;
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
    char inputs[32], fewer[32], more[32], layer[32], layer_fewer[32];
    snprintf(inputs, sizeof inputs, "inputs %u", (unsigned)FEAT_COUNT);
    snprintf(fewer, sizeof fewer, "inputs %u", (unsigned)FEAT_COUNT - 1);
    snprintf(more, sizeof more, "inputs %u", (unsigned)FEAT_COUNT + 1);
    snprintf(layer, sizeof layer, "layer %u 2 relu", (unsigned)FEAT_COUNT);
    snprintf(layer_fewer, sizeof layer_fewer, "layer %u 2 relu", (unsigned)FEAT_COUNT - 1);
    /* the input count must be the library's feature count, whatever else matches */
    const char *const bad_inputs[][2] = {
        {inputs, fewer},
        {inputs, more},
        {inputs, "inputs 16"}, /* 16: the lossless-only model */
        {layer, layer_fewer},
    };
    for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++) {
        char *v = variant(bad_inputs[i][0], bad_inputs[i][1]);
        mlp m;
        char why[256] = "";
        CHECKF(v && mlp_parse(v, strlen(v), FEAT_COUNT, &m, why, sizeof why) != 0, "accepted '%s'", bad_inputs[i][1]);
        CHECKF(i == 3 || strstr(why, "line 3") != NULL, "message '%s'", why);
        mlp_free(&m);
        free(v);
    }
    static const char *const bad[][2] = {
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
        {"2 relu", "2 tanh"},
        {"ckpz-ratio-mlp 1", "ckpz-ratio-mlp 2"}, /* version */
        {"ckpz-ratio-mlp 1", "something 1"},
        {" 2 relu", " -2 relu"},
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
    /* x0 = 2, x1 = 3, xlast = 4: normalised a0 = (2-1)*2 = 2, a1 = 3, alast = 4
     * h0 = relu(2 + 3 + 0.25) = 5.25; h1 = relu(-2 + 2 - 1) = 0; y = 10.5 + 0.125 */
    x[0] = 2;
    x[1] = 3;
    x[FEAT_COUNT - 1] = 4;
    CHECKF(fabs(mlp_forward(&m, x) - 10.625) < 1e-12, "%g", mlp_forward(&m, x));
    /* x0 = -1: a0 = -4; h0 = relu(-4 + 0 + 0.25) = 0; h1 = relu(4 + 0.5 - 1) = 3.5;
     * xlast = 1; y = -10.5 + 0.125 */
    memset(x, 0, sizeof x);
    x[0] = -1;
    x[FEAT_COUNT - 1] = 1;
    CHECKF(fabs(mlp_forward(&m, x) - (-10.375)) < 1e-12, "%g", mlp_forward(&m, x));
    mlp_free(&m);
}

static void put_f32(uint8_t *p, float f) { memcpy(p, &f, 4); }

static void test_features(void)
{
    double f[FEAT_COUNT];
    uint8_t *buf = calloc(1, 1 << 16);
    /* all zeros, f32 */
    feat_compute(CKPZ_DTYPE_F32, 1 << 16, buf, 1 << 16, 3, NULL, f);
    CHECK(f[FEAT_ZERO_FRAC] == 1);
    CHECK(f[FEAT_EXP_ENTROPY] == 0);
    CHECK(f[FEAT_MANT_ENTROPY] == 0);
    CHECK(f[FEAT_F32] == 1 && f[FEAT_BF16] == 0);
    CHECK(f[FEAT_ELEM_SIZE] == 0.5);
    CHECK(fabs(f[FEAT_LOG2_BYTES] - 0.5) < 1e-12); /* log2(65536) / 32 */
    CHECK(f[FEAT_EXP_DISTINCT] == 1.0 / 256);
    CHECK(f[FEAT_LOG_STD] == -4 && f[FEAT_LOG_MEANABS] == -4);
    CHECK(f[FEAT_EXP_DELTA] == 0 && f[FEAT_REPEAT] == 1); /* every element repeats the one before */
    CHECK(fabs(f[FEAT_LEVEL] - 3.0 / 9) < 1e-12 && f[FEAT_LOSSLESS] == 1);
    /* half 1.0, half -2.0 (f32): zero fraction 0, two exponents (1 bit / 8), mean |x|
     * 1.5, std 1.5, mantissa all zero */
    for (int i = 0; i < 1024; i++) put_f32(buf + 4 * i, i % 2 ? -2.0f : 1.0f);
    feat_compute(CKPZ_DTYPE_F32, 4096, buf, 4096, 3, NULL, f);
    CHECK(f[FEAT_ZERO_FRAC] == 0);
    CHECKF(fabs(f[FEAT_EXP_ENTROPY] - 1.0 / 8) < 1e-12, "%g", f[FEAT_EXP_ENTROPY]);
    CHECK(f[FEAT_MANT_ENTROPY] == 0);
    CHECK(f[FEAT_EXP_DISTINCT] == 2.0 / 256);
    CHECKF(fabs(f[FEAT_LOG_MEANABS] - log2(1.5) / 32) < 1e-12, "%g", f[FEAT_LOG_MEANABS]);
    CHECKF(fabs(f[FEAT_LOG_STD] - log2(1.5) / 32) < 1e-12, "%g", f[FEAT_LOG_STD]);
    /* exponents 127, 128, 127...: 1023 changes, 512 of +1 and 511 of -1 (about 1 bit),
     * no repeat */
    double hd = -(512.0 / 1023 * log2(512.0 / 1023) + 511.0 / 1023 * log2(511.0 / 1023));
    CHECKF(fabs(f[FEAT_EXP_DELTA] - hd / 8) < 1e-12, "%.17g", f[FEAT_EXP_DELTA]);
    CHECK(f[FEAT_REPEAT] == 0);
    /* bf16: one quarter zeros, the rest 1.0 (0x3F80) */
    for (int i = 0; i < 1024; i++) {
        buf[2 * i] = i % 4 ? 0x80 : 0;
        buf[2 * i + 1] = i % 4 ? 0x3F : 0;
    }
    feat_compute(CKPZ_DTYPE_BF16, 2048, buf, 2048, 3, NULL, f);
    CHECK(f[FEAT_BF16] == 1 && f[FEAT_ELEM_SIZE] == 0.25);
    CHECK(f[FEAT_ZERO_FRAC] == 0.25);
    double h = -(0.25 * log2(0.25) + 0.75 * log2(0.75));
    CHECKF(fabs(f[FEAT_EXP_ENTROPY] - h / 8) < 1e-12, "%g", f[FEAT_EXP_ENTROPY]);
    /* random bytes as f32 mantissas: entropy near 8 bits */
    for (int i = 0; i < 16384; i++) put_f32(buf + 4 * i, (float)(1.0 + (double)(rng() >> 40) / 16777216.0));
    feat_compute(CKPZ_DTYPE_F32, 65536, buf, 65536, 3, NULL, f);
    CHECKF(f[FEAT_MANT_ENTROPY] > 0.97, "%g", f[FEAT_MANT_ENTROPY]);
    CHECK(f[FEAT_EXP_ENTROPY] == 0); /* all in [1, 2) */

    /* the range columns: 1.0 and -2.0 alternating (range 3, std 1.5): every block of 64
     * has range 3, log2(3 / 1.5) / 8 = 1/8; the whole sample, no extrapolation, also */
    for (int i = 0; i < 1024; i++) put_f32(buf + 4 * i, i % 2 ? -2.0f : 1.0f);
    feat_compute(CKPZ_DTYPE_F32, 4096, buf, 4096, 3, NULL, f);
    CHECKF(fabs(f[FEAT_BLOCK_RANGE] - 0.125) < 1e-12, "%g", f[FEAT_BLOCK_RANGE]);
    CHECKF(fabs(f[FEAT_RANGE_STD] - 0.125) < 1e-12, "%g", f[FEAT_RANGE_STD]);
    CHECK(f[FEAT_UNDERSAMPLE] == 0);
    /* the same sample of a tensor 2^20 times larger: log2(2^20) / 32, and the range
     * extrapolated by sqrt(ln(2^30) / ln(2^10)) = sqrt(3) */
    feat_compute(CKPZ_DTYPE_F32, (uint64_t)4096 << 20, buf, 4096, 3, NULL, f);
    CHECKF(fabs(f[FEAT_UNDERSAMPLE] - 20.0 / 32) < 1e-12, "%g", f[FEAT_UNDERSAMPLE]);
    CHECKF(fabs(f[FEAT_RANGE_STD] - log2(2 * sqrt(3.0)) / 8) < 1e-12, "%g", f[FEAT_RANGE_STD]);
    CHECK(fabs(feat_range_extrapolate(3, 1024, 1u << 30) - 3 * sqrt(3.0)) < 1e-12);
    CHECK(feat_range_extrapolate(3, 1024, 1024) == 3 && feat_range_extrapolate(3, 1, 1024) == 3);
    /* a lossless candidate: level, lossless, no mode */
    feat_compute(CKPZ_DTYPE_F32, 4096, buf, 4096, 6, NULL, f);
    CHECK(fabs(f[FEAT_LEVEL] - 6.0 / 9) < 1e-12 && f[FEAT_LOSSLESS] == 1);
    CHECK(f[FEAT_M_GRID] == 0 && f[FEAT_M_LOG] == 0 && f[FEAT_M_AFFINE] == 0 && f[FEAT_CODE_BITS] == 0 &&
          f[FEAT_EST_SAVINGS] == 0 && f[FEAT_BITS] == 0 && f[FEAT_LOG_BOUND] == 0);
    /* lossy candidates: the columns come from the setting and the quantiser's result */
    feat_lossy fl = {QM_AFFINE, 8, 1, 64, 0, 0, 4, 0.01, 1};
    feat_compute(CKPZ_DTYPE_F32, 4096, buf, 4096, 3, &fl, f);
    CHECK(f[FEAT_LOSSLESS] == 0 && f[FEAT_M_AFFINE] == 1 && f[FEAT_M_GRID] == 0 && f[FEAT_M_LOG] == 0);
    CHECK(f[FEAT_BITS] == 0.5 && f[FEAT_LOG2_GROUP] == 0.25 && f[FEAT_SYM] == 1);
    CHECK(f[FEAT_CODE_BITS] == 0.25 && f[FEAT_EXC_FRAC] == 0.01 && f[FEAT_EST_SAVINGS] == 0.75);
    CHECK(f[FEAT_LOG_BOUND] == 0);
    feat_lossy fr = {QM_REL, 0, 0, 0, 1e-3, 1.5 / 256, 2, 0, 0.5};
    feat_compute(CKPZ_DTYPE_F32, 4096, buf, 4096, 3, &fr, f);
    CHECK(f[FEAT_M_GRID] == 1 && f[FEAT_M_AFFINE] == 0 && f[FEAT_BITS] == 0 && f[FEAT_SYM] == 0);
    CHECKF(fabs(f[FEAT_LOG_BOUND] - 0.5) < 1e-12, "%g", f[FEAT_LOG_BOUND]); /* log2(1.5 / (1.5/256)) / 16 */
    CHECK(f[FEAT_CODE_BITS] == 0.125 && f[FEAT_EST_SAVINGS] == 0.875);
    feat_lossy fp = {QM_PREL, 0, 0, 0, 1.0 / 256, 0, 3, 0, 0.5};
    feat_compute(CKPZ_DTYPE_BF16, 2048, buf, 2048, 3, &fp, f);
    CHECK(f[FEAT_M_LOG] == 1 && f[FEAT_M_GRID] == 0);
    CHECKF(fabs(f[FEAT_LOG_BOUND] - 0.5) < 1e-12, "%g", f[FEAT_LOG_BOUND]); /* -log2(2^-8) / 16 */
    CHECK(f[FEAT_EST_SAVINGS] == 0.75); /* 0.5 of 2 bytes */
    free(buf);
}

/* The quantiser on samples: known code entropies, and "exact" where the compressor
 * would code exactly. */
static void test_lossy_sample(void)
{
    lossy_sampler *ls = lossy_sampler_create();
    uint8_t *buf = calloc(1, 1 << 16);
    feat_lossy l;
    quant_spec q;
    uint64_t shape[2] = {1, 255}, woff[1] = {0};
    size_t wlen[1];
    CHECK(ls && buf);
    if (!ls || !buf) return;

    /* per-channel INT8 (sym) on one row of 255 values -127/127 .. 127/127: one group,
     * every code 0..254 once: log2(255) bits per element, 8 bytes of parameters */
    for (int i = 0; i < 255; i++) put_f32(buf + 4 * i, (float)(i - 127) / 127.0f);
    wlen[0] = 255 * 4;
    memset(&q, 0, sizeof q);
    q.mode = QM_AFFINE;
    q.bits = 8;
    q.sym = 1;
    q.per_row = 1;
    q.group = 64;
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 1);
    CHECK(l.mode == QM_AFFINE && l.group == 255 && l.bits == 8 && l.sym == 1);
    CHECKF(fabs(l.code_bits - log2(255.0)) < 1e-9, "%g", l.code_bits);
    CHECK(l.exc_frac == 0);
    CHECKF(fabs(l.bytes_per_elem - (log2(255.0) / 8 + 8.0 / 255)) < 1e-9, "%g", l.bytes_per_elem);

    /* abs 0.5 (grid step 1) on 0, 1, 0, 1...: centre 1 (the mean 0.5 rounded up), codes
     * zigzag(-1) = 1 and zigzag(0) = 0 in equal numbers: one bit */
    for (int i = 0; i < 4096; i++) put_f32(buf + 4 * i, (float)(i % 2));
    wlen[0] = 4096 * 4;
    uint64_t shape2[2] = {64, 64};
    memset(&q, 0, sizeof q);
    q.mode = QM_ABS;
    q.bound = 0.5;
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 1);
    CHECKF(fabs(l.code_bits - 1) < 1e-12, "%g", l.code_bits);
    CHECK(l.abs_bound == 0.5 && l.mode == QM_ABS);
    /* max_bytes codes the start of the window only: the same answer on 256 elements */
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape2, wlen[0], buf, woff, wlen, 1, 1024, &l) == 1);
    CHECKF(fabs(l.code_bits - 1) < 1e-12, "%g", l.code_bits);
    /* rel: the bound is R x the range, extrapolated to the tensor's size: 1e-3 x 1 on a
     * sample that is the whole tensor */
    q.mode = QM_REL;
    q.bound = 1e-3;
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 1);
    CHECKF(fabs(l.abs_bound - 1e-3) < 1e-15, "%g", l.abs_bound);
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape2, (uint64_t)wlen[0] << 20, buf, woff, wlen, 1, 1 << 16, &l) ==
          1);
    CHECKF(fabs(l.abs_bound - 1e-3 * sqrt(log(4096.0 * (1 << 20)) / log(4096.0))) < 1e-15, "%g", l.abs_bound);

    /* exact, as the compressor codes it: lossless; rel of a constant tensor (a zero
     * bound); change-rel without a base; 16-bit codes of bf16 (no smaller); integers */
    memset(buf, 0, 1 << 16);
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 0);
    q.mode = QM_NONE;
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 0);
    q.mode = QM_CREL;
    q.bound = 0.1;
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_F32, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 0);
    for (int i = 0; i < 8192; i++) {
        float v = (float)rng_normal();
        uint32_t u;
        memcpy(&u, &v, 4);
        buf[2 * i] = (uint8_t)(u >> 16);
        buf[2 * i + 1] = (uint8_t)(u >> 24);
    }
    memset(&q, 0, sizeof q);
    q.mode = QM_AFFINE;
    q.bits = 16;
    q.group = 64;
    wlen[0] = 8192 * 2;
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_BF16, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 0);
    q.bits = 8; /* 8-bit codes of bf16 are smaller */
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_BF16, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 1);
    CHECKF(l.code_bits > 4 && l.code_bits <= 8, "%g", l.code_bits);
    CHECK(lossy_sample(ls, &q, CKPZ_DTYPE_I16, 2, shape2, wlen[0], buf, woff, wlen, 1, 1 << 16, &l) == 0);
    lossy_sampler_free(ls);
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
/* A safetensors file of header hdr and `data` zero bytes of tensor data (calloc'd; its
 * size in *n): the data start at *start. */
static uint8_t *st_file(const char *hdr, size_t data, size_t *n, size_t *start)
{
    size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8;
    uint64_t h = hl + pad;
    *n = 8 + h + data;
    *start = 8 + h;
    uint8_t *f = calloc(1, *n);
    memcpy(f, &h, 8);
    memcpy(f + 8, hdr, hl);
    memset(f + 8 + hl, ' ', pad);
    return f;
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
    size_t n, at;
    uint8_t *f = st_file(hdr, 327680, &n, &at);
    for (int i = 0; i < 65536; i++) put_f32(f + at + 65536 + 4 * (size_t)i, (float)(0.02 * rng_normal()));
    ckpz_mem m = mem_in(f, n, 0);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_predict_params p;
    ckpz_predict_params_init(&p);
    ckpz_predict_total tot = {.struct_size = sizeof tot};
    int count = 0;
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, count_cb, &count, &tot) == CKPZ_OK);
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
        CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
        CHECK(strstr(ckpz_ctx_message(ctx), bad) != NULL);
        remove(bad);
    }
    p.model_path = "/nonexistent/model.txt";
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
    p.model_path = NULL;
    p.level = 42;
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
    /* a forced format that does not match */
    p.level = 3;
    p.format = CKPZ_INPUT_NPY;
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_INPUT);
    /* a pread that fails */
    p.format = CKPZ_INPUT_AUTO;
    ckpz_mem shortm = mem_in(f, 100, 0);
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &shortm, n, NULL, NULL, NULL) == CKPZ_ERR_READ);
    ckpz_ctx_free(ctx);
    free(f);
    CHECK(ckpz_predict_feature_name(0) && !strcmp(ckpz_predict_feature_name(FEAT_ZERO_FRAC), "zero_frac"));
    CHECK(ckpz_predict_feature_name(FEAT_COUNT) == NULL);
}

/* What the callback saw of each tensor of the policy test. */
typedef struct seen {
    int n;
    char name[4][32];
    int lossy[4];
    double savings[4];
} seen;

static int seen_cb(void *o, const ckpz_prediction *t)
{
    seen *s = o;
    if (t->dtype == CKPZ_DTYPE_NONE || s->n >= 4) return 0;
    snprintf(s->name[s->n], sizeof s->name[0], "%s", t->name);
    s->lossy[s->n] = t->lossy;
    CHECK(t->lossy == (strcmp(t->lossy_mode, "lossless") != 0));
    CHECK(t->features[FEAT_LOSSLESS] == !t->lossy);
    s->savings[s->n++] = t->savings;
    return 0;
}

/* A setting through the params: the policy's lossy rule applies to a 2-D weight, never
 * to a 2-D tensor named ln_ or a vector, and gives a larger ratio than lossless. */
static void test_file_policy(void)
{
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[256,256],\"data_offsets\":[0,262144]},"
                      "\"ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[64,64],\"data_offsets\":[262144,278528]},"
                      "\"v\":{\"dtype\":\"F32\",\"shape\":[4096],\"data_offsets\":[278528,294912]}}";
    size_t data = 294912, n, at;
    uint8_t *f = st_file(hdr, data, &n, &at);
    for (size_t i = 0; i < data / 4; i++) put_f32(f + at + 4 * i, (float)(0.02 * rng_normal()));
    ckpz_mem m = mem_in(f, n, 0);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_predict_params p;
    ckpz_predict_params_init(&p);
    ckpz_predict_total lossless = {.struct_size = sizeof lossless}, lossy = {.struct_size = sizeof lossy};
    seen s0 = {0}, s1 = {0};
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, seen_cb, &s0, &lossless) == CKPZ_OK);
    CHECK(s0.n == 3 && !s0.lossy[0] && !s0.lossy[1] && !s0.lossy[2] && lossless.lossy_tensors == 0);
    p.policy = "* rel 1e-3\n";
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, seen_cb, &s1, &lossy) == CKPZ_OK);
    CHECK(s1.n == 3 && !strcmp(s1.name[0], "w") && !strcmp(s1.name[1], "ln_f.weight"));
    CHECK(s1.lossy[0] && !s1.lossy[1] && !s1.lossy[2] && lossy.lossy_tensors == 1);
    /* the exact tensors are predicted as under lossless coding; the weight saves more */
    CHECK(s1.savings[1] == s0.savings[1] && s1.savings[2] == s0.savings[2]);
    CHECKF(s1.savings[0] > s0.savings[0] + 0.3, "%g vs %g", s1.savings[0], s0.savings[0]);
    CHECKF(lossy.ratio > lossless.ratio * 1.5, "%g vs %g", lossy.ratio, lossless.ratio);
    /* a rule that matches only the protected tensor changes nothing */
    seen s2 = {0};
    p.policy = "*ln_f* int8\n";
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, seen_cb, &s2, NULL) == CKPZ_OK);
    CHECK(!s2.lossy[0] && !s2.lossy[1] && !s2.lossy[2]);
    /* a bad policy names its line */
    p.policy = "# rules\n* bogus 1\n";
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
    CHECKF(strstr(ckpz_ctx_message(ctx), "line 2") != NULL, "%s", ckpz_ctx_message(ctx));
    p.policy = NULL;
    p.max_mae = -1;
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, NULL, NULL, NULL) == CKPZ_ERR_PARAM);
    /* features only: no model is loaded, tensors are predicted as stored */
    p.max_mae = 0;
    p.features_only = 1;
    p.model_path = "/nonexistent/model.txt";
    seen s3 = {0};
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, seen_cb, &s3, NULL) == CKPZ_OK);
    CHECK(s3.n == 3 && s3.savings[0] <= 0 && s3.savings[0] > -0.01);
    ckpz_ctx_free(ctx);
    free(f);
}

/* An F64 tensor (a type outside the model's float families) is predicted by coding its
 * sample: within 10 % of what ckpz_compress_buffer gives for the whole file. */
static void test_file_f64(void)
{
    const char *hdr = "{\"d\":{\"dtype\":\"F64\",\"shape\":[256,256],\"data_offsets\":[0,524288]}}";
    size_t data = 524288, n, at;
    uint8_t *f = st_file(hdr, data, &n, &at);
    for (size_t i = 0; i < data / 8; i++) {
        double v = 0.02 * rng_normal();
        memcpy(f + at + 8 * i, &v, 8);
    }
    ckpz_mem m = mem_in(f, n, 0);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_predict_params p;
    ckpz_predict_params_init(&p);
    ckpz_predict_total tot = {.struct_size = sizeof tot};
    CHECK(ckpz_predict_file(ctx, &p, ckpz_mem_pread, &m, n, NULL, NULL, &tot) == CKPZ_OK);
    ckpz_params cp;
    ckpz_params_init(&cp);
    size_t got = 0;
    void *z = NULL;
    CHECK(ckpz_compress_buffer(ctx, &cp, f, n, &z, &got) == CKPZ_OK && got > 0);
    double actual = got ? (double)n / (double)got : 0;
    CHECKF(fabs(tot.ratio / actual - 1) < 0.1, "F64: predicted %.3fx, compressed %.3fx", tot.ratio, actual);
    ckpz_free(z);
    ckpz_ctx_free(ctx);
    free(f);
}

int main(void)
{
    test_parse();
    test_forward();
    test_features();
    test_lossy_sample();
    test_windows();
    test_file();
    test_file_policy();
    test_file_f64();
    return test_summary("test_predict_ratio");
}
