#!/bin/bash
# fileio_faults.sh — the I/O failures of a full disk, a failing disk or a network file
# system, injected with tests/cli/faultshim.c (LD_PRELOAD): write() returning 0, EIO,
# ENOSPC, fsync, close and the rename/link into place failing, and reads failing; and
# inputs that change while they are compressed (truncated, appended to, rewritten by
# another process). Each must end within seconds in exit status 1 with a message that
# names the file, nothing under the final name (an existing file untouched), no
# temporary file, and the input as it was (kept by --rm). Short reads and writes and
# EINTR are not failures: they must give the bytes of a plain run. Last, an output that
# appears under the final name while ckpz writes is not overwritten without -f.
source "$(dirname "$0")/common.bash" "$@"

if [ -z "$FAULTSHIM" ]; then
    echo "SKIP: no fault shim given (ctest passes build/tests/ckpz_faultshim.so as the third argument)"
    exit 0
fi

# faulty VAR=VALUE... -- CMD...: CMD with the shim preloaded and FAULT_* set; stdout ->
# $WORK/.out, stderr -> $WORK/.err, exit status -> FRC. At most 20 s: a hang is one of
# the failures looked for (write() returning 0 used to be retried forever).
faulty() {
    local envs=()
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    rm -f "$WORK/fault.log"
    timeout 20 env LD_PRELOAD="$FAULTSHIM" FAULT_LOG="$WORK/fault.log" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "${envs[@]}" "$@" \
        >"$WORK/.out" 2>"$WORK/.err"
    FRC=$?
}

# fails_cleanly WHAT NAME OUT INPUT COPY: the last faulty run had its fault, exited 1
# with a message naming NAME, left no OUT and no temporary file, and INPUT equals COPY.
fails_cleanly() {
    local what=$1 name=$2 out=$3 input=$4 copy=$5
    [ "$FRC" -ne 124 ] || fail "$what: hung (killed after 20 s)"
    [ -s "$WORK/fault.log" ] || fail "$what: the fault was never injected (exit $FRC)"
    if [ "$FRC" -ne 1 ]; then
        cat "$WORK/.err" >&2
        fail "$what: exit status $FRC, expected 1"
    fi
    grep -qF -- "$name" "$WORK/.err" || { cat "$WORK/.err" >&2; fail "$what: the message does not name $name"; }
    [ ! -e "$out" ] || fail "$what: $out was left under its final name"
    cmp -s "$input" "$copy" || fail "$what: the input changed"
    no_temp_files .
    ok
}

# works WHAT OUT REF: the last faulty run had its fault, succeeded and wrote REF's bytes
works() {
    [ "$FRC" -ne 124 ] || fail "$1: hung (killed after 20 s)"
    [ -s "$WORK/fault.log" ] || fail "$1: the fault was never injected"
    [ "$FRC" -eq 0 ] || { cat "$WORK/.err" >&2; fail "$1: exit status $FRC, expected 0"; }
    cmp -s "$2" "$3" || fail "$1: $2 differs from a plain run's $3"
    no_temp_files .
    ok
}

cp "$ROOT/samples/gpt-small.bf16.safetensors" in.bin || fail "no sample checkpoint"
head -c 1500000 /dev/urandom >>in.bin
cp in.bin in.copy
run 0 "$CKPZ" -q -o ref.ckpz in.bin
cp ref.ckpz in.bin.ckpz
cp ref.ckpz ckpz.copy
tmpfile_ok=$(python3 -c 'import os, sys
try:
    os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)); print(1)
except (OSError, AttributeError):
    print(0)')

# --- compression, faults on the output file
rm -f in.bin.ckpz
for case in "zero 0" "zero 1000000" "eio 0" "eio 1000000" "enospc 0"; do
    set -- $case
    faulty FAULT_OP=write FAULT_KIND=$1 FAULT_AFTER=$2 -- "$CKPZ" -q in.bin
    fails_cleanly "compress, write $1 after $2" in.bin.ckpz in.bin.ckpz in.bin in.copy
done
err_has "No space left on device"
faulty FAULT_OP=write FAULT_KIND=zero -- "$CKPZ" -q in.bin
err_has "write returned 0"
for op in fsync close rename; do
    faulty FAULT_OP=$op -- "$CKPZ" -q --rm in.bin # fsync: only --rm waits for the disk
    fails_cleanly "compress --rm, $op fails" in.bin.ckpz in.bin.ckpz in.bin in.copy
done
if [ "$tmpfile_ok" = 1 ]; then
    # the second close is the one after the anonymous file got its name: it is taken back
    faulty FAULT_OP=close FAULT_AFTER=1 -- "$CKPZ" -q --rm in.bin
    fails_cleanly "compress, the last close fails" in.bin.ckpz in.bin.ckpz in.bin in.copy
fi
# with -f over an existing file: every step of putting the output in place may fail,
# and the existing file stays as it was
echo "an existing output" >in.bin.ckpz
cp in.bin.ckpz existing.copy
for after in 0 1 2; do
    faulty FAULT_OP=rename FAULT_AFTER=$after -- "$CKPZ" -q -f in.bin
    [ "$FRC" -eq 1 ] || fail "compress -f, rename/link call $after fails: exit $FRC"
    if [ -s "$WORK/fault.log" ]; then
        err_has in.bin.ckpz
        same_file in.bin.ckpz existing.copy
    fi
    no_temp_files .
done
rm -f in.bin.ckpz

# --- compression against a base: the rewrite at an offset (pwrite) returning 0 or EIO
cp in.bin base.bin
python3 - in.bin <<'PYEOF' || fail "edit in.bin"
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-100000, 2)
    f.write(b"\x01" * 1000)
PYEOF
cp in.bin in.copy
for kind in zero eio; do
    faulty FAULT_OP=pwrite FAULT_KIND=$kind -- "$CKPZ" -q --base base.bin in.bin
    fails_cleanly "compress --base, pwrite $kind" in.bin.ckpz in.bin.ckpz in.bin in.copy
done
cp base.bin in.bin
cp in.bin in.copy

# --- compression, faults on the input
faulty FAULT_OP=read FAULT_KIND=eio FAULT_AFTER=1000000 -- "$CKPZ" -q --rm in.bin
fails_cleanly "compress, read eio" in.bin in.bin.ckpz in.bin in.copy
err_has "read error"
faulty FAULT_OP=read FAULT_KIND=zero FAULT_AFTER=1000000 -- "$CKPZ" -q --rm in.bin
fails_cleanly "compress, read ends early" in.bin in.bin.ckpz in.bin in.copy

# --- not failures: short transfers and EINTR give the same bytes
faulty FAULT_OP=write FAULT_KIND=short FAULT_SHORT=4093 -- "$CKPZ" -q in.bin
works "compress, short writes" in.bin.ckpz ref.ckpz
rm -f in.bin.ckpz
faulty FAULT_OP=write FAULT_KIND=eintr -- "$CKPZ" -q in.bin
works "compress, EINTR on writes" in.bin.ckpz ref.ckpz
rm -f in.bin.ckpz
faulty FAULT_OP=read FAULT_KIND=short FAULT_SHORT=65537 -- "$CKPZ" -q in.bin
works "compress, short reads" in.bin.ckpz ref.ckpz
rm -f in.bin.ckpz
faulty FAULT_OP=read FAULT_KIND=eintr -- "$CKPZ" -q in.bin
works "compress, EINTR on reads" in.bin.ckpz ref.ckpz

# --- decompression
mv in.bin in.keep
for case in "zero 0" "zero 1000000" "eio 1000000" "enospc 0"; do
    set -- $case
    faulty FAULT_OP=write FAULT_KIND=$1 FAULT_AFTER=$2 -- "$CKPZ" -q -d in.bin.ckpz
    fails_cleanly "decompress, write $1 after $2" in.bin in.bin in.bin.ckpz ckpz.copy
done
for op in fsync close rename; do
    faulty FAULT_OP=$op -- "$CKPZ" -q -d --rm in.bin.ckpz
    fails_cleanly "decompress --rm, $op fails" in.bin in.bin in.bin.ckpz ckpz.copy
done
faulty FAULT_OP=read FAULT_KIND=eio FAULT_AFTER=500000 -- "$CKPZ" -q -d --rm in.bin.ckpz
fails_cleanly "decompress, read eio" in.bin.ckpz in.bin in.bin.ckpz ckpz.copy
faulty FAULT_OP=read FAULT_KIND=zero FAULT_AFTER=500000 -- "$CKPZ" -q -d --rm in.bin.ckpz
fails_cleanly "decompress, read ends early" in.bin.ckpz in.bin in.bin.ckpz ckpz.copy
faulty FAULT_OP=write FAULT_KIND=short FAULT_SHORT=4093 -- "$CKPZ" -q -d in.bin.ckpz
works "decompress, short writes" in.bin in.keep
rm -f in.bin
faulty FAULT_OP=read FAULT_KIND=short FAULT_SHORT=3001 -- "$CKPZ" -q -d in.bin.ckpz
works "decompress, short reads" in.bin in.keep
rm -f in.bin
mv in.keep in.bin

# --- standard output: write() returning 0 or EIO there is an error too, naming stdout
for kind in zero eio; do
    faulty FAULT_OP=write FAULT_KIND=$kind FAULT_STDOUT=1 -- "$CKPZ" -q -c in.bin
    [ "$FRC" -ne 124 ] || fail "compress -c, write $kind: hung"
    [ "$FRC" -eq 1 ] && [ -s "$WORK/fault.log" ] || fail "compress -c, write $kind: exit $FRC"
    err_has stdout
    faulty FAULT_OP=write FAULT_KIND=$kind FAULT_STDOUT=1 -- "$CKPZ" -q -dc in.bin.ckpz
    [ "$FRC" -eq 1 ] && [ -s "$WORK/fault.log" ] || fail "decompress -c, write $kind: exit $FRC"
    err_has stdout
done

# --- an input that changes while it is compressed: no output, and --rm keeps it
for kind in truncate append touch; do
    cp in.copy in.bin
    rm -f in.bin.ckpz
    touch -d '2020-01-02 03:04:05' in.bin # so that a rewrite shows in the mtime
    faulty FAULT_OP=read FAULT_KIND=$kind FAULT_AFTER=1000000 FAULT_SIZE=1500000 -- "$CKPZ" -q --rm in.bin
    [ -s "$WORK/fault.log" ] || fail "input $kind: the file was not changed"
    [ "$FRC" -eq 1 ] || { cat "$WORK/.err" >&2; fail "input $kind while compressed: exit $FRC, expected 1"; }
    err_has "in.bin: "
    err_has "changed"
    exists in.bin
    absent in.bin.ckpz
    no_temp_files .
done
# the same on decompression (an archive appended to while it is read)
cp in.copy in.bin
cp ckpz.copy in.bin.ckpz
faulty FAULT_OP=read FAULT_KIND=append FAULT_AFTER=500000 -- "$CKPZ" -q -d --rm -o out.bin in.bin.ckpz
[ "$FRC" -eq 1 ] && [ -s "$WORK/fault.log" ] || fail "archive appended to while decompressed: exit $FRC"
err_has changed
exists in.bin.ckpz
absent out.bin
cp ckpz.copy in.bin.ckpz

# --- files of several 4 MiB buffers, written behind by a thread of their own
# (ckpz_pump_write) where coding leaves a core free (-T1 on more than one core), read
# straight into the library's buffers: a
# read or write failing in a later buffer or in the last bytes still ends in exit 1
# naming the file, with nothing left behind; short transfers and EINTR give a plain
# run's bytes.
cat "$ROOT/samples/gpt-small.f32.safetensors" "$ROOT/samples/gpt-small.f32.safetensors" >pin.bin
head -c 4000000 /dev/urandom >>pin.bin # 14 MB: more buffers than the pump has
cp pin.bin pin.copy
run 0 "$CKPZ" -q -o pref.ckpz pin.bin
cp pref.ckpz pin.ckpz
cp pref.ckpz pckpz.copy
csize=$(stat -c %s pref.ckpz)
for case in "eio 9000000" "enospc $((csize - 100))" "zero $((csize - 20))"; do
    set -- $case
    faulty FAULT_OP=write FAULT_KIND=$1 FAULT_AFTER=$2 -- "$CKPZ" -q -T1 pin.bin
    fails_cleanly "compress 14 MB, write $1 after $2" pin.bin.ckpz pin.bin.ckpz pin.bin pin.copy
    faulty FAULT_OP=write FAULT_KIND=$1 FAULT_AFTER=$2 -- "$CKPZ" -q -T1 -d pin.ckpz -o pout.bin
    fails_cleanly "decompress 14 MB, write $1 after $2" pout.bin pout.bin pin.ckpz pckpz.copy
done
for after in 9000000 $(($(stat -c %s pin.bin) - 10)); do
    faulty FAULT_OP=read FAULT_KIND=eio FAULT_AFTER=$after -- "$CKPZ" -q -T1 --rm pin.bin
    fails_cleanly "compress 14 MB --rm, read eio after $after" pin.bin pin.bin.ckpz pin.bin pin.copy
done
faulty FAULT_OP=read FAULT_KIND=eio FAULT_AFTER=$((csize - 30)) -- "$CKPZ" -q -T1 -d --rm pin.ckpz -o pout.bin
fails_cleanly "decompress 14 MB --rm, read eio in the trailer" pin.ckpz pout.bin pin.ckpz pckpz.copy
faulty FAULT_OP=read FAULT_KIND=short FAULT_SHORT=65537 -- "$CKPZ" -q -T1 pin.bin
works "compress 14 MB, short reads" pin.bin.ckpz pref.ckpz
rm -f pin.bin.ckpz
faulty FAULT_OP=write FAULT_KIND=eintr -- "$CKPZ" -q -T1 pin.bin
works "compress 14 MB, EINTR on writes" pin.bin.ckpz pref.ckpz
rm -f pin.bin.ckpz
faulty FAULT_OP=write FAULT_KIND=short FAULT_SHORT=4093 -- "$CKPZ" -q -T1 -d pin.ckpz -o pout.bin
works "decompress 14 MB, short writes" pout.bin pin.copy
rm -f pout.bin pin.ckpz pref.ckpz pckpz.copy

# another process really changing the input: a slow (-9, one thread) compression of
# 15 MB, which reads it through a mapping; once the mapping shows in /proc/PID/maps, the
# file is cut to 1 MiB (the bytes gone under the mapping are a SIGBUS, which the CLI
# turns into an error naming the file: "shrank") or one byte is rewritten in place
# (its mtime: "changed"), or its base is cut while mapped ("shrank while it was read
# as a base"), or bytes all over it are rewritten again and again while the
# coders read them where they lie (two threads: a coder must stay within its buffers
# whatever the bytes it reads twice; the sanitizer builds run this too); either way
# exit 1, no output, no temporary file, and --rm keeps the input.
cat "$ROOT/samples/gpt-small.f32.safetensors" "$ROOT/samples/gpt-small.f32.safetensors" \
    "$ROOT/samples/gpt-small.f32.safetensors" >big.orig
for change in truncate rewrite scribble base; do
    cp big.orig big
    touch -d '2020-01-02 03:04:05' big
    threads=1
    [ $change = scribble ] && threads=2
    watched=big
    if [ $change = base ]; then
        cp big.orig big.base && printf 'x' | dd of=big.base bs=1 seek=100 conv=notrunc status=none
        watched=big.base
        "$CKPZ" -q -9 -T1 --rm --base big.base big 2>big.err &
    else
        "$CKPZ" -q -9 -T$threads --rm big 2>big.err &
    fi
    pid=$!
    mapped=0
    for i in $(seq 1 200); do
        grep -q "$WORK/$watched\$" "/proc/$pid/maps" 2>/dev/null && { mapped=1; break; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
    done
    [ $mapped = 1 ] || sleep 0.3 # a file system that cannot map: the CLI reads it
    if kill -0 "$pid" 2>/dev/null; then
        if [ $change = truncate ]; then
            truncate -s 1M big
            expect="shrank while it was compressed"
        elif [ $change = base ]; then
            truncate -s 1M big.base
            expect="shrank while it was read as a base"
        elif [ $change = rewrite ]; then
            printf '#' | dd of=big bs=1 seek=4000000 conv=notrunc status=none
            expect=changed
        else
            for i in $(seq 1 400); do
                kill -0 "$pid" 2>/dev/null || break
                head -c $((1 + RANDOM % 9000)) /dev/urandom |
                    dd of=big bs=1M seek=$(((RANDOM * 32768 + RANDOM) % 15000000)) oflag=seek_bytes conv=notrunc status=none
            done
            expect=changed
        fi
        [ $mapped = 1 ] || expect="changed|shrank"
        wait "$pid"
        rc=$?
        [ "$rc" -eq 1 ] || fail "input changed ($change) by another process: exit $rc: $(cat big.err)"
        grep -qE "$watched: .*($expect)" big.err || fail "$change: no message saying $expect: $(cat big.err)"
        exists big
        absent big.ckpz
        no_temp_files .
    else
        wait "$pid"
        echo "SKIP: the -9 compression of 15 MB ended before the $change; it came too late"
    fi
done
rm -f big big.orig big.err big.base

# --- an output that appears under the final name while ckpz writes is left alone
# (linkat or renameat2 RENAME_NOREPLACE: no window between the look and the rename);
# with -f it is replaced. The input comes from a FIFO that holds ckpz mid-run.
for force in "" -f; do
    rm -f fifo race.ckpz
    mkfifo fifo || fail "mkfifo"
    "$CKPZ" -q $force -o race.ckpz <fifo 2>race.err &
    pid=$!
    exec 3>fifo
    head -c 2M in.bin >&3
    for i in $(seq 1 100); do
        [ -n "$(temp_output_of "$pid" "$WORK")" ] && break
        sleep 0.05
    done
    echo "written by someone else" >race.ckpz
    tail -c +2097153 in.bin >&3
    exec 3>&-
    wait "$pid"
    rc=$?
    if [ -z "$force" ]; then
        [ "$rc" -eq 1 ] || fail "an output that appeared while writing: exit $rc"
        grep -q "race.ckpz: appeared while writing; not overwritten" race.err || fail "message: $(cat race.err)"
        [ "$(cat race.ckpz)" = "written by someone else" ] || fail "the other file was overwritten"
    else
        [ "$rc" -eq 0 ] || fail "-f over an output that appeared while writing: exit $rc: $(cat race.err)"
        "$CKPZ" -q -dc race.ckpz | cmp -s - in.bin || fail "-f: the output does not restore the input"
    fi
    no_temp_files .
    ok
done

echo "fileio_faults.sh: $CHECKS checks passed"
