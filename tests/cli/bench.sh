#!/bin/bash
# bench.sh — ckpz -b prints one line per codec (ckpz at the chosen level, zstd -1,
# zstd -3) with the true input size, the speed ratios, and fails on a missing file.
# -i0 (three runs per measurement) keeps it quick; the numbers themselves are not
# checked here, only that they are there and consistent.
source "$(dirname "$0")/common.bash" "$@"

make_safetensors m.safetensors BF16
size=$(stat -c %s m.safetensors)
run 0 "$CKPZ" -b -i0 m.safetensors
for label in "ckpz -3 " "zstd -1 " "zstd -3 "; do
    grep -E "^$label +m.safetensors : +$size -> +[0-9]+ \([0-9.]+x\) +[0-9.]+ MB/s +[0-9.]+ MB/s$" \
        "$WORK/.out" >/dev/null || fail "no '$label' line: $(cat "$WORK/.out")"
    ok
done
out_has "ckpz/zstd-1: compress "
out_has "ckpz/zstd-3: compress "
# the level and thread count show in the label
run 0 "$CKPZ" -b7 -T2 -i0 m.safetensors
out_has "ckpz -7 -T2 "
# raw input with a dtype; an empty file
head -c 100001 /dev/urandom >r.bin
run 0 "$CKPZ" -b -i0 --dtype=f32 r.bin
out_has "100001 ->"
: >empty
run 0 "$CKPZ" -b -i0 empty
# errors
run 1 "$CKPZ" -b -i0 nosuchfile
err_has "nosuchfile"
run 2 "$CKPZ" -b
echo "bench.sh: $CHECKS checks passed"
