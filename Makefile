# Thin front end over CMake. `make` builds; `make demo` and `make test` first install
# what is missing (scripts/install-deps), so they work on a fresh Debian machine.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build deps demo test check install asan fuzz bench clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

deps:
	scripts/install-deps

demo: deps
	$(MAKE) build
	scripts/demo $(BUILD)/ckpz

test: deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Tests under AddressSanitizer and UndefinedBehaviorSanitizer.
asan:
	$(MAKE) BUILD=build-asan CMAKE_FLAGS="-DCKPZ_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" build
	cd build-asan && ctest --output-on-failure -j $(JOBS)

# libFuzzer harnesses (clang).
fuzz:
	CC=clang $(MAKE) BUILD=build-fuzz CMAKE_FLAGS="-DCKPZ_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" build

# Issue 4's comparison: rebuild the corpus (./corpus, ~5 min) and regenerate
# BENCHMARKS.md, docs/benchmarks.{csv,svg,md} (~15 min on 2 cores).
CORPUS ?= corpus
bench:
	scripts/install-deps --bench
	$(MAKE) build
	bench/run --rebuild --corpus $(CORPUS)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf build build-asan build-fuzz
