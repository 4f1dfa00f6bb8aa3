/* test_strategies.c — libckpz_mpi's calls on memory (ckpz_mpi.h), run by ctest under
 * mpirun -n 3: ckpz_mpi_bcast gives every rank the root's bytes, alone and as a delta
 * against a base all ranks hold; ckpz_mpi_compress_same writes serial ckpz's bytes when
 * the copies agree, and when rank 2's copy differs in one tensor every rank fails with
 * one message naming rank 2 and that tensor, and no file is written;
 * ckpz_mpi_compress and ckpz_mpi_decompress take every rank's input as a source, report
 * through the caller's context and refuse a stats struct of a size they do not fill;
 * ckpz_mpi_compress_tensors writes one container of every rank's shard (small tensors
 * packed across ranks among them) that is serial ckpz's file of the safetensors it
 * restores to, each tensor's bytes where they belong. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpz_mpi.h"

static int failures, rank;
#define CHECK(c, ...)                                                                            \
    do {                                                                                         \
        if (!(c)) {                                                                              \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank, __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
            failures++;                                                                          \
        }                                                                                        \
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
    ckpz_ctx *mc = ckpz_ctx_create(); /* the calls report through it */
#define WHY ckpz_ctx_message(mc)
    uint64_t moved = 0, moved_delta = 0;

    /* root-broadcast, then the delta against the base everyone holds */
    memcpy(data, rank == 0 ? next : orig, n);
    if (rank) memset(data, 0, n);
    ckpz_error e = ckpz_mpi_bcast(mc, MPI_COMM_WORLD, &p, 0, data, n, &moved);
    CHECK(e == CKPZ_OK && !memcmp(data, next, n), "bcast: %s", WHY);
    if (rank) memset(data, 0, n);
    else memcpy(data, next, n);
    p.base = orig;
    p.base_size = n;
    e = ckpz_mpi_bcast(mc, MPI_COMM_WORLD, &p, 0, data, n, &moved_delta);
    CHECK(e == CKPZ_OK && !memcmp(data, next, n), "delta bcast: %s", WHY);
    CHECK(moved_delta > 0 && moved_delta < moved / 10, "a delta of a few changes moved %llu bytes of %llu",
          (unsigned long long)moved_delta, (unsigned long long)moved);
    p.base = NULL;
    p.base_size = 0;

    /* every rank's copy: the serial file when they agree */
    char out[256];
    unsigned tag = (unsigned)getpid();
    MPI_Bcast(&tag, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
    snprintf(out, sizeof out, "/tmp/ckpz-test-strategies.%u.ckpz", tag);
    ckpz_stats st = {.struct_size = sizeof st};
    e = ckpz_mpi_compress_same(mc, MPI_COMM_WORLD, &p, next, n, out, &st);
    CHECK(e == CKPZ_OK, "compress_same: %s", WHY);
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
    e = ckpz_mpi_compress_same(mc, MPI_COMM_WORLD, &p, data, n, out, &st);
    CHECK(e == CKPZ_ERR_CORRUPT && strstr(WHY, "(rank 2)") && strstr(WHY, "tensor '"), "a differing copy: %s (%s)",
          ckpz_error_name(e), WHY);
    CHECK(access(out, F_OK) != 0, "a differing copy left %s", out);

    /* the source calls (every rank's input from memory), the restore on all ranks, and a
     * stats struct of a size the library does not fill: every rank fails alike */
    ckpz_mem in_m = {.data = next, .size = n};
    ckpz_source in_s;
    ckpz_source_mem(&in_s, &in_m);
    e = ckpz_mpi_compress(mc, MPI_COMM_WORLD, &p, &in_s, out, &st);
    CHECK(e == CKPZ_OK && st.original_bytes == n && !WHY[0], "compress from a source: %s", WHY);
    size_t zn = 0;
    uint8_t *z = e == CKPZ_OK ? load(out, &zn) : NULL;
    ckpz_mem z_m = {.data = z, .size = zn};
    ckpz_source z_s;
    ckpz_source_mem(&z_s, &z_m);
    char back[300];
    snprintf(back, sizeof back, "%s.out", out);
    ckpz_stats st2 = {.struct_size = sizeof st2};
    e = ckpz_mpi_decompress(mc, MPI_COMM_WORLD, &p, &z_s, back, &st2);
    CHECK(e == CKPZ_OK && st2.original_bytes == n && st2.compressed_bytes == zn, "restore from a source: %s", WHY);
    size_t bn = 0;
    uint8_t *restored = e == CKPZ_OK ? load(back, &bn) : NULL;
    CHECK(restored && bn == n && !memcmp(restored, next, n), "restore from a source: not the original bytes");
    free(restored);
    z_s.pread = NULL;
    e = ckpz_mpi_decompress(mc, MPI_COMM_WORLD, &p, &z_s, back, NULL);
    CHECK(e == CKPZ_ERR_PARAM && strstr(WHY, "pread"), "a source without pread: %s (%s)", ckpz_error_name(e), WHY);
    ckpz_stats bad = {.struct_size = sizeof bad + 8};
    e = ckpz_mpi_compress(NULL, MPI_COMM_WORLD, &p, &in_s, back, &bad); /* no context: the code alone */
    CHECK(e == CKPZ_ERR_PARAM, "stats of a newer header: %s", ckpz_error_name(e));
    bad.struct_size = 0;
    e = ckpz_mpi_decompress(mc, MPI_COMM_WORLD, &p, &z_s, NULL, &bad);
    CHECK(e == CKPZ_ERR_PARAM && strstr(WHY, "ckpz_stats.struct_size"), "stats without a size: %s", WHY);
    free(z);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) remove(out), remove(back);
    MPI_Barrier(MPI_COMM_WORLD);

    /* per-rank shards: small tensors at both ends of each rank's list, so that packed
     * groups span ranks, a large one, an empty one */
    enum { W = 64 * 1000 };
    float *w = malloc(W * sizeof *w), a[25], b[16];
    for (int i = 0; i < W; i++) w[i] = (float)((i * 7919 + rank * 104729) % 20011) * 1e-4f - 1.0f;
    for (int i = 0; i < 25; i++) a[i] = (float)(rank * 100 + i);
    for (int i = 0; i < 16; i++) b[i] = (float)(rank * 1000 + i) * 0.5f;
    char names[4][32];
    static const uint64_t sw[2] = {64, 1000}, sa[1] = {25}, sb[1] = {16}, se[1] = {0};
    for (int i = 0; i < 4; i++) snprintf(names[i], sizeof names[i], "r%d.%c", rank, "awbe"[i]);
    ckpz_mpi_tensor ts[4] = {{names[0], CKPZ_DTYPE_F32, 1, sa, a},
                             {names[1], CKPZ_DTYPE_F32, 2, sw, w},
                             {names[2], CKPZ_DTYPE_F32, 1, sb, b},
                             {names[3], CKPZ_DTYPE_F32, 1, se, NULL}};
    e = ckpz_mpi_compress_tensors(mc, MPI_COMM_WORLD, &p, ts, 4, out, &st);
    CHECK(e == CKPZ_OK, "compress_tensors: %s", WHY);
    if (rank == 0 && e == CKPZ_OK) {
        size_t fn = 0;
        uint8_t *file = load(out, &fn);
        ckpz_ctx *ctx = ckpz_ctx_create();
        ckpz_mem in = {.data = file, .size = fn}, orig_st = {.grow = 1}, again = {.grow = 1};
        ckpz_source src;
        ckpz_sink dst;
        ckpz_source_mem(&src, &in);
        ckpz_sink_mem(&dst, &orig_st);
        CHECK(file && ckpz_decompress_io(ctx, &p, &src, &dst, NULL) == CKPZ_OK, "restore: %s", ckpz_ctx_message(ctx));
        ckpz_mem in2 = {.data = orig_st.data, .size = orig_st.size};
        ckpz_source_mem(&src, &in2);
        ckpz_sink_mem(&dst, &again);
        CHECK(ckpz_compress_io(ctx, &p, &src, &dst, NULL) == CKPZ_OK, "serial: %s", ckpz_ctx_message(ctx));
        CHECK(again.size == fn && !memcmp(again.data, file, fn),
              "compress_tensors: not serial ckpz's file of its safetensors");
        ckpz_archive *ar = NULL;
        uint64_t idx;
        CHECK(ckpz_archive_open(ctx, &p, ckpz_mem_pread, &in, fn, &ar) == CKPZ_OK, "open: %s", ckpz_ctx_message(ctx));
        for (int k = 0; ar && k < 3; k++) {
            char nm[32];
            snprintf(nm, sizeof nm, "r%d.w", k);
            ckpz_mem got = {.grow = 1};
            CHECK(ckpz_archive_find(ctx, ar, nm, &idx) == CKPZ_OK &&
                      ckpz_archive_extract(ctx, ar, idx, ckpz_mem_write, &got) == CKPZ_OK && got.size == W * 4,
                  "%s: %s", nm, ckpz_ctx_message(ctx));
            int okv = got.size == W * 4;
            for (int i = 0; okv && i < W; i++) {
                float x;
                memcpy(&x, (uint8_t *)got.data + 4 * i, 4);
                okv = x == (float)((i * 7919 + k * 104729) % 20011) * 1e-4f - 1.0f;
            }
            CHECK(okv, "%s: not rank %d's values", nm, k);
            free(got.data);
        }
        ckpz_archive_close(ar);
        ckpz_ctx_free(ctx);
        free(file), free(orig_st.data), free(again.data);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) remove(out);
    free(w);

    int all;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all ? "test_strategies: %d check(s) failed\n" : "test_strategies: all checks passed\n", all);
    free(orig), free(next), free(data);
    ckpz_ctx_free(mc);
    MPI_Finalize();
    return all != 0;
}
