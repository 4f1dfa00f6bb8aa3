checkpoint <- function() {
  set.seed(7)
  list(
    "model.w" = matrix(rnorm(128 * 96), 128, 96),
    "model.bias" = rnorm(96),
    "optim.exp_avg.model.w" = matrix(rnorm(128 * 96) * 1e-3, 128, 96),
    "optim.step" = 300L,
    "rng" = .Random.seed,
    "lr" = 1e-3
  )
}

test_that("ckpz_write / ckpz_read round trip a checkpoint exactly", {
  f <- tempfile(fileext = ".ckpz")
  on.exit(unlink(f))
  ck <- checkpoint()
  st <- ckpz_write(ck, f, threads = 2)
  expect_true(file.exists(f))
  expect_equal(unname(st["compressed_bytes"]), file.size(f))
  expect_identical(ckpz_read(f), ck)
  expect_true(ckpz_test(f))
  l <- ckpz_list(f)
  expect_setequal(l$name[l$dtype != "bytes"], names(ck))
  expect_identical(attr(l, "format"), "safetensors")
  expect_identical(l$shape[l$name == "model.w"], "128x96")
  expect_identical(l$dtype[l$name == "optim.step"], "i32")
})

test_that("an existing file is refused without overwrite = TRUE, and left as it was", {
  f <- tempfile(fileext = ".ckpz")
  on.exit(unlink(f))
  writeLines("keep me", f)
  e <- expect_error(ckpz_write(list(a = 1), f), class = "ckpz_error")
  expect_match(conditionMessage(e), "already exists")
  expect_identical(readLines(f), "keep me")
  ckpz_write(list(a = 1), f, overwrite = TRUE)
  expect_identical(ckpz_read(f), list(a = 1))
  expect_error(ckpz_write(list(a = 1), tempdir(), overwrite = TRUE), "is a directory")
})

test_that("a failed write leaves no file and no temporary file", {
  d <- tempfile()
  dir.create(d)
  on.exit(unlink(d, recursive = TRUE))
  f <- file.path(d, "x.ckpz")
  expect_error(ckpz_write(list(w = matrix(1, 2, 2)), f, policy = "* nonsense"), class = "ckpz_error")
  expect_identical(list.files(d, all.files = TRUE, no.. = TRUE), character(0))
  expect_error(ckpz_write(list(w = "a"), f), "not a double or integer")
  expect_error(ckpz_write(list(1, 2), f), "named list")
  expect_error(ckpz_write(list(a = 1, a = 2), f), "given twice")
  expect_identical(list.files(d, all.files = TRUE, no.. = TRUE), character(0))
  expect_error(ckpz_write(list(a = 1), file.path(d, "no", "such", "dir.ckpz")), class = "ckpz_error")
})

test_that("lossy files keep every element within its bound; vectors and integers exact", {
  f <- tempfile(fileext = ".ckpz")
  on.exit(unlink(f))
  ck <- checkpoint()
  ckpz_write(ck, f, abs = 1e-4)
  back <- ckpz_read(f)
  expect_true(all(abs(back[["model.w"]] - ck[["model.w"]]) <= 1e-4))
  expect_false(identical(back[["model.w"]], ck[["model.w"]]))
  for (n in c("model.bias", "optim.step", "rng", "lr")) expect_identical(back[[n]], ck[[n]], info = n)
  l <- ckpz_list(f)
  expect_true(l$lossy[l$name == "model.w"])
  expect_true(ckpz_test(f))
})

test_that("corrupt, truncated and missing files raise errors naming the file", {
  f <- tempfile(fileext = ".ckpz")
  on.exit(unlink(f))
  ckpz_write(checkpoint(), f)
  z <- readBin(f, "raw", file.size(f))
  writeBin(flip(z, length(z) %/% 3), f)
  for (fn in list(ckpz_read, ckpz_test)) {
    e <- expect_error(fn(f), class = "ckpz_error")
    expect_match(conditionMessage(e), basename(f), fixed = TRUE)
  }
  writeBin(z[seq_len(length(z) - 7)], f)
  for (fn in list(ckpz_read, ckpz_test, ckpz_list)) {
    e <- expect_error(fn(f), class = "ckpz_error")
    expect_match(conditionMessage(e), basename(f), fixed = TRUE)
  }
  e <- expect_error(ckpz_read(file.path(tempdir(), "no-such-file.ckpz")), class = "ckpz_error")
  expect_match(conditionMessage(e), "no-such-file.ckpz: No such file")
  expect_error(ckpz_read(tempdir()), "is a directory")
})

test_that("the CLI lists, tests and restores what R wrote", {
  f <- tempfile(fileext = ".ckpz")
  out <- tempfile(fileext = ".safetensors")
  on.exit(unlink(c(f, out)))
  ck <- checkpoint()
  ckpz_write(ck, f)
  res <- run_cli("-l", f)
  expect_equal(res$status, 0L)
  expect_true(any(grepl("model.w", res$out, fixed = TRUE)))
  expect_equal(run_cli("-t", f)$status, 0L)
  expect_equal(run_cli("-d", "-o", out, f)$status, 0L)
  # the restored safetensors file, compressed again by the CLI, reads back the same
  f2 <- tempfile(fileext = ".ckpz")
  on.exit(unlink(f2), add = TRUE)
  expect_equal(run_cli("-o", f2, out)$status, 0L)
  expect_identical(ckpz_read(f2), ck)
})

test_that("ckpz_read opens what the CLI made from safetensors, BF16 widened", {
  f32 <- sample_file("gpt-small.f32.safetensors")
  bf16 <- sample_file("gpt-small.bf16.safetensors")
  d <- tempfile()
  dir.create(d)
  on.exit(unlink(d, recursive = TRUE))
  z32 <- file.path(d, "f32.ckpz")
  z16 <- file.path(d, "bf16.ckpz")
  expect_equal(run_cli("-o", z32, f32)$status, 0L)
  expect_equal(run_cli("-o", z16, bf16)$status, 0L)
  a <- ckpz_read(z32)
  b <- ckpz_read(z16)
  l <- ckpz_list(z32)
  w <- "transformer.h.0.attn.c_attn.weight"
  e <- l[l$name == w, ]
  # against the original file's bytes read with readBin, in the shape the file gives
  expect_identical(a[[w]], read_f32(f32, e))
  expect_identical(dim(a[[w]]), as.integer(strsplit(e$shape, "x")[[1]]))
  expect_true(is.double(b[[w]]))
  expect_identical(dim(b[[w]]), dim(a[[w]]))
  # BF16 is FP32 rounded to 8 significant bits
  expect_lte(max(abs(b[[w]] - a[[w]]) / pmax(abs(a[[w]]), 1e-30)), 2^-8)
  expect_setequal(names(b), intersect(names(a), names(b)))
  p <- ckpz_predict(f32)
  expect_gt(p$ratio, 1)
  expect_equal(nrow(p$tensors), 120)
})

test_that("ckpz_read opens what the CLI made from a torch.save archive, FP16/BF16 widened", {
  # fixtures/torch-small.pt.ckpz: `ckpz torch-small.pt` of torch.save({"w": w, "h":
  # w[:2, :3].half(), "b": w[:2, :3].bfloat16(), "step": torch.tensor(5)}), w randn(3, 4)
  f <- test_path("fixtures", "torch-small.pt.ckpz")
  x <- ckpz_read(f)
  expect_setequal(names(x), c("w", "h", "b", "step"))
  expect_identical(dim(x$w), c(3L, 4L))
  expect_identical(dim(x$h), c(2L, 3L))
  ref <- x$w[1:2, 1:3]
  expect_lte(max(abs(x$h - ref) / abs(ref)), 2^-11)
  expect_lte(max(abs(x$b - ref) / abs(ref)), 2^-8)
  expect_false(identical(x$h, ref))
  expect_identical(x$step, 5) # int64: a double
  l <- ckpz_list(f)
  expect_identical(attr(l, "format"), "torch")
  expect_identical(l$dtype[match(c("h", "b", "step"), l$name)], c("f16", "bf16", "i64"))
  expect_true(ckpz_test(f))
})

test_that("a raw dump the CLI coded with --dtype and --shape reads as its array", {
  d <- tempfile()
  dir.create(d)
  on.exit(unlink(d, recursive = TRUE))
  raw_file <- file.path(d, "dump.bin")
  v <- as.double(1:1000) / 8 # exact in float32
  writeBin(v, raw_file, size = 4L, endian = "little")
  expect_equal(run_cli("-q", "--dtype", "f32", "--shape", "10x100", raw_file)$status, 0L)
  z <- readBin(paste0(raw_file, ".ckpz"), "raw", 1e6)
  x <- ckpz_decompress(z)
  expect_identical(dim(x), c(10L, 100L))
  expect_identical(x, matrix(v, 10, 100, byrow = TRUE))
  expect_identical(unname(ckpz_read(z)), list(x))
})
