/* memfile.h — the tests' and fuzz harnesses' memory I/O: the library's own memory
 * adapter (ckpz_mem, include/ckpz.h: ckpz_mem_read, _pread, _write, _patch), made in one
 * expression. */
#ifndef CKPZ_TEST_MEMFILE_H
#define CKPZ_TEST_MEMFILE_H

#include <stddef.h>

#include "ckpz.h"

/* n bytes at p to read (ckpz_mem_read, ckpz_mem_pread); step > 0 caps each read (odd-sized
 * short reads). */
static inline ckpz_mem mem_in(const void *p, size_t n, size_t step)
{
    return (ckpz_mem){.data = (void *)p, .size = n, .step = step};
}

/* A writer into cap bytes at p (ckpz_mem_write, ckpz_mem_patch): writing past cap fails
 * and sets full. */
static inline ckpz_mem mem_out(void *p, size_t cap) { return (ckpz_mem){.data = p, .capacity = cap}; }

#endif
