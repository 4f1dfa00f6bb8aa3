/* main.c — main() of ckpz: the command line of cli.c over the operations on files of
 * this folder (ops.c: -z -d -t; list.c: -l --extract; rebase.c; bench.c; predict_cli.c).
 * ckpz-mpi (mpi/cli.c) is the same command line over its own table. */
#include "bench.h"
#include "cli.h"
#include "ops.h"

static const cli_ops serial_ops = {
    .compress = fio_compress_files,
    .decompress = fio_decompress_files,
    .test = fio_test_files,
    .list = fio_list_files,
    .extract = fio_extract,
    .rebase = fio_rebase_files,
    .bench = bench_files,
    .predict = predict_run,
};

int main(int argc, char **argv) { return cli_main(argc, argv, &serial_ops); }
