/* io.h — what a call that takes a source and a sink makes of them (ends.c, lend.c;
 * fdpump.c). */
#ifndef CKPZ_IO_H
#define CKPZ_IO_H

#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL /* ckpz_lender */
#endif
#include "ckpz.h" /* after the define: brings in ckpz_experimental.h where ckpz.h came before */
#include "common/ctx.h"

/* Resolves params (params_resolve) into *p and copies src and dst (either may be NULL:
 * no callbacks) into *s and *k, checking their struct_size. The hooks that take effect
 * end up in *p, where the stages read them: the source's progress and the sink's patch
 * (with the sink's opaque pointer) when set, else the deprecated params->progress and
 * params->patch a caller of the callback calls still gives. */
ckpz_error io_resolve(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                      ckpz_params *p, ckpz_source *s, ckpz_sink *k);

/* The lend call of a sink (ckpz_experimental.h: one made by ckpz_sink_lender, or a sink
 * in memory: ckpz_mem_lend) and its opaque pointer (into *opaque), or NULL: the sink
 * lends nothing to this caller. in_turn: the caller lends one room at a time and writes
 * it back as its next write, so that a sink lending its next bytes (CKPZ_LEND_NEXT)
 * lends too. The one place that tells what a sink can lend (lend.c): the coders ask it. */
ckpz_lend_fn io_sink_lend(const ckpz_sink *k, void **opaque, int in_turn);

/* The bytes of a source that shows them (one over memory: ckpz_source_mem, or
 * ckpz_mem_read as a callback), from its position to its end, and in *skip a read that
 * passes over them without a copy; else NULL (read it). They stay valid for the call. */
const uint8_t *io_source_view(const ckpz_source *s, ptrdiff_t (**skip)(void *opaque, size_t n));

/* A call's fd sink written behind (fdpump.c): io_pump_begin puts a pump under a sink of
 * ckpz_sink_fd on a regular file (and its patch hook in *p) where
 * ckpz_pump_wanted(p->threads), its buffers of room bytes where the call lends that
 * much (a compression's frame bound; 0: the default); io_pump_end joins the thread, on
 * every path, and returns err, or a write error the drain met. */
typedef struct io_pumps {
    ckpz_fd *wfd;              /* the caller's */
    struct ckpz_pump *wp;      /* ckpz_experimental.h */
    uint64_t direct; /* bytes written before a write-behind started */
    int wtried;      /* none could start: the caller writes */
    size_t size;     /* the pump's buffers */
    ckpz_lender lender; /* the sink the call writes to: lends the pump's buffers */
} io_pumps;
void io_pump_begin(io_pumps *x, ckpz_params *p, ckpz_sink *k, size_t room);
ckpz_error io_pump_end(ckpz_ctx *ctx, io_pumps *x, ckpz_error err);

#endif
