#!/bin/bash
# isa.sh — the instruction-set cap CKPZ_CPU (lib/common/cpu.h) changes speed only: the
# portable loops (scalar), AVX2 and AVX-512 write the same .ckpz file, for stand-alone,
# delta (the fused predictor and escape loops) and lossy coding at several levels, and
# each decodes what the others wrote. On a CPU without AVX-512 (or AVX2) the higher
# caps fall back, and the check still holds.
source "$(dirname "$0")/common.bash" "$@"

ISAS="scalar avx2 avx512"

# same_at_every_isa NAME [COMPRESS OPTIONS...] FILE: compresses FILE at every cap into
# NAME.ISA.ckpz, checks the outputs are identical and that the scalar file restores at
# every cap to the AVX-512 build's restoration (the original, when lossless)
same_at_every_isa() {
    local name=$1
    shift
    local isa
    for isa in $ISAS; do
        CKPZ_CPU=$isa run 0 "$CKPZ" -q -f -T1 -o "$name.$isa.ckpz" "$@"
    done
    same_file "$name.scalar.ckpz" "$name.avx2.ckpz"
    same_file "$name.scalar.ckpz" "$name.avx512.ckpz"
    for isa in $ISAS; do
        CKPZ_CPU=$isa run 0 "$CKPZ" -q -d -f -o "$name.$isa.out" "${BASEOPT[@]}" "$name.scalar.ckpz"
    done
    same_file "$name.scalar.out" "$name.avx2.out"
    same_file "$name.scalar.out" "$name.avx512.out"
}

# a: a sample; b: a's tensors moved by a few units in the last place (delta coding)
S=$(sample_files | grep '\.safetensors$' | head -1)
[ -n "$S" ] || fail "no sample safetensors file"
cp "$S" a.safetensors
python3 - a.safetensors b.safetensors <<'PYEOF' || fail "making b"
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
start = 8 + struct.unpack("<Q", data[:8])[0]
for i in range(start, len(data) - 1, 6):  # every third 2-byte element or so
    data[i] = (data[i] + 1 + i % 3) & 0xFF
open(sys.argv[2], "wb").write(data)
PYEOF

BASEOPT=()
for lv in -1 -3 -9; do
    same_at_every_isa "a$lv" "$lv" a.safetensors
    same_file a.safetensors "a$lv.scalar.out"
done
BASEOPT=(--base a.safetensors)
for lv in -1 -3 -7; do
    same_at_every_isa "b$lv" "$lv" --base a.safetensors b.safetensors
    same_file b.safetensors "b$lv.scalar.out"
done
BASEOPT=()
same_at_every_isa lossy --rel 1e-3 b.safetensors

echo "isa.sh: $CHECKS checks passed"
