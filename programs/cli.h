/* cli.h — the ckpz command line (cli.c), shared by the front ends that run it: ckpz
 * (main.c) and ckpz-mpi (mpi/cli.c). The options, usage, checks and messages are one;
 * what each operation does is the front end's, handed over as a table, so that a front
 * end is a table and a main(), with no second build of cli.c. */
#ifndef CKPZ_CLI_H
#define CKPZ_CLI_H

#include "predict_cli.h"
#include "prefs.h"

/* The operations of a front end. Each prints its own messages ("ckpz: FILE: reason") and
 * returns 0 on success, 1 if any file failed (ops.h says what ckpz's do). */
typedef struct cli_ops {
    int (*compress)(const fio_prefs *p, const char *const *files, int n);   /* -z */
    int (*decompress)(const fio_prefs *p, const char *const *files, int n); /* -d */
    int (*test)(const fio_prefs *p, const char *const *files, int n);       /* -t */
    int (*list)(const fio_prefs *p, const char *const *files, int n);       /* -l */
    int (*extract)(const fio_prefs *p, const char *tensor, const char *file); /* --extract */
    int (*rebase)(const fio_prefs *p, const char *const *files, int n);     /* --rebase */
    int (*bench)(const fio_prefs *p, const char *const *files, int n);      /* -b */
    int (*predict)(const fio_prefs *p, const char *const *files, int n, const predict_opts *o); /* --predict */
} cli_ops;

/* Parses argv (usage errors exit 2 before any file is touched) and runs the operation
 * asked for through ops, on the files named (standard input when none; -r's walk).
 * Returns the exit status: 0, 1 when a file failed, 2 on a usage error. */
int cli_main(int argc, char **argv, const cli_ops *ops);

#endif /* CKPZ_CLI_H */
