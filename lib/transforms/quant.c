/* quant.c — see quant.h: what the encoder (quant_encode.c) and decoder (quant_decode.c)
 * share besides the grids' arithmetic (quant_grid.h): dtypes and mode names, error
 * statistics, and the scans behind the compressor's per-tensor plan. */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/dtype.h"
#include "quant_grid.h"

int quant_dtype_ok(ckpz_dtype t) { return (unsigned)t < CKPZ_DTYPE_COUNT_ && dtype_get(t)->from_double != NULL; }

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
    for (size_t i = 0; i + es <= n; i += es) {
        double d = ld_el(dtype, x + i) - (base ? ld_el(dtype, base + i) : 0);
        if (d - d == 0) { /* finite */
            sq += d * d;
            cnt++;
        }
    }
    return cnt ? sqrt(sq / (double)cnt) : 0;
}

/* The k-th smallest of v[0..n) (k < n), reordering v: quickselect, the middle of three
 * as pivot. The same value a sort would put at k, in linear time: sorting each chunk's
 * sample of 2^16 was a tenth of coding a --lossy=auto file. */
static double kth_smallest(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        double a = v[lo], b = v[mid], c = v[hi];
        double piv = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < piv) i++;
            while (v[j] > piv) j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j], v[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        /* v[lo..j] <= piv <= v[i..hi], and everything between equals piv */
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return piv;
    }
    return v[k];
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
        size_t at = (size_t)(rate * (double)k);
        if (at >= k) at = k - 1;
        thr = kth_smallest(v, k, at);
        /* Everything strictly below thr is pruned; when thr is 0 (many exact zeros)
         * nothing is, so take the next larger value: the least nonzero one (every value
         * is >= 0), as sorted order gives it. */
        if (thr == 0)
            for (size_t i = 0; i < k; i++)
                if (v[i] > 0 && (thr == 0 || v[i] < thr)) thr = v[i];
    }
    free(v);
    return thr;
}
