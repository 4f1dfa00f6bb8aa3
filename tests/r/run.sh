#!/bin/sh
# The R package's tests (r/ckpz/tests/testthat), as `make test` runs them: the package is
# copied into the build folder (R CMD INSTALL writes its objects beside its sources, and
# the checkout stays clean), installed into a library there against this build's libckpz
# (CKPZ_CFLAGS / CKPZ_LIBS, read by r/ckpz/configure), and tested with the build's CLI and
# the checkout's samples/. Exits 77 (skipped, saying why) where R or testthat is missing.
# usage: run.sh SOURCE_DIR BUILD_DIR CKPZ_CLI
set -e
src=$1 build=$2 cli=$3
if ! command -v R >/dev/null 2>&1 || ! command -v Rscript >/dev/null 2>&1; then
    echo "R is not installed: the R package's tests are skipped (scripts/install-deps installs r-base-dev and r-cran-testthat)"
    exit 77
fi
if ! Rscript -e 'quit(status = if (requireNamespace("testthat", quietly = TRUE)) 0 else 1)' >/dev/null 2>&1; then
    echo "the R package testthat is missing: the R package's tests are skipped (scripts/install-deps installs r-cran-testthat)"
    exit 77
fi
work=$build/r-package
rm -rf "$work"
mkdir -p "$work/lib"
cp -R "$src/r/ckpz" "$work/ckpz"
rm -f "$work"/ckpz/src/*.o "$work"/ckpz/src/*.so "$work"/ckpz/src/Makevars
CKPZ_CFLAGS="-I$src/include" CKPZ_LIBS="-L$build -Wl,-rpath,$build -lckpz" \
    R CMD INSTALL --no-docs --no-html -l "$work/lib" "$work/ckpz" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; exit 1; }
cd "$work/ckpz/tests"
CKPZ_CLI=$cli CKPZ_SAMPLES=$src/samples R_LIBS="$work/lib" Rscript testthat.R
