/* fileio.h — the file side of the ckpz command line: what cli.c decided, applied to
 * files. cli.c parses arguments into a fio_prefs and calls one fio_*_files function per
 * operation; everything that touches the file system (naming outputs, temporary files,
 * refusing terminals, signals, progress, the summaries) lives behind these calls so that
 * the argument parser stays a table of flags. All functions print their own messages
 * ("ckpz: FILE: reason") and return 0 on success, 1 if any file failed.
 */
#ifndef CKPZ_FILEIO_H
#define CKPZ_FILEIO_H

#include <stddef.h>
#include "ckpz.h"

#define FIO_SUFFIX ".ckpz"

typedef struct fio_prefs {
    int level;                 /* 1..9 */
    int threads;               /* 0 = all cores */
    int threads_set;           /* -T given (bench defaults to one thread otherwise) */
    size_t chunk_size;         /* 0 = library default */
    ckpz_input_format format;
    ckpz_dtype raw_dtype;
    size_t mem_limit;          /* --memory: 0 = library default */
    int force;                 /* -f */
    int remove_src;            /* --rm */
    int to_stdout;             /* -c */
    const char *out_name;      /* -o, or NULL */
    int verbosity;             /* 0 silent, 1 errors, 2 default, 3+ -v */
    int progress;              /* -1 auto (stderr is a terminal), 0 off, 1 on */
    double bench_seconds;      /* -i#: time per benchmark measurement */
} fio_prefs;

void fio_prefs_init(fio_prefs *p);
/* ckpz_params from the preferences (threads as given). */
void fio_params(const fio_prefs *p, ckpz_params *params);

/* Removes the current temporary output on SIGINT/SIGTERM/SIGHUP, then dies of the
 * signal as usual. Call once, early. */
void fio_install_signal_handlers(void);

/* "-" is standard input. */
int fio_compress_files(const fio_prefs *p, const char *const *files, int n);
int fio_decompress_files(const fio_prefs *p, const char *const *files, int n);
int fio_test_files(const fio_prefs *p, const char *const *files, int n);
int fio_list_files(const fio_prefs *p, const char *const *files, int n);
int fio_extract(const fio_prefs *p, const char *tensor, const char *file);

/* Reads a whole regular file (or "-") into malloc'd memory; prints the error itself. */
int fio_load_file(const char *path, void **data, size_t *size);

/* "ckpz: " + message + newline on stderr, when verbosity allows (errors: level >= 1). */
void fio_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Human-readable size: "512 B", "7.84 MiB", "12.0 GiB". */
const char *fio_human(char *buf, size_t len, unsigned long long bytes);

#endif /* CKPZ_FILEIO_H */
