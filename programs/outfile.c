/* outfile.c — the command line's outputs, and the signals that clean up after them.
 *
 * The rules are zstd's: compressed data never goes to a terminal, an existing output (a
 * symbolic link too, dangling or not) is never overwritten without -f, and the input is
 * never the output. An output file is written as an anonymous O_TMPFILE file in its own
 * directory and linked under its name only once complete, so that neither a reader nor
 * a crash, SIGKILL included, ever leaves half a file behind; where the file system has
 * no O_TMPFILE it is written as .OUT.tmpXXXXXX instead, which SIGINT/SIGTERM/SIGHUP
 * remove (the handler knows its path). Without -f the final name is taken only in one
 * step that cannot replace (linkat, renameat2 RENAME_NOREPLACE), so a file that appears
 * meanwhile is never lost. Bytes go out in 4 MiB writes through the library's fd
 * adapter; a write that makes no progress, a failed fsync or close are errors that
 * discard the output. --rm's caller asks for a durable commit: the output and its name
 * are fsync'ed before the input may go.
 */
#define _GNU_SOURCE /* O_TMPFILE, linkat AT_EMPTY_PATH, renameat2 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
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
 * that is filled (by mkstemp itself) while the signals are blocked. */
static char g_tmp_path[PATH_MAX + 32];
static volatile sig_atomic_t g_tmp_active;

static void on_signal(int sig)
{
    if (g_tmp_active) unlink(g_tmp_path);
    if (fio_progress_shown) {
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

/* ---- output ----------------------------------------------------------------------- */
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

static int out_flush(fio_out *o)
{
    if (o->len == 0) return 0;
    if (put(o, o->buf, o->len, -1) != 0) return -1;
    o->len = 0;
    return 0;
}

int fio_out_write(void *opaque, const void *src, size_t n)
{
    fio_out *o = opaque;
    if (o->err) return -1;
    o->bytes += n;
    if (o->len + n > FIO_BUF_SIZE && out_flush(o) != 0) return -1;
    if (n >= FIO_BUF_SIZE) return put(o, src, n, -1);
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
    o->io.fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (o->io.fd >= 0) {
        char proc[64];
        /* without /proc an unprivileged process may not be able to link it (link_anon) */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", o->io.fd);
        if (access(proc, F_OK) == 0) {
            o->temp = o->anon = 1;
            return 0;
        }
        close(o->io.fd);
        o->io.fd = -1;
    } else if (errno == ENOENT || errno == ENOTDIR) {
        create_error(name, dir, errno);
        return -1;
    } /* else EOPNOTSUPP, EISDIR (a kernel without O_TMPFILE), ...: a named file */
#endif
    block_signals(&old);
    tmp_name(name, 0);
    o->io.fd = mkstemp(g_tmp_path);
    e = errno;
    if (o->io.fd >= 0) g_tmp_active = 1;
    restore_signals(&old);
    if (o->io.fd < 0) {
        create_error(name, dir, e);
        return -1;
    }
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
    o->buf = malloc(FIO_BUF_SIZE);
    if (!o->buf) {
        fio_error("%s: out of memory", o->name);
        return -1; /* caller calls fio_out_abort */
    }
    return 0;
}

void fio_out_abort(fio_out *o)
{
    if (o->temp) {
        sigset_t old;
        if (o->io.fd >= 0) close(o->io.fd);
        block_signals(&old);
        if (g_tmp_active) unlink(g_tmp_path);
        g_tmp_active = 0;
        restore_signals(&old);
    } else if (!o->is_stdout && o->io.fd >= 0) {
        close(o->io.fd);
    }
    o->io.fd = -1;
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
        if (link_anon(o->io.fd, o->name) == 0) return 0;
        e = errno;
        if (e != EEXIST || !p->force) goto fail;
        /* -f over an existing file: a name of its own first, renamed over the old one
         * (a SIGKILL between the two is all that can leave that name behind) */
        for (int tries = 0;; tries++) {
            block_signals(&old);
            tmp_name(o->name, 1);
            rc = link_anon(o->io.fd, g_tmp_path);
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

int fio_out_commit(fio_out *o, const struct stat *in_st, const fio_prefs *p, int durable)
{
    if (out_flush(o) != 0) {
        fio_error("%s: write error: %s", o->name, fio_io_strerror(o->err));
        fio_out_abort(o);
        return -1;
    }
    if (o->temp) {
        int e = 0;
        fchmod(o->io.fd, in_st ? (in_st->st_mode & 07777 & ~(mode_t)06000) : default_mode());
        if (in_st) {
            struct timespec ts[2];
            ts[0] = in_st->st_atim;
            ts[1] = in_st->st_mtim;
            futimens(o->io.fd, ts);
        }
        /* fsync only when the input is about to be deleted (--rm): like zstd and gzip,
         * a plain run leaves flushing to the kernel rather than wait for the disk */
        if (durable && fsync(o->io.fd) != 0) {
            e = errno;
        } else if (o->anon) {
            /* close() is where some file systems (NFS) report a failed write-back; the
             * file needs its descriptor until it is linked, so a duplicate is closed */
            int d = dup(o->io.fd);
            if (d < 0 || close(d) != 0) e = errno;
        } else {
            int r = close(o->io.fd);
            o->io.fd = -1;
            if (r != 0) e = errno;
        }
        if (e) {
            fio_error("%s: write error: %s", o->name, strerror(e));
            fio_out_abort(o);
            return -1;
        }
        if (publish(o, p) != 0) {
            fio_out_abort(o);
            return -1;
        }
        if (o->anon) {
            int r = close(o->io.fd);
            o->io.fd = -1;
            if (r != 0) { /* in place, but not known to be written */
                e = errno;
                unlink(o->name);
                fio_error("%s: write error: %s", o->name, strerror(e));
                fio_out_abort(o);
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
        if (close(o->io.fd) != 0) {
            fio_error("%s: write error: %s", o->name, strerror(errno));
            o->io.fd = -1;
            free(o->buf);
            o->buf = NULL;
            return -1;
        }
        o->io.fd = -1;
    }
    free(o->buf);
    o->buf = NULL;
    return 0;
}


void fio_out_sink(fio_out *o, ckpz_sink *dst)
{
    ckpz_sink_init(dst);
    dst->write = fio_out_write;
    dst->patch = o->temp ? out_patch : NULL; /* a file of its own, written from its start */
    dst->opaque = o;
}

void fio_report(ckpz_ctx *ctx, ckpz_error e, const fio_in *in, const fio_out *out)
{
    const char *msg = ckpz_ctx_message(ctx);
    if (in && in->err) fio_error("%s: read error: %s", in->name, strerror(in->err));
    else if (out && out->err) fio_error("%s: write error: %s", out->name, fio_io_strerror(out->err));
    else if (e == CKPZ_ERR_BASE && in && msg && *msg)
        fio_error("%s: %s; %s", in->name, msg,
                  !strncmp(msg, "wrong base", 10) ? "name the right one with --base"
                  : in->is_stdin              ? "name the base with --base"
                                              : "it is not beside the file: name it with --base");
    else fio_error("%s: %s", in ? in->name : "?", msg && *msg ? msg : ckpz_error_name(e));
}
