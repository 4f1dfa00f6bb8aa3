/* cli.c — ckpz-mpi: `mpirun -n N ckpz-mpi [ckpz options] FILE...`. The command line is
 * ckpz's own (programs/cli.c's cli_main, run over this file's table of operations, mpi_ops),
 * so options, usage and messages are ckpz's; compression, -d and -t run
 * on all ranks through libckpz_mpi, the other operations (-l, --extract, -b, --rebase,
 * --predict) on rank 0 alone. Only rank 0 prints: the other ranks' output goes to
 * /dev/null, and libckpz_mpi hands every rank the message of the rank that failed, so
 * rank 0 says it. Every rank exits with rank 0's status.
 *
 * Under MPI the ranks are the parallelism: -T defaults to 1 thread per rank (ckpz's
 * default, all cores, would have every rank of a node use all of them). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basefile.h"
#include "bench.h"
#include "ckpz_mpi.h"
#include "cli.h"
#include "display.h"
#include "filelist.h"
#include "ops.h"
#include "predict_cli.h"

static int g_rank;

/* Rank 0 runs op; every rank returns its status. */
static int on_rank0(int rc)
{
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

static int mpi_list_files(const fio_prefs *p, const char *const *files, int n)
{
    return on_rank0(g_rank == 0 ? fio_list_files(p, files, n) : 0);
}

static int mpi_extract(const fio_prefs *p, const char *tensor, const char *file)
{
    return on_rank0(g_rank == 0 ? fio_extract(p, tensor, file) : 0);
}

static int mpi_rebase_files(const fio_prefs *p, const char *const *files, int n)
{
    return on_rank0(g_rank == 0 ? fio_rebase_files(p, files, n) : 0);
}

static int mpi_bench_files(const fio_prefs *p, const char *const *files, int n)
{
    return on_rank0(g_rank == 0 ? bench_files(p, files, n) : 0);
}

static int mpi_predict_run(const fio_prefs *p, const char *const *files, int n, const predict_opts *o)
{
    return on_rank0(g_rank == 0 ? predict_run(p, files, n, o) : 0);
}

/* Whether ok holds on every rank: decisions a rank takes alone before a collective call
 * (a base it cannot load, an output that exists where it looks) must be every rank's,
 * or the others would wait in the call. */
static int all_ok(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

typedef enum { OP_COMPRESS, OP_DECOMPRESS, OP_TEST } mpi_op;

/* The output name (fio_output_name: ckpz's), into *dst (malloc'd); 1 after printing why
 * there is none, or when it exists without -f: checked here, on every rank alike (the
 * same files), because a rank that stopped inside the collective call would leave the
 * others waiting. */
static int output_name(const fio_prefs *p, mpi_op op, const char *src, char **dst)
{
    struct stat st;
    if (fio_output_name(p, op == OP_DECOMPRESS, 0, src, dst) != 0) return 1;
    if (!p->force && lstat(*dst, &st) == 0) {
        fio_error("%s: already exists (use -f to overwrite)", *dst);
        return 1;
    }
    return 0;
}

/* One file on every rank: src to out (NULL for -t), coded against base; n files in the
 * run (for the summary's rule). 0, or 1 after printing why. */
static int run_one(ckpz_ctx *ctx, const fio_prefs *p, mpi_op op, const char *src, const char *out, const fio_base *base,
                   int n)
{
    ckpz_params params;
    fio_params(p, &params);
    if (!p->threads_set) params.threads = 1;
    if (base && base->path) {
        params.base = base->data;
        params.base_size = base->size;
        params.base_name = fio_base_record_name(base);
        params.base_depth = base->depth;
    }
    ckpz_stats st = {.struct_size = sizeof st};
    double t0 = MPI_Wtime();
    ckpz_error e = op == OP_COMPRESS ? ckpz_mpi_compress_file(ctx, MPI_COMM_WORLD, &params, src, out, &st)
                                     : ckpz_mpi_decompress_file(ctx, MPI_COMM_WORLD, &params, src, out, &st);
    double dt = MPI_Wtime() - t0;
    if (e) {
        fio_error("%s: %s", src, ctx ? ckpz_ctx_message(ctx) : ckpz_error_name(e));
        return 1;
    }
    if (op == OP_COMPRESS && p->policy && g_rank == 0 && ctx) fio_lossy_report(ctx, p, out);
    if (p->verbosity < 2 || (n > 1 && p->verbosity < 3 && !isatty(STDERR_FILENO))) return 0;
    char a[32], b[32];
    double ratio = st.compressed_bytes ? (double)st.original_bytes / (double)st.compressed_bytes : 0.0;
    double mbs = (double)st.original_bytes / 1e6 / (dt > 1e-9 ? dt : 1e-9);
    if (op == OP_TEST) fprintf(stderr, "%s : OK\n", src);
    else if (op == OP_COMPRESS)
        fprintf(stderr, "%s : %.1f%% (%s => %s, %s) %.3fx, %.1f MB/s\n", src,
                st.original_bytes ? 100.0 * (double)st.compressed_bytes / (double)st.original_bytes : 0.0,
                fio_human(a, sizeof a, st.original_bytes), fio_human(b, sizeof b, st.compressed_bytes), out, ratio,
                mbs);
    else
        fprintf(stderr, "%s : %s => %s, %s (%.3fx, %.1f MB/s)\n", src, fio_human(a, sizeof a, st.compressed_bytes),
                fio_human(b, sizeof b, st.original_bytes), out, ratio, mbs);
    return 0;
}

static int run_files(const fio_prefs *p, mpi_op op, const char *const *files, int n)
{
    fio_base cache;
    const fio_base *base = NULL;
    int failed = 0;
    fio_set_verbosity(p->verbosity);
    memset(&cache, 0, sizeof cache);
    if (p->to_stdout || (p->out_name && !strcmp(p->out_name, "-"))) {
        fio_error("ckpz-mpi writes files with MPI-IO: -c and -o - are not supported");
        return 1;
    }
    if (p->out_name && n > 1) {
        fio_error("-o takes exactly one input file");
        return 1;
    }
    if (op == OP_COMPRESS && p->base_path) {
        if (!all_ok(fio_base_load(p, p->base_path, &cache) == 0)) {
            fio_base_free(&cache);
            return 1;
        }
        base = &cache;
    }
    /* kept from file to file: the library calls' working memory. Without one (no memory)
     * the calls still run, and a failure is named by its code. */
    ckpz_ctx *ctx = ckpz_ctx_create();
    for (int i = 0; i < n; i++) {
        char *out = NULL;
        struct stat fst;
        if (!strcmp(files[i], "-")) {
            fio_error("ckpz-mpi reads files at offsets: standard input is not supported");
            failed = 1;
            continue;
        }
        /* before any rank opens it: a FIFO would wait for a writer, then be read by
         * every rank at once */
        if (stat(files[i], &fst) == 0 && !S_ISREG(fst.st_mode) && !S_ISDIR(fst.st_mode)) {
            fio_error("%s: not a regular file: ckpz-mpi reads files at offsets (pipes and FIFOs are not supported)",
                      files[i]);
            failed = 1;
            continue;
        }
        int ok = op == OP_TEST || output_name(p, op, files[i], &out) == 0;
        if (ok && op != OP_COMPRESS) ok = fio_base_for(p, files[i], &cache, &base) == 0;
        if (!all_ok(ok)) {
            free(out);
            failed = 1;
            continue;
        }
        failed |= run_one(ctx, p, op, files[i], out, base, n);
        free(out);
    }
    ckpz_ctx_free(ctx);
    fio_base_free(&cache);
    return failed;
}

static int mpi_compress_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_COMPRESS, files, n);
}

static int mpi_decompress_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_DECOMPRESS, files, n);
}

static int mpi_test_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_TEST, files, n);
}

static const cli_ops mpi_ops = {
    .compress = mpi_compress_files,
    .decompress = mpi_decompress_files,
    .test = mpi_test_files,
    .list = mpi_list_files,
    .extract = mpi_extract,
    .rebase = mpi_rebase_files,
    .bench = mpi_bench_files,
    .predict = mpi_predict_run,
};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    if (g_rank != 0 && (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))) {
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    int rc = cli_main(argc, argv, &mpi_ops);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
