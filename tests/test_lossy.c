/* test_lossy.c — lossy coding through the public API, checked on every element.
 *
 * A safetensors file with float tensors of every lossy dtype (with NaN, infinities,
 * signed zeros, subnormals and huge values planted in them), an Adam-like second moment
 * spanning ten decades, and tensors the safe defaults keep lossless (a bias, a norm, a
 * vector, integers). For each mode: every restored element is within its bound (abs,
 * rel, pointwise-rel: sign kept, never zero), non-finite values come back bit for bit,
 * lossless tensors and the header byte for byte; the listing's error statistics match
 * the errors measured here; pruning zeroes about the asked share; closed-loop coding
 * against a restored base stays within the bound, and a bound larger than the update
 * is reported as frozen; max-mae falls back; policy errors name their line; output is
 * the same for 1 and 2 threads and every reader restores the same bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CKPZ_EXPERIMENTAL /* ckpz_predict_file */
#include "ckpz.h"
#include "testutil.h"
#include "memfile.h"
#include "codec/codec.h"
#include "transforms/predict.h"
#include "transforms/quant_grid.h"

enum { T_F32, T_BF16, T_F16, T_F64, T_V, T_BIAS, T_NORM, T_VEC, T_I64, NT };

typedef struct {
    const char *name, *dtype;
    size_t rows, cols;
    unsigned es;
    int lossy_ok; /* the safe defaults let it be lossy */
    size_t off;   /* in the file */
} tdesc;

static tdesc T[NT] = {
    {"w.f32", "F32", 64, 1000, 4, 1, 0},
    {"w.bf16", "BF16", 50, 800, 2, 1, 0},
    {"w.f16", "F16", 40, 600, 2, 1, 0},
    {"w.f64", "F64", 20, 500, 8, 1, 0},
    {"state.exp_avg_sq", "F32", 100, 700, 4, 1, 0},
    {"layer.bias", "F32", 2, 300, 4, 0, 0},
    {"final_norm.weight", "F32", 10, 10, 4, 0, 0},
    {"vec", "F32", 1, 1000, 4, 0, 0},
    {"ids", "I64", 10, 10, 8, 0, 0},
};

static double h2d(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t d2h(double d) /* truncating is fine for making test data */
{
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t s = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a >= 0x47800000) return (uint16_t)(s | 0x7c00);
    if (a < 0x38800000) return (uint16_t)(s | (uint32_t)(ldexp(fabs((double)f), 24)));
    return (uint16_t)(s | ((a - 0x38000000) >> 13));
}

static double get(const tdesc *t, const uint8_t *p)
{
    if (!strcmp(t->dtype, "BF16")) {
        uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (!strcmp(t->dtype, "F16")) return h2d((uint16_t)(p[0] | p[1] << 8));
    if (!strcmp(t->dtype, "F64")) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    float f;
    memcpy(&f, p, 4);
    return f;
}

static void put(const tdesc *t, uint8_t *p, double v)
{
    if (!strcmp(t->dtype, "BF16")) {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        p[0] = (uint8_t)(u >> 16);
        p[1] = (uint8_t)(u >> 24);
    } else if (!strcmp(t->dtype, "F16")) {
        uint16_t h = d2h(v);
        p[0] = (uint8_t)h;
        p[1] = (uint8_t)(h >> 8);
    } else if (!strcmp(t->dtype, "F64")) {
        memcpy(p, &v, 8);
    } else if (!strcmp(t->dtype, "I64")) {
        int64_t k = (int64_t)v;
        memcpy(p, &k, 8);
    } else {
        float f = (float)v;
        memcpy(p, &f, 4);
    }
}

static uint8_t *make_file(size_t *len)
{
    char json[4096];
    size_t jl = 0, off = 0;
    jl += (size_t)snprintf(json, sizeof json, "{\"__metadata__\":{\"step\":\"300\"}");
    for (int i = 0; i < NT; i++) {
        size_t b = T[i].rows * T[i].cols * T[i].es;
        if (T[i].rows == 1)
            jl += (size_t)snprintf(json + jl, sizeof json - jl,
                                   ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu],"
                                   "\"data_offsets\":[%zu,%zu]}",
                                   T[i].name, T[i].dtype, T[i].cols, off, off + b);
        else
            jl += (size_t)snprintf(json + jl, sizeof json - jl,
                                   ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu,%zu],"
                                   "\"data_offsets\":[%zu,%zu]}",
                                   T[i].name, T[i].dtype, T[i].rows, T[i].cols, off, off + b);
        T[i].off = off;
        off += b;
    }
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "}");
    size_t hl = (jl + 7) & ~(size_t)7, n = 8 + hl + off;
    uint8_t *p = calloc(1, n);
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)((uint64_t)hl >> (8 * k));
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, jl);
    for (int i = 0; i < NT; i++) T[i].off += 8 + hl;
    for (int i = 0; i < NT; i++) {
        size_t nel = T[i].rows * T[i].cols;
        uint8_t *d = p + T[i].off;
        for (size_t k = 0; k < nel; k++) {
            double v = rng_normal() * 0.02 * (1 + (double)(k / T[i].cols) / 8); /* row scales drift */
            if (i == T_V) v = exp(rng_normal() * 4 - 16) * (k % 97 == 0 ? 0 : 1); /* 1e-12 .. 1e-2, zeros */
            if (i == T_I64) v = (double)(rng() % 1000);
            put(&T[i], d + k * T[i].es, v);
        }
        if (i <= T_F64) { /* the awkward values, in the first rows */
            double sp[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1e-30, -3e-39, 1e4, -2.5e4};
            for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++) put(&T[i], d + (17 + 131 * k) * T[i].es, sp[k]);
        }
    }
    *len = n;
    return p;
}

static int file_level = 3; /* ckpz_params.level for compress() */

static uint8_t *compress(ckpz_ctx *ctx, const char *policy, const uint8_t *src, size_t n, const uint8_t *base,
                         size_t blen, int threads, size_t *zl, ckpz_error *err)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.level = file_level;
    p.threads = threads;
    p.chunk_size = 65536;
    p.policy = policy;
    p.base = base;
    p.base_size = blen;
    void *z = NULL;
    *err = ckpz_compress_buffer(ctx, &p, src, n, &z, zl);
    return z;
}

static uint8_t *restore(ckpz_ctx *ctx, const uint8_t *z, size_t zl, size_t n, const uint8_t *base, size_t blen,
                        int threads)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = threads;
    p.base = base;
    p.base_size = blen;
    uint8_t *out = malloc(n);
    ckpz_error e = ckpz_decompress_buffer(ctx, &p, z, zl, out, n);
    CHECKF(e == CKPZ_OK, "decompress: %s", ckpz_ctx_message(ctx));
    return out;
}

typedef struct {
    int lossy;
    double max_error, mae;
    uint64_t changed, frozen;
} listed;

static void list_entries(ckpz_ctx *ctx, const uint8_t *z, size_t zl, listed *out)
{
    ckpz_mem f = mem_in(z, zl, 0);
    ckpz_archive *a = NULL;
    ckpz_archive_info info = {.struct_size = sizeof info};
    memset(out, 0, NT * sizeof *out);
    if (ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &f, zl, &a) != CKPZ_OK) {
        CHECKF(0, "archive_open: %s", ckpz_ctx_message(ctx));
        return;
    }
    ckpz_archive_get_info(a, &info);
    CHECK(info.format_version == 5 && (z[10] & 2) && info.lossy); /* version 5, feature bit 1 (lossy) */
    for (int i = 0; i < NT; i++) {
        uint64_t idx;
        ckpz_entry e = {.struct_size = sizeof e};
        if (ckpz_archive_find(ctx, a, T[i].name, &idx) || ckpz_archive_entry(a, idx, &e)) {
            CHECKF(0, "no entry %s", T[i].name);
            continue;
        }
        out[i] = (listed){e.lossy, e.max_error, e.mae, e.changed, e.frozen};
    }
    ckpz_archive_close(a);
}

enum { B_ABS, B_REL, B_PREL, B_AFFINE, B_CLIPPED };

/* Checks every element of the lossy-eligible tensors against the bound; returns the
 * fraction of finite elements restored as exactly zero while not zero before. */
static double check_bounds(const char *what, const uint8_t *orig, const uint8_t *rest, size_t n, int kind, double bound,
                           const listed *ls)
{
    /* Adam's second moment is lossy only on the log grid (safe default) */
    int v_lossy = strstr(what, "pointwise-rel") != NULL;
    size_t zeroed = 0, finite = 0;
    CHECKF(!memcmp(orig, rest, T[0].off), "%s: header changed", what);
    for (int i = 0; i < NT; i++) {
        const tdesc *t = &T[i];
        size_t nel = t->rows * t->cols, bytes = nel * t->es;
        const uint8_t *x = orig + t->off, *r = rest + t->off;
        if (!t->lossy_ok || (i == T_V && !v_lossy)) {
            CHECKF(!memcmp(x, r, bytes) && !ls[i].lossy, "%s: %s should be lossless", what, t->name);
            continue;
        }
        CHECKF(ls[i].lossy, "%s: %s not lossy", what, t->name);
        double lo = INFINITY, hi = -INFINITY;
        for (size_t k = 0; k < nel; k++) {
            double v = get(t, x + k * t->es);
            if (isfinite(v)) {
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
        double maxe = 0, sum = 0;
        size_t bad = 0;
        for (size_t k = 0; k < nel; k++) {
            double a = get(t, x + k * t->es), b = get(t, r + k * t->es);
            if (!isfinite(a)) {
                bad += memcmp(x + k * t->es, r + k * t->es, t->es) != 0;
                continue;
            }
            double e = fabs(b - a);
            maxe = e > maxe ? e : maxe;
            sum += e;
            if (i == T_F32) { /* the share of values pruned: on weights only (v is mostly below abs bounds) */
                finite++;
                zeroed += b == 0 && a != 0;
            }
            double lim = kind == B_ABS      ? bound
                         : kind == B_REL    ? bound * (hi - lo)
                         : kind == B_PREL   ? bound * fabs(a)
                         : kind == B_AFFINE ? (hi - lo) / 100 /* a loose sanity bound */
                                            : INFINITY;      /* percentile calibration clips outliers */
            if (!(e <= lim)) bad++;
            if (kind == B_PREL && (signbit(a) != signbit(b) || (a != 0 && b == 0))) bad++;
        }
        CHECKF(bad == 0, "%s: %s: %zu elements outside the bound", what, t->name, bad);
        CHECKF(fabs(ls[i].max_error - maxe) <= 1e-12 * (maxe + 1e-300) + 1e-300,
               "%s: %s: listed max error %g, measured %g", what, t->name, ls[i].max_error, maxe);
        CHECKF(fabs(ls[i].mae * (double)nel - sum) <= 1e-6 * (sum + 1e-300), "%s: %s: listed MAE %g, measured %g", what,
               t->name, ls[i].mae, sum / (double)nel);
    }
    (void)n;
    return finite ? (double)zeroed / (double)finite : 0;
}

static void run_mode(ckpz_ctx *ctx, const uint8_t *orig, size_t n, const char *policy, int kind, double bound,
                     double *zero_share, size_t *zlen)
{
    size_t zl = 0, zl2 = 0;
    ckpz_error e, e2;
    uint8_t *z = compress(ctx, policy, orig, n, NULL, 0, 1, &zl, &e);
    CHECKF(e == CKPZ_OK, "%s: %s", policy, ckpz_ctx_message(ctx));
    uint8_t *z2 = compress(ctx, policy, orig, n, NULL, 0, 2, &zl2, &e2);
    CHECKF(e2 == CKPZ_OK && zl2 == zl && !memcmp(z, z2, zl), "%s: 1 and 2 threads write different files", policy);
    if (e == CKPZ_OK) {
        uint8_t *r = restore(ctx, z, zl, n, NULL, 0, 1), *r2 = restore(ctx, z, zl, n, NULL, 0, 2);
        CHECKF(!memcmp(r, r2, n), "%s: readers disagree", policy);
        listed ls[NT];
        list_entries(ctx, z, zl, ls);
        double zs = check_bounds(policy, orig, r, n, kind, bound, ls);
        if (zero_share) *zero_share = zs;
        if (zlen) *zlen = zl;
        free(r);
        free(r2);
    }
    ckpz_free(z);
    ckpz_free(z2);
}

/* predict callback: counts tensors predicted lossy */
static int count_lossy(void *opaque, const ckpz_prediction *t)
{
    *(int *)opaque += t->lossy;
    return 0;
}

/* Params for a raw FP32 dump of the given shape (ndim 0: none). */
static void raw_f32(ckpz_params *p, uint32_t ndim, const uint64_t *shape)
{
    ckpz_params_init(p);
    p->format = CKPZ_INPUT_RAW;
    p->raw_dtype = CKPZ_DTYPE_F32;
    p->raw_ndim = ndim;
    p->raw_shape = shape;
}

/* A raw dump given its shape (ckpz_params.raw_shape, --shape) is a tensor of that shape
 * and takes lossy coding as the same tensor in a safetensors file does; without a
 * shape it is one dimension and stays exact. The size must match the shape (known:
 * at once; unknown, streaming: at the end), and a shape for a non-raw format, without
 * an element type or with a zero dimension is a parameter error. */
static void test_raw_shape(ckpz_ctx *ctx)
{
    enum { R = 256, C = 80 }; /* more than the first 64 KiB the readers see: streamed, the size shows at the end */
    float *w = malloc(R * C * sizeof *w);
    for (size_t i = 0; i < R * C; i++) w[i] = (float)(rng_normal() * 0.02);
    uint64_t shape[2] = {R, C};
    const char *policy = "* abs 1e-3\n";
    size_t sizes[2] = {0, 0};
    for (int shaped = 0; shaped < 2; shaped++) {
        ckpz_params p;
        raw_f32(&p, shaped ? 2 : 0, shaped ? shape : NULL);
        p.policy = policy;
        void *z = NULL;
        size_t zl = 0;
        ckpz_error e = ckpz_compress_buffer(ctx, &p, w, R * C * sizeof *w, &z, &zl);
        CHECKF(e == CKPZ_OK, "raw shape %d: %s", shaped, ckpz_ctx_message(ctx));
        sizes[shaped] = zl;
        ckpz_mem f = mem_in(z, zl, 0);
        ckpz_archive *a = NULL;
        ckpz_entry en = {.struct_size = sizeof en};
        if (e == CKPZ_OK && ckpz_archive_open(ctx, NULL, ckpz_mem_pread, &f, zl, &a) == CKPZ_OK &&
            ckpz_archive_entry(a, 0, &en) == CKPZ_OK) {
            CHECK(en.dtype == CKPZ_DTYPE_F32 && en.lossy == shaped);
            CHECK(shaped ? en.ndim == 2 && en.shape[0] == R && en.shape[1] == C : en.ndim == 1);
            CHECK(!shaped || en.max_error <= 1e-3);
        } else {
            CHECKF(0, "raw shape %d: archive: %s", shaped, ckpz_ctx_message(ctx));
        }
        ckpz_archive_close(a);
        ckpz_free(z);
        /* the predictor takes the shape too */
        ckpz_predict_params pp;
        ckpz_predict_params_init(&pp);
        pp.format = CKPZ_INPUT_RAW;
        pp.raw_dtype = CKPZ_DTYPE_F32;
        pp.raw_ndim = p.raw_ndim;
        pp.raw_shape = p.raw_shape;
        pp.policy = policy;
        int lossy = 0;
        ckpz_mem in = mem_in(w, R * C * sizeof *w, 0);
        e = ckpz_predict_file(ctx, &pp, ckpz_mem_pread, &in, in.size, count_lossy, &lossy, NULL);
        CHECKF(e == CKPZ_OK && lossy == shaped, "predict, raw shape %d: %d lossy, %s", shaped, lossy,
               ckpz_ctx_message(ctx));
    }
    CHECK(sizes[1] < sizes[0] / 2);

    /* the size disagrees with the shape */
    uint64_t wrong[2] = {R, C + 1};
    ckpz_params p;
    raw_f32(&p, 2, wrong);
    void *z = NULL;
    size_t zl = 0;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, w, R * C * sizeof *w, &z, &zl);
    CHECKF(e == CKPZ_ERR_INPUT && strstr(ckpz_ctx_message(ctx), "not a f32 tensor of shape 256x81"), "%d %s", e,
           ckpz_ctx_message(ctx));
    ckpz_free(z);
    for (int longer = 0; longer < 2; longer++) { /* streaming, size unknown: found at the end */
        ckpz_mem r = mem_in(w, R * C * sizeof *w - (longer ? 0 : 8), 1000);
        uint8_t *out = malloc(1 << 20);
        ckpz_mem o = mem_out(out, 1 << 20);
        p.raw_shape = longer ? shape : wrong;
        if (longer) r.size = R * C * sizeof *w, shape[0] = R - 1;
        e = ckpz_compress_stream(ctx, &p, ckpz_mem_read, &r, CKPZ_SIZE_UNKNOWN, ckpz_mem_write, &o, NULL);
        CHECKF(e == CKPZ_ERR_INPUT && strstr(ckpz_ctx_message(ctx), "bytes are not a f32 tensor of shape"),
               "stream %d: %d %s", longer, e, ckpz_ctx_message(ctx));
        shape[0] = R;
        free(out);
    }
    /* the same size streamed: fine */
    {
        ckpz_mem r = mem_in(w, R * C * sizeof *w, 1000);
        uint8_t *out = malloc(1 << 20);
        ckpz_mem o = mem_out(out, 1 << 20);
        p.raw_shape = shape;
        e = ckpz_compress_stream(ctx, &p, ckpz_mem_read, &r, CKPZ_SIZE_UNKNOWN, ckpz_mem_write, &o, NULL);
        CHECKF(e == CKPZ_OK, "stream: %s", ckpz_ctx_message(ctx));
        free(out);
    }
    /* parameters */
    uint64_t zero[2] = {R, 0};
    struct {
        ckpz_input_format f;
        ckpz_dtype t;
        const uint64_t *shape;
    } bad[] = {{CKPZ_INPUT_SAFETENSORS, CKPZ_DTYPE_F32, shape},
               {CKPZ_INPUT_RAW, CKPZ_DTYPE_NONE, shape},
               {CKPZ_INPUT_RAW, CKPZ_DTYPE_F32, zero},
               {CKPZ_INPUT_RAW, CKPZ_DTYPE_F32, NULL}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        p.format = bad[k].f;
        p.raw_dtype = bad[k].t;
        p.raw_shape = bad[k].shape;
        z = NULL;
        e = ckpz_compress_buffer(ctx, &p, w, R * C * sizeof *w, &z, &zl);
        CHECKF(e == CKPZ_ERR_PARAM && strstr(ckpz_ctx_message(ctx), "raw shape"), "bad shape %zu: %d %s", k, e,
               ckpz_ctx_message(ctx));
        ckpz_free(z);
    }
    free(w);
}

/* The log grid's arithmetic as the format fixes it: det_log2 takes frexp's mantissa and
 * exponent from the bits (subnormals through frexp), and prel_pred_cached remembers
 * indices by the base value's bits; each must give exactly what the plain computation
 * gives, or files written before them restore to other values. Values repeat (a base on
 * the grid) and collide in the cache, over normal and subnormal, signed, zero and
 * non-finite bases. */
static double log2_frexp(double x)
{
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752440) {
        m *= 2;
        e--;
    }
    double s = (m - 1) / (m + 1), s2 = s * s, r = 1.0 / 25;
    for (int k = 23; k >= 1; k -= 2) r = r * s2 + 1.0 / k;
    return (double)e + 2.0 * s * r / 0.69314718055994530942;
}

static void test_grid(void)
{
    pred_cache pc;
    pred_cache_init(&pc);
    double inv = 1 / 0.0225, pool[512];
    size_t bad_log = 0, bad_pred = 0;
    for (int i = 0; i < 512; i++)
        pool[i] = (rng() & 1 ? -1 : 1) * ldexp(1 + (double)(rng() % 1000) / 1000, -(int)(rng() % 60));
    pool[0] = 0, pool[1] = -0.0, pool[2] = INFINITY, pool[3] = NAN, pool[4] = 4.9e-324, pool[5] = -2.2e-310;
    uint64_t ones = ~(uint64_t)0; /* the NaN an empty slot holds: looked up first, into an empty cache */
    memcpy(&pool[6], &ones, 8);
    CHECK(prel_pred_cached(&pc, pool[6], inv) == prel_pred(pool[6], inv));
    for (int i = 0; i < 200000; i++) {
        uint64_t u = (uint64_t)rng() << 32 | rng();
        double x;
        memcpy(&x, &u, 8);
        if (i % 3) x = pool[rng() % 512]; /* repeats: hits */
        if (i % 7 == 0) x = ldexp((double)(rng() % 100000 + 1), -1074); /* subnormal */
        double a = fabs(x);
        if (isfinite(a) && a > 0 && det_log2(a) != log2_frexp(a)) bad_log++;
        if (prel_pred_cached(&pc, x, inv) != prel_pred(x, inv)) bad_pred++;
    }
    CHECKF(bad_log == 0, "det_log2 differs from frexp's for %zu values", bad_log);
    CHECKF(bad_pred == 0, "cached grid index differs for %zu values", bad_pred);
}

/* A float entry's bytes coded as bytes against its base (CKPZ_DTYPE_NONE: the restored
 * bytes of a tiny lossy frame, chunk_encode_lossy; a group's chunk, encode.c) are decoded
 * with the entry's dtype, whose float map the decoder's diff takes (doc/format.md): a
 * chain of --lossy=auto restored every 10 steps wrote exp_avg_sq chunks of 128 values
 * that way with diff under the bytes' own map, and they did not restore ("decoded data
 * checksum mismatch"). Bytes a few above the base's, many of them 128 or more, are what
 * diff codes best; chunk_encode_as must code them so that they restore. */
static void test_bytes_of_floats(void)
{
    const size_t n = 4096;
    uint8_t *base = malloc(n), *raw = malloc(n), *frame = malloc(chunk_frame_bound(n)),
            *planes = malloc(chunk_planes_bound(n, 0)), *back = malloc(n);
    for (size_t i = 0; i < n; i++) {
        base[i] = (uint8_t)rng();
        raw[i] = (uint8_t)(base[i] + 1 + rng() % 3);
    }
    ent_ctx *ec = ent_ctx_create();
    ckpz_ctx *cx = ckpz_ctx_create();
    static const ckpz_dtype entry_dt[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16, CKPZ_DTYPE_U8};
    for (size_t k = 0; k < sizeof entry_dt / sizeof *entry_dt; k++) {
        uint32_t crc;
        size_t len = chunk_encode_as(ec, 3, CKPZ_DTYPE_NONE, entry_dt[k], 0, raw, n, base, planes, frame, &crc, NULL);
        ctr_chunk h;
        char why[128] = "";
        ckpz_error e = len ? ctr_chunk_read(cx, frame, 1u << 20, chunk_frame_bound(n), "test", &h) : CKPZ_ERR_CORRUPT;
        if (!e) e = chunk_decode(ec, &h, entry_dt[k], frame + CTR_FRAME_SIZE, base, planes, back, why, sizeof why);
        CHECKF(e == CKPZ_OK && !memcmp(back, raw, n), "bytes of a %s entry against its base: %s (%s)",
               ckpz_dtype_name(entry_dt[k]), ckpz_error_name(e), why);
        CHECKF(len < n / 2, "bytes of a %s entry against its base: %zu bytes, not coded from the base",
               ckpz_dtype_name(entry_dt[k]), len);
        /* as writers before the rule coded them (diff, the bytes' map): restored too */
        len = chunk_encode(ec, 3, CKPZ_DTYPE_NONE, 0, raw, n, base, planes, frame, &crc, NULL);
        e = len ? ctr_chunk_read(cx, frame, 1u << 20, chunk_frame_bound(n), "test", &h) : CKPZ_ERR_CORRUPT;
        CHECKF(!e && h.pred == PRED_DIFF, "the old coding of bytes: predictor %u, not diff", e ? 0 : h.pred);
        memset(back, 0, n);
        if (!e) e = chunk_decode(ec, &h, entry_dt[k], frame + CTR_FRAME_SIZE, base, planes, back, why, sizeof why);
        CHECKF(e == CKPZ_OK && !memcmp(back, raw, n), "bytes of a %s entry coded the old way: %s (%s)",
               ckpz_dtype_name(entry_dt[k]), ckpz_error_name(e), why);
    }
    ckpz_ctx_free(cx);
    ent_ctx_free(ec);
    free(base), free(raw), free(frame), free(planes), free(back);
}

/* Unbiased rounding on the log grid (ratio 1.9 at pointwise-rel 0.9): `stochastic` keeps
 * each value on average (the mean of restored / original is 1), `stochastic-log` keeps
 * log2 |x| (the mean of log2 of that ratio is 0). Each is off under the other rounding
 * (~+3.5% and ~-0.05), so each check fails with the other. F32, BF16 and Adam's v (its
 * values spread over many octaves). */
static void test_unbiased(ckpz_ctx *ctx, const uint8_t *orig, size_t n)
{
    static const char *pol[2] = {"* pointwise-rel 0.9 stochastic", "* pointwise-rel 0.9 stochastic-log"};
    static const int which[3] = {T_F32, T_BF16, T_V};
    for (int m = 0; m < 2; m++) {
        size_t zl;
        ckpz_error e;
        uint8_t *z = compress(ctx, pol[m], orig, n, NULL, 0, 1, &zl, &e);
        CHECKF(e == CKPZ_OK, "%s: %s", pol[m], ckpz_ctx_message(ctx));
        if (!z) continue;
        uint8_t *r = restore(ctx, z, zl, n, NULL, 0, 1);
        for (int w = 0; w < 3; w++) {
            const tdesc *t = &T[which[w]];
            double ratio = 0, lg = 0;
            size_t cnt = 0;
            for (size_t k = 0; k < t->rows * t->cols; k++) {
                double a = get(t, orig + t->off + k * t->es), b = get(t, r + t->off + k * t->es);
                if (!(fabs(a) >= 1e-30 && fabs(a) <= 1e3)) continue; /* zeros, tiny, huge, non-finite */
                ratio += b / a;
                lg += log2(b / a);
                cnt++;
            }
            ratio /= (double)cnt, lg /= (double)cnt;
            if (m == 0)
                CHECKF(cnt > 20000 && fabs(ratio - 1) < 0.01, "%s, %s: restored / original %.4f on average (%zu)",
                       pol[m], t->name, ratio, cnt);
            else
                CHECKF(cnt > 20000 && fabs(lg) < 0.015, "%s, %s: log2 of restored / original %.4f on average (%zu)",
                       pol[m], t->name, lg, cnt);
        }
        free(r);
        ckpz_free(z);
    }
}

int main(void)
{
    test_grid();
    test_bytes_of_floats();
    size_t n;
    uint8_t *orig = make_file(&n);
    ckpz_ctx *ctx = ckpz_ctx_create();
    double zs;
    size_t zabs = 0, zprune = 0;

    run_mode(ctx, orig, n, "* abs 1e-3", B_ABS, 1e-3, NULL, &zabs);
    run_mode(ctx, orig, n, "* abs 1e-6", B_ABS, 1e-6, NULL, NULL);
    run_mode(ctx, orig, n, "* rel 1e-2", B_REL, 1e-2, NULL, NULL);
    run_mode(ctx, orig, n, "* pointwise-rel 0.05", B_PREL, 0.05, &zs, NULL);
    CHECKF(zs == 0, "pointwise-rel zeroed %g of the values", zs);
    run_mode(ctx, orig, n, "* pointwise-rel 0.0001", B_PREL, 0.0001, NULL, NULL);
    run_mode(ctx, orig, n, "* pointwise-rel 0.5 stochastic", B_PREL, 0.5, &zs, NULL);
    CHECKF(zs == 0, "pointwise-rel stochastic zeroed %g of the values", zs);
    run_mode(ctx, orig, n, "* pointwise-rel 0.9 stochastic-log", B_PREL, 0.9, &zs, NULL);
    CHECKF(zs == 0, "pointwise-rel stochastic-log zeroed %g of the values", zs);
    test_unbiased(ctx, orig, n);
    run_mode(ctx, orig, n, "* int8", B_AFFINE, 0, NULL, NULL);
    run_mode(ctx, orig, n, "* int8 asym pct 99.9", B_CLIPPED, 0, NULL, NULL);
    run_mode(ctx, orig, n, "* bits 8 block 64", B_AFFINE, 0, NULL, NULL);
    run_mode(ctx, orig, n, "* bits 16 block 256 sym", B_AFFINE, 0, NULL, NULL);
    run_mode(ctx, orig, n, "* bits 8 block 64 delta", B_AFFINE, 0, NULL, NULL);
    run_mode(ctx, orig, n, "* int8 delta prune 0.2", B_CLIPPED, 0, NULL, NULL);
    /* rules: first match wins, comments, and a rule per tensor family */
    run_mode(ctx, orig, n, "# families\n*.exp_avg_sq pointwise-rel 0.01  # v\n\n* abs 1e-3\n", B_ABS, 1e-3, NULL, NULL);
    /* pruning: about the asked share becomes zero, the rest within the bound */
    run_mode(ctx, orig, n, "* abs 1e-3 prune 0.3", B_CLIPPED, 0, &zs, &zprune);
    CHECKF(zs > 0.27 && zs < 0.33, "prune 0.3 zeroed %.3f of the values", zs);
    CHECKF(zprune < zabs, "pruning did not make the file smaller (%zu vs %zu)", zprune, zabs);

    /* pruning on the log grid: zeros where asked, but never in Adam's second moment */
    {
        size_t zl;
        ckpz_error e;
        uint8_t *z = compress(ctx, "* pointwise-rel 0.1 prune 0.5", orig, n, NULL, 0, 1, &zl, &e);
        CHECK(e == CKPZ_OK);
        uint8_t *r = z ? restore(ctx, z, zl, n, NULL, 0, 1) : NULL;
        size_t zeroed = 0, bad = 0, nw = T[T_F32].rows * T[T_F32].cols, nv = T[T_V].rows * T[T_V].cols;
        for (size_t k = 0; r && k < nw; k++) {
            double a = get(&T[T_F32], orig + T[T_F32].off + 4 * k), b = get(&T[T_F32], r + T[T_F32].off + 4 * k);
            zeroed += isfinite(a) && a != 0 && b == 0;
        }
        for (size_t k = 0; r && k < nv; k++) {
            double a = get(&T[T_V], orig + T[T_V].off + 4 * k), b = get(&T[T_V], r + T[T_V].off + 4 * k);
            bad += (a > 0 && !(b > 0)) || fabs(b - a) > 0.1 * fabs(a);
        }
        CHECKF(zeroed > nw * 45 / 100 && zeroed < nw * 55 / 100, "prune 0.5 on the log grid zeroed %zu of %zu", zeroed,
               nw);
        CHECKF(bad == 0, "exp_avg_sq: %zu values outside 10%% or not positive", bad);
        free(r);
        ckpz_free(z);
    }

    /* max-mae: a cap no lossy coding meets leaves every tensor restored exactly */
    {
        size_t zl;
        ckpz_error e;
        uint8_t *z = compress(ctx, "* bits 8 max-mae 1e-15\n", orig, n, NULL, 0, 1, &zl, &e);
        CHECK(e == CKPZ_OK);
        uint8_t *r = z ? restore(ctx, z, zl, n, NULL, 0, 1) : NULL;
        CHECK(r && !memcmp(r, orig, n));
        free(r);
        ckpz_free(z);
    }

    /* closed loop: the next checkpoint coded against the restored previous one */
    {
        size_t zl1, zl2, zl3;
        ckpz_error e;
        uint8_t *z1 = compress(ctx, "* abs 1e-4", orig, n, NULL, 0, 1, &zl1, &e);
        uint8_t *r1 = restore(ctx, z1, zl1, n, NULL, 0, 1);
        uint8_t *next = malloc(n), *tiny = malloc(n);
        memcpy(next, orig, n);
        memcpy(tiny, r1, n);
        for (int i = 0; i < NT; i++) {
            if (!T[i].lossy_ok) continue;
            for (size_t k = 0; k < T[i].rows * T[i].cols; k++) {
                uint8_t *p = next + T[i].off + k * T[i].es, *q = tiny + T[i].off + k * T[i].es;
                double v = get(&T[i], p), w = get(&T[i], q);
                if (isfinite(v) && fabs(v) < 1) put(&T[i], p, v + rng_normal() * 1e-3);
                if (isfinite(w) && fabs(w) < 1 && fabs(w) > 1e-3 && i != T_V) put(&T[i], q, w * (1 + 1e-5));
            }
        }
        uint8_t *z2 = compress(ctx, "* abs 1e-4", next, n, r1, n, 1, &zl2, &e);
        CHECKF(e == CKPZ_OK, "closed loop: %s", ckpz_ctx_message(ctx));
        uint8_t *r2 = restore(ctx, z2, zl2, n, r1, n, 2);
        listed ls[NT];
        list_entries(ctx, z2, zl2, ls);
        check_bounds("closed loop", next, r2, n, B_ABS, 1e-4, ls);
        CHECKF(ls[T_F32].changed > 60000 && ls[T_F32].frozen < ls[T_F32].changed / 10,
               "closed loop: %llu changed, %llu frozen", (unsigned long long)ls[T_F32].changed,
               (unsigned long long)ls[T_F32].frozen);
        /* changes far below the bound: restored as the base's values, reported frozen */
        uint8_t *z3 = compress(ctx, "* abs 1e-3", tiny, n, r1, n, 1, &zl3, &e);
        list_entries(ctx, z3, zl3, ls);
        CHECKF(ls[T_F32].changed > 50000 && ls[T_F32].frozen > ls[T_F32].changed * 9 / 10,
               "frozen: %llu changed, %llu frozen", (unsigned long long)ls[T_F32].changed,
               (unsigned long long)ls[T_F32].frozen);
        CHECK(zl3 < zl2);
        /* a change of a quarter of the bound on every weight: deterministic rounding
         * erases it, unbiased rounding keeps it on average, within the bound */
        {
            size_t zl4, zl5, nw = T[T_F32].rows * T[T_F32].cols;
            uint8_t *quarter = malloc(n);
            memcpy(quarter, r1, n);
            for (size_t k = 0; k < nw; k++) {
                uint8_t *p = quarter + T[T_F32].off + 4 * k;
                double v = get(&T[T_F32], p);
                if (isfinite(v) && fabs(v) < 1) put(&T[T_F32], p, v + 2.5e-4);
            }
            uint8_t *z4 = compress(ctx, "* abs 1e-3 stochastic", quarter, n, r1, n, 1, &zl4, &e);
            uint8_t *z5 = compress(ctx, "* abs 1e-3", quarter, n, r1, n, 1, &zl5, &e);
            CHECKF(e == CKPZ_OK, "stochastic: %s", ckpz_ctx_message(ctx));
            uint8_t *r4 = restore(ctx, z4, zl4, n, r1, n, 1), *r5 = restore(ctx, z5, zl5, n, r1, n, 1);
            list_entries(ctx, z4, zl4, ls);
            check_bounds("stochastic", quarter, r4, n, B_ABS, 1e-3, ls);
            double want = 0, got = 0, det = 0;
            for (size_t k = 0; k < nw; k++) {
                size_t o = T[T_F32].off + 4 * k;
                double a = get(&T[T_F32], quarter + o), b = get(&T[T_F32], r1 + o);
                if (!isfinite(a) || fabs(a) >= 1) continue;
                want += a - b;
                got += get(&T[T_F32], r4 + o) - b;
                det += get(&T[T_F32], r5 + o) - b;
            }
            CHECKF(want > 10 && fabs(got - want) < 0.03 * want && fabs(det) < 0.01 * want,
                   "stochastic: changes add up to %g, restored %g (deterministic %g)", want, got, det);
            free(r4);
            free(r5);
            free(quarter);
            ckpz_free(z4);
            ckpz_free(z5);
        }
        /* change-rel: the bound is R x the RMS of each tensor's change; without a base the
         * tensors stay exact */
        {
            size_t zl7, nw = T[T_F32].rows * T[T_F32].cols, bad = 0, cnt = 0;
            uint8_t *z7 = compress(ctx, "* change-rel 0.5", next, n, r1, n, 1, &zl7, &e);
            CHECKF(e == CKPZ_OK, "change-rel: %s", ckpz_ctx_message(ctx));
            uint8_t *r7 = restore(ctx, z7, zl7, n, r1, n, 1);
            double sq = 0;
            for (size_t k = 0; k < nw; k++) {
                size_t o = T[T_F32].off + 4 * k;
                double d = get(&T[T_F32], next + o) - get(&T[T_F32], r1 + o);
                if (isfinite(d)) sq += d * d, cnt++;
            }
            double lim = 0.5 * sqrt(sq / (double)cnt);
            for (size_t k = 0; k < nw; k++) {
                size_t o = T[T_F32].off + 4 * k;
                double a = get(&T[T_F32], next + o), b = get(&T[T_F32], r7 + o);
                bad += isfinite(a) && !(fabs(b - a) <= lim);
            }
            CHECKF(bad == 0 && lim > 1e-4, "change-rel: %zu elements beyond %g", bad, lim);
            listed l7[NT];
            list_entries(ctx, z7, zl7, l7);
            CHECK(l7[T_F32].lossy && fabs(l7[T_F32].max_error) <= lim);
            size_t zl8;
            uint8_t *z8 = compress(ctx, "* change-rel 0.5", next, n, NULL, 0, 1, &zl8, &e);
            uint8_t *r8 = restore(ctx, z8, zl8, n, NULL, 0, 1);
            CHECKF(!memcmp(r8, next, n), "change-rel without a base is not exact");
            free(r7);
            free(r8);
            ckpz_free(z7);
            ckpz_free(z8);
        }
        /* no-base: coded stand-alone in a file with a base; pruning drops magnitudes */
        {
            size_t zl6, nw = T[T_F32].rows * T[T_F32].cols, zeroed = 0, bad = 0;
            uint8_t *z6 = compress(ctx, "* abs 1e-4 prune 0.3 no-base", next, n, r1, n, 1, &zl6, &e);
            CHECKF(e == CKPZ_OK, "no-base: %s", ckpz_ctx_message(ctx));
            uint8_t *r6 = restore(ctx, z6, zl6, n, r1, n, 1);
            for (size_t k = 0; k < nw; k++) {
                size_t o = T[T_F32].off + 4 * k;
                double a = get(&T[T_F32], next + o), b = get(&T[T_F32], r6 + o);
                if (!isfinite(a)) continue;
                zeroed += b == 0 && a != 0;
                bad += b != 0 && fabs(b - a) > 1e-4;
            }
            CHECKF(zeroed > nw * 27 / 100 && zeroed < nw * 33 / 100 && bad == 0, "no-base: %zu of %zu zeroed, %zu bad",
                   zeroed, nw, bad);
            free(r6);
            ckpz_free(z6);
        }
        /* the wrong base is refused before decoding */
        ckpz_params p;
        ckpz_params_init(&p);
        p.base = orig;
        p.base_size = n;
        uint8_t *out = malloc(n);
        CHECK(ckpz_decompress_buffer(ctx, &p, z2, zl2, out, n) == CKPZ_ERR_BASE);
        free(out);
        free(r1);
        free(r2);
        free(next);
        free(tiny);
        ckpz_free(z1);
        ckpz_free(z2);
        ckpz_free(z3);
    }

    /* Levels per tensor: "* lossless level L" writes the bytes the file level L writes (a
     * lossless file, version 1); a rule's level holds for the tensors the safe defaults
     * keep exact; a mixed policy is neither uniform file. */
    {
        size_t zl[4];
        ckpz_error e[4];
        uint8_t *z[4];
        z[0] = compress(ctx, "* lossless level 1", orig, n, NULL, 0, 1, &zl[0], &e[0]);
        z[1] = compress(ctx, "* lossless level 9", orig, n, NULL, 0, 1, &zl[1], &e[1]);
        z[2] = compress(ctx, "w.* lossless level 9\n* lossless level 1", orig, n, NULL, 0, 1, &zl[2], &e[2]);
        file_level = 9;
        z[3] = compress(ctx, NULL, orig, n, NULL, 0, 1, &zl[3], &e[3]);
        file_level = 3;
        CHECK(e[0] == CKPZ_OK && e[1] == CKPZ_OK && e[2] == CKPZ_OK && e[3] == CKPZ_OK);
        if (e[0] == CKPZ_OK && e[1] == CKPZ_OK && e[2] == CKPZ_OK && e[3] == CKPZ_OK) {
            CHECKF(zl[1] == zl[3] && !memcmp(z[1], z[3], zl[1]), "policy level 9 differs from file level 9");
            CHECKF(zl[1] < zl[0], "level 9 (%zu) not below level 1 (%zu)", zl[1], zl[0]);
            CHECKF(zl[2] != zl[0] && zl[2] != zl[1], "mixed levels: %zu vs %zu and %zu", zl[2], zl[0], zl[1]);
            for (int k = 0; k < 3; k++) {
                CHECKF(z[k][8] == 5 && !(z[k][10] & 2), "a policy of levels wrote version %u flags %u", z[k][8],
                       z[k][10]); /* feature bit 1 (lossy) clear */
                uint8_t *r = restore(ctx, z[k], zl[k], n, NULL, 0, 1);
                CHECKF(!memcmp(r, orig, n), "policy of levels %d: not restored exactly", k);
                free(r);
            }
        }
        /* the bias's rule sets its level though the tensor stays exact */
        size_t za, zb;
        uint8_t *a = compress(ctx, "layer.bias lossless level 9\n* abs 1e-3 level 1", orig, n, NULL, 0, 1, &za, &e[0]);
        uint8_t *b = compress(ctx, "layer.bias lossless level 1\n* abs 1e-3 level 1", orig, n, NULL, 0, 1, &zb, &e[1]);
        CHECK(e[0] == CKPZ_OK && e[1] == CKPZ_OK && za != zb);
        ckpz_free(a);
        ckpz_free(b);
        for (int k = 0; k < 4; k++) ckpz_free(z[k]);
    }

    /* policy errors name their line */
    {
        static const struct {
            const char *policy, *msg;
        } bad[] = {
            {"* foo 1", "policy line 1"},
            {"# ok\n* abs\n", "policy line 2"},
            {"* abs -1", "bound"},
            {"* pointwise-rel 1.5", "< 1"},
            {"* bits 12", "8 or 16"},
            {"* int8 block 8", "block"},
            {"* abs 1e-3 sym", "unexpected"},
            {"* int8 stochastic", "unexpected"},
            {"*", "no mode"},
            {"* lossless level 0", "level"},
            {"* abs 1e-3 level 10", "level"},
            {"* lossless level 2.5", "level"},
        };
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            size_t zl;
            ckpz_error e;
            uint8_t *z = compress(ctx, bad[k].policy, orig, n, NULL, 0, 1, &zl, &e);
            CHECKF(e == CKPZ_ERR_PARAM && strstr(ckpz_ctx_message(ctx), bad[k].msg), "'%s': %d %s", bad[k].policy, e,
                   ckpz_ctx_message(ctx));
            ckpz_free(z);
        }
    }

    test_raw_shape(ctx);
    ckpz_ctx_free(ctx);
    free(orig);
    if (test_failures) fprintf(stderr, "%d checks failed\n", test_failures);
    return test_failures != 0;
}
