/* filelist.h — `-r`: the files under directories (filelist.c). */
#ifndef CKPZ_FILELIST_H
#define CKPZ_FILELIST_H

#include "prefs.h"

/* The names in in[0..n), each directory among them replaced by the regular files under
 * it, in name order, without following symbolic links: for compression (want_ckpz 0)
 * the files without the .ckpz suffix, else only those with it. *out is malloc'd (free
 * it with fio_list_free); *failed is set when a directory could not be read (reported).
 * 0, or -1 when out of memory. */
int fio_expand_dirs(const fio_prefs *p, int want_ckpz, const char *const *in, int n, char ***out, int *nout,
                    int *failed);
void fio_list_free(char **v, int n);

#endif /* CKPZ_FILELIST_H */
