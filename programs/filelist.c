/* filelist.c — `-r`: the files under the directories named on the command line.
 *
 * The rules are zstd's: each directory is walked depth first in name order (so that a
 * run is repeatable and its messages come in a predictable order), symbolic links met
 * inside are not followed (a warning names each: following them could leave the tree
 * or loop), and only regular files are taken. ckpz adds the suffix rule that zstd has
 * as --exclude-compressed: compression skips files that already end in .ckpz (the
 * output of the last run, which nobody wants compressed again) and the operations on
 * .ckpz files take only those. Temporary outputs (.NAME.ckpz-PID-HOST-RANDOM.tmp,
 * ckpz_publish_is_temp: another run's output in progress, or a killed one's) are skipped
 * by every operation. Names given as files pass through unchanged, so the
 * rules that apply to them (a .ckpz named for compression is refused) stay the same.
 * The output name of each input (fio_output_name) follows the same suffix rule, and is
 * the one both ckpz and ckpz-mpi use.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "display.h"
#include "filelist.h"
#include "fileio.h" /* ckpz_publish_is_temp (experimental) */

#define MAX_DEPTH 512 /* directories inside directories; deeper trees are refused */

typedef struct list {
    char **v;
    int n, cap;
} list;

static int push(list *l, char *s /* taken */)
{
    if (!s) return -1;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, sizeof(*nv) * (size_t)cap);
        if (!nv) {
            free(s);
            return -1;
        }
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int has_ckpz_suffix(const char *name)
{
    size_t n = strlen(name), s = strlen(FIO_SUFFIX);
    return n > s && strcmp(name + n - s, FIO_SUFFIX) == 0;
}

static char *join(const char *dir, const char *name)
{
    size_t d = strlen(dir), k = strlen(name);
    int slash = d > 0 && dir[d - 1] == '/';
    char *s = malloc(d + k + 2);
    if (!s) return NULL;
    memcpy(s, dir, d);
    if (!slash) s[d++] = '/';
    memcpy(s + d, name, k + 1);
    return s;
}

/* Adds the files under dir to l. -1 only when out of memory; a directory that cannot be
 * read is reported and sets *failed. */
static int walk(const fio_prefs *p, int want_ckpz, const char *dir, int depth, list *l, int *failed)
{
    list names = {NULL, 0, 0};
    DIR *d;
    struct dirent *de;
    int rc = 0;
    if (depth > MAX_DEPTH) {
        if (p->verbosity >= 1)
            fprintf(stderr, "ckpz: %s: directories nested deeper than %d -- ignored\n", dir, MAX_DEPTH);
        *failed = 1;
        return 0;
    }
    if (!(d = opendir(dir))) {
        if (p->verbosity >= 1) fprintf(stderr, "ckpz: %s: %s\n", dir, strerror(errno));
        *failed = 1;
        return 0;
    }
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (ckpz_publish_is_temp(de->d_name)) { /* an output being written (or a dead writer's) */
            if (p->verbosity >= 3) fprintf(stderr, "ckpz: %s/%s: a temporary output -- ignored\n", dir, de->d_name);
            continue;
        }
        if (push(&names, join(dir, de->d_name)) != 0) {
            rc = -1;
            break;
        }
    }
    closedir(d);
    if (rc == 0 && names.n > 1) qsort(names.v, (size_t)names.n, sizeof(*names.v), by_name);
    for (int i = 0; rc == 0 && i < names.n; i++) {
        char *path = names.v[i];
        struct stat st;
        names.v[i] = NULL;
        if (lstat(path, &st) != 0) {
            if (p->verbosity >= 1) fprintf(stderr, "ckpz: %s: %s\n", path, strerror(errno));
            *failed = 1;
        } else if (S_ISLNK(st.st_mode)) {
            if (p->verbosity >= 2) fprintf(stderr, "ckpz: %s: is a symbolic link -- ignored\n", path);
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(p, want_ckpz, path, depth + 1, l, failed);
        } else if (!S_ISREG(st.st_mode)) {
            if (p->verbosity >= 3) fprintf(stderr, "ckpz: %s: not a regular file -- ignored\n", path);
        } else if (has_ckpz_suffix(path) != want_ckpz) {
            if (p->verbosity >= 3)
                fprintf(stderr,
                        want_ckpz ? "ckpz: %s: no %s suffix -- ignored\n"
                                  : "ckpz: %s: already has %s suffix -- ignored\n",
                        path, FIO_SUFFIX);
        } else {
            rc = push(l, path);
            path = NULL;
        }
        free(path);
    }
    fio_list_free(names.v, names.n);
    return rc;
}

int fio_expand_dirs(const fio_prefs *p, int want_ckpz, const char *const *in, int n, char ***out, int *nout,
                    int *failed)
{
    list l = {NULL, 0, 0};
    *out = NULL;
    *nout = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        int rc = strcmp(in[i], "-") && stat(in[i], &st) == 0 && S_ISDIR(st.st_mode)
                     ? walk(p, want_ckpz, in[i], 0, &l, failed)
                     : push(&l, strdup(in[i]));
        if (rc != 0) {
            fio_list_free(l.v, l.n);
            return -1;
        }
    }
    *out = l.v;
    *nout = l.n;
    return 0;
}

void fio_list_free(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

int fio_output_name(const fio_prefs *p, int decompress, int stdout_ok, const char *src, char **dst)
{
    size_t n = strlen(src), s = strlen(FIO_SUFFIX);
    int has = n >= s && strcmp(src + n - s, FIO_SUFFIX) == 0;
    *dst = NULL;
    if (p->to_stdout || (p->out_name && strcmp(p->out_name, "-") == 0)) return 0;
    if (!p->out_name && strcmp(src, "-") == 0) return 0;
    if (!p->out_name && !decompress && has && !p->force) {
        fio_error("%s: already has %s suffix -- ignored (use -f to compress it again)", src, FIO_SUFFIX);
        return 1;
    }
    /* decompression strips the suffix; the rest must be a name */
    if (!p->out_name && decompress && (!has || n == s || src[n - s - 1] == '/')) {
        fio_error("%s: unknown suffix (expected %s; use -o%s to name the output)", src, FIO_SUFFIX,
                  stdout_ok ? " or -c" : "");
        return 1;
    }
    if (p->out_name) *dst = strdup(p->out_name);
    else if ((*dst = malloc(n + s + 1)) != NULL)
        snprintf(*dst, n + s + 1, "%.*s%s", (int)(decompress ? n - s : n), src, decompress ? "" : FIO_SUFFIX);
    if (!*dst) {
        fio_error("%s: out of memory", src);
        return 1;
    }
    return 0;
}
