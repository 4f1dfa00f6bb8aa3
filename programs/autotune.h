/* autotune.h — --target-bw: level and threads for the output's link (autotune.c). */
#ifndef CKPZ_AUTOTUNE_H
#define CKPZ_AUTOTUNE_H

#include "fileio.h"

/* Measures the candidate levels on the start of the file at path and sets *level and
 * *threads to the configuration that saves fastest through p->target_bw MB/s within
 * p->cpu_budget threads (-v prints the cost model). Returns 0, or -1 when the file
 * cannot be read or compressed (the caller keeps its settings). */
int autotune_choose(const fio_prefs *p, const char *path, int *level, int *threads);

#endif
