/* shared-file.c — what a restore by several processes can reach on this machine without
 * MPI, written into one shared file and into a file each (ISSUE 18's scaling, read
 * against bench/mpi-scaling). P processes (fork) each open the archive, restore the
 * chunks that start in their share of its original bytes in pieces of whole chunks of
 * about 2 MiB (ckpz_archive_chunk, ckpz_archive_read, the CRC-32C of each piece), as
 * ckpz-mpi's ranks do, and pwrite each piece: into one output file at its offset (as
 * the ranks write one file), or each into a file of its own. One process doing it all is
 * the reference. The time is from the first fork to the last exit; outputs are removed
 * before each run; the cases take turns, REPS runs each; medians.
 *
 * Usage: shared-file ARCHIVE DIR [PROCS [REPS]]   (DIR: where the outputs go, tmpfs) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpz.h"

#define PIECE (2u << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Process q of p: restores its share of the archive at path into out (own: out holds
 * only its share, from offset 0). Returns 0 on success. */
static int restore_share(const char *path, const char *out, int q, int p, int own)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_fd f = {.fd = open(path, O_RDONLY)};
    ckpz_source src;
    ckpz_archive *a = NULL;
    ckpz_archive_info info = {.struct_size = sizeof info};
    int rc = 1, fd = open(out, O_WRONLY | O_CREAT, 0644);
    off_t size = f.fd >= 0 ? lseek(f.fd, 0, SEEK_END) : -1;
    if (!ctx || f.fd < 0 || fd < 0 || size < 0) goto done;
    ckpz_source_fd(&src, &f, (uint64_t)size);
    if (ckpz_archive_open_io(ctx, NULL, &src, &a) != CKPZ_OK) goto done;
    ckpz_archive_get_info(a, &info);
    uint64_t lo = info.original_size / (uint64_t)p * (uint64_t)q,
             hi = q == p - 1 ? info.original_size : info.original_size / (uint64_t)p * (uint64_t)(q + 1);
    uint64_t k = 0, at, len, base;
    while (k < info.chunks && (ckpz_archive_chunk(a, k, &at, &len), at < lo)) k++;
    ckpz_archive_chunk(a, k, &base, &len);
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint32_t crc = 0;
    while (k < info.chunks && (ckpz_archive_chunk(a, k, &at, &len), at < hi)) {
        uint64_t e = k + 1, to, next; /* chunks [k, e) end at `to` */
        ckpz_archive_chunk(a, e, &to, &len);
        while (e < info.chunks && to < hi) { /* whole chunks of this share, at most PIECE bytes (one at least) */
            ckpz_archive_chunk(a, e + 1, &next, &len);
            if (next - at > PIECE) break;
            e++, to = next;
        }
        size_t n = (size_t)(to - at);
        if (n > cap && !(buf = realloc(buf, cap = n))) goto done;
        ckpz_span span = {at, n, buf};
        if (ckpz_archive_read(ctx, a, &span, 1) != CKPZ_OK) goto done;
        crc = ckpz_crc32c(crc, buf, n);
        if (pwrite(fd, buf, n, (off_t)(own ? at - base : at)) != (ssize_t)n) goto done;
        k = e;
    }
    (void)crc; /* computed as the ranks do; the archive's chunks were checked as read */
    rc = 0;
    free(buf);
done:
    ckpz_archive_close(a);
    if (f.fd >= 0) close(f.fd);
    if (fd >= 0) close(fd);
    ckpz_ctx_free(ctx);
    return rc;
}

/* One run: p processes, one shared file or own files. Seconds, or -1 on failure. */
static double run(const char *archive, const char *dir, int p, int own)
{
    char out[4096];
    for (int q = 0; q < p; q++) {
        snprintf(out, sizeof out, "%s/shared-file.%d.%d", dir, (int)getpid(), own ? q : 0);
        unlink(out);
    }
    double t0 = now();
    for (int q = 0; q < p; q++) {
        pid_t c = fork();
        if (c == 0) {
            snprintf(out, sizeof out, "%s/shared-file.%d.%d", dir, (int)getppid(), own ? q : 0);
            _exit(restore_share(archive, out, q, p, own));
        }
        if (c < 0) return -1;
    }
    int ok = 1, st;
    for (int q = 0; q < p; q++) ok &= wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    double t = now() - t0;
    for (int q = 0; q < p; q++) {
        snprintf(out, sizeof out, "%s/shared-file.%d.%d", dir, (int)getpid(), own ? q : 0);
        unlink(out);
    }
    return ok ? t : -1;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: shared-file ARCHIVE DIR [PROCS [REPS]]\n");
        return 2;
    }
    int p = argc > 3 ? atoi(argv[3]) : 2, reps = argc > 4 ? atoi(argv[4]) : 7;
    if (p < 1 || p > 64 || reps < 1 || reps > 100) return 2;
    double *t[3];
    for (int c = 0; c < 3; c++) t[c] = calloc((size_t)reps, sizeof **t);
    for (int i = 0; i < reps; i++)
        for (int c = 0; c < 3; c++) { /* one process; p into one file; p into a file each */
            t[c][i] = run(argv[1], argv[2], c ? p : 1, c == 2);
            if (t[c][i] < 0) {
                fprintf(stderr, "shared-file: a restore failed\n");
                return 1;
            }
        }
    static const char *name[3] = {"process", "processes, one shared file", "processes, a file each"};
    double med[3];
    for (int c = 0; c < 3; c++) {
        qsort(t[c], (size_t)reps, sizeof **t, cmp);
        med[c] = reps % 2 ? t[c][reps / 2] : (t[c][reps / 2 - 1] + t[c][reps / 2]) / 2;
        printf("%d %-26s median %.4f s, best %.4f s (%.2fx one process)\n", c ? p : 1, name[c], med[c], t[c][0],
               med[0] / med[c]);
    }
    return 0;
}
