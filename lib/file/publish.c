/* publish.c — how every front end puts an output in place (ckpz_publish_*, include/ckpz.h).
 *
 * An output (a file, or a directory of files) is written under a temporary name beside
 * its final name and renamed into place only once complete, so that neither a reader nor
 * a failure ever sees half of it under the final name. The CLI, the Python package and
 * libckpz_mpi all go through here, so there is one temporary-name pattern, one set of
 * messages and one rule for what a dead writer left:
 *
 *     .NAME.ckpz-PID-HOST-RANDOM.tmp     (a file or a directory)
 *
 * NAME is the final name (its first 200 bytes, so that the whole fits NAME_MAX), PID the
 * writer's process id in decimal, HOST 8 hex digits hashing the writer's host name, RANDOM
 * 8 hex digits. Hidden (a leading dot), it is never taken for an output: `ckpz -r` skips
 * it (ckpz_publish_is_temp). A file may instead be anonymous (O_TMPFILE, where the file
 * system has it and the caller asks): it has no name until it is linked under the final
 * one, so even SIGKILL leaves nothing.
 *
 * The writer holds an flock on its temporary file or directory for as long as it exists.
 * A writer killed outright (SIGKILL, a crash, the machine going down) leaves it, and the
 * next publish of the same final name removes it (ckpz_publish_sweep), but only when all
 * of these hold, so that a live writer's is never touched:
 *   - its name is this pattern for this NAME (any other file is never looked at),
 *   - HOST is this host's: a pid means nothing on another machine sharing the directory,
 *     so those are left alone (whatever their age),
 *   - PID is no live process here (kill(PID, 0) fails with ESRCH); a reused PID keeps the
 *     leftover until that process ends too, which errs on the side of keeping,
 *   - it is a regular file or a directory (not a link) owned by this user,
 *   - and nobody holds its lock: a writer in another pid namespace of this kernel (a
 *     container with the same host name) whose PID means nothing here holds it while it
 *     lives; the kernel drops it however the writer dies.
 * Age is never used: a writer may be suspended for minutes. A name taken from a writer
 * that had not locked it yet is seen by that writer (its name no longer leads to its
 * file), which then makes another.
 *
 * Without CKPZ_PUBLISH_REPLACE the final name is taken only in one step that cannot
 * replace (renameat2 RENAME_NOREPLACE, else link and unlink, or linkat for an anonymous
 * file), so a file that appears meanwhile is never lost. Every failure removes the
 * temporary output before returning and leaves errno as the system set it.
 */
#define _GNU_SOURCE /* O_TMPFILE, linkat AT_EMPTY_PATH, renameat2 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/ctx.h"
#include "file/release.h"

#define BASE_MAX 200 /* bytes of the final name kept in the temporary one */
#define TAG ".ckpz-"
#define SUFFIX ".tmp"

struct ckpz_publish {
    int fd;         /* the file, or the directory (held for its lock) */
    unsigned flags;
    int anon;       /* an O_TMPFILE file: temp is "" until a -f commit names it */
    char *name;     /* the final name */
    char temp[PATH_MAX];
};

static uint32_t host_hash(void)
{
    char host[256] = "";
    uint32_t h = 2166136261u; /* FNV-1a */
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    for (const unsigned char *p = (const unsigned char *)host; *p; p++) h = (h ^ *p) * 16777619u;
    return h;
}

static uint32_t random32(void)
{
    static uint64_t state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = __atomic_add_fetch(&state, 0x9e3779b97f4a7c15u, __ATOMIC_RELAXED);
    s ^= (uint64_t)ts.tv_nsec * 0xbf58476d1ce4e5b9u ^ (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_sec;
    s ^= s >> 31, s *= 0x94d049bb133111ebu, s ^= s >> 29; /* splitmix64 finaliser */
    return (uint32_t)s;
}

/* The directory part of name ("." when it has none) into dir, and where the base starts. */
static int split_name(const char *name, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(name, '/');
    size_t n = !slash ? 1 : slash == name ? 1 : (size_t)(slash - name);
    if (n >= cap) return -1;
    memcpy(dir, slash ? name : ".", n);
    dir[n] = '\0';
    *base = slash ? slash + 1 : name;
    return 0;
}

/* dst = DIR/.BASE.ckpz-PID-HOST-RANDOM.tmp for final name `name`; -1 when too long. */
static int temp_name(const char *name, char *dst, size_t cap)
{
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    size_t blen = strlen(base);
    int n = snprintf(dst, cap, "%.*s.%.*s" TAG "%ld-%08x-%08x" SUFFIX, (int)(base - name), name,
                     (int)(blen > BASE_MAX ? BASE_MAX : blen), base, (long)getpid(), host_hash(), random32());
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Parses the tail after ".BASE.ckpz-": PID-HOST-RANDOM.tmp; 0 and pid, host, or -1. */
static int parse_tail(const char *s, long *pid, uint32_t *host)
{
    char *end;
    if (*s < '1' || *s > '9') return -1;
    errno = 0;
    long p = strtol(s, &end, 10);
    if (errno || end - s > 10 || *end != '-') return -1;
    s = end + 1;
    for (int field = 0; field < 2; field++) {
        for (int i = 0; i < 8; i++)
            if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return -1;
        if (field == 0) *host = (uint32_t)strtoul(s, NULL, 16);
        if (s[8] != (field == 0 ? '-' : '.')) return -1;
        s += 9;
    }
    if (strcmp(s, &SUFFIX[1]) != 0) return -1;
    *pid = p;
    return 0;
}

/* A file another library made beside a temporary output, named after it: the tail
 * PID-HOST-RANDOM.tmp.MORE (MPI-IO's TEMP.locktest.N, which Open MPI leaves when a rank
 * is killed while it opens the file). 0 and pid, host, or -1. */
static int companion_of(const char *s, long *pid, uint32_t *host)
{
    const char *t = strstr(s, SUFFIX ".");
    char tail[64];
    size_t n = t ? (size_t)(t - s) + strlen(SUFFIX) : 0;
    if (!t || n >= sizeof tail || !t[strlen(SUFFIX) + 1]) return -1;
    memcpy(tail, s, n);
    tail[n] = 0;
    return parse_tail(tail, pid, host);
}

int ckpz_publish_is_temp(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *s = slash ? slash + 1 : path;
    long pid;
    uint32_t host;
    if (!s || s[0] != '.') return 0;
    /* the last ".ckpz-" whose tail parses: NAME itself may hold one */
    for (const char *t = strstr(s + 1, TAG); t; t = strstr(t + 1, TAG))
        if (t > s + 1 && parse_tail(t + strlen(TAG), &pid, &host) == 0) return 1;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT ? -1 : 0;
}

/* Removes path, a file or a directory with everything in it (links are not followed). */
static int remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return unlink(path);
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int ckpz_publish_sweep(const char *name)
{
    char dir[PATH_MAX], prefix[BASE_MAX + 16], path[PATH_MAX];
    const char *base;
    int removed = 0, e = errno;
    if (!name || split_name(name, dir, sizeof dir, &base) != 0 || !*base) return 0;
    snprintf(prefix, sizeof prefix, ".%.*s" TAG, BASE_MAX, base);
    size_t plen = strlen(prefix);
    uint32_t me = host_hash();
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid;
        uint32_t host;
        struct stat st, fst;
        if (strncmp(de->d_name, prefix, plen) != 0) continue;
        int companion = parse_tail(de->d_name + plen, &pid, &host) != 0;
        if (companion && companion_of(de->d_name + plen, &pid, &host) != 0) continue;
        if (host != me || pid > INT_MAX || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path) continue;
        if (companion) { /* another library's file beside a dead writer's temporary: no lock of ours */
            if (lstat(path, &st) == 0 && st.st_uid == geteuid() && S_ISREG(st.st_mode) && unlink(path) == 0) removed++;
            continue;
        }
        if (lstat(path, &st) != 0 || st.st_uid != geteuid() || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) continue;
        /* writable: an flock on NFS is a write lock */
        int fd = open(path, (S_ISDIR(st.st_mode) ? O_RDONLY | O_DIRECTORY : O_WRONLY | O_NONBLOCK) | O_NOFOLLOW |
                                O_NOCTTY | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &fst) == 0 && fst.st_dev == st.st_dev &&
            fst.st_ino == st.st_ino && remove_tree(path) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    errno = e;
    return removed;
}

/* Why name could not be created in its directory dir (errno e): the name asked for, not
 * the temporary one, and what is wrong with the directory. */
static ckpz_error create_error(ckpz_ctx *ctx, const char *name, const char *dir, int e)
{
    errno = e;
    if (e == ENOENT)
        return ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: cannot create it: directory '%s' does not exist", name, dir);
    if (e == ENOTDIR) return ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: cannot create it: '%s' is not a directory", name, dir);
    return ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: cannot create it: %s", name, strerror(e));
}

/* A named temporary file or directory, locked; -1 with errno. */
static int create_named(ckpz_publish *p)
{
    int dir = p->flags & CKPZ_PUBLISH_DIRECTORY;
    for (int tries = 0; tries < 100; tries++) {
        struct stat a, b;
        if (temp_name(p->name, p->temp, sizeof p->temp) != 0) return errno = ENAMETOOLONG, -1;
        if (dir) {
            if (mkdir(p->temp, 0777) != 0) {
                if (errno == EEXIST) continue;
                return -1;
            }
            p->fd = open(p->temp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (p->fd < 0) {
                int e = errno;
                rmdir(p->temp);
                return errno = e, -1;
            }
        } else {
            p->fd = open(p->temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (p->fd < 0) {
                if (errno == EEXIST) continue;
                return -1;
            }
        }
        /* EWOULDBLOCK: held by a remover that took it for a dead writer's; other errors:
         * no locks on this file system, and the pid rule alone decides */
        int locked = flock(p->fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK;
        if (locked && fstat(p->fd, &a) == 0 && lstat(p->temp, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return 0;
        close(p->fd); /* removed before it was locked: another name */
        p->fd = -1;
    }
    return errno = EEXIST, -1;
}

ckpz_error ckpz_publish_open(ckpz_ctx *ctx, const char *name, unsigned flags, ckpz_publish **out)
{
    char dir[PATH_MAX];
    const char *base;
    if (ctx) ctx_clear(ctx);
    if (!out || !name || !*name) return errno = EINVAL, ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_publish_open: no name");
    *out = NULL;
    if (split_name(name, dir, sizeof dir, &base) != 0 || !*base || strlen(name) + 64 > PATH_MAX)
        return errno = ENAMETOOLONG, ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: file name too long", name);
    ckpz_publish *p = calloc(1, sizeof *p);
    if (!p || !(p->name = strdup(name))) {
        free(p);
        return errno = ENOMEM, ctx_fail(ctx, CKPZ_ERR_NOMEM, "%s: out of memory", name);
    }
    p->flags = flags;
    p->fd = -1;
    ckpz_publish_sweep(name);
#ifdef O_TMPFILE
    if ((flags & CKPZ_PUBLISH_ANONYMOUS) && !(flags & CKPZ_PUBLISH_DIRECTORY)) {
        p->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (p->fd >= 0) {
            char proc[64];
            /* without /proc an unprivileged process may not be able to link it (link_anon) */
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", p->fd);
            if (access(proc, F_OK) == 0) {
                p->anon = 1;
                *out = p;
                return CKPZ_OK;
            }
            close(p->fd);
            p->fd = -1;
        } else if (errno == ENOENT || errno == ENOTDIR) {
            int e = errno;
            ckpz_publish_abort(p);
            return create_error(ctx, name, dir, e);
        } /* else EOPNOTSUPP, EISDIR (a kernel without O_TMPFILE), ...: a named file */
    }
#endif
    if (create_named(p) != 0) {
        int e = errno;
        p->temp[0] = '\0';
        ckpz_publish_abort(p);
        return create_error(ctx, name, dir, e);
    }
    *out = p;
    return CKPZ_OK;
}

int ckpz_publish_fd(const ckpz_publish *p) { return p && !(p->flags & CKPZ_PUBLISH_DIRECTORY) ? p->fd : -1; }

const char *ckpz_publish_temp(const ckpz_publish *p) { return p ? p->temp : ""; }

void ckpz_publish_abort(ckpz_publish *p)
{
    if (!p) return;
    int e = errno;
    if (p->temp[0]) remove_tree(p->temp); /* before closing: the lock keeps it ours */
    if (p->fd >= 0) close(p->fd);
    free(p->name);
    free(p);
    errno = e;
}

/* Gives the anonymous file fd the name `to`; EEXIST when the name exists (linkat never
 * replaces). AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH on older kernels; the link in
 * /proc/self/fd is open to any process (open(2)). */
static int link_anon(int fd, const char *to)
{
    char proc[64];
    if (linkat(fd, "", AT_FDCWD, to, AT_EMPTY_PATH) == 0) return 0;
    if (errno != ENOENT && errno != EPERM && errno != EINVAL) return -1;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW);
}

/* temp -> name in one step that cannot replace; EEXIST when name exists. */
static int rename_noreplace(const char *temp, const char *name, int dir)
{
    struct stat st;
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, temp, AT_FDCWD, name, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return -1;
#endif
    if (!dir) { /* link never replaces */
        if (link(temp, name) != 0) return -1;
        unlink(temp);
        return 0;
    }
    if (lstat(name, &st) == 0) return errno = EEXIST, -1; /* a directory has no link */
    return rename(temp, name);
}

/* A directory over an existing one: exchanged in one step where the system can, the old
 * one then removed under the temporary name; else moved aside under a name of ours. */
static int replace_dir(ckpz_publish *p)
{
    char old[PATH_MAX];
    struct stat st;
    if (lstat(p->name, &st) != 0 || !S_ISDIR(st.st_mode)) return rename(p->temp, p->name);
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, p->temp, AT_FDCWD, p->name, RENAME_EXCHANGE) == 0) {
        remove_tree(p->temp);
        return 0;
    }
#endif
    if (temp_name(p->name, old, sizeof old) != 0 || rename(p->name, old) != 0) return -1;
    if (rename(p->temp, p->name) != 0) {
        int e = errno;
        rename(old, p->name);
        return errno = e, -1;
    }
    remove_tree(old);
    return 0;
}

static int fsync_dir_of(const char *name)
{
    char dir[PATH_MAX];
    const char *base;
    if (split_name(name, dir, sizeof dir, &base) != 0) return errno = ENAMETOOLONG, -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    int e = errno;
    close(fd);
    return errno = e, r;
}

/* Puts the finished output under p->name; on failure the temporary one is left to
 * the caller (abort). */
static int put_in_place(ckpz_publish *p)
{
    int replace = p->flags & CKPZ_PUBLISH_REPLACE, old;
    if (p->anon) {
        if (link_anon(p->fd, p->name) == 0) return 0;
        if (errno != EEXIST || !replace) return -1;
        /* over an existing file: a name of its own first, renamed over the old one (a
         * SIGKILL between the two leaves that name, which the next publish removes) */
        for (int tries = 0;; tries++) {
            if (temp_name(p->name, p->temp, sizeof p->temp) != 0) return p->temp[0] = '\0', -1;
            if (link_anon(p->fd, p->temp) == 0) break;
            p->temp[0] = '\0';
            if (errno != EEXIST || tries >= 100) return -1;
        }
    } else if (p->flags & CKPZ_PUBLISH_DIRECTORY) {
        if (replace ? replace_dir(p) != 0 : rename_noreplace(p->temp, p->name, 1) != 0) return -1;
        p->temp[0] = '\0';
        return 0;
    } else if (!replace) {
        if (rename_noreplace(p->temp, p->name, 0) != 0) return -1;
        p->temp[0] = '\0';
        return 0;
    }
    old = release_hold(p->name); /* the replaced file is freed off this thread */
    if (rename(p->temp, p->name) != 0) {
        int e = errno;
        if (old >= 0) close(old);
        return errno = e, -1;
    }
    release_later(old);
    p->temp[0] = '\0';
    return 0;
}

ckpz_error ckpz_publish_commit(ckpz_ctx *ctx, ckpz_publish *p, unsigned flags)
{
    int durable, e;
    ckpz_error rc = CKPZ_OK;
    if (ctx) ctx_clear(ctx);
    if (!p) return errno = EINVAL, ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_publish_commit: nothing open");
    p->flags |= flags & (CKPZ_PUBLISH_REPLACE | CKPZ_PUBLISH_DURABLE);
    durable = (p->flags & CKPZ_PUBLISH_DURABLE) != 0;
    if (durable && fsync(p->fd) != 0) goto write_error;
    if (p->anon || (p->flags & CKPZ_PUBLISH_DIRECTORY)) {
        /* close() is where some file systems (NFS) report a failed write-back; the file
         * needs its descriptor until it is linked, so a duplicate is closed */
        int d = dup(p->fd);
        if (d < 0 || close(d) != 0) goto write_error;
    } else {
        int r = close(p->fd); /* the lock goes: the name still says a live writer's */
        p->fd = -1;
        if (r != 0) goto write_error;
    }
    if (put_in_place(p) != 0) {
        e = errno;
        rc = e == EEXIST
                 ? ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: appeared while writing; not overwritten", p->name)
                 : ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: cannot put the output in place: %s", p->name, strerror(e));
        ckpz_publish_abort(p);
        return errno = e, rc;
    }
    if (p->fd >= 0) {
        int r = close(p->fd);
        p->fd = -1;
        if (r != 0 && p->anon) { /* in place, but not known to be written */
            e = errno;
            unlink(p->name);
            errno = e;
            goto write_error;
        }
    }
    if (durable && fsync_dir_of(p->name) != 0) {
        e = errno;
        rc = ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: cannot sync its directory: %s", p->name, strerror(e));
        ckpz_publish_abort(p);
        return errno = e, rc;
    }
    ckpz_publish_abort(p); /* nothing left to remove: frees */
    errno = 0;
    return CKPZ_OK;
write_error:
    e = errno;
    rc = ctx_fail(ctx, CKPZ_ERR_WRITE, "%s: write error: %s", p->name, strerror(e));
    ckpz_publish_abort(p);
    return errno = e, rc;
}
