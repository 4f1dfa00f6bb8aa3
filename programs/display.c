/* display.c — what the command line prints besides the bytes: error and warning
 * lines ("ckpz: FILE: reason", as verbosity allows), sizes for humans, and the progress
 * line on stderr. Nothing here touches a file: the operations and the file layer call
 * down into it, so any of them can report without the others. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "display.h"

static int g_display = 2; /* verbosity of the running operation */
volatile sig_atomic_t fio_progress_shown;

void fio_set_verbosity(int v) { g_display = v; }
int fio_verbosity(void) { return g_display; }

void fio_error(const char *fmt, ...)
{
    va_list ap;
    if (g_display < 1) return;
    fputs("ckpz: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void fio_warn(const char *fmt, ...)
{
    va_list ap;
    if (g_display < 2) return;
    fputs("ckpz: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

const char *fio_human(char *buf, size_t len, unsigned long long bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = -1;
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", bytes);
        return buf;
    }
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    /* three significant digits, like zstd */
    if (v >= 100.0) snprintf(buf, len, "%.0f %s", v, units[u]);
    else if (v >= 10.0) snprintf(buf, len, "%.1f %s", v, units[u]);
    else snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

double fio_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- progress --------------------------------------------------------------------- */
static int progress_enabled(const fio_prefs *p)
{
    if (p->progress >= 0) return p->progress;
    return p->verbosity >= 2 && isatty(STDERR_FILENO);
}

static int on_progress(void *opaque, uint64_t done, uint64_t total)
{
    fio_progress *pg = opaque;
    double t;
    char line[256], h[32];
    int n;
    if (pthread_mutex_trylock(&pg->lock) != 0) return 0;
    t = fio_now();
    if (t - pg->last < 0.1) {
        pthread_mutex_unlock(&pg->lock);
        return 0;
    }
    pg->last = t;
    fio_human(h, sizeof(h), done);
    if (total != CKPZ_SIZE_UNKNOWN && total > 0)
        n = snprintf(line, sizeof(line), "%.40s : %5.1f%%  %s  %.1f MB/s", pg->name,
                     100.0 * (double)done / (double)total, h,
                     (double)done / 1e6 / (t - pg->start > 1e-9 ? t - pg->start : 1e-9));
    else
        n = snprintf(line, sizeof(line), "%.40s : %s  %.1f MB/s", pg->name, h,
                     (double)done / 1e6 / (t - pg->start > 1e-9 ? t - pg->start : 1e-9));
    if (n < 0) n = 0;
    if (n >= (int)sizeof(line)) n = (int)sizeof(line) - 1;
    fprintf(stderr, "\r%s%*s", line, pg->width > n ? pg->width - n : 0, "");
    fflush(stderr);
    if (n > pg->width) pg->width = n;
    fio_progress_shown = 1;
    pthread_mutex_unlock(&pg->lock);
    return 0;
}

void fio_progress_start(fio_progress *pg, const char *name, const fio_prefs *p, ckpz_source *src)
{
    memset(pg, 0, sizeof(*pg));
    pthread_mutex_init(&pg->lock, NULL);
    pg->name = name;
    pg->start = fio_now();
    pg->last = pg->start; /* first line after 0.1 s: fast files print nothing */
    if (progress_enabled(p)) {
        src->progress = on_progress;
        src->progress_opaque = pg;
    }
}

void fio_progress_end(fio_progress *pg)
{
    pthread_mutex_lock(&pg->lock);
    if (pg->width > 0) {
        fprintf(stderr, "\r%*s\r", pg->width, "");
        fflush(stderr);
    }
    fio_progress_shown = 0;
    pthread_mutex_unlock(&pg->lock);
    pthread_mutex_destroy(&pg->lock);
}
