/* faultshim.c — an LD_PRELOAD library that makes the file I/O of a process fail on
 * purpose, for tests/cli/fileio_faults.sh: the failures a full disk, a dying disk or a
 * network file system give (ENOSPC, EIO, write() returning 0, short transfers, failing
 * fsync/close/rename) cannot be produced on demand otherwise, and each one must end in
 * a clear error with nothing left behind.
 *
 * It wraps read/pread, write/pwrite, fsync/fdatasync, close and the calls that give a
 * file its name (rename, renameat, renameat2, linkat), and passes everything through
 * unchanged until the environment says otherwise:
 *   FAULT_OP     read | write | pwrite | fsync | close | rename  (read includes pread,
 *                write pwrite; pwrite is pwrite alone, for the rewrites at offsets;
 *                rename includes renameat, renameat2 and linkat)
 *   FAULT_KIND   eio | enospc (fail with that errno) | zero (return 0) | short (move at
 *                most FAULT_SHORT bytes a call, default 1: not a failure, only slow) |
 *                eintr (every other call fails with EINTR: retried, not a failure);
 *                for reads also truncate | append | touch: once FAULT_AFTER bytes were
 *                read, cut the file being read to FAULT_SIZE bytes (default 0), add
 *                1 MiB to its end, or rewrite its first byte, then carry on reading
 *   FAULT_AFTER  bytes that pass normally before read/write faults start (default 0);
 *                for fsync, close and rename: calls that succeed first
 *   FAULT_STDOUT 1: standard output is a target too (by default only fds >= 3 are, so
 *                that the messages of the process under test still get out)
 *   FAULT_LOG    file to which one line is appended when the first fault is injected,
 *                so that a test can tell a fault that happened from one that did not
 * With FAULT_OP=read a file is never mapped (mmap of a descriptor fails with ENODEV, as
 * on a file system that cannot map): the process reads it, and the reads are faulted.
 * Read faults hit only descriptors open for reading, write, fsync and close faults only
 * those open for writing (the output, not the input). The counters are atomic: the
 * process may do I/O from several threads.
 */
#define _GNU_SOURCE
#undef _FILE_OFFSET_BITS /* define pread64/pwrite64 ourselves, next to pread/pwrite */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

enum { OP_NONE, OP_READ, OP_WRITE, OP_PWRITE, OP_FSYNC, OP_CLOSE, OP_RENAME };
enum { K_EIO, K_ENOSPC, K_ZERO, K_SHORT, K_EINTR, K_TRUNCATE, K_APPEND, K_TOUCH };

static int g_op = -1, g_kind, g_stdout;
static unsigned long long g_after, g_short = 1, g_size;
static const char *g_log;
static unsigned long long g_done;  /* bytes moved, or calls made, by the faulted op */
static int g_logged, g_changed;

static void setup(void)
{
    const char *op = getenv("FAULT_OP"), *kind = getenv("FAULT_KIND"), *s;
    if (__atomic_load_n(&g_op, __ATOMIC_ACQUIRE) >= 0) return;
    int o = OP_NONE;
    if (op) {
        if (!strcmp(op, "read")) o = OP_READ;
        else if (!strcmp(op, "write")) o = OP_WRITE;
        else if (!strcmp(op, "pwrite")) o = OP_PWRITE;
        else if (!strcmp(op, "fsync")) o = OP_FSYNC;
        else if (!strcmp(op, "close")) o = OP_CLOSE;
        else if (!strcmp(op, "rename")) o = OP_RENAME;
    }
    g_kind = K_EIO;
    if (kind) {
        if (!strcmp(kind, "enospc")) g_kind = K_ENOSPC;
        else if (!strcmp(kind, "zero")) g_kind = K_ZERO;
        else if (!strcmp(kind, "short")) g_kind = K_SHORT;
        else if (!strcmp(kind, "eintr")) g_kind = K_EINTR;
        else if (!strcmp(kind, "truncate")) g_kind = K_TRUNCATE;
        else if (!strcmp(kind, "append")) g_kind = K_APPEND;
        else if (!strcmp(kind, "touch")) g_kind = K_TOUCH;
    }
    if ((s = getenv("FAULT_AFTER"))) g_after = strtoull(s, NULL, 10);
    if ((s = getenv("FAULT_SHORT")) && strtoull(s, NULL, 10) > 0) g_short = strtoull(s, NULL, 10);
    if ((s = getenv("FAULT_SIZE"))) g_size = strtoull(s, NULL, 10);
    g_stdout = (s = getenv("FAULT_STDOUT")) && !strcmp(s, "1");
    g_log = getenv("FAULT_LOG");
    __atomic_store_n(&g_op, o, __ATOMIC_RELEASE);
}

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*fd_fn)(int);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned);
typedef int (*linkat_fn)(int, const char *, int, const char *, int);

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        static const char msg[] = "faultshim: a wrapped function is missing\n";
        write_fn w = (write_fn)dlsym(RTLD_NEXT, "write");
        if (w) w(2, msg, sizeof msg - 1);
        abort();
    }
    return f;
}

/* the next definition of name, looked up once */
#define REAL(name, type)     \
    static type real_##name; \
    if (!real_##name) real_##name = (type)next(#name)

static void note(const char *what)
{
    if (!g_log || __atomic_exchange_n(&g_logged, 1, __ATOMIC_ACQ_REL)) return;
    REAL(write, write_fn);
    int fd = open(g_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char line[128];
    int n = snprintf(line, sizeof line, "fault %s pid %d\n", what, (int)getpid());
    if (n > 0) real_write(fd, line, (size_t)n);
    REAL(close, fd_fn);
    real_close(fd);
}

/* Is fd a target of op? Reads: open for reading; the rest: open for writing. */
static int target(int fd, int op)
{
    setup();
    if (g_op != op) return 0;
    if (fd < 3 && !(fd == 1 && g_stdout)) return 0;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return 0;
    int acc = fl & O_ACCMODE;
    return op == OP_READ ? acc != O_WRONLY : acc != O_RDONLY;
}

/* For a data transfer of n bytes: how many may pass (n when no fault applies now), or
 * -1 (errno set) / 0 for an injected failure; *fault tells which. */
static ssize_t allow(int fd, int op, size_t n, int *fault)
{
    *fault = 0;
    if (!target(fd, op)) return (ssize_t)n;
    unsigned long long done = __atomic_load_n(&g_done, __ATOMIC_ACQUIRE);
    if (done < g_after) return (ssize_t)(n < g_after - done ? n : g_after - done);
    if (g_kind == K_TRUNCATE || g_kind == K_APPEND || g_kind == K_TOUCH) {
        if (op == OP_READ && !__atomic_exchange_n(&g_changed, 1, __ATOMIC_ACQ_REL)) {
            char proc[64], path[4096];
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
            ssize_t len = readlink(proc, path, sizeof path - 1);
            if (len > 0) {
                path[len] = 0;
                int wfd = open(path, O_WRONLY | O_CLOEXEC | (g_kind == K_APPEND ? O_APPEND : 0));
                if (wfd >= 0) {
                    REAL(write, write_fn);
                    REAL(pwrite, pwrite_fn);
                    REAL(close, fd_fn);
                    if (g_kind == K_TRUNCATE) {
                        if (ftruncate(wfd, (off_t)g_size) != 0) perror("faultshim: ftruncate");
                    } else if (g_kind == K_APPEND) {
                        static char mib[1 << 20];
                        if (real_write(wfd, mib, sizeof mib) != (ssize_t)sizeof mib) perror("faultshim: append");
                    } else {
                        if (real_pwrite(wfd, "#", 1, 0) != 1) perror("faultshim: touch");
                    }
                    real_close(wfd);
                    note(g_kind == K_TRUNCATE ? "read truncate" : g_kind == K_APPEND ? "read append" : "read touch");
                }
            }
        }
        return (ssize_t)n;
    }
    *fault = 1;
    switch (g_kind) {
    case K_ZERO: note(op == OP_READ ? "read zero" : "write zero"); return 0;
    case K_SHORT:
        note(op == OP_READ ? "read short" : "write short");
        *fault = 0;
        return (ssize_t)(n < g_short ? n : g_short);
    case K_EINTR: {
        static unsigned long long calls;
        if (__atomic_fetch_add(&calls, 1, __ATOMIC_ACQ_REL) % 2) {
            *fault = 0;
            return (ssize_t)n;
        }
        note(op == OP_READ ? "read eintr" : "write eintr");
        errno = EINTR;
        return -1;
    }
    case K_ENOSPC:
        note(op == OP_READ ? "read enospc" : "write enospc");
        errno = ENOSPC;
        return -1;
    default:
        note(op == OP_READ ? "read eio" : "write eio");
        errno = EIO;
        return -1;
    }
}

static void moved(int fd, int op, ssize_t r)
{
    if (r > 0 && target(fd, op)) __atomic_fetch_add(&g_done, (unsigned long long)r, __ATOMIC_ACQ_REL);
}

/* For the calls counted one by one (fsync, close, rename): fail this one? */
static int fail_call(int op)
{
    setup();
    if (g_op != op) return 0;
    if (__atomic_fetch_add(&g_done, 1, __ATOMIC_ACQ_REL) < g_after) return 0;
    note(op == OP_FSYNC ? "fsync" : op == OP_CLOSE ? "close" : "rename");
    return 1;
}

ssize_t read(int fd, void *buf, size_t n)
{
    REAL(read, read_fn);
    int fault;
    ssize_t k = allow(fd, OP_READ, n, &fault);
    if (fault || k <= 0) return k;
    ssize_t r = real_read(fd, buf, (size_t)k);
    moved(fd, OP_READ, r);
    return r;
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    REAL(pread, pread_fn);
    int fault;
    ssize_t k = allow(fd, OP_READ, n, &fault);
    if (fault || k <= 0) return k;
    ssize_t r = real_pread(fd, buf, (size_t)k, off);
    moved(fd, OP_READ, r);
    return r;
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off) { return pread(fd, buf, n, (off_t)off); }

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
void *mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off)
{
    REAL(mmap, mmap_fn);
    if (!(flags & MAP_ANONYMOUS) && fd >= 0 && target(fd, OP_READ)) {
        errno = ENODEV;
        return MAP_FAILED;
    }
    return real_mmap(addr, n, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t n, int prot, int flags, int fd, off64_t off)
{
    return mmap(addr, n, prot, flags, fd, (off_t)off);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(write, write_fn);
    int fault;
    ssize_t k = allow(fd, OP_WRITE, n, &fault);
    if (fault || k <= 0) return k;
    ssize_t r = real_write(fd, buf, (size_t)k);
    moved(fd, OP_WRITE, r);
    return r;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    REAL(pwrite, pwrite_fn);
    int fault;
    setup();
    int op = g_op == OP_PWRITE ? OP_PWRITE : OP_WRITE;
    ssize_t k = allow(fd, op, n, &fault);
    if (fault || k <= 0) return k;
    ssize_t r = real_pwrite(fd, buf, (size_t)k, off);
    moved(fd, op, r);
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) { return pwrite(fd, buf, n, (off_t)off); }

int fsync(int fd)
{
    REAL(fsync, fd_fn);
    if (target(fd, OP_FSYNC) && fail_call(OP_FSYNC)) {
        errno = EIO;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd)
{
    REAL(fdatasync, fd_fn);
    if (target(fd, OP_FSYNC) && fail_call(OP_FSYNC)) {
        errno = EIO;
        return -1;
    }
    return real_fdatasync(fd);
}

/* As on Linux, the descriptor is released even when close reports an error. */
int close(int fd)
{
    REAL(close, fd_fn);
    int fail = target(fd, OP_CLOSE) && fail_call(OP_CLOSE);
    int r = real_close(fd);
    if (fail) {
        errno = EIO;
        return -1;
    }
    return r;
}

static int rename_fault(void)
{
    if (!fail_call(OP_RENAME)) return 0;
    errno = g_kind == K_ENOSPC ? ENOSPC : EIO;
    return 1;
}

int rename(const char *from, const char *to)
{
    REAL(rename, rename_fn);
    return rename_fault() ? -1 : real_rename(from, to);
}

int renameat(int fd1, const char *from, int fd2, const char *to)
{
    REAL(renameat, renameat_fn);
    return rename_fault() ? -1 : real_renameat(fd1, from, fd2, to);
}

int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags)
{
    REAL(renameat2, renameat2_fn);
    return rename_fault() ? -1 : real_renameat2(fd1, from, fd2, to, flags);
}

int linkat(int fd1, const char *from, int fd2, const char *to, int flags)
{
    REAL(linkat, linkat_fn);
    return rename_fault() ? -1 : real_linkat(fd1, from, fd2, to, flags);
}
