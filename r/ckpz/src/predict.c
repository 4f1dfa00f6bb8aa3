/* predict.c — the library's ratio prediction (ckpz_predict_file, lib/predict) for an R
 * object (its safetensors image in memory, as ckpz_compress would code it) or a file.
 * Nothing is compressed: a sample of each tensor feeds the library's model. The tensors'
 * predictions are gathered in memory the library's callback cannot see R in (no R
 * allocation while the library runs), held by an external pointer until R has them. */
#include "rckpz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct row {
    char *name;
    ckpz_dtype dtype;
    int lossy;
    char mode[32];
    double length, savings, ratio;
} row;

typedef struct rows {
    row *r;
    size_t n, cap;
    int fd;
    int nomem;
} rows;

static void rows_free(SEXP ptr)
{
    rows *h = (rows *)R_ExternalPtrAddr(ptr);
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) free(h->r[i].name);
    free(h->r);
    if (h->fd >= 0) close(h->fd);
    free(h);
    R_ClearExternalPtr(ptr);
}

static int each(void *opaque, const ckpz_prediction *t)
{
    rows *h = (rows *)opaque;
    if (t->dtype == CKPZ_DTYPE_NONE) return 0; /* opaque bytes: predicted as stored */
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 16;
        row *r = (row *)realloc(h->r, cap * sizeof *r);
        if (!r) return h->nomem = 1;
        h->r = r;
        h->cap = cap;
    }
    row *r = &h->r[h->n];
    r->name = strdup(t->name);
    if (!r->name) return h->nomem = 1;
    h->n++;
    r->dtype = t->dtype;
    r->lossy = t->lossy;
    snprintf(r->mode, sizeof r->mode, "%s", t->lossy_mode ? t->lossy_mode : "lossless");
    r->length = (double)t->length;
    r->savings = t->savings;
    r->ratio = t->ratio;
    return 0;
}

SEXP rk_predict(SEXP src, SEXP level, SEXP single, SEXP policy, SEXP max_mae)
{
    rows *h = (rows *)calloc(1, sizeof *h);
    if (!h) rk_failf(CKPZ_ERR_NOMEM, "out of memory");
    h->fd = -1;
    SEXP guard = PROTECT(R_MakeExternalPtr(h, R_NilValue, R_NilValue));
    R_RegisterCFinalizerEx(guard, rows_free, TRUE);
    ckpz_predict_params p;
    ckpz_predict_params_init(&p);
    if (level != R_NilValue) p.level = Rf_asInteger(level);
    if (policy != R_NilValue) p.policy = Rf_translateCharUTF8(STRING_ELT(policy, 0));
    if (max_mae != R_NilValue) p.max_mae = Rf_asReal(max_mae);
    ckpz_predict_total tot = {.struct_size = sizeof tot};
    ckpz_error e;
    const char *what = "ckpz_predict";
    if (TYPEOF(src) == STRSXP) {
        what = R_ExpandFileName(Rf_translateChar(STRING_ELT(src, 0)));
        ckpz_fd f = {.fd = -1};
        ckpz_source s;
        uint64_t size;
        h->fd = rk_open_regular(what, &size);
        f.fd = h->fd;
        ckpz_source_fd(&s, &f, size);
        e = ckpz_predict_file(rk_ctx(), &p, s.pread, s.opaque, s.size, each, h, &tot);
    } else {
        size_t n;
        ckpz_mem m = {0};
        size_t nt;
        rk_tensor *t = rk_tensors(src, Rf_asLogical(single) == TRUE, &nt);
        m.data = rk_image(t, nt, &n);
        m.size = n;
        p.format = CKPZ_INPUT_SAFETENSORS;
        e = ckpz_predict_file(rk_ctx(), &p, ckpz_mem_pread, &m, n, each, h, &tot);
    }
    if (h->nomem) rk_failf(CKPZ_ERR_NOMEM, "%s: out of memory", what);
    if (e) rk_fail(e, what);
    R_xlen_t n = (R_xlen_t)h->n;
    SEXP rowsv = PROTECT(Rf_allocVector(VECSXP, 6)), rn = PROTECT(Rf_allocVector(STRSXP, 6));
    const char *cols[] = {"name", "dtype", "mode", "length", "savings", "ratio"};
    for (int i = 0; i < 6; i++) {
        SET_VECTOR_ELT(rowsv, i, Rf_allocVector(i < 3 ? STRSXP : REALSXP, n));
        SET_STRING_ELT(rn, i, Rf_mkChar(cols[i]));
    }
    for (R_xlen_t i = 0; i < n; i++) {
        row *r = &h->r[i];
        SET_STRING_ELT(VECTOR_ELT(rowsv, 0), i, Rf_mkCharCE(r->name, CE_UTF8));
        SET_STRING_ELT(VECTOR_ELT(rowsv, 1), i, Rf_mkChar(ckpz_dtype_name(r->dtype)));
        SET_STRING_ELT(VECTOR_ELT(rowsv, 2), i, Rf_mkChar(r->mode));
        REAL(VECTOR_ELT(rowsv, 3))[i] = r->length;
        REAL(VECTOR_ELT(rowsv, 4))[i] = r->savings;
        REAL(VECTOR_ELT(rowsv, 5))[i] = r->ratio;
    }
    Rf_setAttrib(rowsv, R_NamesSymbol, rn);
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 4)), on = PROTECT(Rf_allocVector(STRSXP, 4));
    SET_VECTOR_ELT(out, 0,
                   Rf_ScalarReal(1.0 - (tot.original_bytes ? tot.predicted_bytes / (double)tot.original_bytes : 1.0)));
    SET_VECTOR_ELT(out, 1, Rf_ScalarReal(tot.ratio));
    SET_VECTOR_ELT(out, 2, Rf_ScalarReal(tot.predicted_bytes));
    SET_VECTOR_ELT(out, 3, rowsv);
    const char *onames[] = {"savings", "ratio", "predicted_bytes", "tensors"};
    for (int i = 0; i < 4; i++) SET_STRING_ELT(on, i, Rf_mkChar(onames[i]));
    Rf_setAttrib(out, R_NamesSymbol, on);
    UNPROTECT(5);
    return out;
}
