/* rckpz.h — what the R package's C files share: the one context, errors raised as R
 * conditions, and the conversion between R objects and tensors.
 *
 * The package is a front end over the public API only: every coding step is a call
 * into libckpz. What lives here is what R needs and C does not: R's column-major arrays
 * put in the row-major order a tensor file holds (and back), R's doubles and integers
 * named as tensor element types, and narrow types widened to double on the way in
 * (R has no float32, float16 or bfloat16). */
#ifndef RCKPZ_H
#define RCKPZ_H

#define CKPZ_EXPERIMENTAL
#include <ckpz.h>

#include <R.h>
#include <Rinternals.h>

/* The package's context, created on first use and freed when the package unloads:
 * R calls the library from one thread, and a kept context saves each call its set-up. */
ckpz_ctx *rk_ctx(void);
void rk_ctx_release(void);

/* Raises an R condition of class ckpz_error (R/errors.R) for the failure `code`: the
 * context's message (or the code's text) after `what` (a path, a function's name). Never
 * returns: free what the call holds first. */
void NORET rk_fail(ckpz_error code, const char *what);
/* The same for the package's own refusals, with a printf-style message. */
void NORET rk_failf(ckpz_error code, const char *fmt, ...);

/* A ckpz_progress_fn that lets Ctrl-C stop a long call: it asks R for a pending
 * interrupt without letting R jump out of the library (R_ToplevelExec), and returns
 * non-zero so that the library stops cleanly (CKPZ_ERR_ABORTED, reported as
 * "interrupted"). Set as every source's progress. */
int rk_progress(void *opaque, uint64_t done, uint64_t total);

/* One tensor of an R object: its name, element type and shape (outermost first, as in
 * the file), and the R vector that holds its values. */
typedef struct rk_tensor {
    const char *name;
    ckpz_dtype dtype;
    uint32_t ndim;
    uint64_t *shape;
    SEXP x;
} rk_tensor;

/* A safetensors image of the n tensors t (the library's header writer, then each
 * tensor's values in row-major order) in memory from R_alloc (freed when the .Call
 * returns, even on error). */
void *rk_image(const rk_tensor *t, size_t n, size_t *size);
/* The tensor an R value makes under `name`: doubles as f64 (f32 when single is set),
 * integers as i32; dims as the shape, a vector of one element without dims as a scalar. */
void rk_tensor_of(SEXP x, const char *name, int single, rk_tensor *t);

/* The tensors of x: a named list's elements under their names, or x itself as "x". */
rk_tensor *rk_tensors(SEXP x, int single, size_t *n);

/* Opens path read-only, a regular file only (a FIFO or a device is refused without
 * blocking on it); returns the descriptor and *size. */
int rk_open_regular(const char *path, uint64_t *size);

/* An R value from n elements of type dt in row-major order at src, of the given shape:
 * doubles for float and wide integer types, integers for the narrow ones, logicals
 * for bool; dims set for two dimensions or more. */
SEXP rk_value(const void *src, ckpz_dtype dt, uint32_t ndim, const uint64_t *shape, uint64_t n);

/* Elements of a shape; 0 with *ok = 0 when the product overflows. */
uint64_t rk_elements(uint32_t ndim, const uint64_t *shape, int *ok);

#endif
