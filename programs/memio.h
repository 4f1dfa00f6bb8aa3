/* memio.h — ckpz's read, write and pread callbacks over memory, for the CLI (bench.c's
 * timing, --rebase, --target-bw's look at the base) and the bench programs in bench/
 * (bench/memio.h includes this file). */
#ifndef CKPZ_PROGRAMS_MEMIO_H
#define CKPZ_PROGRAMS_MEMIO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A fixed-capacity output: writing past cap fails (the caller sized it). */
typedef struct membuf {
    uint8_t *p;
    size_t n, cap;
} membuf;

static inline int membuf_write(void *opaque, const void *buf, size_t n)
{
    membuf *m = opaque;
    if (n > m->cap - m->n) return -1;
    memcpy(m->p + m->n, buf, n);
    m->n += n;
    return 0;
}

/* ckpz_params.patch over a membuf: rewrites bytes already written. */
static inline int membuf_patch(void *opaque, const void *buf, size_t n, uint64_t off)
{
    membuf *m = opaque;
    if (off > m->n || n > m->n - off) return -1;
    memcpy(m->p + off, buf, n);
    return 0;
}

/* An input in memory: read front to back (memsrc_read, from pos), or at any offset
 * (memsrc_pread, which refuses reads past the end and leaves pos alone). */
typedef struct memsrc {
    const uint8_t *p;
    size_t n, pos;
} memsrc;

static inline ptrdiff_t memsrc_read(void *opaque, void *buf, size_t n)
{
    memsrc *m = opaque;
    if (n > m->n - m->pos) n = m->n - m->pos;
    memcpy(buf, m->p + m->pos, n);
    m->pos += n;
    return (ptrdiff_t)n;
}

static inline int memsrc_pread(void *opaque, void *buf, size_t n, uint64_t off)
{
    const memsrc *m = opaque;
    if (off > m->n || n > m->n - off) return -1;
    memcpy(buf, m->p + off, n);
    return 0;
}

#endif
