/* quant_grid.h — the lossy grids' arithmetic, shared by the encoder (quant_encode.c),
 * which reconstructs every element as the decoder will, and the decoder (quant_decode.c):
 * elements as doubles, the log grid's own exp2 and log2, rounding, reconstruction. */
#ifndef CKPZ_QUANT_GRID_H
#define CKPZ_QUANT_GRID_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/dtype.h"
#include "ckpz.h"

/* ---- elements as doubles ------------------------------------------------------------
 * Through the dtype table (common/dtype.h); f32 and bf16, the common checkpoint dtypes,
 * also inline (dt_ld_b32, dt_st_b32: the same values) in the loops that take them. */

static inline double ld_el(ckpz_dtype t, const uint8_t *p) { return dtype_get(t)->to_double(p); }
static inline void st_el(ckpz_dtype t, uint8_t *p, double v) { dtype_get(t)->from_double(p, v); }

/* The same for the element loops, which pass a constant b32 (dtype_b32: f32 4, bf16 2,
 * inline; 0, any other type, through the table) so that each type gets its own loop.
 * st_fast returns the value stored, as ld_el would read it back. */
static inline __attribute__((always_inline)) double ld_fast(unsigned b32, ckpz_dtype t, const uint8_t *p)
{
    return b32 ? dt_ld_b32(b32, p) : ld_el(t, p);
}
static inline __attribute__((always_inline)) void put_fast(unsigned b32, ckpz_dtype t, uint8_t *p, double v)
{
    if (b32) dt_st_b32(b32, p, v);
    else st_el(t, p, v);
}
static inline __attribute__((always_inline)) double st_fast(unsigned b32, ckpz_dtype t, uint8_t *p, double v)
{
    if (b32) return dt_st_b32(b32, p, v);
    st_el(t, p, v);
    return ld_el(t, p);
}

/* A zigzag code back to its signed value: 0, 1, 2, 3 -> 0, -1, 1, -2. */
static inline int64_t unzigzag(uint64_t z) { return (int64_t)(z >> 1) ^ -(int64_t)(z & 1); }

/* ---- the log grid's own exp2 and log2 -------------------------------------------------
 * Polynomials evaluated in a fixed order with IEEE double operations only: every
 * platform computes the same bits (the build disables contraction into FMA). */

static inline double det_exp2(double t)
{
    if (t > 1100) return INFINITY;
    if (t < -1100) return 0.0;
    double k = floor(t), f = t - k; /* f in [0, 1) */
    double y = (f - 0.5) * 0.69314718055994530942; /* |y| <= 0.347 */
    /* e^y by Taylor to degree 13: the remainder is below 1e-17 relative. */
    double r = 1.0 / 6227020800.0;
    static const double inv_fact[13] = {1.0 / 479001600.0,
                                        1.0 / 39916800.0,
                                        1.0 / 3628800.0,
                                        1.0 / 362880.0,
                                        1.0 / 40320.0,
                                        1.0 / 5040.0,
                                        1.0 / 720.0,
                                        1.0 / 120.0,
                                        1.0 / 24.0,
                                        1.0 / 6.0,
                                        0.5,
                                        1.0,
                                        1.0};
    for (int i = 0; i < 13; i++) r = r * y + inv_fact[i];
    return ldexp(r * 1.41421356237309504880, (int)k);
}

static inline double det_log2(double x) /* x > 0, finite */
{
    /* frexp's m in [0.5, 1) and e from the bits (exact, and no call: the decoder takes
     * this for every element predicted from a base); subnormals through frexp itself */
    int e;
    double m;
    uint64_t u;
    memcpy(&u, &x, 8);
    unsigned be = (unsigned)(u >> 52) & 0x7ff;
    if (be) {
        e = (int)be - 1022;
        u = (u & 0x800fffffffffffffull) | ((uint64_t)1022 << 52);
        memcpy(&m, &u, 8);
    } else {
        m = frexp(x, &e);
    }
    if (m < 0.70710678118654752440) {
        m *= 2;
        e--;
    }
    double s = (m - 1) / (m + 1), s2 = s * s; /* |s| <= 0.1716 */
    /* atanh(s) = s (1 + s^2/3 + s^4/5 + ...), to s^24: remainder below 1e-20. */
    double r = 1.0 / 25;
    for (int k = 23; k >= 1; k -= 2) r = r * s2 + 1.0 / k;
    return (double)e + 2.0 * s * r / 0.69314718055994530942;
}

/* A uniform number in [0, 1) from an element's position and value (splitmix64): the
 * encoder's unbiased rounding is the same for the same input whatever the threads or
 * chunks, and differs between checkpoints (the values differ), so that an element
 * does not draw the same rounding at every step of a chain. */
static inline double uniform(uint64_t v)
{
    v += 0x9e3779b97f4a7c15ull;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    v ^= v >> 31;
    return (double)(v >> 11) * (1.0 / 9007199254740992.0);
}

/* Rounds to the nearest integer (halves up) without depending on the rounding mode,
 * clamped far outside any grid index a chunk can use. */
/* log2 for the encoder's first guess of a grid index only (the reconstruction is what
 * is checked, and a neighbour is tried when the guess misses): bit fiddling and a short
 * series, accurate to ~1e-9, far inside any grid step. */
static inline double guess_log2(double x) /* x > 0, finite */
{
    uint64_t u;
    memcpy(&u, &x, 8);
    int e = (int)((u >> 52) & 0x7ff);
    if (e == 0) return det_log2(x); /* subnormal */
    u = (u & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
    double m;
    memcpy(&m, &u, 8);
    e -= 1023;
    if (m > 1.41421356237309504880) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1) / (m + 1), s2 = s * s;
    double r = ((((1.0 / 9) * s2 + 1.0 / 7) * s2 + 1.0 / 5) * s2 + 1.0 / 3) * s2 + 1;
    return (double)e + 2.0 * s * r * 1.44269504088896340736;
}

static inline int64_t round_half_up(double v)
{
    double r = floor(v + 0.5);
    if (!(r > -4e18)) return (int64_t)-4e18; /* also NaN */
    if (r > 4e18) return (int64_t)4e18;
    return (int64_t)r;
}

/* ---- reconstruction (shared by encoder and decoder) -------------------------------- */

static inline double recon_abs(double p, int64_t q, double step) { return p + (double)q * step; }

/* exp2(k step) for the log grid, remembered: a chunk uses a few hundred distinct k, and
 * det_exp2 costs tens of operations. Direct-mapped on k's low bits. */
#define EXP_CACHE 1024
typedef struct {
    int64_t key[EXP_CACHE];
    double val[EXP_CACHE];
} exp_cache;

static inline void exp_cache_init(exp_cache *c)
{
    for (int i = 0; i < EXP_CACHE; i++) c->key[i] = INT64_MIN;
}

static inline double recon_prel(exp_cache *c, int64_t q, double step, int neg)
{
    unsigned h = (unsigned)q & (EXP_CACHE - 1);
    if (c->key[h] != q) {
        c->key[h] = q;
        c->val[h] = det_exp2((double)q * step);
    }
    double m = c->val[h];
    return neg ? -m : m;
}

/* Prediction on the log grid from the base's element: the index of the base's value
 * (0 where it has none). */
static inline int64_t prel_pred(double b, double inv_step)
{
    if (!isfinite(b) || b == 0) return 0;
    return round_half_up(det_log2(fabs(b)) * inv_step);
}

/* prel_pred remembered by the base element's bits: a base that was itself restored on
 * a log grid (a chain's exp_avg_sq) holds a few hundred distinct values a chunk, and
 * det_log2 costs tens of dependent operations; the same index either way. Direct-mapped
 * on a hash of the bits. An empty slot holds all-ones bits, a NaN (an f64 base may hold
 * it), with index 0, which is prel_pred's for any NaN: a lookup of it is right too. */
#define PRED_CACHE 1024
typedef struct {
    uint64_t key[PRED_CACHE];
    int64_t val[PRED_CACHE];
} pred_cache;

static inline void pred_cache_init(pred_cache *c)
{
    memset(c->key, 0xff, sizeof c->key);
    memset(c->val, 0, sizeof c->val);
}

static inline int64_t prel_pred_cached(pred_cache *c, double b, double inv_step)
{
    uint64_t u;
    memcpy(&u, &b, 8);
    unsigned h = (unsigned)((u * 0x9E3779B97F4A7C15ull) >> 54) & (PRED_CACHE - 1);
    if (c->key[h] != u) {
        c->key[h] = u;
        c->val[h] = prel_pred(b, inv_step);
    }
    return c->val[h];
}

static inline double recon_affine(double p, float o, float s, uint32_t code, int sym, uint32_t half)
{
    double r = sym ? (double)s * ((double)code - (double)half) : (double)o + (double)s * (double)code;
    return p + r;
}

/* The affine grid's prediction of element i: with a column-wise delta, the restored
 * value one row up in the same chunk (0 in the chunk's first row); else the base's
 * element; 0 when that is missing or not finite. */
static inline double affine_pred(ckpz_dtype dt, const uint8_t *base, const uint8_t *restored, size_t row, size_t i)
{
    unsigned es = ckpz_dtype_size(dt);
    double p = row ? (i >= row ? ld_el(dt, restored + (i - row) * es) : 0) : base ? ld_el(dt, base + i * es) : 0;
    return isfinite(p) ? p : 0;
}

/* Ascending order of doubles, for qsort (percentiles, pruning thresholds). */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
