/* filelist.h — the names of a run's files (filelist.c): `-r`'s walk of directories and
 * the output name of each input, for ckpz and ckpz-mpi alike. */
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

/* The output of input src, named as zstd names it: -o's name; FILE -> FILE.ckpz
 * (compression; a name already ending in .ckpz only with -f), FILE.ckpz -> FILE
 * (decompress: another suffix, or nothing before it, is refused); NULL for standard
 * output (-c, -o -, or src "-"). *dst is malloc'd or NULL. 0, or 1 after printing why
 * src has no output (the hint names -c only where the caller takes it: stdout_ok). */
int fio_output_name(const fio_prefs *p, int decompress, int stdout_ok, const char *src, char **dst);

#endif /* CKPZ_FILELIST_H */
