/* display.h — messages, sizes, the clock and the progress line of the command line
 * (display.c). */
#ifndef CKPZ_DISPLAY_H
#define CKPZ_DISPLAY_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>

#include "prefs.h"

/* The running operation's verbosity (fio_prefs.verbosity): what fio_error and fio_warn print. */
void fio_set_verbosity(int v);
int fio_verbosity(void);
/* "ckpz: " + message + newline on stderr: errors at verbosity >= 1, warnings >= 2. */
void fio_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fio_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Human-readable size: "512 B", "7.84 MiB", "12.0 GiB". */
const char *fio_human(char *buf, size_t len, unsigned long long bytes);
/* Seconds on the monotonic clock. */
double fio_now(void);

/* The progress line of one file. The library may report progress from any of its
 * threads: a try-lock keeps one printer at a time and drops updates that would block. */
typedef struct fio_progress {
    pthread_mutex_t lock;
    const char *name;
    double start, last;
    int width;          /* characters of the line on screen, to erase it */
} fio_progress;
/* Starts the line for name; where progress is wanted (--progress, or stderr a
 * terminal) it becomes src's progress callback. */
void fio_progress_start(fio_progress *pg, const char *name, const fio_prefs *p, ckpz_source *src);
/* Erases the line. */
void fio_progress_end(fio_progress *pg);
/* A progress line is on screen: the signal handler ends it with a newline. */
extern volatile sig_atomic_t fio_progress_shown;

#endif /* CKPZ_DISPLAY_H */
