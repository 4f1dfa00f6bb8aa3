/* basefile.c — the base checkpoint of a delta file, held in memory for the library.
 *
 * A base is whatever the user names with --base: an original checkpoint (mapped, not
 * copied) or a .ckpz, which is restored first — itself through its own base when it is
 * a delta, found by the name it recorded, beside it. Which files make that chain (the
 * names followed, the identity test, cycles, the chain limit) is the library's policy
 * (ckpz_chain_open), shared with every other front end; this file holds the bytes.
 * Every restore checks checksums, so a wrong file is refused by content, never trusted
 * by name.
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

void fio_base_free(fio_base *b)
{
    if (b->data) {
        if (b->mapped) fio_unmap(b->data, b->size);
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
        (void)fio_map_note(m, b->size, path, "read as a base"); /* unnoted: SIGBUS is fatal, as before */
        b->data = m;
        b->mapped = 1;
    }
    close(fd);
    return 0;
}

/* Restores the .ckpz at path against parent (zeroed for a stand-alone file) into *b. */
static int restore(const fio_prefs *p, ckpz_ctx *ctx, const char *path, const fio_base *parent, fio_base *b)
{
    void *packed = NULL;
    size_t packed_size = 0;
    uint64_t orig = 0;
    int rc = -1;
    if (fio_load_file(path, &packed, &packed_size) != 0) return -1;
    if (ckpz_original_size(ctx, packed, packed_size, &orig) != CKPZ_OK) {
        fio_error("%s: %s", path, ckpz_ctx_message(ctx));
        goto out;
    }
    if (orig > (uint64_t)SIZE_MAX / 2 || !(b->data = malloc(orig ? (size_t)orig : 1))) {
        fio_error("%s: cannot hold its %llu restored bytes in memory", path, (unsigned long long)orig);
        goto out;
    }
    b->size = (size_t)orig;
    ckpz_params params;
    fio_params(p, &params);
    params.base = parent->data;
    params.base_size = parent->size;
    if (ckpz_decompress_buffer(ctx, &params, packed, packed_size, b->data, b->size) != CKPZ_OK) {
        fio_error("%s: %s", path, ckpz_ctx_message(ctx));
        goto out;
    }
    rc = 0;
out:
    free(packed);
    return rc;
}

/* Why the chain of path could not be walked: the library's message, whole. */
static void chain_error(const char *path, const ckpz_chain *c, const ckpz_ctx *ctx)
{
    size_t n = ckpz_chain_message(c, NULL, 0);
    char *m = c && n ? malloc(n + 1) : NULL;
    if (m) ckpz_chain_message(c, m, n + 1);
    if (!c) fio_error("%s: out of memory", path);
    else fio_error("%s", m ? m : ckpz_ctx_message(ctx));
    free(m);
}

int fio_base_load(const fio_prefs *p, const char *path, fio_base *b)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_chain *c = NULL;
    ckpz_base_info info = {.struct_size = sizeof info};
    fio_base cur, next;
    memset(b, 0, sizeof(*b));
    memset(&cur, 0, sizeof(cur));
    if (!ctx || !(b->path = strdup(path))) {
        fio_error("%s: out of memory", path);
        goto fail;
    }
    struct stat st; /* its head is read, then all of it: a pipe would be read twice (and
                       opening a FIFO with no writer would wait for one) */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fio_error("%s: a base must be a regular file", path);
        goto fail;
    }
    if (ckpz_chain_open(ctx, path, &c) != CKPZ_OK) {
        chain_error(path, c, ctx);
        goto fail;
    }
    for (size_t i = ckpz_chain_length(c); i-- > 0;) { /* from the bottom up, each link against the one below */
        const char *lp = ckpz_chain_path(c, i);
        memset(&next, 0, sizeof(next));
        if (ckpz_chain_link(c, i, NULL) == 0 ? map_file(lp, &next) != 0 : restore(p, ctx, lp, &cur, &next) != 0) {
            fio_base_free(&next);
            goto fail;
        }
        fio_base_free(&cur);
        cur = next;
    }
    b->data = cur.data;
    b->size = cur.size;
    b->mapped = cur.mapped;
    b->depth = ckpz_chain_link(c, 0, &info) == 1 && info.needed ? info.depth : 0;
    ckpz_chain_free(c);
    ckpz_ctx_free(ctx);
    return 0;
fail:
    fio_base_free(&cur);
    fio_base_free(b);
    ckpz_chain_free(c);
    ckpz_ctx_free(ctx);
    return -1;
}

int fio_base_for_head(const fio_prefs *p, const char *src, const unsigned char *head, size_t hlen, fio_base *cache,
                      const fio_base **out)
{
    ckpz_base_info info = {.struct_size = sizeof info};
    ckpz_ctx *ctx;
    char *path = NULL;
    *out = NULL;
    if (!head) { /* stdin: no name to find a base beside: --base or nothing */
        if (!p->base_path) return 0;
        path = strdup(p->base_path);
    } else {
        if (!(ctx = ckpz_ctx_create())) {
            fio_error("out of memory");
            return 1;
        }
        ckpz_error e = ckpz_base_info_read(ctx, head, hlen, &info);
        ckpz_ctx_free(ctx);
        if (e != CKPZ_OK || !info.needed) return 0; /* not ours to judge here, or stand-alone */
        if (!p->base_path) {
            char *found = ckpz_base_locate(src, info.name);
            if (!found) /* not beside it: the library restores it if no entry was coded against the base, */
                return 0; /* and otherwise names the base at the first entry that needs it */
            path = strdup(found);
            ckpz_free(found);
        } else {
            path = strdup(p->base_path);
        }
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

int fio_base_for(const fio_prefs *p, const char *src, fio_base *cache, const fio_base **out)
{
    unsigned char head[CKPZ_BASE_PROBE];
    size_t hlen = 0;
    struct stat st;
    *out = NULL;
    if (!strcmp(src, "-")) return fio_base_for_head(p, src, NULL, 0, cache, out);
    /* a second open reads the head again only from a regular file; anything else (a
     * FIFO would lose its head, or wait here for a writer) the caller's open refuses */
    if (stat(src, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if (fio_read_head(src, head, sizeof(head), &hlen) != 0) return 0; /* the open reports it */
    return fio_base_for_head(p, src, head, hlen, cache, out);
}
