/* grow.h — amortised growth of a heap array (doubling), for the tables the writer and
 * the stream reader build as they go. */
#ifndef CKPZ_GROW_H
#define CKPZ_GROW_H

#include <stdlib.h>

/* Makes *p hold at least `need` elements of `elem` bytes; 0 on success, -1 if out of
 * memory (then *p is unchanged). */
static inline int grow_array(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    if (n > (size_t)-1 / elem) return -1;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

#endif
