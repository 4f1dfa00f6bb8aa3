/* fileio.c — files, terminals and signals for the ckpz command line.
 *
 * libckpz works on read/write/pread callbacks; this file supplies them over file
 * descriptors with 4 MiB buffers (one syscall per few MiB whatever size the library
 * asks for) and decides where bytes go. The rules are zstd's: FILE -> FILE.ckpz and
 * back, "-" or no name means a pipe, compressed data never goes to a terminal, an
 * existing output (a symbolic link too, dangling or not) is never overwritten without
 * -f, the input is never modified, and .ckpz streams put end to end restore to their
 * originals end to end (each stream ends with a self-checking trailer, which is where
 * the reader cuts). An output file is written as an anonymous O_TMPFILE file in its own
 * directory and linked under its name only once complete, so that neither a reader nor
 * a crash, SIGKILL included, ever leaves half a file behind; where the file system has
 * no O_TMPFILE it is written as .OUT.tmpXXXXXX instead, which SIGINT/SIGTERM/SIGHUP
 * remove (the handler knows its path). Without -f the final name is taken only in one
 * step that cannot replace (linkat, renameat2 RENAME_NOREPLACE), so a file that appears
 * meanwhile is never lost. A write that makes no progress, a failed fsync or close, and
 * an input that changes while it is read (size, mtime, bytes read) are errors that
 * discard the output. --rm deletes the input only after the output and its name are
 * fsync'ed, i.e. durable. Progress and summaries go to stderr.
 */
#define _GNU_SOURCE /* O_TMPFILE, linkat AT_EMPTY_PATH, renameat2 */
#include "fileio.h"
#include "autotune.h"
#include "memio.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define FIO_BUF_SIZE (4u << 20)

static int g_display = 2; /* verbosity of the running operation */

void fio_error(const char *fmt, ...)
{
    va_list ap;
    if (g_display < 1) return;
    fputs("ckpz: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void fio_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fio_warn(const char *fmt, ...)
{
    va_list ap;
    if (g_display < 2) return;
    fputs("ckpz: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

const char *fio_human(char *buf, size_t len, unsigned long long bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = -1;
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", bytes);
        return buf;
    }
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    /* three significant digits, like zstd */
    if (v >= 100.0) snprintf(buf, len, "%.0f %s", v, units[u]);
    else if (v >= 10.0) snprintf(buf, len, "%.1f %s", v, units[u]);
    else snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fio_prefs_init(fio_prefs *p)
{
    memset(p, 0, sizeof(*p));
    p->level = CKPZ_LEVEL_DEFAULT;
    p->threads = 0;
    p->format = CKPZ_INPUT_AUTO;
    p->raw_dtype = CKPZ_DTYPE_NONE;
    p->verbosity = 2;
    p->progress = -1;
    p->bench_seconds = 1.0;
}

void fio_params(const fio_prefs *p, ckpz_params *params)
{
    ckpz_params_init(params);
    params->level = p->level;
    params->threads = p->threads;
    params->chunk_size = p->chunk_size;
    params->format = p->format;
    params->raw_dtype = p->raw_dtype;
    params->mem_limit = p->mem_limit;
    params->policy = p->policy ? p->policy : p->levels;
    params->max_mae = p->max_mae;
    params->codec = p->codec;
}

/* ---- signals ---------------------------------------------------------------------- */
/* The handler may only use async-signal-safe calls: the path lives in a static buffer
 * that is filled (by mkstemp itself) while the signals are blocked. */
static char g_tmp_path[PATH_MAX + 32];
static volatile sig_atomic_t g_tmp_active;
static volatile sig_atomic_t g_progress_shown;

static void on_signal(int sig)
{
    if (g_tmp_active) unlink(g_tmp_path);
    if (g_progress_shown) {
        ssize_t r = write(STDERR_FILENO, "\n", 1);
        (void)r;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void fio_install_signal_handlers(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    size_t i;
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa, old;
        /* nohup'ed runs keep ignoring SIGHUP */
        if (sigs[i] == SIGHUP && sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
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

static void restore_signals(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* ---- input ------------------------------------------------------------------------ */
typedef struct fio_in {
    const char *name;   /* for messages */
    int fd;
    int is_stdin;
    int regular;
    struct stat st;
    uint64_t size_hint; /* CKPZ_SIZE_UNKNOWN for pipes */
    unsigned char *buf; /* FIO_HIST bytes of what came before, then FIO_BUF_SIZE */
    size_t pos, len;
    int eof;
    int err;            /* errno of a failed read */
    uint64_t consumed;  /* bytes handed to the library, all streams together */
    /* Concatenated .ckpz streams (-d, -t): the library reads a stream's index up to the
     * end of its input, so each stream is made to end where its trailer does. */
    int split;
    uint64_t stream_pos; /* bytes of the current stream handed over */
    size_t scanned;      /* buffer offsets up to this were tried as the end of a trailer */
    size_t limit;        /* where the current stream ends in buf, once stream_end */
    int stream_end;
} fio_in;

/* Bytes kept before new data in the buffer: a trailer that straddles two reads is still
 * seen whole. */
#define FIO_HIST 40u
#define FIO_TRAILER 40u   /* doc/format.md, "Trailer" */

static ptrdiff_t read_full(int fd, void *dst, size_t n, int *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)dst + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ptrdiff_t)got;
}

static uint64_t ld64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t ld32le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* CRC-32C, bit by bit: only ever run on 36 bytes of a candidate trailer. */
static uint32_t crc32c_small(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

/* Is t[0..40) the trailer of a stream of which it starts byte `at`? Its tag and
 * checksum hold, and its index ends where it starts: the odds that 40 bytes inside a
 * stream pass all three by chance are about 2^-96. */
static int is_trailer(const unsigned char *t, uint64_t at)
{
    uint64_t ioff = ld64le(t), ilen = ld64le(t + 8);
    return !memcmp(t + 32, "CKTR", 4) && ioff >= 32 && ioff <= at && ilen == at - ioff && ilen >= 24 &&
           crc32c_small(t, 36) == ld32le(t + 36);
}

/* Split mode: where the bytes that may go to the library end in buf (a stream's end
 * found in it, or all of it). */
static size_t split_end(fio_in *in)
{
    if (in->stream_end) return in->limit;
    if (in->len >= FIO_TRAILER) {
        /* ends e in (scanned, len]: the tag sits at e - 8 */
        size_t t = in->scanned + 1 >= 8 ? in->scanned + 1 - 8 : 0, thi = in->len - 8;
        if (t < FIO_TRAILER - 8) t = FIO_TRAILER - 8;
        while (t <= thi) {
            /* memchr and a compare: several times faster than memmem on coded bytes */
            const unsigned char *hit = memchr(in->buf + t, 'C', thi + 1 - t);
            if (!hit) break;
            t = (size_t)(hit - in->buf);
            if (memcmp(hit, "CKTR", 4) != 0) {
                t++;
                continue;
            }
            size_t e = t + 8;
            /* the trailer's first byte as an offset in the current stream */
            int64_t at = (int64_t)in->stream_pos + (int64_t)(e - FIO_TRAILER) - (int64_t)in->pos;
            if (e > in->pos && at >= 0 && is_trailer(in->buf + e - FIO_TRAILER, (uint64_t)at)) {
                in->stream_end = 1;
                in->limit = in->scanned = e;
                return e;
            }
            t++;
        }
    }
    in->scanned = in->len;
    return in->len;
}

/* Refills the buffer (all of it was handed over), keeping its last FIO_HIST bytes. */
static int refill(fio_in *in)
{
    size_t keep = in->split ? (in->len < FIO_HIST ? in->len : FIO_HIST) : 0;
    memmove(in->buf, in->buf + in->len - keep, keep);
    in->pos = in->len = in->scanned = keep;
    ptrdiff_t r = read_full(in->fd, in->buf + keep, FIO_BUF_SIZE, &in->err);
    if (r < 0) return -1;
    in->len += (size_t)r;
    if ((size_t)r < FIO_BUF_SIZE) in->eof = 1;
    return 0;
}

/* ckpz_read_fn: fills as much of n as the input has; 0 only at the end (of the current
 * stream, in split mode). */
static ptrdiff_t in_read(void *opaque, void *dst, size_t n)
{
    fio_in *in = opaque;
    size_t got = 0;
    while (got < n) {
        size_t end = in->split ? split_end(in) : in->len;
        if (in->pos < end) {
            size_t k = end - in->pos;
            if (k > n - got) k = n - got;
            memcpy((char *)dst + got, in->buf + in->pos, k);
            in->pos += k;
            got += k;
            continue;
        }
        if (in->stream_end || in->eof) break;
        if (!in->split && n - got >= FIO_BUF_SIZE) { /* big request: no copy */
            ptrdiff_t r = read_full(in->fd, (char *)dst + got, n - got, &in->err);
            if (r < 0) return -1;
            if ((size_t)r < n - got) in->eof = 1;
            got += (size_t)r;
            break;
        }
        if (refill(in) != 0) return -1;
    }
    in->consumed += got;
    in->stream_pos += got;
    return (ptrdiff_t)got;
}

/* Split mode, after a stream was decoded: 1 when another one follows (bytes remain),
 * 0 at the end of the input, -1 on a read error. */
static int in_next_stream(fio_in *in)
{
    in->stream_end = 0;
    in->stream_pos = 0;
    if (in->pos < in->len) return 1;
    if (in->eof) return 0;
    if (refill(in) != 0) return -1;
    return in->pos < in->len;
}

/* ckpz_pread_fn */
static int in_pread(void *opaque, void *dst, size_t n, uint64_t off)
{
    fio_in *in = opaque;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(in->fd, (char *)dst + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            in->err = errno;
            return -1;
        }
        if (r == 0) return -1; /* short: the library reports truncation */
        got += (size_t)r;
    }
    return 0;
}

/* Opens name ("-" = stdin). need_regular: random access (list, extract). */
static int in_open(fio_in *in, const char *name, const fio_prefs *p, int need_regular)
{
    memset(in, 0, sizeof(*in));
    in->fd = -1;
    in->size_hint = CKPZ_SIZE_UNKNOWN;
    if (strcmp(name, "-") == 0) {
        in->name = "stdin";
        in->is_stdin = 1;
        in->fd = STDIN_FILENO;
        if (isatty(STDIN_FILENO) && !p->force) {
            fio_error("stdin is a terminal, aborting (use -f to force)");
            return -1;
        }
    } else {
        in->name = name;
        in->fd = open(name, O_RDONLY);
        if (in->fd < 0) {
            fio_error("%s: %s", name, strerror(errno));
            return -1;
        }
    }
    if (fstat(in->fd, &in->st) != 0) {
        fio_error("%s: %s", in->name, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(in->st.st_mode)) {
        fio_error("%s: is a directory -- ignored", in->name);
        goto fail;
    }
    in->regular = S_ISREG(in->st.st_mode);
    if (!in->regular && !in->is_stdin && !S_ISFIFO(in->st.st_mode)) {
        fio_error("%s: not a regular file -- ignored", in->name);
        goto fail;
    }
    if (need_regular && !in->regular) {
        fio_error("%s: needs a regular file (random access), not a pipe", in->name);
        goto fail;
    }
    if (in->regular) {
        off_t cur = in->is_stdin ? lseek(in->fd, 0, SEEK_CUR) : 0;
        if (cur < 0) cur = 0;
        in->size_hint = in->st.st_size > cur ? (uint64_t)(in->st.st_size - cur) : 0;
    }
    if (!need_regular) {
        in->buf = malloc(FIO_HIST + FIO_BUF_SIZE);
        if (!in->buf) {
            fio_error("%s: out of memory", in->name);
            goto fail;
        }
    }
    return 0;
fail:
    if (!in->is_stdin && in->fd >= 0) close(in->fd);
    in->fd = -1;
    return -1;
}

static void in_close(fio_in *in)
{
    if (!in->is_stdin && in->fd >= 0) close(in->fd);
    in->fd = -1;
    free(in->buf);
    in->buf = NULL;
}

/* ---- output ----------------------------------------------------------------------- */
typedef struct fio_out {
    const char *name;   /* final name, or "stdout" */
    int fd;
    int is_stdout;
    int direct;         /* an existing device or fifo (-o /dev/null): no temp, no rename */
    int temp;           /* writing a temporary file: anonymous (anon), or g_tmp_path */
    int anon;           /* O_TMPFILE: the file has no name until out_commit links it */
    unsigned char *buf;
    size_t len;
    uint64_t bytes;
    int err;            /* errno of a failed write, or FIO_ENOPROGRESS */
} fio_out;

/* o->err when write() returned 0: no errno says why, and trying again would spin */
#define FIO_ENOPROGRESS (-1)

static const char *io_strerror(int e)
{
    return e == FIO_ENOPROGRESS ? "the system took no bytes (write returned 0)" : strerror(e);
}

static int write_all(int fd, const void *src, size_t n, int *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = write(fd, (const char *)src + done, n - done);
        if (r < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return -1;
        }
        if (r == 0) {
            *err = FIO_ENOPROGRESS;
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
}

static int out_flush(fio_out *o)
{
    if (o->len == 0) return 0;
    if (write_all(o->fd, o->buf, o->len, &o->err) != 0) return -1;
    o->len = 0;
    return 0;
}

/* ckpz_write_fn */
static int out_write(void *opaque, const void *src, size_t n)
{
    fio_out *o = opaque;
    if (o->err) return -1;
    o->bytes += n;
    if (o->len + n > FIO_BUF_SIZE && out_flush(o) != 0) return -1;
    if (n >= FIO_BUF_SIZE) return write_all(o->fd, src, n, &o->err);
    memcpy(o->buf + o->len, src, n);
    o->len += n;
    return 0;
}

/* ckpz_params.patch: rewrites bytes already written (a temporary file only) */
static int out_patch(void *opaque, const void *src, size_t n, uint64_t off)
{
    fio_out *o = opaque;
    if (o->err || !o->temp || out_flush(o) != 0) return -1;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pwrite(o->fd, (const char *)src + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            o->err = errno;
            return -1;
        }
        if (r == 0) {
            o->err = FIO_ENOPROGRESS;
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
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

/* The directory part of name ("." when it has none); 0, or -1 when it does not fit. */
static int dir_of(const char *name, char *dir, size_t cap)
{
    const char *slash = strrchr(name, '/');
    size_t n = !slash ? 1 : slash == name ? 1 : (size_t)(slash - name);
    if (n >= cap) return -1;
    memcpy(dir, slash ? name : ".", n);
    dir[n] = '\0';
    return 0;
}

/* Why name could not be created in its directory dir (open or mkstemp failed with e):
 * the name asked for, not the temporary one, and what is wrong with the directory. */
static void create_error(const char *name, const char *dir, int e)
{
    if (e == ENOENT) fio_error("%s: cannot create it: directory '%s' does not exist", name, dir);
    else if (e == ENOTDIR) fio_error("%s: cannot create it: '%s' is not a directory", name, dir);
    else fio_error("%s: cannot create it: %s", name, strerror(e));
}

/* g_tmp_path = DIR/.BASE.tmp and six characters: XXXXXX for mkstemp, or random ones for
 * a name linkat gives (it has no mkstemp). The caller checked the length and blocks the
 * signals. */
static void tmp_name(const char *name, int random)
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static uint64_t state;
    const char *slash = strrchr(name, '/');
    size_t dirlen = slash ? (size_t)(slash - name) + 1 : 0;
    snprintf(g_tmp_path, sizeof(g_tmp_path), "%.*s.%s.tmpXXXXXX", (int)dirlen, name, slash ? slash + 1 : name);
    if (random) {
        struct timespec ts;
        char *x = g_tmp_path + strlen(g_tmp_path) - 6;
        clock_gettime(CLOCK_REALTIME, &ts);
        state ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15u ^ (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_sec;
        for (int i = 0; i < 6; i++) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17; /* xorshift64 */
            x[i] = abc[state % (sizeof(abc) - 1)];
        }
    }
}

/* The temporary output beside name: an anonymous file (O_TMPFILE) where the file
 * system has them, so that even SIGKILL leaves nothing behind; else .NAME.tmpXXXXXX,
 * which the signal handler removes. */
static int temp_create(fio_out *o, const char *name)
{
    char dir[PATH_MAX];
    sigset_t old;
    int e;
    if (dir_of(name, dir, sizeof(dir)) != 0 || strlen(name) + 16 > sizeof(g_tmp_path)) {
        fio_error("%s: file name too long", name);
        return -1;
    }
#ifdef O_TMPFILE
    o->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (o->fd >= 0) {
        char proc[64];
        /* without /proc an unprivileged process may not be able to link it (link_anon) */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", o->fd);
        if (access(proc, F_OK) == 0) {
            o->temp = o->anon = 1;
            return 0;
        }
        close(o->fd);
        o->fd = -1;
    } else if (errno == ENOENT || errno == ENOTDIR) {
        create_error(name, dir, errno);
        return -1;
    } /* else EOPNOTSUPP, EISDIR (a kernel without O_TMPFILE), ...: a named file */
#endif
    block_signals(&old);
    tmp_name(name, 0);
    o->fd = mkstemp(g_tmp_path);
    e = errno;
    if (o->fd >= 0) g_tmp_active = 1;
    restore_signals(&old);
    if (o->fd < 0) {
        create_error(name, dir, e);
        return -1;
    }
    o->temp = 1;
    return 0;
}

/* Opens the output: stdout (name NULL), an existing device or fifo, or a temporary file
 * beside `name`. in_st (may be NULL) guards against writing over the input. binary:
 * refuse a terminal as stdout (restored data may go to one, as with zstd -dc). Every
 * decision about name is made here, before any work, on lstat: a symbolic link,
 * dangling or not, is an existing name (a device or fifo it points to is written
 * through, as before). */
static int out_open(fio_out *o, const char *name, const struct stat *in_st, const fio_prefs *p, int binary)
{
    struct stat st;
    memset(o, 0, sizeof(*o));
    o->fd = -1;
    if (!name) {
        o->name = "stdout";
        o->is_stdout = 1;
        if (binary && isatty(STDOUT_FILENO) && !p->force) {
            fio_error("stdout is a terminal, aborting (use -f to force)");
            return -1;
        }
        o->fd = STDOUT_FILENO;
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
            o->fd = open(name, O_WRONLY);
            if (o->fd < 0) {
                fio_error("%s: %s", name, strerror(errno));
                return -1;
            }
        } else if (temp_create(o, name) != 0) {
            return -1;
        }
    }
    o->buf = malloc(FIO_BUF_SIZE);
    if (!o->buf) {
        fio_error("%s: out of memory", o->name);
        return -1; /* caller calls out_abort */
    }
    return 0;
}

/* Drops a failed output: the temporary file goes (an anonymous one with its
 * descriptor), an existing final file is untouched. */
static void out_abort(fio_out *o)
{
    if (o->temp) {
        sigset_t old;
        if (o->fd >= 0) close(o->fd);
        block_signals(&old);
        if (g_tmp_active) unlink(g_tmp_path);
        g_tmp_active = 0;
        restore_signals(&old);
    } else if (!o->is_stdout && o->fd >= 0) {
        close(o->fd);
    }
    o->fd = -1;
    o->temp = o->anon = 0;
    free(o->buf);
    o->buf = NULL;
}

static int fsync_dir_of(const char *name)
{
    char dir[PATH_MAX];
    int fd, r;
    if (dir_of(name, dir, sizeof(dir)) != 0) return -1;
    fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    r = fsync(fd);
    close(fd);
    return r;
}

/* Gives the anonymous file fd the name `to`; EEXIST when the name exists (linkat never
 * replaces). AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH on older kernels; the link in
 * /proc/self/fd is open to any process (open(2)). */
static int link_anon(int fd, const char *to)
{
    char proc[64];
    if (linkat(fd, "", AT_FDCWD, to, AT_EMPTY_PATH) == 0) return 0;
    if (errno != ENOENT && errno != EPERM && errno != EINVAL) return -1;
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW);
}

/* Puts the finished temporary file under o->name. Without -f only while the name is
 * free, in one step that cannot replace (linkat, or renameat2 RENAME_NOREPLACE; a file
 * system without the latter gets lstat then rename); with -f over what is there
 * (rename). Prints its error; on failure a named temporary file is gone. */
static int publish(fio_out *o, const fio_prefs *p)
{
    sigset_t old;
    int rc, e = 0;
    if (o->anon) {
        if (link_anon(o->fd, o->name) == 0) return 0;
        e = errno;
        if (e != EEXIST || !p->force) goto fail;
        /* -f over an existing file: a name of its own first, renamed over the old one
         * (a SIGKILL between the two is all that can leave that name behind) */
        for (int tries = 0;; tries++) {
            block_signals(&old);
            tmp_name(o->name, 1);
            rc = link_anon(o->fd, g_tmp_path);
            e = errno;
            if (rc == 0) g_tmp_active = 1;
            restore_signals(&old);
            if (rc == 0) break;
            if (e != EEXIST || tries >= 100) goto fail;
        }
    } else if (!p->force) {
        block_signals(&old);
        rc = -1;
        errno = EINVAL;
#ifdef RENAME_NOREPLACE
        rc = renameat2(AT_FDCWD, g_tmp_path, AT_FDCWD, o->name, RENAME_NOREPLACE);
#endif
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
            struct stat st;
            if (lstat(o->name, &st) == 0) errno = EEXIST;
            else rc = rename(g_tmp_path, o->name);
        }
        e = errno;
        if (rc != 0) unlink(g_tmp_path);
        g_tmp_active = 0;
        restore_signals(&old);
        if (rc == 0) return 0;
        goto fail;
    }
    block_signals(&old);
    rc = rename(g_tmp_path, o->name);
    e = errno;
    if (rc != 0) unlink(g_tmp_path);
    g_tmp_active = 0;
    restore_signals(&old);
    if (rc == 0) return 0;
fail:
    if (e == EEXIST) fio_error("%s: appeared while writing; not overwritten (use -f)", o->name);
    else fio_error("%s: cannot put the output in place: %s", o->name, strerror(e));
    return -1;
}

/* Finishes the output: flush; for a file: mode and mtime of the input (when it is a
 * regular file), fsync if durable, close, put in place (and fsync the directory if
 * durable). Prints the error itself; on failure no file is left under the final name
 * that was not there before. */
static int out_commit(fio_out *o, const struct stat *in_st, const fio_prefs *p, int durable)
{
    if (out_flush(o) != 0) {
        fio_error("%s: write error: %s", o->name, io_strerror(o->err));
        out_abort(o);
        return -1;
    }
    if (o->temp) {
        int e = 0;
        fchmod(o->fd, in_st ? (in_st->st_mode & 07777 & ~(mode_t)06000) : default_mode());
        if (in_st) {
            struct timespec ts[2];
            ts[0] = in_st->st_atim;
            ts[1] = in_st->st_mtim;
            futimens(o->fd, ts);
        }
        /* fsync only when the input is about to be deleted (--rm): like zstd and gzip,
         * a plain run leaves flushing to the kernel rather than wait for the disk */
        if (durable && fsync(o->fd) != 0) {
            e = errno;
        } else if (o->anon) {
            /* close() is where some file systems (NFS) report a failed write-back; the
             * file needs its descriptor until it is linked, so a duplicate is closed */
            int d = dup(o->fd);
            if (d < 0 || close(d) != 0) e = errno;
        } else {
            int r = close(o->fd);
            o->fd = -1;
            if (r != 0) e = errno;
        }
        if (e) {
            fio_error("%s: write error: %s", o->name, strerror(e));
            out_abort(o);
            return -1;
        }
        if (publish(o, p) != 0) {
            out_abort(o);
            return -1;
        }
        if (o->anon) {
            int r = close(o->fd);
            o->fd = -1;
            if (r != 0) { /* in place, but not known to be written */
                e = errno;
                unlink(o->name);
                fio_error("%s: write error: %s", o->name, strerror(e));
                out_abort(o);
                return -1;
            }
        }
        o->temp = o->anon = 0;
        if (durable && fsync_dir_of(o->name) != 0) {
            fio_error("%s: cannot sync its directory: %s", o->name, strerror(errno));
            free(o->buf);
            o->buf = NULL;
            return -1;
        }
    } else if (o->direct) {
        if (close(o->fd) != 0) {
            fio_error("%s: write error: %s", o->name, strerror(errno));
            o->fd = -1;
            free(o->buf);
            o->buf = NULL;
            return -1;
        }
        o->fd = -1;
    }
    free(o->buf);
    o->buf = NULL;
    return 0;
}

/* ---- progress --------------------------------------------------------------------- */
/* The library may report progress from any of its threads: a try-lock keeps one
 * printer at a time and drops updates that would block. */
typedef struct fio_progress {
    pthread_mutex_t lock;
    const char *name;
    double start, last;
    int width;          /* characters of the line on screen, to erase it */
} fio_progress;

static int progress_enabled(const fio_prefs *p)
{
    if (p->progress >= 0) return p->progress;
    return p->verbosity >= 2 && isatty(STDERR_FILENO);
}

static int on_progress(void *opaque, uint64_t done, uint64_t total)
{
    fio_progress *pg = opaque;
    double t;
    char line[256], h[32];
    int n;
    if (pthread_mutex_trylock(&pg->lock) != 0) return 0;
    t = now_s();
    if (t - pg->last < 0.1) {
        pthread_mutex_unlock(&pg->lock);
        return 0;
    }
    pg->last = t;
    fio_human(h, sizeof(h), done);
    if (total != CKPZ_SIZE_UNKNOWN && total > 0)
        n = snprintf(line, sizeof(line), "%.40s : %5.1f%%  %s  %.1f MB/s", pg->name,
                     100.0 * (double)done / (double)total, h,
                     (double)done / 1e6 / (t - pg->start > 1e-9 ? t - pg->start : 1e-9));
    else
        n = snprintf(line, sizeof(line), "%.40s : %s  %.1f MB/s", pg->name, h,
                     (double)done / 1e6 / (t - pg->start > 1e-9 ? t - pg->start : 1e-9));
    if (n < 0) n = 0;
    if (n >= (int)sizeof(line)) n = (int)sizeof(line) - 1;
    fprintf(stderr, "\r%s%*s", line, pg->width > n ? pg->width - n : 0, "");
    fflush(stderr);
    if (n > pg->width) pg->width = n;
    g_progress_shown = 1;
    pthread_mutex_unlock(&pg->lock);
    return 0;
}

static void progress_start(fio_progress *pg, const char *name, const fio_prefs *p,
                           ckpz_params *params)
{
    memset(pg, 0, sizeof(*pg));
    pthread_mutex_init(&pg->lock, NULL);
    pg->name = name;
    pg->start = now_s();
    pg->last = pg->start; /* first line after 0.1 s: fast files print nothing */
    if (progress_enabled(p)) {
        params->progress = on_progress;
        params->progress_opaque = pg;
    }
}

static void progress_end(fio_progress *pg)
{
    pthread_mutex_lock(&pg->lock);
    if (pg->width > 0) {
        fprintf(stderr, "\r%*s\r", pg->width, "");
        fflush(stderr);
    }
    g_progress_shown = 0;
    pthread_mutex_unlock(&pg->lock);
    pthread_mutex_destroy(&pg->lock);
}

/* ---- one file through the stream API ---------------------------------------------- */
typedef enum { OP_COMPRESS, OP_DECOMPRESS, OP_TEST } fio_op;

/* The summaries are zstd's. With -v: a line per file, and a total line for several.
 * At the default level: on a terminal a line per file; when stderr is not a terminal
 * (a log) a line for a single file, one total line for several, and nothing when the
 * output is stdout (zstd lowers its level there: the bytes on stdout are the point) or
 * when --stats reports instead. */
static int per_file_summary(const fio_prefs *p, int nfiles, const char *dst)
{
    if (p->verbosity >= 3) return 1;
    if (p->verbosity < 2) return 0;
    if (isatty(STDERR_FILENO)) return 1;
    return nfiles == 1 && dst && !p->stats; /* --stats=json on stderr stays JSON */
}

static int total_summary(const fio_prefs *p, int nfiles)
{
    if (nfiles < 2 || p->verbosity < 2) return 0;
    return p->verbosity >= 3 || (!isatty(STDERR_FILENO) && !p->to_stdout && !p->stats);
}

/* Reason for a failed library call: our errno when the callbacks failed, else the
 * library's message (which names chunk and tensor). */
static void report(ckpz_ctx *ctx, ckpz_error e, const fio_in *in, const fio_out *out)
{
    const char *msg = ckpz_ctx_message(ctx);
    if (in && in->err) fio_error("%s: read error: %s", in->name, strerror(in->err));
    else if (out && out->err) fio_error("%s: write error: %s", out->name, io_strerror(out->err));
    else if (e == CKPZ_ERR_BASE && in && msg && *msg)
        fio_error("%s: %s; %s", in->name, msg,
                  !strncmp(msg, "wrong base", 10) ? "name the right one with --base"
                  : in->is_stdin              ? "name the base with --base"
                                              : "it is not beside the file: name it with --base");
    else fio_error("%s: %s", in ? in->name : "?", msg && *msg ? msg : ckpz_error_name(e));
}

static int list_one(ckpz_ctx *ctx, const fio_prefs *p, const char *name, int print_name);
static int archive_open(ckpz_ctx *ctx, const fio_prefs *p, fio_in *in, const char *name, const fio_base *base,
                        ckpz_archive **out);

/* A lossy tensor coded against a base whose changes were mostly erased (restored as the
 * base's values) would freeze training at the base's values after a restore: the bound
 * is larger than the updates between the two checkpoints. */
static int frozen(const ckpz_entry *e)
{
    return e->lossy && e->changed >= 64 && (double)e->frozen >= 0.5 * (double)e->changed;
}

/* After a lossy compression: warn about frozen tensors; with -v, list the errors. */
static void lossy_report(ckpz_ctx *ctx, const fio_prefs *p, const char *name)
{
    fio_in in;
    ckpz_archive *a = NULL;
    ckpz_archive_info info;
    ckpz_entry e;
    if (p->verbosity >= 3) list_one(ctx, p, name, 1);
    if (p->verbosity < 1 || archive_open(ctx, p, &in, name, NULL, &a) != 0) return;
    ckpz_archive_get_info(a, &info);
    uint64_t shown = 0, nfrozen = 0;
    for (uint64_t i = 0; i < info.entries; i++) {
        if (ckpz_archive_entry(a, i, &e) != CKPZ_OK || !frozen(&e)) continue;
        nfrozen++;
        if (shown++ < 5)
            fio_warn("%s: tensor '%.100s': %.0f%% of the values that changed since the base restore as the base's "
                     "(the error bound %g is larger than the updates: training would not move)",
                     name, e.name, 100.0 * (double)e.frozen / (double)e.changed,
                     e.abs_bound > 0 ? e.abs_bound : e.lossy_bound);
    }
    if (nfrozen > shown) fio_warn("%s: %llu more tensors like that", name, (unsigned long long)(nfrozen - shown));
    ckpz_archive_close(a);
    in_close(&in);
}

static double cpu_seconds(const struct rusage *r)
{
    return (double)r->ru_utime.tv_sec + (double)r->ru_utime.tv_usec / 1e6 + (double)r->ru_stime.tv_sec +
           (double)r->ru_stime.tv_usec / 1e6;
}

/* --stats: what one file's compression or decompression achieved, for monitoring:
 * sizes, ratio, wall time and throughput (MB/s of original bytes), CPU time of the
 * process and the cores it kept busy on average (CPU time / wall time), and with
 * --target-bw the share of the link the output used. */
static void print_stats(const fio_prefs *p, fio_op op, const char *name, const ckpz_stats *st, double wall,
                        const struct rusage *ru0)
{
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = cpu_seconds(&ru1) - cpu_seconds(ru0), w = wall > 1e-9 ? wall : 1e-9;
    double ratio = st->compressed_bytes ? (double)st->original_bytes / (double)st->compressed_bytes : 0;
    const char *what = op == OP_COMPRESS ? "compress" : op == OP_TEST ? "test" : "decompress";
    /* With --target-bw: the share of the link the output used (its bytes over the time
     * the link had); near 1 = the link was the limit, low = compression was; above 1
     * when buffers downstream (a pipe) took the last bytes faster than the link. */
    double link = op == OP_COMPRESS && p->target_bw > 0 ? (double)st->compressed_bytes / w / (p->target_bw * 1e6) : 0;
    if (p->stats == 2) {
        fputs("{\"file\":\"", stderr);
        for (const char *c = name; *c; c++) { /* a JSON string: escape what must be */
            unsigned char u = (unsigned char)*c;
            if (u == '"' || u == '\\') fprintf(stderr, "\\%c", u);
            else if (u < 0x20) fprintf(stderr, "\\u%04x", u);
            else fputc(u, stderr);
        }
        fprintf(stderr,
                "\",\"operation\":\"%s\",\"original_bytes\":%llu,\"compressed_bytes\":%llu,\"ratio\":%.6f,"
                "\"seconds\":%.6f,\"mb_per_s\":%.3f,\"cpu_seconds\":%.6f,\"cpu_use\":%.3f,\"threads\":%d",
                what, (unsigned long long)st->original_bytes, (unsigned long long)st->compressed_bytes, ratio, wall,
                (double)st->original_bytes / 1e6 / w, cpu, cpu / w,
                p->threads ? p->threads : (int)sysconf(_SC_NPROCESSORS_ONLN));
        if (link > 0) fprintf(stderr, ",\"target_bw_mb_per_s\":%.3f,\"link_use\":%.3f", p->target_bw, link);
        fputs("}\n", stderr);
    } else {
        fprintf(stderr, "%s: %s: ratio %.3fx (%llu -> %llu bytes), %.3f s, %.1f MB/s, CPU %.3f s (%.2f cores)",
                name, what, ratio, (unsigned long long)st->original_bytes, (unsigned long long)st->compressed_bytes,
                wall, (double)st->original_bytes / 1e6 / w, cpu, cpu / w);
        if (link > 0) fprintf(stderr, ", link %.0f%% of %.0f MB/s", 100 * link, p->target_bw);
        fputc('\n', stderr);
    }
}

/* Did the input change while it was read (another process truncating, appending to or
 * rewriting it)? For a regular file: its size and mtime now against those at open, and
 * (check_count) the bytes the library took against the size at open. Without this the
 * output would hold neither version, and --rm would delete the only whole copy. Prints
 * why; 1 when it changed. */
static int in_changed(fio_in *in, const char *doing, int check_count)
{
    struct stat now;
    if (!in->regular) return 0;
    if (fstat(in->fd, &now) != 0) {
        fio_error("%s: cannot check it after %s: %s", in->name, doing, strerror(errno));
        return 1;
    }
    if (now.st_size != in->st.st_size || now.st_mtim.tv_sec != in->st.st_mtim.tv_sec ||
        now.st_mtim.tv_nsec != in->st.st_mtim.tv_nsec) {
        fio_error("%s: changed while %s (%lld bytes at the start, %lld at the end); output discarded", in->name,
                  doing, (long long)in->st.st_size, (long long)now.st_size);
        return 1;
    }
    /* a size of 0 at the start is also what /proc and /sys files say: no count to hold */
    if (check_count && in->st.st_size > 0 && in->consumed != in->size_hint) {
        fio_error("%s: %llu bytes read of the %llu it had at the start: it changed (or could not be read whole) "
                  "while %s; output discarded",
                  in->name, (unsigned long long)in->consumed, (unsigned long long)in->size_hint, doing);
        return 1;
    }
    return 0;
}

/* What the files of one run added up to, for the total line of several files. */
typedef struct fio_totals {
    int files;
    uint64_t original, compressed;
} fio_totals;

static void add_stats(ckpz_stats *sum, const ckpz_stats *one)
{
    sum->original_bytes += one->original_bytes;
    sum->compressed_bytes += one->compressed_bytes;
    sum->tensor_bytes += one->tensor_bytes;
    sum->tensors += one->tensors;
    sum->chunks += one->chunks;
    sum->format = one->format;
}

static int run_one(ckpz_ctx *ctx, const fio_prefs *p, fio_op op, const char *src,
                   const char *dst /* NULL = stdout; ignored by OP_TEST */, const fio_base *base,
                   int summary /* print this file's summary line */, fio_totals *tot)
{
    fio_in in;
    fio_out out;
    ckpz_params params;
    ckpz_stats stats;
    fio_progress pg;
    ckpz_error e;
    double t0, dt;
    int has_out = op != OP_TEST, streams = 0;

    memset(&out, 0, sizeof(out));
    if (in_open(&in, src, p, 0) != 0) return 1;
    if (has_out && out_open(&out, dst, in.regular && !in.is_stdin ? &in.st : NULL, p, op == OP_COMPRESS) != 0) {
        out_abort(&out);
        in_close(&in);
        return 1;
    }
    fio_params(p, &params);
    if (base && base->path) {
        params.base = base->data;
        params.base_size = base->size;
        params.base_name = fio_base_record_name(base);
        params.base_depth = base->depth;
        if (op == OP_COMPRESS && has_out && out.temp) { /* a file: the base's CRC needs no pass of its own */
            params.patch = out_patch;
            params.patch_opaque = &out;
        }
    }
    memset(&stats, 0, sizeof(stats));
    progress_start(&pg, in.name, p, &params);
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    t0 = now_s();
    if (op == OP_COMPRESS) {
        e = ckpz_compress_stream(ctx, &params, in_read, &in, in.size_hint, out_write, &out,
                                 &stats);
    } else {
        /* streams back to back (cat a.ckpz b.ckpz, ckpz -c a b) restore to their originals
         * back to back, as zstd does with frames */
        in.split = 1;
        for (;;) {
            ckpz_stats one;
            e = ckpz_decompress_stream(ctx, &params, in_read, &in, has_out ? out_write : NULL,
                                       has_out ? &out : NULL, &one);
            if (e != CKPZ_OK) break;
            add_stats(&stats, &one);
            streams++;
            int more = in_next_stream(&in);
            if (more < 0) e = CKPZ_ERR_READ;
            if (more <= 0) break;
        }
    }
    dt = now_s() - t0;
    progress_end(&pg);
    if (e == CKPZ_OK && p->stats) print_stats(p, op, in.name, &stats, dt, &ru0);
    if (e != CKPZ_OK) {
        const char *msg = ckpz_ctx_message(ctx);
        if (streams > 0 && !in.err && !(has_out && out.err))
            fio_error("%s: at byte %llu, after %d complete stream%s: %s", in.name,
                      (unsigned long long)stats.compressed_bytes, streams, streams == 1 ? "" : "s",
                      msg && *msg ? msg : ckpz_error_name(e));
        else
            report(ctx, e, &in, has_out ? &out : NULL);
        in_changed(&in, op == OP_COMPRESS ? "it was compressed" : op == OP_TEST ? "it was tested" : "it was decompressed",
                   0); /* the likely cause, when it did */
        if (has_out) out_abort(&out);
        in_close(&in);
        return 1;
    }
    if (has_out) {
        int remove_src = p->remove_src && !in.is_stdin && !out.is_stdout && !out.direct;
        const struct stat *keep = in.regular && !in.is_stdin ? &in.st : NULL;
        if (in_changed(&in, op == OP_COMPRESS ? "it was compressed" : "it was decompressed", 1)) {
            out_abort(&out);
            in_close(&in);
            return 1;
        }
        if (out_commit(&out, keep, p, remove_src) != 0) {
            in_close(&in);
            return 1;
        }
        if (remove_src && unlink(src) != 0) {
            fio_error("%s: cannot remove: %s", src, strerror(errno));
            in_close(&in);
            return 1;
        }
    }
    in_close(&in);
    if (op == OP_COMPRESS && p->policy && dst) lossy_report(ctx, p, dst);
    tot->files++;
    tot->original += stats.original_bytes;
    tot->compressed += stats.compressed_bytes;

    if (op == OP_TEST) {
        if (p->verbosity >= 3) {
            char a[32], b[32];
            fprintf(stderr, "%s : OK (%s => %s, %.1f MB/s)\n", in.name,
                    fio_human(a, sizeof(a), stats.compressed_bytes),
                    fio_human(b, sizeof(b), stats.original_bytes),
                    (double)stats.original_bytes / 1e6 / (dt > 1e-9 ? dt : 1e-9));
        } else if (p->verbosity >= 2) {
            fprintf(stderr, "%s : OK\n", in.name);
        }
    } else if (summary) {
        char a[32], b[32];
        double ratio = stats.compressed_bytes
                           ? (double)stats.original_bytes / (double)stats.compressed_bytes
                           : 0.0;
        double mbs = (double)stats.original_bytes / 1e6 / (dt > 1e-9 ? dt : 1e-9);
        if (op == OP_COMPRESS)
            fprintf(stderr, "%s : %.1f%% (%s => %s, %s) %.3fx, %.1f MB/s\n", in.name,
                    stats.original_bytes
                        ? 100.0 * (double)stats.compressed_bytes / (double)stats.original_bytes
                        : 0.0,
                    fio_human(a, sizeof(a), stats.original_bytes),
                    fio_human(b, sizeof(b), stats.compressed_bytes), out.name, ratio, mbs);
        else
            fprintf(stderr, "%s : %s => %s, %s (%.3fx, %.1f MB/s)\n", in.name,
                    fio_human(a, sizeof(a), stats.compressed_bytes),
                    fio_human(b, sizeof(b), stats.original_bytes), out.name, ratio, mbs);
    }
    return 0;
}

static int has_suffix(const char *name)
{
    size_t n = strlen(name), s = strlen(FIO_SUFFIX);
    return n >= s && strcmp(name + n - s, FIO_SUFFIX) == 0;
}

/* Output name for one input: NULL = stdout; *skip set when the file is to be left out. */
static char *output_name(const fio_prefs *p, fio_op op, const char *src, int *skip, int *fail)
{
    char *dst;
    size_t n = strlen(src);
    *skip = *fail = 0;
    if (p->to_stdout || (p->out_name && strcmp(p->out_name, "-") == 0)) return NULL;
    if (p->out_name) {
        dst = strdup(p->out_name);
        if (!dst) {
            fio_error("%s: out of memory", src);
            *fail = 1;
        }
        return dst;
    }
    if (strcmp(src, "-") == 0) return NULL;
    if (op == OP_COMPRESS) {
        if (has_suffix(src) && !p->force) {
            fio_error("%s: already has %s suffix -- ignored (use -f to compress it again)", src,
                     FIO_SUFFIX);
            *skip = 1;
            return NULL;
        }
        dst = malloc(n + sizeof(FIO_SUFFIX));
        if (!dst) {
            fio_error("%s: out of memory", src);
            *fail = 1;
            return NULL;
        }
        memcpy(dst, src, n);
        memcpy(dst + n, FIO_SUFFIX, sizeof(FIO_SUFFIX));
        return dst;
    }
    /* decompress: strip the suffix; the rest must be a name */
    if (!has_suffix(src) || n == strlen(FIO_SUFFIX) || src[n - strlen(FIO_SUFFIX) - 1] == '/') {
        fio_error("%s: unknown suffix (expected %s; use -o or -c to name the output)", src,
                  FIO_SUFFIX);
        *fail = 1;
        return NULL;
    }
    dst = strdup(src);
    if (!dst) {
        fio_error("%s: out of memory", src);
        *fail = 1;
        return NULL;
    }
    dst[n - strlen(FIO_SUFFIX)] = '\0';
    return dst;
}

/* The base a delta file needs (none for a stand-alone file or a pipe without --base):
 * --base, or the name the file recorded, found beside it. Loads it into *cache unless it
 * is already there. 0, or 1 after printing why. */
static int base_for(const fio_prefs *p, const char *src, fio_base *cache, const fio_base **out)
{
    unsigned char head[CKPZ_BASE_PROBE];
    size_t hlen = 0;
    ckpz_base_info info;
    ckpz_ctx *ctx;
    char *path = NULL;
    *out = NULL;
    if (!strcmp(src, "-")) { /* a pipe cannot be peeked at: --base or nothing */
        if (!p->base_path) return 0;
        path = strdup(p->base_path);
    } else {
        if (fio_read_head(src, head, sizeof(head), &hlen) != 0) return 0; /* the open reports it */
        if (!(ctx = ckpz_ctx_create())) {
            fio_error("out of memory");
            return 1;
        }
        ckpz_error e = ckpz_base_info_read(ctx, head, hlen, &info);
        ckpz_ctx_free(ctx);
        if (e != CKPZ_OK || !info.needed) return 0; /* not ours to judge here, or stand-alone */
        path = p->base_path ? strdup(p->base_path) : fio_base_locate(src, info.name);
        if (!path) /* not beside it: the library restores it if no entry was coded against the base, */
            return 0; /* and otherwise names the base at the first entry that needs it */
    }
    if (!path) {
        fio_error("out of memory");
        return 1;
    }
    if (!cache->path || strcmp(cache->path, path)) {
        fio_base_free(cache);
        if (fio_base_load(p, path, cache) != 0) {
            free(path);
            return 1;
        }
        if (p->verbosity >= 3) fprintf(stderr, "%s : base %s\n", src, path);
    }
    free(path);
    *out = cache;
    return 0;
}

/* The preferences for one file: with --target-bw, the levels and threads autotune.c
 * measures best for the link (stdin cannot be sampled ahead: the settings stay); *levels
 * gets the per-tensor levels' policy text for the caller to free, or NULL. */
static const fio_prefs *tuned(const fio_prefs *p, fio_op op, const char *src, const fio_base *base, fio_prefs *tp,
                              char **levels)
{
    *levels = NULL;
    if (op != OP_COMPRESS || !(p->target_bw > 0)) return p;
    *tp = *p;
    if (!strcmp(src, "-")) {
        fio_warn("--target-bw: standard input cannot be sampled ahead; using -%d", p->level);
        return p;
    }
    if (autotune_choose(p, src, base ? base->data : NULL, base ? base->size : 0, &tp->level, &tp->threads, levels) != 0)
        return p; /* the compression will report */
    tp->levels = *levels;
    return tp;
}

static int run_files(const fio_prefs *p, fio_op op, const char *const *files, int n)
{
    fio_totals tot = {0, 0, 0};
    fio_prefs tp;
    ckpz_ctx *ctx = ckpz_ctx_create();
    fio_base cache;
    const fio_base *base = NULL;
    int i, failed = 0;
    g_display = p->verbosity;
    memset(&cache, 0, sizeof(cache));
    if (!ctx) {
        fio_error("out of memory");
        return 1;
    }
    if (op == OP_COMPRESS && p->base_path) {
        if (fio_base_load(p, p->base_path, &cache) != 0) {
            ckpz_ctx_free(ctx);
            return 1;
        }
        base = &cache;
        if (p->keyframe_every && cache.depth + 1 >= p->keyframe_every) {
            if (p->verbosity >= 3)
                fprintf(stderr, "ckpz: keyframe: %s is %u delta file%s deep, --keyframe-every %u: "
                        "writing stand-alone files\n", p->base_path, (unsigned)cache.depth,
                        cache.depth == 1 ? "" : "s", p->keyframe_every);
            base = NULL;
        }
    }
    if (p->remove_src && (p->to_stdout || (p->out_name && !strcmp(p->out_name, "-"))))
        fio_warn("--rm is ignored when writing to stdout");
    for (i = 0; i < n; i++) {
        int skip = 0, fail = 0;
        char *dst = NULL;
        if (op != OP_TEST) {
            dst = output_name(p, op, files[i], &skip, &fail);
            if (skip) {
                failed = 1;
                continue;
            }
            if (fail) {
                failed = 1;
                continue;
            }
        }
        struct stat bst, dst_st;
        if (op == OP_COMPRESS && base && dst && stat(dst, &dst_st) == 0 && stat(base->path, &bst) == 0 &&
            bst.st_dev == dst_st.st_dev && bst.st_ino == dst_st.st_ino) {
            fio_error("%s: the output %s is the base it is coded against, aborting", files[i], dst);
            failed = 1;
        } else if (op != OP_COMPRESS && base_for(p, files[i], &cache, &base) != 0) failed = 1;
        else {
            char *levels;
            if (run_one(ctx, tuned(p, op, files[i], base, &tp, &levels), op, files[i], dst, base,
                        per_file_summary(p, n, dst), &tot) != 0)
                failed = 1;
            free(levels);
        }
        free(dst);
    }
    if (op != OP_TEST && total_summary(p, n)) {
        char a[32], b[32];
        double ratio = tot.compressed ? (double)tot.original / (double)tot.compressed : 0.0;
        fio_human(a, sizeof(a), op == OP_COMPRESS ? tot.original : tot.compressed);
        fio_human(b, sizeof(b), op == OP_COMPRESS ? tot.compressed : tot.original);
        if (op == OP_COMPRESS)
            fprintf(stderr, "%d files compressed : %.1f%% (%s => %s) %.3fx\n", tot.files,
                    tot.original ? 100.0 * (double)tot.compressed / (double)tot.original : 0.0, a, b, ratio);
        else
            fprintf(stderr, "%d files decompressed : %s => %s (%.3fx)\n", tot.files, a, b, ratio);
    }
    fio_base_free(&cache);
    ckpz_ctx_free(ctx);
    return failed;
}

int fio_compress_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_COMPRESS, files, n);
}

int fio_decompress_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_DECOMPRESS, files, n);
}

int fio_test_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_TEST, files, n);
}

/* ---- random access: list and extract ---------------------------------------------- */
static int archive_open(ckpz_ctx *ctx, const fio_prefs *p, fio_in *in, const char *name,
                        const fio_base *base, ckpz_archive **a)
{
    ckpz_params params;
    ckpz_error e;
    if (in_open(in, name, p, 1) != 0) return -1;
    fio_params(p, &params);
    if (base) {
        params.base = base->data;
        params.base_size = base->size;
    }
    e = ckpz_archive_open(ctx, &params, in_pread, in, in->size_hint, a);
    if (e != CKPZ_OK) {
        report(ctx, e, in, NULL);
        in_close(in);
        return -1;
    }
    return 0;
}

/* The name as shown by -l: control bytes escaped (a name is data from the file and must
 * not drive the terminal); "(bytes)" for opaque runs, "(raw)" for the tensor of a raw
 * input, "" for a tensor whose name is empty. Returns buf, grown as needed, or NULL. */
static char *display_name(const ckpz_entry *e, int raw_input, char **buf, size_t *cap)
{
    const unsigned char *s = (const unsigned char *)(e->name ? e->name : "");
    size_t need = strlen((const char *)s) * 4 + 16, k = 0;
    if (need > *cap) {
        char *nb = realloc(*buf, need);
        if (!nb) return NULL;
        *buf = nb;
        *cap = need;
    }
    if (!*s) {
        strcpy(*buf, e->dtype == CKPZ_DTYPE_NONE ? "(bytes)" : raw_input ? "(raw)" : "\"\"");
        return *buf;
    }
    for (; *s; s++) {
        if (*s < 0x20 || *s == 0x7f) k += (size_t)sprintf(*buf + k, "\\x%02x", *s);
        else (*buf)[k++] = (char)*s;
    }
    (*buf)[k] = '\0';
    return *buf;
}

/* Terminal columns of a UTF-8 string: one per code point, two for the East Asian wide
 * ranges and emoji (enough to keep the -l columns straight without a locale). */
static int display_width(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    int w = 0;
    while (*s) {
        unsigned cp = *s, extra = 0;
        if (cp >= 0xf0) { cp &= 0x07; extra = 3; }
        else if (cp >= 0xe0) { cp &= 0x0f; extra = 2; }
        else if (cp >= 0xc0) { cp &= 0x1f; extra = 1; }
        s++;
        while (extra-- && (*s & 0xc0) == 0x80) cp = (cp << 6) | (*s++ & 0x3f);
        if ((cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) ||
            (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
            (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
            (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1faff) ||
            (cp >= 0x20000 && cp <= 0x3fffd))
            w += 2;
        else
            w += 1;
    }
    return w;
}

static void format_shape(char *buf, size_t len, const ckpz_entry *e)
{
    size_t used = 0;
    uint32_t d;
    if (e->dtype == CKPZ_DTYPE_NONE) {
        snprintf(buf, len, "-");
        return;
    }
    used += (size_t)snprintf(buf, len, "[");
    for (d = 0; d < e->ndim && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %llu" : "%llu",
                                 (unsigned long long)e->shape[d]);
    if (used < len) snprintf(buf + used, len - used, "]");
    if (used >= len && len > 4) strcpy(buf + len - 4, "..]");
}

/* "1.531x", or "-" when there is nothing to compare */
static const char *ratio_str(char *buf, size_t len, uint64_t orig, uint64_t comp)
{
    if (!orig || !comp) snprintf(buf, len, "-");
    else snprintf(buf, len, "%.3fx", (double)orig / (double)comp);
    return buf;
}

/* Lossy columns of a listing: mode and bound, MAE, max error, PSNR (dB, against the
 * tensor's value range). */
static void print_lossy(const ckpz_entry *e)
{
    char m[32];
    if (!e->lossy) {
        printf("  %-13s  %9s  %9s  %7s", e->dtype == CKPZ_DTYPE_NONE ? "" : "lossless", "", "", "");
        return;
    }
    const char *mode = !strcmp(e->lossy_mode, "pointwise-rel") ? "prel" : e->lossy_mode;
    if (!strcmp(e->lossy_mode, "affine")) snprintf(m, sizeof m, "affine");
    else snprintf(m, sizeof m, "%s %.2g", mode, e->lossy_bound);
    if (e->psnr == INFINITY) printf("  %-13s  %9.3g  %9.3g  %7s", m, e->mae, e->max_error, "inf");
    else printf("  %-13s  %9.3g  %9.3g  %7.1f", m, e->mae, e->max_error, e->psnr);
    if (frozen(e)) printf("  FROZEN");
}

static int list_one(ckpz_ctx *ctx, const fio_prefs *p, const char *name, int print_name)
{
    fio_in in;
    ckpz_archive *a = NULL;
    ckpz_archive_info info;
    ckpz_entry e;
    uint64_t i, tensors = 0;
    int wname = 4, wdtype = 5, wshape = 5, widx = 1, verbose = p->verbosity >= 3;
    char shape[256], h1[32], h2[32], r[32], *nbuf = NULL;
    size_t ncap = 0;
    int raw_input;

    if (archive_open(ctx, p, &in, name, NULL, &a) != 0) return 1;
    ckpz_archive_get_info(a, &info);
    raw_input = info.format == CKPZ_INPUT_RAW;
    /* first pass: column widths */
    for (i = 0; i < info.entries; i++) {
        int w;
        if (ckpz_archive_entry(a, i, &e) != CKPZ_OK) {
            fio_error("%s: cannot read index entry %llu", in.name, (unsigned long long)i);
            free(nbuf);
            ckpz_archive_close(a);
            in_close(&in);
            return 1;
        }
        if (!display_name(&e, raw_input, &nbuf, &ncap)) {
            fio_error("%s: out of memory", in.name);
            free(nbuf);
            ckpz_archive_close(a);
            in_close(&in);
            return 1;
        }
        if ((w = display_width(nbuf)) > wname) wname = w;
        if ((w = (int)strlen(ckpz_dtype_name(e.dtype) ? ckpz_dtype_name(e.dtype) : "?")) > wdtype)
            wdtype = w;
        format_shape(shape, sizeof(shape), &e);
        if ((w = (int)strlen(shape)) > wshape) wshape = w;
        if (e.dtype != CKPZ_DTYPE_NONE) tensors++;
    }
    snprintf(shape, sizeof(shape), "%llu", (unsigned long long)info.entries);
    widx = (int)strlen(shape);
    if (widx < 1) widx = 1;

    if (print_name) printf("%s:\n", in.name);
    printf("%*s  %-*s  %-*s  %-*s  %10s  %10s  %7s", widx, "#", wname, "name", wdtype, "dtype",
           wshape, "shape", "original", "compressed", "ratio");
    if (info.lossy) printf("  %-13s  %9s  %9s  %7s", "lossy", "MAE", "max err", "PSNR");
    if (verbose) printf("  %14s  %14s  %14s  %8s", "offset", "bytes", "comp. bytes", "chunks");
    printf("\n");
    uint64_t opaque_runs = 0, opaque_len = 0, opaque_comp = 0;
    for (i = 0; i < info.entries; i++) {
        const char *dn;
        ckpz_archive_entry(a, i, &e);
        /* Opaque runs (headers, zip records, padding) are summed into one line unless -v:
         * a torch.save archive has one between every two storages. */
        if (e.dtype == CKPZ_DTYPE_NONE && !verbose && !raw_input) {
            opaque_runs++;
            opaque_len += e.length;
            opaque_comp += e.compressed;
            continue;
        }
        dn = ckpz_dtype_name(e.dtype);
        format_shape(shape, sizeof(shape), &e);
        display_name(&e, raw_input, &nbuf, &ncap); /* fits: the first pass grew it */
        printf("%*llu  %s%*s  %-*s  %-*s  %10s  %10s  %7s", widx, (unsigned long long)i,
               nbuf, wname - display_width(nbuf), "", wdtype, dn ? dn : "?", wshape, shape,
               fio_human(h1, sizeof(h1), e.length), fio_human(h2, sizeof(h2), e.compressed),
               ratio_str(r, sizeof(r), e.length, e.compressed));
        if (info.lossy) print_lossy(&e);
        if (verbose)
            printf("  %14llu  %14llu  %14llu  %8llu", (unsigned long long)e.offset,
                   (unsigned long long)e.length, (unsigned long long)e.compressed,
                   (unsigned long long)e.chunks);
        printf("\n");
    }
    if (opaque_runs) {
        char what[64];
        snprintf(what, sizeof(what), "(bytes: %llu run%s)", (unsigned long long)opaque_runs,
                 opaque_runs == 1 ? "" : "s");
        printf("%*s  %-*s  %10s  %10s  %7s\n", widx, "", wname + 2 + wdtype + 2 + wshape, what,
               fio_human(h1, sizeof(h1), opaque_len), fio_human(h2, sizeof(h2), opaque_comp),
               ratio_str(r, sizeof(r), opaque_len, opaque_comp));
    }
    {
        const char *fmt = ckpz_input_format_name(info.format);
        printf("%*s  %-*s  %10s  %10s  %7s  %llu tensors, %llu chunks, %s, crc32c %08x\n",
               widx, "", wname + 2 + wdtype + 2 + wshape, "total",
               fio_human(h1, sizeof(h1), info.original_size),
               fio_human(h2, sizeof(h2), info.compressed_size),
               ratio_str(r, sizeof(r), info.original_size, info.compressed_size),
               (unsigned long long)tensors,
               (unsigned long long)info.chunks, fmt ? fmt : "?",
               (unsigned)info.content_checksum);
        if (info.lossy) {
            uint64_t lossy = 0;
            for (i = 0; i < info.entries; i++)
                if (ckpz_archive_entry(a, i, &e) == CKPZ_OK && e.lossy) lossy++;
            printf("lossy: %llu of %llu tensors restore approximately (the checksums are of the restored "
                   "content)\n", (unsigned long long)lossy, (unsigned long long)tensors);
        }
        if (verbose)
            printf("format version %u, chunk size %s, %llu bytes => %llu bytes\n",
                   info.format_version, fio_human(h1, sizeof(h1), info.chunk_size),
                   (unsigned long long)info.original_size,
                   (unsigned long long)info.compressed_size);
    }
    {
        ckpz_base_info bi;
        ckpz_archive_get_base(a, &bi);
        if (bi.needed) {
            uint64_t based = 0;
            for (i = 0; i < info.entries; i++)
                if (ckpz_archive_entry(a, i, &e) == CKPZ_OK && e.based) based++;
            /* the recorded name is data from the file: print it escaped */
            ckpz_entry shown;
            memset(&shown, 0, sizeof(shown));
            shown.name = bi.name;
            shown.dtype = CKPZ_DTYPE_F32;
            display_name(&shown, 0, &nbuf, &ncap);
            if (based)
                printf("depends on: %s (%llu bytes, crc32c %08x); %llu of %llu entries coded against it; "
                       "restoring takes %u delta file%s\n",
                       nbuf && bi.name[0] ? nbuf : "(unnamed base)", (unsigned long long)bi.size,
                       (unsigned)bi.checksum, (unsigned long long)based, (unsigned long long)info.entries,
                       (unsigned)bi.depth, bi.depth == 1 ? "" : "s");
            else /* written against a base, but nothing matched it: stand-alone in fact */
                printf("written against: %s (%llu bytes, crc32c %08x); 0 of %llu entries coded against it: "
                       "restores without it\n",
                       nbuf && bi.name[0] ? nbuf : "(unnamed base)", (unsigned long long)bi.size,
                       (unsigned)bi.checksum, (unsigned long long)info.entries);
        }
    }
    free(nbuf);
    ckpz_archive_close(a);
    in_close(&in);
    return 0;
}

int fio_list_files(const fio_prefs *p, const char *const *files, int n)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    int i, failed = 0;
    g_display = p->verbosity;
    if (!ctx) {
        fio_error("out of memory");
        return 1;
    }
    for (i = 0; i < n; i++) {
        if (i > 0) printf("\n");
        if (list_one(ctx, p, files[i], n > 1) != 0) failed = 1;
        fflush(stdout);
    }
    ckpz_ctx_free(ctx);
    return failed;
}

int fio_extract(const fio_prefs *p, const char *tensor, const char *file)
{
    ckpz_ctx *ctx;
    fio_in in;
    fio_out out;
    ckpz_archive *a = NULL;
    uint64_t idx;
    ckpz_error e;
    const char *dst = NULL;
    int rc = 1;
    fio_base cache;
    const fio_base *base = NULL;

    g_display = p->verbosity;
    memset(&cache, 0, sizeof(cache));
    if (p->out_name && strcmp(p->out_name, "-") != 0 && !p->to_stdout) dst = p->out_name;
    ctx = ckpz_ctx_create();
    if (!ctx) {
        fio_error("out of memory");
        return 1;
    }
    if (base_for(p, file, &cache, &base) != 0 || archive_open(ctx, p, &in, file, base, &a) != 0) goto done_ctx;
    e = ckpz_archive_find(ctx, a, tensor, &idx);
    if (e == CKPZ_ERR_NOT_FOUND) {
        fio_error("%s: no tensor named '%s' (ckpz -l %s lists them)", in.name, tensor, in.name);
        goto done_archive;
    }
    if (e != CKPZ_OK) {
        report(ctx, e, &in, NULL);
        goto done_archive;
    }
    if (out_open(&out, dst, &in.st, p, 1) != 0) {
        out_abort(&out);
        goto done_archive;
    }
    e = ckpz_archive_extract(ctx, a, idx, out_write, &out);
    if (e != CKPZ_OK) {
        report(ctx, e, &in, &out);
        out_abort(&out);
        goto done_archive;
    }
    if (out_commit(&out, NULL, p, 0) != 0) goto done_archive;
    if (p->verbosity >= 3) {
        char h[32];
        fprintf(stderr, "%s : %s => %s (%s)\n", in.name, tensor, out.name,
                fio_human(h, sizeof(h), out.bytes));
    }
    rc = 0;
done_archive:
    ckpz_archive_close(a);
    in_close(&in);
done_ctx:
    fio_base_free(&cache);
    ckpz_ctx_free(ctx);
    return rc;
}

int fio_load_file(const char *path, void **data, size_t *size)
{
    fio_prefs p;
    fio_in in;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    fio_prefs_init(&p);
    p.verbosity = g_display;
    if (in_open(&in, path, &p, 0) != 0) return -1;
    cap = in.size_hint != CKPZ_SIZE_UNKNOWN ? (size_t)in.size_hint + 1 : (64u << 20);
    for (;;) {
        ptrdiff_t r;
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) goto nomem;
            buf = nb;
            cap *= 2;
        }
        if (!buf && !(buf = malloc(cap))) goto nomem;
        r = in_read(&in, buf + len, cap - len);
        if (r < 0) {
            fio_error("%s: read error: %s", in.name, strerror(in.err));
            free(buf);
            in_close(&in);
            return -1;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    in_close(&in);
    *data = buf;
    *size = len;
    return 0;
nomem:
    fio_error("%s: out of memory", in.name);
    free(buf);
    in_close(&in);
    return -1;
}

/* ---- --rebase ---------------------------------------------------------------------- */
/* Restores a delta file with its base and writes it again stand-alone, at the level and
 * with the chunk size asked for; the output replaces the input only after it is complete
 * (-o writes elsewhere and keeps the input). */
static int rebase_one(ckpz_ctx *ctx, const fio_prefs *p, const char *src, fio_base *cache)
{
    const fio_base *base = NULL;
    void *packed = NULL, *orig = NULL;
    size_t packed_size = 0;
    uint64_t orig_size = 0;
    ckpz_params params;
    ckpz_base_info bi;
    ckpz_stats stats;
    fio_out out;
    fio_prefs wp = *p;
    struct stat st;
    const char *dst = p->out_name ? p->out_name : src;
    int rc = 1;

    if (!strcmp(src, "-") || stat(src, &st) != 0 || !S_ISREG(st.st_mode)) {
        fio_error("%s: --rebase needs a regular .ckpz file", src);
        return 1;
    }
    if (base_for(p, src, cache, &base) != 0 || fio_load_file(src, &packed, &packed_size) != 0) return 1;
    if (ckpz_base_info_read(ctx, packed, packed_size, &bi) != CKPZ_OK ||
        ckpz_original_size(ctx, packed, packed_size, &orig_size) != CKPZ_OK) {
        fio_error("%s: %s", src, ckpz_ctx_message(ctx));
        goto out;
    }
    if (!bi.needed && !p->out_name) {
        if (p->verbosity >= 2) fprintf(stderr, "%s : already stand-alone, left as it is\n", src);
        rc = 0;
        goto out;
    }
    if (orig_size > (uint64_t)SIZE_MAX / 2 || !(orig = malloc(orig_size ? (size_t)orig_size : 1))) {
        fio_error("%s: cannot hold its %llu restored bytes in memory", src, (unsigned long long)orig_size);
        goto out;
    }
    fio_params(p, &params);
    if (base) {
        params.base = base->data;
        params.base_size = base->size;
    }
    if (ckpz_decompress_buffer(ctx, &params, packed, packed_size, orig, (size_t)orig_size) != CKPZ_OK) {
        fio_error("%s: %s", src, ckpz_ctx_message(ctx));
        goto out;
    }
    fio_params(p, &params); /* stand-alone */
    if (!p->out_name) wp.force = 1; /* replacing the input is the point */
    if (out_open(&out, strcmp(dst, "-") ? dst : NULL, p->out_name ? &st : NULL, &wp, 1) != 0) {
        out_abort(&out);
        goto out;
    }
    memsrc m = {orig, (size_t)orig_size, 0};
    ckpz_error e = ckpz_compress_stream(ctx, &params, memsrc_read, &m, orig_size, out_write, &out, &stats);
    if (e != CKPZ_OK) {
        fio_error("%s: %s", src, ckpz_ctx_message(ctx));
        out_abort(&out);
        goto out;
    }
    if (out_commit(&out, &st, &wp, 0) != 0) goto out;
    if (p->verbosity >= 2)
        fprintf(stderr, "%s : stand-alone now (%s, %.3fx) -> %s\n", src,
                fio_human((char[32]){0}, 32, stats.compressed_bytes),
                stats.compressed_bytes ? (double)stats.original_bytes / (double)stats.compressed_bytes : 0.0,
                out.name);
    rc = 0;
out:
    free(orig);
    free(packed);
    return rc;
}

int fio_rebase_files(const fio_prefs *p, const char *const *files, int n)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    fio_base cache;
    int i, failed = 0;
    g_display = p->verbosity;
    memset(&cache, 0, sizeof(cache));
    if (!ctx) {
        fio_error("out of memory");
        return 1;
    }
    for (i = 0; i < n; i++)
        if (rebase_one(ctx, p, files[i], &cache) != 0) failed = 1;
    fio_base_free(&cache);
    ckpz_ctx_free(ctx);
    return failed;
}
