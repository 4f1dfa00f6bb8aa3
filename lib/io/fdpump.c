/* fdpump.c — the library's own fd source and sink (fd.c) read ahead and written behind
 * within one call (ckpz_compress_io, ckpz_decompress_io), by the pump the CLI uses for
 * its buffers (pump.c): the Python package's save, load, compress_file and
 * decompress_file pass those ends, and so move their bytes on a core of their own where
 * the call leaves one free (ckpz_pump_wanted), as the CLI does.
 *
 * Only a regular file is pumped (its reads and writes never wait for ever, so joining
 * the thread never hangs). A source is read ahead when it is larger than one buffer; a
 * sink is written behind once more than one buffer was written (a small output starts
 * no thread). The thread is always joined before the call returns (io_pump_end), on
 * every path: what it read ahead and was not used is dropped, what it had to write is
 * written (or the call fails with the write's errno, left in the caller's ckpz_fd as
 * ckpz_fd_write leaves it).
 */
#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL /* ckpz_pump_* */
#endif
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "io/io.h"

#define RD_SIZE (4u << 20) /* read-ahead buffers: 2 of them */
#define WR_SIZE (1u << 20) /* write-behind: 4 of 1 MiB (a write of 1 MiB costs the */
#define WR_BUFS 4          /* kernel what one of 4 MiB does; less memory to fault in) */

static int is_regular(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

static ptrdiff_t pumped_read(void *opaque, void *dst, size_t n)
{
    io_pumps *x = opaque;
    size_t got = 0;
    while (got < n) {
        if (x->rpos < x->rlen) {
            size_t k = x->rlen - x->rpos < n - got ? x->rlen - x->rpos : n - got;
            memcpy((char *)dst + got, x->rbuf + x->rpos, k);
            x->rpos += k;
            got += k;
            continue;
        }
        if (x->reof) break;
        size_t len;
        const unsigned char *b = ckpz_pump_next(x->rp, &len);
        if (!b) return -1; /* its errno reaches the caller's ckpz_fd at io_pump_end */
        x->rbuf = b;
        x->rpos = 0;
        x->rlen = len;
        if (len < RD_SIZE) x->reof = 1;
    }
    return (ptrdiff_t)got;
}

static int pumped_pread(void *opaque, void *dst, size_t n, uint64_t off)
{
    return ckpz_fd_pread(((io_pumps *)opaque)->rfd, dst, n, off);
}

/* The bytes queued so far are in the file; 0, or -1 after a write error. */
static int flush_behind(io_pumps *x)
{
    if (!x->wp) return 0;
    if (x->wbuf && x->wlen) ckpz_pump_push(x->wp, x->wlen);
    x->wbuf = NULL;
    x->wlen = 0;
    return ckpz_pump_drain(x->wp);
}

static int pumped_write(void *opaque, const void *src, size_t n)
{
    io_pumps *x = opaque;
    if (!x->wp) {
        if (x->wtried || x->direct + n <= WR_SIZE || !(x->wp = ckpz_pump_start(x->wfd, 1, WR_BUFS, WR_SIZE, 0))) {
            x->wtried = x->direct + n > WR_SIZE;
            x->direct += n;
            return ckpz_fd_write(x->wfd, src, n);
        }
    }
    const unsigned char *s = src;
    while (n) {
        if (!x->wbuf && !(x->wbuf = ckpz_pump_buffer(x->wp))) return -1;
        size_t k = WR_SIZE - x->wlen < n ? WR_SIZE - x->wlen : n;
        memcpy(x->wbuf + x->wlen, s, k);
        x->wlen += k;
        s += k;
        n -= k;
        if (x->wlen == WR_SIZE) {
            ckpz_pump_push(x->wp, x->wlen);
            x->wbuf = NULL;
            x->wlen = 0;
        }
    }
    return 0;
}

static int pumped_patch(void *opaque, const void *src, size_t n, uint64_t off)
{
    io_pumps *x = opaque;
    if (flush_behind(x) != 0) return -1;
    return ckpz_fd_patch(x->wfd, src, n, off);
}

void io_pump_begin(io_pumps *x, ckpz_params *p, ckpz_source *s, ckpz_sink *k)
{
    memset(x, 0, sizeof *x);
    if (!ckpz_pump_wanted(p->threads)) return;
    if (s->read == ckpz_fd_read && (!s->pread || s->pread == ckpz_fd_pread) && s->size != CKPZ_SIZE_UNKNOWN &&
        s->size > RD_SIZE && is_regular(((ckpz_fd *)s->opaque)->fd) &&
        (x->rp = ckpz_pump_start(s->opaque, 0, 2, RD_SIZE, 0))) {
        x->rfd = s->opaque;
        s->read = pumped_read;
        if (s->pread) s->pread = pumped_pread;
        s->opaque = x;
    }
    if (k->write == ckpz_fd_write && (!k->patch || k->patch == ckpz_fd_patch) &&
        is_regular(((ckpz_fd *)k->opaque)->fd)) {
        x->wfd = k->opaque;
        k->write = pumped_write;
        if (k->patch) {
            k->patch = pumped_patch;
            if (p->patch == ckpz_fd_patch && p->patch_opaque == x->wfd) {
                p->patch = pumped_patch;
                p->patch_opaque = x;
            }
        }
        k->opaque = x;
    }
}

ckpz_error io_pump_end(ckpz_ctx *ctx, io_pumps *x, ckpz_error err)
{
    if (x->wp && !err && flush_behind(x) != 0) {
        int e = ckpz_pump_error(x->wp);
        err = ctx_fail(ctx, CKPZ_ERR_WRITE, "write error: %s",
                       e > 0 ? strerror(e) : "the system took no bytes (write returned 0)");
    }
    ckpz_pump_stop(x->wp); /* joins; the descriptor's count and errno go to the caller's */
    ckpz_pump_stop(x->rp);
    x->wp = x->rp = NULL;
    return err;
}
