/* room.c — memory for bytes written once and in bulk (internal.h). */
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

/* On 2 MiB pages as far as the library's rule allows (ckpz_huge_span: those free, where
 * a fault would compact memory to make one): on a VM here, faulting a 100 MB compressed
 * state in 4 KiB pages took longer than coding it. */
void *mr_room(size_t n)
{
    void *p = NULL;
#ifdef MADV_HUGEPAGE
    size_t span = n >= (8u << 20) ? ckpz_huge_span(n) : 0;
    if (span) {
        if (posix_memalign(&p, 2u << 20, n) != 0) return NULL;
        madvise(p, span, MADV_HUGEPAGE); /* advice: nothing to do when refused */
        return p;
    }
#endif
    return malloc(n ? n : 1);
}
