/* predict_cli.c — `ckpz --predict FILE...`: the predicted ratio of each tensor and of
 * the whole file, from samples, without compressing (lib/predict, doc/predict.md).
 *
 * `--predict=features` prints the model's inputs per tensor as TSV instead: it is how
 * bench/train-predictor gets exactly the features the library computes. The model is
 * the library's built-in one unless CKPZ_PREDICT_MODEL names a model file. Reads go
 * through pread, so the time depends on the number of tensors, not the file's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpz.h"
#include "fileio.h"

int predict_files(const fio_prefs *p, const char *const *files, int n, int features);

static int file_pread(void *opaque, void *dst, size_t n, uint64_t off)
{
    int fd = *(int *)opaque;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

typedef struct show {
    int features;
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

static int show_one(void *opaque, const ckpz_prediction *t)
{
    show *s = opaque;
    if (t->dtype == CKPZ_DTYPE_NONE) return 0;
    s->index++;
    if (s->features) {
        printf("%llu\t%llu\t%s\t%s", (unsigned long long)t->offset, (unsigned long long)t->length,
               ckpz_dtype_name(t->dtype), t->name);
        for (unsigned i = 0; i < CKPZ_PREDICT_FEATURES; i++) printf("\t%.9g", t->features[i]);
        printf("\t%.6f\n", t->savings);
        return 0;
    }
    char shape[64], h[32];
    shape_text(shape, sizeof shape, t);
    printf("%5llu  %-52s %-6s %-12s %10s  %7.3fx  %6.1f%%\n", (unsigned long long)s->index, t->name,
           ckpz_dtype_name(t->dtype), shape, fio_human(h, sizeof h, t->length), t->ratio, 100 * t->savings);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int predict_files(const fio_prefs *p, const char *const *files, int n, int features)
{
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
    pp.model_path = getenv("CKPZ_PREDICT_MODEL");
    if (pp.model_path && !pp.model_path[0]) pp.model_path = NULL;
    for (int i = 0; i < n; i++) {
        const char *name = files[i];
        struct stat st;
        int fd = strcmp(name, "-") ? open(name, O_RDONLY) : -1;
        if (fd < 0) {
            fprintf(stderr, "ckpz: %s: %s\n", name, strcmp(name, "-") ? strerror(errno) : "--predict needs a file (it reads samples by offset)");
            failed = 1;
            continue;
        }
        if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
            fprintf(stderr, "ckpz: %s: not a regular file\n", name);
            close(fd);
            failed = 1;
            continue;
        }
        show s = {features, 0};
        ckpz_predict_total tot;
        if (features) {
            printf("# %s\noffset\tlength\tdtype\tname", name);
            for (unsigned k = 0; k < CKPZ_PREDICT_FEATURES; k++) printf("\t%s", ckpz_predict_feature_name(k));
            printf("\tsavings\n");
        } else {
            if (n > 1) printf("%s%s:\n", i ? "\n" : "", name);
            printf("%5s  %-52s %-6s %-12s %10s  %8s  %7s\n", "#", "name", "dtype", "shape", "original", "ratio",
                   "savings");
        }
        double t0 = now();
        ckpz_error e = ckpz_predict_file(ctx, &pp, file_pread, &fd, (uint64_t)st.st_size, show_one, &s, &tot);
        double dt = now() - t0;
        close(fd);
        if (e) {
            fprintf(stderr, "ckpz: %s: %s\n", name, ckpz_ctx_message(ctx)[0] ? ckpz_ctx_message(ctx) : ckpz_error_name(e));
            failed = 1;
            continue;
        }
        char a[32], b[32];
        if (features) {
            printf("# total\t%llu\t%.0f\t%.6f\n", (unsigned long long)tot.original_bytes, tot.predicted_bytes, tot.ratio);
        } else {
            printf("total: %.2fx  (%s -> %s predicted, %llu tensors)\n", tot.ratio,
                   fio_human(a, sizeof a, tot.original_bytes),
                   fio_human(b, sizeof b, (unsigned long long)(tot.predicted_bytes + 0.5)),
                   (unsigned long long)tot.tensors);
        }
        if (p->verbosity >= 3) fprintf(stderr, "ckpz: %s: predicted in %.1f ms\n", name, dt * 1e3);
    }
    fflush(stdout);
    ckpz_ctx_free(ctx);
    return failed;
}
