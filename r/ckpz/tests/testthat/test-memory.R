test_that("lossless round trips are bit-exact, dims kept", {
  set.seed(1)
  cases <- list(
    m = matrix(rnorm(6000), 60, 100),
    a = array(as.double(1:120) / 7, c(2, 3, 4, 5)),
    i = array(c(1:23, NA), c(2, 3, 4)),
    v = rnorm(1000),
    int = c(-5L, NA, .Machine$integer.max, 0L),
    special = c(1, NA, NaN, Inf, -Inf, -0, .Machine$double.xmin / 4),
    one = 3.5,
    one_int = 7L,
    one_m = matrix(2.5, 1, 1)
  )
  for (n in names(cases)) {
    x <- cases[[n]]
    z <- ckpz_compress(x, threads = 2)
    expect_true(is.raw(z), info = n)
    expect_identical(ckpz_decompress(z), x, info = n)
  }
  # zero-length arrays: kept in a file beside others (laid out first: the library
  # lists no zero-length tensor that ends a file); alone, refused with a clear error
  f <- tempfile()
  on.exit(unlink(f))
  ck <- list(a = 1, e = numeric(0), m = matrix(0L, 0, 3), z = integer(0))
  ckpz_write(ck, f)
  back <- ckpz_read(f)
  expect_identical(back[names(ck)], ck)
  expect_identical(names(back), c("e", "m", "z", "a"))
  expect_error(ckpz_compress(numeric(0)), "only zero-length", class = "ckpz_error")
  nan <- ckpz_decompress(ckpz_compress(c(NA_real_, NaN)))
  expect_true(is.na(nan[1]) && !is.nan(nan[1]), info = "NA stays NA, not NaN")
  expect_true(is.nan(nan[2]))
})

test_that("raw vectors round trip, empty and one byte included", {
  for (r in list(as.raw(0:255), raw(0), as.raw(7), as.raw(rep(1:3, 10000)))) {
    expect_identical(ckpz_decompress(ckpz_compress(r)), r)
  }
  r <- as.raw(rep(0, 1e5))
  expect_lt(length(ckpz_compress(r)), 1000)
})

test_that("R arrays are stored with their own shape, element [i, j] where R has it", {
  m <- matrix(as.double(1:6), 2, 3)
  l <- ckpz_list(ckpz_compress(m))
  expect_identical(l$shape[l$name == "x"], "2x3")
  # the file is row-major: the CLI restores the rows 1 3 5 and 2 4 6
  f <- tempfile()
  out <- tempfile()
  on.exit(unlink(c(f, out)))
  ckpz_write(list(m = m), f)
  expect_equal(run_cli("-d", "-o", out, f)$status, 0L)
  e <- ckpz_list(f)
  e <- e[e$name == "m", ]
  con <- file(out, "rb")
  seek(con, e$offset)
  v <- readBin(con, "double", 6L, endian = "little")
  close(con)
  expect_identical(v, c(1, 3, 5, 2, 4, 6))
  a <- array(as.double(1:24), c(2, 3, 4))
  expect_identical(ckpz_list(ckpz_compress(a))$shape[2], "2x3x4")
})

test_that("dtype = 'f32' stores doubles as float32, widened back to double", {
  set.seed(2)
  m <- matrix(rnorm(4096), 64, 64)
  z <- ckpz_compress(m, dtype = "f32")
  d <- ckpz_decompress(z)
  expect_identical(dim(d), dim(m))
  expect_false(identical(d, m))
  expect_lte(max(abs(d - m) / abs(m)), 2^-24)
  expect_identical(ckpz_list(z)$dtype[2], "f32")
})

test_that("lossy modes keep every element within its bound", {
  set.seed(3)
  m <- matrix(rnorm(64 * 256, 0.02, 0.15), 64, 256)
  m[5, 7] <- NaN
  m[6, 8] <- Inf
  for (e in c(1e-2, 1e-4)) {
    d <- ckpz_decompress(ckpz_compress(m, abs = e))
    expect_true(all(abs(d - m) <= e, na.rm = TRUE))
    expect_true(is.nan(d[5, 7]))
    expect_identical(d[6, 8], Inf)
  }
  r <- 1e-3
  fin <- m[is.finite(m)]
  d <- ckpz_decompress(ckpz_compress(m, rel = r))
  expect_true(all(abs(d - m) <= r * (max(fin) - min(fin)), na.rm = TRUE))
  z16 <- ckpz_compress(m, bits = 16, block = 64, col_delta = TRUE)
  d <- ckpz_decompress(z16)
  expect_true(all(is.finite(d[is.finite(m)])))
  # the listing's own figures are the elementwise ones
  l <- ckpz_list(z16)
  i <- which(l$name == "x")
  expect_true(l$lossy[i])
  expect_equal(l$max_error[i], max(abs(d - m), na.rm = TRUE), tolerance = 1e-6)
  expect_lt(l$max_error[i], 0.01)
  d8 <- ckpz_decompress(ckpz_compress(m, bits = 8, block = 64))
  expect_gt(max(abs(d8 - m), na.rm = TRUE), max(abs(d - m), na.rm = TRUE))
  dz <- ckpz_decompress(ckpz_compress(m, int8 = TRUE, prune = 0.3))
  expect_gte(mean(dz == 0, na.rm = TRUE), 0.29)
})

test_that("max_mae falls back to lossless above it", {
  set.seed(4)
  m <- matrix(rnorm(64 * 64), 64, 64)
  d <- ckpz_decompress(ckpz_compress(m, int8 = TRUE, max_mae = 1e-12))
  expect_identical(d, m)
})

test_that("vectors and integers stay lossless under a lossy mode", {
  v <- rnorm(500)
  expect_identical(ckpz_decompress(ckpz_compress(v, abs = 0.1)), v)
  i <- matrix(1:100, 10)
  expect_identical(ckpz_decompress(ckpz_compress(i, abs = 0.1)), i)
})

test_that("corrupt and truncated input raise a ckpz_error naming what failed", {
  set.seed(5)
  z <- ckpz_compress(matrix(rnorm(20000), 100))
  e <- expect_error(ckpz_decompress(flip(z, length(z) %/% 2)), class = "ckpz_error")
  expect_match(conditionMessage(e), "raw vector: .*(checksum|corrupt)")
  expect_match(conditionMessage(e), "tensor 'x'")
  for (n in c(0L, 1L, 31L, length(z) %/% 2, length(z) - 1L)) {
    e <- expect_error(ckpz_decompress(z[seq_len(n)]), class = "ckpz_error")
    expect_match(conditionMessage(e), "^raw vector: ")
  }
  # every byte flipped in turn: an error or the exact value, never a crash
  small <- ckpz_compress(matrix(as.double(1:64), 8))
  for (i in seq_along(small)) {
    r <- tryCatch(ckpz_decompress(flip(small, i)), ckpz_error = function(e) "error")
    expect_true(identical(r, "error") || identical(r, matrix(as.double(1:64), 8)), info = i)
  }
  expect_error(ckpz_decompress(as.raw(1:100)), class = "ckpz_error")
  expect_error(ckpz_decompress(1:3), "raw vector")
})

test_that("bad arguments are refused", {
  expect_error(ckpz_compress("a"), "raw, double or integer")
  expect_error(ckpz_compress(list(1)), "raw, double or integer")
  expect_error(ckpz_compress(1, level = 0), "level")
  expect_error(ckpz_compress(1, level = 10), class = "ckpz_error")
  expect_error(ckpz_compress(1, abs = 1, rel = 1), "one of")
  expect_error(ckpz_compress(1, bits = 4), "8 or 16")
  expect_error(ckpz_compress(1, col_delta = TRUE), "need a mode")
  expect_error(ckpz_compress(matrix(1, 2, 2), policy = "* nonsense 3"), class = "ckpz_error")
})

test_that("ckpz_predict gives the library's predicted ratio", {
  set.seed(6)
  m <- matrix(rnorm(256 * 256), 256)
  # the model is trained on narrow floats (f64 is predicted poorly: doc/r.md)
  p <- ckpz_predict(m, dtype = "f32")
  expect_true(is.numeric(p$ratio) && p$ratio > 1)
  expect_equal(p$savings, 1 - 1 / p$ratio, tolerance = 1e-6)
  expect_identical(p$tensors$name, "x")
  lossy <- ckpz_predict(m, dtype = "f32", bits = 8)
  expect_gt(lossy$ratio, p$ratio)
  expect_identical(lossy$tensors$mode, "affine")
  actual <- length(m) * 4 / length(ckpz_compress(m, dtype = "f32"))
  expect_lt(abs(p$ratio - actual) / actual, 0.1)
})
