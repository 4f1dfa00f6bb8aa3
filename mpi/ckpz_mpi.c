/* ckpz_mpi.c — libckpz_mpi (include/ckpz_mpi.h): MPI ranks share one compression or
 * restore through the core library's split calls (ckpz.h "one compression, many
 * processes") and ckpz_archive_read, and write one file with MPI-IO. The core library
 * knows nothing of MPI; this file is the transport.
 *
 * The rule that keeps ranks from hanging: every rank makes the same collective calls in
 * the same order whatever happens to it, and after each step that can fail on one rank
 * only (opening, reading, coding, decoding, writing) the ranks agree (mr_agree(): an
 * all-reduce of the lowest failing rank, then that rank's code and message broadcast)
 * before any rank decides what to do next. A failure therefore ends every rank at the
 * same point with the same message. The output is a temporary file beside the final
 * name, renamed by rank 0 only after the ranks agree that it is complete. */
#include "ckpz_mpi.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_PIECE (1u << 30)      /* MPI counts are ints: collective writes in rounds */
#define RESTORE_PIECE (2u << 20)    /* bytes a rank decodes before writing them */

/* The input, opened on every rank, as a source with pread. */
static int open_input(run *r, const char *path, ckpz_fd *f, ckpz_source *src)
{
    struct stat st;
    memset(f, 0, sizeof *f);
    f->fd = open(path, O_RDONLY);
    if (f->fd < 0 || fstat(f->fd, &st) != 0) {
        mr_fail(r, CKPZ_ERR_READ, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        mr_fail(r, CKPZ_ERR_PARAM, "not a regular file (ranks read it at offsets)");
        return -1;
    }
    ckpz_source_fd(src, f, (uint64_t)st.st_size);
    return 0;
}

/* The output: rank 0 makes a temporary file beside out_path, the ranks open it. */
typedef struct output {
    const char *path; /* the final name, for messages */
    char tmp[PATH_MAX];
    int created;
    MPI_File fh;
    int open;
    int called;   /* output_open ran (on every rank alike): output_close must */
} output;

static void output_open(run *r, output *o, const char *out_path)
{
    memset(o, 0, sizeof *o);
    o->path = out_path;
    o->called = 1;
    if (r->rank == 0) {
        if (snprintf(o->tmp, sizeof o->tmp, "%s.XXXXXX", out_path) >= (int)sizeof o->tmp) {
            mr_fail(r, CKPZ_ERR_PARAM, "%s: name too long", out_path);
        } else {
            int fd = mkstemp(o->tmp);
            if (fd < 0) {
                mr_fail(r, CKPZ_ERR_WRITE, "%s: cannot create: %s", out_path, strerror(errno));
            } else {
                mode_t um = umask(0);
                umask(um);
                if (fchmod(fd, 0666 & ~um) != 0 || close(fd) != 0)
                    mr_fail(r, CKPZ_ERR_WRITE, "%s: %s", o->tmp, strerror(errno));
                o->created = 1;
            }
        }
    }
    MPI_Bcast(o->tmp, (int)sizeof o->tmp, MPI_CHAR, 0, r->comm);
    if (mr_agree(r)) return;
    int rc = MPI_File_open(r->comm, o->tmp, MPI_MODE_WRONLY, MPI_INFO_NULL, &o->fh);
    if (rc != MPI_SUCCESS) mr_fail_mpi(r, o->tmp, "cannot open", rc);
    else o->open = 1;
    /* a rank whose open failed cannot take part in the file's collectives: all close */
    if (mr_agree(r) && o->open) {
        MPI_File_close(&o->fh);
        o->open = 0;
    }
}

/* Collective: writes the pieces (each at most WRITE_PIECE bytes) one after the other
 * from off, straight from where they lie (an hindexed datatype over their addresses:
 * nothing is copied), at most WRITE_PIECE bytes a round, as many rounds on every rank. A
 * rank whose write failed writes nothing in later rounds but still takes part. */
static void write_all(run *r, output *o, uint64_t off, const ckpz_piece *p, size_t np)
{
    unsigned long long mine = 0, rounds = 0;
    for (size_t i = 0, in_round = 0; i < np; i++) {
        if (!mine || in_round + p[i].len > WRITE_PIECE) mine++, in_round = 0;
        in_round += p[i].len;
    }
    MPI_Allreduce(&mine, &rounds, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, r->comm);
    int *lens = malloc((np ? np : 1) * sizeof *lens);
    MPI_Aint *addr = malloc((np ? np : 1) * sizeof *addr);
    if (!lens || !addr) mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
    size_t i = 0;
    for (unsigned long long k = 0; k < rounds; k++) {
        size_t i0 = i, bytes = 0;
        while (!r->err && i < np && (i == i0 || bytes + p[i].len <= WRITE_PIECE)) {
            MPI_Get_address(p[i].ptr, &addr[i - i0]);
            lens[i - i0] = (int)p[i].len;
            bytes += p[i].len;
            i++;
        }
        MPI_Datatype t = MPI_BYTE;
        int count = 0, rc;
        if (i > i0) {
            rc = MPI_Type_create_hindexed((int)(i - i0), lens, addr, MPI_BYTE, &t);
            if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&t);
            if (rc != MPI_SUCCESS) {
                mr_fail_mpi(r, o->path, "write error (datatype)", rc);
                t = MPI_BYTE;
            } else {
                count = 1;
            }
        }
        MPI_Status st;
        rc = MPI_File_write_at_all(o->fh, (MPI_Offset)off, count ? MPI_BOTTOM : NULL, count, t, &st);
        MPI_Count done = 0;
        if (rc != MPI_SUCCESS) mr_fail_mpi(r, o->path, "write error", rc);
        else if (count && (MPI_Get_elements_x(&st, MPI_BYTE, &done) != MPI_SUCCESS || (size_t)done != bytes))
            mr_fail(r, CKPZ_ERR_WRITE, "%s: write error: %lld of %zu bytes written at offset %llu", o->path,
                    (long long)done, bytes, (unsigned long long)off);
        if (count) MPI_Type_free(&t);
        off += bytes;
    }
    free(lens);
    free(addr);
}

/* Rank 0 alone: bytes at off (header, tail). */
static void write_one(run *r, output *o, uint64_t off, const void *buf, size_t len)
{
    MPI_Status st;
    int done = 0;
    if (r->err || !len) return;
    int rc = MPI_File_write_at(o->fh, (MPI_Offset)off, buf, (int)len, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) mr_fail_mpi(r, o->path, "write error", rc);
    else if (MPI_Get_count(&st, MPI_BYTE, &done) != MPI_SUCCESS || done != (int)len)
        mr_fail(r, CKPZ_ERR_WRITE, "%s: write error: %d of %zu bytes written at offset %llu", o->path, done, len,
             (unsigned long long)off);
}

/* Collective: syncs and closes the file; rank 0 renames it to out_path once every rank
 * agrees it is complete, and removes it otherwise. */
static void output_close(run *r, output *o, const char *out_path)
{
    o->called = 0;
    if (o->open) {
        if (!mr_agree(r)) {
            int rc = MPI_File_sync(o->fh);
            if (rc != MPI_SUCCESS) mr_fail_mpi(r, o->path, "write error (sync)", rc);
        }
        int rc = MPI_File_close(&o->fh);
        if (rc != MPI_SUCCESS) mr_fail_mpi(r, o->path, "write error (close)", rc);
        o->open = 0;
    }
    mr_agree(r);
    if (r->rank == 0 && o->created) {
        if (!r->err && rename(o->tmp, out_path) != 0)
            mr_fail(r, CKPZ_ERR_WRITE, "%s: cannot rename to %s: %s", o->tmp, out_path, strerror(errno));
        if (r->err) unlink(o->tmp);
    }
    mr_agree(r);
}

/* Chunk k's bytes in the original ([*off, *off + *len); k == chunks: the end), of a
 * split plan (compressing) or an open archive (restoring). */
typedef void (*chunk_fn)(const void *obj, uint64_t k, uint64_t *off, uint64_t *len);
static void split_chunk(const void *s, uint64_t k, uint64_t *off, uint64_t *len) { ckpz_split_chunk(s, k, off, len); }
static void archive_chunk(const void *a, uint64_t k, uint64_t *off, uint64_t *len) { ckpz_archive_chunk(a, k, off, len); }

/* The chunks rank r takes of nc: those that start in its share of the bytes. */
static void my_chunks(const run *r, uint64_t nc, chunk_fn chunk, const void *obj, uint64_t *first, uint64_t *n)
{
    uint64_t end, len;
    chunk(obj, nc, &end, &len);
    uint64_t lo = end / r->size * r->rank + end % r->size * r->rank / r->size;
    uint64_t hi = end / r->size * (r->rank + 1) + end % r->size * (r->rank + 1) / r->size;
    uint64_t a, b, off, lo_k;
    /* the first chunk at or past lo, and the first at or past hi (binary searches) */
    for (a = 0, b = nc; a < b;) {
        uint64_t m = a + (b - a) / 2;
        chunk(obj, m, &off, &len);
        if (off < lo) a = m + 1;
        else b = m;
    }
    lo_k = a;
    for (a = lo_k, b = nc; a < b;) {
        uint64_t m = a + (b - a) / 2;
        chunk(obj, m, &off, &len);
        if (off < hi) a = m + 1;
        else b = m;
    }
    *first = lo_k;
    *n = (r->rank == r->size - 1 ? nc : a) - lo_k;
}

void mr_compress_source(run *r, ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src,
                        const char *out_path, ckpz_stats *stats, plan_check_fn check, chunk_assign_fn assign,
                        const void *arg)
{
    ckpz_split *s = NULL;
    uint8_t *records = NULL;
    void *coded = NULL;
    size_t coded_len = 0;
    int *counts = NULL, *displs = NULL;
    ckpz_split_out so;
    output o;
    uint64_t first = 0, n = 0;
    memset(&so, 0, sizeof so);
    memset(&o, 0, sizeof o);

    if (src && !r->err) {
        ckpz_error e = ckpz_split_plan(ctx, params, src, &s);
        if (e) mr_fail_ctx(r, e, ctx);
    }
    if (mr_agree(r)) goto out;
    if (check) {
        check(r, s, arg);
        if (mr_agree(r)) goto out;
    }

    /* code this rank's chunks */
    uint64_t nc = ckpz_split_chunks(s);
    if (assign) assign(r, s, arg, &first, &n);
    else my_chunks(r, nc, split_chunk, s, &first, &n);
    counts = calloc((size_t)r->size, sizeof *counts);
    displs = calloc((size_t)r->size, sizeof *displs);
    records = calloc(nc + 1, CKPZ_SPLIT_RECORD_SIZE);
    if (!counts || !displs || !records) mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
    else if ((nc + 1) * CKPZ_SPLIT_RECORD_SIZE > INT_MAX)
        mr_fail(r, CKPZ_ERR_LIMIT, "%llu chunks: more records than one MPI_Allgatherv moves", (unsigned long long)nc);
    else {
        ckpz_error e = ckpz_split_code(ctx, s, first, n, records + first * CKPZ_SPLIT_RECORD_SIZE, &coded, &coded_len);
        if (e) mr_fail_ctx(r, e, ctx);
    }
    if (mr_agree(r)) goto out;

    /* every chunk's record to every rank */
    int mine = (int)(n * CKPZ_SPLIT_RECORD_SIZE), at = (int)(first * CKPZ_SPLIT_RECORD_SIZE);
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, r->comm);
    MPI_Allgather(&at, 1, MPI_INT, displs, 1, MPI_INT, r->comm);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, records, counts, displs, MPI_BYTE, r->comm);
    ckpz_error e = ckpz_split_write(ctx, s, records, first, n, coded, coded_len, &so);
    if (e) mr_fail_ctx(r, e, ctx); /* so's pieces point into coded: it is freed at the end */
    if (mr_agree(r)) goto out;

    output_open(r, &o, out_path);
    if (r->err) goto out;
    if (r->rank == 0) write_one(r, &o, 0, so.head, so.head_len);
    write_all(r, &o, so.region_offset, so.pieces, so.npieces);
    if (r->rank == 0) write_one(r, &o, so.tail_offset, so.tail, so.tail_len);
    output_close(r, &o, out_path);
    if (!r->err && stats) *stats = so.stats;
out:
    if (o.called) output_close(r, &o, out_path);
    ckpz_split_out_free(&so);
    free(coded);
    free(records);
    free(counts);
    free(displs);
    ckpz_split_free(s);
}

ckpz_error ckpz_mpi_compress_file(MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                  const char *out_path, ckpz_stats *stats, char *why, size_t why_cap)
{
    run r;
    mr_init(&r, comm);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_fd f = {.fd = -1};
    ckpz_source src;
    int ok = 0;
    if (!ctx) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    else ok = open_input(&r, in_path, &f, &src) == 0;
    mr_compress_source(&r, ctx, params, ok ? &src : NULL, out_path, stats, NULL, NULL, NULL);
    if (f.fd >= 0) close(f.fd);
    ckpz_ctx_free(ctx);
    return mr_finish(&r, why, why_cap);
}

/* The piece of a restore that starts at chunk k (< stop, else none): chunks k.. while they
 * make at most RESTORE_PIECE bytes (one at least); *next gets the chunk after it. Returns
 * its bytes. */
static uint64_t piece(const ckpz_archive *a, uint64_t k, uint64_t stop, uint64_t *next)
{
    uint64_t at, end, len, e = k;
    ckpz_archive_chunk(a, k, &at, &len);
    end = at;
    while (e < stop) {
        uint64_t to;
        ckpz_archive_chunk(a, e + 1, &to, &len);
        if (e > k && to - at > RESTORE_PIECE) break;
        end = to, e++;
    }
    *next = e;
    return end - at;
}

ckpz_error ckpz_mpi_decompress_file(MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                    const char *out_path, ckpz_stats *stats, char *why, size_t why_cap)
{
    run r;
    mr_init(&r, comm);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_fd f = {.fd = -1};
    ckpz_source src;
    ckpz_archive *a = NULL;
    ckpz_archive_info info;
    output o;
    uint8_t *buf = NULL;
    memset(&o, 0, sizeof o);
    memset(&info, 0, sizeof info);

    if (!ctx) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    else if (open_input(&r, in_path, &f, &src) == 0) {
        ckpz_error e = ckpz_archive_open_io(ctx, params, &src, &a);
        if (e) mr_fail_ctx(&r, e, ctx);
        else ckpz_archive_get_info(a, &info);
    }
    if (mr_agree(&r)) goto out;

    /* This rank's share: whole chunks (as compressing splits them), restored in pieces of
     * whole chunks of about RESTORE_PIECE bytes, each decoded into one buffer that is
     * checksummed and written while the cache still holds it; no chunk is decoded twice. */
    uint64_t size = info.original_size, k0 = 0, nk = 0, lo, hi, len;
    my_chunks(&r, info.chunks, archive_chunk, a, &k0, &nk);
    ckpz_archive_chunk(a, k0, &lo, &len);
    ckpz_archive_chunk(a, k0 + nk, &hi, &len);
    unsigned long long mine = 0, rounds = 0;
    size_t cap = 0; /* the largest piece (more than RESTORE_PIECE only for a chunk that is) */
    for (uint64_t k = k0, end; k < k0 + nk; k = end, mine++) {
        uint64_t n = piece(a, k, k0 + nk, &end);
        if (n > cap) cap = (size_t)n;
    }
    MPI_Allreduce(&mine, &rounds, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
    if (mine && !(buf = malloc(cap))) mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (mr_agree(&r)) goto out;
    if (out_path) {
        output_open(&r, &o, out_path);
        if (r.err) goto out;
    }
    uint32_t crc = 0;
    uint64_t next = k0; /* the first chunk of this rank's next piece */
    for (unsigned long long i = 0; i < rounds; i++) {
        uint64_t at;
        ckpz_archive_chunk(a, next, &at, &len);
        size_t n = (size_t)piece(a, next, k0 + nk, &next); /* 0 past this rank's last piece */
        if (n) {
            ckpz_span span = {at, n, buf};
            ckpz_error e = ckpz_archive_read(ctx, a, &span, 1);
            if (e) mr_fail_ctx(&r, e, ctx);
            else crc = ckpz_crc32c(crc, buf, n);
        }
        /* a rank that failed to decode writes nothing (write_all) and the ranks stop
         * together after the round: one agreement a round */
        if (o.called) {
            ckpz_piece piece = {buf, n};
            write_all(&r, &o, at, &piece, n && !r.err ? 1 : 0);
        }
        if (mr_agree(&r)) break;
    }
    if (!r.err) {
        /* the whole file's checksum from the ranks' parts, in rank order */
        struct {
            uint32_t crc;
            uint32_t pad;
            uint64_t len;
        } part = {crc, 0, hi - lo}, *parts = r.rank == 0 ? calloc((size_t)r.size, sizeof *parts) : NULL;
        int ok = r.rank != 0 || parts != NULL, all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
        if (!all_ok) {
            mr_fail(&r, CKPZ_ERR_NOMEM, "out of memory");
        } else {
            MPI_Gather(&part, (int)sizeof part, MPI_BYTE, parts, (int)sizeof part, MPI_BYTE, 0, comm);
            if (r.rank == 0) {
                uint32_t whole = 0;
                for (int k = 0; k < r.size; k++) whole = ckpz_crc32c_combine(whole, parts[k].crc, parts[k].len);
                if (whole != info.content_checksum)
                    mr_fail(&r, CKPZ_ERR_CHECKSUM,
                         "content checksum mismatch: the restored bytes have CRC-32C %08x, the file says %08x",
                         (unsigned)whole, (unsigned)info.content_checksum);
            }
        }
        free(parts);
        mr_agree(&r);
    }
    if (o.called) output_close(&r, &o, out_path);
    if (!r.err && stats) {
        memset(stats, 0, sizeof *stats);
        stats->original_bytes = size;
        stats->compressed_bytes = info.compressed_size;
        stats->chunks = info.chunks;
        stats->format = info.format;
    }
out:
    if (o.called) output_close(&r, &o, out_path);
    free(buf);
    ckpz_archive_close(a);
    if (f.fd >= 0) close(f.fd);
    ckpz_ctx_free(ctx);
    return mr_finish(&r, why, why_cap);
}
