/* rebase.c — --rebase: a delta file restored with its base (--base, or the one it
 * names, found beside it) and written again stand-alone, at the level and chunk size
 * asked for. The output replaces the input only once complete (-o writes elsewhere and
 * keeps the input), so a chain can be cut at any file without risk to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basefile.h"
#include "display.h"
#include "fileio.h"
#include "ops.h"

static int rebase_one(ckpz_ctx *ctx, const fio_prefs *p, const char *src, fio_base *cache)
{
    const fio_base *base = NULL;
    void *packed = NULL, *orig = NULL;
    size_t packed_size = 0;
    uint64_t orig_size = 0;
    ckpz_params params;
    ckpz_base_info bi = {.struct_size = sizeof bi};
    ckpz_stats stats = {.struct_size = sizeof stats};
    fio_out out;
    fio_prefs wp = *p;
    struct stat st;
    const char *dst = p->out_name ? p->out_name : src;
    int rc = 1;

    if (!strcmp(src, "-") || stat(src, &st) != 0 || !S_ISREG(st.st_mode)) {
        fio_error("%s: --rebase needs a regular .ckpz file", src);
        return 1;
    }
    if (fio_base_for(p, src, cache, &base) != 0 || fio_load_file(src, &packed, &packed_size) != 0) return 1;
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
    if (fio_out_open(&out, strcmp(dst, "-") ? dst : NULL, p->out_name ? &st : NULL, &wp, 1) != 0) {
        fio_out_abort(&out);
        goto out;
    }
    ckpz_mem m = {.data = orig, .size = (size_t)orig_size};
    ckpz_source from;
    ckpz_sink to;
    ckpz_source_mem(&from, &m);
    fio_out_sink(&out, &to);
    ckpz_error e = ckpz_compress_io(ctx, &params, &from, &to, &stats);
    if (e != CKPZ_OK) {
        fio_error("%s: %s", src, ckpz_ctx_message(ctx));
        fio_out_abort(&out);
        goto out;
    }
    if (fio_out_commit(&out, &st, &wp, 0) != 0) goto out;
    if (p->verbosity >= 2)
        fprintf(stderr, "%s : stand-alone now (%s, %.3fx) -> %s\n", src,
                fio_human((char[32]){0}, 32, stats.compressed_bytes),
                stats.compressed_bytes ? (double)stats.original_bytes / (double)stats.compressed_bytes : 0.0, out.name);
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
    fio_set_verbosity(p->verbosity);
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
