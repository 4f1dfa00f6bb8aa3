/* lend.c — what room a sink lends and what bytes a source shows (io.h): the one place
 * that tells, so that the coders ask here and never test an end's callbacks themselves.
 *
 * A sink lends room for a chunk's bytes (ckpz_lend_fn, ckpz_experimental.h): a sink of
 * ckpz_sink_lender through its ckpz_lender (the pump under the library's fd sink, the
 * CLI's output), a sink in memory through ckpz_mem_lend (room past its bytes, so only
 * for its next write: CKPZ_LEND_NEXT). The compressor codes frames and the decompressor
 * decodes chunks into that room, which the sink then takes without a copy. A source in
 * memory shows its bytes (io_source_view): the compressor reads each chunk where it lies.
 * A view has no public counterpart of the lender's kind: a source is read ahead by the
 * planner while earlier chunks are still being coded, so a view must hold every byte
 * left until the call ends, which only memory the caller keeps can promise (a pump's
 * ring reuses its buffers); ckpz_source_mem is that case. Kept apart from ends.c, which
 * the adapters call, and from mem.c, which it calls: no call circle between them.
 */
#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL /* ckpz_lender, ckpz_mem_lend */
#endif
#include <stddef.h>
#include <stdint.h>

#include "io/io.h"

ckpz_lend_fn io_sink_lend(const ckpz_sink *k, void **opaque, int in_turn)
{
    if (k->write == ckpz_mem_write) { /* a sink in memory lends its next bytes */
        *opaque = k->opaque;
        return in_turn && k->opaque ? ckpz_mem_lend : NULL;
    }
    const ckpz_lender *l = k->write == ckpz_lender_write ? k->opaque : NULL;
    size_t before_flags = offsetof(ckpz_lender, flags);
    if (!l || (l->struct_size != sizeof *l && l->struct_size != before_flags) || !l->lend) return NULL;
    unsigned flags = l->struct_size == sizeof *l ? l->flags : 0;
    if ((flags & CKPZ_LEND_NEXT) && !in_turn) return NULL;
    *opaque = l->opaque;
    return l->lend;
}

/* A view's reads move its position on without copying (the chunker passes over them). */
static ptrdiff_t mem_skip(void *opaque, size_t n)
{
    ckpz_mem *m = opaque;
    size_t left = m->pos < m->size ? m->size - m->pos : 0;
    if (n > left) n = left;
    m->pos += n;
    return (ptrdiff_t)n;
}

const uint8_t *io_source_view(const ckpz_source *s, ptrdiff_t (**skip)(void *opaque, size_t n))
{
    const ckpz_mem *m = s->opaque;
    /* a source that cuts reads short (step) is there to test resume points: read */
    if (s->read != ckpz_mem_read || !m || m->step || m->limit || !m->data || m->pos > m->size) return NULL;
    *skip = mem_skip;
    return (const uint8_t *)m->data + m->pos;
}
