/* convert.c — R values to tensors and back.
 *
 * R stores an array column-major (the first index runs fastest); a tensor file stores it
 * row-major (the last index runs fastest). An R array of dim c(a, b, c) is written as the
 * tensor of shape [a, b, c] holding the same elements, so a matrix saved from R has the
 * shape Python sees for it, and a [out, in] weight of a PyTorch checkpoint reads in R as
 * an out x in matrix with W[i, j] where PyTorch has it. That costs one reordering copy
 * each way (reverse_axes), which is also the copy R's types need: doubles narrowed to f32
 * when asked, and every narrow type widened on the way in (R has no float32, float16 or
 * bfloat16; integers of 32 bits or more that are not i32 come back as doubles). */
#include "rckpz.h"

#include <math.h>
#include <string.h>

uint64_t rk_elements(uint32_t ndim, const uint64_t *shape, int *ok)
{
    uint64_t n = 1;
    *ok = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape[i] && n > UINT64_MAX / shape[i]) {
            *ok = 0;
            return 0;
        }
        n *= shape[i];
    }
    return n;
}

/* Copies n elements of esz bytes between R order (column-major, at r) and row-major
 * order (at c), for the shape d[0..k): to_c 1 reads r and writes c, 0 the other way. An
 * odometer over the row-major index keeps the column-major offset: the last axis steps
 * by the product of the dimensions before it. */
/* One run of the last axis, elements of type T (memcpy keeps it free of alignment and
 * aliasing assumptions; with a constant size it is a plain move). */
#define RUN(T)                                                                               \
    for (uint64_t i = 0; i < last; i++) {                                                    \
        unsigned char *rp = r + (off + i * step) * sizeof(T), *cp = c + (j + i) * sizeof(T); \
        if (to_c) memcpy(cp, rp, sizeof(T));                                                 \
        else memcpy(rp, cp, sizeof(T));                                                      \
    }

static void reverse_axes(unsigned char *r, unsigned char *c, size_t esz, uint32_t k, const uint64_t *d, uint64_t n,
                         int to_c)
{
    if (k < 2 || n == 0) {
        if (n) memcpy(to_c ? c : r, to_c ? r : c, n * esz);
        return;
    }
    uint64_t *stride = (uint64_t *)R_alloc(k, sizeof *stride);
    uint64_t *idx = (uint64_t *)R_alloc(k, sizeof *idx);
    uint64_t s = 1;
    for (uint32_t m = 0; m < k; m++) {
        stride[m] = s;
        s *= d[m];
        idx[m] = 0;
    }
    uint64_t off = 0, last = d[k - 1], step = stride[k - 1];
    for (uint64_t j = 0; j < n; j += last) {
        /* row-major contiguous, column-major strided */
        switch (esz) {
        case 1: RUN(uint8_t); break;
        case 2: RUN(uint16_t); break;
        case 4: RUN(uint32_t); break;
        default: RUN(uint64_t); break;
        }
        for (uint32_t m = k - 1; m-- > 0;) { /* carry into the axes before the last */
            off += stride[m];
            if (++idx[m] < d[m]) break;
            off -= stride[m] * d[m];
            idx[m] = 0;
        }
    }
}

void rk_tensor_of(SEXP x, const char *name, int single, rk_tensor *t)
{
    t->name = name;
    t->x = x;
    if (TYPEOF(x) == REALSXP) t->dtype = single ? CKPZ_DTYPE_F32 : CKPZ_DTYPE_F64;
    else if (TYPEOF(x) == INTSXP && !Rf_inherits(x, "factor")) t->dtype = CKPZ_DTYPE_I32;
    else
        rk_failf(CKPZ_ERR_PARAM, "%s: not a double or integer vector, matrix or array (a %s)", name,
                 Rf_type2char(TYPEOF(x)));
    SEXP dim = Rf_getAttrib(x, R_DimSymbol);
    R_xlen_t n = XLENGTH(x);
    if (dim == R_NilValue || LENGTH(dim) == 1) {
        /* a vector: one dimension, or none for a single value (a scalar such as a step) */
        t->ndim = n == 1 && dim == R_NilValue ? 0 : 1;
        t->shape = (uint64_t *)R_alloc(1, sizeof *t->shape);
        t->shape[0] = (uint64_t)n;
        return;
    }
    if (LENGTH(dim) > 64) rk_failf(CKPZ_ERR_PARAM, "%s: more than 64 dimensions", name);
    t->ndim = (uint32_t)LENGTH(dim);
    t->shape = (uint64_t *)R_alloc(t->ndim, sizeof *t->shape);
    for (uint32_t i = 0; i < t->ndim; i++) t->shape[i] = (uint64_t)INTEGER(dim)[i];
}

rk_tensor *rk_tensors(SEXP x, int single, size_t *n)
{
    if (TYPEOF(x) != VECSXP) {
        rk_tensor *t = (rk_tensor *)R_alloc(1, sizeof *t);
        rk_tensor_of(x, "x", single, t);
        *n = 1;
        return t;
    }
    SEXP names = Rf_getAttrib(x, R_NamesSymbol);
    *n = (size_t)XLENGTH(x);
    rk_tensor *t = (rk_tensor *)R_alloc(*n ? *n : 1, sizeof *t);
    for (size_t i = 0; i < *n; i++) {
        const char *name = names == R_NilValue ? "" : Rf_translateCharUTF8(STRING_ELT(names, (R_xlen_t)i));
        if (!*name || STRING_ELT(names, (R_xlen_t)i) == NA_STRING)
            rk_failf(CKPZ_ERR_PARAM, "element %zu of the list has no name", i + 1);
        rk_tensor_of(VECTOR_ELT(x, (R_xlen_t)i), name, single, &t[i]);
    }
    return t;
}

/* The tensor's values, row-major, in its element type, at dst. */
static void put_values(const rk_tensor *t, unsigned char *dst)
{
    int ok;
    uint64_t n = rk_elements(t->ndim, t->shape, &ok);
    if (t->dtype == CKPZ_DTYPE_F32) {
        float *f = (float *)R_alloc(n ? n : 1, sizeof *f);
        const double *v = REAL(t->x);
        for (uint64_t i = 0; i < n; i++) f[i] = (float)v[i];
        reverse_axes((unsigned char *)f, dst, 4, t->ndim, t->shape, n, 1);
    } else {
        void *v = t->dtype == CKPZ_DTYPE_F64 ? (void *)REAL(t->x) : (void *)INTEGER(t->x);
        reverse_axes((unsigned char *)v, dst, ckpz_dtype_size(t->dtype), t->ndim, t->shape, n, 1);
    }
}

/* Zero-length tensors go first: the library lists no zero-length tensor that ends the
 * file (ckpz -l leaves it out, and so would a read), so they are laid out before the
 * others, and an image of zero-length tensors only is refused. */
void *rk_image(const rk_tensor *in, size_t n, size_t *size)
{
    rk_tensor *t = (rk_tensor *)R_alloc(n ? n : 1, sizeof *t);
    size_t k = 0;
    int ok;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++)
            if ((rk_elements(in[i].ndim, in[i].shape, &ok) == 0) == (pass == 0)) t[k++] = in[i];
    if (n && rk_elements(t[n - 1].ndim, t[n - 1].shape, &ok) == 0)
        rk_failf(CKPZ_ERR_PARAM, "only zero-length arrays: a file keeps them only beside one that has elements");
    ckpz_st_tensor *st = (ckpz_st_tensor *)R_alloc(n ? n : 1, sizeof *st);
    for (size_t i = 0; i < n; i++) {
        memset(&st[i], 0, sizeof st[i]);
        st[i].name = t[i].name;
        st[i].dtype = t[i].dtype;
        st[i].ndim = t[i].ndim;
        st[i].shape = t[i].shape;
    }
    size_t len = 0;
    uint64_t data = 0;
    ckpz_error e = ckpz_safetensors_header(rk_ctx(), st, n, NULL, 0, NULL, 0, &len, &data);
    if (e) rk_fail(e, "safetensors header");
    if (data > SIZE_MAX - len) rk_failf(CKPZ_ERR_LIMIT, "the tensors do not fit in memory");
    unsigned char *img = (unsigned char *)R_alloc(len + (size_t)data + 1, 1);
    e = ckpz_safetensors_header(rk_ctx(), st, n, NULL, 0, img, len, &len, NULL);
    if (e) rk_fail(e, "safetensors header");
    size_t at = len;
    for (size_t i = 0; i < n; i++) {
        uint64_t ne = rk_elements(t[i].ndim, t[i].shape, &ok);
        put_values(&t[i], img + at);
        at += (size_t)ne * ckpz_dtype_size(t[i].dtype);
    }
    *size = at;
    return img;
}

/* ---- widening: through the library's type table (ckpz_dtype_to_double) ---------------- */

SEXP rk_value(const void *src, ckpz_dtype dt, uint32_t ndim, const uint64_t *shape, uint64_t n)
{
    SEXPTYPE type;
    switch (dt) {
    case CKPZ_DTYPE_I8:
    case CKPZ_DTYPE_U8:
    case CKPZ_DTYPE_I16:
    case CKPZ_DTYPE_U16:
    case CKPZ_DTYPE_I32: type = INTSXP; break;
    case CKPZ_DTYPE_BOOL: type = LGLSXP; break;
    default: type = REALSXP;
    }
    if (n > (uint64_t)R_XLEN_T_MAX)
        rk_failf(CKPZ_ERR_LIMIT, "%llu elements: more than an R vector holds", (unsigned long long)n);
    size_t esz = ckpz_dtype_size(dt);
    /* R order first, in the file's type, then widened into the R vector */
    unsigned char *r = (unsigned char *)R_alloc(n ? (size_t)n * esz : 1, 1);
    reverse_axes(r, (unsigned char *)src, esz, ndim, shape, n, 0);
    SEXP v = PROTECT(Rf_allocVector(type, (R_xlen_t)n));
    if (type == REALSXP && dt == CKPZ_DTYPE_F64) {
        if (n) memcpy(REAL(v), r, (size_t)n * 8);
    } else if (type == REALSXP) {
        if (ckpz_dtype_to_double(dt, r, (size_t)n, REAL(v))) rk_failf(CKPZ_ERR_PARAM, "type %d: no values", (int)dt);
    } else { /* types of at most 32 bits: exact as doubles */
        double *w = (double *)R_alloc(n ? (size_t)n : 1, sizeof(double));
        if (ckpz_dtype_to_double(dt, r, (size_t)n, w)) rk_failf(CKPZ_ERR_PARAM, "type %d: no values", (int)dt);
        int *d = type == INTSXP ? INTEGER(v) : LOGICAL(v);
        for (uint64_t i = 0; i < n; i++) d[i] = type == LGLSXP ? w[i] != 0 : (int)w[i];
    }
    if (ndim >= 2) {
        SEXP dim = PROTECT(Rf_allocVector(INTSXP, ndim));
        for (uint32_t i = 0; i < ndim; i++) {
            if (shape[i] > INT_MAX)
                rk_failf(CKPZ_ERR_LIMIT, "a dimension of %llu: more than R's dim holds", (unsigned long long)shape[i]);
            INTEGER(dim)[i] = (int)shape[i];
        }
        Rf_setAttrib(v, R_DimSymbol, dim);
        UNPROTECT(1);
    }
    UNPROTECT(1);
    return v;
}
