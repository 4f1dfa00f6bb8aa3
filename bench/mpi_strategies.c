/* mpi_strategies.c — seed 001's ways to give N ranks one checkpoint, measured on the same
 * bytes (ISSUE 18): MPI_Bcast of the raw bytes; the root compresses and broadcasts the
 * compressed bytes, which the others verify and decode (ckpz_mpi_bcast); the same as a
 * delta against the previous checkpoint every rank already holds; and every rank holding
 * its copy, the ranks checking by checksums that the copies agree and compressing them
 * together into one file on tmpfs (ckpz_mpi_compress_same). For each: the bytes sent from
 * one rank to the others (per receiving rank) and the wall time (the slowest rank's,
 * best of REPS). Receivers' results are compared with the file.
 *
 * Usage: mpirun -n N mpi_strategies FILE BASE [REPS [THREADS]] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPZ_EXPERIMENTAL /* CKPZ_SPLIT_RECORD_SIZE */
#include "ckpz.h"
#include "ckpz_mpi.h"

static void *load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    void *b = NULL;
    if (f && !fseek(f, 0, SEEK_END)) {
        *n = (size_t)ftell(f);
        rewind(f);
        if ((b = malloc(*n ? *n : 1)) && fread(b, 1, *n, f) != *n) free(b), b = NULL;
    }
    if (f) fclose(f);
    return b;
}

static double slowest(double t0)
{
    double dt = MPI_Wtime() - t0, most;
    MPI_Allreduce(&dt, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return most;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, reps = argc > 3 ? atoi(argv[3]) : 3;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t n = 0, nb = 0;
    uint8_t *mine = argc > 2 ? load(argv[1], &n) : NULL, *base = argc > 2 ? load(argv[2], &nb) : NULL;
    uint8_t *recv = malloc(n ? n : 1);
    if (!mine || !base || !recv) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n N mpi_strategies FILE BASE [REPS [THREADS]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = argc > 4 ? atoi(argv[4]) : 1;
    ckpz_ctx *ctx = ckpz_ctx_create();
    char out[256];
    unsigned tag = (unsigned)MPI_Wtime();
    MPI_Bcast(&tag, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
    snprintf(out, sizeof out, "/dev/shm/mpi_strategies.%u.ckpz", tag);
    if (rank == 0)
        printf("%d ranks x %d thread(s), %zu bytes (%s), base %s; time = slowest rank, best of %d\n", size, p.threads,
               n, argv[1], argv[2], reps);
    for (int s = 0; s < 4; s++) {
        static const char *names[] = {"MPI_Bcast raw", "root compresses + Bcast", "root delta vs base + Bcast",
                                      "every rank compresses + checksums"};
        double best = 1e30;
        uint64_t moved = 0;
        int ok = 1;
        for (int k = 0; k < reps; k++) {
            uint8_t *data = rank == 0 ? mine : recv;
            if (rank) memset(recv, 0, n);
            ckpz_error e = CKPZ_OK;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (s == 0) {
                for (size_t at = 0; at < n; at += 1u << 30)
                    MPI_Bcast(data + at, (int)(n - at < (1u << 30) ? n - at : (1u << 30)), MPI_BYTE, 0, MPI_COMM_WORLD);
                moved = n;
            } else if (s == 1 || s == 2) {
                p.base = s == 2 ? base : NULL;
                p.base_size = s == 2 ? nb : 0;
                e = ckpz_mpi_bcast(ctx, MPI_COMM_WORLD, &p, 0, data, n, &moved);
                p.base = NULL, p.base_size = 0;
            } else {
                ckpz_stats st = {.struct_size = sizeof st};
                e = ckpz_mpi_compress_same(ctx, MPI_COMM_WORLD, &p, mine, n, out, &st);
                moved = st.chunks * CKPZ_SPLIT_RECORD_SIZE; /* the records all-gathered */
            }
            double dt = slowest(t0);
            if (e) {
                if (rank == 0) fprintf(stderr, "%s: %s\n", names[s], ckpz_ctx_message(ctx));
                ok = 0;
                break;
            }
            if (s < 3 && rank && memcmp(recv, mine, n)) ok = 0;
            if (dt < best) best = dt;
        }
        int all_ok;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (rank == 0)
            printf("  %-36s %12llu bytes moved per receiver  %7.3f s  %s\n", names[s], (unsigned long long)moved, best,
                   all_ok ? "ok" : "WRONG");
    }
    if (rank == 0) remove(out);
    free(mine), free(base), free(recv);
    ckpz_ctx_free(ctx);
    MPI_Finalize();
    return 0;
}
