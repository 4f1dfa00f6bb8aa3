/* room.c — memory for bytes written once and in bulk (internal.h). */
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

/* On 2 MiB pages where the kernel gives them: on a VM here, faulting a 100 MB
 * compressed state in 4 KiB pages took longer than coding it. */
void *mr_room(size_t n)
{
    void *p = NULL;
#ifdef MADV_HUGEPAGE
    if (n >= (8u << 20)) {
        if (posix_memalign(&p, 2u << 20, n) != 0) return NULL;
        madvise(p, n, MADV_HUGEPAGE); /* advice: nothing to do when refused */
        return p;
    }
#endif
    return malloc(n ? n : 1);
}
