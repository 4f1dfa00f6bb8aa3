/* agree.c — how the ranks of a libckpz_mpi call fail together (internal.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

void mr_init(run *r, MPI_Comm comm, ckpz_ctx *caller, const ckpz_stats *stats)
{
    memset(r, 0, sizeof *r);
    r->comm = comm;
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->size);
    r->caller = caller;
    r->ctx = caller ? caller : (r->own = ckpz_ctx_create());
    if (!r->ctx) mr_fail(r, CKPZ_ERR_NOMEM, "out of memory");
    /* as libckpz checks the structs it fills (ckpz.h) */
    if (stats && (stats->struct_size < sizeof(size_t) || stats->struct_size > sizeof *stats))
        mr_fail(r, CKPZ_ERR_PARAM, "ckpz_stats.struct_size %zu is not a size of it this library fills (%zu to %zu)",
                stats->struct_size, sizeof(size_t), sizeof *stats);
}

void mr_give_stats(ckpz_stats *out, const ckpz_stats *mine)
{
    size_t have = out->struct_size < sizeof *out ? out->struct_size : sizeof *out;
    if (have > sizeof have) memcpy((char *)out + sizeof have, (const char *)mine + sizeof have, have - sizeof have);
}

/* Records this rank's first failure (later ones are consequences). */
void mr_fail(run *r, ckpz_error code, const char *fmt, ...)
{
    if (r->err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->err = code;
}

void mr_fail_ctx(run *r, ckpz_error code, ckpz_ctx *ctx)
{
    const char *m = ctx ? ckpz_ctx_message(ctx) : NULL;
    mr_fail(r, code, "%s", m && *m ? m : ckpz_error_name(code));
}

void mr_fail_mpi(run *r, const char *path, const char *doing, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    mr_fail(r, CKPZ_ERR_WRITE, "%s: %s: %s", path, doing, s);
}

/* Collective: the lowest failing rank's code and message, on every rank. Once the
 * ranks agree on a failure, later calls keep it and communicate no more (no rank
 * communicates then). */
ckpz_error mr_agree(run *r)
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

ckpz_error mr_finish(run *r)
{
    ckpz_ctx_free(r->own);
    return ckpz_ctx_report(r->caller, r->err, r->err ? r->msg : "");
}
