#!/bin/bash
# tinyfs.sh — a real file system that fills up (a tmpfs mounted for the test, where it
# may mount one; fileio_faults.sh injects ENOSPC with a shim everywhere): compressing
# and decompressing into a tmpfs too small for the output, at sizes that run out in the
# first frame, mid-way and in the last bytes (index, trailer), must each exit 1 with a
# message naming the output and the cause, leave the tmpfs as empty as it was (no
# output, no temporary file, no space held), keep the input intact, and leave an
# existing output untouched with -f. A tmpfs just large enough takes the output whole.
# Each at -T0 (the caller writes) and -T1 (past its first 4 MiB the output is written
# behind by a thread of its own, where there is more than one core).
source "$(dirname "$0")/common.bash" "$@"

MNT=$WORK/mnt
mkdir "$MNT" || fail "mkdir $MNT"
if ! mount -t tmpfs -o size=4m,mode=0755 ckpz-test "$MNT" 2>/dev/null; then
    echo "SKIP: cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN); tinyfs.sh checks nothing"
    exit 0
fi
trap 'umount "$MNT" 2>/dev/null; rm -rf "$WORK"' EXIT

# a tmpfs of SIZE bytes (rounded up to pages by the kernel), empty
resize() {
    rm -rf "${MNT:?}"/* "$MNT"/.[!.]* 2>/dev/null
    mount -o remount,size="$1" "$MNT" || fail "remount size=$1"
}
used() { df -B1 --output=used "$MNT" | tail -n 1 | tr -d ' '; }

# input: real tensors and noise, so that both coding paths write frames
cat "$ROOT/samples/gpt-small.bf16.safetensors" "$ROOT/samples/gpt-small.f32.safetensors" >input
head -c 1M /dev/urandom >>input
cp input input.orig
run 0 "$CKPZ" -q -o input.ckpz input
csize=$(stat -c %s input.ckpz)
osize=$(stat -c %s input)
echo "old output" >old

# full MODE SIZE: MODE c writes input.ckpz into the tmpfs, d restores into it
full() {
    local mode=$1 size=$2 out
    resize "$size"
    local before
    before=$(used)
    if [ "$mode" = c ]; then
        out=$MNT/input.ckpz
        run 1 "$CKPZ" -q -T"$T" -o "$out" input
    else
        out=$MNT/input
        run 1 "$CKPZ" -q -T"$T" -d -o "$out" input.ckpz
    fi
    err_has "$out"
    err_has "No space left on device"
    absent "$out"
    no_temp_files "$MNT"
    [ "$(ls -A "$MNT")" = "" ] || fail "$mode -T$T at $size: left in the tmpfs: $(ls -A "$MNT")"
    [ "$(used)" = "$before" ] || fail "$mode -T$T at $size: the tmpfs holds $(used) bytes, $before before"
    cmp -s input input.orig || fail "$mode -T$T at $size: the input changed"
    # -f over an existing output: the old one survives the failure
    cp old "$out" 2>/dev/null || { echo "note: no room for the old output at $size (-T$T)"; return; }
    if [ "$mode" = c ]; then
        run 1 "$CKPZ" -q -T"$T" -f -o "$out" input
    else
        run 1 "$CKPZ" -q -T"$T" -f -d -o "$out" input.ckpz
    fi
    cmp -s "$out" old || fail "$mode -T$T at $size: -f replaced the old output after a failure"
    no_temp_files "$MNT"
    ok
}

page=4096
for T in 0 1; do
    for mode in c d; do
        if [ "$mode" = c ]; then n=$csize; else n=$osize; fi
        # out of room in the first frame, a third, two thirds of the way, and in the last page
        for size in $page $((n / 3)) $((2 * n / 3)) $(((n - 1) / page * page)); do
            [ "$size" -ge "$page" ] || size=$page
            full "$mode" "$size"
        done
        # room for the whole output (and nothing else): it lands, whole
        resize $(((n + page - 1) / page * page + 16 * page))
        if [ "$mode" = c ]; then
            run 0 "$CKPZ" -q -T"$T" -o "$MNT/input.ckpz" input
            cmp -s "$MNT/input.ckpz" input.ckpz || fail "c: the output in a large enough tmpfs differs"
        else
            run 0 "$CKPZ" -q -T"$T" -d -o "$MNT/input" input.ckpz
            cmp -s "$MNT/input" input.orig || fail "d: the restored file in a large enough tmpfs differs"
        fi
        ok
    done
done
echo "tinyfs.sh: $CHECKS checks passed (compressed $csize bytes, original $osize)"
