/* chain.c — the files a delta file is restored through (ckpz_chain, include/ckpz.h): its
 * base, that base's base, and so on down to a stand-alone file or an original
 * checkpoint.
 *
 * Every front end that restores a delta file by its path follows the same policy, so it
 * lives here once: a base is found by the name the file recorded, as a plain file name
 * beside the file (the name, else the name plus ".ckpz"); a recorded name with a '/', or
 * "." or "..", is never followed, since it is data from the file and must not reach
 * elsewhere; two names are the same file when device and inode match (paths lie:
 * links, bind mounts, "a/../b"); a chain that comes back to a file is a cycle; a chain
 * has at most CKPZ_CHAIN_MAX delta files. Walking reads each file's first
 * CKPZ_BASE_PROBE bytes only, and restores nothing: how the bytes are held (mapped,
 * read, decoded into whose memory) is the caller's. A base found is still checked by
 * content (size and CRC-32C) when it is used, so a wrong file is refused, never trusted
 * by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ctx.h"

#define SUFFIX ".ckpz"

typedef struct chain_link {
    char *path;
    int ckpz;             /* 0: an original checkpoint */
    /* what a .ckpz needs: ckpz_base_info's fields, its name malloc'd (a whole
     * ckpz_base_info a link would take 4 KB) */
    int needed;
    uint64_t size;
    uint32_t checksum, depth;
    char *name;
    dev_t dev;
    ino_t ino;
} chain_link;

struct ckpz_chain {
    chain_link *v;
    size_t n, cap;
    char *message; /* why the walk stopped short, or NULL */
};

char *ckpz_base_locate(const char *referrer, const char *recorded)
{
    const char *slash = strrchr(referrer, '/');
    size_t dirlen = slash ? (size_t)(slash - referrer) + 1 : 0, n = strlen(recorded);
    char *path;
    struct stat st;
    if (!n || strchr(recorded, '/') || !strcmp(recorded, ".") || !strcmp(recorded, "..")) return NULL;
    if (!(path = malloc(dirlen + n + sizeof(SUFFIX)))) return NULL;
    memcpy(path, referrer, dirlen);
    memcpy(path + dirlen, recorded, n + 1);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return path;
    memcpy(path + dirlen + n, SUFFIX, sizeof(SUFFIX)); /* its compressed form */
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return path;
    free(path);
    return NULL;
}

int ckpz_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void ckpz_chain_free(ckpz_chain *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].path);
        free(c->v[i].name);
    }
    free(c->v);
    free(c->message);
    free(c);
}

size_t ckpz_chain_length(const ckpz_chain *c) { return c ? c->n : 0; }

const char *ckpz_chain_path(const ckpz_chain *c, size_t i) { return c && i < c->n ? c->v[i].path : NULL; }

int ckpz_chain_link(const ckpz_chain *c, size_t i, ckpz_base_info *info)
{
    if (!c || i >= c->n) return -1;
    const chain_link *l = &c->v[i];
    if (info) {
        if (OUT_CHECK(NULL, info, "ckpz_base_info")) return -1;
        ckpz_base_info mine = {sizeof mine, l->needed, l->size, l->checksum, l->depth, ""};
        snprintf(mine.name, sizeof mine.name, "%s", l->name ? l->name : "");
        OUT_GIVE(info, &mine);
    }
    return l->ckpz;
}

size_t ckpz_chain_message(const ckpz_chain *c, char *buf, size_t cap)
{
    const char *m = c && c->message ? c->message : "";
    if (cap) snprintf(buf, cap, "%s", m);
    return strlen(m);
}

/* The walk stops: message (printf format) kept whole in c and given to ctx, as far as
 * the context holds it. */
static ckpz_error stop(ckpz_ctx *ctx, ckpz_chain *c, ckpz_error code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ckpz_error stop(ckpz_ctx *ctx, ckpz_chain *c, ckpz_error code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    free(c->message);
    c->message = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!c->message) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    va_start(ap, fmt);
    vsnprintf(c->message, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return ctx_fail(ctx, code, "%s", c->message);
}

/* Reads up to cap bytes from the start of fd; what it read before an error is what
 * there is (a directory reads nothing and is no .ckpz). */
static size_t read_head(int fd, unsigned char *head, size_t cap)
{
    ckpz_fd f = {fd, 0, 0};
    size_t got = 0;
    while (got < cap) {
        ptrdiff_t r = ckpz_fd_read(&f, head + got, cap - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

/* Opens path, the chain's next link: its identity and what it needs. *path is taken. */
static ckpz_error add(ckpz_ctx *ctx, ckpz_chain *c, char *path, unsigned char *head)
{
    struct stat st;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        chain_link *v = realloc(c->v, cap * sizeof *v);
        if (!v) {
            free(path);
            return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        }
        c->v = v;
        c->cap = cap;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        ckpz_error err = stop(ctx, c, CKPZ_ERR_READ, "%s: %s", path, strerror(e));
        free(path);
        return err;
    }
    size_t n = read_head(fd, head, CKPZ_BASE_PROBE);
    close(fd);
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].dev == st.st_dev && c->v[i].ino == st.st_ino) {
            ckpz_error err = stop(ctx, c, CKPZ_ERR_BASE,
                                  "%s: the chain of delta files comes back to this file (a cycle)", path);
            free(path);
            return err;
        }
    chain_link *l = &c->v[c->n];
    memset(l, 0, sizeof *l);
    l->path = path;
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    ckpz_ctx scratch;
    ckpz_base_info info = {.struct_size = sizeof info};
    memset(&scratch, 0, sizeof scratch);
    ckpz_error err = ckpz_base_info_read(&scratch, head, n, &info);
    if (err == CKPZ_ERR_NOT_CKPZ) { /* an original checkpoint: the bottom */
        c->n++;
        return CKPZ_OK;
    }
    if (err) {
        err = stop(ctx, c, err, "%s: %s", path, scratch.msg);
        free(path);
        return err;
    }
    if (!(l->name = strdup(info.name))) {
        free(path);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    l->ckpz = 1;
    l->needed = info.needed;
    l->size = info.size;
    l->checksum = info.checksum;
    l->depth = info.depth;
    c->n++;
    return CKPZ_OK;
}

ckpz_error ckpz_chain_open(ckpz_ctx *ctx, const char *path, ckpz_chain **out)
{
    ctx_clear(ctx);
    *out = NULL;
    if (!path) return ctx_fail(ctx, CKPZ_ERR_PARAM, "NULL path");
    ckpz_chain *c = calloc(1, sizeof *c);
    unsigned char *head = malloc(CKPZ_BASE_PROBE);
    char *p = strdup(path);
    ckpz_error err = CKPZ_OK;
    if (!c || !head || !p) {
        free(c);
        free(head);
        free(p);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    *out = c;
    for (err = add(ctx, c, p, head); !err; err = add(ctx, c, p, head)) {
        const chain_link *l = &c->v[c->n - 1];
        if (!l->ckpz || !l->needed) break; /* the bottom */
        p = ckpz_base_locate(l->path, l->name);
        if (c->n > CKPZ_CHAIN_MAX) {
            free(p);
            err = stop(ctx, c, CKPZ_ERR_BASE, "%s: chain of delta files longer than %d", l->path, CKPZ_CHAIN_MAX);
            break;
        }
        if (!p) {
            err = stop(ctx, c, CKPZ_ERR_BASE,
                       "%s: is a delta file whose base (%llu bytes, CRC-32C %08x%s%s%s) is not beside it; "
                       "restore it first or rebase it",
                       l->path, (unsigned long long)l->size, (unsigned)l->checksum, l->name[0] ? ", '" : "", l->name,
                       l->name[0] ? "'" : "");
            break;
        }
    }
    free(head);
    if (err == CKPZ_ERR_NOMEM) {
        ckpz_chain_free(c);
        *out = NULL;
    }
    return err;
}
