/* scratch.c — the coders' working memory in an ent_ctx: buffers that grow to the
 * largest plane seen and stay, so that no coder allocates in its hot path. Every coder
 * calls down into these; nothing here calls a coder. */
#include <stdlib.h>
#include <string.h>

#include "ent_internal.h"

int ent_grow(void **buf, size_t *cap, size_t need)
{
    if (*cap >= need) return 0;
    void *nb = realloc(*buf, need);
    if (!nb) return -1;
    *buf = nb;
    *cap = need;
    return 0;
}

uint8_t *ent_scratch(ent_ctx *c, size_t n)
{
    return ent_grow((void **)&c->scratch, &c->scratch_cap, n) ? NULL : c->scratch;
}

uint8_t *ent_cand(ent_ctx *c, size_t n) { return ent_grow((void **)&c->cand, &c->cand_cap, n) ? NULL : c->cand; }

uint8_t *ent_keep(ent_ctx *c, unsigned k, size_t n)
{
    return k >= ENT_KEEP || ent_grow((void **)&c->keep[k], &c->keep_cap[k], n) ? NULL : c->keep[k];
}
