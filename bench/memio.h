/* memio.h — what the bench programs share beside the library's memory adapter (ckpz_mem,
 * in ckpz.h, keeps the I/O in memory so that only codec time is measured): a clock. Each
 * bench is one C file built by the scripts with `cc ... bench/X.c`; this header sits
 * beside them. */
#ifndef CKPZ_BENCH_MEMIO_H
#define CKPZ_BENCH_MEMIO_H

#include <time.h>

/* Seconds on a clock (CLOCK_MONOTONIC for wall time, CLOCK_THREAD_CPUTIME_ID ...). */
static double clk(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
