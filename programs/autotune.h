/* autotune.h — --target-bw: levels and threads for the output's link (autotune.c). */
#ifndef CKPZ_AUTOTUNE_H
#define CKPZ_AUTOTUNE_H

#include "fileio.h"

/* Measures the candidate levels on samples of the file at path, role by role (Adam's
 * exp_avg_sq, exp_avg, gradients, the rest), and sets *threads, *level and, when the
 * roles are best served by different levels and p->policy is NULL, *policy (a malloc'd
 * policy of lossless rules with those levels, for ckpz_params.policy; else NULL) to
 * the configuration that saves fastest through p->target_bw MB/s within p->cpu_budget
 * threads (-v prints the cost model). base (base_size bytes, the original of --base, or
 * NULL): the tensors found in it are measured as deltas against the same windows of it.
 * Returns 0, or -1 when the file cannot be read or compressed (the caller keeps its
 * settings). */
int autotune_choose(const fio_prefs *p, const char *path, const void *base, size_t base_size, int *level,
                    int *threads, char **policy);

#endif
