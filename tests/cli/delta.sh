#!/bin/bash
# delta.sh — delta checkpoints from the command line, without torch: --base round trips
# (files, -o, -c, pipes), the base found by its recorded name beside the file (also
# through a chain of .ckpz bases), -l's "depends on:" line, -t and --extract with and
# without --base, refusals of a missing or wrong base (exit 1, the expected CRC-32C named,
# nothing left behind), --keyframe-every, --rebase, usage errors, a damaged delta file.
# The checkpoints: samples/gpt-small.f32.safetensors and copies with bytes flipped
# inside some tensors' data.
source "$(dirname "$0")/common.bash" "$@"

S="$ROOT/samples/gpt-small.f32.safetensors"
[ -f "$S" ] || fail "missing $S"

# modify IN OUT SEED: OUT is IN with bytes flipped inside every third tensor's data
# (the header and the other tensors unchanged)
modify() {
    python3 - "$1" "$2" "$3" <<'PYEOF' || fail "modify $1 $2"
import json, random, struct, sys
src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
rnd = random.Random(seed)
names = [k for k in h if k != "__metadata__"]
for k in names[1::3]:
    a, b = h[k]["data_offsets"]
    for _ in range(max(1, (b - a) // 64)):
        i = 8 + n + rnd.randrange(a, b)
        if (i - 8 - n) % 4 != 3:       # mantissa bytes only: still ordinary floats
            d[i] ^= 1 << rnd.randrange(8)
open(dst, "wb").write(bytes(d))
PYEOF
}

flip_byte() { # FILE OFFSET: xor the byte at OFFSET with 0x55
    python3 - "$1" "$2" <<'PYEOF' || fail "flip_byte $1 $2"
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off)
    b = f.read(1)
    f.seek(off)
    f.write(bytes([b[0] ^ 0x55]))
PYEOF
}

# depends FILE.ckpz: the "depends on:" line of ckpz -l (empty for a stand-alone file)
depends() {
    "$CKPZ" -l "$1" >"$WORK/.list" 2>"$WORK/.err" || fail "ckpz -l $1: $(cat "$WORK/.err")"
    grep '^depends on:' "$WORK/.list" || true
}

size_of() { stat -c %s "$1"; }

cp "$S" a.safetensors
modify a.safetensors b.safetensors 1
modify b.safetensors c.safetensors 2
cmp -s a.safetensors b.safetensors && fail "modify changed nothing"
ok
A_SIZE=$(size_of a.safetensors)

# the CRC-32C of a's bytes, as the stand-alone file records it
run 0 "$CKPZ" -q -o a.alone.ckpz a.safetensors
run 0 "$CKPZ" -l a.alone.ckpz
A_CRC=$(grep -Eo 'crc32c [0-9a-f]{8}' "$WORK/.out" | head -1 | cut -d' ' -f2)
[ ${#A_CRC} = 8 ] || fail "no crc32c in the -l total line: $(tail -2 "$WORK/.out")"
ok
[ -z "$(depends a.alone.ckpz)" ] || fail "a stand-alone file lists a dependency"
ok

# --- --base: FILE -> FILE.ckpz against a, restored byte for byte
run 0 "$CKPZ" -q --base a.safetensors b.safetensors
exists b.safetensors.ckpz
exists b.safetensors
run 0 "$CKPZ" -q -o b.alone.ckpz b.safetensors
[ "$(size_of b.safetensors.ckpz)" -lt $(($(size_of b.alone.ckpz) / 2)) ] ||
    fail "delta $(size_of b.safetensors.ckpz) bytes, stand-alone $(size_of b.alone.ckpz)"
ok
dep=$(depends b.safetensors.ckpz)
case "$dep" in
"depends on: a.safetensors ($A_SIZE bytes, crc32c $A_CRC); "*" entries coded against it; restoring takes 1 delta file") ok ;;
*) fail "-l depends line: '$dep'" ;;
esac
run 0 "$CKPZ" -q -d -o b.out b.safetensors.ckpz          # base found beside it
same_file b.out b.safetensors
run 0 "$CKPZ" -q -d -f --base a.safetensors -o b.out b.safetensors.ckpz
same_file b.out b.safetensors
run 0 "$CKPZ" -q -d -f --base a.alone.ckpz -o b.out b.safetensors.ckpz   # the base as a .ckpz
same_file b.out b.safetensors
mv b.safetensors b.orig
run 0 "$CKPZ" -q -d b.safetensors.ckpz                   # FILE.ckpz -> FILE
same_file b.safetensors b.orig
rm b.orig
# -c, and the base named by a path in another directory
mkdir elsewhere
cp a.safetensors elsewhere/base
run 0 "$CKPZ" -q -c --base elsewhere/base b.safetensors
cp "$WORK/.out" b.c.ckpz
run 0 "$CKPZ" -l b.c.ckpz
out_has "depends on: base ($A_SIZE bytes"
run 0 "$CKPZ" -q -d -c --base elsewhere/base b.c.ckpz
same_file "$WORK/.out" b.safetensors

# --- stdin and stdout with --base
"$CKPZ" -q --base a.safetensors <b.safetensors >pipe.ckpz || fail "ckpz --base a <b >pipe.ckpz"
ok
"$CKPZ" -q -d --base a.safetensors <pipe.ckpz >pipe.out || fail "ckpz -d --base a <pipe.ckpz"
same_file pipe.out b.safetensors
"$CKPZ" -q -d --base a.safetensors - <pipe.ckpz | cmp -s - b.safetensors || fail "ckpz -d --base a - differs"
ok
# shellcheck disable=SC2002 # a real pipe, not a seekable file on stdin
cat b.safetensors | "$CKPZ" -q --base a.safetensors | "$CKPZ" -q -d --base a.safetensors |
    cmp -s - b.safetensors || fail "cat | ckpz --base | ckpz -d --base differs"
ok
[ -n "$(depends pipe.ckpz)" ] || fail "pipe.ckpz has no dependency"
ok
# a pipe cannot be looked beside: without --base it is refused, naming the base
run 1 "$CKPZ" -q -d <pipe.ckpz
err_has "$A_CRC"
err_has "a.safetensors"
err_has "base"
[ ! -s "$WORK/.out" ] || fail "a refused pipe wrote $(size_of "$WORK/.out") bytes"
ok
run 1 "$CKPZ" -q -t <pipe.ckpz
err_has "$A_CRC"

# --- -t with and without --base
run 0 "$CKPZ" -q -t b.safetensors.ckpz
run 0 "$CKPZ" -q -t --base a.safetensors b.safetensors.ckpz
run 0 "$CKPZ" -q -t --base a.safetensors <pipe.ckpz
run 0 "$CKPZ" -q -t a.alone.ckpz b.safetensors.ckpz

# --- --extract from a delta file: the tensor's bytes
for name in $(tensor_names b.safetensors | head -3); do
    read -r start len < <(tensor_range b.safetensors "$name")
    tail -c +$((start + 1)) b.safetensors | head -c "$len" >want.bin
    rm -f got.bin
    run 0 "$CKPZ" -q --extract "$name" -o got.bin b.safetensors.ckpz
    same_file got.bin want.bin
    run 0 "$CKPZ" -q --extract "$name" --base a.safetensors b.safetensors.ckpz
    same_file "$WORK/.out" want.bin
done

# --- a chain: c against b.safetensors.ckpz, the originals gone
mkdir chain
cp a.safetensors chain/
cp b.safetensors c.safetensors chain/
(cd chain && "$CKPZ" -q a.safetensors && "$CKPZ" -q --base a.safetensors.ckpz b.safetensors &&
    "$CKPZ" -q --base b.safetensors.ckpz c.safetensors) || fail "building the chain"
ok
dep=$(depends chain/c.safetensors.ckpz)
case "$dep" in
"depends on: b.safetensors.ckpz ("*"restoring takes 2 delta files") ok ;;
*) fail "chain depends line: '$dep'" ;;
esac
rm chain/a.safetensors chain/b.safetensors chain/c.safetensors
run 0 "$CKPZ" -q -d chain/c.safetensors.ckpz
same_file chain/c.safetensors c.safetensors
run 0 "$CKPZ" -q -d -f --base chain/b.safetensors.ckpz -o chain/c.named chain/c.safetensors.ckpz
same_file chain/c.named c.safetensors
run 0 "$CKPZ" -q -t chain/c.safetensors.ckpz

# --- missing base: exit 1, the base named, nothing written
mkdir lone
cp b.safetensors.ckpz lone/
run 1 "$CKPZ" -q -d lone/b.safetensors.ckpz
err_has "lone/b.safetensors.ckpz"
err_has "$A_CRC"
err_has "a.safetensors"
absent lone/b.safetensors
no_temp_files lone
run 1 "$CKPZ" -q -t lone/b.safetensors.ckpz
err_has "$A_CRC"
run 1 "$CKPZ" -q --extract "$(tensor_names b.safetensors | head -1)" -o lone/t.bin lone/b.safetensors.ckpz
err_has "$A_CRC"
absent lone/t.bin
run 1 "$CKPZ" -q -d --base lone/no-such-base lone/b.safetensors.ckpz
err_has "no-such-base"
absent lone/b.safetensors
# a missing link inside a chain
mv chain/a.safetensors.ckpz a.moved.ckpz
run 1 "$CKPZ" -q -d -f chain/c.safetensors.ckpz
err_has "$A_CRC"
mv a.moved.ckpz chain/a.safetensors.ckpz
# compressing against a base that does not exist
run 1 "$CKPZ" -q --base no-such-base -o never.ckpz b.safetensors
err_has "no-such-base"
absent never.ckpz
no_temp_files .

# --- a delta file none of whose entries matched its base restores without it (the base
# frame is recorded, nothing is coded against it): -d, -t, --extract, a pipe; -l says so
B16S="$ROOT/samples/gpt-small.bf16.safetensors"   # other tensors' bytes: nothing matches
run 0 "$CKPZ" -q --base "$B16S" -o nomatch.ckpz a.safetensors
mkdir nomatch
cp nomatch.ckpz nomatch/
"$CKPZ" -l nomatch/nomatch.ckpz >"$WORK/.list" || fail "ckpz -l nomatch.ckpz"
grep -q "^written against: gpt-small.bf16.safetensors .*; 0 of [0-9]* entries coded against it: restores without it" \
    "$WORK/.list" || fail "-l of a delta with no coded entry: $(tail -1 "$WORK/.list")"
grep -q '^depends on:' "$WORK/.list" && fail "-l: a delta with no coded entry 'depends on' its base"
run 0 "$CKPZ" -q -d -o nomatch/a.out nomatch/nomatch.ckpz
same_file nomatch/a.out a.safetensors
run 0 "$CKPZ" -q -t nomatch/nomatch.ckpz
T1=$(tensor_names a.safetensors | head -1)
run 0 "$CKPZ" -q --extract "$T1" -o nomatch/t.bin nomatch/nomatch.ckpz
[ -s nomatch/t.bin ] || fail "--extract from a delta with no coded entry wrote nothing"
"$CKPZ" -q -dc <nomatch/nomatch.ckpz >nomatch/pipe.out || fail "a delta with no coded entry through a pipe"
same_file nomatch/pipe.out a.safetensors
# the same with headers of one length (a tensor renamed, same size): the header's bytes
# are not coded against the base's when no tensor is in the base (issue 33)
python3 - <<'PYEOF' || fail "make renamed safetensors"
import json, os, struct
for path, name in (("ren_a.safetensors", "layer.weight"), ("ren_b.safetensors", "other.weight")):
    h = json.dumps({name: {"dtype": "F32", "shape": [4096], "data_offsets": [0, 16384]}}).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + os.urandom(16384))
PYEOF
run 0 "$CKPZ" -q --base ren_a.safetensors -o renamed.ckpz ren_b.safetensors
"$CKPZ" -l renamed.ckpz >"$WORK/.list" || fail "ckpz -l renamed.ckpz"
grep -q "; 0 of [0-9]* entries coded against it: restores without it" "$WORK/.list" ||
    fail "-l of a delta whose only tensor is not in its base: $(tail -1 "$WORK/.list")"
"$CKPZ" -q -dc <renamed.ckpz >renamed.out || fail "a delta whose tensors are not in its base, without the base"
same_file renamed.out ren_b.safetensors
# with a base given, it must still be the right one
run 1 "$CKPZ" -q -t --base c.safetensors nomatch/nomatch.ckpz
err_has "wrong base"
# one coded entry is enough to need it: b's delta, without its base, through a pipe
run 1 "$CKPZ" -q -dc <lone/b.safetensors.ckpz
err_has "$A_CRC"
err_has "name the base with --base"
ok

# --- wrong base: exit 1, "wrong base", the expected CRC-32C and the file named
run 1 "$CKPZ" -q -d --base c.safetensors -o wrong.out b.safetensors.ckpz
err_has "b.safetensors.ckpz"
err_has "wrong base"
err_has "$A_CRC"
absent wrong.out
run 1 "$CKPZ" -q -d --base c.safetensors <pipe.ckpz
err_has "$A_CRC"
run 1 "$CKPZ" -q -t --base c.safetensors b.safetensors.ckpz
err_has "$A_CRC"
cp c.safetensors lone/a.safetensors          # the recorded name, other content
run 1 "$CKPZ" -q -d lone/b.safetensors.ckpz
err_has "wrong base"
err_has "$A_CRC"
absent lone/b.safetensors
no_temp_files lone
no_temp_files .
# an existing output survives a refused restore, even with -f
echo precious >keep.out
run 1 "$CKPZ" -q -d -f --base c.safetensors -o keep.out b.safetensors.ckpz
[ "$(cat keep.out)" = precious ] || fail "a refused restore replaced its output"
ok

# --- --keyframe-every
run 0 "$CKPZ" -q --keyframe-every 1 --base a.safetensors -o kf1.ckpz b.safetensors
[ -z "$(depends kf1.ckpz)" ] || fail "--keyframe-every 1 wrote a delta file"
ok
cp kf1.ckpz lone/
run 0 "$CKPZ" -q -d -o lone/kf1.out lone/kf1.ckpz      # needs no base at all
same_file lone/kf1.out b.safetensors
run 0 "$CKPZ" -q --keyframe-every=2 --base a.safetensors -o kf2.ckpz b.safetensors
[ -n "$(depends kf2.ckpz)" ] || fail "--keyframe-every 2 against an original: not a delta"
ok
# the base is itself one delta file deep: a chain of 2 reached, stand-alone
run 0 "$CKPZ" -q --keyframe-every 2 --base b.safetensors.ckpz -o kf2c.ckpz c.safetensors
[ -z "$(depends kf2c.ckpz)" ] || fail "--keyframe-every 2 against a delta: $(depends kf2c.ckpz)"
ok
run 0 "$CKPZ" -q --keyframe-every 3 --base b.safetensors.ckpz -o kf3c.ckpz c.safetensors
case "$(depends kf3c.ckpz)" in
*"restoring takes 2 delta files") ok ;;
*) fail "--keyframe-every 3 against a delta: '$(depends kf3c.ckpz)'" ;;
esac
run 0 "$CKPZ" -q -d -o kf3c.out kf3c.ckpz
same_file kf3c.out c.safetensors

# --- --rebase: stand-alone, same content
cp b.safetensors.ckpz r.ckpz
run 0 "$CKPZ" -q --rebase -o rebased.ckpz r.ckpz
cmp -s r.ckpz b.safetensors.ckpz || fail "--rebase -o changed its input"
ok
[ -z "$(depends rebased.ckpz)" ] || fail "--rebase -o left a dependency"
ok
cp rebased.ckpz lone/
run 0 "$CKPZ" -q -d -o lone/rebased.out lone/rebased.ckpz
same_file lone/rebased.out b.safetensors
cp b.safetensors.ckpz lone/inplace.ckpz
run 0 "$CKPZ" -q --rebase --base a.safetensors lone/inplace.ckpz
[ -z "$(depends lone/inplace.ckpz)" ] || fail "--rebase in place left a dependency"
ok
run 0 "$CKPZ" -q -d -o lone/inplace.out lone/inplace.ckpz
same_file lone/inplace.out b.safetensors
run 1 "$CKPZ" -q --rebase lone/b.safetensors.ckpz       # its base is wrong there
err_has "$A_CRC"
cmp -s lone/b.safetensors.ckpz b.safetensors.ckpz || fail "a failed --rebase changed its file"
ok
no_temp_files lone

# --- usage errors: exit 2, nothing written
for bad in "--keyframe-every 0" "--keyframe-every=0" "--keyframe-every x" "--keyframe-every -1" \
    "--keyframe-every 1000001"; do
    # shellcheck disable=SC2086
    run 2 "$CKPZ" -q $bad --base a.safetensors -o usage.ckpz b.safetensors
    err_has "keyframe-every"
    absent usage.ckpz
done
run 2 "$CKPZ" -q -o usage.ckpz b.safetensors --keyframe-every
run 2 "$CKPZ" -q -o usage.ckpz b.safetensors --base
absent usage.ckpz

# --- a damaged delta file is refused, with its base at hand
cp b.safetensors.ckpz bad.ckpz
flip_byte bad.ckpz $(($(size_of bad.ckpz) / 2))
run 1 "$CKPZ" -q -d --base a.safetensors -o bad.out bad.ckpz
err_has "bad.ckpz"
absent bad.out
run 1 "$CKPZ" -q -t --base a.safetensors bad.ckpz
err_has "bad.ckpz"
"$CKPZ" -q -d --base a.safetensors <bad.ckpz >/dev/null 2>&1 && fail "a damaged delta restored through a pipe"
ok
# damage in the base frame (the recorded size, CRC-32C and name) is refused too
cp b.safetensors.ckpz badhead.ckpz
flip_byte badhead.ckpz 40
run 1 "$CKPZ" -q -d --base a.safetensors -o badhead.out badhead.ckpz
absent badhead.out
no_temp_files .

# files written by earlier versions (tests/data/compat/README.md) stay readable: a delta
# file (format version 2) and a lossy one with a base (version 3) by ckpz 0.3.0, a delta
# file of version 4 and a stand-alone one of version 1 by 0.4.0 development builds, each
# restored (against its base) and checked against the content checksum its writer recorded
C="$ROOT/tests/data/compat"
B16="$ROOT/samples/gpt-small.bf16.safetensors"
run 0 "$CKPZ" -q -d -f "$C/fp32_state.v1.ckpz" -o compat.v1.out
same_file compat.v1.out "$ROOT/tests/data/torch/fp32_state.pt"
for v in v2 v3 v4; do
    run 0 "$CKPZ" -t --base "$B16" "$C/next.bf16.$v.ckpz"
    run 0 "$CKPZ" -q -d -f --base "$B16" "$C/next.bf16.$v.ckpz" -o "compat.$v.out"
    [ "$(stat -c %s "compat.$v.out")" = "$(stat -c %s "$B16")" ] || fail "compat $v: restored size"
    cmp -s "compat.$v.out" "$B16" && fail "compat $v: restored the base itself"
    ok
done
run 0 "$CKPZ" -l "$C/next.bf16.v2.ckpz"
out_has "depends on"
same_file compat.v4.out compat.v2.out   # both restore the same content
# the version-2 file restores to what this writer codes from the same input
run 0 "$CKPZ" -q -f --base "$B16" compat.v2.out -o compat.now.ckpz
run 0 "$CKPZ" -q -d -f --base "$B16" compat.now.ckpz -o compat.now.out
same_file compat.now.out compat.v2.out
run 1 "$CKPZ" -q -t "$C/next.bf16.v2.ckpz"   # without its base: refused
# a golden delta pair next.bf16.V and next.bf16.lossy.V restored (the lossless one to what
# next.bf16.v2.ckpz restores, the lossy one tested and to the base's size)
restore_pair() {
    run 0 "$CKPZ" -q -d -f --base "$B16" "$C/next.bf16.$1.ckpz" -o "compat.$1.out"
    same_file "compat.$1.out" compat.v2.out
    run 0 "$CKPZ" -t --base "$B16" "$C/next.bf16.lossy.$1.ckpz"
    run 0 "$CKPZ" -q -d -f --base "$B16" "$C/next.bf16.lossy.$1.ckpz" -o "compat.$1l.out"
    [ "$(stat -c %s "compat.$1l.out")" = "$(stat -c %s "$B16")" ] || fail "compat $1 lossy: restored size"
}
# version 5 files without coded entry lists (feature 3), as ckpz 0.4.0 development
# builds before it wrote them: restored only
run 0 "$CKPZ" -q -d -f "$C/fp32_state.v5.ckpz" -o compat.v5s.out
same_file compat.v5s.out "$ROOT/tests/data/torch/fp32_state.pt"
restore_pair v5
# the golden files of the form written today (version 5, features packed and coded, v5c):
# each restores, and today's writer (one thread, the default level) codes the same inputs
# to the same bytes again; a change of the format shows here and needs a new feature or
# version and new golden files
run 0 "$CKPZ" -q -d -f "$C/fp32_state.v5c.ckpz" -o compat.v5cs.out
same_file compat.v5cs.out "$ROOT/tests/data/torch/fp32_state.pt"
run 0 "$CKPZ" -q -T1 -f "$ROOT/tests/data/torch/fp32_state.pt" -o compat.v5cs.ckpz
same_file compat.v5cs.ckpz "$C/fp32_state.v5c.ckpz"
restore_pair v5c
# the delta pair as written since codec 9 (order 0 for small planes, v5d): restored only,
# as the v5c ones above
restore_pair v5d
# the delta pair as written since small entries with a counterpart are packed when that
# is estimated smaller (v5e, the same format): restored only, as the v5d ones above
restore_pair v5e
# the delta pair as written since groups are coded against the base (feature 4, v5f):
# restored only, as the v5e ones above
restore_pair v5f
# the delta pair as written since codec 11 (order 0 with its tails in the states, v5g):
# restored, and written again byte for byte
restore_pair v5g
run 0 "$CKPZ" -q -T1 -f --base "$B16" compat.v5g.out -o compat.v5g.ckpz
same_file compat.v5g.ckpz "$C/next.bf16.v5g.ckpz"
run 0 "$CKPZ" -q -T1 -f --rel 1e-2 --base "$B16" compat.v5g.out -o compat.v5gl.ckpz
same_file compat.v5gl.ckpz "$C/next.bf16.lossy.v5g.ckpz"
# log-grid files written before the decoder kept the base's grid indices and the values
# of one-byte codes (ckpz at 29c182b): every value predicted from the base (`pointwise-rel`
# against it), and every value of a one-byte code without one (`no-base`, a fifth
# pruned), as the writer reconstructed them (the recorded checksums), and written again
# byte for byte
run 0 "$CKPZ" -t --base "$B16" "$C/next.bf16.prel.v5g.ckpz"
run 0 "$CKPZ" -q -T1 -f --pointwise-rel 1e-2 --base "$B16" compat.v5g.out -o compat.prel.ckpz
same_file compat.prel.ckpz "$C/next.bf16.prel.v5g.ckpz"
echo '* pointwise-rel 0.1 prune 0.2 no-base' > prelnb.policy
run 0 "$CKPZ" -t --base "$B16" "$C/next.bf16.prelnb.v5g.ckpz"
run 0 "$CKPZ" -q -T1 -f --policy prelnb.policy --base "$B16" compat.v5g.out -o compat.prelnb.ckpz
same_file compat.prelnb.ckpz "$C/next.bf16.prelnb.v5g.ckpz"
# written to a file, the base frame's checksum is patched in at the end (no pass over the
# base first); to a pipe it comes first: the same bytes
run 0 "$CKPZ" -q -f --base "$B16" compat.v2.out -o compat.file.ckpz
"$CKPZ" -q --base "$B16" -c compat.v2.out > compat.pipe.ckpz || fail "delta to stdout"
same_file compat.file.ckpz compat.pipe.ckpz
no_temp_files .

# --target-bw with --base measures deltas: the tensors found in the base against the same
# windows of it (b differs from a in a third of its tensors: the measured ratio must
# rise), and the file it writes restores exactly
tbw_ratio() { # the measured -3 ratio of the weights role in $WORK/.err
    grep '^  weights and the rest' "$WORK/.err" | sed -n 's/.* -3 \([0-9.]*\)x .*/\1/p'
}
run 0 "$CKPZ" -v -f --target-bw 1 --cpu-budget 1 b.safetensors -o tbw.s.ckpz
R_ALONE=$(tbw_ratio)
grep -qF "against the same windows of the base" "$WORK/.err" && fail "--target-bw without --base measured deltas"
run 0 "$CKPZ" -v -f --target-bw 1 --cpu-budget 1 --base a.safetensors b.safetensors -o tbw.d.ckpz
R_DELTA=$(tbw_ratio)
err_has "delta: against the same windows of the base"
err_has "measured, delta)"
python3 -c "import sys; a, d = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if d > 1.5 * a else 1)" \
    "$R_ALONE" "$R_DELTA" || fail "--target-bw --base: measured -3 ratio $R_DELTA, stand-alone $R_ALONE"
run 0 "$CKPZ" -q -d -f --base a.safetensors tbw.d.ckpz -o tbw.out
same_file tbw.out b.safetensors
ok

echo "delta.sh: $CHECKS checks passed"
