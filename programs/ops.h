/* ops.h — the operations cli.c runs, one call per operation on its list of files ("-"
 * is standard input): ops.c (-z, -d, -t), list.c (-l, --extract), rebase.c (--rebase).
 * Each prints its own messages ("ckpz: FILE: reason") and returns 0 on success, 1 if
 * any file failed. */
#ifndef CKPZ_OPS_H
#define CKPZ_OPS_H

#include "prefs.h"

int fio_compress_files(const fio_prefs *p, const char *const *files, int n);
int fio_decompress_files(const fio_prefs *p, const char *const *files, int n);
int fio_test_files(const fio_prefs *p, const char *const *files, int n);
int fio_list_files(const fio_prefs *p, const char *const *files, int n);
int fio_extract(const fio_prefs *p, const char *tensor, const char *file);
/* --rebase: each delta FILE.ckpz becomes a stand-alone one (to -o, or in its place). */
int fio_rebase_files(const fio_prefs *p, const char *const *files, int n);

/* After a lossy compression to name: warns about tensors whose changes since the base
 * the bound froze; with -v, lists the errors (list.c). */
void fio_lossy_report(ckpz_ctx *ctx, const fio_prefs *p, const char *name);

#endif /* CKPZ_OPS_H */
