/* internal.h — what libckpz_mpi's files share. A call's ranks fail together: each
 * records its own first failure (fail), and after every step that can fail on one rank
 * the ranks agree (agree: an all-reduce of the lowest failing rank, then that rank's
 * code and message broadcast), so that every rank takes the same branch, makes the same
 * collective calls after it, and returns the same message. */
#ifndef CKPZ_MPI_INTERNAL_H
#define CKPZ_MPI_INTERNAL_H

#define CKPZ_EXPERIMENTAL /* the split calls */
#include "ckpz.h"
#include "ckpz_mpi.h"

#define MSG_MAX 512

typedef struct run {
    MPI_Comm comm;
    int rank, size;
    ckpz_error err;
    int agreed;  /* err is every rank's (set by agree on all ranks alike) */
    char msg[MSG_MAX];
    ckpz_ctx *ctx;     /* the library calls': the caller's, else own */
    ckpz_ctx *own;     /* made for a caller that gave none; mr_finish frees it */
    ckpz_ctx *caller;  /* mr_finish leaves the call's message there */
} run;

/* A call's start: its ranks, the context its library calls use (the caller's, else a
 * new one), and the check of the caller's stats struct (may be NULL), failing r. */
void mr_init(run *r, MPI_Comm comm, ckpz_ctx *caller, const ckpz_stats *stats);
/* The whole call's stats into the caller's, as far as its struct_size reaches. */
void mr_give_stats(ckpz_stats *out, const ckpz_stats *mine);
/* Records this rank's first failure (later ones are consequences). */
void mr_fail(run *r, ckpz_error code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mr_fail_ctx(run *r, ckpz_error code, ckpz_ctx *ctx);
void mr_fail_mpi(run *r, const char *path, const char *doing, int rc);
/* Collective: the lowest failing rank's code and message, on every rank (with the
 * rank's number when there are several). Once agreed, later calls return it at once. */
ckpz_error mr_agree(run *r);
/* The call's result: the code, and the message in the caller's context ("" on
 * success); frees the call's own context. */
ckpz_error mr_finish(run *r);

/* Room for n bytes written once and in bulk (room.c); free() it. */
void *mr_room(size_t n);

/* Between planning and coding (collective), or NULL: a check of the input against the
 * plan, which fails r when it finds something. */
typedef void (*plan_check_fn)(run *r, ckpz_split *s, const void *arg);
/* The chunks [*first, *first + *n) rank r codes, or NULL: those that start in its share
 * of the input's bytes. */
typedef void (*chunk_assign_fn)(const run *r, const ckpz_split *s, const void *arg, uint64_t *first, uint64_t *n);
/* Collective: the ranks compress src (each rank's own source of the input; NULL on a
 * rank that already failed) into out_path (ckpz_mpi.c). check and assign (may be NULL)
 * get arg. */
void mr_compress_source(run *r, ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, const char *out_path,
                        ckpz_stats *stats, plan_check_fn check, chunk_assign_fn assign, const void *arg);

#endif
