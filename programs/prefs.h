/* prefs.h — what the command line asked for. cli.c parses the arguments into a
 * fio_prefs; every operation reads it, and turns it into library parameters with
 * fio_params. It holds the user's choices only: what an operation decides on its own
 * (the levels --target-bw measures, the base it finds) travels beside it. */
#ifndef CKPZ_PREFS_H
#define CKPZ_PREFS_H

#include <stddef.h>

#include "ckpz.h"

#define FIO_SUFFIX ".ckpz"

#define FIO_MAX_NDIM 64 /* --shape: the container's limit */

typedef struct fio_prefs {
    int level;                 /* 1..9 */
    int threads;               /* 0 = all cores */
    int threads_set;           /* -T given (bench defaults to one thread otherwise) */
    size_t chunk_size;         /* 0 = library default */
    ckpz_input_format format;
    ckpz_dtype raw_dtype;
    uint32_t raw_ndim;         /* --shape: 0 = none */
    uint64_t raw_shape[FIO_MAX_NDIM];
    size_t mem_limit;          /* --memory: 0 = library default */
    int force;                 /* -f */
    int remove_src;            /* --rm */
    int to_stdout;             /* -c */
    const char *out_name;      /* -o, or NULL */
    int verbosity;             /* 0 silent, 1 errors, 2 default, 3+ -v */
    int progress;              /* -1 auto (stderr is a terminal), 0 off, 1 on */
    double bench_seconds;      /* -i#: time per benchmark measurement */
    const char *base_path;     /* --base, or NULL */
    unsigned keyframe_every;   /* --keyframe-every: 0 = no limit on chains */
    const char *policy;        /* lossy rules (ckpz_params.policy), or NULL */
    int stats;                 /* --stats: 0 off, 1 text, 2 JSON (one object per file, stderr) */
    double target_bw;          /* --target-bw: MB/s of the output's link; 0 = not tuning */
    int cpu_budget;            /* --cpu-budget: most threads --target-bw may choose; 0 = all */
    double max_mae;            /* --max-mae: 0 = none */
    ckpz_codec codec;          /* --codec: CKPZ_CODEC_AUTO by default (0) */
} fio_prefs;

void fio_prefs_init(fio_prefs *p);
/* ckpz_params from the preferences (threads as given). */
void fio_params(const fio_prefs *p, ckpz_params *params);

#endif /* CKPZ_PREFS_H */
