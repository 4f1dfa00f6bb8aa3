/* prefs.c — the command line's defaults, and the library parameters they make. */
#include <string.h>

#include "prefs.h"

void fio_prefs_init(fio_prefs *p)
{
    memset(p, 0, sizeof(*p));
    p->level = CKPZ_LEVEL_DEFAULT;
    p->threads = 0;
    p->format = CKPZ_INPUT_AUTO;
    p->raw_dtype = CKPZ_DTYPE_NONE;
    p->verbosity = 2;
    p->progress = -1;
    p->bench_seconds = 1.0;
}

void fio_params(const fio_prefs *p, ckpz_params *params)
{
    ckpz_params_init(params);
    params->level = p->level;
    params->threads = p->threads;
    params->chunk_size = p->chunk_size;
    params->format = p->format;
    params->raw_dtype = p->raw_dtype;
    params->raw_ndim = p->raw_ndim;
    params->raw_shape = p->raw_ndim ? p->raw_shape : NULL;
    params->mem_limit = p->mem_limit;
    params->policy = p->policy;
    params->max_mae = p->max_mae;
    params->codec = p->codec;
}
