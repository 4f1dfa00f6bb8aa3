#!/bin/bash
# mpi.sh — ckpz-mpi against serial ckpz on loopback (mpirun --oversubscribe): PART is
#   identity  compression with 1, 2 and 4 ranks gives serial ckpz's bytes: safetensors
#             (BF16, FP32), torch.save, raw f32; with --base and with lossy rules;
#   restore   -d with 2 and 4 ranks restores the original, -t passes, -l lists;
#   faults    a corrupt chunk in rank 1's share of -t and -d, and a write that fails on
#             rank 1 (faultshim.so): every rank exits 1, one message naming file, chunk
#             and tensor (or the output) and the rank, and no file left behind.
# Usage: mpi.sh PART CKPZ CKPZ_MPI SOURCE_DIR FAULTSHIM
set -u
part=$1 ckpz=$2 cmpi=$3 src=$4 shim=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# the sanitizers' settings (make asan) reach every rank
mpx=()
[ -n "${ASAN_OPTIONS:-}" ] && mpx+=(-x ASAN_OPTIONS)
run() { local n=$1; shift; timeout 60 mpirun "${mpx[@]}" -n "$n" --oversubscribe "$cmpi" "$@"; }

bf16=$src/samples/gpt-small.bf16.safetensors
f32=$src/samples/gpt-small.f32.safetensors
pt=$src/tests/data/torch/adamw.pt
# the next checkpoint: f32 with two stretches changed (the rest are copies of the base)
cp "$f32" "$tmp/next.safetensors"
head -c 40000 /dev/urandom | dd of="$tmp/next.safetensors" bs=1 seek=2000000 conv=notrunc status=none
head -c 30000 /dev/urandom | dd of="$tmp/next.safetensors" bs=1 seek=4000000 conv=notrunc status=none
# 20 MB of raw f32 in 64 KiB chunks: several rounds of coding and writing on every rank
# count (ckpz-mpi codes 32 chunks a rank between writes), and a next state of it
cat "$f32" "$f32" "$f32" "$f32" > "$tmp/big.f32"
cp "$tmp/big.f32" "$tmp/big2.f32"
for at in 3000000 9000000 17000000; do
    head -c 50000 /dev/urandom | dd of="$tmp/big2.f32" bs=1 seek=$at conv=notrunc status=none
done

# compress FILE with ranks N and OPTS; compare with serial ckpz
same() {
    local n=$1 file=$2; shift 2
    "$ckpz" -q -f -T1 "$@" -o "$tmp/serial.ckpz" "$file" || { bad "serial ckpz $* $file"; return; }
    run "$n" -q -f "$@" -o "$tmp/mpi.ckpz" "$file" || { bad "ckpz-mpi -n $n $* $file: exit $?"; return; }
    cmp -s "$tmp/serial.ckpz" "$tmp/mpi.ckpz" || bad "ckpz-mpi -n $n $* $(basename "$file"): not serial ckpz's bytes"
}

case $part in
identity)
    for n in 1 2 4; do
        same $n "$bf16" --chunk-size=64K
        same $n "$f32" --chunk-size=64K -1
        same $n "$pt" --chunk-size=64K
        same $n "$f32" --chunk-size=64K --format=raw --dtype=f32
    done
    for n in 2 4; do
        same $n "$tmp/next.safetensors" --chunk-size=64K --base "$f32"
        same $n "$f32" --chunk-size=64K --rel 1e-3 --prune 0.2
        same $n "$tmp/next.safetensors" --chunk-size=64K --base "$f32" --change-rel 0.1
    done
    for n in 1 2 4; do
        same $n "$tmp/big.f32" --chunk-size=64K --format=raw --dtype=f32
        same $n "$tmp/big2.f32" --chunk-size=64K --format=raw --dtype=f32 --base "$tmp/big.f32"
    done
    ;;
restore)
    "$ckpz" -q -f -T1 --chunk-size=64K -o "$tmp/f.ckpz" "$f32"
    "$ckpz" -q -f -T1 --chunk-size=64K --base "$f32" -o "$tmp/d.ckpz" "$tmp/next.safetensors"
    for n in 2 4; do
        run $n -q -d -f -o "$tmp/out" "$tmp/f.ckpz" && cmp -s "$tmp/out" "$f32" || bad "-d -n $n: not the original"
        run $n -q -d -f --base "$f32" -o "$tmp/out" "$tmp/d.ckpz" && cmp -s "$tmp/out" "$tmp/next.safetensors" ||
            bad "-d -n $n --base: not the original"
        run $n -q -t "$tmp/f.ckpz" || bad "-t -n $n failed on a sound file"
    done
    run 2 -l "$tmp/f.ckpz" > "$tmp/list" && "$ckpz" -l "$tmp/f.ckpz" | cmp -s - "$tmp/list" ||
        bad "-l: not ckpz -l's listing"
    ;;
faults)
    "$ckpz" -q -f -T1 --chunk-size=64K -o "$tmp/f.ckpz" "$f32"
    cp "$tmp/f.ckpz" "$tmp/bad.ckpz"
    # a byte in the last quarter of the frames: rank 1's share of 2
    printf '\x5a' | dd of="$tmp/bad.ckpz" bs=1 seek=3900000 conv=notrunc status=none
    for op in -t -d; do
        run 2 -f $op -o "$tmp/restored" "$tmp/bad.ckpz" > "$tmp/msg" 2>&1
        rc=$?
        [ $rc -ne 0 ] || bad "$op of a corrupt file exited 0"
        grep -q "ckpz: .*bad.ckpz: chunk [0-9]* (tensor.*'.*checksum mismatch (rank 1)" "$tmp/msg" ||
            bad "$op of a corrupt file: no message naming file, chunk, tensor and rank: $(cat "$tmp/msg")"
        [ "$(grep -c '^ckpz:' "$tmp/msg")" = 1 ] || bad "$op: not one message: $(cat "$tmp/msg")"
    done
    ls "$tmp" | grep -q restored && bad "-d of a corrupt file left $(ls "$tmp" | grep restored)"
    # the shim is built without the sanitizers: an ASan build lets it come first
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    timeout 60 mpirun -x ASAN_OPTIONS -n 2 --oversubscribe -x LD_PRELOAD="$shim" -x CKPZ_FAULT_WRITE_RANK=1 \
        "$cmpi" -f -o "$tmp/w.ckpz" "$f32" > "$tmp/msg" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "a failing write on rank 1: exit $rc"
    grep -q "ckpz: .*gpt-small.f32.safetensors: .*w.ckpz: write error: .*(rank 1)" "$tmp/msg" ||
        bad "a failing write: no message naming the output and the rank: $(cat "$tmp/msg")"
    ls "$tmp" | grep -q "^w.ckpz" && bad "a failing write left $(ls "$tmp" | grep w.ckpz)"
    # the same in a later round of a compression, and in a restore
    "$ckpz" -q -f -T1 --chunk-size=64K --format=raw --dtype=f32 -o "$tmp/big.ckpz" "$tmp/big.f32"
    for what in "--chunk-size=64K --format=raw --dtype=f32 -o $tmp/w.ckpz $tmp/big.f32" "-d -o $tmp/w.out $tmp/big.ckpz"; do
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        timeout 60 mpirun -x ASAN_OPTIONS -n 2 --oversubscribe -x LD_PRELOAD="$shim" -x CKPZ_FAULT_WRITE_RANK=1 \
            "$cmpi" -f $what > "$tmp/msg" 2>&1
        rc=$?
        [ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "a failing write on rank 1 ($what): exit $rc"
        grep -q "ckpz: .*big.*: .*w\.\(ckpz\|out\): write error: .*(rank 1)" "$tmp/msg" ||
            bad "a failing write ($what): no message naming the output and the rank: $(cat "$tmp/msg")"
        ls "$tmp" | grep -q "^w\." && bad "a failing write ($what) left $(ls "$tmp" | grep "^w\.")"
    done
    ;;
*) echo "usage: mpi.sh identity|restore|faults CKPZ CKPZ_MPI SOURCE_DIR FAULTSHIM"; exit 2 ;;
esac
[ $fail = 0 ] && echo "mpi $part: ok"
exit $fail
