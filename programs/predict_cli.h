/* predict_cli.h — `ckpz --predict` (predict_cli.c). */
#ifndef CKPZ_PREDICT_CLI_H
#define CKPZ_PREDICT_CLI_H

#include "prefs.h"

typedef struct predict_opts {
    int features;           /* --predict=features: the model's inputs as TSV */
    const char *model_path; /* --model FILE; NULL: $CKPZ_PREDICT_MODEL, else the built-in model */
} predict_opts;

/* Each FILE's predicted ratio per tensor and in total for the setting in p (level,
 * policy, max_mae, format), or the features. 0, or 1 when a file failed. A bad model
 * or policy stops at the first file. */
int predict_run(const fio_prefs *p, const char *const *files, int n, const predict_opts *o);

#endif
