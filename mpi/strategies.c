/* strategies.c — seed 001's ways for many ranks to share one checkpoint, as calls
 * (ckpz_mpi.h): the root compresses and broadcasts the compressed bytes, which every
 * other rank verifies and decodes (ckpz_mpi_bcast; with a base every rank holds, the
 * delta against the last shared state); or every rank holds its copy already (data-
 * parallel replicas), the ranks compress it together, each its share, and compare
 * checksums instead of moving it (ckpz_mpi_compress_same). bench/mpi_strategies
 * measures them against MPI_Bcast of the raw bytes. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BCAST_PIECE (1u << 30) /* MPI counts are ints */

static void bcast_bytes(MPI_Comm comm, void *buf, uint64_t n, int root)
{
    for (uint64_t at = 0; at < n; at += BCAST_PIECE)
        MPI_Bcast((char *)buf + at, (int)(n - at < BCAST_PIECE ? n - at : BCAST_PIECE), MPI_BYTE, root, comm);
}

ckpz_error ckpz_mpi_bcast(ckpz_ctx *caller, MPI_Comm comm, const ckpz_params *params, int root, void *data, size_t size,
                          uint64_t *moved)
{
    run r;
    mr_init(&r, comm, caller, NULL);
    ckpz_ctx *ctx = r.ctx;
    ckpz_mem packed = {0};
    unsigned long long clen = 0;
    if (!ctx) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (r.rank == root && !r.err && !(packed.data = mr_room(packed.capacity = ckpz_compress_bound(size))))
        mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (r.rank == root && !r.err) {
        ckpz_mem in = {.data = data, .size = size};
        ckpz_source src;
        ckpz_sink dst;
        ckpz_source_mem(&src, &in);
        ckpz_sink_mem(&dst, &packed);
        ckpz_error e = ckpz_compress_io(ctx, params, &src, &dst, NULL);
        if (e) mr_fail_ctx(&r, e, ctx);
        clen = packed.size;
    }
    if (mr_agree(&r)) goto done;
    MPI_Bcast(&clen, 1, MPI_UNSIGNED_LONG_LONG, root, comm);
    if (r.rank != root && !(packed.data = mr_room((size_t)clen))) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (mr_agree(&r)) goto done;
    bcast_bytes(comm, packed.data, clen, root);
    if (r.rank != root) {
        ckpz_mem in = {.data = packed.data, .size = (size_t)clen}, out = {.data = data, .capacity = size};
        ckpz_source src;
        ckpz_sink dst;
        ckpz_source_mem(&src, &in);
        ckpz_sink_mem(&dst, &out);
        ckpz_error e = ckpz_decompress_io(ctx, params, &src, &dst, NULL);
        if (e) mr_fail_ctx(&r, e, ctx);
        else if (out.size != size)
            mr_fail(&r, CKPZ_ERR_PARAM, "the root's state is %zu bytes, this rank holds room for %zu", out.size, size);
    }
    mr_agree(&r);
    if (moved) *moved = clen;
done:
    free(packed.data);
    return mr_finish(&r);
}

typedef struct same_arg {
    const uint8_t *data;
} same_arg;

/* The plan check of ckpz_mpi_compress_same: every chunk's CRC-32C on every rank; where
 * the ranks' digests differ, rank 0's CRCs go to all and the lowest rank whose copy
 * differs names the first tensor where it does. */
static void check_same(run *r, ckpz_split *s, const void *arg)
{
    const uint8_t *data = ((const same_arg *)arg)->data;
    uint64_t nc = ckpz_split_chunks(s), off, len;
    uint32_t *crc = malloc((nc ? nc : 1) * sizeof *crc), *ref = malloc((nc ? nc : 1) * sizeof *ref);
    if (!crc || !ref) mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
    if (mr_agree(r)) goto out;
    for (uint64_t k = 0; k < nc; k++) {
        ckpz_split_chunk(s, k, &off, &len);
        crc[k] = ckpz_crc32c(0, data + off, (size_t)len);
    }
    unsigned digest = ckpz_crc32c(0, crc, nc * sizeof *crc), lo, hi;
    MPI_Allreduce(&digest, &lo, 1, MPI_UNSIGNED, MPI_MIN, r->comm);
    MPI_Allreduce(&digest, &hi, 1, MPI_UNSIGNED, MPI_MAX, r->comm);
    if (lo == hi) goto out;
    memcpy(ref, crc, nc * sizeof *crc);
    bcast_bytes(r->comm, ref, nc * sizeof *ref, 0);
    for (uint64_t k = 0; k < nc; k++) {
        if (crc[k] == ref[k]) continue;
        ckpz_split_chunk(s, k, &off, &len);
        const char *name = ckpz_split_chunk_name(s, k);
        mr_fail(r, CKPZ_ERR_CORRUPT, "this copy differs from rank 0's in %s%s%s (chunk %llu, bytes %llu..%llu)",
                *name ? "tensor '" : "opaque bytes", name, *name ? "'" : "", (unsigned long long)k,
                (unsigned long long)off, (unsigned long long)(off + len));
        break;
    }
out:
    free(crc);
    free(ref);
}

ckpz_error ckpz_mpi_compress_same(ckpz_ctx *caller, MPI_Comm comm, const ckpz_params *params, const void *data,
                                  size_t size, const char *out_path, ckpz_stats *stats)
{
    run r;
    mr_init(&r, comm, caller, stats);
    ckpz_ctx *ctx = r.ctx;
    ckpz_mem in = {.data = (void *)data, .size = size};
    ckpz_source src;
    same_arg arg = {data};
    ckpz_source_mem(&src, &in);
    if (!ctx) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    mr_compress_source(&r, ctx, params, ctx ? &src : NULL, out_path, stats, check_same, NULL, &arg);
    return mr_finish(&r);
}
