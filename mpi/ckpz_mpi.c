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
 * same point with the same message. The output is published by the library on rank 0
 * (ckpz_publish_*, lib/file/publish.c: the hidden .NAME.ckpz-PID-HOST-RANDOM.tmp beside
 * the final name, the CLI's and the Python package's pattern), which every rank opens
 * by that name; rank 0 renames it only after the ranks agree that it is complete, and
 * removes it otherwise. A job killed outright leaves the hidden file, which the next
 * publish of the same name removes once rank 0's process is gone.
 *
 * The long loops (coding, restoring) run in rounds, the same number on every rank, and
 * do not hold the ranks in step: a rank writes its bytes on its own (independent MPI-IO)
 * as soon as it has them, and the ranks learn of one another's failures from
 * non-blocking collectives completed a round or more later. Ranks that wait for each
 * other at every write meet at the file (a local file system takes one writer at a
 * time: measured, a 2-rank restore 1.1x one rank's speed in step, 1.6x not); ranks that
 * drift apart write while the others code.
 *
 * A restore or test checks everything serial ckpz's sequential decoder checks: the
 * ranks' chunk reads check every chunk, rank 0 the entry frames and the frames' layout
 * that no chunk read touches (ckpz_archive_check_frames), and the content checksum is
 * put together from the ranks' parts. */
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

#define WRITE_PIECE (1u << 30)      /* MPI counts are ints: writes of at most this */
#define WRITE_BATCH 64              /* pieces a write takes at most */
#define RESTORE_PIECE (2u << 20)    /* bytes a rank decodes before writing them */
#define ROUND_CHUNKS 32             /* chunks a rank codes a round (compressing) */
#define CHECK_EVERY 8               /* restore rounds between two looks at every rank's failures */

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

/* A caller's source: the ranks read it at offsets. 0, or -1 with r failed. */
static int check_source(run *r, const ckpz_source *src)
{
    if (src && src->pread && src->size != CKPZ_SIZE_UNKNOWN) return 0;
    mr_fail(r, CKPZ_ERR_PARAM, "the ranks read the input at offsets: the source needs pread and a size");
    return -1;
}

/* The output: rank 0 publishes it (a temporary file beside out_path), the ranks open it. */
typedef struct output {
    const char *path; /* the final name, for messages */
    char tmp[PATH_MAX];
    ckpz_publish *pub; /* rank 0's, until output_close */
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
        ckpz_ctx *ctx = ckpz_ctx_create();
        ckpz_error e = ckpz_publish_open(ctx, out_path, 0, &o->pub);
        if (e) mr_fail_ctx(r, e, ctx);
        else if (snprintf(o->tmp, sizeof o->tmp, "%s", ckpz_publish_temp(o->pub)) >= (int)sizeof o->tmp)
            mr_fail(r, CKPZ_ERR_PARAM, "%s: name too long", out_path);
        ckpz_ctx_free(ctx);
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

/* One write of `bytes` bytes at off (count items of type t from `from`). */
static void write_at(run *r, output *o, uint64_t off, const void *from, int count, MPI_Datatype t, size_t bytes)
{
    MPI_Status st;
    MPI_Count done = 0;
    int rc = MPI_File_write_at(o->fh, (MPI_Offset)off, from, count, t, &st);
    if (rc != MPI_SUCCESS) mr_fail_mpi(r, o->path, "write error", rc);
    else if (MPI_Get_elements_x(&st, MPI_BYTE, &done) != MPI_SUCCESS || (size_t)done != bytes)
        mr_fail(r, CKPZ_ERR_WRITE, "%s: write error: %lld of %zu bytes written at offset %llu", o->path,
                (long long)done, bytes, (unsigned long long)off);
}

/* This rank alone (independent MPI-IO): writes the pieces one after the other from
 * off, straight from where they lie (an hindexed datatype over their addresses: nothing
 * is copied), at most WRITE_BATCH pieces and WRITE_PIECE bytes a call (a longer piece
 * in calls of its own). Nothing after this rank's first failure. */
static void write_pieces(run *r, output *o, uint64_t off, const ckpz_piece *p, size_t np)
{
    int lens[WRITE_BATCH];
    MPI_Aint addr[WRITE_BATCH];
    for (size_t i = 0; i < np && !r->err;) {
        if (p[i].len > WRITE_PIECE) {
            for (size_t at = 0; at < p[i].len && !r->err; at += WRITE_PIECE) {
                size_t k = p[i].len - at < WRITE_PIECE ? p[i].len - at : WRITE_PIECE;
                write_at(r, o, off + at, (const uint8_t *)p[i].ptr + at, (int)k, MPI_BYTE, k);
            }
            off += p[i++].len;
            continue;
        }
        size_t i0 = i, bytes = 0;
        for (; i < np && i - i0 < WRITE_BATCH && p[i].len <= WRITE_PIECE - bytes; i++) {
            MPI_Get_address(p[i].ptr, &addr[i - i0]);
            lens[i - i0] = (int)p[i].len;
            bytes += p[i].len;
        }
        if (i - i0 == 1) {
            write_at(r, o, off, p[i0].ptr, lens[0], MPI_BYTE, bytes);
        } else {
            MPI_Datatype t;
            int rc = MPI_Type_create_hindexed((int)(i - i0), lens, addr, MPI_BYTE, &t);
            if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(&t)) != MPI_SUCCESS) MPI_Type_free(&t);
            if (rc != MPI_SUCCESS) {
                mr_fail_mpi(r, o->path, "write error (datatype)", rc);
                break;
            }
            write_at(r, o, off, MPI_BOTTOM, 1, t, bytes);
            MPI_Type_free(&t);
        }
        off += bytes;
    }
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
    if (r->rank == 0 && o->pub) {
        if (r->err) {
            ckpz_publish_abort(o->pub);
        } else {
            ckpz_ctx *ctx = ckpz_ctx_create();
            ckpz_error e = ckpz_publish_commit(ctx, o->pub, CKPZ_PUBLISH_REPLACE);
            if (e) mr_fail_ctx(r, e, ctx);
            ckpz_ctx_free(ctx);
        }
        o->pub = NULL;
    }
    (void)out_path; /* the publish knows it */
    mr_agree(r);
}

/* Chunk k's bytes in the original ([*off, *off + *len); k == chunks: the end), of a
 * split plan (compressing) or an open archive (restoring). */
typedef void (*chunk_fn)(const void *obj, uint64_t k, uint64_t *off, uint64_t *len);
static void split_chunk(const void *s, uint64_t k, uint64_t *off, uint64_t *len) { ckpz_split_chunk(s, k, off, len); }
static void archive_chunk(const void *a, uint64_t k, uint64_t *off, uint64_t *len)
{
    ckpz_archive_chunk(a, k, off, len);
}

/* The first chunk of [b, e) that starts at or past byte `at` (e if none). */
static uint64_t first_from(chunk_fn chunk, const void *obj, uint64_t b, uint64_t e, uint64_t at)
{
    while (b < e) {
        uint64_t m = b + (e - b) / 2, off, len;
        chunk(obj, m, &off, &len);
        if (off < at) b = m + 1;
        else e = m;
    }
    return b;
}

/* Rank q's chunks of [b, e): those that start in its share of their bytes (the last
 * rank's share ends at e). */
static void share(const run *r, int q, uint64_t b, uint64_t e, chunk_fn chunk, const void *obj, uint64_t *first,
                  uint64_t *n)
{
    uint64_t start, end, len;
    chunk(obj, b, &start, &len);
    chunk(obj, e, &end, &len);
    end -= start;
    uint64_t lo = start + end / r->size * q + end % r->size * q / r->size;
    uint64_t hi = start + end / r->size * (q + 1) + end % r->size * (q + 1) / r->size;
    *first = first_from(chunk, obj, b, e, lo);
    *n = (q == r->size - 1 ? e : first_from(chunk, obj, *first, e, hi)) - *first;
}

/* How the ranks share a compression: in rounds, the same number on every rank. Without
 * `ranges`, round j is the input's chunks [j x P, (j + 1) x P), P = ROUND_CHUNKS x ranks,
 * shared between the ranks by bytes; with them (each rank's own chunks, from an assign
 * function: first and count a rank), rank q's chunks of round j are the j-th
 * ROUND_CHUNKS of its range. */
typedef struct rounds {
    const ckpz_split *s;
    uint64_t *ranges;
    uint64_t count;
} rounds;

static void round_slice(const run *r, const rounds *rd, int q, uint64_t j, uint64_t *first, uint64_t *n)
{
    uint64_t nc = ckpz_split_chunks(rd->s);
    if (rd->ranges) {
        uint64_t f = rd->ranges[2 * q], m = rd->ranges[2 * q + 1], a = j * ROUND_CHUNKS;
        *first = f + (a < m ? a : m);
        *n = a < m ? (m - a < ROUND_CHUNKS ? m - a : ROUND_CHUNKS) : 0;
    } else {
        uint64_t per = (uint64_t)ROUND_CHUNKS * (uint64_t)r->size, b = j * per; /* j < rd->count: b < nc */
        share(r, q, b, nc - b < per ? nc : b + per, split_chunk, rd->s, first, n);
    }
}

/* A round's exchange: every rank's records of the round's chunks, and whether a rank
 * has failed so far (non-blocking, completed a round later). */
typedef struct exchange {
    MPI_Request req[2];
    int mine, any;
    int *counts, *displs;
} exchange;

/* The source's progress callback while a rank codes (ex: the two exchanges): lets MPI
 * move the exchanges in flight. Without a progress thread a rank's part of a
 * non-blocking collective moves only inside its MPI calls, and a rank waiting for it
 * would wait for its next one. */
static int poke(void *opaque, uint64_t done, uint64_t total)
{
    exchange *ex = opaque;
    int flag;
    (void)done, (void)total;
    for (int i = 0; i < 2; i++) MPI_Testall(2, ex[i].req, &flag, MPI_STATUSES_IGNORE);
    return 0;
}

/* This rank's coded chunks not yet written. */
typedef struct slice {
    uint64_t first, n;
    void *coded;
    size_t len, cap;
} slice;

/* The layout so far, and what this rank writes of it. */
typedef struct layout {
    ckpz_split *s;
    uint8_t *records;     /* every chunk's, at its index */
    uint8_t *known;       /* a chunk's record has arrived */
    uint64_t frontier;    /* the first chunk whose record has not */
    uint64_t laid;        /* chunks laid out (ckpz_split_lay) */
    int ended;            /* the tail is laid out */
    slice *pend;          /* this rank's coded chunks, in order, from pend[0] */
    size_t npend;
    slice spare;          /* a written slice's memory, for the next (its pages faulted in) */
    ckpz_stats stats;
} layout;

/* Lays out chunks [l->laid, upto), among them this rank's coded chunks `mine` (or
 * none), and writes this rank's bytes of them (rank 0: the head and the tail too). */
static void lay_write(run *r, ckpz_ctx *ctx, layout *l, output *o, uint64_t upto, const slice *mine)
{
    ckpz_split_out so = {.struct_size = sizeof so};
    ckpz_error e = ckpz_split_lay(ctx, l->s, l->records, upto, mine ? mine->first : 0, mine ? mine->n : 0,
                                  mine ? mine->coded : NULL, mine ? mine->len : 0, &so);
    if (e) {
        mr_fail_ctx(r, e, ctx);
        return;
    }
    if (r->rank == 0 && so.head_len) write_pieces(r, o, 0, &(ckpz_piece){so.head, so.head_len}, 1);
    write_pieces(r, o, so.region_offset, so.pieces, so.npieces);
    l->laid = upto;
    if (upto == ckpz_split_chunks(l->s)) {
        if (r->rank == 0) write_pieces(r, o, so.tail_offset, &(ckpz_piece){so.tail, so.tail_len}, 1);
        l->stats = so.stats;
        l->ended = 1;
    }
    ckpz_split_out_free(&so);
}

/* Lays out and writes what the records that have arrived allow: up to the frontier. */
static void lay_known(run *r, ckpz_ctx *ctx, layout *l, output *o)
{
    size_t i = 0;
    for (; i < l->npend && l->pend[i].first + l->pend[i].n <= l->frontier && !r->err; i++) {
        lay_write(r, ctx, l, o, l->pend[i].first + l->pend[i].n, &l->pend[i]);
        if (l->spare.cap < l->pend[i].cap) {
            free(l->spare.coded);
            l->spare = l->pend[i];
        } else {
            free(l->pend[i].coded);
        }
        l->pend[i].coded = NULL;
    }
    memmove(l->pend, l->pend + i, (l->npend - i) * sizeof *l->pend);
    l->npend -= i;
    if (!r->err && (l->laid < l->frontier || (l->frontier == ckpz_split_chunks(l->s) && !l->ended)))
        lay_write(r, ctx, l, o, l->frontier, NULL);
}

/* Memory for the frames of chunks [my->first, my->first + my->n): the spare when it is
 * large enough, else new. */
static int slice_room(run *r, layout *l, slice *my)
{
    uint64_t need = ckpz_split_bound(l->s, my->first, my->n);
    my->len = 0;
    if (l->spare.cap >= need) {
        my->coded = l->spare.coded, my->cap = l->spare.cap;
        l->spare.coded = NULL, l->spare.cap = 0;
        return 0;
    }
    uint64_t want = need + need / 8; /* rounds differ a little: the next one fits too */
    if (want > SIZE_MAX || !(my->coded = mr_room((size_t)want))) {
        mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
        return -1;
    }
    my->cap = (size_t)want;
    return 0;
}

/* Codes chunks [k, k + m) of my's, after the frames coded before them. */
static void code_part(run *r, ckpz_ctx *ctx, layout *l, slice *my, uint64_t k, uint64_t m)
{
    size_t len = 0;
    if (!m || r->err) return;
    ckpz_error e = ckpz_split_code_into(ctx, l->s, k, m, l->records + k * CKPZ_SPLIT_RECORD_SIZE,
                                        (uint8_t *)my->coded + my->len, my->cap - my->len, &len);
    if (e) mr_fail_ctx(r, e, ctx);
    my->len += len;
}

/* Completes a round's exchange x; unless a rank has failed (then 1: every rank stops at
 * the same round), lays out and writes what the records now known allow. */
static int settle(run *r, ckpz_ctx *ctx, layout *l, output *o, exchange *x)
{
    MPI_Waitall(2, x->req, MPI_STATUSES_IGNORE);
    if (x->any) return 1;
    for (int q = 0; q < r->size; q++)
        memset(l->known + x->displs[q] / CKPZ_SPLIT_RECORD_SIZE, 1, (size_t)x->counts[q] / CKPZ_SPLIT_RECORD_SIZE);
    while (l->frontier < ckpz_split_chunks(l->s) && l->known[l->frontier]) l->frontier++;
    if (!r->err) lay_known(r, ctx, l, o);
    return 0;
}

/* Each round a rank codes its chunks of the round, starts the round's exchange, and
 * writes what the previous round's records let it lay out: rank q of n ranks after
 * coding q/n of its round's chunks if that exchange is complete by then, else after the
 * rest of them, so that the ranks' writes come in turn rather than together (a local file
 * system takes one writer at a time; a rank that waited there for a slower one would
 * start writing when that one does). A rank after a rank that has not finished holds its
 * coded chunks until the layout reaches them (with ranges: all of them; without: a
 * round's). */
void mr_compress_source(run *r, ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const char *out_path,
                        ckpz_stats *stats, plan_check_fn check, chunk_assign_fn assign, const void *arg)
{
    ckpz_split *s = NULL;
    uint8_t *records = NULL;
    exchange ex[2];
    rounds rd;
    layout l;
    output o;
    memset(ex, 0, sizeof ex);
    memset(&rd, 0, sizeof rd);
    memset(&l, 0, sizeof l);
    memset(&o, 0, sizeof o);
    ex[0].req[0] = ex[0].req[1] = ex[1].req[0] = ex[1].req[1] = MPI_REQUEST_NULL;

    if (src && !r->err) {
        ckpz_source own = *src; /* MPI moves as the rank codes */
        own.progress = poke, own.progress_opaque = ex;
        ckpz_error e = ckpz_split_plan(ctx, params, &own, &s);
        if (e) mr_fail_ctx(r, e, ctx);
    }
    if (mr_agree(r)) goto out;
    if (check) {
        check(r, s, arg);
        if (mr_agree(r)) goto out;
    }

    uint64_t nc = ckpz_split_chunks(s);
    rd.s = s;
    if (assign) {
        uint64_t mine[2];
        if (!(rd.ranges = malloc(2 * (size_t)r->size * sizeof *rd.ranges))) mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
        if (mr_agree(r)) goto out; /* every rank takes part in the all-gather, or none */
        assign(r, s, arg, &mine[0], &mine[1]);
        MPI_Allgather(mine, 2, MPI_UINT64_T, rd.ranges, 2, MPI_UINT64_T, r->comm);
        for (int q = 0; q < r->size; q++) {
            uint64_t k = (rd.ranges[2 * q + 1] + ROUND_CHUNKS - 1) / ROUND_CHUNKS;
            if (k > rd.count) rd.count = k;
        }
    } else {
        rd.count = (nc + (uint64_t)ROUND_CHUNKS * r->size - 1) / ((uint64_t)ROUND_CHUNKS * r->size);
    }
    records = calloc(nc + 1, CKPZ_SPLIT_RECORD_SIZE);
    l.known = calloc(nc + 1, 1);
    l.pend = calloc(rd.count + 1, sizeof *l.pend);
    int ok = records && l.known && l.pend;
    for (int i = 0; i < 2; i++) {
        ex[i].counts = calloc((size_t)r->size, sizeof *ex[i].counts);
        ex[i].displs = calloc((size_t)r->size, sizeof *ex[i].displs);
        ok = ok && ex[i].counts && ex[i].displs;
    }
    if (!ok) mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
    else if ((nc + 1) * CKPZ_SPLIT_RECORD_SIZE > INT_MAX)
        mr_fail(r, CKPZ_ERR_LIMIT, "%llu chunks: more records than one MPI_Allgatherv moves", (unsigned long long)nc);
    if (mr_agree(r)) goto out;
    l.s = s;
    l.records = records;
    output_open(r, &o, out_path);
    if (r->err) goto out;

    int stop = 0;
    slice cur = {0};
    for (uint64_t j = 0; j <= rd.count && !stop; j++) {
        uint64_t split = 0;
        int written = j == 0; /* round j - 1's bytes written (none before round 0) */
        if (j < rd.count) {
            round_slice(r, &rd, r->rank, j, &cur.first, &cur.n);
            if (cur.n && !r->err && slice_room(r, &l, &cur) == 0) {
                split = cur.n * (uint64_t)r->rank / (uint64_t)r->size;
                code_part(r, ctx, &l, &cur, cur.first, split);
            }
        }
        /* round j - 1's bytes: here if its exchange is complete, else after this round's
         * chunks (a rank that waited here would start writing with the rank it waited for) */
        int ready = 1;
        if (!written && cur.coded) MPI_Testall(2, ex[(j - 1) & 1].req, &ready, MPI_STATUSES_IGNORE);
        if (!written && ready) {
            written = 1;
            if ((stop = settle(r, ctx, &l, &o, &ex[(j - 1) & 1]))) break;
        }
        if (j < rd.count && cur.coded) {
            code_part(r, ctx, &l, &cur, cur.first + split, cur.n - split);
            l.pend[l.npend++] = cur;
            cur.coded = NULL;
        }
        if (!written && (stop = settle(r, ctx, &l, &o, &ex[(j - 1) & 1]))) break;
        if (j < rd.count) {
            exchange *x = &ex[j & 1];
            for (int q = 0; q < r->size; q++) {
                uint64_t f, n;
                round_slice(r, &rd, q, j, &f, &n);
                x->counts[q] = (int)(n * CKPZ_SPLIT_RECORD_SIZE);
                x->displs[q] = (int)(f * CKPZ_SPLIT_RECORD_SIZE);
            }
            MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, records, x->counts, x->displs, MPI_BYTE, r->comm, &x->req[0]);
            x->mine = r->err != 0;
            MPI_Iallreduce(&x->mine, &x->any, 1, MPI_INT, MPI_MAX, r->comm, &x->req[1]);
        }
    }
    free(cur.coded);
    MPI_Waitall(2, ex[0].req, MPI_STATUSES_IGNORE);
    MPI_Waitall(2, ex[1].req, MPI_STATUSES_IGNORE);
    if (!stop && !r->err) lay_known(r, ctx, &l, &o); /* no rounds (nothing to code): the head and tail */
    if (!stop && !r->err && !l.ended)
        mr_fail(r, CKPZ_ERR_PARAM, "%s: chunk %llu was given to no rank", out_path, (unsigned long long)l.frontier);
    output_close(r, &o, out_path);
    if (!r->err && stats) mr_give_stats(stats, &l.stats);
out:
    if (o.called) output_close(r, &o, out_path);
    for (size_t i = 0; i < l.npend; i++) free(l.pend[i].coded);
    free(l.spare.coded);
    free(l.pend);
    free(l.known);
    free(records);
    free(rd.ranges);
    for (int i = 0; i < 2; i++) free(ex[i].counts), free(ex[i].displs);
    ckpz_split_free(s);
}

ckpz_error ckpz_mpi_compress(ckpz_ctx *caller, MPI_Comm comm, const ckpz_params *params, const ckpz_source *src,
                             const char *out_path, ckpz_stats *stats)
{
    run r;
    mr_init(&r, comm, caller, stats);
    int ok = !r.err && check_source(&r, src) == 0;
    mr_compress_source(&r, r.ctx, params, ok ? src : NULL, out_path, stats, NULL, NULL, NULL);
    return mr_finish(&r);
}

ckpz_error ckpz_mpi_compress_file(ckpz_ctx *caller, MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                  const char *out_path, ckpz_stats *stats)
{
    run r;
    mr_init(&r, comm, caller, stats);
    ckpz_fd f = {.fd = -1};
    ckpz_source src;
    int ok = !r.err && open_input(&r, in_path, &f, &src) == 0;
    mr_compress_source(&r, r.ctx, params, ok ? &src : NULL, out_path, stats, NULL, NULL, NULL);
    if (f.fd >= 0) close(f.fd);
    return mr_finish(&r);
}

/* Every rank's failures, seen without holding the ranks in step: a loop of the same
 * number of rounds on every rank calls watch_round at each; every CHECK_EVERY rounds it
 * completes the all-reduce of failures it started CHECK_EVERY rounds before and starts
 * the next (between, it lets MPI progress). Ranks drift apart by up to that many rounds
 * and all stop at the same round (watch_round gives 1) when one has failed; the loop's
 * end completes w->req. */
typedef struct watch {
    MPI_Request req;
    int mine, any;
} watch;

static int watch_round(run *r, watch *w, unsigned long long i)
{
    int done;
    if (i % CHECK_EVERY) return MPI_Test(&w->req, &done, MPI_STATUS_IGNORE), 0;
    MPI_Wait(&w->req, MPI_STATUS_IGNORE);
    if (w->any) return 1;
    w->mine = r->err != 0;
    MPI_Iallreduce(&w->mine, &w->any, 1, MPI_INT, MPI_MAX, r->comm, &w->req);
    return 0;
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

/* Collective: the ranks restore src (each rank's own source of the .ckpz file; NULL on a
 * rank that already failed) into out_path (NULL: verify only). */
static void restore(run *r, const ckpz_params *params, const ckpz_source *src, const char *out_path, ckpz_stats *stats)
{
    MPI_Comm comm = r->comm;
    ckpz_ctx *ctx = r->ctx;
    ckpz_archive *a = NULL;
    ckpz_archive_info info = {.struct_size = sizeof info};
    output o;
    uint8_t *buf = NULL;
    memset(&o, 0, sizeof o);

    if (src && !r->err) {
        ckpz_error e = ckpz_archive_open_io(ctx, params, src, &a);
        /* what the ranks' chunk reads never touch, as serial ckpz's sequential decoder
         * reads it: the entry frames and the frames' layout (small: one rank does it) */
        if (!e && r->rank == 0) e = ckpz_archive_check_frames(ctx, a);
        if (e) mr_fail_ctx(r, e, ctx);
        else ckpz_archive_get_info(a, &info);
    }
    if (mr_agree(r)) goto out;

    /* This rank's share: whole chunks (as compressing splits them), restored in pieces of
     * whole chunks of about RESTORE_PIECE bytes, each decoded into one buffer that is
     * checksummed and written while the cache still holds it; no chunk is decoded twice. */
    uint64_t size = info.original_size, k0 = 0, nk = 0, lo, hi, len;
    share(r, r->rank, 0, info.chunks, archive_chunk, a, &k0, &nk);
    ckpz_archive_chunk(a, k0, &lo, &len);
    ckpz_archive_chunk(a, k0 + nk, &hi, &len);
    unsigned long long mine = 0, rounds = 0;
    size_t cap = 0; /* the largest piece (more than RESTORE_PIECE only for a chunk that is) */
    for (uint64_t k = k0, end; k < k0 + nk; k = end, mine++) {
        uint64_t n = piece(a, k, k0 + nk, &end);
        if (n > cap) cap = (size_t)n;
    }
    MPI_Allreduce(&mine, &rounds, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
    if (mine && !(buf = malloc(cap))) mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
    if (mr_agree(r)) goto out;
    if (out_path) {
        output_open(r, &o, out_path);
        if (r->err) goto out;
    }
    uint32_t crc = 0;
    uint64_t next = k0; /* the first chunk of this rank's next piece */
    watch w = {MPI_REQUEST_NULL, 0, 0};
    for (unsigned long long i = 0; i < rounds && !watch_round(r, &w, i); i++) {
        uint64_t at;
        ckpz_archive_chunk(a, next, &at, &len);
        size_t n = (size_t)piece(a, next, k0 + nk, &next); /* 0 past this rank's last piece */
        if (!n || r->err) continue;
        ckpz_span span = {at, n, buf};
        ckpz_error e = ckpz_archive_read(ctx, a, &span, 1);
        if (e) mr_fail_ctx(r, e, ctx);
        else crc = ckpz_crc32c(crc, buf, n);
        if (o.called) write_pieces(r, &o, at, &(ckpz_piece){buf, n}, 1);
    }
    MPI_Wait(&w.req, MPI_STATUS_IGNORE);
    mr_agree(r);
    if (!r->err) {
        /* the whole file's checksum from the ranks' parts, in rank order */
        struct {
            uint32_t crc;
            uint32_t pad;
            uint64_t len;
        } part = {crc, 0, hi - lo}, *parts = r->rank == 0 ? calloc((size_t)r->size, sizeof *parts) : NULL;
        int ok = r->rank != 0 || parts != NULL, all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
        if (!all_ok) {
            mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
        } else {
            MPI_Gather(&part, (int)sizeof part, MPI_BYTE, parts, (int)sizeof part, MPI_BYTE, 0, comm);
            if (r->rank == 0) {
                uint32_t whole = 0;
                for (int k = 0; k < r->size; k++) whole = ckpz_crc32c_combine(whole, parts[k].crc, parts[k].len);
                if (whole != info.content_checksum)
                    mr_fail(r, CKPZ_ERR_CHECKSUM,
                            "content checksum mismatch: the restored bytes have CRC-32C %08x, the file says %08x",
                            (unsigned)whole, (unsigned)info.content_checksum);
            }
        }
        free(parts);
        mr_agree(r);
    }
    if (o.called) output_close(r, &o, out_path);
    if (!r->err && stats) {
        ckpz_stats st = {.struct_size = sizeof st,
                         .original_bytes = size,
                         .compressed_bytes = info.compressed_size,
                         .chunks = info.chunks,
                         .format = info.format};
        mr_give_stats(stats, &st);
    }
out:
    if (o.called) output_close(r, &o, out_path);
    free(buf);
    ckpz_archive_close(a);
}

ckpz_error ckpz_mpi_decompress(ckpz_ctx *caller, MPI_Comm comm, const ckpz_params *params, const ckpz_source *src,
                               const char *out_path, ckpz_stats *stats)
{
    run r;
    mr_init(&r, comm, caller, stats);
    int ok = !r.err && check_source(&r, src) == 0;
    restore(&r, params, ok ? src : NULL, out_path, stats);
    return mr_finish(&r);
}

ckpz_error ckpz_mpi_decompress_file(ckpz_ctx *caller, MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                    const char *out_path, ckpz_stats *stats)
{
    run r;
    mr_init(&r, comm, caller, stats);
    ckpz_fd f = {.fd = -1};
    ckpz_source src;
    int ok = !r.err && open_input(&r, in_path, &f, &src) == 0;
    restore(&r, params, ok ? &src : NULL, out_path, stats);
    if (f.fd >= 0) close(f.fd);
    return mr_finish(&r);
}
