/* predict_cli.c — `ckpz --predict [SETTING] FILE...`: the predicted ratio of each
 * tensor and of the whole file for a setting (level, and the lossy options or policy
 * that compression takes), from samples, without compressing (lib/predict,
 * doc/predict.md).
 *
 * `--predict=features` prints the model's inputs per tensor as TSV instead: it is how
 * bench/train-predictor gets exactly the features the library computes. The model is
 * the library's built-in one unless --model (or CKPZ_PREDICT_MODEL) names a model
 * file. Reads go through pread, so the time depends on the number of tensors, not the
 * file's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CKPZ_EXPERIMENTAL /* ckpz_predict_file */
#include "ckpz.h"
#include "display.h"
#include "predict_cli.h"

typedef struct show {
    int features, no_model;
    int several, first;   /* several files; this is the first */
    const char *file;
    int header_done;      /* printed on the first result, so that an error comes alone */
    uint64_t index;
} show;

static void shape_text(char *b, size_t len, const ckpz_prediction *t)
{
    size_t at = 0;
    at += (size_t)snprintf(b, len, "[");
    for (uint32_t d = 0; d < t->ndim && at < len; d++)
        at += (size_t)snprintf(b + at, len - at, "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
    if (at < len) snprintf(b + at, len - at, "]");
}

static void header(show *s)
{
    if (s->header_done) return;
    s->header_done = 1;
    if (s->features) {
        printf("# %s\noffset\tlength\tdtype\tname", s->file);
        for (unsigned k = 0; k < CKPZ_PREDICT_FEATURES; k++) printf("\t%s", ckpz_predict_feature_name(k));
        printf("\tsavings\n");
    } else {
        if (s->several) printf("%s%s:\n", s->first ? "" : "\n", s->file);
        printf("%5s  %-52s %-6s %-12s %10s  %-13s %9s  %7s\n", "#", "name", "dtype", "shape", "original", "coding",
               "ratio", "savings");
    }
}

static int show_one(void *opaque, const ckpz_prediction *t)
{
    show *s = opaque;
    header(s);
    if (t->dtype == CKPZ_DTYPE_NONE) return 0;
    s->index++;
    if (s->features) {
        printf("%llu\t%llu\t%s\t%s", (unsigned long long)t->offset, (unsigned long long)t->length,
               ckpz_dtype_name(t->dtype), t->name);
        for (unsigned i = 0; i < CKPZ_PREDICT_FEATURES; i++) printf("\t%.9g", t->features[i]);
        if (s->no_model) printf("\t-\n");
        else printf("\t%.6f\n", t->savings);
        return 0;
    }
    char shape[64], h[32];
    shape_text(shape, sizeof shape, t);
    printf("%5llu  %-52s %-6s %-12s %10s  %-13s %8.3fx  %6.1f%%\n", (unsigned long long)s->index, t->name,
           ckpz_dtype_name(t->dtype), shape, fio_human(h, sizeof h, t->length), t->lossy_mode, t->ratio,
           100 * t->savings);
    return 0;
}

int predict_run(const fio_prefs *p, const char *const *files, int n, const predict_opts *o)
{
    int features = o->features;
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_predict_params pp;
    int failed = 0;
    if (!ctx) {
        fputs("ckpz: out of memory\n", stderr);
        return 1;
    }
    ckpz_predict_params_init(&pp);
    pp.level = p->level;
    pp.format = p->format;
    pp.raw_dtype = p->raw_dtype;
    pp.raw_ndim = p->raw_ndim;
    pp.raw_shape = p->raw_ndim ? p->raw_shape : NULL;
    if (p->base_path && p->verbosity >= 1)
        fputs("ckpz: --base is not predicted: the prediction is for stand-alone coding\n", stderr);
    pp.policy = p->policy;
    pp.max_mae = p->max_mae;
    pp.model_path = o->model_path ? o->model_path : getenv("CKPZ_PREDICT_MODEL");
    if (pp.model_path && !pp.model_path[0]) pp.model_path = NULL;
    if (pp.model_path && !strcmp(pp.model_path, "none")) { /* features for training a new model */
        if (!features) {
            fputs("ckpz: --model none needs --predict=features\n", stderr);
            ckpz_ctx_free(ctx);
            return 1;
        }
        pp.model_path = NULL;
        pp.features_only = 1;
    }
    for (int i = 0; i < n; i++) {
        const char *name = files[i];
        struct stat st;
        int fd = strcmp(name, "-") ? open(name, O_RDONLY) : -1;
        if (fd < 0) {
            fprintf(stderr, "ckpz: %s: %s\n", name,
                    strcmp(name, "-") ? strerror(errno) : "--predict needs a file (it reads samples by offset)");
            failed = 1;
            continue;
        }
        if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
            fprintf(stderr, "ckpz: %s: not a regular file\n", name);
            close(fd);
            failed = 1;
            continue;
        }
        unsigned char magic[8];
        ckpz_fd f = {fd, 0, 0};
        if (ckpz_fd_pread(&f, magic, sizeof magic, 0) == 0 && !memcmp(magic, "\211CKPZ\r\n\032", 8)) {
            /* its bytes are already coded: a prediction would describe them, not the checkpoint */
            fprintf(stderr,
                    "ckpz: %s: is a .ckpz file: --predict predicts the ratio of original checkpoints "
                    "(ckpz -l %s shows what this one achieved)\n",
                    name, name);
            close(fd);
            failed = 1;
            continue;
        }
        show s = {features, pp.features_only, n > 1, i == 0, name, 0, 0};
        ckpz_predict_total tot = {.struct_size = sizeof tot};
        double t0 = fio_now();
        ckpz_error e = ckpz_predict_file(ctx, &pp, ckpz_fd_pread, &f, (uint64_t)st.st_size, show_one, &s, &tot);
        double dt = fio_now() - t0;
        close(fd);
        if (e == CKPZ_ERR_PARAM) { /* the model or the policy: the same for every file */
            fprintf(stderr, "ckpz: %s\n", ckpz_ctx_message(ctx)[0] ? ckpz_ctx_message(ctx) : ckpz_error_name(e));
            failed = 1;
            break;
        }
        if (e) {
            fprintf(stderr, "ckpz: %s: %s\n", name,
                    ckpz_ctx_message(ctx)[0] ? ckpz_ctx_message(ctx) : ckpz_error_name(e));
            failed = 1;
            continue;
        }
        char a[32], b[32];
        header(&s);
        if (features) {
            printf("# total\t%llu\t%.0f\t%.6f\n", (unsigned long long)tot.original_bytes, tot.predicted_bytes,
                   tot.ratio);
        } else {
            printf("total: %.2fx  (%s -> %s predicted, %llu tensors, %llu lossy)\n", tot.ratio,
                   fio_human(a, sizeof a, tot.original_bytes),
                   fio_human(b, sizeof b, (unsigned long long)(tot.predicted_bytes + 0.5)),
                   (unsigned long long)tot.tensors, (unsigned long long)tot.lossy_tensors);
        }
        if (p->verbosity >= 3) fprintf(stderr, "ckpz: %s: predicted in %.1f ms\n", name, dt * 1e3);
    }
    fflush(stdout);
    ckpz_ctx_free(ctx);
    return failed;
}
