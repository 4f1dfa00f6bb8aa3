/* test_strategies.c — libckpz_mpi's sync strategies (ckpz_mpi.h), run by ctest under
 * mpirun -n 3: ckpz_mpi_bcast gives every rank the root's bytes, alone and as a delta
 * against a base all ranks hold; ckpz_mpi_compress_same writes serial ckpz's bytes when
 * the copies agree, and when rank 2's copy differs in one tensor every rank fails with
 * one message naming rank 2 and that tensor, and no file is written. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpz_mpi.h"

static int failures, rank;
#define CHECK(c, ...)                                                                 \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            failures++;                                                               \
        }                                                                             \
    } while (0)

static uint8_t *load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    if (f && !fseek(f, 0, SEEK_END)) {
        *n = (size_t)ftell(f);
        rewind(f);
        if ((b = malloc(*n)) && fread(b, 1, *n, f) != *n) free(b), b = NULL;
    }
    if (f) fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t n = 0;
    uint8_t *orig = load("samples/gpt-small.f32.safetensors", &n);
    if (!orig) {
        fprintf(stderr, "run from the source folder\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    uint8_t *next = malloc(n), *data = malloc(n);
    memcpy(next, orig, n);
    for (size_t i = 2000000; i < 2100000; i += 7) next[i] ^= 0x10;
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    p.chunk_size = 64 << 10;
    char why[600] = "";
    uint64_t moved = 0, moved_delta = 0;

    /* root-broadcast, then the delta against the base everyone holds */
    memcpy(data, rank == 0 ? next : orig, n);
    if (rank) memset(data, 0, n);
    ckpz_error e = ckpz_mpi_bcast(MPI_COMM_WORLD, &p, 0, data, n, &moved, why, sizeof why);
    CHECK(e == CKPZ_OK && !memcmp(data, next, n), "bcast: %s", why);
    if (rank) memset(data, 0, n);
    else memcpy(data, next, n);
    p.base = orig;
    p.base_size = n;
    e = ckpz_mpi_bcast(MPI_COMM_WORLD, &p, 0, data, n, &moved_delta, why, sizeof why);
    CHECK(e == CKPZ_OK && !memcmp(data, next, n), "delta bcast: %s", why);
    CHECK(moved_delta > 0 && moved_delta < moved / 10, "a delta of a few changes moved %llu bytes of %llu",
          (unsigned long long)moved_delta, (unsigned long long)moved);
    p.base = NULL;
    p.base_size = 0;

    /* every rank's copy: the serial file when they agree */
    char out[256];
    unsigned tag = (unsigned)getpid();
    MPI_Bcast(&tag, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
    snprintf(out, sizeof out, "/tmp/ckpz-test-strategies.%u.ckpz", tag);
    ckpz_stats st;
    e = ckpz_mpi_compress_same(MPI_COMM_WORLD, &p, next, n, out, &st, why, sizeof why);
    CHECK(e == CKPZ_OK, "compress_same: %s", why);
    if (rank == 0 && e == CKPZ_OK) {
        ckpz_ctx *ctx = ckpz_ctx_create();
        ckpz_mem in = {.data = next, .size = n}, ser = {.grow = 1};
        ckpz_source src;
        ckpz_sink dst;
        ckpz_source_mem(&src, &in);
        ckpz_sink_mem(&dst, &ser);
        CHECK(ckpz_compress_io(ctx, &p, &src, &dst, NULL) == CKPZ_OK, "serial");
        size_t fn = 0;
        uint8_t *file = load(out, &fn);
        CHECK(file && fn == ser.size && !memcmp(file, ser.data, fn), "compress_same: not serial ckpz's bytes");
        free(file), free(ser.data);
        ckpz_ctx_free(ctx);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) remove(out);
    MPI_Barrier(MPI_COMM_WORLD);

    /* rank 2's copy differs in one tensor */
    memcpy(data, next, n);
    if (rank == 2) data[4000000] ^= 1;
    e = ckpz_mpi_compress_same(MPI_COMM_WORLD, &p, data, n, out, &st, why, sizeof why);
    CHECK(e == CKPZ_ERR_CORRUPT && strstr(why, "(rank 2)") && strstr(why, "tensor '"),
          "a differing copy: %s (%s)", ckpz_error_name(e), why);
    CHECK(access(out, F_OK) != 0, "a differing copy left %s", out);

    int all;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all ? "test_strategies: %d check(s) failed\n" : "test_strategies: all checks passed\n", all);
    free(orig), free(next), free(data);
    MPI_Finalize();
    return all != 0;
}
