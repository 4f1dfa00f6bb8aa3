/* features.c — per-tensor features from sampled windows (see features.h).
 *
 * One pass over the sample: each element is split into its exponent field and its top
 * mantissa bits (histograms for the entropies) and decoded to a double (zeros, mean |x|,
 * std, the range, and the range of each block of 64), both as the dtype table
 * (common/dtype.h) defines the type, and compared with the element before (the change of
 * exponent, whose entropy tells how much an order-1 model of the exponent plane gains at
 * levels >= 4, and exact repeats, which zstd finds at level 6). Integer types use their
 * top byte as the "exponent" and the next byte as the "mantissa", which is what a
 * byte-plane coder sees of them. The blocks run over the windows back to back, so the
 * few that straddle two windows mix distant parts of the tensor (at most 3 of them).
 * The candidate's columns come from the setting and from what the quantiser made of
 * the sample (lossy_sample.c). Scaled so that every feature is of order 1 before the
 * model's own normalisation.
 */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "predict/features.h"
#include "transforms/quant.h"

static const char *const names[FEAT_COUNT] = {
    "dtype_bf16",   "dtype_f16", "dtype_f32", "dtype_other",  "elem_size",   "log2_bytes",
    "small",        "zero_frac", "log_std",   "log_mean_abs", "exp_entropy", "mant_entropy",
    "exp_distinct", "exp_delta", "repeat",    "block_range",  "range_std",   "undersample",
    "level",        "lossless",  "mode_grid", "mode_log",     "mode_affine", "bits",
    "log2_group",   "sym",       "log_bound", "code_bits",    "exc_frac",    "est_savings",
};

_Static_assert(FEAT_COUNT == CKPZ_PREDICT_FEATURES, "ckpz.h's CKPZ_PREDICT_FEATURES is the feature count");

const char *feat_name(unsigned i) { return i < FEAT_COUNT ? names[i] : NULL; }

void feat_windows(uint64_t length, unsigned esize, size_t budget, uint64_t off[FEAT_WINDOWS], size_t len[FEAT_WINDOWS],
                  unsigned *n)
{
    if (esize == 0) esize = 1;
    uint64_t elems = length / esize;
    uint64_t want = budget / esize;
    *n = 0;
    if (elems == 0 || want == 0) return;
    if (elems <= want) {
        off[0] = 0;
        len[0] = (size_t)(elems * esize);
        *n = 1;
        return;
    }
    /* FEAT_WINDOWS windows of want/FEAT_WINDOWS elements, first at the start, last at
     * the end, the others evenly between */
    uint64_t w = want / FEAT_WINDOWS;
    if (w == 0) w = 1;
    for (unsigned k = 0; k < FEAT_WINDOWS; k++) {
        uint64_t start = (elems - w) * k / (FEAT_WINDOWS - 1);
        off[k] = start * esize;
        len[k] = (size_t)(w * esize);
    }
    *n = FEAT_WINDOWS;
}

double feat_entropy(const uint32_t *h, size_t bins, double total)
{
    if (total <= 0) return 0;
    double s = 0;
    for (size_t i = 0; i < bins; i++)
        if (h[i]) s += h[i] * log2((double)h[i]);
    double e = log2(total) - s / total;
    return e < 0 ? 0 : e;
}

static double scaled_log2(double v)
{
    if (!(v > 0)) return -4;
    double l = log2(v) / 32;
    return l < -4 ? -4 : l > 4 ? 4 : l;
}

static double clamp4(double v) { return !(v > -4) ? -4 : v > 4 ? 4 : v; }

double feat_range_extrapolate(double range, uint64_t sampled, uint64_t total)
{
    if (sampled < 2 || total <= sampled) return range;
    return range * sqrt(log((double)total) / log((double)sampled));
}

void feat_compute(ckpz_dtype t, uint64_t length, const uint8_t *p, size_t n, int level, const feat_lossy *lossy,
                  double out[FEAT_COUNT])
{
    const dtype_info *d = dtype_get(t);
    unsigned es = d->size;
    size_t count = es ? n / es : 0;
    unsigned ebins = d->cls == DT_FLOAT ? 1u << d->ebits : 256;
    uint64_t zeros = 0, finite_n = 0, blocks = 0;
    double sum = 0, sumsq = 0, sumabs = 0, lo = INFINITY, hi = -INFINITY;
    double blo = INFINITY, bhi = -INFINITY, blogs = 0; /* the current block's range; sum of log2 ranges */
    uint32_t ehist[2048], mhist[256], dhist[4096]; /* dhist: exponent changes + 2048 */
    uint32_t eprev = 0;
    uint64_t repeats = 0;
    memset(ehist, 0, sizeof ehist);
    memset(dhist, 0, sizeof dhist);
    memset(mhist, 0, sizeof mhist);
    memset(out, 0, sizeof(double) * FEAT_COUNT);

    for (size_t i = 0; i < count; i++) {
        const uint8_t *q = p + i * es;
        double x = d->to_double(q);
        int finite = 1;
        uint32_t e, m;
        if (d->cls == DT_FLOAT) {
            /* the exponent field and the top 8 bits of the mantissa */
            uint64_t v = 0;
            for (unsigned k = 0; k < es; k++) v |= (uint64_t)q[k] << (8 * k);
            e = (uint32_t)(v >> d->mbits) & ((1u << d->ebits) - 1);
            m = (uint32_t)((v & (((uint64_t)1 << d->mbits) - 1)) >> (d->mbits > 8 ? d->mbits - 8 : 0));
            finite = isfinite(x);
        } else { /* integers: what a byte-plane coder sees, the top byte and the next */
            e = q[es - 1];
            m = es > 1 ? q[es - 2] : 0;
        }
        ehist[e]++;
        mhist[m]++;
        if (i) {
            dhist[(e - eprev + 2048) & 4095]++;
            repeats += !memcmp(q, q - es, es);
        }
        eprev = e;
        if (finite) {
            finite_n++;
            if (x == 0) zeros++;
            sum += x;
            sumsq += x * x;
            sumabs += fabs(x);
            if (x < blo) blo = x;
            if (x > bhi) bhi = x;
        }
        if (i % FEAT_BLOCK == FEAT_BLOCK - 1 || i + 1 == count) { /* a block ends */
            if (blo <= bhi) {
                /* equal values: a range far below any spread, not log2(0) */
                blogs += log2(bhi > blo ? bhi - blo : 0x1p-60);
                blocks++;
                if (blo < lo) lo = blo;
                if (bhi > hi) hi = bhi;
            }
            blo = INFINITY;
            bhi = -INFINITY;
        }
    }

    /* The model's one-hot float families, told by the dtype table's layout (not by name):
     * the top half of a binary32, IEEE half, binary32, anything else. */
    if (d->cls == DT_FLOAT && d->size == 2 && d->ebits == 8) out[FEAT_BF16] = 1;
    else if (d->cls == DT_FLOAT && d->size == 2 && d->ebits == 5) out[FEAT_F16] = 1;
    else if (d->cls == DT_FLOAT && d->size == 4 && d->ebits == 8) out[FEAT_F32] = 1;
    else out[FEAT_OTHER] = 1;
    out[FEAT_ELEM_SIZE] = es / 8.0;
    out[FEAT_LOG2_BYTES] = length ? log2((double)length) / 32 : 0;
    out[FEAT_SMALL] = length > 1024 ? 1024.0 / (double)length : 1;
    if (count) {
        out[FEAT_ZERO_FRAC] = (double)zeros / (double)count;
        out[FEAT_EXP_ENTROPY] = feat_entropy(ehist, ebins, (double)count) / 8;
        out[FEAT_MANT_ENTROPY] = feat_entropy(mhist, 256, (double)count) / 8;
        unsigned distinct = 0;
        for (unsigned i = 0; i < ebins; i++) distinct += ehist[i] != 0;
        if (count > 1) {
            out[FEAT_EXP_DELTA] = feat_entropy(dhist, 4096, (double)(count - 1)) / 8;
            out[FEAT_REPEAT] = (double)repeats / (double)(count - 1);
        }
        out[FEAT_EXP_DISTINCT] = (double)distinct / ebins;
    }
    double sd = 0;
    if (finite_n) {
        double mean = sum / (double)finite_n;
        double var = sumsq / (double)finite_n - mean * mean;
        sd = var > 0 ? sqrt(var) : 0;
        out[FEAT_LOG_STD] = scaled_log2(sd);
        out[FEAT_LOG_MEANABS] = scaled_log2(sumabs / (double)finite_n);
    } else {
        out[FEAT_LOG_STD] = out[FEAT_LOG_MEANABS] = -4;
    }
    if (sd > 0 && blocks) {
        out[FEAT_BLOCK_RANGE] = clamp4((blogs / (double)blocks - log2(sd)) / 8);
        double range = feat_range_extrapolate(hi - lo, finite_n, es ? length / es : 0);
        out[FEAT_RANGE_STD] = clamp4(range > 0 ? log2(range / sd) / 8 : -4);
    }
    out[FEAT_UNDERSAMPLE] = n && length > n ? log2((double)length / (double)n) / 32 : 0;
    out[FEAT_LEVEL] = level / 9.0;
    out[FEAT_LOSSLESS] = 1;
    if (!lossy) return;
    out[FEAT_LOSSLESS] = 0;
    switch (lossy->mode) {
    case QM_AFFINE:
        out[FEAT_M_AFFINE] = 1;
        out[FEAT_BITS] = lossy->bits / 16.0;
        out[FEAT_LOG2_GROUP] = lossy->group ? log2((double)lossy->group) / 24 : 0;
        out[FEAT_SYM] = lossy->sym != 0;
        break;
    case QM_PREL:
        out[FEAT_M_LOG] = 1;
        out[FEAT_LOG_BOUND] = lossy->bound > 0 ? clamp4(-log2(lossy->bound) / 16) : 0;
        break;
    default: /* the grids: abs, rel */
        out[FEAT_M_GRID] = 1;
        out[FEAT_LOG_BOUND] = sd > 0 && lossy->abs_bound > 0 ? clamp4(log2(sd / lossy->abs_bound) / 16) : 0;
        break;
    }
    out[FEAT_CODE_BITS] = lossy->code_bits / 16;
    out[FEAT_EXC_FRAC] = lossy->exc_frac;
    out[FEAT_EST_SAVINGS] = es ? clamp4(1 - lossy->bytes_per_elem / es) : 0;
}
