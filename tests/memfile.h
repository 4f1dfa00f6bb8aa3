/* memfile.h — a .ckpz file held in memory, read through ckpz_archive_open's pread
 * callback (the tests that open archives they built with ckpz_compress_buffer). */
#ifndef CKPZ_TEST_MEMFILE_H
#define CKPZ_TEST_MEMFILE_H

#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} mfile;

/* A ckpz_pread_fn over an mfile: refuses reads past its end. */
static int m_pread(void *v, void *buf, size_t n, uint64_t off)
{
    mfile *f = v;
    if (off > f->n || n > f->n - off) return -1;
    memcpy(buf, f->p + off, n);
    return 0;
}

#endif
