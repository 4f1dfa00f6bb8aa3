/* predict_api.c — ckpz_predict_file: describe the file with the format readers, sample
 * each tensor through pread, and run the model on the features.
 *
 * The candidate setting applies per tensor as in the compressor: the policy's first
 * matching rule, after the safe defaults (policy_match), its level if it sets one, and
 * nothing lossy for a segment of open length; a lossy rule puts the sample through the
 * quantiser (lossy_sample.c).
 *
 * The input is never streamed: only the header prefix the reader asks for, the member
 * headers of piecewise formats (torch zip, npz) and the sample windows are read, so the
 * time depends on the number of tensors, not on the file's size. The sample of a file
 * is capped as a whole (sample_budget), so a file of thousands of tensors still costs
 * a few tens of MB of reads at most. Opaque bytes are predicted as stored.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "codec/codec.h"
#include "common/ctx.h"
#include "common/dtype.h"
#include "formats/formats.h"
#include "predict/features.h"
#include "predict/lossy_sample.h"
#include "predict/mlp.h"
#include "transforms/policy.h"

#define PRED_SAMPLE_DEFAULT (64u << 10)
#define PRED_SAMPLE_MIN (4u << 10)
#define PRED_SAMPLE_MAX (16u << 20)
#define PRED_BUDGET_DEFAULT (16u << 20)
/* Of the sample, what the quantiser codes for a lossy setting: it is slower than the
 * feature pass (pointwise-rel: ~300 MB/s), so a file's tensors share half the budget,
 * each getting at least 8 KiB. */
#define PRED_LOSSY_MIN (8u << 10)
#define PRED_TENSOR_MIN (16u << 10)
#define PRED_MODEL_MAX (4u << 20)
#define PRED_DESCRIBE_FIRST (64u << 10)
#define PRED_RESUME_FIRST (4u << 10)
/* Fixed costs the model does not learn (it predicts the savings of the payload): each
 * chunk's frame, and the container's index record per entry and header and trailer per
 * file. Measured with ckpz -l -v on the corpus (doc/predict.md). */
#define PRED_CHUNK_OVERHEAD 64.0
#define PRED_CHUNK_BYTES (1u << 20)
#define PRED_ENTRY_OVERHEAD 40.0
#define PRED_FILE_OVERHEAD 96.0
#define PRED_OPAQUE_SAMPLE (64u << 10)

void ckpz_predict_params_init(ckpz_predict_params *p)
{
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->level = CKPZ_LEVEL_DEFAULT;
    p->format = CKPZ_INPUT_AUTO;
    p->raw_dtype = CKPZ_DTYPE_NONE;
}

const char *ckpz_predict_feature_name(unsigned i) { return feat_name(i); }

/* Reads the model text (the file, or the built-in copy) and parses it. */
static ckpz_error load_model(ckpz_ctx *ctx, const char *path, mlp *m)
{
    char why[256];
    if (!path) {
        if (mlp_parse(mlp_builtin_text, strlen(mlp_builtin_text), FEAT_COUNT, m, why, sizeof why))
            return ctx_fail(ctx, CKPZ_ERR_INTERNAL, "built-in prediction model: %s", why);
        return CKPZ_OK;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return ctx_fail(ctx, CKPZ_ERR_PARAM, "%s: cannot open the prediction model: %s", path, strerror(errno));
    char *text = malloc(PRED_MODEL_MAX + 1);
    if (!text) {
        fclose(f);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory reading the prediction model");
    }
    size_t n = fread(text, 1, PRED_MODEL_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(text);
        return ctx_fail(ctx, CKPZ_ERR_READ, "%s: read error", path);
    }
    if (n > PRED_MODEL_MAX) {
        free(text);
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "%s: model file larger than %u bytes", path, PRED_MODEL_MAX);
    }
    int r = mlp_parse(text, n, FEAT_COUNT, m, why, sizeof why);
    free(text);
    if (r) return ctx_fail(ctx, CKPZ_ERR_PARAM, "%s: bad prediction model: %s", path, why);
    return CKPZ_OK;
}

/* Makes buf hold at least n bytes. */
static int reserve(uint8_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap) return 0;
    uint8_t *nb = realloc(*buf, n);
    if (!nb) return -1;
    *buf = nb;
    *cap = n;
    return 0;
}

/* The format driver's source: pread into the shared buffer. */
typedef struct pread_src {
    ckpz_pread_fn pr;
    void *po;
    uint64_t size;
    uint8_t **buf;
    size_t *cap;
} pread_src;

static fmt_status pread_fetch(void *opaque, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof)
{
    pread_src *s = opaque;
    uint64_t left = at < s->size ? s->size - at : 0;
    size_t have = left < want ? (size_t)left : want;
    if (reserve(s->buf, s->cap, have ? have : 1)) return FMT_NOMEM;
    if (have && s->pr(s->po, *s->buf, have, at)) return FMT_READ;
    *p = *s->buf;
    *len = have;
    *eof = have == left;
    return FMT_DONE;
}

/* Savings of a tensor whose element type the model was not trained on (its float
 * families are BF16, F16 and F32; see features.c): measured by coding each sampled
 * window as a lossless chunk, as the compressor would. 0, or -1 when out of memory. */
static int measured_savings(int level, ckpz_dtype dtype, const uint8_t *buf, const size_t *wlen, unsigned nw,
                            double *sv)
{
    size_t most = 0, in = 0, out = 0;
    for (unsigned k = 0; k < nw; k++)
        if (wlen[k] > most) most = wlen[k];
    ent_ctx *ec = ent_ctx_create();
    uint8_t *planes = malloc(most ? most : 1), *frame = malloc(chunk_frame_bound(most));
    int rc = ec && planes && frame ? 0 : -1;
    for (unsigned k = 0; !rc && k < nw; k++) {
        uint32_t crc;
        size_t f = chunk_encode(ec, level, dtype, 0, buf + in, wlen[k], NULL, planes, frame, &crc, NULL);
        in += wlen[k];
        out += f > CTR_FRAME_SIZE ? f - CTR_FRAME_SIZE : 0;
    }
    if (!rc) *sv = in ? 1 - (double)out / (double)in : 0;
    free(frame);
    free(planes);
    ent_ctx_free(ec);
    return rc;
}

static ckpz_error predict_file(ckpz_ctx *ctx, const ckpz_predict_params *params, ckpz_pread_fn pr, void *pr_opaque,
                               uint64_t file_size, ckpz_predict_fn each, void *each_opaque, ckpz_predict_total *total);

ckpz_error ckpz_predict_file(ckpz_ctx *ctx, const ckpz_predict_params *params, ckpz_pread_fn pr, void *pr_opaque,
                             uint64_t file_size, ckpz_predict_fn each, void *each_opaque, ckpz_predict_total *total)
{
    ctx_clear(ctx);
    if (total && OUT_CHECK(ctx, total, "ckpz_predict_total")) return CKPZ_ERR_PARAM;
    ckpz_predict_total mine = {.struct_size = sizeof mine};
    ckpz_error err = predict_file(ctx, params, pr, pr_opaque, file_size, each, each_opaque, &mine);
    if (total) OUT_GIVE(total, &mine);
    return err;
}

static ckpz_error predict_file(ckpz_ctx *ctx, const ckpz_predict_params *params, ckpz_pread_fn pr, void *pr_opaque,
                               uint64_t file_size, ckpz_predict_fn each, void *each_opaque, ckpz_predict_total *total)
{
    ckpz_predict_params p;
    ckpz_predict_params_init(&p);
    if (params) {
        if (params->struct_size < offsetof(ckpz_predict_params, model_path) + sizeof(const char *) ||
            params->struct_size > sizeof p)
            return ctx_fail(ctx, CKPZ_ERR_PARAM,
                            "ckpz_predict_params: unknown struct_size %zu (call ckpz_predict_params_init)",
                            params->struct_size);
        memcpy(&p, params, params->struct_size);
    }
    if (!pr || file_size == CKPZ_SIZE_UNKNOWN)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "prediction needs a pread callback and the file's size");
    if (p.level < CKPZ_LEVEL_MIN || p.level > CKPZ_LEVEL_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "level %d not in %d..%d", p.level, CKPZ_LEVEL_MIN, CKPZ_LEVEL_MAX);
    if (!p.sample_bytes) p.sample_bytes = PRED_SAMPLE_DEFAULT;
    if (p.sample_bytes < PRED_SAMPLE_MIN || p.sample_bytes > PRED_SAMPLE_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "sample size %zu not in %u..%u", p.sample_bytes, PRED_SAMPLE_MIN,
                        PRED_SAMPLE_MAX);
    if (!p.sample_budget) p.sample_budget = PRED_BUDGET_DEFAULT;

    if (!(p.max_mae >= 0) || !isfinite(p.max_mae)) return ctx_fail(ctx, CKPZ_ERR_PARAM, "max_mae must be >= 0");
    if (p.raw_ndim && raw_shape_check(ctx, p.format, p.raw_dtype, p.raw_ndim, p.raw_shape)) return CKPZ_ERR_PARAM;

    mlp m;
    memset(&m, 0, sizeof m);
    fmt_list segs;
    memset(&segs, 0, sizeof segs);
    uint8_t *buf = NULL;
    size_t cap = 0;
    policy *pol = NULL;
    lossy_sampler *ls = NULL;
    ckpz_error err = p.features_only ? CKPZ_OK : load_model(ctx, p.model_path, &m);
    if (err) goto done;
    if (p.policy) {
        char why[256];
        if (!(pol = policy_parse(p.policy, p.max_mae, why, sizeof why))) {
            err = ctx_fail(ctx, CKPZ_ERR_PARAM, "%s", why);
            goto done;
        }
        if (!(ls = lossy_sampler_create())) {
            err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    pread_src ps = {pr, pr_opaque, file_size, &buf, &cap};
    fmt_source src = {pread_fetch, &ps, file_size};
    fmt_request rq = {.format = p.format, .raw_dtype = p.raw_dtype, .raw_ndim = p.raw_ndim, .raw_shape = p.raw_shape};
    char why[256] = "";
    fmt_status fs = fmt_drive_describe(&src, PRED_DESCRIBE_FIRST, &rq, &segs, why, sizeof why);
    if (fs != FMT_DONE) {
        err = fmt_fail(ctx, fs, &rq, why);
        goto done;
    }

    /* The tensors share the budget: each gets an equal share of it, within
     * PRED_TENSOR_MIN..sample_bytes. Counted on the first description only (piecewise
     * formats reveal their tensors as they go); it only sets the sample size. */
    size_t ntensors = 0;
    for (size_t i = 0; i < segs.n; i++) ntensors += segs.seg[i].dtype != CKPZ_DTYPE_NONE;
    size_t per = ntensors ? p.sample_budget / ntensors : p.sample_bytes;
    if (per < PRED_TENSOR_MIN) per = PRED_TENSOR_MIN;
    if (per > p.sample_bytes) per = p.sample_bytes;
    size_t lossy_per = ntensors ? p.sample_budget / 2 / ntensors : per;
    if (lossy_per < PRED_LOSSY_MIN) lossy_per = PRED_LOSSY_MIN;
    if (lossy_per > per) lossy_per = per;

    double predicted = PRED_FILE_OVERHEAD;
    for (size_t i = 0; i < segs.n; i++) {
        fmt_segment *s = &segs.seg[i];
        if (s->resume) {
            if ((fs = fmt_drive_resume(&src, PRED_RESUME_FIRST, &segs, why, sizeof why)) != FMT_DONE) {
                err = fmt_fail(ctx, fs, &rq, why);
                goto done;
            }
            i--; /* the list changed from here on */
            continue;
        }
        if (s->offset >= file_size) continue;
        uint64_t len = s->length == FMT_LEN_OPEN || s->length > file_size - s->offset ? file_size - s->offset
                                                                                      : s->length;
        if (len == 0) continue;
        ckpz_prediction t;
        memset(&t, 0, sizeof t);
        t.struct_size = sizeof t;
        t.name = s->name ? s->name : "";
        t.dtype = s->dtype;
        t.ndim = s->ndim;
        t.shape = s->shape;
        t.offset = s->offset;
        t.length = len;
        t.lossy_mode = quant_mode_name(QM_NONE);
        double chunks = (double)((len + PRED_CHUNK_BYTES - 1) / PRED_CHUNK_BYTES);
        double payload; /* predicted compressed bytes without the frames */
        if (s->dtype == CKPZ_DTYPE_NONE) {
            /* headers, pickles, padding: zstd -1 on their start tells */
            size_t n = len < PRED_OPAQUE_SAMPLE ? (size_t)len : PRED_OPAQUE_SAMPLE;
            size_t bound = ZSTD_compressBound(n);
            payload = (double)len;
            if (reserve(&buf, &cap, n + bound)) {
                err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory sampling opaque bytes");
                goto done;
            }
            if (pr(pr_opaque, buf, n, s->offset)) {
                err = ctx_fail(ctx, CKPZ_ERR_READ, "read error at byte %llu", (unsigned long long)s->offset);
                goto done;
            }
            size_t c = ZSTD_compress(buf + n, bound, buf, n, 1);
            if (!ZSTD_isError(c) && c < n) payload = (double)len * (double)c / (double)n;
            t.sampled = n;
        } else {
            uint64_t woff[FEAT_WINDOWS];
            size_t wlen[FEAT_WINDOWS];
            unsigned nw;
            feat_windows(len, ckpz_dtype_size(s->dtype), per, woff, wlen, &nw);
            size_t got = 0;
            for (unsigned k = 0; k < nw; k++) got += wlen[k];
            if (reserve(&buf, &cap, got ? got : 1)) {
                err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory sampling tensor '%s'", t.name);
                goto done;
            }
            got = 0;
            for (unsigned k = 0; k < nw; k++) {
                if (pr(pr_opaque, buf + got, wlen[k], s->offset + woff[k])) {
                    err = ctx_fail(ctx, CKPZ_ERR_READ, "read error in tensor '%s' at byte %llu", t.name,
                                   (unsigned long long)(s->offset + woff[k]));
                    goto done;
                }
                got += wlen[k];
            }
            t.sampled = got;
            /* the setting for this tensor, as the compressor derives it */
            quant_spec spec = policy_match(pol, s->name, s->dtype, s->ndim, s->shape, s->optim ? s->optim->beta2 : 0);
            feat_lossy fl;
            int lossy = 0;
            if (spec.mode != QM_NONE && s->length != FMT_LEN_OPEN) {
                lossy = lossy_sample(ls, &spec, s->dtype, s->ndim, s->shape, len, buf, woff, wlen, nw, lossy_per, &fl);
                if (lossy < 0) {
                    err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory sampling tensor '%s'", t.name);
                    goto done;
                }
            }
            t.lossy = lossy;
            if (lossy) t.lossy_mode = quant_mode_name(spec.mode);
            int level = spec.level ? spec.level : p.level; /* a rule's 'level N', as in the compressor */
            feat_compute(s->dtype, len, buf, got, level, lossy ? &fl : NULL, t.features);
            double sv = p.features_only ? 0 : mlp_forward(&m, t.features);
            if (!p.features_only && !lossy && t.features[FEAT_OTHER] > 0 && dtype_is_float(s->dtype) &&
                measured_savings(level, s->dtype, buf, wlen, nw, &sv)) {
                err = ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory sampling tensor '%s'", t.name);
                goto done;
            }
            /* the payload's savings: never much worse than stored raw, never all */
            if (!(sv < 0.999)) sv = 0.999;
            if (sv < -8) sv = -8;
            payload = (double)len * (1 - sv);
            if (total) {
                total->tensors++;
                total->lossy_tensors += lossy;
                total->tensor_bytes += len;
            }
        }
        double comp = payload + chunks * PRED_CHUNK_OVERHEAD;
        t.savings = 1 - comp / (double)len;
        t.ratio = (double)len / comp;
        predicted += comp + PRED_ENTRY_OVERHEAD;
        if (each && each(each_opaque, &t)) {
            err = ctx_fail(ctx, CKPZ_ERR_ABORTED, "aborted");
            goto done;
        }
    }
    if (total) {
        total->original_bytes = file_size;
        total->predicted_bytes = predicted;
        total->ratio = predicted > 0 ? (double)file_size / predicted : 1;
    }
done:
    free(buf);
    fmt_list_free(&segs);
    mlp_free(&m);
    policy_free(pol);
    lossy_sampler_free(ls);
    return err;
}
