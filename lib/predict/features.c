/* features.c — per-tensor features from sampled windows (see features.h).
 *
 * One pass over the sample: each element is split into its exponent field and its top
 * mantissa bits (histograms for the entropies) and decoded to a double (zeros, mean
 * |x|, std). Integer types use their top byte as the "exponent" and the next byte as
 * the "mantissa", which is what a byte-plane coder sees of them. Scaled so that every
 * feature is of order 1 before the model's own normalisation.
 */
#include <math.h>
#include <string.h>

#include "common/bytes.h"
#include "predict/features.h"

static const char *const names[FEAT_COUNT] = {
    "dtype_bf16", "dtype_f16", "dtype_f32", "dtype_other", "elem_size", "log2_bytes", "small",
    "zero_frac", "log_std", "log_mean_abs", "exp_entropy", "mant_entropy", "exp_distinct",
    "level", "lossless", "mode_param",
};

const char *feat_name(unsigned i) { return i < FEAT_COUNT ? names[i] : NULL; }

void feat_windows(uint64_t length, unsigned esize, size_t budget, uint64_t off[FEAT_WINDOWS],
                  size_t len[FEAT_WINDOWS], unsigned *n)
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

/* Bits per symbol of a histogram over `total` symbols. */
static double entropy(const uint32_t *h, size_t bins, double total)
{
    if (total <= 0) return 0;
    double s = 0;
    for (size_t i = 0; i < bins; i++)
        if (h[i]) s += h[i] * log2((double)h[i]);
    double e = log2(total) - s / total;
    return e < 0 ? 0 : e;
}

/* A small float of ebits exponent and mbits mantissa bits (f16, f8) to double;
 * returns 0 for Inf/NaN (their exponent field is all ones), setting *finite = 0. */
static double small_float(uint32_t v, unsigned ebits, unsigned mbits, int *finite)
{
    uint32_t e = (v >> mbits) & ((1u << ebits) - 1), m = v & ((1u << mbits) - 1);
    int bias = (1 << (ebits - 1)) - 1;
    double x;
    *finite = 1;
    if (e == (1u << ebits) - 1 && ebits == 5) { /* f16, e5m2: Inf/NaN; e4m3 has no Inf */
        *finite = 0;
        return 0;
    }
    if (e == 0) x = ldexp((double)m, 1 - bias - (int)mbits);
    else x = ldexp(1.0 + (double)m / (double)(1u << mbits), (int)e - bias);
    return (v >> (ebits + mbits)) & 1 ? -x : x;
}

static double scaled_log2(double v)
{
    if (!(v > 0)) return -4;
    double l = log2(v) / 32;
    return l < -4 ? -4 : l > 4 ? 4 : l;
}

void feat_compute(ckpz_dtype t, uint64_t length, const uint8_t *p, size_t n, int level,
                  double out[FEAT_COUNT])
{
    unsigned es = ckpz_dtype_size(t);
    size_t count = es ? n / es : 0;
    unsigned ebins = 256;
    uint64_t zeros = 0, finite_n = 0;
    double sum = 0, sumsq = 0, sumabs = 0;
    uint32_t ehist[2048], mhist[256];
    memset(ehist, 0, sizeof ehist);
    memset(mhist, 0, sizeof mhist);
    memset(out, 0, sizeof(double) * FEAT_COUNT);

    for (size_t i = 0; i < count; i++) {
        const uint8_t *q = p + i * es;
        double x;
        int finite = 1;
        uint32_t e, m;
        switch (t) {
        case CKPZ_DTYPE_BF16: {
            uint32_t v = ld16(q);
            e = (v >> 7) & 0xFF;
            m = v & 0x7F;
            uint32_t w = v << 16;
            float f;
            memcpy(&f, &w, 4);
            x = f;
            finite = e != 0xFF;
            break;
        }
        case CKPZ_DTYPE_F32: {
            uint32_t v = ld32(q);
            e = (v >> 23) & 0xFF;
            m = (v >> 15) & 0xFF;
            float f;
            memcpy(&f, &v, 4);
            x = f;
            finite = e != 0xFF;
            break;
        }
        case CKPZ_DTYPE_F16: {
            uint32_t v = ld16(q);
            e = (v >> 10) & 0x1F;
            m = (v >> 2) & 0xFF;
            x = small_float(v, 5, 10, &finite);
            ebins = 32;
            break;
        }
        case CKPZ_DTYPE_F64: {
            uint64_t v = ld64(q);
            e = (uint32_t)(v >> 52) & 0x7FF;
            m = (uint32_t)(v >> 44) & 0xFF;
            memcpy(&x, &v, 8);
            finite = e != 0x7FF;
            ebins = 2048;
            break;
        }
        case CKPZ_DTYPE_F8E4M3:
            e = (q[0] >> 3) & 0xF;
            m = q[0] & 7;
            x = small_float(q[0], 4, 3, &finite);
            finite = finite && (q[0] & 0x7F) != 0x7F;
            ebins = 16;
            break;
        case CKPZ_DTYPE_F8E5M2:
            e = (q[0] >> 2) & 0x1F;
            m = q[0] & 3;
            x = small_float(q[0], 5, 2, &finite);
            ebins = 32;
            break;
        case CKPZ_DTYPE_I8: x = (int8_t)q[0]; e = q[0]; m = 0; break;
        case CKPZ_DTYPE_U8:
        case CKPZ_DTYPE_BOOL: x = q[0]; e = q[0]; m = 0; break;
        case CKPZ_DTYPE_I16: x = (int16_t)ld16(q); e = q[1]; m = q[0]; break;
        case CKPZ_DTYPE_U16: x = ld16(q); e = q[1]; m = q[0]; break;
        case CKPZ_DTYPE_I32: x = (int32_t)ld32(q); e = q[3]; m = q[2]; break;
        case CKPZ_DTYPE_U32: x = ld32(q); e = q[3]; m = q[2]; break;
        case CKPZ_DTYPE_I64: x = (double)(int64_t)ld64(q); e = q[7]; m = q[6]; break;
        case CKPZ_DTYPE_U64: x = (double)ld64(q); e = q[7]; m = q[6]; break;
        default: x = q[0]; e = q[0]; m = 0; break;
        }
        ehist[e]++;
        mhist[m]++;
        if (!finite) continue;
        finite_n++;
        if (x == 0) zeros++;
        sum += x;
        sumsq += x * x;
        sumabs += fabs(x);
    }

    switch (t) {
    case CKPZ_DTYPE_BF16: out[FEAT_BF16] = 1; break;
    case CKPZ_DTYPE_F16: out[FEAT_F16] = 1; break;
    case CKPZ_DTYPE_F32: out[FEAT_F32] = 1; break;
    default: out[FEAT_OTHER] = 1; break;
    }
    out[FEAT_ELEM_SIZE] = es / 8.0;
    out[FEAT_LOG2_BYTES] = length ? log2((double)length) / 32 : 0;
    out[FEAT_SMALL] = length > 1024 ? 1024.0 / (double)length : 1;
    if (count) {
        out[FEAT_ZERO_FRAC] = (double)zeros / (double)count;
        out[FEAT_EXP_ENTROPY] = entropy(ehist, ebins, (double)count) / 8;
        out[FEAT_MANT_ENTROPY] = entropy(mhist, 256, (double)count) / 8;
        unsigned distinct = 0;
        for (unsigned i = 0; i < ebins; i++) distinct += ehist[i] != 0;
        out[FEAT_EXP_DISTINCT] = (double)distinct / ebins;
    }
    if (finite_n) {
        double mean = sum / (double)finite_n;
        double var = sumsq / (double)finite_n - mean * mean;
        out[FEAT_LOG_STD] = scaled_log2(var > 0 ? sqrt(var) : 0);
        out[FEAT_LOG_MEANABS] = scaled_log2(sumabs / (double)finite_n);
    } else {
        out[FEAT_LOG_STD] = out[FEAT_LOG_MEANABS] = -4;
    }
    out[FEAT_LEVEL] = level / 9.0;
    out[FEAT_LOSSLESS] = 1;
    out[FEAT_MODE_PARAM] = 0;
}
