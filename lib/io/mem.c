/* mem.c — the library's read, pread, write and patch callbacks over memory (ckpz_mem,
 * include/ckpz.h), and the source and sink made of them.
 *
 * One adapter serves every in-memory use in the tree: the one-shot calls (buffer.c,
 * archive.c), the CLI's benchmark, tuner and --rebase, the bench programs and the
 * tests. The sink has the three kinds of room callers need: a buffer of the caller's
 * (a write past it fails), one grown with realloc, and a limit past the buffer up to
 * which bytes are counted but not kept, which is how ckpz_compress_into learns the size
 * an output needs without writing past the caller's memory. The sink lends the room past
 * its bytes (ckpz_mem_lend, a ckpz_lend_fn): a chunk is coded or restored straight into
 * the output and its write is counted, not copied. A write it did not lend (a frame
 * coded on another thread) is copied with streaming stores from 64 KiB on
 * (common/copy.h): 3-6% of two-thread compression's CPU on the corpus's weights and
 * gradients. A source's step cuts reads short, so that tests reach every resume point
 * of the readers behind it.
 */
#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL /* ckpz_mem_lend */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/copy.h"

/* Bytes [0, n) of m that hold data: a sink that counted past its buffer kept only that. */
static size_t kept(const ckpz_mem *m) { return m->limit && m->size > m->capacity ? m->capacity : m->size; }

ptrdiff_t ckpz_mem_read(void *opaque, void *buf, size_t n)
{
    ckpz_mem *m = opaque;
    size_t have = kept(m);
    size_t left = m->pos < have ? have - m->pos : 0;
    if (m->step && n > m->step) n = m->step;
    if (n > left) n = left;
    if (n) memcpy(buf, (const uint8_t *)m->data + m->pos, n);
    m->pos += n;
    return (ptrdiff_t)n;
}

int ckpz_mem_pread(void *opaque, void *buf, size_t n, uint64_t off)
{
    const ckpz_mem *m = opaque;
    size_t have = kept(m);
    if (off > have || n > have - off) return -1;
    if (n) memcpy(buf, (const uint8_t *)m->data + off, n);
    return 0;
}

/* Room for n more bytes at m->size: grows a growing sink. 0, or -1 (full set). */
static int room(ckpz_mem *m, size_t n)
{
    size_t limit = m->grow ? SIZE_MAX : m->limit ? m->limit : m->capacity;
    if (m->size > limit || n > limit - m->size) {
        m->full = 1;
        return -1;
    }
    if (m->grow && n > m->capacity - m->size) {
        size_t cap = m->capacity > SIZE_MAX / 2 ? SIZE_MAX : 2 * m->capacity;
        if (cap < m->size + n) cap = m->size + n;
        if (cap < 4096) cap = 4096;
        void *p = realloc(m->data, cap);
        if (!p) {
            m->full = 1;
            return -1;
        }
        m->data = p;
        m->capacity = cap;
    }
    return 0;
}

int ckpz_mem_write(void *opaque, const void *buf, size_t n)
{
    ckpz_mem *m = opaque;
    if (room(m, n) != 0) return -1;
    if (n && m->size <= m->capacity && n <= m->capacity - m->size) { /* else only counted */
        uint8_t *at = (uint8_t *)m->data + m->size;
        if (buf != at) mem_copy_far(at, (const uint8_t *)buf, n); /* else lent (ckpz_mem_lend): the bytes are there */
    }
    m->size += n;
    return 0;
}

/* The room past the bytes kept: a lend of the sink's next bytes (CKPZ_LEND_NEXT). A
 * failed lend leaves full unset: the write, of fewer bytes than n, may still fit. */
void *ckpz_mem_lend(void *opaque, size_t n)
{
    ckpz_mem *m = opaque;
    int full = m->full;
    if (!m->grow && (m->size > m->capacity || n > m->capacity - m->size)) return NULL; /* not kept */
    if (room(m, n) != 0) {
        m->full = full;
        return NULL;
    }
    return (uint8_t *)m->data + m->size;
}

int ckpz_mem_patch(void *opaque, const void *buf, size_t n, uint64_t off)
{
    ckpz_mem *m = opaque;
    if (off > m->size || n > m->size - off) return -1; /* only bytes already written */
    if (off + n <= m->capacity) {
        if (n) memcpy((uint8_t *)m->data + off, buf, n);
    } else if (!m->limit) {
        return -1; /* a sink without room for what it holds: not one ckpz_mem_write made */
    }
    return 0;
}

void ckpz_source_mem(ckpz_source *s, ckpz_mem *m)
{
    ckpz_source_init(s);
    s->read = ckpz_mem_read;
    s->pread = ckpz_mem_pread;
    s->opaque = m;
    s->size = m->size;
}

void ckpz_sink_mem(ckpz_sink *s, ckpz_mem *m)
{
    ckpz_sink_init(s);
    s->write = ckpz_mem_write;
    s->patch = ckpz_mem_patch;
    s->opaque = m;
}
