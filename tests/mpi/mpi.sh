#!/bin/bash
# mpi.sh — ckpz-mpi against serial ckpz on loopback (mpirun --oversubscribe): PART is
#   identity  compression with 1, 2 and 4 ranks gives serial ckpz's bytes: safetensors
#             (BF16, FP32), torch.save, raw f32; with --base and with lossy rules;
#   restore   -d with 2 and 4 ranks restores the original, -t passes, -l lists;
#   faults    a corrupt chunk in rank 1's share of -t and -d, and a write that fails on
#             rank 1 (faultshim.so): every rank exits 1, one message naming file, chunk
#             and tensor (or the output) and the rank, and no file left behind.
#   hostile   damaged files (issue 27): a byte of entry frame 0 (which no chunk read
#             touches) fails -t with 1 and 2 ranks and -d, naming file and frame as
#             serial -t does, also when its checksum is resealed; and over single-byte
#             damages across a stand-alone and a delta file, serial -t and ckpz-mpi -t
#             agree on pass or fail.
#   options   ckpz's command line over ckpz-mpi's table of operations (programs/cli.h):
#             output names as ckpz gives them (FILE -> FILE.ckpz and back, refusals of a
#             .ckpz input, an unknown suffix, an existing output), usage errors and -h/-V
#             as ckpz's, what MPI-IO cannot do (-c, stdin) refused, and the operations of
#             rank 0 (--extract, --rebase, -b, --predict) giving serial ckpz's output.
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
    # a rank killed outright (SIGKILL) mid-write: no visible file (only the hidden
    # .k.ckpz.ckpz-PID-HOST-RANDOM.tmp), and the next run to the same name removes that
    # leftover of a dead writer
    timeout 60 mpirun "${mpx[@]}" -n 2 --oversubscribe "$cmpi" -q -f -9 --chunk-size=64K --format=raw \
        --dtype=f32 -o "$tmp/k.ckpz" "$tmp/big.f32" > "$tmp/msg" 2>&1 &
    mpid=$!
    killed=
    for _ in $(seq 1 1000); do
        if ls -A "$tmp" | grep -q "k\.ckpz\."; then
            rank=$(ps -o pid= --ppid "$(ps -o pid= --ppid "$mpid" | head -1)" | tail -1) # timeout, mpirun, ranks
            [ -n "$rank" ] && kill -KILL $rank && killed=1
            break
        fi
        sleep 0.01
    done
    wait "$mpid"
    if [ -n "$killed" ]; then
        ls "$tmp" | grep -q "^k\.ckpz" && bad "a killed rank left a visible $(ls "$tmp" | grep "^k\.ckpz")"
        # the job's other ranks may outlive mpirun a moment: the leftover is removed only once
        # its writer (rank 0) is gone
        for x in $(ls -A "$tmp" | grep "^\.k\.ckpz\.ckpz-"); do
            p=${x#.k.ckpz.ckpz-}
            for _ in $(seq 1 500); do kill -0 "${p%%-*}" 2>/dev/null || break; sleep 0.02; done
        done
        run 2 -q -f --chunk-size=64K --format=raw --dtype=f32 -o "$tmp/k.ckpz" "$tmp/big.f32" ||
            bad "the run after a killed one: exit $?"
        ls -A "$tmp" | grep -q "^\.k\.ckpz\." && bad "the next run left the killed one's $(ls -A "$tmp" | grep "^\.k")"
    else
        echo "SKIP: the 2-rank compression ended before a rank could be killed"
    fi
    ;;
hostile)
    # damage FILE OUT POS [reseal]: OUT is FILE with the byte at POS xor 0x5a; reseal:
    # the entry frame at POS gets its CRC-32C recomputed, so that the damage reaches the
    # check of the frame against the index
    damage() {
        python3 - "$@" <<'PYEOF' || bad "damage $*"
import struct, sys
src, out, pos = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = bytearray(open(src, "rb").read())
if len(sys.argv) > 4:
    blen = struct.unpack_from("<I", b, pos + 4)[0]
    # the first entry's offset: a CKEN record's field, or a CKEL list's varint after its count
    b[pos + (9 if b[pos:pos + 4] == b"CKEL" else 20)] ^= 0x01
    t = 0xffffffff
    for x in b[pos:pos + 8 + blen]:  # CRC-32C, bit by bit (a few dozen bytes)
        t ^= x
        for _ in range(8):
            t = (t >> 1) ^ 0x82f63b78 if t & 1 else t >> 1
    struct.pack_into("<I", b, pos + 8 + blen, t ^ 0xffffffff)
else:
    b[pos] ^= 0x5a
open(out, "wb").write(bytes(b))
PYEOF
    }
    "$ckpz" -q -f -T1 --chunk-size=64K -o "$tmp/f.ckpz" "$f32"
    # entry frame 0 starts at byte 32, right after the header of a stand-alone file
    damage "$tmp/f.ckpz" "$tmp/e.ckpz" 52
    "$ckpz" -t "$tmp/e.ckpz" > "$tmp/serial" 2>&1 && bad "serial -t passed a damaged entry frame"
    grep -q "e.ckpz: entry frame 0 at byte 32: checksum mismatch" "$tmp/serial" ||
        bad "serial -t: $(cat "$tmp/serial")"
    for n in 1 2; do
        run $n -t "$tmp/e.ckpz" > "$tmp/msg" 2>&1
        rc=$?
        [ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "-t -n $n of a damaged entry frame: exit $rc"
        grep -q "^ckpz: .*e.ckpz: entry frame 0 at byte 32: checksum mismatch" "$tmp/msg" ||
            bad "-t -n $n of a damaged entry frame: no message naming file and frame: $(cat "$tmp/msg")"
        [ "$(grep -c '^ckpz:' "$tmp/msg")" = 1 ] || bad "-t -n $n: not one message: $(cat "$tmp/msg")"
    done
    run 2 -f -d -o "$tmp/restored" "$tmp/e.ckpz" > "$tmp/msg" 2>&1 && bad "-d of a damaged entry frame exited 0"
    grep -q "e.ckpz: entry frame 0 at byte 32: checksum mismatch" "$tmp/msg" || bad "-d: $(cat "$tmp/msg")"
    ls "$tmp" | grep -q restored && bad "-d of a damaged entry frame left $(ls "$tmp" | grep restored)"
    # resealed: the frame's checksum holds, its record no longer matches the index
    damage "$tmp/f.ckpz" "$tmp/r.ckpz" 32 reseal
    "$ckpz" -t "$tmp/r.ckpz" > /dev/null 2>&1 && bad "serial -t passed a resealed damaged entry frame"
    for n in 1 2; do
        run $n -t "$tmp/r.ckpz" > "$tmp/msg" 2>&1 && bad "-t -n $n passed a resealed damaged entry frame"
        grep -q "r.ckpz: entry frame 0 at byte 32 does not match the index" "$tmp/msg" ||
            bad "-t -n $n of a resealed entry frame: $(cat "$tmp/msg")"
    done
    # the sweep: header, base frame, entry frames, chunk frames (header and payload) at
    # the start, middle and end, index, trailer, and bytes spread over the whole file
    "$ckpz" -q -f -T1 --chunk-size=64K --base "$f32" -o "$tmp/d.ckpz" "$tmp/next.safetensors"
    positions() {
        python3 - "$@" <<'PYEOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
n = len(b)
io, il = struct.unpack_from("<QQ", b, n - 40)
pos = {0, 12, 31}
p = 32
if b[32:36] == b"CKBS":
    bl = struct.unpack_from("<I", b, 36)[0]
    pos |= {37, 44 + bl // 2, 32 + 8 + bl + 2}
    p = 32 + 12 + bl
ents, chunks = [], []
while p < io:
    if b[p:p + 4] in (b"CKEN", b"CKEL"):  # an entry frame, or an entry list frame
        bl = struct.unpack_from("<I", b, p + 4)[0]
        ents.append((p, 12 + bl))
        p += 12 + bl
    elif b[p:p + 4] == b"CKCH":
        pl = struct.unpack_from("<I", b, p + 12)[0]
        chunks.append((p, 32 + pl))
        p += 32 + pl
    else:
        sys.exit("no frame at byte %d" % p)
for p, l in (ents[0], ents[len(ents) // 2], ents[-1]):
    pos |= {p + 1, p + l // 2, p + l - 1}
for p, l in (chunks[0], chunks[len(chunks) // 2], chunks[-1]):
    pos |= {p + 9, p + 30, p + 32 + (l - 32) // 2}
pos |= {io + 1, io + il // 2, io + il - 3}
pos |= {n - 40, n - 22, n - 6, n - 1}
pos |= {k * n // 6 + 11 for k in range(6)}
pos = sorted(pos)
if len(sys.argv) > 2:  # a sample: every third
    pos = pos[::3]
print(" ".join(str(x) for x in pos))
PYEOF
    }
    # rankrc N ARGS: ckpz-mpi's exit status as its ranks give it (mpirun's own path for a
    # rank that exits non-zero takes 2 s, dozens of times here): every rank writes its
    # status to a file; all must be the same
    rankrc() {
        local n=$1 q rc=
        shift
        rm -f "$tmp"/rc.*
        CKPZ_RC_DIR=$tmp timeout 60 mpirun "${mpx[@]}" -x CKPZ_RC_DIR --mca orte_abort_on_non_zero_status 0 \
            -n "$n" --oversubscribe sh -c '"$0" "$@"; echo $? > "$CKPZ_RC_DIR/rc.$OMPI_COMM_WORLD_RANK"' "$cmpi" "$@"
        [ $? = 124 ] && { echo 124; return; }
        for q in $(seq 0 $((n - 1))); do
            [ -f "$tmp/rc.$q" ] || { echo "no status from rank $q"; return; }
            [ -z "$rc" ] || [ "$(cat "$tmp/rc.$q")" = "$rc" ] || { echo "ranks differ"; return; }
            rc=$(cat "$tmp/rc.$q")
        done
        echo "$rc"
    }
    sweeps=0
    for f in f d; do
        opts=()
        [ $f = d ] && opts=(--base "$f32")
        list=$(positions "$tmp/$f.ckpz" $([ $f = d ] && echo sample)) || { bad "positions in $f.ckpz"; continue; }
        k=0
        for at in $list; do
            damage "$tmp/$f.ckpz" "$tmp/x.ckpz" "$at"
            "$ckpz" -q -t "${opts[@]}" "$tmp/x.ckpz" > /dev/null 2>&1
            want=$?
            # every position at 2 ranks, every third at 1 rank too
            for n in 2 $([ $((k % 3)) = 0 ] && echo 1); do
                got=$(rankrc $n -q -t "${opts[@]}" "$tmp/x.ckpz" 2> "$tmp/msg")
                case $got in
                0 | [1-9] | [1-9][0-9] | 1[0-9][0-9]) ;;
                *) bad "-t -n $n, $f.ckpz damaged at byte $at: $got"; continue ;;
                esac
                [ $got != 124 ] || bad "-t -n $n, $f.ckpz damaged at byte $at: timed out"
                [ $((got != 0)) = $((want != 0)) ] ||
                    bad "$f.ckpz damaged at byte $at: serial -t exit $want, ckpz-mpi -t -n $n exit $got: $(head -c 300 "$tmp/msg")"
                sweeps=$((sweeps + 1))
            done
            k=$((k + 1))
        done
    done
    echo "hostile: $sweeps runs of ckpz-mpi -t on damaged files compared with serial -t"
    ;;
options)
    # expect WANT_EXIT TEXT CMD...: ckpz-mpi on 2 ranks exits WANT_EXIT, and (when TEXT is
    # not empty) says TEXT on stderr or stdout
    expect() {
        local want=$1 text=$2; shift 2
        run 2 "$@" > "$tmp/msg" 2>&1
        local got=$?
        [ $got = "$want" ] || bad "ckpz-mpi $*: exit $got, not $want: $(head -c 300 "$tmp/msg")"
        [ -z "$text" ] || grep -qF -- "$text" "$tmp/msg" || bad "ckpz-mpi $*: no '$text' in: $(head -c 300 "$tmp/msg")"
    }
    cp "$f32" "$tmp/m.safetensors"
    expect 0 "" -q "$tmp/m.safetensors"
    "$ckpz" -q -f -T1 -o "$tmp/serial.ckpz" "$f32"
    cmp -s "$tmp/m.safetensors.ckpz" "$tmp/serial.ckpz" || bad "FILE -> FILE.ckpz: not serial ckpz's bytes"
    expect 1 "already exists (use -f to overwrite)" "$tmp/m.safetensors"
    expect 1 "already has .ckpz suffix -- ignored" "$tmp/m.safetensors.ckpz"
    mv "$tmp/m.safetensors" "$tmp/m.orig"
    expect 0 "" -q -d "$tmp/m.safetensors.ckpz"
    cmp -s "$tmp/m.safetensors" "$f32" || bad "-d FILE.ckpz -> FILE: not the original"
    expect 1 "m.orig: unknown suffix (expected .ckpz; use -o to name the output)" -d "$tmp/m.orig"
    expect 1 "-c and -o - are not supported" -c "$tmp/m.orig"
    expect 2 "-o takes exactly one input file" -f -o "$tmp/x" "$tmp/m.orig" "$tmp/m.safetensors"
    expect 2 "Try 'ckpz -h' for help." --no-such-option "$tmp/m.orig"
    expect 2 "level must be 1..9" -12 "$tmp/m.orig"
    expect 0 "Usage: ckpz [OPTIONS] [FILE...]" -h
    expect 0 "ckpz $("$ckpz" -V | cut -d' ' -f2)" -V
    ls "$tmp" | grep -q '^x$' && bad "a usage error left an output"
    # rank 0's operations: serial ckpz's output
    name=transformer.h.0.ln_1.weight
    expect 0 "" -f --extract "$name" -o "$tmp/t.mpi" "$tmp/m.safetensors.ckpz"
    "$ckpz" -q -f --extract "$name" -o "$tmp/t.serial" "$tmp/m.safetensors.ckpz"
    cmp -s "$tmp/t.mpi" "$tmp/t.serial" || bad "--extract: not serial ckpz's bytes"
    "$ckpz" -q -f -T1 --chunk-size=64K --base "$f32" -o "$tmp/d.ckpz" "$tmp/next.safetensors"
    expect 0 "" -q -f --rebase --base "$f32" -o "$tmp/r.mpi" "$tmp/d.ckpz"
    "$ckpz" -q -f --rebase --base "$f32" -o "$tmp/r.serial" "$tmp/d.ckpz"
    cmp -s "$tmp/r.mpi" "$tmp/r.serial" || bad "--rebase: not serial ckpz's bytes"
    expect 0 "" --predict "$f32"
    "$ckpz" --predict "$f32" 2>&1 | cmp -s - "$tmp/msg" || bad "--predict: not serial ckpz's output"
    expect 0 "zstd" -b -i0 "$f32"
    ;;
*) echo "usage: mpi.sh identity|restore|faults|hostile|options CKPZ CKPZ_MPI SOURCE_DIR FAULTSHIM"; exit 2 ;;
esac
[ $fail = 0 ] && echo "mpi $part: ok"
exit $fail
