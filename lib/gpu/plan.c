/* plan.c — see plan.h: walks a whole .ckpz file in memory front to back, as the
 * streaming decoder (codec/decode.c) does, and sorts its chunks into device work (planes
 * to decode, chunks to merge) and host work (chunks the device path has no kernel for,
 * decoded here at once). Only headers and descriptors are read, plus one CRC-32C pass
 * over each payload; the coded planes themselves are left to the device.
 */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "common/grow.h"
#include "container/container.h"
#include "entropy/entropy.h"
#include "transforms/ids.h"
#include "transforms/planes.h"

typedef struct walk {
    ckpz_ctx *ctx;
    const uint8_t *file;
    gpu_plan *pl;
    size_t cap_rp, cap_mc, cap_hc, cap_host;
    ent_ctx *ec;
    uint8_t *planes; /* chunk_decode's scratch */
} walk;

_Static_assert(GPU_RANS0 == ENT_RANS0 && GPU_RANS0T == ENT_RANS0T, "plan.h's codec ids");

/* 1 when the device path decodes the chunk: no predictor, a byte-plane layout, and
 * every plane stored whole or order-0 rANS coded as codec 2 or codec 11 (codec 2 with
 * its tails in the states; descriptors already bounds-checked). */
static int on_device(const ctr_chunk *c, const uint8_t *desc, unsigned np)
{
    if (c->pred != PRED_NONE || c->xf == XF_QUANT || c->xf == XF_ESC || np != c->nplanes) return 0;
    for (unsigned i = 0; i < np; i++) {
        const uint8_t *d = desc + (size_t)i * CTR_PLANE_DESC;
        if (d[1] | d[2] | d[3] || (d[0] != ENT_STORED && d[0] != ENT_RANS0 && d[0] != ENT_RANS0T)) return 0;
    }
    return 1;
}

static ckpz_error device_chunk(walk *w, const ctr_chunk *c, uint64_t payload, uint64_t out, uint32_t no)
{
    gpu_plan *pl = w->pl;
    size_t sizes[GPU_PLANES_MAX];
    unsigned np = xf_plane_sizes(c->xf, c->esize, c->raw_len, sizes);
    const uint8_t *desc = w->file + payload;
    if (grow_array((void **)&pl->mc, &w->cap_mc, pl->nmc + 1, sizeof *pl->mc) ||
        grow_array((void **)&pl->rp, &w->cap_rp, pl->nrp + np, sizeof *pl->rp))
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    gpu_mchunk *m = &pl->mc[pl->nmc];
    memset(m, 0, sizeof *m);
    m->out = out;
    m->n = c->raw_len;
    m->raw_crc = c->raw_crc;
    m->chunk = no;
    m->xf = c->xf;
    m->esize = c->esize;
    uint64_t at = payload + (uint64_t)np * CTR_PLANE_DESC, end = payload + c->payload_len;
    for (unsigned i = 0; i < np; i++) {
        const uint8_t *d = desc + (size_t)i * CTR_PLANE_DESC;
        uint32_t len = ld32(d + 4);
        if (len > end - at)
            return ctx_fail(w->ctx, CKPZ_ERR_CORRUPT, "chunk %u: plane %u: length %u exceeds the payload", no, i, len);
        if (d[0] == ENT_STORED) {
            if (len != sizes[i])
                return ctx_fail(w->ctx, CKPZ_ERR_CORRUPT, "chunk %u: plane %u (stored): %u bytes, not %zu", no, i, len,
                                sizes[i]);
            m->plane[i] = GPU_FROM_FILE | at;
            pl->stored_planes++;
        } else {
            gpu_rplane *r = &pl->rp[pl->nrp++];
            *r = (gpu_rplane){at, pl->scratch_size, len, (uint32_t)sizes[i], no, (uint16_t)i, d[0]};
            m->plane[i] = pl->scratch_size;
            pl->scratch_size += (sizes[i] + 15) & ~(uint64_t)15;
            pl->rans0_planes++;
        }
        at += len;
    }
    if (at != end)
        return ctx_fail(w->ctx, CKPZ_ERR_CORRUPT, "chunk %u: payload has %llu unused bytes", no,
                        (unsigned long long)(end - at));
    pl->nmc++;
    return CKPZ_OK;
}

static ckpz_error host_chunk(walk *w, const ctr_chunk *c, ckpz_dtype dtype, uint64_t payload, uint64_t out, uint32_t no,
                             uint32_t chunk_size)
{
    gpu_plan *pl = w->pl;
    if (!w->ec) {
        w->ec = ent_ctx_create();
        w->planes = malloc(chunk_planes_bound(chunk_size, 1));
        if (!w->ec || !w->planes) return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    if (grow_array((void **)&pl->hc, &w->cap_hc, pl->nhc + 1, sizeof *pl->hc) ||
        grow_array((void **)&pl->host, &w->cap_host, pl->host_size + c->raw_len, 1))
        return ctx_fail(w->ctx, CKPZ_ERR_NOMEM, "out of memory");
    char why[256];
    ckpz_error err = chunk_decode(w->ec, c, dtype, w->file + payload, NULL, w->planes, pl->host + pl->host_size, why,
                                  sizeof why);
    if (err) return ctx_fail(w->ctx, err, "chunk %u: %s", no, why);
    pl->hc[pl->nhc++] = (gpu_hchunk){out, pl->host_size, c->raw_len, no};
    pl->host_size += c->raw_len;
    return CKPZ_OK;
}

static int by_size(const void *a, const void *b)
{
    const gpu_rplane *x = a, *y = b;
    return x->size < y->size ? 1 : x->size > y->size ? -1 : (x->src > y->src) - (x->src < y->src);
}

static ckpz_error walk_frames(walk *w, size_t size, uint64_t original)
{
    ckpz_ctx *ctx = w->ctx;
    const uint8_t *file = w->file;
    gpu_plan *pl = w->pl;
    ctr_header h;
    ckpz_error err = ctr_header_read(ctx, file, &h);
    if (err) return err;
    if (h.based) return ctx_fail(ctx, CKPZ_ERR_PARAM, "a delta file: the device path restores stand-alone files only");
    unsigned flags = ctr_file_flags(&h);
    size_t max_payload = chunk_frame_bound(h.chunk_size) - CTR_FRAME_SIZE;
    uint64_t pos = CTR_HEADER_SIZE, out = 0;
    size_t ne = 0;
    ckpz_dtype dtype = CKPZ_DTYPE_NONE;
    uint8_t eflags = 0;
    for (;;) {
        if (size - pos < 4)
            return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated at byte %llu", (unsigned long long)pos);
        uint32_t tag = ld32(file + pos);
        if (tag == CTR_TAG_INDEX) break;
        if (tag == CTR_TAG_ENTRY || tag == CTR_TAG_LIST) { /* the chunks that follow are its last entry's */
            uint32_t blen;
            ctr_entry *e;
            size_t n;
            if ((err = ctr_eframe_len(ctx, file + pos, size - pos, flags, size, ne, pos, &blen)) ||
                (err = ctr_eframe_read(ctx, w->ec, file + pos, blen, flags, size, ne, pos, &e, &n)))
                return err;
            dtype = (ckpz_dtype)e[n - 1].dtype;
            eflags = e[n - 1].flags;
            ctr_entries_free(e, n);
            ne += n;
            pos += 12 + (uint64_t)blen;
            continue;
        }
        char what[64];
        uint32_t no = (uint32_t)pl->chunks;
        snprintf(what, sizeof what, "chunk %u", no);
        if (tag != CTR_TAG_CHUNK)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "unknown frame at byte %llu", (unsigned long long)pos);
        if (size - pos < CTR_FRAME_SIZE) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated in %s", what);
        ctr_chunk c;
        if ((err = ctr_chunk_read(ctx, file + pos, h.chunk_size, max_payload, what, &c))) return err;
        uint64_t payload = pos + CTR_FRAME_SIZE;
        if (c.payload_len > size - payload) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated in %s", what);
        if (ne == 0 || c.entry != ne - 1)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: belongs to entry %u, expected %zu", what, c.entry,
                            ne ? ne - 1 : 0);
        if (eflags & CTR_ENTRY_PACKED) /* its bytes are in its owner's chunk */
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: a chunk of a packed entry", what);
        if (c.xf == XF_QUANT && !(eflags & CTR_ENTRY_LOSSY))
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: lossy chunk in a lossless entry", what);
        if (c.pred == PRED_COPY) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: a copy frame in a stand-alone file", what);
        if (c.raw_len > original - out) return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "%s: past the original size", what);
        if (crc32c(0, file + payload, c.payload_len) != c.payload_crc)
            return ctx_fail(ctx, CKPZ_ERR_CHECKSUM, "%s: compressed data checksum mismatch", what);
        size_t sizes[GPU_PLANES_MAX];
        unsigned np = xf_plane_sizes(c.xf, c.esize, c.raw_len, sizes);
        err = np && (size_t)np * CTR_PLANE_DESC <= c.payload_len && on_device(&c, file + payload, np)
                  ? device_chunk(w, &c, payload, out, no)
                  : host_chunk(w, &c, dtype, payload, out, no, h.chunk_size);
        if (err) return err;
        out += c.raw_len;
        pos = payload + c.payload_len;
        pl->chunks++;
    }
    if (out != original)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "the chunks hold %llu bytes, the trailer says %llu",
                        (unsigned long long)out, (unsigned long long)original);
    return CKPZ_OK;
}

ckpz_error gpu_plan_build(ckpz_ctx *ctx, const uint8_t *file, size_t size, gpu_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    uint64_t original;
    ckpz_error err = ckpz_original_size(ctx, file, size, &original); /* header and trailer checksums */
    if (err) return err;
    walk w = {.ctx = ctx, .file = file, .pl = pl};
    pl->original_size = original;
    pl->file_size = size;
    err = walk_frames(&w, size, original);
    ent_ctx_free(w.ec);
    free(w.planes);
    if (err) {
        gpu_plan_free(pl);
        return err;
    }
    if (pl->nrp) qsort(pl->rp, pl->nrp, sizeof *pl->rp, by_size);
    return CKPZ_OK;
}

void gpu_plan_free(gpu_plan *pl)
{
    free(pl->rp);
    free(pl->mc);
    free(pl->hc);
    free(pl->host);
    memset(pl, 0, sizeof *pl);
}
