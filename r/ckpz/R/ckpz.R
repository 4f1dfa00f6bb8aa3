# The R front end of libckpz: argument checks and the lossy options' policy text here,
# every coding step in the library (src/). See doc/r.md in the ckpz source tree.

.count <- function(x, what, min = 0L) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < min || x != round(x))
    stop(sprintf("%s must be a whole number >= %d", what, min), call. = FALSE)
  as.integer(x)
}

.positive <- function(x, what) {
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x) || x <= 0)
    stop(sprintf("%s must be a positive number", what), call. = FALSE)
  x
}

.fmt <- function(x) format(x, digits = 17, scientific = TRUE)

# The policy text (doc/lossy.md) of the lossy arguments: the caller's rules first, then
# one catch-all rule for the mode named by an argument, as the CLI's flags make it.
.policy <- function(abs = NULL, rel = NULL, bits = NULL, block = NULL, col_delta = FALSE,
                    int8 = NULL, prune = NULL, pct = NULL, policy = NULL) {
  given <- c(abs = !is.null(abs), rel = !is.null(rel), bits = !is.null(bits),
             int8 = !is.null(int8) && !isFALSE(int8))
  if (sum(given) > 1L)
    stop("give one of abs, rel, bits and int8 (or a policy)", call. = FALSE)
  rule <- NULL
  if (given[["abs"]]) rule <- paste("abs", .fmt(.positive(abs, "abs")))
  if (given[["rel"]]) rule <- paste("rel", .fmt(.positive(rel, "rel")))
  if (given[["bits"]]) {
    if (!(identical(as.numeric(bits), 8) || identical(as.numeric(bits), 16)))
      stop("bits must be 8 or 16", call. = FALSE)
    rule <- paste("bits", as.integer(bits))
  }
  if (given[["int8"]]) {
    if (isTRUE(int8)) rule <- "int8"
    else if (identical(int8, "sym") || identical(int8, "asym")) rule <- paste("int8", int8)
    else stop("int8 must be TRUE, \"sym\" or \"asym\"", call. = FALSE)
  }
  if (is.null(rule) && (!is.null(block) || isTRUE(col_delta) || !is.null(prune) || !is.null(pct)))
    stop("block, col_delta, prune and pct need a mode: abs, rel, bits or int8", call. = FALSE)
  if (!is.null(rule)) {
    if (!is.null(block)) rule <- paste(rule, "block", .count(block, "block", 1L))
    if (isTRUE(col_delta)) rule <- paste(rule, "delta")
    if (!is.null(prune)) rule <- paste(rule, "prune", .fmt(.positive(prune, "prune")))
    if (!is.null(pct)) rule <- paste(rule, "pct", .fmt(.positive(pct, "pct")))
    rule <- paste("*", rule)
  }
  if (!is.null(policy) && (!is.character(policy) || anyNA(policy)))
    stop("policy must be text: rules, one per line (doc/lossy.md)", call. = FALSE)
  rules <- c(policy, rule)
  if (!length(rules)) NULL else paste(rules, collapse = "\n")
}

.dtype <- function(dtype) {
  dtype <- match.arg(dtype, c("f64", "f32"))
  identical(dtype, "f32")
}

.path <- function(path) {
  if (!is.character(path) || length(path) != 1L || is.na(path) || !nzchar(path))
    stop("path must be one file name", call. = FALSE)
  path
}

.source <- function(x) {
  if (is.raw(x)) x else .path(x)
}

.mae <- function(max_mae) if (is.null(max_mae)) NULL else .positive(max_mae, "max_mae")

ckpz_version <- function() .Call(C_version)

ckpz_compress <- function(x, level = 3L, threads = 0L, dtype = c("f64", "f32"),
                          abs = NULL, rel = NULL, bits = NULL, block = NULL, col_delta = FALSE,
                          int8 = NULL, prune = NULL, pct = NULL, max_mae = NULL, policy = NULL) {
  if (!(is.raw(x) || is.double(x) || (is.integer(x) && !is.factor(x))))
    stop("x must be a raw, double or integer vector, matrix or array", call. = FALSE)
  .Call(C_compress, x, .count(level, "level", 1L), .count(threads, "threads"), .dtype(dtype),
        .policy(abs, rel, bits, block, col_delta, int8, prune, pct, policy), .mae(max_mae))
}

ckpz_decompress <- function(raw, threads = 0L) {
  if (!is.raw(raw)) stop("raw must be a raw vector (what ckpz_compress returned)", call. = FALSE)
  .Call(C_decompress, raw, .count(threads, "threads"))
}

.checkpoint <- function(obj) {
  if (!is.list(obj) || is.data.frame(obj) || is.null(names(obj)) || anyNA(names(obj)) ||
      !all(nzchar(names(obj))))
    stop("obj must be a named list of numeric vectors, matrices and arrays", call. = FALSE)
  if (anyDuplicated(names(obj)))
    stop(sprintf("obj: the name '%s' is given twice", names(obj)[anyDuplicated(names(obj))]),
         call. = FALSE)
  obj
}

ckpz_write <- function(obj, path, overwrite = FALSE, level = 3L, threads = 0L,
                       dtype = c("f64", "f32"), abs = NULL, rel = NULL, bits = NULL,
                       block = NULL, col_delta = FALSE, int8 = NULL, prune = NULL, pct = NULL,
                       max_mae = NULL, policy = NULL) {
  r <- .Call(C_write, .checkpoint(obj), .path(path), isTRUE(overwrite), .count(level, "level", 1L),
             .count(threads, "threads"), .dtype(dtype),
             .policy(abs, rel, bits, block, col_delta, int8, prune, pct, policy), .mae(max_mae))
  invisible(r)
}

ckpz_read <- function(path, threads = 0L) {
  .Call(C_read, .source(path), .count(threads, "threads"))
}

ckpz_list <- function(path) {
  cols <- .Call(C_list, .source(path))
  info <- attr(cols, "info")
  format <- attr(cols, "format")
  df <- as.data.frame(unclass(cols)[seq_along(cols)], stringsAsFactors = FALSE)
  attr(df, "info") <- info
  attr(df, "format") <- format
  df
}

ckpz_test <- function(path, threads = 0L) {
  invisible(.Call(C_test, .source(path), .count(threads, "threads")) >= 0)
}

ckpz_predict <- function(x, level = 3L, dtype = c("f64", "f32"), abs = NULL, rel = NULL,
                         bits = NULL, block = NULL, col_delta = FALSE, int8 = NULL,
                         prune = NULL, pct = NULL, max_mae = NULL, policy = NULL) {
  if (is.character(x)) x <- .path(x)
  else if (is.list(x)) x <- .checkpoint(x)
  else if (!(is.double(x) || is.integer(x)))
    stop("x must be a numeric array, a named list of them, or a file name", call. = FALSE)
  r <- .Call(C_predict, x, .count(level, "level", 1L), .dtype(dtype),
             .policy(abs, rel, bits, block, col_delta, int8, prune, pct, policy), .mae(max_mae))
  r$tensors <- as.data.frame(r$tensors, stringsAsFactors = FALSE)
  r
}
