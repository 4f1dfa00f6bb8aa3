#!/bin/bash
# errors.sh — every failure exits 1 with a message that names the file, and leaves no
# partial output and no temporary file behind: input that is not ckpz, truncated or
# bit-flipped archives, a missing input, a directory, an output that cannot be
# written, an existing output (never replaced by a failed run, even with -f), and
# compressed output to a terminal (restored output may go there, as with zstd -dc);
# a symbolic link as the output is an existing name, dangling or not.
source "$(dirname "$0")/common.bash" "$@"

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

# must_fail_cleanly FILE.ckpz WHAT [LIST]: -t, -d (and -l unless LIST is "list-may-pass":
# listing reads only the header, index and trailer, so damage inside a chunk is found
# when the chunk is decoded) exit 1 naming the file; -d leaves no output and no
# temporary file; an existing output survives a failed -d -f.
must_fail_cleanly() {
    local f=$1 what=$2 list=${3:-} base=${1%.ckpz}
    rm -f "$base"
    run 1 "$CKPZ" -t "$f"
    err_has "$f"
    run 1 "$CKPZ" -d "$f"
    err_has "$f"
    absent "$base"
    no_temp_files .
    if [ "$list" = list-may-pass ]; then
        "$CKPZ" -l "$f" >/dev/null 2>&1
        local rc=$?
        [ "$rc" -le 1 ] || fail "ckpz -l $f: exit $rc (crash?)"
    else
        run 1 "$CKPZ" -l "$f"
        err_has "$f"
    fi
    echo "existing $what" >"$base"
    cp "$base" existing.before
    run 1 "$CKPZ" -d -f "$f"
    same_file "$base" existing.before
    no_temp_files .
    rm -f "$base" existing.before
    # the same bytes through a pipe: exit 1 too
    run 1 bash -c '"$1" -d <"$2" >/dev/null' _ "$CKPZ" "$f"
}

sample=$(safetensors_files | head -1)
[ -n "$sample" ] || fail "no sample checkpoint"
cp "$sample" good
head -c 1500000 /dev/urandom >>good
run 0 "$CKPZ" -q --chunk-size=64K good
size=$(stat -c %s good.ckpz)
[ "$size" -gt 1000 ] || fail "good.ckpz is suspiciously small ($size bytes)"
run 0 "$CKPZ" -t good.ckpz
err_has "good.ckpz : OK"

# --- not a ckpz file at all
head -c 100000 /dev/urandom >random.ckpz
must_fail_cleanly random.ckpz "random"
printf 'hello, this is text\n' >text.ckpz
must_fail_cleanly text.ckpz "text"
: >empty.ckpz
must_fail_cleanly empty.ckpz "empty"
cp good notckpz.ckpz
must_fail_cleanly notckpz.ckpz "a safetensors file"

# --- truncated at several points
for cut in 1 4 8 16 31 64 $((size / 3)) $((size / 2)) $((size - 100)) $((size - 9)) $((size - 1)); do
    head -c "$cut" good.ckpz >"cut$cut.ckpz"
    must_fail_cleanly "cut$cut.ckpz" "truncated at $cut"
    rm -f "cut$cut.ckpz"
done

# --- one flipped byte: header, middle, near the end, last byte
for pos in 0 9 $((size / 2)) $((size / 2 + 777)) $((size - 20)) $((size - 1)); do
    cp good.ckpz "flip$pos.ckpz"
    flip_byte "flip$pos.ckpz" "$pos"
    must_fail_cleanly "flip$pos.ckpz" "flipped at $pos" list-may-pass
    rm -f "flip$pos.ckpz"
done
# the middle flip should be reported as a checksum problem, naming a chunk
cp good.ckpz mid.ckpz
flip_byte mid.ckpz $((size / 2))
run 1 "$CKPZ" -t mid.ckpz
grep -qiE 'checksum|crc|corrupt' "$WORK/.err" || fail "flipped byte not reported as corruption: $(cat "$WORK/.err")"
ok

# --- a flipped byte past the output's first 4 MiB at -T1: the output is written behind
# from buffers the decoder decodes chunks into (lent by the write-behind thread, where
# there is more than one core), some lent when the chunk fails: exit 1 naming the file
# and the chunk, nothing under the final name, an existing output untouched with -f
cat "$ROOT/samples/gpt-small.f32.safetensors" "$ROOT/samples/gpt-small.bf16.safetensors" >big
head -c 1500000 /dev/urandom >>big
run 0 "$CKPZ" -q -T1 big
bsize=$(stat -c %s big.ckpz)
flip_byte big.ckpz $((bsize * 9 / 10))
run 1 "$CKPZ" -q -T1 -d -o big.out big.ckpz
err_has "big.ckpz"
err_has "chunk"
absent big.out
no_temp_files .
echo "existing big.out" >big.out
run 1 "$CKPZ" -q -T1 -f -d -o big.out big.ckpz
[ "$(cat big.out)" = "existing big.out" ] || fail "-f -d -T1 replaced the output after a corrupt chunk"
no_temp_files .
rm -f big big.ckpz big.out
ok

# --- missing input, directory input; the other files are still processed
run 1 "$CKPZ" nosuchfile
err_has "nosuchfile"
absent nosuchfile.ckpz
mkdir adir
run 1 "$CKPZ" adir
err_has "adir"
absent adir.ckpz
run 1 "$CKPZ" -d adir
cp good other
run 1 "$CKPZ" -q nosuchfile other
exists other.ckpz
rm other
run 1 "$CKPZ" -q -d nosuchfile.ckpz other.ckpz
same_file other good
run 1 "$CKPZ" -t nosuchfile.ckpz good.ckpz
err_has "nosuchfile.ckpz"
run 1 "$CKPZ" -l nosuchfile.ckpz

# --- outputs that cannot be written: a missing directory is named as such (the output
# asked for, not a temporary file)
run 1 "$CKPZ" -o no/such/dir/out.ckpz good
err_has "no/such/dir/out.ckpz: cannot create it: directory 'no/such/dir' does not exist"
grep -q "tmp\|temporary" "$WORK/.err" && fail "the message names a temporary file: $(cat "$WORK/.err")"
ok
run 1 "$CKPZ" -o good/out.ckpz good.ckpz
err_has "'good' is not a directory"

# --- a symbolic link as the output is an existing name, dangling or not, decided before
# any work (the input here is a pipe that ends only after 3 s): not written through
# without -f; -f replaces the link itself. A link to a device is written through.
ln -s nowhere dangling
ln -s nowhere dangling.bin
cp good.ckpz dangling.bin.ckpz
for cmd in "-o dangling" "-d -o dangling -" "-d dangling.bin.ckpz"; do
    # shellcheck disable=SC2086
    run 1 bash -c '(sleep 3; cat good) | timeout 2 "$@"' _ "$CKPZ" $cmd
    err_has "already exists"
    absent nowhere
    [ -L dangling ] && [ -L dangling.bin ] || fail "a link was replaced without -f"
    ok
done
run 0 "$CKPZ" -q -f -o dangling good
[ -f dangling ] && [ ! -L dangling ] || fail "-f did not replace the link with the output"
absent nowhere
"$CKPZ" -q -dc dangling | cmp -s - good || fail "the output under the link's name does not restore"
ok
ln -s /dev/null tonull
run 0 "$CKPZ" -q -o tonull good
[ -L tonull ] || fail "a link to /dev/null was replaced"
ok
rm -f dangling dangling.bin dangling.bin.ckpz tonull
if [ -w /dev/full ]; then
    run 1 bash -c '"$1" -c "$2" >/dev/full' _ "$CKPZ" good
    err_has "write error"
    run 1 "$CKPZ" -o /dev/full good
    run 1 "$CKPZ" -d -o /dev/full good.ckpz
else
    echo "SKIP: /dev/full not writable"
fi
no_temp_files .

# --- output must not be the input
cp good.ckpz self.ckpz
run 1 "$CKPZ" -d -f -o self.ckpz self.ckpz
same_file self.ckpz good.ckpz

# --- binary to a terminal is refused (and reading binary from one)
if command -v script >/dev/null 2>&1 && script -qec true /dev/null </dev/null >/dev/null 2>&1; then
    script -qec "$(printf '%q ' "$CKPZ" -c good)" /dev/null </dev/null >tty.log 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || fail "ckpz -c to a terminal: exit $rc, expected 1"
    grep -q "terminal" tty.log || fail "no terminal message: $(head -c 300 tty.log)"
    [ "$(stat -c %s tty.log)" -lt 2000 ] || fail "binary went to the terminal"
    ok
    # restored data may go to a terminal, as with zstd -dc (compare zstd's answer)
    printf 'restored text\n' >ttytext
    "$CKPZ" -q ttytext
    script -qec "$(printf '%q ' "$CKPZ" -d -c ttytext.ckpz)" /dev/null </dev/null >tty.log 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || fail "ckpz -d -c to a terminal: exit $rc, expected 0 (as zstd): $(head -c 300 tty.log)"
    grep -q "restored text" tty.log || fail "ckpz -d -c wrote nothing to the terminal: $(head -c 300 tty.log)"
    if command -v zstd >/dev/null 2>&1; then
        zstd -q -f ttytext -o ttytext.zst
        script -qec "$(printf '%q ' zstd -d -c ttytext.zst)" /dev/null </dev/null >tty.log 2>&1
        rc=$?
        [ "$rc" -eq 0 ] && grep -q "restored text" tty.log || fail "zstd -d -c to a terminal no longer writes (exit $rc)"
    fi
    rm -f ttytext ttytext.ckpz ttytext.zst
    script -qec "cd $(printf '%q' "$WORK") && $(printf '%q ' "$CKPZ") <good" /dev/null </dev/null >tty.log 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || fail "ckpz <good to a terminal: exit $rc, expected 1"
    script -qec "$(printf '%q ' "$CKPZ" -d)" /dev/null </dev/null >tty.log 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || fail "ckpz -d reading a terminal: exit $rc, expected 1"
    ok
else
    echo "SKIP: no 'script' tool; terminal refusal not checked"
fi

# --memory caps what describing the tensors takes, not only single allocations: 30,000
# tiny tensors need ~12 MB of tables (a few hundred bytes each), so 4M is refused with a
# message naming the file and the limit, leaving nothing; 32M passes and restores.
python3 - many.safetensors <<'PYEOF' || fail "making many.safetensors"
import json, struct, sys
hdr, off = {}, 0
for i in range(30000):
    hdr["layer.%d.bias" % i] = {"dtype": "F32", "shape": [4], "data_offsets": [off, off + 16]}
    off += 16
h = json.dumps(hdr).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(i % 251 for i in range(off)))
PYEOF
run 1 "$CKPZ" -q --memory=4M many.safetensors
err_has "many.safetensors"
err_has "memory limit allows (4.0 MiB"
absent many.safetensors.ckpz
no_temp_files .
run 0 "$CKPZ" -q --memory=32M many.safetensors
run 0 "$CKPZ" -q -d --memory=32M many.safetensors.ckpz -o many.back
same_file many.safetensors many.back
rm -f many.safetensors many.safetensors.ckpz many.back

no_temp_files .
echo "errors.sh: $CHECKS checks passed"
