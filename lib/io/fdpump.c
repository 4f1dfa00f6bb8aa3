/* fdpump.c — the library's own fd sink (fd.c) written behind within one call
 * (ckpz_compress_io, ckpz_decompress_io) by the pump the CLI uses for its buffers
 * (pump.c): the Python package's save, compress_file and decompress_file pass that sink,
 * and so have the kernel's cost of writing (on tmpfs, a fresh page-cache page per 4 KiB,
 * zeroed and copied into) paid on a core of its own where the call leaves one free
 * (ckpz_pump_wanted), as the CLI does.
 *
 * Only a regular file is pumped (its writes never wait for ever, so joining the thread
 * never hangs), and only once more than one buffer was written (a small output starts
 * no thread). Past that, the sink lends the pump's buffers (ckpz_sink_lender,
 * ckpz_pump_lend): a decoder decodes each chunk, an encoder codes each frame, straight
 * into one, which is queued as it is, so writing behind costs no copy into the ring.
 * The thread is always joined before the call returns (io_pump_end), on
 * every path: what it had to write is written, or the call fails with the write's
 * errno, left in the caller's ckpz_fd as ckpz_fd_write leaves it.
 *
 * An fd source is not read ahead: the library's reads land straight in its own buffers
 * (one kernel copy), where a read-ahead thread adds a copy out of its ring on the
 * calling thread that costs it about what the kernel's copy did. Measured on a torch.save
 * file of 124 MB in tmpfs, compress_file at threads=1 ran at 675 MB per CPU second with
 * both directions pumped, 811 with writing alone, 829 with neither (bench/file-path-py,
 * BENCHMARKS.md); a file on a disk is read ahead by the kernel itself.
 */
#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL /* ckpz_pump_* */
#endif
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "io/io.h"

/* write-behind: 4 buffers of 1 MiB (a write of 1 MiB costs the kernel what one of 4 MiB
 * does; less memory to fault in), or of the room a call lends most, up to 4 MiB (a
 * compression's frame bound: 1.5 MiB for a chunk of the default 1 MiB) */
#define WR_SIZE (1u << 20)
#define WR_MAX (4u << 20)
#define WR_BUFS 4

static int is_regular(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/* The bytes written so far are in the file; 0, or -1 after a write error. */
static int flush_behind(io_pumps *x) { return x->wp ? ckpz_pump_drain(x->wp) : 0; }

static int pumped_write(void *opaque, const void *src, size_t n)
{
    io_pumps *x = opaque;
    if (!x->wp) {
        if (x->wtried || x->direct + n <= WR_SIZE || !(x->wp = ckpz_pump_start(x->wfd, 1, WR_BUFS, x->size, 0))) {
            x->wtried = x->direct + n > WR_SIZE;
            x->direct += n;
            return ckpz_fd_write(x->wfd, src, n);
        }
    }
    return ckpz_pump_write(x->wp, src, n);
}

static int pumped_patch(void *opaque, const void *src, size_t n, uint64_t off)
{
    io_pumps *x = opaque;
    if (flush_behind(x) != 0) return -1;
    return ckpz_fd_patch(x->wfd, src, n, off);
}

/* The pump's buffers, once it runs, lent to the coders (ckpz_lender): each chunk
 * decoded, or each frame coded, straight into one and queued as it is, no copy into
 * the ring. */
static void *pumped_lend(void *opaque, size_t n)
{
    io_pumps *x = opaque;
    return x->wp ? ckpz_pump_lend(x->wp, n) : NULL;
}

void io_pump_begin(io_pumps *x, ckpz_params *p, ckpz_sink *k, size_t room)
{
    memset(x, 0, sizeof *x);
    x->size = room > WR_SIZE && room <= WR_MAX ? room : WR_SIZE;
    if (!ckpz_pump_wanted(p->threads)) return;
    if (k->write == ckpz_fd_write && (!k->patch || k->patch == ckpz_fd_patch) &&
        is_regular(((ckpz_fd *)k->opaque)->fd)) {
        x->wfd = k->opaque;
        x->lender = (ckpz_lender){sizeof x->lender, pumped_write, k->patch ? pumped_patch : NULL, x, pumped_lend, 0};
        if (k->patch && p->patch == ckpz_fd_patch && p->patch_opaque == x->wfd) {
            p->patch = pumped_patch;
            p->patch_opaque = x;
        }
        ckpz_sink_lender(k, &x->lender);
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
    x->wp = NULL;
    return err;
}
