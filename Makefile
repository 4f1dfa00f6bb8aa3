# Thin front end over CMake. `make` builds; `make demo` and `make test` first install
# what is missing (scripts/install-deps), so they work on a fresh Debian machine.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build deps demo test test-quick fresh-debian check install asan fuzz fuzz-ci bench peers format format-check clean

all: build

# The build folder counts as configured once CMake has written its Makefile; a configure
# that fails (a missing compiler, say) removes its cache, so the next `make` starts over
# instead of failing on a half-made folder.
$(BUILD)/Makefile:
	@cmake -S . -B $(BUILD) -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) || { rm -f $(BUILD)/CMakeCache.txt; exit 1; }

build: $(BUILD)/Makefile
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

deps:
	@scripts/install-deps

demo: deps
	@$(MAKE) --no-print-directory build
	scripts/demo $(BUILD)/ckpz

# The whole suite: 15-25 minutes on two cores. The Python tests run twice: under
# Debian's torch 1.13 over the checkout, and (NAME_torch2) under torch 2.13.0 over the
# copy that scripts/torch2-venv pip-installs into $(BUILD)/torch2-venv. After ctest,
# scripts/test-skips lists what was skipped and why, then ctest's summary again.
test: SHELL := /bin/bash
test: deps
	@$(MAKE) --no-print-directory build
	scripts/torch2-venv $(BUILD)/torch2-venv
	@cd $(BUILD) && set -o pipefail && { ctest --output-on-failure -j $(JOBS) 2>&1 | tee ctest-output.txt; rc=$$?; \
	  ../scripts/test-skips Testing/Temporary/LastTest.log ctest-output.txt; exit $$rc; }

# The edit loop: everything but the slowest tests (about a minute on two cores).
SLOW_TESTS = ^(test_corrupt|cli_list_test_extract|python_delta|python_frontdoor|python_distributed|cli_signals|python_pip_install|python_hostile|python_fuzz_replay|python_unpickle)(_torch2)?$$
test-quick: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -E '$(SLOW_TESTS)'

# The README's commands on a bare Debian root (debootstrap minbase; needs root and
# Debian's mirror; 15-30 minutes): scripts/fresh-debian. DEBIAN=trixie for Debian 13.
DEBIAN ?= bookworm
fresh-debian:
	scripts/fresh-debian $(DEBIAN)

# Tests under AddressSanitizer and UndefinedBehaviorSanitizer.
asan:
	$(MAKE) BUILD=build-asan CMAKE_FLAGS="-DCKPZ_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" build
	cd build-asan && ctest --output-on-failure -j $(JOBS)

# libFuzzer harnesses (clang): tests/fuzz/README.md.
fuzz:
	scripts/install-deps --fuzz
	CC=clang $(MAKE) BUILD=build-fuzz CMAKE_FLAGS="-DCKPZ_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" build

# Every harness for FUZZ_SECONDS (60) over its committed corpus, one at a time; fails on
# the first crash and names the input (about 25 minutes on two cores with the build).
# Then the Python harnesses (tests/fuzz/python: atheris, pinned, in a virtual environment
# under build-fuzz/pyfuzz) for PY_FUZZ_SECONDS (60) each, over the package and this
# build's libckpz (about 6 minutes); PY_FUZZ_PYTHONS names the interpreters (default
# /usr/bin/python3). An interpreter atheris cannot be installed for is skipped, saying so.
FUZZ_SECONDS ?= 60
PY_FUZZ_SECONDS ?= 60
fuzz-ci:
	scripts/install-deps --fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz-ci build-fuzz
	@$(MAKE) --no-print-directory build
	PY_FUZZ_SECONDS=$(PY_FUZZ_SECONDS) scripts/fuzz-ci-python

# Issue 4's comparison: rebuild the corpus (./corpus, ~5 min) and regenerate
# BENCHMARKS.md, docs/benchmarks.{csv,svg,md} (~15 min on 2 cores).
CORPUS ?= corpus
bench:
	scripts/install-deps --bench
	$(MAKE) build
	bench/run --rebuild --corpus $(CORPUS)

# The C style (.clang-format) with clang-format 19.1.7 from PyPI, installed into
# $(BUILD)/format-venv (scripts/format): `make format` rewrites the C files in place,
# `make format-check` names those that differ and fails if any.
format:
	scripts/format $(BUILD)/format-venv

format-check:
	scripts/format --check $(BUILD)/format-venv

# ckpz against the real peers (ZipNN, OpenZL, Blosc2, hdf5plugin, SZ3, zfp, zstd), pinned
# and pip-installed into build/peers-venv by bench/peers itself, on the step-300 files of
# $(CORPUS) (bench/make-corpus): the table, docs/peers.csv, peers-lossy.csv, peers.svg.
peers: build
	bench/peers --corpus $(CORPUS) --write-benchmarks BENCHMARKS.md

# Installs the library, headers, libckpz.pc, the CLI and the Python package (CMake), then,
# where R is installed, the R package (r/ckpz) against the libckpz just installed (found
# by pkg-config under the install prefix), built from a copy in $(BUILD)/r-install into
# R's first library, or into R_LIBRARY when set.
R_LIBRARY ?=
install: build
	cmake --install $(BUILD)
	@if command -v R >/dev/null 2>&1; then \
	  prefix=$$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' $(BUILD)/CMakeCache.txt); \
	  libdir=$$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' $(BUILD)/CMakeCache.txt); \
	  case $$libdir in /*) ;; *) libdir=$$prefix/$$libdir ;; esac; \
	  rm -rf $(BUILD)/r-install && mkdir -p $(BUILD)/r-install && cp -R r/ckpz $(BUILD)/r-install/ && \
	  PKG_CONFIG_PATH=$$libdir/pkgconfig$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH} \
	    R CMD INSTALL $(if $(R_LIBRARY),-l $(R_LIBRARY)) $(BUILD)/r-install/ckpz; \
	else echo "R is not installed: the R package (r/ckpz) is not installed (scripts/install-deps installs r-base-dev)"; fi

clean:
	rm -rf build build-asan build-fuzz
