/* memio.h — what bench/membench.c and bench/deltabench.c share: ckpz's read and write
 * callbacks over memory (so that only codec time is measured) and a clock. Each bench
 * is one C file built by the scripts with `cc ... bench/X.c`; this header sits beside
 * them. */
#ifndef CKPZ_BENCH_MEMIO_H
#define CKPZ_BENCH_MEMIO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* A fixed-capacity output: writing past cap fails (the bench sized it). */
typedef struct {
    unsigned char *p;
    size_t n, cap;
} membuf;

static int membuf_write(void *opaque, const void *buf, size_t n)
{
    membuf *m = opaque;
    if (n > m->cap - m->n) return -1;
    memcpy(m->p + m->n, buf, n);
    m->n += n;
    return 0;
}

/* ckpz_params.patch over a membuf: rewrites bytes already written. */
static int membuf_patch(void *opaque, const void *buf, size_t n, uint64_t off)
{
    membuf *m = opaque;
    if (off > m->n || n > m->n - off) return -1;
    memcpy(m->p + off, buf, n);
    return 0;
}

/* An input read front to back. */
typedef struct {
    const unsigned char *p;
    size_t n, pos;
} memsrc;

static ptrdiff_t memsrc_read(void *opaque, void *buf, size_t n)
{
    memsrc *m = opaque;
    if (n > m->n - m->pos) n = m->n - m->pos;
    memcpy(buf, m->p + m->pos, n);
    m->pos += n;
    return (ptrdiff_t)n;
}

/* Seconds on a clock (CLOCK_MONOTONIC for wall time, CLOCK_THREAD_CPUTIME_ID ...). */
static double clk(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
