/* prefault.c — see prefault.h. */
#include "prefault.h"

#include <stdint.h>

#if defined(__linux__)
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

/* Below this, a chunk's few faults cost about what the call does. */
#define PREFAULT_MIN ((size_t)64 << 10)

#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
/* 0 not asked yet, else the page size, or 1 when the kernel lacks the advice (it checks
 * the advice before the range: a call on an empty range tells) */
static size_t g_page;

static size_t probe(void)
{
    long v = sysconf(_SC_PAGESIZE);
    size_t pg = v > 1 ? (size_t)v : 4096;
    static char here[1];
    uintptr_t a = (uintptr_t)here & ~(uintptr_t)(pg - 1);
    if (madvise((void *)a, 0, MADV_POPULATE_WRITE) != 0) pg = 1;
    __atomic_store_n(&g_page, pg, __ATOMIC_RELAXED);
    return pg;
}

void mem_prefault(void *p, size_t n)
{
    if (n < PREFAULT_MIN) return;
    int saved = errno;
    size_t pg = __atomic_load_n(&g_page, __ATOMIC_RELAXED);
    if (!pg) pg = probe();
    if (pg > 1) {
        /* whole pages inside the range only: a page shared with bytes before or after it
         * may belong to another mapping, which a write fault must not touch */
        uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1);
        uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(pg - 1);
        unsigned char in = 1; /* the first page there already: memory in use, not fresh */
        if (b > a && mincore((void *)a, pg, &in) == 0 && !(in & 1))
            (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
    }
    errno = saved;
}
#else
void mem_prefault(void *p, size_t n) { (void)p, (void)n; }
#endif
