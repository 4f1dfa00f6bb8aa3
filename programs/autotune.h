/* autotune.h — --target-bw: the levels and threads for the output's link, measured on
 * samples of each file and chosen by the library's ckpz_tune (lib/predict/autotune.c,
 * tune.c); autotune.c gives it the file and the CLI's options. */
#ifndef CKPZ_AUTOTUNE_H
#define CKPZ_AUTOTUNE_H

#include <stddef.h>

#include "prefs.h"

/* What a file is compressed with instead of the preferences' level and threads. */
typedef struct autotune_choice {
    int level, threads;
    char *policy; /* malloc'd: lossless rules, one level per role of tensor, for
                     ckpz_params.policy where the user gave none; NULL when one level
                     serves the file */
} autotune_choice;

/* Measures the candidate levels on samples of the file at path, role by role (Adam's
 * exp_avg_sq, exp_avg, gradients, the rest), and fills *out with the configuration that
 * saves fastest through p->target_bw MB/s within p->cpu_budget threads (-v prints the
 * measurements and the cost model). base (base_size bytes, the original of --base, or
 * NULL): the tensors found in it are measured as deltas against the same windows of it.
 * Returns 0, or -1 when the file cannot be read or compressed (the caller keeps its
 * settings; out->policy is NULL). */
int autotune_choose(const fio_prefs *p, const char *path, const void *base, size_t base_size, autotune_choice *out);

#endif
