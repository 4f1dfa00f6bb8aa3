/* lossy_sample.c — a lossy setting on a tensor's sample (see lossy_sample.h).
 *
 * The plan is the compressor's (quant_plan_shape, then rel's bound R x the value range
 * as lib/codec/plan.c's plan_entry derives it), with the range of the sample extrapolated
 * to the tensor's element count, since a sample misses the extremes the compressor
 * sees. Each window is coded
 * as a chunk of its own (its elements' group phase from its offset); the histograms of
 * the code planes are summed over the windows, and a window the compressor would code
 * losslessly (its planes not smaller than its bytes, or max-mae) counts as such.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "container/container.h"
#include "predict/lossy_sample.h"

struct lossy_sampler {
    quant_work *w;
    uint8_t *out, *restored;
    size_t cap; /* bytes of input the buffers are sized for */
};

lossy_sampler *lossy_sampler_create(void)
{
    lossy_sampler *s = calloc(1, sizeof *s);
    if (s && !(s->w = quant_work_create())) {
        free(s);
        return NULL;
    }
    return s;
}

void lossy_sampler_free(lossy_sampler *s)
{
    if (!s) return;
    quant_work_free(s->w);
    free(s->out);
    free(s->restored);
    free(s);
}

static int reserve(lossy_sampler *s, size_t n)
{
    if (n <= s->cap) return 0;
    uint8_t *o = realloc(s->out, quant_out_bound(n)), *r;
    if (!o) return -1;
    s->out = o;
    if (!(r = realloc(s->restored, n))) return -1;
    s->restored = r;
    s->cap = n;
    return 0;
}

static void count(uint32_t *h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h[p[i]]++;
}

static double bits_of(const uint32_t *h)
{
    double total = 0;
    for (unsigned i = 0; i < 256; i++) total += h[i];
    return feat_entropy(h, 256, total) * total;
}

int lossy_sample(lossy_sampler *s, const quant_spec *spec, ckpz_dtype t, uint32_t ndim, const uint64_t *shape,
                 uint64_t length, const uint8_t *p, const uint64_t *woff, const size_t *wlen, unsigned nw,
                 size_t max_bytes, feat_lossy *l)
{
    unsigned es = ckpz_dtype_size(t);
    size_t n = 0, maxw = 0;
    memset(l, 0, sizeof *l);
    if (spec->mode == QM_NONE || spec->mode == QM_CREL || spec->mode >= QM_COUNT_ || !quant_dtype_ok(t) || !es)
        return 0;
    for (unsigned k = 0; k < nw; k++) {
        n += wlen[k];
        if (wlen[k] > maxw) maxw = wlen[k];
    }
    if (n < es) return 0;

    quant_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.spec = *spec;
    quant_plan_shape(&plan, ndim, shape);
    if (spec->mode == QM_REL) {
        double lo = INFINITY, hi = -INFINITY;
        quant_scan(t, p, n - n % es, &lo, &hi);
        double range = hi > lo ? feat_range_extrapolate(hi - lo, n / es, length / es) : 0;
        plan.abs_bound = spec->bound * range;
        if (!(plan.abs_bound > 0)) return 0; /* the compressor's zero bound: lossless */
    }
    if (spec->prune > 0) plan.prune_thr = quant_prune_threshold(t, p, NULL, n - n % es, spec->prune);
    /* each window's share of max_bytes, whole elements, at least one */
    size_t share = nw ? max_bytes / nw / es * es : 0;
    if (share < es) share = es;
    if (maxw > share) maxw = share;
    if (reserve(s, maxw)) return -1;

    uint32_t hist[3][256]; /* high code bytes, low code bytes, bitmap */
    memset(hist, 0, sizeof hist);
    size_t at = 0, coded = 0, lossy_bytes = 0, nel = 0, fixed = 0;
    uint64_t nexc = 0;
    for (unsigned k = 0; k < nw; at += wlen[k], k++) {
        size_t sizes[QUANT_PLANES_MAX], wl = wlen[k] < share ? wlen[k] : share;
        quant_stats cs;
        quant_stats_init(&cs);
        int np = quant_forward(s->w, &plan, t, woff[k] / es, p + at, NULL, wl, s->out, s->restored, sizes, &cs);
        if (np < 0) return -1;
        coded += wl;
        if (np < 5) continue; /* coded losslessly (max-mae) */
        size_t total = 0;
        for (int i = 0; i < np; i++) total += sizes[i] + CTR_PLANE_DESC;
        if (total > wl) continue; /* the codec falls back to lossless coding */
        /* planes: header, group parameters, bitmap, codes (high bytes), codes (low
         * bytes, 16-bit codes only), exceptions, tail */
        const uint8_t *pl = s->out;
        int wide = s->out[1] == 2;
        pl += sizes[0];
        fixed += sizes[1];
        pl += sizes[1];
        count(hist[2], pl, sizes[2]);
        pl += sizes[2];
        count(hist[0], pl, sizes[3]);
        pl += sizes[3];
        if (wide) count(hist[1], pl, sizes[4]);
        fixed += sizes[4 + wide];
        nexc += cs.exceptions;
        nel += wl / es;
        lossy_bytes += wl;
    }
    if (lossy_bytes * 2 <= coded || !nel) return 0; /* most of it would be exact */
    double code_bits = bits_of(hist[0]) + bits_of(hist[1]);
    l->mode = spec->mode;
    l->bits = spec->bits;
    l->sym = spec->sym;
    l->group = plan.group;
    l->bound = spec->bound;
    l->abs_bound = plan.abs_bound;
    l->code_bits = code_bits / (double)nel;
    l->exc_frac = (double)nexc / (double)nel;
    l->bytes_per_elem = ((code_bits + bits_of(hist[2])) / 8 + (double)fixed) / (double)nel;
    return 1;
}
