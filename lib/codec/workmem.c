/* workmem.c — the working memory a context keeps between calls (workmem.h), and the
 * context itself: creating and freeing one is where that memory begins and ends. */
#include "workmem.h"

#include <stdlib.h>
#include <sys/mman.h>

ckpz_ctx *ckpz_ctx_create(void) { return calloc(1, sizeof(ckpz_ctx)); }

void ckpz_ctx_free(ckpz_ctx *ctx)
{
    if (!ctx) return;
    workmem_free(ctx->wm);
    free(ctx);
}

/* Room a job's output needs. The escape transform (a diff residual's top bytes, chosen
 * from a sample of the chunk) can outgrow chunk_frame_bound where the rest of the chunk
 * escapes far more than the sample: its planes hold up to 2 + (E + 1) * (n / E) + tail
 * <= 2 + 1.5 n bytes (E = 2), in at most E + 3 = 7 planes, each coded in at most its own
 * size. Such a frame would be refused by every decoder (payload over the bound), so
 * encode_job (encode.c) codes the chunk again as opaque bytes (transform none, one
 * plane: at most CTR_FRAME_SIZE + CTR_PLANE_DESC + n), which is what the file gets; the
 * buffer only has to hold the first attempt. */
size_t workmem_out_bound(size_t chunk_size) { return chunk_frame_bound(chunk_size) + chunk_size / 2 + 128; }

struct workmem *workmem_take(ckpz_ctx *ctx)
{
    struct workmem *wm = ctx && ctx->wm ? ctx->wm : calloc(1, sizeof *wm);
    if (ctx) ctx->wm = NULL;
    return wm;
}

void workmem_keep(ckpz_ctx *ctx, struct workmem *wm)
{
    if (ctx && !ctx->wm) ctx->wm = wm;
    else workmem_free(wm);
}

int workmem_scratch(struct workmem *wm, int threads, size_t chunk_size, int kind)
{
    chunk_scratch *s = wm->scratch;
    if (s && s->n >= threads && wm->scratch_chunk >= chunk_size && wm->scratch_kind >= kind) return 0;
    if (s) {
        if (s->n > threads) threads = s->n;
        if (wm->scratch_chunk > chunk_size) chunk_size = wm->scratch_chunk;
        if (wm->scratch_kind > kind) kind = wm->scratch_kind;
    }
    chunk_scratch_free(s);
    wm->scratch = chunk_scratch_create(threads, chunk_size, kind);
    wm->scratch_chunk = chunk_size;
    wm->scratch_kind = kind;
    return wm->scratch ? 0 : -1;
}

size_t workmem_buffers(struct workmem *wm, size_t chunk_size)
{
    if (wm->buf_chunk < chunk_size) {
        for (size_t i = 0; i < wm->nbuf; i++) {
            free(wm->raw[i]);
            free(wm->out[i]);
            wm->raw[i] = wm->out[i] = NULL;
        }
        wm->buf_chunk = chunk_size;
    }
    return wm->buf_chunk;
}

void workmem_lend(struct workmem *wm, size_t i, uint8_t **raw, uint8_t **out)
{
    *raw = *out = NULL;
    if (i >= wm->nbuf) return;
    *raw = wm->raw[i];
    *out = wm->out[i];
    wm->raw[i] = wm->out[i] = NULL;
}

void workmem_return(struct workmem *wm, size_t i, uint8_t *raw, uint8_t *out)
{
    if (i >= wm->nbuf && (raw || out)) {
        size_t n = i + 1;
        uint8_t **r = realloc(wm->raw, n * sizeof *r);
        if (r) wm->raw = r;
        uint8_t **o = r ? realloc(wm->out, n * sizeof *o) : NULL;
        if (o) {
            wm->out = o;
            for (size_t k = wm->nbuf; k < n; k++) wm->raw[k] = wm->out[k] = NULL;
            wm->nbuf = n;
        }
    }
    if (i < wm->nbuf && !wm->raw[i] && !wm->out[i]) {
        wm->raw[i] = raw;
        wm->out[i] = out;
    } else {
        free(raw);
        free(out);
    }
}

ent_ctx *workmem_lists(struct workmem *wm)
{
    if (wm && !wm->lists) wm->lists = ent_ctx_create();
    return wm ? wm->lists : NULL;
}

void workmem_free(struct workmem *wm)
{
    if (!wm) return;
    ent_ctx_free(wm->lists);
    ctr_keep_free(&wm->entries);
    chunk_scratch_free(wm->scratch);
    for (size_t i = 0; i < wm->nbuf; i++) {
        free(wm->raw[i]);
        free(wm->out[i]);
    }
    free(wm->raw);
    free(wm->out);
    free(wm);
}

#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)1 << 20)
#define HUGE_WHOLE ((size_t)4 << 20)
void *workmem_room(size_t n)
{
#ifdef MADV_HUGEPAGE
    void *p = NULL;
    /* below HUGE_WHOLE in whole 2 MiB pages (the room rounded up: one fault where a 2 MB
     * output took ~500), above it the 2 MiB pages n holds */
    size_t r = n < HUGE_WHOLE ? (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE : n;
    if (n >= HUGE_MIN && posix_memalign(&p, HUGE_PAGE, r) == 0) {
        madvise(p, r - r % HUGE_PAGE, MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(n ? n : 1);
}
