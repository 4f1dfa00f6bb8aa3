/* quant.c — see quant.h.
 *
 * The encoder works in two passes over a chunk. The first turns each element into an
 * integer q on its grid, reconstructs it exactly as the decoder will (same double
 * arithmetic, same rounding to the dtype) and checks the bound; elements that are not
 * finite or miss the bound are marked as exceptions. The second chooses the code width
 * (1 byte unless more than 1/512 of the codes would not fit) and a centre q0 that puts
 * the codes around zero, and writes the planes. The reconstruction never depends on the
 * code width or centre, so the first pass's check stays valid.
 */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/dtype.h"

/* ---- elements as doubles ------------------------------------------------------------
 * Through the dtype table (common/dtype.h); f32 and bf16, the common checkpoint dtypes,
 * also inline (dt_ld_b32, dt_st_b32: the same values) in the loops that take them. */

static inline double ld_el(ckpz_dtype t, const uint8_t *p) { return dtype_get(t)->to_double(p); }
static inline void st_el(ckpz_dtype t, uint8_t *p, double v) { dtype_get(t)->from_double(p, v); }

int quant_dtype_ok(ckpz_dtype t)
{
    return (unsigned)t < CKPZ_DTYPE_COUNT_ && dtype_get(t)->from_double != NULL;
}

const char *quant_mode_name(uint8_t mode)
{
    switch (mode) {
    case QM_NONE: return "lossless";
    case QM_ABS: return "abs";
    case QM_REL: return "rel";
    case QM_PREL: return "pointwise-rel";
    case QM_AFFINE: return "affine";
    case QM_CREL: return "change-rel";
    default: return "?";
    }
}

/* ---- the log grid's own exp2 and log2 -------------------------------------------------
 * Polynomials evaluated in a fixed order with IEEE double operations only: every
 * platform computes the same bits (the build disables contraction into FMA). */

static double det_exp2(double t)
{
    if (t > 1100) return INFINITY;
    if (t < -1100) return 0.0;
    double k = floor(t), f = t - k; /* f in [0, 1) */
    double y = (f - 0.5) * 0.69314718055994530942; /* |y| <= 0.347 */
    /* e^y by Taylor to degree 13: the remainder is below 1e-17 relative. */
    double r = 1.0 / 6227020800.0;
    static const double inv_fact[13] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                                        1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,     1.0 / 120.0,
                                        1.0 / 24.0,        1.0 / 6.0,        0.5,             1.0,
                                        1.0};
    for (int i = 0; i < 13; i++) r = r * y + inv_fact[i];
    return ldexp(r * 1.41421356237309504880, (int)k);
}

static double det_log2(double x) /* x > 0, finite */
{
    int e;
    double m = frexp(x, &e); /* [0.5, 1) */
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
static double uniform(uint64_t v)
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
static double guess_log2(double x) /* x > 0, finite */
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

static int64_t round_half_up(double v)
{
    double r = floor(v + 0.5);
    if (!(r > -4e18)) return (int64_t)-4e18; /* also NaN */
    if (r > 4e18) return (int64_t)4e18;
    return (int64_t)r;
}

/* ---- reconstruction (shared by encoder and decoder) -------------------------------- */

static double recon_abs(double p, int64_t q, double step) { return p + (double)q * step; }

/* exp2(k step) for the log grid, remembered: a chunk uses a few hundred distinct k, and
 * det_exp2 costs tens of operations. Direct-mapped on k's low bits. */
#define EXP_CACHE 1024
typedef struct {
    int64_t key[EXP_CACHE];
    double val[EXP_CACHE];
} exp_cache;

static void exp_cache_init(exp_cache *c)
{
    for (int i = 0; i < EXP_CACHE; i++) c->key[i] = INT64_MIN;
}

static double recon_prel(exp_cache *c, int64_t q, double step, int neg)
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
static int64_t prel_pred(double b, double inv_step)
{
    if (!isfinite(b) || b == 0) return 0;
    return round_half_up(det_log2(fabs(b)) * inv_step);
}

static double recon_affine(double p, float o, float s, uint32_t code, int sym, uint32_t half)
{
    double r = sym ? (double)s * ((double)code - (double)half) : (double)o + (double)s * (double)code;
    return p + r;
}

/* ---- statistics --------------------------------------------------------------------- */

void quant_stats_init(quant_stats *s)
{
    memset(s, 0, sizeof *s);
    s->vmin = INFINITY;
    s->vmax = -INFINITY;
}

void quant_stats_add(quant_stats *s, const quant_stats *t)
{
    s->n += t->n;
    s->exceptions += t->exceptions;
    s->changed += t->changed;
    s->frozen += t->frozen;
    s->sum_abs += t->sum_abs;
    s->sum_sq += t->sum_sq;
    if (t->max_abs > s->max_abs) s->max_abs = t->max_abs;
    if (t->vmin < s->vmin) s->vmin = t->vmin;
    if (t->vmax > s->vmax) s->vmax = t->vmax;
}

/* ---- scans for the compressor's per-tensor plan ------------------------------------- */

void quant_plan_shape(quant_plan *plan, uint32_t ndim, const uint64_t *shape)
{
    const quant_spec *q = &plan->spec;
    if (q->mode == QM_ABS) plan->abs_bound = q->bound;
    if (q->mode != QM_AFFINE) return;
    /* Per channel: a group is a row (all but the first dimension); tiny rows are grouped
     * so that a group's offset and scale stay a small share of its bytes. */
    uint64_t g = q->group ? q->group : 64;
    if (q->per_row) {
        g = 1;
        for (uint32_t d = 1; d < ndim; d++) g = g * shape[d] > (1u << 24) ? (1u << 24) : g * shape[d];
        if (g < 16) g *= (16 + g - 1) / g;
    }
    plan->group = (uint32_t)g;
    /* column-wise delta: the value one row up must be in an earlier group */
    uint64_t row = 1;
    for (uint32_t d = 1; d < ndim; d++) row = row * shape[d] > (1u << 30) ? (1u << 30) : row * shape[d];
    plan->row = q->delta && row >= g ? (uint32_t)row : 0;
}

void quant_scan(ckpz_dtype dtype, const uint8_t *x, size_t n, double *vmin, double *vmax)
{
    unsigned es = ckpz_dtype_size(dtype), b32 = dtype_b32(dtype_get(dtype));
    double lo = INFINITY, hi = -INFINITY;
    if (b32) {
        float l = INFINITY, h = -INFINITY;
        for (size_t i = 0; i + es <= n; i += es) {
            float v = dt_ld_b32(b32, x + i);
            l = v < l ? v : l; /* NaN compares false */
            h = v > h ? v : h;
        }
        lo = l;
        hi = h;
    }
    for (size_t i = 0; !b32 && i + es <= n; i += es) {
        double v = ld_el(dtype, x + i);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    if (lo < *vmin) *vmin = lo;
    if (hi > *vmax) *vmax = hi;
}

double quant_change_rms(ckpz_dtype dtype, const uint8_t *x, const uint8_t *base, size_t n)
{
    unsigned es = ckpz_dtype_size(dtype);
    double sq = 0;
    size_t cnt = 0;
    for (size_t i = 0; base && i + es <= n; i += es) {
        double d = ld_el(dtype, x + i) - ld_el(dtype, base + i);
        if (d - d == 0) { /* finite */
            sq += d * d;
            cnt++;
        }
    }
    return cnt ? sqrt(sq / (double)cnt) : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double quant_prune_threshold(ckpz_dtype dtype, const uint8_t *x, const uint8_t *base, size_t n, double rate)
{
    unsigned es = ckpz_dtype_size(dtype);
    size_t nel = n / es;
    if (rate <= 0 || nel == 0) return 0;
    /* A sample of up to 2^16 evenly spaced elements: the rate is a target, not a
     * guarantee, and the sample's quantile is within a fraction of a percent of it. */
    size_t m = nel < 65536 ? nel : 65536, k = 0;
    double *v = malloc(m * sizeof *v);
    if (!v) return 0;
    for (size_t j = 0; j < m; j++) {
        size_t i = (size_t)((double)j * (double)nel / (double)m);
        double a = ld_el(dtype, x + i * es), b = base ? ld_el(dtype, base + i * es) : 0;
        if (!isfinite(b)) b = 0;
        if (isfinite(a)) v[k++] = fabs(a - b);
    }
    double thr = 0;
    if (k) {
        qsort(v, k, sizeof *v, cmp_double);
        size_t at = (size_t)(rate * (double)k);
        if (at >= k) at = k - 1;
        thr = v[at];
        /* Everything strictly below thr is pruned; when thr is 0 (many exact zeros)
         * nothing is, so take the next larger value. */
        while (thr == 0 && at + 1 < k) thr = v[++at];
    }
    free(v);
    return thr;
}

/* ---- encoder -------------------------------------------------------------------------- */

struct quant_work {
    int32_t *q;   /* per element: grid index, or Q_EXC / Q_PRUNED / Q_ZERO */
    uint8_t *neg; /* log grid: sign */
    size_t cap;
};

/* Indices are 32-bit (half the memory traffic of 64): a grid index beyond 2^30 from
 * zero is an exception, far outside any code width. */
#define Q_EXC INT32_MIN
#define Q_PRUNED (INT32_MIN + 1)
#define Q_ZERO (INT32_MIN + 2)
#define Q_LIMIT ((int64_t)1 << 30)

quant_work *quant_work_create(void) { return calloc(1, sizeof(quant_work)); }

void quant_work_free(quant_work *w)
{
    if (!w) return;
    free(w->q);
    free(w->neg);
    free(w);
}

static int work_grow(quant_work *w, size_t nel)
{
    if (w->cap >= nel) return 0;
    int32_t *q = realloc(w->q, nel * sizeof *q);
    if (!q) return -1;
    w->q = q;
    uint8_t *ng = realloc(w->neg, nel);
    if (!ng) return -1;
    w->neg = ng;
    w->cap = nel;
    return 0;
}

size_t quant_out_bound(size_t n)
{
    /* header + params (8 B per >= 16 elements of >= 2 B) + bitmap + 2 code bytes and
     * at worst every element as an exception + tail */
    return QUANT_HDR + n / 4 + 32 + n / 8 + 1 + n + n + 8;
}

/* Bound check of a reconstructed value: within tolerance, and a value that is not a
 * NaN or infinity (a finite original never restores as one). */
static int within(double r, double x, double tol)
{
    return isfinite(r) && fabs(r - x) <= tol;
}

/* The errors of restored against x (and, with a base, how many changed elements were
 * restored as the base's by the grid: pruned ones, dropped on purpose, do not count). */
static void errors(ckpz_dtype dt, const uint8_t *x, const uint8_t *base, const uint8_t *restored, const int32_t *q,
                   size_t nel, quant_stats *st)
{
    unsigned es = ckpz_dtype_size(dt), b32 = dtype_b32(dtype_get(dt));
    double sa = 0, sq = 0, mx = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < nel; i++) {
        double xi, ri;
        if (b32) {
            xi = dt_ld_b32(b32, x + i * es);
            ri = dt_ld_b32(b32, restored + i * es);
        } else {
            xi = ld_el(dt, x + i * es);
            ri = ld_el(dt, restored + i * es);
        }
        double e = fabs(ri - xi);
        if (e <= 1e300) { /* finite: not for NaN or Inf originals (stored exactly) */
            sa += e;
            sq += e * e;
            mx = e > mx ? e : mx;
            lo = xi < lo ? xi : lo;
            hi = xi > hi ? xi : hi;
        }
    }
    st->sum_abs += sa;
    st->sum_sq += sq;
    st->max_abs = mx > st->max_abs ? mx : st->max_abs;
    st->vmin = lo < st->vmin ? lo : st->vmin;
    st->vmax = hi > st->vmax ? hi : st->vmax;
    for (size_t i = 0; base && i < nel; i++)
        if (memcmp(x + i * es, base + i * es, es)) {
            st->changed++;
            st->frozen += q[i] != Q_PRUNED && !memcmp(restored + i * es, base + i * es, es);
        }
}

/* Element access for pass 1 of the absolute grid: f32 and bf16 (b32 = their size, the
 * common checkpoint dtypes) inline when b32 is a constant, the others (b32 = 0) through
 * the table. */
static inline __attribute__((always_inline)) double ld_abs(unsigned b32, ckpz_dtype dt, const uint8_t *p)
{
    return b32 ? dt_ld_b32(b32, p) : ld_el(dt, p);
}

static inline __attribute__((always_inline)) double st_abs(unsigned b32, ckpz_dtype dt, uint8_t *p, double v)
{
    if (b32) return dt_st_b32(b32, p, v);
    st_el(dt, p, v);
    return ld_el(dt, p);
}

/* Pass 1 of the absolute grid: grid index, restored value and its check per element
 * (recon_abs, rounding to the dtype). Called with a constant b32 for f32 and bf16 so that
 * those loops compile without the per-element dispatch. thr 0 = no pruning; dither 0 =
 * rounding to nearest, else the unbiased rounding's stream for this chunk. */
static inline __attribute__((always_inline)) void abs_pass(unsigned b32, ckpz_dtype dt, const uint8_t *x,
                                                           const uint8_t *base, size_t nel, double step, double inv,
                                                           double tol, double thr, uint64_t dither, int32_t *q,
                                                           uint8_t *restored)
{
    unsigned es = ckpz_dtype_size(dt);
    for (size_t i = 0; i < nel; i++) {
        double xi = ld_abs(b32, dt, x + es * i), p = base ? ld_abs(b32, dt, base + es * i) : 0;
        if (!(p - p == 0)) p = 0; /* not finite */
        double d = xi - p, t = d * inv;
        if (fabs(d) < thr) { /* false for NaN */
            q[i] = Q_PRUNED;
            st_abs(b32, dt, restored + es * i, p);
            continue;
        }
        if (!(fabs(t) < (double)Q_LIMIT)) { /* also NaN and Inf */
            q[i] = Q_EXC;
            memcpy(restored + es * i, x + es * i, es);
            continue;
        }
        double u = t + 0.5;
        if (dither) {
            uint64_t xb = 0;
            memcpy(&xb, x + es * i, es);
            u = t + uniform((xb << 32) ^ (xb >> 32) ^ (dither + i));
        }
        int64_t k = (int64_t)u;
        k -= (double)k > u; /* floor */
        double r = st_abs(b32, dt, restored + es * i, recon_abs(p, k, step));
        int ok = fabs(r - xi) <= tol; /* false for a NaN or infinite r */
        q[i] = ok ? (int32_t)k : Q_EXC;
        if (!ok) memcpy(restored + es * i, x + es * i, es);
    }
}

/* Affine group parameters from the group's residuals (finite, not pruned). */
static void affine_params(const double *v, size_t cnt, const quant_plan *pl, uint32_t maxcode, float *o, float *s)
{
    double lo = INFINITY, hi = -INFINITY, amax = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (v[i] < lo) lo = v[i];
        if (v[i] > hi) hi = v[i];
        if (fabs(v[i]) > amax) amax = fabs(v[i]);
    }
    if (cnt == 0) {
        *o = 0;
        *s = 0;
        return;
    }
    double pct = pl->spec.pct;
    if (pct > 0 && pct < 100 && cnt >= 8) {
        /* Clip at the percentile of |v| (sym) or of v on both sides (asym). */
        double *t = malloc(cnt * sizeof *t);
        if (t) {
            if (pl->spec.sym) {
                for (size_t i = 0; i < cnt; i++) t[i] = fabs(v[i]);
                qsort(t, cnt, sizeof *t, cmp_double);
                amax = t[(size_t)(pct / 100 * (double)(cnt - 1))];
            } else {
                memcpy(t, v, cnt * sizeof *t);
                qsort(t, cnt, sizeof *t, cmp_double);
                lo = t[(size_t)((100 - pct) / 100 * (double)(cnt - 1))];
                hi = t[(size_t)(pct / 100 * (double)(cnt - 1))];
            }
            free(t);
        }
    }
    if (pl->spec.sym) {
        *o = 0;
        *s = (float)(amax / (double)(maxcode / 2));
    } else {
        *o = (float)lo;
        *s = (float)((hi - lo) / (double)maxcode);
        if ((double)*o > lo && *s > 0) *o = nextafterf(*o, -INFINITY); /* rounding must not lift the grid above lo */
    }
    if (!isfinite(*s) || !isfinite(*o)) {
        *o = 0;
        *s = 0;
    }
}

/* The affine grid's prediction of element i: with a column-wise delta, the restored
 * value one row up in the same chunk (0 in the chunk's first row); else the base's
 * element; 0 when that is missing or not finite. */
static double affine_pred(ckpz_dtype dt, const uint8_t *base, const uint8_t *restored, size_t row, size_t i)
{
    unsigned es = ckpz_dtype_size(dt);
    double p = row ? (i >= row ? ld_el(dt, restored + (i - row) * es) : 0) : base ? ld_el(dt, base + i * es) : 0;
    return isfinite(p) ? p : 0;
}

static int encode_pass(quant_work *w, const quant_plan *pl, ckpz_dtype dt, uint64_t elem0, const uint8_t *x,
                       const uint8_t *base, size_t n, int bits, uint8_t *out, uint8_t *restored, size_t *sizes,
                       quant_stats *st)
{
    unsigned es = ckpz_dtype_size(dt);
    size_t nel = n / es;
    int mode = pl->spec.mode == QM_REL || pl->spec.mode == QM_CREL ? QM_ABS : pl->spec.mode;
    double thr = pl->prune_thr;
    int prune = thr > 0;
    int32_t *q = w->q;
    uint8_t *neg = w->neg;
    uint8_t tmp[8];
    double step = 0, tol = 0, inv = 0;
    size_t nexc = 0, kept = 0;
    int64_t q0 = 0;
    int w8 = 1;
    uint8_t flags = (base ? QUANT_F_BASE : 0) | (prune ? QUANT_F_BITMAP : 0);
    uint32_t group = 0, first = 0;
    size_t ngroups = 0;
    uint8_t *hdr = out, *params = out + QUANT_HDR;

    if (mode == QM_ABS) {
        tol = pl->abs_bound;
        step = pl->spec.stochastic ? tol : 2 * tol;
    } else if (mode == QM_PREL) {
        /* |x'/x - 1| <= R needs |log2 x' - log2 x| <= log2(1 + R) (the tighter side);
         * a hair less leaves room for the rounding to the dtype. */
        step = 2 * (log2(1 + pl->spec.bound) * (1 - 1e-6));
    }
    if (mode != QM_AFFINE && !(step > 0 && isfinite(step))) return 0; /* a zero bound: lossless */
    if (step > 0) inv = 1.0 / step;

    if (mode == QM_AFFINE) {
        group = pl->group;
        first = (uint32_t)(group - elem0 % group);
        if (first > nel) first = (uint32_t)nel;
        ngroups = nel ? 1 + (nel - first + group - 1) / group : 0;
        w8 = bits / 8;
        flags |= pl->spec.sym ? QUANT_F_SYM : 0;
        if (pl->row) flags = (uint8_t)((flags & ~QUANT_F_BASE) | QUANT_F_DELTA);
    }
    size_t row = mode == QM_AFFINE ? pl->row : 0;
    const uint8_t *pbase = row ? NULL : base; /* the delta's prediction replaces the base's */
    uint32_t maxc = w8 == 1 ? 255u : 65535u;

    /* Pass 1: grid index per element, reconstructed and checked. */
    if (mode == QM_AFFINE) {
        double *v = malloc((size_t)(group < nel ? group : nel + 1) * sizeof *v);
        if (!v) return -1;
        uint32_t half = (maxc - 1) / 2;
        size_t g0 = 0;
        for (size_t g = 0; g < ngroups; g++) {
            size_t len = g == 0 ? first : group;
            if (g0 + len > nel) len = nel - g0;
            size_t cnt = 0;
            for (size_t i = g0; i < g0 + len; i++) {
                double xi = ld_el(dt, x + i * es), p = affine_pred(dt, pbase, restored, row, i);
                if (!isfinite(xi)) {
                    q[i] = Q_EXC;
                    memcpy(restored + i * es, x + i * es, es); /* the next row predicts from it */
                } else if (prune && fabs(xi - p) < thr) {
                    q[i] = Q_PRUNED;
                    st_el(dt, restored + i * es, p);
                } else {
                    q[i] = 0;
                    v[cnt++] = xi - p;
                }
            }
            float o, s;
            affine_params(v, cnt, pl, maxc - 1, &o, &s);
            st32(params + g * 8, 0);
            memcpy(tmp, &o, 4);
            memcpy(params + g * 8, tmp, 4);
            memcpy(tmp, &s, 4);
            memcpy(params + g * 8 + 4, tmp, 4);
            for (size_t i = g0; i < g0 + len; i++) {
                if (q[i] != 0) continue;
                double xi = ld_el(dt, x + i * es), p = affine_pred(dt, pbase, restored, row, i);
                double c;
                if (s > 0) c = pl->spec.sym ? floor((xi - p) / s + 0.5) + half : floor((xi - p - o) / s + 0.5);
                else c = pl->spec.sym ? half : 0;
                if (c < 0) c = 0;
                if (c > maxc - 1) c = maxc - 1;
                q[i] = (int32_t)c;
                st_el(dt, restored + i * es, recon_affine(p, o, s, (uint32_t)c, pl->spec.sym, half));
                if (!isfinite(ld_el(dt, restored + i * es))) {
                    q[i] = Q_EXC;
                    memcpy(restored + i * es, x + i * es, es);
                }
            }
            g0 += len;
        }
        free(v);
    } else if (mode == QM_ABS) {
        uint64_t dither = pl->spec.stochastic ? elem0 + 1 : 0;
        double t0 = prune ? thr : 0;
        unsigned b32 = dtype_b32(dtype_get(dt));
        if (b32 == 4) abs_pass(4, dt, x, base, nel, step, inv, tol, t0, dither, q, restored);
        else if (b32 == 2) abs_pass(2, dt, x, base, nel, step, inv, tol, t0, dither, q, restored);
        else abs_pass(0, dt, x, base, nel, step, inv, tol, t0, dither, q, restored);
    } else { /* QM_PREL: the index relative to the base's, when there is one */
        exp_cache ec;
        exp_cache_init(&ec);
        for (size_t i = 0; i < nel; i++) {
            double xi = ld_el(dt, x + i * es);
            uint8_t *rp = restored + i * es;
            if (!isfinite(xi)) {
                q[i] = Q_EXC;
                continue;
            }
            if (prune) {
                double p = base ? ld_el(dt, base + i * es) : 0;
                if (!isfinite(p)) p = 0;
                if (fabs(xi - p) < thr) {
                    q[i] = Q_PRUNED;
                    st_el(dt, rp, p);
                    continue;
                }
            }
            if (xi == 0) { /* +0 has a code; -0 is rare enough to be an exception */
                q[i] = signbit(xi) ? Q_EXC : Q_ZERO;
                st_el(dt, rp, 0.0);
                continue;
            }
            double t = guess_log2(fabs(xi)) * inv, tol = pl->spec.bound * fabs(xi);
            int64_t k = round_half_up(t);
            neg[i] = xi < 0;
            st_el(dt, rp, recon_prel(&ec, k, step, neg[i]));
            double r = ld_el(dt, rp);
            if (!within(r, xi, tol)) { /* the guess sat on a cell edge: the neighbour */
                k += fabs(r) < fabs(xi) ? 1 : -1;
                st_el(dt, rp, recon_prel(&ec, k, step, neg[i]));
                r = ld_el(dt, rp);
            }
            int64_t d = k - (base ? prel_pred(ld_el(dt, base + i * es), inv) : 0);
            q[i] = within(r, xi, tol) && r != 0 && d > -Q_LIMIT && d < Q_LIMIT
                       ? (int32_t)d
                       : Q_EXC;
        }
    }

    /* Code centre (grids not laid around a base): the mean of a sample of indices. Code
     * width: one byte unless more than 1/512 of the codes would not fit. */
    if (mode != QM_AFFINE) {
        double sum = 0;
        size_t cnt = 0, stride = nel / 4096 + 1;
        for (size_t i = 0; !base && i < nel; i += stride) {
            int64_t k = q[i];
            if (k == Q_EXC || k == Q_PRUNED || k == Q_ZERO) continue;
            sum += (double)k;
            cnt++;
        }
        q0 = cnt ? round_half_up(sum / (double)cnt) : 0;
        size_t wide = 0;
        int64_t lim = mode == QM_PREL ? 126 : 253;
        for (size_t i = 0; i < nel; i++) {
            int64_t k = q[i];
            if (k == Q_EXC || k == Q_PRUNED || k == Q_ZERO) continue;
            k -= q0;
            wide += k > lim / 2 || k < -(lim + 1) / 2;
        }
        w8 = wide * 512 > nel ? 2 : 1;
        maxc = w8 == 1 ? 255u : 65535u;
    }

    /* Pass 2: bitmap, codes and exceptions (an index too far from the centre for the
     * code width becomes one, restored as it is). */
    size_t ngp = mode == QM_AFFINE ? ngroups * 8 : 0, nbm = prune ? (nel + 7) / 8 : 0;
    uint8_t *bitmap = params + ngp, *codes = bitmap + nbm;
    if (nbm) memset(bitmap, 0, nbm);
    for (size_t i = 0; i < nel; i++) kept += q[i] != Q_PRUNED;
    uint8_t *hi = codes, *lo = codes + kept, *exc = codes + kept * (size_t)w8;
    size_t kc = 0;
    for (size_t i = 0; i < nel; i++) {
        int64_t k = q[i];
        uint32_t code;
        if (k == Q_PRUNED) continue;
        if (nbm) bitmap[i >> 3] |= (uint8_t)(1u << (i & 7));
        if (k == Q_ZERO) {
            code = maxc - 1;
        } else if (k == Q_EXC) {
            code = maxc;
        } else if (mode == QM_AFFINE) {
            code = (uint32_t)k;
        } else {
            int64_t c = k - q0;
            uint64_t z = ((uint64_t)c << 1) ^ (uint64_t)(c >> 63); /* zigzag */
            if (mode == QM_PREL) z = z * 2 + neg[i];
            code = z > maxc - 2 ? maxc : (uint32_t)z;
        }
        if (code == maxc) {
            memcpy(exc + nexc * es, x + i * es, es);
            memcpy(restored + i * es, x + i * es, es);
            nexc++;
        }
        if (w8 == 1) {
            hi[kc] = (uint8_t)code;
        } else {
            hi[kc] = (uint8_t)(code >> 8);
            lo[kc] = (uint8_t)code;
        }
        kc++;
    }
    quant_stats cs;
    quant_stats_init(&cs);
    errors(dt, x, base, restored, q, nel, &cs);
    cs.n = nel;
    cs.exceptions = nexc;
    if (pl->spec.max_mae > 0 && nel && cs.sum_abs / (double)nel > pl->spec.max_mae) return 0;

    /* Move the exceptions right after the code planes (they were written at the
     * position for `kept` codes per plane, which is exactly that). Tail as it is. */
    uint8_t *tail = exc + nexc * es;
    size_t tl = n - nel * es;
    memcpy(tail, x + nel * es, tl);
    memcpy(restored + nel * es, x + nel * es, tl);

    hdr[0] = (uint8_t)mode;
    hdr[1] = (uint8_t)w8;
    hdr[2] = flags;
    hdr[3] = 0;
    st32(hdr + 4, group);
    st32(hdr + 8, mode == QM_AFFINE ? first : 0);
    st32(hdr + 12, (uint32_t)(int32_t)q0);
    uint64_t sb;
    memcpy(&sb, &step, 8);
    st64(hdr + 16, mode == QM_AFFINE ? 0 : sb);
    st32(hdr + 24, (uint32_t)nexc);
    st32(hdr + 28, (uint32_t)row);
    unsigned np = 0;
    sizes[np++] = QUANT_HDR;
    sizes[np++] = ngp;
    sizes[np++] = nbm;
    sizes[np++] = kept;
    if (w8 == 2) sizes[np++] = kept;
    sizes[np++] = nexc * es;
    if (tl) sizes[np++] = tl;
    quant_stats_add(st, &cs);
    return (int)np;
}

int quant_forward(quant_work *w, const quant_plan *plan, ckpz_dtype dtype, uint64_t elem0, const uint8_t *x,
                  const uint8_t *base, size_t n, uint8_t *out, uint8_t *restored, size_t *sizes, quant_stats *st)
{
    if (!quant_dtype_ok(dtype) || plan->spec.mode == QM_NONE || plan->spec.mode >= QM_COUNT_) return 0;
    size_t nel = n / ckpz_dtype_size(dtype);
    if (work_grow(w, nel + 1)) return -1;
    int bits = plan->spec.bits == 16 ? 16 : 8;
    int r = encode_pass(w, plan, dtype, elem0, x, base, n, bits, out, restored, sizes, st);
    if (r == 0 && plan->spec.mode == QM_AFFINE && bits == 8 && plan->spec.max_mae > 0)
        r = encode_pass(w, plan, dtype, elem0, x, base, n, 16, out, restored, sizes, st);
    return r;
}

/* ---- decoder -------------------------------------------------------------------------- */

unsigned quant_layout_read(const uint8_t *h, ckpz_dtype dt, size_t n, int have_base, quant_layout *L)
{
    memset(L, 0, sizeof *L);
    if (!quant_dtype_ok(dt)) return 0;
    unsigned es = ckpz_dtype_size(dt);
    L->mode = h[0];
    L->w = h[1];
    L->flags = h[2];
    L->group = ld32(h + 4);
    L->first = ld32(h + 8);
    L->q0 = (int32_t)ld32(h + 12);
    uint64_t sb = ld64(h + 16);
    memcpy(&L->step, &sb, 8);
    L->nexc = ld32(h + 24);
    L->nel = n / es;
    L->row = ld32(h + 28);
    if (h[3] || (L->flags & ~15u) || (L->row != 0) != ((L->flags & QUANT_F_DELTA) != 0)) return 0;
    if (L->w != 1 && L->w != 2) return 0;
    if ((L->flags & QUANT_F_BASE) && !have_base) return 0;
    if (L->nexc > L->nel) return 0;
    if (L->mode == QM_AFFINE) {
        if (L->group < 16 || L->first == 0 || L->first > L->group || (L->nel && L->first > L->nel) ||
            (!L->nel && L->first) || sb || L->q0 || (L->row && (L->row < L->group || (L->flags & QUANT_F_BASE))))
            return 0;
        L->ngroups = L->nel ? 1 + (L->nel - L->first + L->group - 1) / L->group : 0;
    } else if (L->mode == QM_ABS || L->mode == QM_PREL) {
        if (L->group || L->first || !(L->step > 0) || !isfinite(L->step) || (L->flags & (QUANT_F_SYM | QUANT_F_DELTA)))
            return 0;
    } else {
        return 0;
    }
    unsigned np = 0;
    L->size[np++] = QUANT_HDR;
    L->size[np++] = L->ngroups * 8;
    L->size[np++] = (L->flags & QUANT_F_BITMAP) ? (L->nel + 7) / 8 : 0;
    L->size[np++] = L->nel; /* until the bitmap says otherwise */
    if (L->w == 2) L->size[np++] = L->nel;
    L->size[np++] = (size_t)L->nexc * es;
    if (n % es) L->size[np++] = n % es;
    L->nplanes = np;
    return np;
}

int quant_set_kept(quant_layout *L, const uint8_t *bitmap)
{
    size_t kept = 0;
    for (size_t i = 0; i < L->size[2]; i++) kept += (size_t)__builtin_popcount(bitmap[i]);
    if (L->nel % 8 && L->size[2] && (bitmap[L->size[2] - 1] >> (L->nel % 8))) return -1;
    if (kept < L->nexc) return -1;
    L->size[3] = kept;
    if (L->w == 2) L->size[4] = kept;
    return 0;
}

/* The absolute grid for f32 or bf16 (es = b32) without a bitmap, the common case:
 * recon_abs and the rounding to the dtype, without the generic element access. */
static inline int inverse_abs_fast(unsigned es, const quant_layout *L, const uint8_t *const *plane,
                                   const uint8_t *base, uint8_t *out)
{
    const uint8_t *hi = plane[3], *lo = L->w == 2 ? plane[4] : NULL, *exc = plane[3 + L->w];
    uint32_t maxc = L->w == 1 ? 255u : 65535u;
    size_t ne = 0;
    for (size_t i = 0; i < L->nel; i++) {
        uint32_t code = lo ? ((uint32_t)hi[i] << 8) | lo[i] : hi[i];
        if (code >= maxc - 1) {
            if (code != maxc || ne >= L->nexc) return -1;
            memcpy(out + es * i, exc + es * ne++, es);
            continue;
        }
        double p = base ? dt_ld_b32(es, base + es * i) : 0;
        if (!(p - p == 0)) p = 0;
        int64_t c = (int64_t)(code >> 1) ^ -(int64_t)(code & 1); /* zigzag back */
        dt_st_b32(es, out + es * i, recon_abs(p, c + L->q0, L->step));
    }
    return ne == L->nexc ? 0 : -1;
}

int quant_inverse(const quant_layout *L, ckpz_dtype dt, const uint8_t *const *plane, const uint8_t *base, size_t n,
                  uint8_t *out)
{
    if (!(L->flags & QUANT_F_BASE)) base = NULL; /* coded stand-alone in a based entry */
    unsigned b32 = dtype_b32(dtype_get(dt));
    if (L->mode == QM_ABS && b32 && !(L->flags & QUANT_F_BITMAP)) {
        if (inverse_abs_fast(b32, L, plane, base, out)) return -1;
        memcpy(out + L->nel * b32, plane[L->nplanes - 1], n - L->nel * b32);
        return 0;
    }
    unsigned es = ckpz_dtype_size(dt);
    size_t nel = L->nel, kc = 0, ne = 0, kept = L->size[3];
    const uint8_t *params = plane[1], *bitmap = (L->flags & QUANT_F_BITMAP) ? plane[2] : NULL;
    const uint8_t *hi = plane[3], *lo = L->w == 2 ? plane[4] : NULL, *exc = plane[3 + L->w];
    uint32_t maxc = L->w == 1 ? 255u : 65535u, half = (maxc - 1) / 2;
    int sym = (L->flags & QUANT_F_SYM) != 0;
    exp_cache ec;
    if (L->mode == QM_PREL) exp_cache_init(&ec);
    double inv = L->step > 0 ? 1.0 / L->step : 0;
    size_t gi = 0, gleft = L->first;
    float go = 0, gs = 0;
    for (size_t i = 0; i < nel; i++) {
        uint8_t *op = out + i * es;
        const uint8_t *bp = base ? base + i * es : NULL;
        double p = L->mode == QM_AFFINE ? affine_pred(dt, base, out, L->row, i) : bp ? ld_el(dt, bp) : 0;
        if (!isfinite(p)) p = 0;
        if (L->mode == QM_AFFINE) {
            if (gleft == 0) {
                gi++;
                gleft = L->group;
            }
            gleft--;
            memcpy(&go, params + gi * 8, 4);
            memcpy(&gs, params + gi * 8 + 4, 4);
        }
        if (bitmap && !(bitmap[i >> 3] >> (i & 7) & 1)) {
            st_el(dt, op, p);
            continue;
        }
        if (kc >= kept) return -1;
        uint32_t code = lo ? ((uint32_t)hi[kc] << 8) | lo[kc] : hi[kc];
        kc++;
        if (code == maxc) {
            if (ne >= L->nexc) return -1;
            memcpy(op, exc + ne * es, es);
            ne++;
            continue;
        }
        if (L->mode == QM_AFFINE) {
            st_el(dt, op, recon_affine(p, go, gs, code, sym, half));
        } else if (L->mode == QM_ABS) {
            if (code > maxc - 2) return -1;
            uint64_t z = code;
            int64_t c = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
            st_el(dt, op, recon_abs(p, c + L->q0, L->step));
        } else { /* QM_PREL */
            if (code == maxc - 1) {
                st_el(dt, op, 0.0);
                continue;
            }
            int ng = code & 1;
            uint64_t z = code >> 1;
            int64_t c = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
            int64_t pr = bp ? prel_pred(ld_el(dt, bp), inv) : L->q0;
            st_el(dt, op, recon_prel(&ec, c + pr, L->step, ng));
        }
    }
    if (kc != kept || ne != L->nexc) return -1;
    memcpy(out + nel * es, plane[L->nplanes - 1], n - nel * es);
    return 0;
}
