# Errors: every failure of the library (and the package's own refusals) is raised as a
# condition of class c("ckpz_error", "error", "condition") by src/init.c, carrying the
# library's error code (code: 9, kind: "CKPZ_ERR_CORRUPT") and its message, which names
# the file, chunk and tensor where the library knows them.
.ckpz_stop <- function(code, kind, message) {
  cond <- structure(class = c("ckpz_error", "error", "condition"),
                    list(message = message, call = NULL, code = code, kind = kind))
  stop(cond)
}
