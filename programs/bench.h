/* bench.h — ckpz -b: the in-memory benchmark of ckpz against zstd on the same bytes.
 * It sits in the CLI (not in the library) because it is the one place that calls
 * zstd directly, as the baseline every claim in BENCHMARKS.md is measured against. */
#ifndef CKPZ_BENCH_H
#define CKPZ_BENCH_H

#include "prefs.h"

/* Benchmarks each file; prints one line per codec and the speed ratios on stdout.
 * Returns 0, or 1 if a file failed (read error, round trip not identical). */
int bench_files(const fio_prefs *p, const char *const *files, int n);

/* Version of the linked zstd ("1.5.4"), for ckpz -V. */
const char *bench_zstd_version(void);

#endif /* CKPZ_BENCH_H */
