/* fd.c — the library's read, write, pread and patch callbacks over a POSIX file
 * descriptor (ckpz_fd, include/ckpz.h), and the source and sink made of them.
 *
 * Bindings pass these instead of callbacks of their own so that no byte of a
 * compression or restore goes through the interpreter: the Python package's save and
 * load spend their time in C with the interpreter lock released, and a signal can only
 * reach Python between library calls, never inside a callback where it would be lost.
 * The CLI moves its buffered bytes through them too, so there is one loop per system
 * call in the tree. Each call finishes what it was asked (retrying EINTR, continuing
 * short transfers) or fails, and keeps the first errno so the caller can say "No space
 * left on device" rather than "write error"; a transfer of 0 bytes fails with errno 0,
 * the one failure no errno describes, so that a caller can name it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
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

/* All n bytes, appended (at < 0) or at offset at. */
static int put(ckpz_fd *f, const char *p, size_t n, int64_t at)
{
    while (n) {
        size_t k = n > IO_MAX ? IO_MAX : n;
        ssize_t r = at < 0 ? write(f->fd, p, k) : pwrite(f->fd, p, k, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { /* 0: no progress, and retrying would spin */
            fd_fail(f, r < 0 && errno ? errno : EIO);
            if (r == 0) errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        if (at >= 0) at += r;
        f->bytes += (uint64_t)r;
    }
    return 0;
}

int ckpz_fd_write(void *opaque, const void *buf, size_t n) { return put(opaque, buf, n, -1); }

int ckpz_fd_patch(void *opaque, const void *buf, size_t n, uint64_t off)
{
    ckpz_fd *f = opaque;
    if (n > (uint64_t)LLONG_MAX || off > (uint64_t)LLONG_MAX - n) {
        fd_fail(f, errno = EINVAL);
        return -1;
    }
    return put(f, buf, n, (int64_t)off);
}

int ckpz_fd_pread(void *opaque, void *buf, size_t n, uint64_t off)
{
    ckpz_fd *f = opaque;
    char *p = buf;
    while (n) {
        if (off > (uint64_t)LLONG_MAX) {
            fd_fail(f, errno = EINVAL);
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

void ckpz_source_fd(ckpz_source *s, ckpz_fd *f, uint64_t size)
{
    ckpz_source_init(s);
    s->read = ckpz_fd_read;
    s->pread = lseek(f->fd, 0, SEEK_CUR) >= 0 ? ckpz_fd_pread : NULL; /* pipes and sockets cannot */
    s->opaque = f;
    s->size = size;
}

void ckpz_sink_fd(ckpz_sink *s, ckpz_fd *f)
{
    struct stat st;
    int fl = fcntl(f->fd, F_GETFL);
    ckpz_sink_init(s);
    s->write = ckpz_fd_write;
    s->opaque = f;
    /* pwrite ignores the offset under O_APPEND, and offsets count from the output's
     * first byte: a regular file written from its start only */
    if (fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode) && fl >= 0 && !(fl & O_APPEND) && lseek(f->fd, 0, SEEK_CUR) == 0)
        s->patch = ckpz_fd_patch;
}
