/* ckpz_mpi.c — libckpz_mpi (include/ckpz_mpi.h): MPI ranks share one compression or
 * restore through the core library's split calls (ckpz.h "one compression, many
 * processes") and ckpz_archive_read, and write one file with MPI-IO. The core library
 * knows nothing of MPI; this file is the transport.
 *
 * The rule that keeps ranks from hanging: every rank makes the same collective calls in
 * the same order whatever happens to it, and after each step that can fail on one rank
 * only (opening, reading, coding, decoding, writing) the ranks agree (agree(): an
 * all-reduce of the lowest failing rank, then that rank's code and message broadcast)
 * before any rank decides what to do next. A failure therefore ends every rank at the
 * same point with the same message. The output is a temporary file beside the final
 * name, renamed by rank 0 only after the ranks agree that it is complete. */
#include "ckpz_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MSG_MAX 512
#define WRITE_PIECE (1u << 30)      /* MPI counts are ints: collective writes in pieces */
#define RESTORE_PIECE (64u << 20)   /* bytes a rank decodes before writing them */

typedef struct run {
    MPI_Comm comm;
    int rank, size;
    ckpz_error err;
    int agreed;  /* err is every rank's (set by agree on all ranks alike) */
    char msg[MSG_MAX];
} run;

static void run_init(run *r, MPI_Comm comm)
{
    memset(r, 0, sizeof *r);
    r->comm = comm;
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->size);
}

/* Records this rank's first failure (later ones are consequences). */
static void fail(run *r, ckpz_error code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(run *r, ckpz_error code, const char *fmt, ...)
{
    if (r->err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->err = code;
}

static void fail_ctx(run *r, ckpz_error code, ckpz_ctx *ctx)
{
    const char *m = ctx ? ckpz_ctx_message(ctx) : NULL;
    fail(r, code, "%s", m && *m ? m : ckpz_error_name(code));
}

static void fail_mpi(run *r, const char *path, const char *doing, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    fail(r, CKPZ_ERR_WRITE, "%s: %s: %s", path, doing, s);
}

/* Collective: the lowest failing rank's code and message, on every rank. Once the
 * ranks agree on a failure, later calls keep it and communicate no more (no rank
 * communicates then). */
static ckpz_error agree(run *r)
{
    if (r->agreed) return r->err;
    int mine = r->err ? r->rank : r->size, first = r->size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, r->comm);
    if (first == r->size) return CKPZ_OK;
    struct {
        int code;
        char msg[MSG_MAX];
    } m;
    memset(&m, 0, sizeof m);
    if (r->rank == first) {
        m.code = r->err;
        if (r->size > 1) snprintf(m.msg, sizeof m.msg, "%.400s (rank %d)", r->msg, r->rank);
        else snprintf(m.msg, sizeof m.msg, "%s", r->msg);
    }
    MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, first, r->comm);
    r->err = (ckpz_error)m.code;
    r->agreed = 1;
    memcpy(r->msg, m.msg, sizeof r->msg);
    return r->err;
}

static ckpz_error finish(run *r, char *why, size_t cap)
{
    if (why && cap) snprintf(why, cap, "%s", r->err ? r->msg : "");
    return r->err;
}

/* The input, opened on every rank, as a source with pread. */
static int open_input(run *r, const char *path, ckpz_fd *f, ckpz_source *src)
{
    struct stat st;
    memset(f, 0, sizeof *f);
    f->fd = open(path, O_RDONLY);
    if (f->fd < 0 || fstat(f->fd, &st) != 0) {
        fail(r, CKPZ_ERR_READ, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(r, CKPZ_ERR_PARAM, "not a regular file (ranks read it at offsets)");
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
            fail(r, CKPZ_ERR_PARAM, "%s: name too long", out_path);
        } else {
            int fd = mkstemp(o->tmp);
            if (fd < 0) {
                fail(r, CKPZ_ERR_WRITE, "%s: cannot create: %s", out_path, strerror(errno));
            } else {
                mode_t um = umask(0);
                umask(um);
                if (fchmod(fd, 0666 & ~um) != 0 || close(fd) != 0)
                    fail(r, CKPZ_ERR_WRITE, "%s: %s", o->tmp, strerror(errno));
                o->created = 1;
            }
        }
    }
    MPI_Bcast(o->tmp, (int)sizeof o->tmp, MPI_CHAR, 0, r->comm);
    if (agree(r)) return;
    int rc = MPI_File_open(r->comm, o->tmp, MPI_MODE_WRONLY, MPI_INFO_NULL, &o->fh);
    if (rc != MPI_SUCCESS) fail_mpi(r, o->tmp, "cannot open", rc);
    else o->open = 1;
    /* a rank whose open failed cannot take part in the file's collectives: all close */
    if (agree(r) && o->open) {
        MPI_File_close(&o->fh);
        o->open = 0;
    }
}

/* Collective: writes buf[0..len) at off, in pieces of at most WRITE_PIECE bytes, as
 * many rounds on every rank. A rank whose write failed writes nothing in later rounds
 * but still takes part. */
static void write_all(run *r, output *o, uint64_t off, const void *buf, size_t len)
{
    unsigned long long mine = (len + WRITE_PIECE - 1) / WRITE_PIECE, rounds = 0;
    MPI_Allreduce(&mine, &rounds, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, r->comm);
    for (unsigned long long i = 0; i < rounds; i++) {
        size_t at = (size_t)i * WRITE_PIECE;
        int n = r->err || at >= len ? 0 : (int)(len - at < WRITE_PIECE ? len - at : WRITE_PIECE);
        MPI_Status st;
        int rc = MPI_File_write_at_all(o->fh, (MPI_Offset)(off + at), n ? (const char *)buf + at : NULL, n, MPI_BYTE,
                                       &st);
        int done = 0;
        if (rc != MPI_SUCCESS) fail_mpi(r, o->path, "write error", rc);
        else if (n && (MPI_Get_count(&st, MPI_BYTE, &done) != MPI_SUCCESS || done != n))
            fail(r, CKPZ_ERR_WRITE, "%s: write error: %d of %d bytes written at offset %llu", o->path, done, n,
                 (unsigned long long)(off + at));
    }
}

/* Rank 0 alone: bytes at off (header, tail). */
static void write_one(run *r, output *o, uint64_t off, const void *buf, size_t len)
{
    MPI_Status st;
    int done = 0;
    if (r->err || !len) return;
    int rc = MPI_File_write_at(o->fh, (MPI_Offset)off, buf, (int)len, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) fail_mpi(r, o->path, "write error", rc);
    else if (MPI_Get_count(&st, MPI_BYTE, &done) != MPI_SUCCESS || done != (int)len)
        fail(r, CKPZ_ERR_WRITE, "%s: write error: %d of %zu bytes written at offset %llu", o->path, done, len,
             (unsigned long long)off);
}

/* Collective: syncs and closes the file; rank 0 renames it to out_path once every rank
 * agrees it is complete, and removes it otherwise. */
static void output_close(run *r, output *o, const char *out_path)
{
    o->called = 0;
    if (o->open) {
        if (!agree(r)) {
            int rc = MPI_File_sync(o->fh);
            if (rc != MPI_SUCCESS) fail_mpi(r, o->path, "write error (sync)", rc);
        }
        int rc = MPI_File_close(&o->fh);
        if (rc != MPI_SUCCESS) fail_mpi(r, o->path, "write error (close)", rc);
        o->open = 0;
    }
    agree(r);
    if (r->rank == 0 && o->created) {
        if (!r->err && rename(o->tmp, out_path) != 0)
            fail(r, CKPZ_ERR_WRITE, "%s: cannot rename to %s: %s", o->tmp, out_path, strerror(errno));
        if (r->err) unlink(o->tmp);
    }
    agree(r);
}

/* The chunks rank r takes: those that start in its share of the input's bytes. */
static void my_chunks(const run *r, const ckpz_split *s, uint64_t *first, uint64_t *n)
{
    uint64_t nc = ckpz_split_chunks(s), end, len;
    ckpz_split_chunk(s, nc, &end, &len);
    uint64_t lo = end / r->size * r->rank + end % r->size * r->rank / r->size;
    uint64_t hi = end / r->size * (r->rank + 1) + end % r->size * (r->rank + 1) / r->size;
    uint64_t a, b, off, lo_k;
    /* the first chunk at or past lo, and the first at or past hi (binary searches) */
    for (a = 0, b = nc; a < b;) {
        uint64_t m = a + (b - a) / 2;
        ckpz_split_chunk(s, m, &off, &len);
        if (off < lo) a = m + 1;
        else b = m;
    }
    lo_k = a;
    for (a = lo_k, b = nc; a < b;) {
        uint64_t m = a + (b - a) / 2;
        ckpz_split_chunk(s, m, &off, &len);
        if (off < hi) a = m + 1;
        else b = m;
    }
    *first = lo_k;
    *n = (r->rank == r->size - 1 ? nc : a) - lo_k;
}

ckpz_error ckpz_mpi_compress_file(MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                  const char *out_path, ckpz_stats *stats, char *why, size_t why_cap)
{
    run r;
    run_init(&r, comm);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_fd f = {.fd = -1};
    ckpz_source src;
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

    if (!ctx) fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    else if (open_input(&r, in_path, &f, &src) == 0) {
        ckpz_error e = ckpz_split_plan(ctx, params, &src, &s);
        if (e) fail_ctx(&r, e, ctx);
    }
    if (agree(&r)) goto out;

    /* code this rank's chunks */
    uint64_t nc = ckpz_split_chunks(s);
    my_chunks(&r, s, &first, &n);
    counts = calloc((size_t)r.size, sizeof *counts);
    displs = calloc((size_t)r.size, sizeof *displs);
    records = calloc(nc + 1, CKPZ_SPLIT_RECORD_SIZE);
    if (!counts || !displs || !records) fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    else if ((nc + 1) * CKPZ_SPLIT_RECORD_SIZE > INT_MAX)
        fail(&r, CKPZ_ERR_LIMIT, "%llu chunks: more records than one MPI_Allgatherv moves",
             (unsigned long long)nc);
    else {
        ckpz_error e = ckpz_split_code(ctx, s, first, n, records + first * CKPZ_SPLIT_RECORD_SIZE, &coded,
                                       &coded_len);
        if (e) fail_ctx(&r, e, ctx);
    }
    if (agree(&r)) goto out;

    /* every chunk's record to every rank */
    int mine = (int)(n * CKPZ_SPLIT_RECORD_SIZE), at = (int)(first * CKPZ_SPLIT_RECORD_SIZE);
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, comm);
    MPI_Allgather(&at, 1, MPI_INT, displs, 1, MPI_INT, comm);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, records, counts, displs, MPI_BYTE, comm);
    ckpz_error e = ckpz_split_write(ctx, s, records, first, n, coded, coded_len, &so);
    if (e) fail_ctx(&r, e, ctx);
    free(coded);
    coded = NULL;
    if (agree(&r)) goto out;

    output_open(&r, &o, out_path);
    if (r.err) goto out;
    if (r.rank == 0) write_one(&r, &o, 0, so.head, so.head_len);
    write_all(&r, &o, so.region_offset, so.region, so.region_len);
    if (r.rank == 0) write_one(&r, &o, so.tail_offset, so.tail, so.tail_len);
    output_close(&r, &o, out_path);
    if (!r.err && stats) *stats = so.stats;
out:
    if (o.called) output_close(&r, &o, out_path);
    ckpz_split_out_free(&so);
    free(coded);
    free(records);
    free(counts);
    free(displs);
    ckpz_split_free(s);
    if (f.fd >= 0) close(f.fd);
    ckpz_ctx_free(ctx);
    return finish(&r, why, why_cap);
}

ckpz_error ckpz_mpi_decompress_file(MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                    const char *out_path, ckpz_stats *stats, char *why, size_t why_cap)
{
    run r;
    run_init(&r, comm);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_fd f = {.fd = -1};
    ckpz_source src;
    ckpz_archive *a = NULL;
    ckpz_archive_info info;
    output o;
    uint8_t *buf = NULL;
    memset(&o, 0, sizeof o);
    memset(&info, 0, sizeof info);

    if (!ctx) fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    else if (open_input(&r, in_path, &f, &src) == 0) {
        ckpz_error e = ckpz_archive_open_io(ctx, params, &src, &a);
        if (e) fail_ctx(&r, e, ctx);
        else ckpz_archive_get_info(a, &info);
    }
    if (agree(&r)) goto out;

    uint64_t size = info.original_size;
    uint64_t lo = size / r.size * r.rank + size % r.size * r.rank / r.size;
    uint64_t hi = size / r.size * (r.rank + 1) + size % r.size * (r.rank + 1) / r.size;
    unsigned long long mine = (hi - lo + RESTORE_PIECE - 1) / RESTORE_PIECE, rounds = 0;
    MPI_Allreduce(&mine, &rounds, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
    if (rounds && !(buf = malloc(RESTORE_PIECE))) fail(&r, CKPZ_ERR_NOMEM, "out of memory");
    if (agree(&r)) goto out;
    if (out_path) {
        output_open(&r, &o, out_path);
        if (r.err) goto out;
    }
    uint32_t crc = 0;
    for (unsigned long long i = 0; i < rounds; i++) {
        uint64_t at = lo + i * RESTORE_PIECE;
        size_t len = at < hi ? (size_t)(hi - at < RESTORE_PIECE ? hi - at : RESTORE_PIECE) : 0;
        if (len) {
            ckpz_span span = {at, len, buf};
            ckpz_error e = ckpz_archive_read(ctx, a, &span, 1);
            if (e) fail_ctx(&r, e, ctx);
            else crc = ckpz_crc32c(crc, buf, len);
        }
        if (agree(&r)) break;
        if (out_path) {
            write_all(&r, &o, at, buf, len);
            if (agree(&r)) break;
        }
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
            fail(&r, CKPZ_ERR_NOMEM, "out of memory");
        } else {
            MPI_Gather(&part, (int)sizeof part, MPI_BYTE, parts, (int)sizeof part, MPI_BYTE, 0, comm);
            if (r.rank == 0) {
                uint32_t whole = 0;
                for (int k = 0; k < r.size; k++) whole = ckpz_crc32c_combine(whole, parts[k].crc, parts[k].len);
                if (whole != info.content_checksum)
                    fail(&r, CKPZ_ERR_CHECKSUM,
                         "content checksum mismatch: the restored bytes have CRC-32C %08x, the file says %08x",
                         (unsigned)whole, (unsigned)info.content_checksum);
            }
        }
        free(parts);
        agree(&r);
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
    return finish(&r, why, why_cap);
}
