#!/bin/bash
# list_test_extract.sh — the random-access side of the command line: -l shows every
# tensor with its dtype and shape and a total line, -t passes good files, and
# --extract NAME writes exactly the bytes the original file holds for that tensor
# (checked against the safetensors header's data_offsets), to -o, -c or a pipe.
source "$(dirname "$0")/common.bash" "$@"

n=0
while IFS= read -r s; do
    f=$(basename "$s")
    cp "$s" "$f"
    run 0 "$CKPZ" -q --chunk-size=64K "$f"

    # --- -l: a header row, every tensor name and dtype, a total line
    run 0 "$CKPZ" -l "$f.ckpz"
    out_has "name"
    out_has "dtype"
    out_has "total"
    grep -Eq '^ *total .*[0-9.]+x .*tensors.*chunks.*safetensors' "$WORK/.out" ||
        fail "-l total line of $f: $(grep total "$WORK/.out")"
    ok
    expected=$(tensor_names "$f" | wc -l)
    got=$(grep -Eo '[0-9]+ tensors' "$WORK/.out" | grep -Eo '[0-9]+')
    [ "$got" = "$expected" ] || fail "-l of $f says $got tensors, the header has $expected"
    ok
    tensor_names "$f" >names.txt
    while IFS= read -r name; do
        [ -n "$name" ] || name='""'
        grep -qF -- " $name " "$WORK/.out" || fail "-l of $f lacks tensor $name"
        ok
    done <names.txt
    python3 - "$f" "$WORK/.out" <<'PYEOF' || fail "-l dtypes/shapes of $f"
import json, struct, sys
with open(sys.argv[1], "rb") as fh:
    n = struct.unpack("<Q", fh.read(8))[0]
    h = json.loads(fh.read(n))
listing = open(sys.argv[2]).read().splitlines()
names = {"BF16": "bf16", "F16": "f16", "F32": "f32", "F64": "f64", "I8": "i8", "I16": "i16",
         "I32": "i32", "I64": "i64", "U8": "u8", "U16": "u16", "U32": "u32", "U64": "u64",
         "BOOL": "bool", "F8_E4M3": "f8e4m3", "F8_E5M2": "f8e5m2"}
for k, v in h.items():
    if k == "__metadata__":
        continue
    shape = "[" + ", ".join(str(d) for d in v["shape"]) + "]"
    rows = [l for l in listing if (" " + (k or '""') + " ") in l]
    if not rows:
        sys.exit("no row for " + k)
    row = rows[0]
    if names.get(v["dtype"], "?") not in row.split():
        sys.exit("dtype of %s: %s" % (k, row))
    if shape not in row:
        sys.exit("shape of %s: %s" % (k, row))
PYEOF
    ok
    # -v adds byte offsets: the first tensor's offset appears
    first=$(grep -v '^$' names.txt | head -1)
    if [ -n "$first" ]; then
        read -r start len < <(tensor_range "$f" "$first")
        run 0 "$CKPZ" -l -v "$f.ckpz"
        grep -F -- " $first " "$WORK/.out" | grep -qw "$start" || fail "-lv lacks offset $start of $first"
        ok
    fi

    # --- -t
    run 0 "$CKPZ" -t "$f.ckpz"
    err_has "$f.ckpz : OK"
    run 0 "$CKPZ" -t -q "$f.ckpz"
    [ ! -s "$WORK/.err" ] || fail "-t -q printed: $(cat "$WORK/.err")"
    ok
    "$CKPZ" -t - <"$f.ckpz" 2>/dev/null || fail "-t from stdin"
    ok

    # --- --extract: every tensor equals its bytes in the original
    while IFS= read -r name; do
        read -r start len < <(tensor_range "$f" "$name")
        tail -c +"$((start + 1))" "$f" | head -c "$len" >expected.bin
        rm -f got.bin
        run 0 "$CKPZ" --extract "$name" -o got.bin "$f.ckpz"
        same_file got.bin expected.bin
        run 0 "$CKPZ" --extract="$name" -c "$f.ckpz"
        same_file "$WORK/.out" expected.bin
        "$CKPZ" --extract "$name" "$f.ckpz" | cmp -s - expected.bin || fail "--extract $name to a pipe"
        ok
    done < <(head -8 names.txt)
    # existing output is not replaced without -f
    [ -n "$first" ] || { n=$((n + 1)); continue; }
    echo keep >got.bin
    run 1 "$CKPZ" --extract "$first" -o got.bin "$f.ckpz"
    [ "$(cat got.bin)" = keep ] || fail "--extract replaced an existing file without -f"
    ok
    run 0 "$CKPZ" --extract "$first" -f -o got.bin "$f.ckpz"
    # unknown tensor
    run 1 "$CKPZ" --extract no.such.tensor -o none.bin "$f.ckpz"
    err_has "no.such.tensor"
    absent none.bin
    no_temp_files .
    n=$((n + 1))
done < <(safetensors_files)
[ "$n" -ge 2 ] || fail "no sample checkpoints"

# --- .npy inputs: listed with their format, verified by -t
while IFS= read -r s; do
    f=$(basename "$s")
    cp "$s" "$f"
    run 0 "$CKPZ" -q "$f"
    run 0 "$CKPZ" -l "$f.ckpz"
    grep -Eq '^ *total .*chunks, npy, crc32c [0-9a-f]{8}$' "$WORK/.out" ||
        fail "-l total line of $f: $(grep total "$WORK/.out")"
    ok
    run 0 "$CKPZ" -t "$f.ckpz"
done < <(sample_files | grep '\.npy$')

# --- several files listed at once, each under its name
ls *.ckpz | head -2 >two
run 0 "$CKPZ" -l $(cat two)
for f in $(cat two); do out_has "$f"; done
run 0 "$CKPZ" -t $(cat two)

# --- a raw file: one tensor of the given dtype
head -c 262144 /dev/urandom >raw.bin
run 0 "$CKPZ" -q --dtype=bf16 raw.bin
run 0 "$CKPZ" -l raw.bin.ckpz
out_has "bf16"
out_has "total"
run 0 "$CKPZ" -t raw.bin.ckpz

# --- list of something that is not ckpz
head -c 5000 /dev/urandom >bad.ckpz
run 1 "$CKPZ" -l bad.ckpz
err_has "bad.ckpz"
run 1 "$CKPZ" -t bad.ckpz
err_has "bad.ckpz"
run 1 "$CKPZ" --extract x bad.ckpz
err_has "bad.ckpz"
no_temp_files .
echo "list_test_extract.sh: $CHECKS checks passed"
