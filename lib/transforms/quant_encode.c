/* quant_encode.c — the lossy encoder (see quant.h).
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
#include "quant_grid.h"

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
static int within(double r, double x, double tol) { return isfinite(r) && fabs(r - x) <= tol; }

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
        double xi = ld_fast(b32, dt, x + es * i), p = base ? ld_fast(b32, dt, base + es * i) : 0;
        if (!(p - p == 0)) p = 0; /* not finite */
        double d = xi - p, t = d * inv;
        if (fabs(d) < thr) { /* false for NaN */
            q[i] = Q_PRUNED;
            st_fast(b32, dt, restored + es * i, p);
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
        double r = st_fast(b32, dt, restored + es * i, recon_abs(p, k, step));
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

/* One encoding pass over a chunk: the plan, the chunk, and what the passes decide. */
typedef struct enc {
    const quant_plan *pl;
    ckpz_dtype dt;
    unsigned es;
    size_t nel;
    const uint8_t *x, *base;
    uint8_t *restored;
    int32_t *q;   /* per element: grid index, or Q_EXC / Q_PRUNED / Q_ZERO */
    uint8_t *neg; /* log grid: sign */
    int mode;     /* QM_ABS (also for QM_REL and QM_CREL), QM_PREL or QM_AFFINE */
    int prune;
    double thr, step, tol, inv;
    uint64_t dither; /* QM_PREL: 0 = rounding to nearest, else the unbiased rounding's stream */
    int log_odds;    /* QM_PREL, dither: unbiased in log2 |x| (QR_LOG), else in x (QR_VALUE) */
    int64_t q0;    /* code centre (grids not laid around a base) */
    int w8;        /* code width in bytes */
    uint32_t maxc; /* the exception code; maxc - 1 codes an exact zero */
    uint32_t group, first;
    size_t ngroups, row;
} enc;

/* Pass 1, affine grid: per group, the offset and scale (written to params), then each
 * element's code, reconstructed as the decoder will. -1: out of memory. */
static int pass1_affine(enc *e, uint8_t *params)
{
    const quant_plan *pl = e->pl;
    ckpz_dtype dt = e->dt;
    unsigned es = e->es;
    size_t nel = e->nel, row = e->row, group = e->group;
    const uint8_t *x = e->x, *pbase = row ? NULL : e->base; /* the delta's prediction replaces the base's */
    uint8_t *restored = e->restored, tmp[8];
    int32_t *q = e->q;
    double *v = malloc((size_t)(group < nel ? group : nel + 1) * sizeof *v);
    if (!v) return -1;
    uint32_t half = (e->maxc - 1) / 2;
    size_t g0 = 0;
    for (size_t g = 0; g < e->ngroups; g++) {
        size_t len = g == 0 ? e->first : group;
        if (g0 + len > nel) len = nel - g0;
        size_t cnt = 0;
        for (size_t i = g0; i < g0 + len; i++) {
            double xi = ld_el(dt, x + i * es), p = affine_pred(dt, pbase, restored, row, i);
            if (!isfinite(xi)) {
                q[i] = Q_EXC;
                memcpy(restored + i * es, x + i * es, es); /* the next row predicts from it */
            } else if (e->prune && fabs(xi - p) < e->thr) {
                q[i] = Q_PRUNED;
                st_el(dt, restored + i * es, p);
            } else {
                q[i] = 0;
                v[cnt++] = xi - p;
            }
        }
        float o, s;
        affine_params(v, cnt, pl, e->maxc - 1, &o, &s);
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
            if (c > e->maxc - 1) c = e->maxc - 1;
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
    return 0;
}

/* Pass 1, log grid: the index relative to the base's, when there is one. Called with a
 * constant b32 for f32 and bf16 (ld_fast, st_fast), as abs_pass is (the loop through the dtype table took
 * half of coding a --lossy=auto file). */
static inline __attribute__((always_inline)) void prel_pass(unsigned b32, enc *e)
{
    ckpz_dtype dt = e->dt;
    unsigned es = e->es;
    const uint8_t *x = e->x, *base = e->base;
    int32_t *q = e->q;
    uint8_t *neg = e->neg;
    double step = e->step, inv = e->inv, bound = e->pl->spec.bound;
    exp_cache ec;
    pred_cache pc;
    exp_cache_init(&ec);
    if (base) pred_cache_init(&pc);
    for (size_t i = 0; i < e->nel; i++) {
        double xi = ld_fast(b32, dt, x + i * es);
        uint8_t *rp = e->restored + i * es;
        if (!isfinite(xi)) {
            q[i] = Q_EXC;
            continue;
        }
        if (e->prune) {
            double p = base ? ld_fast(b32, dt, base + i * es) : 0;
            if (!isfinite(p)) p = 0;
            if (fabs(xi - p) < e->thr) {
                q[i] = Q_PRUNED;
                st_fast(b32, dt, rp, p);
                continue;
            }
        }
        if (xi == 0) { /* +0 has a code; -0 is rare enough to be an exception */
            q[i] = signbit(xi) ? Q_EXC : Q_ZERO;
            st_fast(b32, dt, rp, 0.0);
            continue;
        }
        double t = guess_log2(fabs(xi)) * inv, tol = bound * fabs(xi);
        int64_t k;
        if (e->dither) {
            uint64_t xb = 0;
            memcpy(&xb, x + i * es, es);
            double u = uniform((xb << 32) ^ (xb >> 32) ^ (e->dither + i));
            if (e->log_odds) { /* down or up with the odds that keep log2 |x| on average */
                u += t;
                k = (int64_t)u;
                k -= (double)k > u; /* floor */
            } else { /* ... that keep |x| on average: up with odds (|x| - lo) / (hi - lo) */
                double ax = fabs(xi);
                k = (int64_t)t;
                k -= (double)k > t;
                double lo = recon_prel(&ec, k, step, 0), hi = recon_prel(&ec, k + 1, step, 0);
                if (lo > ax) { /* the guess sat past a cell's edge: the cell below */
                    hi = lo;
                    lo = recon_prel(&ec, --k, step, 0);
                } else if (hi < ax) {
                    lo = hi;
                    hi = recon_prel(&ec, ++k + 1, step, 0);
                }
                k += u * (hi - lo) < ax - lo;
            }
        } else {
            k = round_half_up(t);
        }
        neg[i] = xi < 0;
        double r = st_fast(b32, dt, rp, recon_prel(&ec, k, step, neg[i]));
        if (!within(r, xi, tol)) { /* the guess sat on a cell edge: the neighbour */
            k += fabs(r) < fabs(xi) ? 1 : -1;
            r = st_fast(b32, dt, rp, recon_prel(&ec, k, step, neg[i]));
        }
        int64_t d = k - (base ? prel_pred_cached(&pc, ld_fast(b32, dt, base + i * es), inv) : 0);
        q[i] = within(r, xi, tol) && r != 0 && d > -Q_LIMIT && d < Q_LIMIT ? (int32_t)d : Q_EXC;
    }
}

static void pass1_prel(enc *e)
{
    unsigned b32 = dtype_b32(dtype_get(e->dt));
    if (b32 == 4) prel_pass(4, e);
    else if (b32 == 2) prel_pass(2, e);
    else prel_pass(0, e);
}

/* Code centre (grids not laid around a base): the mean of a sample of indices. Code
 * width: one byte unless more than 1/512 of the codes would not fit. */
static void code_centre(enc *e)
{
    const int32_t *q = e->q;
    size_t nel = e->nel;
    double sum = 0;
    size_t cnt = 0, stride = nel / 4096 + 1;
    for (size_t i = 0; !e->base && i < nel; i += stride) {
        int64_t k = q[i];
        if (k == Q_EXC || k == Q_PRUNED || k == Q_ZERO) continue;
        sum += (double)k;
        cnt++;
    }
    e->q0 = cnt ? round_half_up(sum / (double)cnt) : 0;
    size_t wide = 0;
    int64_t lim = e->mode == QM_PREL ? 126 : 253;
    for (size_t i = 0; i < nel; i++) {
        int64_t k = q[i];
        if (k == Q_EXC || k == Q_PRUNED || k == Q_ZERO) continue;
        k -= e->q0;
        wide += k > lim / 2 || k < -(lim + 1) / 2;
    }
    e->w8 = wide * 512 > nel ? 2 : 1;
    e->maxc = e->w8 == 1 ? 255u : 65535u;
}

/* Pass 2: bitmap, codes and exceptions (an index too far from the centre for the code
 * width becomes one, restored as it is), from codes on: the bitmap's nbm bytes, then the
 * code planes, then the exceptions. Sets *kept (elements with a code) and returns the
 * exception count. */
static size_t pass2_codes(enc *e, uint8_t *bitmap, size_t nbm, size_t *kept)
{
    const int32_t *q = e->q;
    size_t nel = e->nel, es = e->es, nexc = 0, kc = 0, k_all = 0;
    uint32_t maxc = e->maxc;
    if (nbm) memset(bitmap, 0, nbm);
    for (size_t i = 0; i < nel; i++) k_all += q[i] != Q_PRUNED;
    uint8_t *codes = bitmap + nbm;
    uint8_t *hi = codes, *lo = codes + k_all, *exc = codes + k_all * (size_t)e->w8;
    for (size_t i = 0; i < nel; i++) {
        int64_t k = q[i];
        uint32_t code;
        if (k == Q_PRUNED) continue;
        if (nbm) bitmap[i >> 3] |= (uint8_t)(1u << (i & 7));
        if (k == Q_ZERO) {
            code = maxc - 1;
        } else if (k == Q_EXC) {
            code = maxc;
        } else if (e->mode == QM_AFFINE) {
            code = (uint32_t)k;
        } else {
            int64_t c = k - e->q0;
            uint64_t z = ((uint64_t)c << 1) ^ (uint64_t)(c >> 63); /* zigzag */
            if (e->mode == QM_PREL) z = z * 2 + e->neg[i];
            code = z > maxc - 2 ? maxc : (uint32_t)z;
        }
        if (code == maxc) {
            memcpy(exc + nexc * es, e->x + i * es, es);
            memcpy(e->restored + i * es, e->x + i * es, es);
            nexc++;
        }
        if (e->w8 == 1) {
            hi[kc] = (uint8_t)code;
        } else {
            hi[kc] = (uint8_t)(code >> 8);
            lo[kc] = (uint8_t)code;
        }
        kc++;
    }
    *kept = k_all;
    return nexc;
}

/* The grid's step (and bound) from the plan, and the affine grid's groups. 0: no grid
 * (a zero bound: the chunk stays lossless). */
static int enc_setup(enc *e, uint64_t elem0, int bits)
{
    const quant_plan *pl = e->pl;
    e->w8 = 1;
    if (e->mode == QM_ABS) {
        e->tol = pl->abs_bound;
        e->step = pl->spec.stochastic ? e->tol : 2 * e->tol;
    } else if (e->mode == QM_PREL) {
        /* |x'/x - 1| <= R needs |log2 x' - log2 x| <= log2(1 + R) (the tighter side);
         * a hair less leaves room for the rounding to the dtype. Rounding to nearest
         * moves a value by up to half a step, the unbiased rounding by up to a step. */
        e->step = (pl->spec.stochastic ? 1 : 2) * (log2(1 + pl->spec.bound) * (1 - 1e-6));
        e->dither = pl->spec.stochastic ? elem0 + 1 : 0;
        e->log_odds = pl->spec.stochastic == QR_LOG;
    }
    if (e->mode != QM_AFFINE && !(e->step > 0 && isfinite(e->step))) return 0;
    if (e->step > 0) e->inv = 1.0 / e->step;
    if (e->mode == QM_AFFINE) {
        e->group = pl->group;
        e->first = (uint32_t)(e->group - elem0 % e->group);
        if (e->first > e->nel) e->first = (uint32_t)e->nel;
        e->ngroups = e->nel ? 1 + (e->nel - e->first + e->group - 1) / e->group : 0;
        e->w8 = bits / 8;
        e->row = pl->row;
    }
    e->maxc = e->w8 == 1 ? 255u : 65535u;
    return 1;
}

static int encode_pass(quant_work *w, const quant_plan *pl, ckpz_dtype dt, uint64_t elem0, const uint8_t *x,
                       const uint8_t *base, size_t n, int bits, uint8_t *out, uint8_t *restored, size_t *sizes,
                       quant_stats *st)
{
    enc e = {.pl = pl,
             .dt = dt,
             .es = ckpz_dtype_size(dt),
             .x = x,
             .base = base,
             .restored = restored,
             .q = w->q,
             .neg = w->neg,
             .thr = pl->prune_thr};
    e.nel = n / e.es;
    e.mode = pl->spec.mode == QM_REL || pl->spec.mode == QM_CREL ? QM_ABS : pl->spec.mode;
    e.prune = e.thr > 0;
    if (!enc_setup(&e, elem0, bits)) return 0;
    uint8_t flags = (base ? QUANT_F_BASE : 0) | (e.prune ? QUANT_F_BITMAP : 0);
    if (e.mode == QM_AFFINE) {
        flags |= pl->spec.sym ? QUANT_F_SYM : 0;
        if (e.row) flags = (uint8_t)((flags & ~QUANT_F_BASE) | QUANT_F_DELTA);
    }
    uint8_t *hdr = out, *params = out + QUANT_HDR;
    size_t es = e.es, nel = e.nel;

    /* Pass 1: grid index per element, reconstructed and checked. */
    if (e.mode == QM_AFFINE) {
        if (pass1_affine(&e, params)) return -1;
    } else if (e.mode == QM_ABS) {
        uint64_t dither = pl->spec.stochastic ? elem0 + 1 : 0;
        double t0 = e.prune ? e.thr : 0;
        unsigned b32 = dtype_b32(dtype_get(dt));
        if (b32 == 4) abs_pass(4, dt, x, base, nel, e.step, e.inv, e.tol, t0, dither, e.q, restored);
        else if (b32 == 2) abs_pass(2, dt, x, base, nel, e.step, e.inv, e.tol, t0, dither, e.q, restored);
        else abs_pass(0, dt, x, base, nel, e.step, e.inv, e.tol, t0, dither, e.q, restored);
    } else {
        pass1_prel(&e);
    }
    if (e.mode != QM_AFFINE) code_centre(&e);

    size_t ngp = e.mode == QM_AFFINE ? e.ngroups * 8 : 0, nbm = e.prune ? (nel + 7) / 8 : 0, kept;
    size_t nexc = pass2_codes(&e, params + ngp, nbm, &kept);
    quant_stats cs;
    quant_stats_init(&cs);
    errors(dt, x, base, restored, e.q, nel, &cs);
    cs.n = nel;
    cs.exceptions = nexc;
    if (pl->spec.max_mae > 0 && nel && cs.sum_abs / (double)nel > pl->spec.max_mae) return 0;

    /* The exceptions sit right after the code planes (written at the position for `kept`
     * codes per plane, which is exactly that); the tail follows as it is. */
    uint8_t *tail = params + ngp + nbm + kept * (size_t)e.w8 + nexc * es;
    size_t tl = n - nel * es;
    memcpy(tail, x + nel * es, tl);
    memcpy(restored + nel * es, x + nel * es, tl);

    hdr[0] = (uint8_t)e.mode;
    hdr[1] = (uint8_t)e.w8;
    hdr[2] = flags;
    hdr[3] = 0;
    st32(hdr + 4, e.group);
    st32(hdr + 8, e.mode == QM_AFFINE ? e.first : 0);
    st32(hdr + 12, (uint32_t)(int32_t)e.q0);
    uint64_t sb;
    memcpy(&sb, &e.step, 8);
    st64(hdr + 16, e.mode == QM_AFFINE ? 0 : sb);
    st32(hdr + 24, (uint32_t)nexc);
    st32(hdr + 28, (uint32_t)e.row);
    unsigned np = 0;
    sizes[np++] = QUANT_HDR;
    sizes[np++] = ngp;
    sizes[np++] = nbm;
    sizes[np++] = kept;
    if (e.w8 == 2) sizes[np++] = kept;
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
