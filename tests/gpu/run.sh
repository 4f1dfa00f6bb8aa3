#!/bin/sh
# run.sh — builds tests/gpu/test_planes_gpu with nvcc against the CPU files it compares
# with, and runs it (needs a CUDA GPU; see README.md). Run from the repository root or
# anywhere: ARCH (default sm_90), NVCC, CC and OUT (build folder) may be set.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
ARCH=${ARCH:-sm_90}
NVCC=${NVCC:-nvcc}
CC=${CC:-cc}
OUT=${OUT:-$root/build-gpu}
mkdir -p "$OUT"
cd "$root"
for f in lib/transforms/planes.c lib/transforms/planes_avx512.c lib/common/cpu.c lib/common/dtype.c; do
    $CC -std=c11 -O2 -Wall -Wextra -Werror -Ilib -Iinclude -c "$f" -o "$OUT/$(basename "$f" .c).o"
done
$NVCC -O3 -arch="$ARCH" -std=c++17 -Xcompiler -Wall,-Wextra -Werror all-warnings -Ilib -Iinclude \
    tests/gpu/test_planes_gpu.cu lib/gpu/planes.cu "$OUT"/planes.o "$OUT"/planes_avx512.o "$OUT"/cpu.o \
    "$OUT"/dtype.o -lm -o "$OUT/test_planes_gpu"
if [ "${BUILD_ONLY:-0}" = 1 ]; then exit 0; fi
exec "$OUT/test_planes_gpu"
