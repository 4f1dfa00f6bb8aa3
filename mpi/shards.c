/* shards.c — ckpz_mpi_compress_tensors (ckpz_mpi.h): every rank passes its own tensors
 * (a model's per-rank shards) and the ranks write one container together. The container's
 * original is a safetensors file that holds every rank's tensors in rank order; it never
 * exists: each rank reads it through a pread callback over a header all ranks build alike
 * from the all-gathered descriptors, its own tensors' memory, and the bytes of every small
 * tensor (at most PACK_MAX, all-gathered: small entries share chunks across ranks).
 * `ckpz -d` restores that file, and the container is byte for byte what serial ckpz
 * writes for it. A rank codes the chunks whose last byte is its own, so a chunk that leads
 * a large tensor with small ones (packed groups) goes to the large tensor's rank, which has
 * the small ones too. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SMALL (16u << 10) /* plan.c's PACK_MAX: tensors that may share a chunk */

typedef struct vtensor {
    uint64_t off, len; /* in the virtual file */
    int owner;
    const uint8_t *data; /* NULL: another rank's, not small */
} vtensor;

typedef struct vfile {
    char *head;        /* the safetensors header: 8-byte length, JSON */
    size_t head_len;
    vtensor *t;
    size_t nt;
    uint64_t size;
    int planning;      /* other ranks' bytes read as zeros (the planner does not look) */
} vfile;

static int vfile_pread(void *opaque, void *buf, size_t n, uint64_t off)
{
    vfile *v = opaque;
    uint8_t *out = buf;
    if (off > v->size || n > v->size - off) return -1;
    while (n) {
        if (off < v->head_len) {
            size_t k = v->head_len - off < n ? (size_t)(v->head_len - off) : n;
            memcpy(out, v->head + off, k);
            out += k, off += k, n -= k;
            continue;
        }
        size_t lo = 0, hi = v->nt; /* the tensor holding off: the last starting at or before it */
        while (hi - lo > 1) {
            size_t m = lo + (hi - lo) / 2;
            if (v->t[m].off <= off) lo = m;
            else hi = m;
        }
        const vtensor *t = &v->t[lo];
        while (t->len == 0 || off >= t->off + t->len) t++; /* empty tensors share their offset */
        size_t k = t->off + t->len - off < n ? (size_t)(t->off + t->len - off) : n;
        if (t->data) memcpy(out, t->data + (off - t->off), k);
        else if (v->planning) memset(out, 0, k);
        else return -1;
        out += k, off += k, n -= k;
    }
    return 0;
}

static int owner_of(const vfile *v, uint64_t at)
{
    int o = 0;
    for (size_t lo = 0, hi = v->nt; lo < hi;) { /* the first tensor ending past at */
        size_t m = lo + (hi - lo) / 2;
        if (v->t[m].off + v->t[m].len <= at) lo = m + 1;
        else hi = m, o = v->t[m].owner;
    }
    return at < v->head_len ? 0 : o;
}

/* chunk_assign_fn: the chunks whose last byte is this rank's (ranks own consecutive
 * stretches of the file, so the chunks come out consecutive). */
static void assign(const run *r, const ckpz_split *s, const void *arg, uint64_t *first, uint64_t *n)
{
    const vfile *v = arg;
    uint64_t nc = ckpz_split_chunks(s), off, len, k = 0;
    int last_owner = 0;
    for (size_t i = 0; i < v->nt; i++) last_owner = v->t[i].owner > last_owner ? v->t[i].owner : last_owner;
    *first = nc, *n = 0;
    for (; k < nc; k++) {
        ckpz_split_chunk(s, k, &off, &len);
        int o = off + len >= v->size && !len ? last_owner : owner_of(v, len ? off + len - 1 : off);
        if (o == r->rank) {
            if (*first == nc) *first = k;
            ++*n;
        }
    }
    if (*first == nc) *first = nc, *n = 0;
}

/* plan_check_fn: planning is over; from now on a read of another rank's bytes is an
 * error (assign gives no rank a chunk it lacks bytes of). */
static void planned(run *r, ckpz_split *s, const void *arg)
{
    (void)r, (void)s;
    ((vfile *)arg)->planning = 0;
}

ckpz_error ckpz_mpi_compress_tensors(ckpz_ctx *caller, MPI_Comm comm, const ckpz_params *params,
                                     const ckpz_mpi_tensor *t, size_t n, const char *out_path, ckpz_stats *stats)
{
    run r;
    mr_init(&r, comm, caller, stats);
    ckpz_ctx *ctx = r.ctx;
    uint8_t *desc = NULL, *all = NULL, *small = NULL, *all_small = NULL;
    int *counts = calloc((size_t)r.size, sizeof(int)), *displs = calloc((size_t)r.size, sizeof(int));
    vfile v = {0};
    size_t dlen = 0, slen = 0;
    if (!ctx || !counts || !displs) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    /* this rank's descriptors: dtype, ndim, shape, name length, name */
    for (size_t i = 0; i < n && !r.err; i++) {
        uint64_t bytes = ckpz_dtype_size(t[i].dtype);
        if (!t[i].name || !ckpz_dtype_format_name(t[i].dtype, CKPZ_INPUT_SAFETENSORS) || t[i].ndim > 64 ||
            (t[i].ndim && !t[i].shape))
            mr_fail(&r, CKPZ_ERR_PARAM, "tensor %zu ('%.100s'): no safetensors dtype, name or shape", i,
                    t[i].name ? t[i].name : "");
        for (uint32_t d = 0; d < t[i].ndim && !r.err; d++) bytes *= t[i].shape[d];
        if (!r.err && bytes && !t[i].data) mr_fail(&r, CKPZ_ERR_PARAM, "tensor '%.100s' has no data", t[i].name);
        dlen += 12 + 8 * (size_t)t[i].ndim + strlen(t[i].name ? t[i].name : "");
        if (bytes <= SMALL) slen += (size_t)bytes;
    }
    if (!r.err && (dlen > INT_MAX || slen > INT_MAX)) mr_fail(&r, CKPZ_ERR_LIMIT, "too many tensors for one gather");
    if (!r.err && (!(desc = malloc(dlen + 1)) || !(small = malloc(slen + 1))))
        mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (mr_agree(&r)) goto out;
    for (size_t i = 0, at = 0, sat = 0; i < n; i++) {
        uint32_t h[3] = {(uint32_t)t[i].dtype, t[i].ndim, (uint32_t)strlen(t[i].name)};
        uint64_t bytes = ckpz_dtype_size(t[i].dtype);
        for (uint32_t d = 0; d < t[i].ndim; d++) bytes *= t[i].shape[d];
        memcpy(desc + at, h, 12), at += 12;
        if (t[i].ndim) memcpy(desc + at, t[i].shape, 8 * (size_t)t[i].ndim), at += 8 * (size_t)t[i].ndim;
        memcpy(desc + at, t[i].name, h[2]), at += h[2];
        if (bytes <= SMALL && bytes) memcpy(small + sat, t[i].data, (size_t)bytes), sat += (size_t)bytes;
    }

    /* everyone's descriptors and small tensors to every rank */
    long long sizes[2] = {(long long)dlen, (long long)slen}, *every = calloc((size_t)r.size * 2, sizeof *every);
    if (!every) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (mr_agree(&r)) goto out;
    MPI_Allgather(sizes, 2, MPI_LONG_LONG, every, 2, MPI_LONG_LONG, comm);
    long long dtot = 0, stot = 0;
    for (int k = 0; k < r.size; k++) dtot += every[2 * k], stot += every[2 * k + 1];
    if (dtot > INT_MAX || stot > INT_MAX) mr_fail(&r, CKPZ_ERR_LIMIT, "too many tensors for one gather");
    else if (!(all = malloc((size_t)dtot + 1)) || !(all_small = malloc((size_t)stot + 1)))
        mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (mr_agree(&r)) {
        free(every);
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        int at = 0;
        for (int k = 0; k < r.size; k++) counts[k] = (int)every[2 * k + pass], displs[k] = at, at += counts[k];
        MPI_Allgatherv(pass ? small : desc, (int)(pass ? slen : dlen), MPI_BYTE, pass ? all_small : all, counts, displs,
                       MPI_BYTE, comm);
    }

    /* the virtual file: its header (JSON, padded to 8 bytes with spaces) and layout */
    size_t cap = 0, sat = 0, pool = 0;
    for (int k = 0, pos = 0; k < r.size; k++) {
        long long end = pos + every[2 * k];
        while (pos < end) { /* count the tensors */
            uint32_t h[3];
            memcpy(h, all + pos, 12);
            pos += 12 + 8 * (int)h[1] + (int)h[2];
            cap++;
        }
    }
    v.t = calloc(cap ? cap : 1, sizeof *v.t);
    char **names = calloc(cap ? cap : 1, sizeof *names);
    if (!v.t || !names) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    uint64_t data_off = 0;
    for (int k = 0, pos = 0; k < r.size && !r.err; k++) {
        long long end = pos + every[2 * k];
        size_t mine = 0;
        while (pos < end) {
            uint32_t h[3];
            memcpy(h, all + pos, 12);
            uint64_t bytes = ckpz_dtype_size((ckpz_dtype)h[0]);
            for (uint32_t d = 0; d < h[1]; d++) {
                uint64_t dim;
                memcpy(&dim, all + pos + 12 + 8 * d, 8);
                bytes *= dim;
            }
            vtensor *vt = &v.t[v.nt];
            vt->off = data_off, vt->len = bytes, vt->owner = k;
            if (k == r.rank) vt->data = t[mine++].data;
            else if (bytes <= SMALL) vt->data = all_small + sat;
            if (bytes <= SMALL) sat += (size_t)bytes;
            names[v.nt] = (char *)all + pos; /* its descriptor */
            pool += (size_t)h[2] + 1 + 8 * (size_t)h[1];
            data_off += bytes;
            pos += 12 + 8 * (int)h[1] + (int)h[2];
            v.nt++;
        }
    }
    if (mr_agree(&r)) {
        free(names);
        free(every);
        goto out;
    }
    /* the header, from the library's safetensors writer: each name NUL-terminated and
     * each shape aligned, out of the descriptors */
    ckpz_st_tensor *st = malloc((v.nt ? v.nt : 1) * sizeof *st);
    uint64_t *dims = malloc(pool + 8), *dim = dims;
    char *text = malloc(pool + 1), *tx = text;
    size_t hl = 0;
    if (!st || !dims || !text) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !r.err && i < v.nt; i++) {
        const uint8_t *d = (const uint8_t *)names[i];
        uint32_t h[3];
        memcpy(h, d, 12);
        memcpy(dim, d + 12, 8 * (size_t)h[1]);
        memcpy(tx, d + 12 + 8 * (size_t)h[1], h[2]);
        tx[h[2]] = '\0';
        st[i] = (ckpz_st_tensor){.name = tx, .dtype = (ckpz_dtype)h[0], .ndim = h[1], .shape = dim};
        dim += h[1], tx += h[2] + 1;
    }
    ckpz_error e = CKPZ_OK;
    if (!r.err && ((e = ckpz_safetensors_header(ctx, st, v.nt, NULL, 0, NULL, 0, &hl, NULL)) != CKPZ_OK ||
                   !(v.head = malloc(hl)) ||
                   (e = ckpz_safetensors_header(ctx, st, v.nt, NULL, 0, v.head, hl, &hl, NULL)) != CKPZ_OK))
        mr_fail(&r, e ? e : CKPZ_ERR_NOMEM, "%s", e ? ckpz_ctx_message(ctx) : "out of memory");
    if (!r.err) {
        v.head_len = hl;
        v.size = v.head_len + data_off;
        for (size_t i = 0; i < v.nt; i++) v.t[i].off += v.head_len;
    }
    free(st), free(dims), free(text);
    free(names);
    free(every);
    if (mr_agree(&r)) goto out;

    ckpz_source src;
    ckpz_source_init(&src);
    src.pread = vfile_pread;
    src.opaque = &v;
    src.size = v.size;
    ckpz_params p = *params;
    p.format = CKPZ_INPUT_SAFETENSORS;
    v.planning = 1; /* the planner reads only the header, and skips the chunks' bytes */
    mr_compress_source(&r, ctx, &p, &src, out_path, stats, planned, assign, &v);
out:
    free(desc), free(all), free(small), free(all_small), free(counts), free(displs);
    free(v.head), free(v.t);
    return mr_finish(&r);
}
