#!/bin/sh
# run.sh — builds the device tests with nvcc against the CPU library they compare with,
# and runs them (the device ones need a CUDA GPU; see README.md). Run from anywhere.
# Variables: ARCH (default sm_90), NVCC, CC, BUILD_DIR (build folder, default
# build-gpu/), LIBCKPZ (a built libckpz.a; default build/libckpz.a, made by `make`),
# FILES (.ckpz files for test_twin and test_decode_gpu), BENCH (.ckpz files to time
# tiled to 1 GiB), BUILD_ONLY=1 (build, run nothing), RUN_ONLY=1 (run what BUILD_DIR
# holds, build nothing).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
ARCH=${ARCH:-sm_90}
NVCC=${NVCC:-nvcc}
CC=${CC:-cc}
BUILD_DIR=${BUILD_DIR:-$root/build-gpu}
LIBCKPZ=${LIBCKPZ:-$root/build/libckpz.a}
FILES=${FILES:-}
BENCH=${BENCH:-}
LIBS="-lzstd -llz4 -ldeflate -lsnappy -lm -lpthread -ldl"
mkdir -p "$BUILD_DIR"
cd "$root"
if [ "${RUN_ONLY:-0}" != 1 ]; then
    for f in lib/transforms/planes.c lib/transforms/planes_avx512.c lib/common/cpu.c lib/common/dtype.c \
        lib/gpu/plan.c lib/gpu/rans0_twin.c; do
        $CC -std=c11 -O2 -Wall -Wextra -Werror -Ilib -Iinclude -c "$f" -o "$BUILD_DIR/$(basename "$f" .c).o"
    done
    NV="$NVCC -O3 -arch=$ARCH -std=c++17 -Xcompiler -Wall,-Wextra -Werror all-warnings -Ilib -Iinclude"
    $NV tests/gpu/test_planes_gpu.cu lib/gpu/planes.cu "$BUILD_DIR"/planes.o "$BUILD_DIR"/planes_avx512.o \
        "$BUILD_DIR"/cpu.o "$BUILD_DIR"/dtype.o -lm -o "$BUILD_DIR/test_planes_gpu"
    $CC -std=c11 -O2 -Wall -Wextra -Werror -Ilib -Iinclude tests/gpu/test_twin.c "$BUILD_DIR"/plan.o \
        "$BUILD_DIR"/rans0_twin.o "$LIBCKPZ" $LIBS -o "$BUILD_DIR/test_twin"
    $NV tests/gpu/test_decode_gpu.cu lib/gpu/decode.cu "$BUILD_DIR"/plan.o "$LIBCKPZ" $LIBS \
        -o "$BUILD_DIR/test_decode_gpu"
fi
if [ "${BUILD_ONLY:-0}" = 1 ]; then exit 0; fi
# shellcheck disable=SC2086 # FILES and BENCH are lists of paths
{
    [ -z "$FILES" ] || "$BUILD_DIR/test_twin" $FILES
    "$BUILD_DIR/test_planes_gpu"
    "$BUILD_DIR/test_decode_gpu" $FILES ${BENCH:+--bench $BENCH}
}
