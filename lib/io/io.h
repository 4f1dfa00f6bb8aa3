/* io.h — what a call that takes a source and a sink makes of them (ends.c). */
#ifndef CKPZ_IO_H
#define CKPZ_IO_H

#include "common/ctx.h"

/* Resolves params (params_resolve) into *p and copies src and dst (either may be NULL:
 * no callbacks) into *s and *k, checking their struct_size. The hooks that take effect
 * end up in *p, where the stages read them: the source's progress and the sink's patch
 * (with the sink's opaque pointer) when set, else the deprecated params->progress and
 * params->patch a caller of the callback calls still gives. */
ckpz_error io_resolve(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const ckpz_sink *dst,
                      ckpz_params *p, ckpz_source *s, ckpz_sink *k);

#endif
