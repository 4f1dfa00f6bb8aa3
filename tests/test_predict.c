/* test_predict.c — unit tests of the delta predictors: the residuals against a plain
 * reference of the documented formulas on every width (special floats, integer
 * extremes, wraparound), exact inverse in place and not, the order of the float map,
 * one-ulp steps, the choice between stand-alone and delta coding, and the transform
 * each residual is split with, and the escape transform against a plain reference
 * (vector and portable loops), with its two corruption checks. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "testutil.h"
#include "transforms/escape.h"
#include "transforms/planes.h"
#include "transforms/predict.h"

/* ---- reference: the formulas of predict.h, one element at a time ----------------- */
static uint64_t width_mask(unsigned esize) { return esize == 8 ? ~0ull : (1ull << (8 * esize)) - 1; }

static uint64_t ref_m(uint64_t u, unsigned esize, int flt)
{
    uint64_t sign = 1ull << (8 * esize - 1);
    if (!flt) return u;
    return (u & sign ? ~u : u ^ sign) & width_mask(esize);
}

static uint64_t ref_diff(uint64_t x, uint64_t b, unsigned esize, int flt)
{
    uint64_t mask = width_mask(esize), sign = 1ull << (8 * esize - 1);
    uint64_t d = (ref_m(x, esize, flt) - ref_m(b, esize, flt)) & mask;
    uint64_t s = d & sign ? mask : 0; /* d >> (bits-1), arithmetic */
    return ((d << 1) ^ s) & mask;
}

static uint64_t load_le(const uint8_t *p, unsigned esize)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < esize; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static void store_le(uint8_t *p, uint64_t v, unsigned esize)
{
    for (unsigned k = 0; k < esize; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* Bit patterns worth testing at each width: zeros, the sign bit, integer extremes,
 * denormals, infinities and NaNs of the formats of that width. */
static uint64_t special(unsigned esize)
{
    static const uint64_t s1[] = {0x00, 0x80, 0x7f, 0xff, 0x01, 0x81, 0x7e, 0xfe, 0x7c, 0xfc, 0x78, 0xf8};
    static const uint64_t s2[] = {0x0000, 0x8000, 0x7fff, 0xffff, 0x0001, 0x8001, 0x7f80, 0xff80,
                                  0x7fc0, 0x7c00, 0xfc00, 0x7e00, 0x03ff, 0x007f, 0x3c00, 0xbf80};
    static const uint64_t s4[] = {0,          0x80000000, 0x7fffffff, 0xffffffff, 1,          0x80000001,
                                  0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x007fffff,
                                  0x807fffff, 0x3f800000, 0xbf800000, 0x00800000};
    static const uint64_t s8[] = {0,
                                  0x8000000000000000ull,
                                  0x7fffffffffffffffull,
                                  ~0ull,
                                  1,
                                  0x8000000000000001ull,
                                  0x7ff0000000000000ull,
                                  0xfff0000000000000ull,
                                  0x7ff8000000000000ull,
                                  0x7ff0000000000001ull,
                                  0x000fffffffffffffull,
                                  0x3ff0000000000000ull,
                                  0xbff0000000000000ull,
                                  0x0010000000000000ull};
    switch (esize) {
    case 1: return s1[rng() % (sizeof s1 / sizeof *s1)];
    case 2: return s2[rng() % (sizeof s2 / sizeof *s2)];
    case 4: return s4[rng() % (sizeof s4 / sizeof *s4)];
    default: return s8[rng() % (sizeof s8 / sizeof *s8)];
    }
}

/* x and b of n bytes: random patterns, special values, and pairs a few units apart
 * (which wrap around at the extremes and cross the sign). */
static void fill_pair(uint8_t *x, uint8_t *b, size_t n, unsigned esize)
{
    uint64_t mask = width_mask(esize);
    for (size_t i = 0; i + esize <= n; i += esize) {
        uint64_t bv, xv;
        switch (rng() % 4) {
        case 0: bv = rng(), xv = rng(); break;
        case 1: bv = special(esize), xv = special(esize); break;
        case 2: bv = special(esize), xv = bv + (rng() % 7) - 3; break;
        default: bv = rng(), xv = bv + (rng() % 5) - 2; break;
        }
        store_le(b + i, bv & mask, esize);
        store_le(x + i, xv & mask, esize);
    }
    for (size_t i = n - n % esize; i < n; i++) x[i] = (uint8_t)rng(), b[i] = (uint8_t)rng();
}

static void test_reference(void)
{
    /* sizes: tiny, not a multiple of the 16/32/64-byte steps, and with a partial element */
    const size_t sizes[] = {0, 1, 8, 24, 31, 32, 33, 63, 64, 65, 100, 1000, 4099, 65536 + 40};
    const unsigned widths[] = {1, 2, 4, 8};
    size_t cap = 65536 + 64;
    uint8_t *x = malloc(cap), *b = malloc(cap), *r = malloc(cap), *y = malloc(cap);
    static const char *const isa[] = {"scalar", "avx2", "avx512"}; /* every inverse loop */
    for (unsigned wl = 0; wl < 4 * 3; wl++) {
        unsigned es = widths[wl % 4];
        force_isa(isa[wl / 4]);
        for (int flt = 0; flt <= 1; flt++) {
            for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
                size_t n = sizes[si];
                fill_pair(x, b, n, es);
                /* DIFF against the reference; the partial element is bytes as integers */
                pred_forward(PRED_DIFF, es, flt, x, b, n, r);
                int ok = 1;
                size_t whole = n - n % es;
                for (size_t i = 0; i < whole; i += es)
                    ok &= load_le(r + i, es) == ref_diff(load_le(x + i, es), load_le(b + i, es), es, flt);
                for (size_t i = whole; i < n; i++) ok &= r[i] == (uint8_t)ref_diff(x[i], b[i], 1, 0);
                CHECKF(ok, "diff reference esize %u float %d n %zu", es, flt, n);
                /* XOR */
                pred_forward(PRED_XOR, es, flt, x, b, n, r);
                ok = 1;
                for (size_t i = 0; i < n; i++) ok &= r[i] == (x[i] ^ b[i]);
                CHECKF(ok, "xor reference esize %u n %zu", es, n);
                /* round trips, out of place and in place, for every predictor */
                for (uint8_t p = PRED_NONE; p < PRED_COPY; p++) {
                    memset(r, 0x5a, n);
                    memset(y, 0xa5, n);
                    pred_forward(p, es, flt, x, b, n, r);
                    pred_inverse(p, es, flt, r, b, n, y);
                    CHECKF(!memcmp(x, y, n), "round trip %s esize %u float %d n %zu at %s", pred_name(p), es, flt, n,
                           isa[wl / 4]);
                    memcpy(y, x, n);
                    pred_forward(p, es, flt, y, b, n, y);
                    CHECKF(!memcmp(y, r, n), "in-place forward %s esize %u n %zu", pred_name(p), es, n);
                    pred_inverse(p, es, flt, y, b, n, y);
                    CHECKF(!memcmp(x, y, n), "in-place round trip %s esize %u float %d n %zu at %s", pred_name(p), es,
                           flt, n, isa[wl / 4]);
                }
                /* against itself: DIFF and XOR are all zeros, COPY restores the base */
                pred_forward(PRED_DIFF, es, flt, x, x, n, r);
                ok = 1;
                for (size_t i = 0; i < n; i++) ok &= r[i] == 0;
                CHECKF(ok, "diff of x against itself esize %u float %d n %zu", es, flt, n);
                pred_forward(PRED_COPY, es, flt, x, x, n, r);
                memset(y, 0xa5, n);
                pred_inverse(PRED_COPY, es, flt, r, x, n, y);
                CHECK(!memcmp(x, y, n));
            }
        }
    }
    top_isa();
    free(x);
    free(b);
    free(r);
    free(y);
}

/* ---- the float map keeps order ---------------------------------------------------- */
/* Residuals of sorted values against +0.0: unzigzag gives M(v) - M(+0.0), read as
 * signed, which must increase strictly. */
static void check_order(const uint64_t *v, size_t count, unsigned esize, const char *what)
{
    uint8_t x[64 * 8] = {0}, b[64 * 8] = {0}, r[64 * 8];
    int ref_ok = 1, lib_ok = 1;
    for (size_t i = 0; i < count; i++) {
        store_le(x + i * esize, v[i], esize);
        store_le(b + i * esize, 0, esize);
        if (i) ref_ok &= ref_m(v[i - 1], esize, 1) < ref_m(v[i], esize, 1);
    }
    pred_forward(PRED_DIFF, esize, 1, x, b, count * esize, r);
    int64_t prev = 0;
    unsigned shift = 64 - 8 * esize;
    for (size_t i = 0; i < count; i++) {
        uint64_t z = load_le(r + i * esize, esize);
        uint64_t d = (z >> 1) ^ (0 - (z & 1));
        int64_t s = (int64_t)(d << shift) >> shift; /* sign-extend to 64 bits */
        if (i) lib_ok &= prev < s;
        prev = s;
    }
    CHECKF(ref_ok, "reference map order %s", what);
    CHECKF(lib_ok, "diff order %s", what);
}

static uint64_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

static void test_order(void)
{
    float f[] = {-INFINITY, -FLT_MAX,     -1.0f,   -FLT_MIN, -FLT_TRUE_MIN, -0.0f,
                 0.0f,      FLT_TRUE_MIN, FLT_MIN, 1.0f,     FLT_MAX,       INFINITY};
    size_t nf = sizeof f / sizeof *f;
    uint64_t v[64];
    for (size_t i = 0; i < nf; i++) v[i] = f32_bits(f[i]);
    check_order(v, nf, 4, "f32");
    for (size_t i = 0; i < nf; i++) v[i] = f32_bits(f[i]) >> 16; /* the same values as bf16 */
    v[4] = 0x8001;
    v[7] = 0x0001; /* bf16 denormal minimum */
    check_order(v, nf, 2, "bf16");
    const uint64_t h[] = {0xfc00, 0xfbff, 0xbc00, 0x8400, 0x8001, 0x8000,
                          0x0000, 0x0001, 0x0400, 0x3c00, 0x7bff, 0x7c00};
    check_order(h, sizeof h / sizeof *h, 2, "f16");
    double d[] = {-INFINITY, -DBL_MAX, -1.0, -DBL_MIN, -4.9e-324, -0.0, 0.0, 4.9e-324, DBL_MIN, 1.0, DBL_MAX, INFINITY};
    for (size_t i = 0; i < nf; i++) v[i] = f64_bits(d[i]);
    check_order(v, nf, 8, "f64");
    const uint64_t e4m3[] = {0xfe, 0xb8, 0x81, 0x80, 0x00, 0x01, 0x38, 0x7e}; /* -448 -1 -min -0 +0 min 1 448 */
    check_order(e4m3, sizeof e4m3 / sizeof *e4m3, 1, "f8e4m3");
}

/* ---- one-ulp steps give residual 2 (up) or 1 (down) ------------------------------- */
static void test_steps(void)
{
    enum { N = 1000 };
    float xf[N], bf[N];
    double xd[N], bd[N];
    uint32_t r4[N];
    uint64_t r8[N];
    for (int i = 0; i < N; i++) {
        bf[i] = (float)(rng_normal() * pow(10.0, (double)(rng() % 20) - 10.0));
        if (bf[i] == 0) bf[i] = 1;
        xf[i] = nextafterf(bf[i], i & 1 ? INFINITY : -INFINITY);
        bd[i] = rng_normal() * pow(10.0, (double)(rng() % 200) - 100.0);
        if (bd[i] == 0) bd[i] = 1;
        xd[i] = nextafter(bd[i], i & 1 ? INFINITY : -INFINITY);
    }
    /* across zero: -min < -0.0 < +0.0 < +min are consecutive */
    const float zb[] = {-0.0f, 0.0f, 0.0f, -0.0f, -FLT_TRUE_MIN, FLT_TRUE_MIN};
    const float zx[] = {0.0f, -0.0f, FLT_TRUE_MIN, -FLT_TRUE_MIN, -0.0f, 0.0f};
    for (int i = 0; i < 6; i++) bf[i] = zb[i], xf[i] = zx[i];
    pred_forward(PRED_DIFF, 4, 1, (const uint8_t *)xf, (const uint8_t *)bf, sizeof xf, (uint8_t *)r4);
    pred_forward(PRED_DIFF, 8, 1, (const uint8_t *)xd, (const uint8_t *)bd, sizeof xd, (uint8_t *)r8);
    int ok4 = 1, ok8 = 1;
    for (int i = 0; i < N; i++) {
        uint64_t want = i < 6 ? (i % 2 ? 1 : 2) : (i & 1 ? 2 : 1);
        ok4 &= r4[i] == want;
        ok8 &= r8[i] == (uint64_t)(i & 1 ? 2 : 1);
    }
    CHECK(ok4);
    CHECK(ok8);
    /* bf16 and f8: one step away from zero on either sign */
    uint16_t xb[256], bb[256], rb[256];
    uint8_t x8[128], b8[128], r8b[128];
    for (int i = 0; i < 256; i++) {
        uint16_t mag = (uint16_t)(rng() % 0x7f7f);
        uint16_t sign = i & 1 ? 0x8000 : 0;
        bb[i] = sign | mag;
        xb[i] = sign | (uint16_t)(mag + 1); /* larger magnitude: up if positive, down if negative */
    }
    for (int i = 0; i < 128; i++) {
        uint8_t mag = (uint8_t)(rng() % 0x7e), sign = i & 1 ? 0x80 : 0;
        b8[i] = sign | mag;
        x8[i] = sign | (uint8_t)(mag + 1);
    }
    pred_forward(PRED_DIFF, 2, 1, (const uint8_t *)xb, (const uint8_t *)bb, sizeof xb, (uint8_t *)rb);
    pred_forward(PRED_DIFF, 1, 1, x8, b8, sizeof x8, r8b);
    int okb = 1, ok1 = 1;
    for (int i = 0; i < 256; i++) okb &= rb[i] == (i & 1 ? 1 : 2);
    for (int i = 0; i < 128; i++) ok1 &= r8b[i] == (i & 1 ? 1 : 2);
    CHECK(okb);
    CHECK(ok1);
    /* integers: plain difference, zigzagged */
    int32_t xi[4] = {5, -5, INT32_MIN, INT32_MAX}, bi[4] = {3, -3, INT32_MAX, INT32_MIN};
    uint32_t ri[4];
    pred_forward(PRED_DIFF, 4, 0, (const uint8_t *)xi, (const uint8_t *)bi, sizeof xi, (uint8_t *)ri);
    CHECK(ri[0] == 4 && ri[1] == 3 && ri[2] == 2 && ri[3] == 1); /* +2, -2, +1 and -1 with wraparound */
}

/* ---- the choice ------------------------------------------------------------------- */
/* Weights of a typical layer, as f32 and as bf16 (the top half of the f32). */
static void fill_f32(float *v, size_t count)
{
    for (size_t i = 0; i < count; i++) v[i] = (float)(rng_normal() * 0.02);
}

static void fill_bf16(uint16_t *v, size_t count)
{
    for (size_t i = 0; i < count; i++) v[i] = (uint16_t)(f32_bits((float)(rng_normal() * 0.02)) >> 16);
}

static void test_choose(void)
{
    const size_t sizes[] = {1000, 1 << 20}; /* all elements sampled; windows */
    uint8_t *x = malloc(1 << 20), *b = malloc(1 << 20);
    for (int si = 0; si < 2; si++) {
        size_t n = sizes[si], nf = n / 4, nh = n / 2;
        float *xf = (float *)x, *bf = (float *)b;
        uint16_t *xh = (uint16_t *)x, *bh = (uint16_t *)b;

        /* unrelated base: stand-alone */
        fill_f32(xf, nf);
        fill_f32(bf, nf);
        CHECKF(pred_choose(CKPZ_DTYPE_F32, x, b, n, NULL, NULL) == PRED_NONE, "f32 unrelated n %zu", n);
        fill_bf16(xh, nh);
        fill_bf16(bh, nh);
        CHECKF(pred_choose(CKPZ_DTYPE_BF16, x, b, n, NULL, NULL) == PRED_NONE, "bf16 unrelated n %zu", n);
        for (size_t i = 0; i < n; i++) x[i] = (uint8_t)rng(), b[i] = (uint8_t)rng();
        CHECKF(pred_choose(CKPZ_DTYPE_F32, x, b, n, NULL, NULL) == PRED_NONE, "random bits n %zu", n);
        CHECKF(pred_choose(CKPZ_DTYPE_NONE, x, b, n, NULL, NULL) == PRED_NONE, "random bytes n %zu", n);

        /* a training step: a few ulps either way */
        fill_f32(bf, nf);
        for (size_t i = 0; i < nf; i++) {
            xf[i] = bf[i];
            for (int k = (int)(rng() % 3); k > 0; k--) xf[i] = nextafterf(xf[i], rng() & 1 ? INFINITY : -INFINITY);
        }
        CHECKF(pred_choose(CKPZ_DTYPE_F32, x, b, n, NULL, NULL) == PRED_DIFF, "f32 ulp steps n %zu", n);
        fill_bf16(bh, nh);
        for (size_t i = 0; i < nh; i++) xh[i] = (uint16_t)(bh[i] + (int)(rng() % 3) - 1);
        CHECKF(pred_choose(CKPZ_DTYPE_BF16, x, b, n, NULL, NULL) == PRED_DIFF, "bf16 ulp steps n %zu", n);

        /* the same but for a few elements: a delta predictor */
        fill_f32(bf, nf);
        memcpy(xf, bf, nf * 4);
        for (int k = 0; k < 10; k++) xf[rng() % nf] = (float)rng_normal();
        uint8_t p = pred_choose(CKPZ_DTYPE_F32, x, b, n, NULL, NULL);
        CHECKF(p == PRED_XOR || p == PRED_DIFF, "f32 nearly equal n %zu: %s", n, pred_name(p));
        memcpy(x, b, n);
        p = pred_choose(CKPZ_DTYPE_BF16, x, b, n, NULL, NULL);
        CHECKF(p == PRED_XOR || p == PRED_DIFF, "bf16 equal n %zu: %s", n, pred_name(p));

        /* the sample spans the chunk: only the first eighth is unrelated to the base */
        fill_f32(bf, nf);
        memcpy(xf, bf, nf * 4);
        fill_f32(xf, nf / 8);
        for (size_t i = nf / 8; i < nf; i++) xf[i] = nextafterf(xf[i], rng() & 1 ? INFINITY : -INFINITY);
        CHECKF(pred_choose(CKPZ_DTYPE_F32, x, b, n, NULL, NULL) == PRED_DIFF,
               "f32 steps after an unrelated start n %zu", n);

        /* integer counters that moved a little */
        int32_t *xi = (int32_t *)x, *bi = (int32_t *)b;
        for (size_t i = 0; i < nf; i++) {
            bi[i] = (int32_t)(rng() % 2000000) - 1000000;
            xi[i] = bi[i] + (int32_t)(rng() % 9) - 4;
        }
        CHECKF(pred_choose(CKPZ_DTYPE_I32, x, b, n, NULL, NULL) == PRED_DIFF, "i32 steps n %zu", n);
    }
    /* the escape transform's threshold: steps of up to s units in a bf16's last place
     * (residuals 0 .. 2s): all fit A at T = 31 (s = 5); a third would escape there but
     * nearly all fit at 63 (s = 40); steps of 60-99 up (residuals 120-198) escape
     * either way */
    const struct {
        int step, low;
        unsigned t;
    } th[] = {{5, 0, ESC_T_SMALL}, {40, 0, ESC_T_WIDE}, {-60, -1, ESC_T_SMALL}};
    for (int k = 0; k < 3; k++) {
        uint16_t *xh = (uint16_t *)x, *bh = (uint16_t *)b;
        size_t nh = (1 << 20) / 2;
        fill_bf16(bh, nh);
        for (size_t i = 0; i < nh; i++) {
            int u = bh[i] & 0x7fff, s = th[k].step;
            int d = s < 0 ? -s + (int)(rng() % 40) : (int)(rng() % (2u * (unsigned)s + 1)) - s;
            u = u + d < 0 ? 0 : u + d > 0x7f7f ? 0x7f7f : u + d; /* stay finite, keep the sign */
            xh[i] = (uint16_t)((bh[i] & 0x8000) | u);
        }
        int low = 9;
        unsigned t = 0;
        uint8_t p = pred_choose(CKPZ_DTYPE_BF16, x, b, 1 << 20, &low, &t);
        CHECKF(p == PRED_DIFF && low == th[k].low && t == th[k].t, "escape threshold for steps of %d: %s L %d T %u",
               th[k].step, pred_name(p), low, t);
        /* a small chunk (1000 elements) keeps T = 31: the wider tables would outweigh */
        t = 0;
        pred_choose(CKPZ_DTYPE_BF16, x, b, 2000, &low, &t);
        CHECKF(t == ESC_T_SMALL, "escape threshold of a small chunk, steps of %d: T %u", th[k].step, t);
    }
    /* nothing to sample */
    CHECK(pred_choose(CKPZ_DTYPE_F32, x, b, 0, NULL, NULL) == PRED_NONE);
    CHECK(pred_choose(CKPZ_DTYPE_F64, x, b, 7, NULL, NULL) == PRED_NONE);
    free(x);
    free(b);
}

/* ---- names and transforms --------------------------------------------------------- */
static void test_tables(void)
{
    CHECK(!strcmp(pred_name(PRED_NONE), "none") && !strcmp(pred_name(PRED_XOR), "xor"));
    CHECK(!strcmp(pred_name(PRED_DIFF), "diff") && !strcmp(pred_name(PRED_COPY), "copy"));
    CHECK(!strcmp(pred_name(PRED_COUNT_), "?") && !strcmp(pred_name(255), "?"));
    int floats = 0;
    for (int t = 0; t < CKPZ_DTYPE_COUNT_; t++) floats += pred_is_float((ckpz_dtype)t);
    CHECK(floats == 6);
    CHECK(pred_is_float(CKPZ_DTYPE_BF16) && pred_is_float(CKPZ_DTYPE_F8E5M2) && !pred_is_float(CKPZ_DTYPE_I16));
    CHECK(!pred_is_float(CKPZ_DTYPE_NONE) && !pred_is_float(CKPZ_DTYPE_BOOL));

    for (int t = 0; t < CKPZ_DTYPE_COUNT_; t++) {
        uint8_t xf, es, wxf, wes;
        xf_choose((ckpz_dtype)t, &wxf, &wes);
        const uint8_t same[] = {PRED_NONE, PRED_XOR, PRED_COPY};
        for (int k = 0; k < 3; k++) {
            pred_transform(same[k], (ckpz_dtype)t, &xf, &es);
            CHECKF(xf == wxf && es == wes, "transform %s dtype %d", pred_name(same[k]), t);
        }
        pred_transform(PRED_DIFF, (ckpz_dtype)t, &xf, &es);
        unsigned s = ckpz_dtype_size((ckpz_dtype)t);
        int wide = s == 2 || s == 4 || s == 8;
        CHECKF(xf == (wide ? XF_INT : XF_NONE) && es == (wide ? s : 1), "diff transform dtype %d", t);
        size_t sizes[XF_MAX_PLANES];
        CHECK(xf_plane_sizes(xf, es, 100, sizes) != 0);
    }
    uint8_t xf, es;
    pred_transform(PRED_DIFF, CKPZ_DTYPE_BF16, &xf, &es);
    CHECK(xf == XF_INT && es == 2);
    pred_transform(PRED_DIFF, CKPZ_DTYPE_F8E4M3, &xf, &es);
    CHECK(xf == XF_NONE && es == 1);
    pred_transform(PRED_XOR, CKPZ_DTYPE_F32, &xf, &es);
    CHECK(xf == XF_FLOAT && es == 4);
}

/* ---- fused residual + split ---------------------------------------------------------
 * pred_forward_split against pred_forward then xf_split, byte for byte, for every case
 * it takes (XOR with and without the float rotation, DIFF of floats and integers, 2-
 * and 4-byte elements) on lengths around its 64-element step, with a partial element;
 * the bytes past what it reports done must be untouched. With the vector loops off
 * (CKPZ_CPU=avx2) it
 * must do nothing. */
static void test_forward_split(void)
{
    const ckpz_dtype types[] = {CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16, CKPZ_DTYPE_F32, CKPZ_DTYPE_I16,
                                CKPZ_DTYPE_U32,  CKPZ_DTYPE_I32, CKPZ_DTYPE_F64, CKPZ_DTYPE_U8};
    const size_t elems[] = {0, 1, 63, 64, 65, 127, 128, 129, 500, 1000, 4096 + 3};
    size_t cap = 8 * 4100 + 8;
    uint8_t *x = malloc(cap), *b = malloc(cap), *r = malloc(cap), *ref = malloc(cap), *got = malloc(cap);
    int vector_used = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (uint8_t p = PRED_XOR; p <= PRED_DIFF; p++)
            for (size_t ei = 0; ei < sizeof elems / sizeof *elems; ei++) {
                ckpz_dtype t = types[ti];
                unsigned es = ckpz_dtype_size(t);
                int flt = pred_is_float(t);
                uint8_t xf, pes;
                pred_transform(p, t, &xf, &pes);
                size_t n = elems[ei] * es + (ei % 2 ? es - 1 : 0), count = n / pes;
                fill_pair(x, b, n, es);
                uint8_t *rp[XF_MAX_PLANES], *gp[XF_MAX_PLANES];
                for (unsigned k = 0; k < pes; k++) {
                    rp[k] = ref + k * count;
                    gp[k] = got + k * count;
                }
                pred_forward(p, pes, flt, x, b, n, r);
                if (xf != XF_NONE) xf_split(xf, pes, r, count * pes, rp);
                else memcpy(ref, r, n);
                memset(got, 0xa5, cap);
                size_t done = pred_forward_split(p, xf, pes, flt, x, b, n, gp);
                int ok = done % (64 * (size_t)pes) == 0 && done <= n;
                for (unsigned k = 0; k < pes && ok; k++) {
                    size_t d = done / pes;
                    ok = !memcmp(gp[k], rp[k], d);
                    for (size_t i = d; i < count; i++) ok &= gp[k][i] == 0xa5;
                }
                CHECKF(ok, "forward_split %s dtype %d n %zu done %zu", pred_name(p), (int)t, n, done);
                vector_used |= done > 0;
                force_isa("avx2");
                CHECKF(pred_forward_split(p, xf, pes, flt, x, b, n, gp) == 0, "vector loops off");
                top_isa();
            }
    CHECK(pred_forward_split(PRED_NONE, XF_FLOAT, 4, 1, x, b, 4096, (uint8_t *const *)&got) == 0);
    CHECK(pred_forward_split(PRED_COPY, XF_FLOAT, 4, 1, x, b, 4096, (uint8_t *const *)&got) == 0);
    printf("forward_split: vector loops %s\n", vector_used ? "tested" : "not available on this CPU");
    free(x);
    free(b);
    free(r);
    free(ref);
    free(got);
}

/* pred_forward_esc (its AVX2 and AVX-512 loops) against the two-step path (pred_forward,
 * xf_split, then the portable esc_forward) for every element size and split it takes;
 * with the vector loops off (CKPZ_CPU=scalar) it must do nothing. */
static void test_forward_esc(void)
{
    const ckpz_dtype types[] = {CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16, CKPZ_DTYPE_F32, CKPZ_DTYPE_I16, CKPZ_DTYPE_I32};
    const size_t elems[] = {0, 31, 32, 33, 63, 64, 65, 128, 1000, 4096 + 3};
    size_t cap = 4 * 4100 + 8;
    uint8_t *x = malloc(cap), *b = malloc(cap), *r = malloc(cap), *pl = malloc(cap);
    uint8_t *ra = malloc(4100), *ga = malloc(4100), *re[2], *ge[2], *gl[3];
    for (int k = 0; k < 2; k++) {
        re[k] = malloc(4100 + ESC_SLACK);
        ge[k] = malloc(4100 + ESC_SLACK);
    }
    for (int k = 0; k < 3; k++) gl[k] = malloc(4100);
    int vector_used = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        ckpz_dtype t = types[ti];
        unsigned es = ckpz_dtype_size(t);
        int flt = pred_is_float(t);
        for (unsigned L = es - 2; L < es; L++)
            for (size_t ei = 0; ei < sizeof elems / sizeof *elems; ei++) {
                size_t count = elems[ei], n = count * es, rne = 0, gne = 0;
                unsigned K = es - L;
                fill_pair(x, b, n, es);
                pred_forward(PRED_DIFF, es, flt, x, b, n, r);
                uint8_t *p[4];
                for (unsigned k = 0; k < es; k++) p[k] = pl + k * count;
                xf_split(XF_INT, (uint8_t)es, r, n, p);
                force_isa("scalar");
                esc_forward(K, ESC_T_SMALL, (const uint8_t *const *)p, count, ra, re, &rne);
                top_isa();
                for (int v = 0; v < 2; v++) { /* the AVX2 loop, then the AVX-512 one */
                    int lv = force_isa(v ? "avx512" : "avx2");
                    gne = 0;
                    size_t done = pred_forward_esc(es, flt, L, ESC_T_SMALL, x, b, n, gl, ga, ge, &gne);
                    /* the reference's escapes among the first `done` elements */
                    size_t want = 0;
                    for (size_t i = 0; i < done; i++) want += ra[i] == ESC_T_SMALL;
                    int ok = done % (lv == CPU_AVX2 ? 32 : 64) == 0 && done <= count && gne == want &&
                             !memcmp(ga, ra, done);
                    for (unsigned k = 0; ok && k < K; k++) ok = !memcmp(ge[k], re[k], gne);
                    for (unsigned k = 0; ok && k < L; k++) ok = !memcmp(gl[k], p[K + k], done);
                    CHECKF(ok, "forward_esc dtype %d L %u n %zu done %zu at %s", (int)t, L, count, done,
                           cpu_level_name(lv));
                    vector_used |= (done > 0) << v;
                }
                force_isa("scalar");
                gne = 0;
                CHECKF(pred_forward_esc(es, flt, L, ESC_T_SMALL, x, b, n, gl, ga, ge, &gne) == 0 && gne == 0,
                       "forward_esc with vector loops off");
                top_isa();
            }
    }
    printf("forward_esc: AVX2 loop %s, AVX-512 loop %s\n", vector_used & 1 ? "tested" : "not available on this CPU",
           vector_used & 2 ? "tested" : "not available on this CPU");
    for (int k = 0; k < 2; k++) {
        free(re[k]);
        free(ge[k]);
    }
    for (int k = 0; k < 3; k++) free(gl[k]);
    free(x);
    free(b);
    free(r);
    free(pl);
    free(ra);
    free(ga);
}

/* ---- escape transform ------------------------------------------------------------- */
/* K top planes of elems values h (most-significant byte first), per element from rnd:
 * mostly small, some near T, some large, some the largest K bytes hold. */
static uint64_t esc_value(unsigned K, unsigned T, uint32_t r)
{
    uint64_t top = K == 8 ? ~0ull : (1ull << (8 * K)) - 1;
    switch (r % 8) {
    case 0: return top;
    case 1: return (uint64_t)(r >> 8) & top;
    case 2: return T + (r >> 8) % 3 - 1 <= top ? T + (r >> 8) % 3 - 1 : top; /* T - 1, T, T + 1 */
    default: return (r >> 8) % (T + 1); /* small */
    }
}

static void test_escape(void)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"}; /* simd = 0, 1, 2 */
    static const unsigned Ts[] = {1, 31, 200, 255};
    static const size_t ns[] = {0, 1, 31, 32, 33, 63, 64, 65, 1000, 4099};
    size_t cap = 4099;
    uint8_t *top[4], *back[4], *e[4], *a = malloc(cap + ESC_SLACK);
    for (unsigned k = 0; k < 4; k++) {
        top[k] = malloc(cap);
        back[k] = malloc(cap);
        e[k] = malloc(cap + ESC_SLACK);
    }
    uint8_t *ra = malloc(cap), *re[4];
    for (unsigned k = 0; k < 4; k++) re[k] = malloc(cap);
    uint32_t seed = 7;
    for (unsigned K = 1; K <= 4; K++)
        for (unsigned ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
            for (unsigned ni = 0; ni < sizeof ns / sizeof *ns; ni++)
                for (int simd = 0; simd <= 2; simd++) {
                    unsigned T = Ts[ti];
                    size_t n = ns[ni], rn = 0;
                    force_isa(isa[simd]);
                    for (size_t i = 0; i < n; i++) {
                        seed = seed * 1664525u + 1013904223u;
                        uint64_t h = esc_value(K, T, seed);
                        for (unsigned k = 0; k < K; k++) top[k][i] = (uint8_t)(h >> (8 * (K - 1 - k)));
                        ra[i] = (uint8_t)(h < T ? h : T);
                        if (h >= T) {
                            for (unsigned k = 0; k < K; k++) re[k][rn] = (uint8_t)((h - T) >> (8 * (K - 1 - k)));
                            rn++;
                        }
                    }
                    size_t ne = 0;
                    esc_forward(K, T, (const uint8_t *const *)top, n, a, e, &ne);
                    int same = ne == rn && (n == 0 || memcmp(a, ra, n) == 0);
                    for (unsigned k = 0; same && k < K; k++) same = rn == 0 || memcmp(e[k], re[k], rn) == 0;
                    CHECKF(same, "escape forward K %u T %u n %zu at %s", K, T, n, isa[simd]);
                    CHECKF(esc_count(T, a, n) == (ptrdiff_t)rn, "escape count K %u T %u n %zu", K, T, n);
                    CHECKF(esc_inverse(K, T, a, (const uint8_t *const *)e, n, back) == 0,
                           "escape inverse K %u T %u n %zu at %s", K, T, n, isa[simd]);
                    same = 1;
                    for (unsigned k = 0; same && k < K; k++) same = n == 0 || memcmp(back[k], top[k], n) == 0;
                    CHECKF(same, "escape round trip K %u T %u n %zu at %s", K, T, n, isa[simd]);
                }
    /* Every byte an escape, over several windows of the vector count's byte counters (255
     * steps of 16 bytes): a counter that wrapped would lose 256 a window. */
    {
        size_t m = 3 * 4096 + 5;
        uint8_t *all = malloc(m);
        memset(all, 31, m);
        CHECKF(esc_count(31, all, m) == (ptrdiff_t)m, "escape count of %zu escapes: %td", m, esc_count(31, all, m));
        all[m - 1] = 7;
        all[4080] = 0;
        CHECK(esc_count(31, all, m) == (ptrdiff_t)m - 2);
        free(all);
    }
    /* Corruption: an A above T, and an escape that overflows its K bytes once T is added,
     * in the vector part (element 3) and the portable tail (element 99). */
    for (int simd = 0; simd <= 2; simd++) {
        force_isa(isa[simd]);
        memset(a, 0, 100);
        a[3] = 32; /* in the vector part, then in the tail */
        CHECK(esc_count(31, a, 100) == -1);
        a[3] = 31;
        a[99] = 200;
        CHECK(esc_count(31, a, 100) == -1);
        a[99] = 31;
        CHECK(esc_count(31, a, 100) == 2);
        for (size_t at = 3; at < 100; at += 96)
            for (unsigned K = 1; K <= 2; K++) {
                memset(a, 5, 100);
                a[at] = 31;
                for (unsigned k = 0; k < K; k++) e[k][0] = 0xff;
                CHECKF(esc_inverse(K, 31, a, (const uint8_t *const *)e, 100, back) == -1,
                       "escape overflow K %u at %zu at %s", K, at, isa[simd]);
                e[K - 1][0] = 0xff - 31; /* fits: the largest value K bytes hold */
                int ok = esc_inverse(K, 31, a, (const uint8_t *const *)e, 100, back) == 0;
                CHECKF(ok, "escape near the top K %u at %zu at %s", K, at, isa[simd]);
            }
    }
    top_isa();
    for (unsigned k = 0; k < 4; k++) {
        free(top[k]);
        free(back[k]);
        free(e[k]);
        free(re[k]);
    }
    free(a);
    free(ra);
}

int main(void)
{
    test_tables();
    test_forward_split();
    test_escape();
    test_forward_esc();
    test_reference();
    test_order();
    test_steps();
    test_choose();
    return test_summary("test_predict");
}
