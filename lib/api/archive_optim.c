/* archive_optim.c — ckpz_archive_read_optim: Adam's beta2 of a .ckpz file's optimizer
 * state, for listings (ckpz -l).
 *
 * The compressor gives auto each optimizer state tensor's beta2 from the param group
 * that lists it (pickle.c, policy_match); the file stores the bounds it coded with, not
 * why. A torch.save file's pickle is kept in the .ckpz file (lossless, as every opaque
 * byte), so the listing reads the same param groups from the restored pickle with the
 * same reader: what it shows is what a compression of that content was given (an auto
 * rule's own `beta2 B` is not recorded and not shown). Only the bytes before the first
 * tensor are restored (the pickle is the archive's first member), at most 64 MiB.
 */
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "common/ctx.h"
#include "formats/pickle.h"

#define OPTIM_PREFIX_MAX (64u << 20)

static int by_name(const void *x, const void *y)
{
    return strcmp((*(const pkl_storage *const *)x)->name, (*(const pkl_storage *const *)y)->name);
}

/* a->optim from the storages of st (each entry to the storage of its name). */
static int map_entries(ckpz_archive *a, pkl_storages *st)
{
    size_t n = 0;
    const pkl_storage **s = malloc((st->n ? st->n : 1) * sizeof *s);
    if (!s || !(a->optim = calloc(a->ne ? a->ne : 1, sizeof *a->optim))) {
        free(s);
        return -1;
    }
    for (size_t i = 0; i < st->n; i++)
        if (st->s[i].optim) s[n++] = &st->s[i];
    qsort(s, n, sizeof *s, by_name);
    for (size_t i = 0; i < a->ne && n; i++) {
        if (a->e[i].dtype == CKPZ_DTYPE_NONE) continue;
        pkl_storage key = {.name = a->e[i].name};
        const pkl_storage *kp = &key, **f = bsearch(&kp, s, n, sizeof *s, by_name);
        if (f) a->optim[i] = (*f)->optim;
    }
    free(s);
    return 0;
}

ckpz_error ckpz_archive_read_optim(ckpz_ctx *ctx, ckpz_archive *a)
{
    ctx_clear(ctx);
    if (a->optim || a->info.format != CKPZ_INPUT_TORCH) return CKPZ_OK;
    uint64_t end = a->info.original_size;
    for (size_t i = 0; i < a->ne; i++)
        if (a->e[i].dtype != CKPZ_DTYPE_NONE) {
            end = a->e[i].offset;
            break;
        }
    if (end > OPTIM_PREFIX_MAX || end < 30) return CKPZ_OK;
    uint8_t *buf = malloc((size_t)end);
    if (!buf) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    ckpz_span span = {0, end, buf};
    ckpz_progress_fn progress = a->progress;
    a->progress = NULL;
    ckpz_error e = ckpz_archive_read(ctx, a, &span, 1);
    a->progress = progress;
    if (e != CKPZ_OK) {
        free(buf);
        return e;
    }
    pkl_storages *st = calloc(1, sizeof *st);
    pkl_status ps = st ? pkl_torch_archive(buf, (size_t)end, st) : PKL_NOMEM;
    free(buf);
    if (ps == PKL_OK) {
        a->optim_st = st;
        if (map_entries(a, st)) ps = PKL_NOMEM;
    } else {
        free(st);
    }
    if (ps == PKL_NOMEM) {
        if (a->optim_st) pkl_storages_free(a->optim_st);
        free(a->optim_st);
        a->optim_st = NULL;
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    return CKPZ_OK; /* a pickle the reader does not follow: nothing to show */
}
