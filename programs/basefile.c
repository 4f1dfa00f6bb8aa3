/* basefile.c — the base checkpoint of a delta file, held in memory for the library.
 *
 * A base is whatever the user names with --base: an original checkpoint (mapped, not
 * copied) or a .ckpz, which is restored first — itself through its own base when it is
 * a delta, found by the name it recorded, beside it. Every restore checks checksums, so
 * a wrong file is refused by content, never trusted by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basefile.h"
#include "display.h"
#include "fileio.h"

#define MAX_CHAIN 1000 /* delta files restored one through another, at most */

/* The files being restored, innermost last: a chain that comes back to one is a cycle. */
typedef struct visit {
    dev_t dev;
    ino_t ino;
    const struct visit *up;
} visit;

void fio_base_free(fio_base *b)
{
    if (b->data) {
        if (b->mapped) munmap(b->data, b->size);
        else free(b->data);
    }
    free(b->path);
    memset(b, 0, sizeof(*b));
}

const char *fio_base_record_name(const fio_base *b)
{
    const char *slash = strrchr(b->path, '/');
    return slash ? slash + 1 : b->path;
}

/* The file a delta file's recorded base name refers to: the name, or the name plus
 * .ckpz, beside `referrer`; malloc'd, or NULL when there is none. */
static char *base_locate(const char *referrer, const char *recorded)
{
    const char *slash = strrchr(referrer, '/');
    size_t dirlen = slash ? (size_t)(slash - referrer) + 1 : 0, n = strlen(recorded);
    char *path;
    struct stat st;
    /* only a plain file name beside the referring file: a recorded name is data from
     * the file and must not reach elsewhere */
    if (!n || strchr(recorded, '/') || !strcmp(recorded, ".") || !strcmp(recorded, "..")) return NULL;
    if (!(path = malloc(dirlen + n + sizeof(FIO_SUFFIX)))) return NULL;
    memcpy(path, referrer, dirlen);
    memcpy(path + dirlen, recorded, n + 1);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return path;
    memcpy(path + dirlen + n, FIO_SUFFIX, sizeof(FIO_SUFFIX)); /* its compressed form */
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return path;
    free(path);
    return NULL;
}

/* Maps a regular file read-only (an empty file gets no mapping). */
static int map_file(const char *path, fio_base *b)
{
    struct stat st;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fio_error("%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fio_error("%s: a base must be a regular file", path);
        close(fd);
        return -1;
    }
    b->size = (size_t)st.st_size;
    if (!b->size && !(b->data = malloc(1))) { /* an empty base is still a base */
        fio_error("%s: out of memory", path);
        close(fd);
        return -1;
    }
    if (b->size) {
        void *m = mmap(NULL, b->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            fio_error("%s: cannot map: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        madvise(m, b->size, MADV_SEQUENTIAL);
        b->data = m;
        b->mapped = 1;
    }
    close(fd);
    return 0;
}

static int load(const fio_prefs *p, const char *path, fio_base *b, int level, const visit *up)
{
    unsigned char *head = NULL; /* on the heap: chains recurse */
    size_t hlen = 0;
    ckpz_base_info info;
    ckpz_ctx *ctx = NULL;
    fio_base parent;
    void *packed = NULL;
    size_t packed_size = 0;
    uint64_t orig = 0;
    int rc = -1;

    memset(b, 0, sizeof(*b));
    memset(&parent, 0, sizeof(parent));
    if (!(b->path = strdup(path))) {
        fio_error("%s: out of memory", path);
        return -1;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !(head = malloc(CKPZ_BASE_PROBE)) ||
        fio_read_head(path, head, CKPZ_BASE_PROBE, &hlen) != 0) {
        fio_error("%s: %s", path, strerror(errno));
        goto fail;
    }
    for (const visit *v = up; v; v = v->up)
        if (v->dev == st.st_dev && v->ino == st.st_ino) {
            fio_error("%s: the chain of delta files comes back to this file (a cycle)", path);
            goto fail;
        }
    visit here = {st.st_dev, st.st_ino, up};
    if (!(ctx = ckpz_ctx_create())) {
        fio_error("%s: out of memory", path);
        goto fail;
    }
    ckpz_error e = ckpz_base_info_read(ctx, head, hlen, &info);
    if (e == CKPZ_ERR_NOT_CKPZ) { /* an original checkpoint */
        if (map_file(path, b) != 0) goto fail;
        rc = 0;
        goto out;
    }
    if (e != CKPZ_OK) {
        fio_error("%s: %s", path, ckpz_ctx_message(ctx));
        goto fail;
    }
    if (info.needed) { /* a delta file itself: restore its base first */
        char *pp = base_locate(path, info.name);
        if (level >= MAX_CHAIN) {
            fio_error("%s: chain of delta files longer than %d", path, MAX_CHAIN);
            free(pp);
            goto fail;
        }
        if (!pp) {
            fio_error("%s: is a delta file whose base (%llu bytes, CRC-32C %08x%s%s%s) is not beside it; "
                      "restore it first or rebase it",
                      path, (unsigned long long)info.size, (unsigned)info.checksum, info.name[0] ? ", '" : "",
                      info.name, info.name[0] ? "'" : "");
            goto fail;
        }
        int r = load(p, pp, &parent, level + 1, &here);
        free(pp);
        if (r != 0) goto fail;
        b->depth = info.depth;
    }
    if (fio_load_file(path, &packed, &packed_size) != 0) goto fail;
    if (ckpz_original_size(ctx, packed, packed_size, &orig) != CKPZ_OK) {
        fio_error("%s: %s", path, ckpz_ctx_message(ctx));
        goto fail;
    }
    if (orig > (uint64_t)SIZE_MAX / 2 || !(b->data = malloc(orig ? (size_t)orig : 1))) {
        fio_error("%s: cannot hold its %llu restored bytes in memory", path, (unsigned long long)orig);
        goto fail;
    }
    b->size = (size_t)orig;
    {
        ckpz_params params;
        fio_params(p, &params);
        params.base = parent.data;
        params.base_size = parent.size;
        if (ckpz_decompress_buffer(ctx, &params, packed, packed_size, b->data, b->size) != CKPZ_OK) {
            fio_error("%s: %s", path, ckpz_ctx_message(ctx));
            goto fail;
        }
    }
    rc = 0;
    goto out;
fail:
    fio_base_free(b);
out:
    fio_base_free(&parent);
    free(head);
    free(packed);
    ckpz_ctx_free(ctx);
    return rc;
}

int fio_base_load(const fio_prefs *p, const char *path, fio_base *b) { return load(p, path, b, 0, NULL); }

int fio_base_for(const fio_prefs *p, const char *src, fio_base *cache, const fio_base **out)
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
        path = p->base_path ? strdup(p->base_path) : base_locate(src, info.name);
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
