/* list.c — random access to .ckpz files: -l lists the tensor index (name, dtype,
 * shape, sizes, ratio; the lossy columns and a delta file's base when there are any),
 * --extract writes one tensor's original bytes, and after a lossy compression the
 * output is read back to warn about tensors a too coarse bound froze. All of it goes
 * through the archive API, reading the index and the chunks asked for, never the whole
 * file. Names are data from the file: they are printed escaped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basefile.h"
#include "display.h"
#include "fileio.h"
#include "ops.h"

static int archive_open(ckpz_ctx *ctx, const fio_prefs *p, fio_in *in, const char *name, const fio_base *base,
                        ckpz_archive **a)
{
    ckpz_params params;
    ckpz_error e;
    if (fio_in_open(in, name, p, 1) != 0) return -1;
    fio_params(p, &params);
    if (base) {
        params.base = base->data;
        params.base_size = base->size;
    }
    e = ckpz_archive_open(ctx, &params, fio_in_pread, in, in->size_hint, a);
    if (e != CKPZ_OK) {
        fio_report(ctx, e, in, NULL);
        fio_in_close(in);
        return -1;
    }
    return 0;
}

/* A lossy tensor coded against a base whose changes were mostly erased (restored as the
 * base's values) would freeze training at the base's values after a restore: the bound
 * is larger than the updates between the two checkpoints. Adam's moments (their role)
 * are not training's progress: the optimizer rebuilds them from the gradients, and a log
 * grid around the base's v keeps most of v within its bound as the base's value. */
static int frozen(const ckpz_entry *e)
{
    if (e->role && (!strcmp(e->role, "exp_avg") || !strcmp(e->role, "exp_avg_sq"))) return 0;
    return e->lossy && e->changed >= 64 && (double)e->frozen >= 0.5 * (double)e->changed;
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
        if (cp >= 0xf0) {
            cp &= 0x07;
            extra = 3;
        } else if (cp >= 0xe0) {
            cp &= 0x0f;
            extra = 2;
        } else if (cp >= 0xc0) {
            cp &= 0x1f;
            extra = 1;
        }
        s++;
        while (extra-- && (*s & 0xc0) == 0x80) cp = (cp << 6) | (*s++ & 0x3f);
        if ((cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3) ||
            (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
            (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1faff) || (cp >= 0x20000 && cp <= 0x3fffd))
            w += 2;
        else w += 1;
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
        used += (size_t)snprintf(buf + used, len - used, d ? ", %llu" : "%llu", (unsigned long long)e->shape[d]);
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
 * tensor's value range); the tensor's role (as the mode auto sees it) and why end the line. */
static void print_lossy(const ckpz_entry *e)
{
    char m[32];
    if (!e->lossy) {
        printf("  %-13s  %9s  %9s  %7s", e->dtype == CKPZ_DTYPE_NONE ? "" : "lossless", "", "", "");
    } else {
        const char *mode = !strcmp(e->lossy_mode, "pointwise-rel") ? "prel" : e->lossy_mode;
        if (!strcmp(e->lossy_mode, "affine")) snprintf(m, sizeof m, "affine");
        else snprintf(m, sizeof m, "%s %.2g", mode, e->lossy_bound);
        if (e->psnr == INFINITY) printf("  %-13s  %9.3g  %9.3g  %7s", m, e->mae, e->max_error, "inf");
        else printf("  %-13s  %9.3g  %9.3g  %7.1f", m, e->mae, e->max_error, e->psnr);
    }
    if (frozen(e)) printf("  FROZEN");
}

static int list_one(ckpz_ctx *ctx, const fio_prefs *p, const char *name, int print_name)
{
    fio_in in;
    ckpz_archive *a = NULL;
    ckpz_archive_info info = {.struct_size = sizeof info};
    ckpz_entry e = {.struct_size = sizeof e};
    uint64_t i, tensors = 0;
    int wname = 4, wdtype = 5, wshape = 5, widx = 1, verbose = p->verbosity >= 3;
    char shape[256], h1[32], h2[32], r[32], *nbuf = NULL;
    size_t ncap = 0;
    int raw_input, optim_err = 0;
    fio_base cache;
    const fio_base *base = NULL;

    memset(&cache, 0, sizeof(cache));
    if ((p->base_path && fio_base_for(p, name, &cache, &base) != 0) || archive_open(ctx, p, &in, name, base, &a) != 0) {
        fio_base_free(&cache);
        return 1;
    }
    ckpz_archive_get_info(a, &info);
    /* beta2 of the optimizer state, read from the file's pickle: a delta file's may be
     * coded against its base (-l --base PREV) */
    if (info.lossy) optim_err = (int)ckpz_archive_read_optim(ctx, a);
    raw_input = info.format == CKPZ_INPUT_RAW;
    /* first pass: column widths */
    for (i = 0; i < info.entries; i++) {
        int w;
        if (ckpz_archive_entry(a, i, &e) != CKPZ_OK) {
            fio_error("%s: cannot read index entry %llu", in.name, (unsigned long long)i);
            free(nbuf);
            ckpz_archive_close(a);
            fio_in_close(&in);
            fio_base_free(&cache);
            return 1;
        }
        if (!display_name(&e, raw_input, &nbuf, &ncap)) {
            fio_error("%s: out of memory", in.name);
            free(nbuf);
            ckpz_archive_close(a);
            fio_in_close(&in);
            fio_base_free(&cache);
            return 1;
        }
        if ((w = display_width(nbuf)) > wname) wname = w;
        if ((w = (int)strlen(ckpz_dtype_name(e.dtype) ? ckpz_dtype_name(e.dtype) : "?")) > wdtype) wdtype = w;
        format_shape(shape, sizeof(shape), &e);
        if ((w = (int)strlen(shape)) > wshape) wshape = w;
        if (e.dtype != CKPZ_DTYPE_NONE) tensors++;
    }
    snprintf(shape, sizeof(shape), "%llu", (unsigned long long)info.entries);
    widx = (int)strlen(shape);
    if (widx < 1) widx = 1;

    if (print_name) printf("%s:\n", in.name);
    printf("%*s  %-*s  %-*s  %-*s  %10s  %10s  %7s", widx, "#", wname, "name", wdtype, "dtype", wshape, "shape",
           "original", "compressed", "ratio");
    if (info.lossy) printf("  %-13s  %9s  %9s  %7s", "lossy", "MAE", "max err", "PSNR");
    if (verbose) printf("  %14s  %14s  %14s  %8s", "offset", "bytes", "comp. bytes", "chunks");
    if (info.lossy) printf("  %-10s  %s", "role", "why");
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
        printf("%*llu  %s%*s  %-*s  %-*s  %10s  %10s  %7s", widx, (unsigned long long)i, nbuf,
               wname - display_width(nbuf), "", wdtype, dn ? dn : "?", wshape, shape,
               fio_human(h1, sizeof(h1), e.length), fio_human(h2, sizeof(h2), e.compressed),
               ratio_str(r, sizeof(r), e.length, e.compressed));
        if (info.lossy) print_lossy(&e);
        if (verbose)
            printf("  %14llu  %14llu  %14llu  %8llu", (unsigned long long)e.offset, (unsigned long long)e.length,
                   (unsigned long long)e.compressed, (unsigned long long)e.chunks);
        if (info.lossy && e.role) printf("  %-10s  %s", e.role, e.role_why ? e.role_why : "");
        if (info.lossy && e.role && !strcmp(e.role, "exp_avg_sq") && e.beta2 > 0 && e.beta2_from)
            printf("; beta2 %g from %s", e.beta2, e.beta2_from); /* the reader wrote no control bytes */
        if (info.lossy && e.role && !strcmp(e.role, "weight") && e.lossy && e.lossy_mode &&
            !strcmp(e.lossy_mode, "abs") && !e.based && e.lr > 0 && e.lr_from)
            printf("; no base: %.3g x lr %g from %s", e.lossy_bound / e.lr, e.lr, e.lr_from);
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
        printf("%*s  %-*s  %10s  %10s  %7s  %llu tensors, %llu chunks, %s, crc32c %08x\n", widx, "",
               wname + 2 + wdtype + 2 + wshape, "total", fio_human(h1, sizeof(h1), info.original_size),
               fio_human(h2, sizeof(h2), info.compressed_size),
               ratio_str(r, sizeof(r), info.original_size, info.compressed_size), (unsigned long long)tensors,
               (unsigned long long)info.chunks, fmt ? fmt : "?", (unsigned)info.content_checksum);
        if (info.lossy) {
            uint64_t lossy = 0, exact = 0; /* coded lossy: with an error, and every element exact */
            for (i = 0; i < info.entries; i++)
                if (ckpz_archive_entry(a, i, &e) == CKPZ_OK && e.lossy) {
                    if (e.max_error > 0 || e.mae > 0 || e.max_error != e.max_error) lossy++;
                    else exact++;
                }
            printf("lossy: %llu of %llu tensors restore approximately", (unsigned long long)lossy,
                   (unsigned long long)tensors);
            if (exact) printf(", %llu more were coded lossy and restore exactly", (unsigned long long)exact);
            printf(" (the checksums are of the restored content)\n");
            if (optim_err == CKPZ_ERR_BASE)
                printf("beta2 not shown: the pickle is coded against the base (-l --base PREV reads it)\n");
            else if (optim_err) printf("beta2 not shown: %s\n", ckpz_ctx_message(ctx));
        }
        if (verbose)
            printf("format version %u, chunk size %s, %llu bytes => %llu bytes\n", info.format_version,
                   fio_human(h1, sizeof(h1), info.chunk_size), (unsigned long long)info.original_size,
                   (unsigned long long)info.compressed_size);
    }
    {
        ckpz_base_info bi = {.struct_size = sizeof bi};
        ckpz_archive_get_base(a, &bi);
        if (bi.needed) {
            uint64_t based = 0;
            for (i = 0; i < info.entries; i++)
                if (ckpz_archive_entry(a, i, &e) == CKPZ_OK && e.based) based++;
            /* the recorded name is data from the file: print it escaped */
            ckpz_entry shown = {.struct_size = sizeof shown};
            shown.name = bi.name;
            shown.dtype = CKPZ_DTYPE_F32;
            display_name(&shown, 0, &nbuf, &ncap);
            if (based)
                printf("depends on: %s (%llu bytes, crc32c %08x); %llu of %llu entries coded against it; "
                       "restoring takes %u delta file%s\n",
                       nbuf && bi.name[0] ? nbuf : "(unnamed base)", (unsigned long long)bi.size, (unsigned)bi.checksum,
                       (unsigned long long)based, (unsigned long long)info.entries, (unsigned)bi.depth,
                       bi.depth == 1 ? "" : "s");
            else /* written against a base, but nothing matched it: stand-alone in fact */
                printf("written against: %s (%llu bytes, crc32c %08x); 0 of %llu entries coded against it: "
                       "restores without it\n",
                       nbuf && bi.name[0] ? nbuf : "(unnamed base)", (unsigned long long)bi.size, (unsigned)bi.checksum,
                       (unsigned long long)info.entries);
        }
    }
    free(nbuf);
    ckpz_archive_close(a);
    fio_in_close(&in);
    fio_base_free(&cache);
    return 0;
}

int fio_list_files(const fio_prefs *p, const char *const *files, int n)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    int i, failed = 0;
    fio_set_verbosity(p->verbosity);
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

    fio_set_verbosity(p->verbosity);
    memset(&cache, 0, sizeof(cache));
    if (p->out_name && strcmp(p->out_name, "-") != 0 && !p->to_stdout) dst = p->out_name;
    ctx = ckpz_ctx_create();
    if (!ctx) {
        fio_error("out of memory");
        return 1;
    }
    if (fio_base_for(p, file, &cache, &base) != 0 || archive_open(ctx, p, &in, file, base, &a) != 0) goto done_ctx;
    e = ckpz_archive_find(ctx, a, tensor, &idx);
    if (e == CKPZ_ERR_NOT_FOUND) {
        fio_error("%s: no tensor named '%s' (ckpz -l %s lists them)", in.name, tensor, in.name);
        goto done_archive;
    }
    if (e != CKPZ_OK) {
        fio_report(ctx, e, &in, NULL);
        goto done_archive;
    }
    if (fio_out_open(&out, dst, &in.st, p, 1) != 0) {
        fio_out_abort(&out);
        goto done_archive;
    }
    e = ckpz_archive_extract(ctx, a, idx, fio_out_write, &out);
    if (e != CKPZ_OK) {
        fio_report(ctx, e, &in, &out);
        fio_out_abort(&out);
        goto done_archive;
    }
    if (fio_out_commit(&out, NULL, p, 0) != 0) goto done_archive;
    if (p->verbosity >= 3) {
        char h[32];
        fprintf(stderr, "%s : %s => %s (%s)\n", in.name, tensor, out.name, fio_human(h, sizeof(h), out.bytes));
    }
    rc = 0;
done_archive:
    ckpz_archive_close(a);
    fio_in_close(&in);
done_ctx:
    fio_base_free(&cache);
    ckpz_ctx_free(ctx);
    return rc;
}

void fio_lossy_report(ckpz_ctx *ctx, const fio_prefs *p, const char *name)
{
    fio_in in;
    ckpz_archive *a = NULL;
    ckpz_archive_info info = {.struct_size = sizeof info};
    ckpz_entry e = {.struct_size = sizeof e};
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
    fio_in_close(&in);
}
