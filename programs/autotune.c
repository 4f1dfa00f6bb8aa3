/* autotune.c — --target-bw: the CLI's side of ckpz_tune (lib/predict/autotune.c, which
 * measures and chooses): the input file as a source, the CLI's options as the params,
 * and -v's table on stderr. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPZ_EXPERIMENTAL /* ckpz_tune */
#include "autotune.h"

static int to_stderr(void *opaque, const void *buf, size_t n)
{
    const char *path = opaque;
    fprintf(stderr, "%s: %.*s", path, (int)n, (const char *)buf);
    return 0;
}

int autotune_choose(const fio_prefs *p, const char *path, const void *base, size_t base_size, autotune_choice *out)
{
    ckpz_fd fd = {-1, 0, 0};
    struct stat st;
    ckpz_source src;
    ckpz_params params;
    ckpz_tune_result r = {.struct_size = sizeof r};
    int rc = -1;
    ckpz_ctx *ctx = ckpz_ctx_create();
    out->policy = NULL;
    if (!ctx || (fd.fd = open(path, O_RDONLY)) < 0 || fstat(fd.fd, &st) != 0) goto out;
    ckpz_source_init(&src);
    ckpz_source_fd(&src, &fd, (uint64_t)st.st_size);
    fio_params(p, &params);
    params.base = base;
    params.base_size = base ? base_size : 0;
    if (ckpz_tune(ctx, &params, &src, p->target_bw, p->cpu_budget, &r, p->verbosity >= 3 ? to_stderr : NULL,
                  (void *)path) != CKPZ_OK)
        goto out;
    out->level = r.level;
    out->threads = r.threads;
    if (r.policy[0] && !(out->policy = strdup(r.policy))) goto out;
    rc = 0;
out:
    if (fd.fd >= 0) close(fd.fd);
    ckpz_ctx_free(ctx);
    return rc;
}
