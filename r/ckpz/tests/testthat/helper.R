# Where the tests find the command line tool and the sample checkpoints of the ckpz
# checkout: CKPZ_CLI and CKPZ_SAMPLES (the ctest test r_package sets both); tests that
# need them are skipped, saying why, without them.
cli <- function() {
  p <- Sys.getenv("CKPZ_CLI")
  if (!nzchar(p) || !file.exists(p)) skip("CKPZ_CLI is not set to the ckpz command line tool")
  p
}

sample_file <- function(name) {
  d <- Sys.getenv("CKPZ_SAMPLES")
  p <- file.path(d, name)
  if (!nzchar(d) || !file.exists(p)) skip("CKPZ_SAMPLES is not set to ckpz's samples/ folder")
  p
}

run_cli <- function(...) {
  out <- suppressWarnings(system2(cli(), c(...), stdout = TRUE, stderr = TRUE))
  status <- attr(out, "status")
  list(status = if (is.null(status)) 0L else status, out = out)
}

# A copy of z with the byte at position i flipped.
flip <- function(z, i) {
  z[i] <- xor(z[i], as.raw(0x40))
  z
}

# The tensor `name` of a safetensors file read with readBin alone, at the offset and
# length ckpz_list gives for it, as an R array of its shape (row-major in the file).
read_f32 <- function(path, entry) {
  con <- file(path, "rb")
  on.exit(close(con))
  seek(con, entry$offset)
  v <- readBin(con, "numeric", n = entry$length / 4, size = 4, endian = "little")
  shape <- as.integer(strsplit(entry$shape, "x")[[1]])
  if (length(shape) < 2) return(v)
  aperm(array(v, rev(shape)), rev(seq_along(shape)))
}
