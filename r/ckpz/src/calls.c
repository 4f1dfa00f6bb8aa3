/* calls.c — the package's routines: memory and files through libckpz.
 *
 * One mechanism for every R object: its tensors become a safetensors image in memory
 * (the library's header writer), which the library compresses like any checkpoint; a
 * file's or a raw vector's tensors are read back through the library's random access
 * (ckpz_archive_read: each chunk's checksums verified before it is decoded). So what R
 * writes, the CLI lists and restores (to a safetensors file), and what the CLI wrote from
 * safetensors or torch.save, R reads. Raw vectors are coded as opaque bytes. Files are
 * written by the library's publisher (temporary name, fsync, rename): a failed write
 * leaves nothing under the final name.
 *
 * What the library allocates is freed before any R error, or held by an external
 * pointer whose finalizer frees it (an archive open while R allocates its results). */
#include "rckpz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void set_params(ckpz_params *p, SEXP level, SEXP threads, SEXP policy, SEXP max_mae)
{
    ckpz_params_init(p);
    if (level != R_NilValue) p->level = Rf_asInteger(level);
    if (threads != R_NilValue) p->threads = Rf_asInteger(threads);
    if (policy != R_NilValue) p->policy = Rf_translateCharUTF8(STRING_ELT(policy, 0));
    if (max_mae != R_NilValue) p->max_mae = Rf_asReal(max_mae);
}

SEXP rk_compress(SEXP x, SEXP level, SEXP threads, SEXP single, SEXP policy, SEXP max_mae)
{
    ckpz_params p;
    set_params(&p, level, threads, policy, max_mae);
    const void *src;
    size_t n;
    if (TYPEOF(x) == RAWSXP) {
        p.format = CKPZ_INPUT_RAW; /* opaque bytes */
        src = RAW(x);
        n = (size_t)XLENGTH(x);
    } else {
        size_t nt;
        rk_tensor *t = rk_tensors(x, Rf_asLogical(single) == TRUE, &nt);
        src = rk_image(t, nt, &n);
        p.format = CKPZ_INPUT_SAFETENSORS;
    }
    /* Streamed into memory rather than ckpz_compress_into, which codes an input as opaque
     * bytes where its tensor index would not fit the one-shot bound (tiny tensors that do
     * not compress): streamed, the tensors stay tensors and come back with their shapes.
     * The output needs at most the bound plus the index of the few tensors R gives. */
    size_t bound = ckpz_compress_bound(n);
    if (!bound || bound > SIZE_MAX - (1u << 20)) rk_failf(CKPZ_ERR_LIMIT, "ckpz_compress: %zu bytes are too many", n);
    ckpz_mem m = {0}, o = {0};
    m.data = (void *)src;
    m.size = n;
    o.capacity = bound + (1u << 20);
    o.data = R_alloc(o.capacity, 1);
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &m);
    s.progress = rk_progress;
    ckpz_sink_mem(&k, &o);
    ckpz_error e = ckpz_compress_io(rk_ctx(), &p, &s, &k, NULL);
    if (e) rk_fail(e, "ckpz_compress");
    size_t written = o.size;
    void *dst = o.data;
    SEXP out = PROTECT(Rf_allocVector(RAWSXP, (R_xlen_t)written));
    memcpy(RAW(out), dst, written);
    UNPROTECT(1);
    return out;
}

/* ---- reading: an archive over a raw vector or a file ------------------------------------ */

typedef struct archive {
    ckpz_archive *a;
    ckpz_params params; /* the archive keeps using them (threads) */
    ckpz_source src;
    ckpz_fd fd;
    ckpz_mem mem;
    ckpz_archive_info info;
} archive;

static void archive_free(SEXP ptr)
{
    archive *h = (archive *)R_ExternalPtrAddr(ptr);
    if (!h) return;
    ckpz_archive_close(h->a);
    if (h->fd.fd >= 0) close(h->fd.fd);
    free(h);
    R_ClearExternalPtr(ptr);
}

/* What the messages name: the file's path, or "raw vector". */
static const char *source_name(SEXP src)
{
    return TYPEOF(src) == RAWSXP ? "raw vector" : R_ExpandFileName(Rf_translateChar(STRING_ELT(src, 0)));
}

int rk_open_regular(const char *path, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) rk_failf(CKPZ_ERR_READ, "%s: %s", path, strerror(errno));
    struct stat st = {0};
    int bad = fstat(fd, &st) != 0;
    if (bad || !S_ISREG(st.st_mode)) {
        int err = bad ? errno : 0;
        close(fd);
        if (S_ISDIR(st.st_mode)) rk_failf(CKPZ_ERR_READ, "%s: is a directory", path);
        rk_failf(CKPZ_ERR_READ, "%s: %s", path, err ? strerror(err) : "not a regular file");
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *size = (uint64_t)st.st_size;
    return fd;
}

/* A source over the raw vector or the file named by src (h->fd.fd is then open). */
static void source_of(SEXP src, archive *h)
{
    ckpz_source_init(&h->src);
    if (TYPEOF(src) == RAWSXP) {
        h->mem.data = RAW(src);
        h->mem.size = (size_t)XLENGTH(src);
        ckpz_source_mem(&h->src, &h->mem);
    } else {
        uint64_t size;
        h->fd.fd = rk_open_regular(source_name(src), &size);
        ckpz_source_fd(&h->src, &h->fd, size);
    }
    h->src.progress = rk_progress;
}

/* The archive of src, held by *guard (protected: the caller unprotects it). */
static archive *archive_open(SEXP src, SEXP threads, SEXP *guard)
{
    archive *h = (archive *)calloc(1, sizeof *h);
    if (!h) rk_failf(CKPZ_ERR_NOMEM, "out of memory");
    h->fd.fd = -1;
    *guard = PROTECT(R_MakeExternalPtr(h, R_NilValue, src));
    R_RegisterCFinalizerEx(*guard, archive_free, TRUE);
    ckpz_params_init(&h->params);
    if (threads != R_NilValue) h->params.threads = Rf_asInteger(threads);
    source_of(src, h);
    ckpz_error e = ckpz_archive_open_io(rk_ctx(), &h->params, &h->src, &h->a);
    if (e) rk_fail(e, source_name(src));
    h->info.struct_size = sizeof h->info;
    ckpz_archive_get_info(h->a, &h->info);
    return h;
}

/* The tensors of an archive as a named list of R values, read in one call (the chunks
 * decoded in parallel, each checked before it is decoded). */
static SEXP archive_tensors(archive *h, const char *what)
{
    uint64_t ne = h->info.entries, nt = 0;
    ckpz_entry *e = (ckpz_entry *)R_alloc(ne ? ne : 1, sizeof *e);
    ckpz_span *span = (ckpz_span *)R_alloc(ne ? ne : 1, sizeof *span);
    uint64_t *elems = (uint64_t *)R_alloc(ne ? ne : 1, sizeof *elems);
    for (uint64_t i = 0; i < ne; i++) {
        memset(&e[nt], 0, sizeof e[nt]);
        e[nt].struct_size = sizeof e[nt];
        ckpz_error err = ckpz_archive_entry(h->a, i, &e[nt]);
        if (err) rk_fail(err, what);
        if (e[nt].dtype == CKPZ_DTYPE_NONE) continue;
        int ok;
        elems[nt] = rk_elements(e[nt].ndim, e[nt].shape, &ok);
        if (!ok || elems[nt] > UINT64_MAX / ckpz_dtype_size(e[nt].dtype) ||
            elems[nt] * ckpz_dtype_size(e[nt].dtype) != e[nt].length)
            rk_failf(CKPZ_ERR_CORRUPT, "%s: tensor '%s': its shape does not match its %llu bytes", what, e[nt].name,
                     (unsigned long long)e[nt].length);
        if (e[nt].length > SIZE_MAX)
            rk_failf(CKPZ_ERR_LIMIT, "%s: tensor '%s' does not fit in memory", what, e[nt].name);
        span[nt].offset = e[nt].offset;
        span[nt].length = e[nt].length;
        span[nt].dst = e[nt].length ? R_alloc((size_t)e[nt].length, 1) : NULL;
        nt++;
    }
    ckpz_error err = ckpz_archive_read(rk_ctx(), h->a, span, (size_t)nt);
    if (err) rk_fail(err, what);
    SEXP out = PROTECT(Rf_allocVector(VECSXP, (R_xlen_t)nt));
    SEXP names = PROTECT(Rf_allocVector(STRSXP, (R_xlen_t)nt));
    for (uint64_t i = 0; i < nt; i++) {
        SET_STRING_ELT(names, (R_xlen_t)i, Rf_mkCharCE(e[i].name, CE_UTF8));
        SET_VECTOR_ELT(out, (R_xlen_t)i, rk_value(span[i].dst, e[i].dtype, e[i].ndim, e[i].shape, elems[i]));
    }
    Rf_setAttrib(out, R_NamesSymbol, names);
    UNPROTECT(2);
    return out;
}

SEXP rk_decompress(SEXP raw, SEXP threads)
{
    SEXP guard;
    archive *h = archive_open(raw, threads, &guard);
    SEXP out;
    int tensors = 0; /* a raw dump the CLI coded with --dtype has one; R's raw vectors none */
    for (uint64_t i = 0; i < h->info.entries && !tensors; i++) {
        ckpz_entry e = {.struct_size = sizeof e};
        tensors = ckpz_archive_entry(h->a, i, &e) == CKPZ_OK && e.dtype != CKPZ_DTYPE_NONE;
    }
    if (h->info.format == CKPZ_INPUT_RAW && !tensors) { /* opaque bytes: restored whole, every checksum checked */
        if (h->info.original_size > (uint64_t)R_XLEN_T_MAX) rk_failf(CKPZ_ERR_LIMIT, "raw vector: too large");
        out = PROTECT(Rf_allocVector(RAWSXP, (R_xlen_t)h->info.original_size));
        ckpz_params p;
        ckpz_params_init(&p);
        p.threads = h->params.threads;
        ckpz_error e = ckpz_decompress_buffer(rk_ctx(), &p, RAW(raw), (size_t)XLENGTH(raw), RAW(out),
                                              (size_t)XLENGTH(out));
        if (e) rk_fail(e, "raw vector");
    } else {
        out = PROTECT(archive_tensors(h, "raw vector"));
        if (XLENGTH(out) == 1) out = VECTOR_ELT(out, 0); /* one value, as ckpz_compress was given it */
    }
    UNPROTECT(2);
    return out;
}

SEXP rk_read(SEXP src, SEXP threads)
{
    SEXP guard;
    archive *h = archive_open(src, threads, &guard);
    SEXP out = archive_tensors(h, source_name(src));
    UNPROTECT(1);
    return out;
}

static SEXP column(SEXP list, SEXP names, int i, const char *name, SEXPTYPE type, R_xlen_t n)
{
    SEXP v = Rf_allocVector(type, n);
    SET_VECTOR_ELT(list, i, v);
    SET_STRING_ELT(names, i, Rf_mkChar(name));
    return v;
}

static void shape_text(const ckpz_entry *e, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (uint32_t d = 0; d < e->ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, d ? "x%llu" : "%llu", (unsigned long long)e->shape[d]);
}

SEXP rk_list(SEXP src)
{
    SEXP guard;
    archive *h = archive_open(src, R_NilValue, &guard);
    R_xlen_t n = (R_xlen_t)h->info.entries;
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 13)), names = PROTECT(Rf_allocVector(STRSXP, 13));
    SEXP name = column(out, names, 0, "name", STRSXP, n), dtype = column(out, names, 1, "dtype", STRSXP, n);
    SEXP shape = column(out, names, 2, "shape", STRSXP, n);
    double *off = REAL(column(out, names, 3, "offset", REALSXP, n));
    double *len = REAL(column(out, names, 4, "length", REALSXP, n));
    double *comp = REAL(column(out, names, 5, "compressed", REALSXP, n));
    double *chunks = REAL(column(out, names, 6, "chunks", REALSXP, n));
    int *lossy = LOGICAL(column(out, names, 7, "lossy", LGLSXP, n));
    SEXP mode = column(out, names, 8, "mode", STRSXP, n);
    double *bound = REAL(column(out, names, 9, "bound", REALSXP, n));
    double *mae = REAL(column(out, names, 10, "mae", REALSXP, n));
    double *maxe = REAL(column(out, names, 11, "max_error", REALSXP, n));
    double *psnr = REAL(column(out, names, 12, "psnr", REALSXP, n));
    for (R_xlen_t i = 0; i < n; i++) {
        ckpz_entry e = {.struct_size = sizeof e};
        ckpz_error err = ckpz_archive_entry(h->a, (uint64_t)i, &e);
        if (err) rk_fail(err, source_name(src));
        char buf[1400];
        shape_text(&e, buf, sizeof buf);
        SET_STRING_ELT(name, i, Rf_mkCharCE(e.name, CE_UTF8));
        SET_STRING_ELT(dtype, i, Rf_mkChar(ckpz_dtype_name(e.dtype)));
        SET_STRING_ELT(shape, i, Rf_mkChar(buf));
        off[i] = (double)e.offset;
        len[i] = (double)e.length;
        comp[i] = (double)e.compressed;
        chunks[i] = (double)e.chunks;
        lossy[i] = e.lossy != 0;
        SET_STRING_ELT(mode, i, e.lossy && e.lossy_mode ? Rf_mkChar(e.lossy_mode) : NA_STRING);
        bound[i] = e.lossy ? e.lossy_bound : NA_REAL;
        mae[i] = e.lossy ? e.mae : NA_REAL;
        maxe[i] = e.lossy ? e.max_error : NA_REAL;
        psnr[i] = e.lossy ? e.psnr : NA_REAL;
    }
    Rf_setAttrib(out, R_NamesSymbol, names);
    SEXP info = PROTECT(Rf_allocVector(REALSXP, 4)), inames = PROTECT(Rf_allocVector(STRSXP, 4));
    const char *in[] = {"original_size", "compressed_size", "chunks", "format_version"};
    double iv[] = {(double)h->info.original_size, (double)h->info.compressed_size, (double)h->info.chunks,
                   (double)h->info.format_version};
    for (int i = 0; i < 4; i++) {
        REAL(info)[i] = iv[i];
        SET_STRING_ELT(inames, i, Rf_mkChar(in[i]));
    }
    Rf_setAttrib(info, R_NamesSymbol, inames);
    Rf_setAttrib(out, Rf_install("info"), info);
    Rf_setAttrib(out, Rf_install("format"), Rf_mkString(ckpz_input_format_name(h->info.format)));
    UNPROTECT(5);
    return out;
}

SEXP rk_test(SEXP src, SEXP threads)
{
    archive h; /* only its source: a sequential pass checks every frame and the content checksum */
    memset(&h, 0, sizeof h);
    h.fd.fd = -1;
    source_of(src, &h);
    ckpz_params p;
    ckpz_params_init(&p);
    if (threads != R_NilValue) p.threads = Rf_asInteger(threads);
    ckpz_stats st = {.struct_size = sizeof st};
    ckpz_error e = ckpz_decompress_io(rk_ctx(), &p, &h.src, NULL, &st);
    if (h.fd.fd >= 0) close(h.fd.fd);
    if (e) rk_fail(e, source_name(src));
    return Rf_ScalarReal((double)st.original_bytes);
}

/* ---- writing a file ----------------------------------------------------------------------- */

SEXP rk_write(SEXP obj, SEXP path, SEXP overwrite, SEXP level, SEXP threads, SEXP single, SEXP policy, SEXP max_mae)
{
    const char *name = R_ExpandFileName(Rf_translateChar(STRING_ELT(path, 0)));
    int replace = Rf_asLogical(overwrite) == TRUE;
    ckpz_params p;
    set_params(&p, level, threads, policy, max_mae);
    p.format = CKPZ_INPUT_SAFETENSORS;
    size_t nt, n;
    rk_tensor *t = rk_tensors(obj, Rf_asLogical(single) == TRUE, &nt);
    void *img = rk_image(t, nt, &n);
    struct stat st;
    if (lstat(name, &st) == 0) { /* the CLI's refusals (programs/outfile.c) */
        if (S_ISDIR(st.st_mode)) rk_failf(CKPZ_ERR_WRITE, "%s: is a directory", name);
        if (!replace) rk_failf(CKPZ_ERR_WRITE, "%s: already exists (use overwrite = TRUE)", name);
    }
    ckpz_publish *pub;
    ckpz_error e = ckpz_publish_open(rk_ctx(), name, CKPZ_PUBLISH_ANONYMOUS, &pub);
    if (e) rk_fail(e, NULL); /* the publisher's messages name the file */
    ckpz_mem m = {0};
    m.data = img;
    m.size = n;
    ckpz_fd out = {.fd = ckpz_publish_fd(pub)};
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &m);
    s.progress = rk_progress;
    ckpz_sink_fd(&k, &out);
    ckpz_stats stats = {.struct_size = sizeof stats};
    e = ckpz_compress_io(rk_ctx(), &p, &s, &k, &stats);
    if (!e && out.bytes != stats.compressed_bytes) e = ckpz_ctx_report(rk_ctx(), CKPZ_ERR_WRITE, "short write");
    if (e) {
        ckpz_publish_abort(pub);
        rk_fail(e, name);
    }
    e = ckpz_publish_commit(rk_ctx(), pub, CKPZ_PUBLISH_DURABLE | (replace ? CKPZ_PUBLISH_REPLACE : 0));
    if (e) rk_fail(e, NULL);
    SEXP r = PROTECT(Rf_allocVector(REALSXP, 2)), rn = PROTECT(Rf_allocVector(STRSXP, 2));
    REAL(r)[0] = (double)stats.original_bytes;
    REAL(r)[1] = (double)stats.compressed_bytes;
    SET_STRING_ELT(rn, 0, Rf_mkChar("original_bytes"));
    SET_STRING_ELT(rn, 1, Rf_mkChar("compressed_bytes"));
    Rf_setAttrib(r, R_NamesSymbol, rn);
    UNPROTECT(2);
    return r;
}
