/* fd.c — the library's read, write and pread callbacks over a POSIX file descriptor
 * (ckpz_fd, include/ckpz.h).
 *
 * Bindings pass these instead of callbacks of their own so that no byte of a
 * compression or restore goes through the interpreter: the Python package's save and
 * load spend their time in C with the interpreter lock released, and a signal can only
 * reach Python between library calls, never inside a callback where it would be lost.
 * Each call finishes what it was asked (retrying EINTR, continuing short transfers) or
 * fails, and keeps the first errno so the caller can say "No space left on device"
 * rather than "write error".
 */
#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include "ckpz.h"

/* read/write/pread move at most this much per call on Linux anyway. */
#define IO_MAX ((size_t)1 << 30)

static void fd_fail(ckpz_fd *f, int err)
{
    if (!f->error) f->error = err;
}

ptrdiff_t ckpz_fd_read(void *opaque, void *buf, size_t n)
{
    ckpz_fd *f = opaque;
    if (n > IO_MAX) n = IO_MAX;
    for (;;) {
        ssize_t r = read(f->fd, buf, n);
        if (r >= 0) {
            f->bytes += (uint64_t)r;
            return (ptrdiff_t)r;
        }
        if (errno == EINTR) continue;
        fd_fail(f, errno ? errno : EIO);
        return -1;
    }
}

int ckpz_fd_write(void *opaque, const void *buf, size_t n)
{
    ckpz_fd *f = opaque;
    const char *p = buf;
    while (n) {
        ssize_t r = write(f->fd, p, n > IO_MAX ? IO_MAX : n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { /* 0: no progress, and retrying would spin */
            fd_fail(f, r < 0 && errno ? errno : EIO);
            return -1;
        }
        p += r;
        n -= (size_t)r;
        f->bytes += (uint64_t)r;
    }
    return 0;
}

int ckpz_fd_pread(void *opaque, void *buf, size_t n, uint64_t off)
{
    ckpz_fd *f = opaque;
    char *p = buf;
    while (n) {
        if (off > (uint64_t)LLONG_MAX) {
            fd_fail(f, EINVAL);
            return -1;
        }
        ssize_t r = pread(f->fd, p, n > IO_MAX ? IO_MAX : n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            fd_fail(f, errno ? errno : EIO);
            return -1;
        }
        if (r == 0) return -1; /* past the end: the file is shorter than it says; error stays 0 */
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
        f->bytes += (uint64_t)r;
    }
    return 0;
}
