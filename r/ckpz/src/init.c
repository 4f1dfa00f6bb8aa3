/* init.c — the package's routine table, its context and its errors.
 *
 * Routines are registered (R_registerRoutines, no dynamic symbol lookup), so R calls them
 * only as the table says. Failures become R conditions of class c("ckpz_error", "error",
 * "condition") built by R/errors.R from the library's code and message, so R code can
 * tell a checksum mismatch from a missing file with tryCatch. */
#include "rckpz.h"

#include <R_ext/Rdynload.h>
#include <stdarg.h>
#include <stdio.h>

SEXP rk_compress(SEXP x, SEXP level, SEXP threads, SEXP single, SEXP policy, SEXP max_mae);
SEXP rk_decompress(SEXP raw, SEXP threads);
SEXP rk_write(SEXP obj, SEXP path, SEXP overwrite, SEXP level, SEXP threads, SEXP single, SEXP policy, SEXP max_mae);
SEXP rk_read(SEXP src, SEXP threads);
SEXP rk_list(SEXP src);
SEXP rk_test(SEXP src, SEXP threads);
SEXP rk_predict(SEXP src, SEXP level, SEXP single, SEXP policy, SEXP max_mae);
SEXP rk_version(void);

static ckpz_ctx *g_ctx;

ckpz_ctx *rk_ctx(void)
{
    if (!g_ctx) g_ctx = ckpz_ctx_create();
    if (!g_ctx) Rf_error("ckpz: out of memory (creating a context)");
    return g_ctx;
}

void rk_ctx_release(void)
{
    ckpz_ctx_free(g_ctx);
    g_ctx = NULL;
}

static void check_interrupt(void *unused)
{
    (void)unused;
    R_CheckUserInterrupt();
}

int rk_progress(void *opaque, uint64_t done, uint64_t total)
{
    (void)opaque;
    (void)done;
    (void)total;
    return R_ToplevelExec(check_interrupt, NULL) == FALSE;
}

static const char *code_name(ckpz_error code)
{
    switch (code) {
#define CKPZ_X_NAME(name, num, text) \
    case name: return #name;
        CKPZ_ERROR_LIST(CKPZ_X_NAME)
#undef CKPZ_X_NAME
    default: return "CKPZ_ERR_UNKNOWN";
    }
}

static void NORET raise(ckpz_error code, const char *msg)
{
    SEXP ns = PROTECT(R_FindNamespace(Rf_mkString("ckpz")));
    SEXP call = PROTECT(Rf_lang4(Rf_install(".ckpz_stop"), Rf_ScalarInteger((int)code), Rf_mkString(code_name(code)),
                                 Rf_ScalarString(Rf_mkCharCE(msg, CE_UTF8))));
    Rf_eval(call, ns);
    Rf_error("%s", msg); /* .ckpz_stop does not return */
}

void rk_fail(ckpz_error code, const char *what)
{
    char buf[4096];
    const char *m = g_ctx ? ckpz_ctx_message(g_ctx) : "";
    if (code == CKPZ_ERR_ABORTED) m = "interrupted";
    if (!m || !*m) m = ckpz_error_name(code);
    if (what) snprintf(buf, sizeof buf, "%s: %s", what, m);
    else snprintf(buf, sizeof buf, "%s", m);
    raise(code, buf);
}

void rk_failf(ckpz_error code, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    raise(code, buf);
}

SEXP rk_version(void) { return Rf_mkString(ckpz_version_string()); }

/* Through void (*)(void), the one function type GCC lets any other convert to without a
 * warning: R's table holds every routine as a DL_FUNC and calls it with its arity. */
/* clang-format off */
#define CALL(name, fn, n) {#name, (DL_FUNC)(void (*)(void))&fn, n}
/* clang-format on */
static const R_CallMethodDef calls[] = {
    CALL(compress, rk_compress, 6),
    CALL(decompress, rk_decompress, 2),
    CALL(write, rk_write, 8),
    CALL(read, rk_read, 2),
    CALL(list, rk_list, 1),
    CALL(test, rk_test, 2),
    CALL(predict, rk_predict, 5),
    CALL(version, rk_version, 0),
    {NULL, NULL, 0},
};

void R_init_ckpz(DllInfo *dll)
{
    R_registerRoutines(dll, NULL, calls, NULL, NULL);
    R_useDynamicSymbols(dll, FALSE);
    R_forceSymbols(dll, TRUE);
}

void R_unload_ckpz(DllInfo *dll)
{
    (void)dll;
    rk_ctx_release();
}
