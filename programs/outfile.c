/* outfile.c — the command line's outputs, and the signals that clean up after them.
 *
 * The rules are zstd's: compressed data never goes to a terminal, an existing output (a
 * symbolic link too, dangling or not) is never overwritten without -f, and the input is
 * never the output. An output file is published by the library (ckpz_publish_*,
 * lib/file/publish.c: the same temporary names, rules and messages as the Python
 * package's and ckpz-mpi's): an anonymous O_TMPFILE file in its own directory, linked
 * under its name only once complete, so that neither a reader nor a crash, SIGKILL
 * included, ever leaves half a file behind; where the file system has no O_TMPFILE it is
 * written as .OUT.ckpz-PID-HOST-RANDOM.tmp instead, which SIGINT/SIGTERM/SIGHUP remove
 * (the handler knows its path) and which, left by a SIGKILL, the next run writing OUT
 * removes. Without -f the final name is taken only in one step that cannot replace, so a
 * file that appears meanwhile is never lost. Bytes go out through the library's fd
 * adapter: to a pipe, a device or where coding takes every core, a chunk straight from
 * the library's buffer (writes of FIO_DIRECT bytes and more; smaller ones gathered in 4
 * MiB); to a regular file, past its first 4 MiB, by a thread of their own
 * (ckpz_pump_write) where coding leaves a core free, so that coding and the kernel's
 * copies overlap (on tmpfs a fresh page per 4 KiB, zeroed and copied into). That costs
 * no copy into the pump's buffers: the sink lends them (ckpz_sink_lender), and the
 * encoder codes each frame, the decoder decodes each chunk, straight into one; what is
 * not lent (entry frames, small chunks, a frame larger than a buffer) is copied. A failed
 * write is then seen at the next write or at the commit, which waits for every byte. A
 * write that makes no progress, a failed fsync or close are errors that discard the
 * output. --rm's caller asks for a durable commit: the output and its name are fsync'ed
 * before the input may go.
 */
#define _GNU_SOURCE /* F_SETPIPE_SZ (Linux) */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "display.h"
#include "fileio.h"

/* ---- signals ---------------------------------------------------------------------- */
/* The handler may only use async-signal-safe calls: the path lives in a static buffer
 * that is filled (a copy of ckpz_publish_temp) while the signals are blocked. */
static char g_tmp_path[PATH_MAX + 32];
static volatile sig_atomic_t g_tmp_active;

static void discard_output(void)
{
    if (g_tmp_active) unlink(g_tmp_path);
    if (fio_progress_shown) {
        ssize_t r = write(STDERR_FILENO, "\n", 1);
        (void)r;
    }
}

static void on_signal(int sig)
{
    discard_output();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Mappings of files (the input compressed, --base files) the SIGBUS handler names: slots
 * noted before a mapping is used and forgotten before it is unmapped. */
#define FIO_MAPS 4                /* the input and the bases mapped at once */
static struct {
    const unsigned char *volatile at; /* NULL: a free slot */
    volatile size_t len;
    const char *doing; /* "compressed", "read as a base" */
    char name[512];
} g_maps[FIO_MAPS];

int fio_map_note(const void *at, size_t len, const char *name, const char *doing)
{
    for (int i = 0; i < FIO_MAPS; i++)
        if (!g_maps[i].at) {
            size_t n = strlen(name) < sizeof g_maps[i].name ? strlen(name) : sizeof g_maps[i].name - 1;
            memcpy(g_maps[i].name, name, n);
            g_maps[i].name[n] = 0;
            g_maps[i].doing = doing;
            g_maps[i].len = len;
            g_maps[i].at = at; /* last: the handler reads the rest once it sees this */
            return 0;
        }
    return -1;
}

void fio_unmap(void *at, size_t len)
{
    for (int i = 0; i < FIO_MAPS; i++)
        if (g_maps[i].at == at) g_maps[i].at = NULL; /* before its bytes go */
    munmap(at, len);
}

static void say(const char *s)
{
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

/* SIGBUS at addr: on a noted mapping, says why (gone: its bytes are past the file's end,
 * else a read error), naming the file, discards the output and exits 1; 0 when the
 * address is not in a mapping of ours. */
static int mapped_sigbus(const void *addr, int gone)
{
    const unsigned char *a = addr;
    for (int i = 0; i < FIO_MAPS; i++) {
        const unsigned char *m = g_maps[i].at;
        if (!m || a < m || a >= m + g_maps[i].len) continue;
        discard_output();
        say("ckpz: ");
        say(g_maps[i].name);
        say(gone ? ": shrank while it was " : ": read error (a fault on its mapped bytes) while it was ");
        say(g_maps[i].doing);
        say("; output discarded\n");
        _exit(1);
    }
    return 0;
}

/* A fault on an input's mapping (the file shrank under it) is an error naming the file;
 * any other SIGBUS is what it would have been (the default action, on return). */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (!mapped_sigbus(si->si_addr, si->si_code == BUS_ADRERR)) signal(sig, SIG_DFL);
}

void fio_install_signal_handlers(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGBUS};
    size_t i;
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa, old;
        /* nohup'ed runs keep ignoring SIGHUP */
        if (sigs[i] == SIGHUP && sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof(sa));
        if (sigs[i] == SIGBUS) {
            sa.sa_sigaction = on_sigbus;
            sa.sa_flags = SA_SIGINFO;
        } else {
            sa.sa_handler = on_signal;
        }
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static void block_signals(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

static void restore_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* ---- output ----------------------------------------------------------------------- */
void fio_pipe_widen(int fd)
{
    struct stat st;
#ifdef F_SETPIPE_SZ
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) (void)fcntl(fd, F_SETPIPE_SZ, FIO_PIPE_SIZE);
#else
    (void)fd, (void)st;
#endif
}

const char *fio_io_strerror(int e)
{
    return e == FIO_ENOPROGRESS ? "the system took no bytes (write returned 0)" : strerror(e);
}

/* All n bytes, appended (off < 0) or at offset off; o->err on failure. */
static int put(fio_out *o, const void *src, size_t n, int64_t off)
{
    if ((off < 0 ? ckpz_fd_write(&o->io, src, n) : ckpz_fd_patch(&o->io, src, n, (uint64_t)off)) == 0) return 0;
    o->err = errno == 0 ? FIO_ENOPROGRESS : o->io.error;
    return -1;
}

/* Everything written so far is in the file (a pump drained), or -1 with o->err. */
static int out_flush(fio_out *o)
{
    if (o->pump) {
        if (ckpz_pump_drain(o->pump) == 0) return 0;
        o->err = ckpz_pump_error(o->pump);
        return -1;
    }
    if (o->len == 0) return 0;
    if (put(o, o->buf, o->len, -1) != 0) return -1;
    o->len = 0;
    return 0;
}

/* Writing behind: 4 buffers of 1 MiB (writes of 1 MiB cost the kernel what 4 MiB do;
 * fewer bytes of fresh buffers to fault in), of 1.5625 MiB for a compressed output: each
 * room for the frame of a chunk of the default 1 MiB (its bound: 1.5 MiB and 383 bytes),
 * lent to the encoder (a larger frame is copied). */
#define OUT_PUMP_BUFS 4
#define OUT_PUMP_SIZE (1u << 20)
#define OUT_PUMP_FRAME ((3u << 19) + (64u << 10))

/* n bytes into the pump's buffers (ckpz_pump_write), or -1 with o->err. */
static int pumped_write(fio_out *o, const void *src, size_t n)
{
    if (ckpz_pump_write(o->pump, src, n) == 0) return 0;
    o->err = ckpz_pump_error(o->pump);
    return -1;
}

/* A file of more than FIO_BUF_SIZE bytes is written behind by a thread of its own
 * (ckpz_pump_*), started once that many were written, which first takes what our
 * buffer gathered. No thread: the caller writes, as before. */
static int pump_begin(fio_out *o)
{
    o->can_pump = 0;
    if (!(o->pump = ckpz_pump_start(&o->io, 1, OUT_PUMP_BUFS, o->pump_size, 0))) return 0;
    int r = pumped_write(o, o->buf, o->len);
    free(o->buf); /* the pump's buffers from now on */
    o->buf = NULL;
    o->len = 0;
    return r;
}

int fio_out_write(void *opaque, const void *src, size_t n)
{
    fio_out *o = opaque;
    if (o->err) return -1;
    o->bytes += n;
    if (o->can_pump && o->bytes > FIO_BUF_SIZE && pump_begin(o) != 0) return -1;
    if (o->pump) return pumped_write(o, src, n);
    /* a write of a chunk goes out from the library's buffer, not through ours: one copy
     * (the kernel's) fewer for a pipe or stdout */
    if ((o->len + n > FIO_BUF_SIZE || n >= FIO_DIRECT) && out_flush(o) != 0) return -1;
    if (n >= FIO_DIRECT) return put(o, src, n, -1);
    memcpy(o->buf + o->len, src, n);
    o->len += n;
    return 0;
}

/* ckpz_patch_fn: rewrites bytes already written (a temporary file only) */
static int out_patch(void *opaque, const void *src, size_t n, uint64_t off)
{
    fio_out *o = opaque;
    if (o->err || !o->temp || out_flush(o) != 0) return -1;
    return put(o, src, n, (int64_t)off);
}

/* Copies a temporary path for the handler; 1 when there is one (a named file). */
static int tmp_remember(const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(g_tmp_path)) return 0;
    memcpy(g_tmp_path, path, n + 1);
    return 1;
}

static mode_t g_umask;
static int g_umask_known;

static mode_t default_mode(void)
{
    if (!g_umask_known) {
        g_umask = umask(0);
        umask(g_umask);
        g_umask_known = 1;
    }
    return 0666 & ~g_umask;
}

/* The temporary output beside name (ckpz_publish_open: anonymous where the file system
 * can, else a named file, whose path the signal handler gets). */
static int temp_create(fio_out *o, const char *name)
{
    sigset_t old;
    ckpz_ctx *ctx = ckpz_ctx_create();
    block_signals(&old);
    ckpz_error e = ckpz_publish_open(ctx, name, CKPZ_PUBLISH_ANONYMOUS, &o->pub);
    if (!e) {
        o->io.fd = ckpz_publish_fd(o->pub);
        g_tmp_active = tmp_remember(ckpz_publish_temp(o->pub));
    }
    restore_signals(&old);
    if (e) fio_error("%s", ctx ? ckpz_ctx_message(ctx) : ckpz_error_name(e));
    ckpz_ctx_free(ctx);
    if (e) return -1;
    o->temp = 1;
    return 0;
}

/* Restored data may go to a terminal, as with zstd -dc. Every decision about name is
 * made here, before any work, on lstat: a symbolic link, dangling or not, is an existing
 * name (a device or fifo it points to is written through, as before). */
int fio_out_open(fio_out *o, const char *name, const struct stat *in_st, const fio_prefs *p, int binary)
{
    struct stat st;
    memset(o, 0, sizeof(*o));
    o->io = (ckpz_fd){-1, 0, 0};
    if (!name) {
        o->name = "stdout";
        o->is_stdout = 1;
        if (binary && isatty(STDOUT_FILENO) && !p->force) {
            fio_error("stdout is a terminal, aborting (use -f to force)");
            return -1;
        }
        o->io.fd = STDOUT_FILENO;
        fio_pipe_widen(o->io.fd);
    } else {
        o->name = name;
        if (lstat(name, &st) == 0) {
            int dangling = S_ISLNK(st.st_mode) && stat(name, &st) != 0;
            if (!dangling) {
                if (in_st && st.st_dev == in_st->st_dev && st.st_ino == in_st->st_ino) {
                    fio_error("%s: output is the input file, aborting", name);
                    return -1;
                }
                if (S_ISDIR(st.st_mode)) {
                    fio_error("%s: is a directory", name);
                    return -1;
                }
                if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) o->direct = 1;
            }
            if (!o->direct && !p->force) {
                fio_error(dangling ? "%s: already exists (a symbolic link to nothing; use -f to replace it)"
                                   : "%s: already exists (use -f to overwrite)",
                          name);
                return -1;
            }
        }
        if (o->direct) {
            o->io.fd = open(name, O_WRONLY);
            if (o->io.fd < 0) {
                fio_error("%s: %s", name, strerror(errno));
                return -1;
            }
        } else if (temp_create(o, name) != 0) {
            return -1;
        }
    }
    /* a regular file, temporary or stdout's, is written behind where coding leaves a
     * core free; a device or a pipe, whose write may wait for ever, by the caller
     * (stopping a thread never hangs) */
    o->pump_size = binary ? OUT_PUMP_FRAME : OUT_PUMP_SIZE;
    o->can_pump = ckpz_pump_wanted(p->threads) &&
                  (o->temp || (o->is_stdout && fstat(o->io.fd, &st) == 0 && S_ISREG(st.st_mode)));
    o->buf = malloc(FIO_BUF_SIZE);
    if (!o->buf) {
        fio_error("%s: out of memory", o->name);
        return -1; /* caller calls fio_out_abort */
    }
    return 0;
}

/* Stops the pump (what it has not written is dropped) and frees the buffer. */
static void out_release(fio_out *o)
{
    ckpz_pump_stop(o->pump);
    o->pump = NULL;
    free(o->buf);
    o->buf = NULL;
}

void fio_out_abort(fio_out *o)
{
    out_release(o); /* before the descriptor closes */
    if (o->temp) {
        sigset_t old;
        block_signals(&old);
        ckpz_publish_abort(o->pub); /* closes the descriptor */
        g_tmp_active = 0;
        restore_signals(&old);
    } else if (!o->is_stdout && o->io.fd >= 0) {
        close(o->io.fd);
    }
    o->pub = NULL;
    o->io.fd = -1;
    o->temp = 0;
}

int fio_out_commit(fio_out *o, const struct stat *in_st, const fio_prefs *p, int durable)
{
    if (out_flush(o) != 0) {
        fio_error("%s: write error: %s", o->name, fio_io_strerror(o->err));
        fio_out_abort(o);
        return -1;
    }
    out_release(o);
    if (o->temp) {
        sigset_t old;
        ckpz_ctx *ctx = ckpz_ctx_create();
        fchmod(o->io.fd, in_st ? (in_st->st_mode & 07777 & ~(mode_t)06000) : default_mode());
        if (in_st) {
            struct timespec ts[2];
            ts[0] = in_st->st_atim;
            ts[1] = in_st->st_mtim;
            futimens(o->io.fd, ts);
        }
        /* fsync only when the input is about to be deleted (--rm): like zstd and gzip,
         * a plain run leaves flushing to the kernel rather than wait for the disk */
        block_signals(&old);
        ckpz_error e = ckpz_publish_commit(
            ctx, o->pub, (p->force ? CKPZ_PUBLISH_REPLACE : 0) | (durable ? CKPZ_PUBLISH_DURABLE : 0));
        g_tmp_active = 0;
        restore_signals(&old);
        o->pub = NULL;
        o->io.fd = -1;
        o->temp = 0;
        if (e) {
            const char *msg = ctx ? ckpz_ctx_message(ctx) : ckpz_error_name(e);
            fio_error(strstr(msg, ": appeared while writing") ? "%s (use -f)" : "%s", msg);
        }
        ckpz_ctx_free(ctx);
        if (e) return -1;
    } else if (o->direct) {
        if (close(o->io.fd) != 0) {
            fio_error("%s: write error: %s", o->name, strerror(errno));
            o->io.fd = -1;
            return -1;
        }
        o->io.fd = -1;
    }
    return 0;
}

/* ckpz_lend_fn: a pump's buffer for the decoder to decode a chunk into, or the encoder
 * to code a frame into (written back through fio_out_write, queued without a copy);
 * none before the pump runs */
static void *out_lend(void *opaque, size_t n)
{
    fio_out *o = opaque;
    return o->pump && !o->err ? ckpz_pump_lend(o->pump, n) : NULL;
}

void fio_out_sink(fio_out *o, ckpz_sink *dst)
{
    o->lender = (ckpz_lender){sizeof o->lender, fio_out_write, o->temp ? out_patch : NULL, o, out_lend, 0};
    ckpz_sink_lender(dst, &o->lender); /* patch: a file of its own, written from its start */
}

void fio_report(ckpz_ctx *ctx, ckpz_error e, const fio_in *in, const fio_out *out)
{
    const char *msg = ckpz_ctx_message(ctx);
    if (in && in->err) fio_error("%s: read error: %s", in->name, strerror(in->err));
    else if (out && out->err) fio_error("%s: write error: %s", out->name, fio_io_strerror(out->err));
    else if (e == CKPZ_ERR_BASE && in && msg && *msg)
        fio_error("%s: %s; %s", in->name, msg,
                  !strncmp(msg, "wrong base", 10) ? "name the right one with --base"
                  : in->is_stdin                  ? "name the base with --base"
                                                  : "it is not beside the file: name it with --base");
    else fio_error("%s: %s", in ? in->name : "?", msg && *msg ? msg : ckpz_error_name(e));
}
