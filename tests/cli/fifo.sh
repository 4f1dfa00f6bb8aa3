#!/bin/bash
# fifo.sh — -d and -t of inputs that cannot be read twice (issue 27, "Hostile
# checkpoints"): a FIFO named on the command line, stdin as a pipe or FIFO. ckpz looks
# at a .ckpz file's head to find the base a delta file needs; from a FIFO that look
# must not eat the bytes the decoder reads next (it did: "not a ckpz file"). Checks: the
# restored bytes equal those restored from the regular file (cmp), stand-alone and
# delta files (base beside the FIFO's name, or --base), streams back to back, a stream
# larger than the input buffer, an empty FIFO; what cannot work on a pipe (-l,
# --extract, a FIFO as --base) fails at once with a message naming the file, without
# waiting for a writer. Every reader and writer runs under timeout: a hang fails the
# test instead of holding it.
source "$(dirname "$0")/common.bash" "$@"

S="$ROOT/samples/gpt-small.f32.safetensors"
[ -f "$S" ] || fail "missing $S"

# feed FILE FIFO: writes FILE into FIFO from the background (bounded); its pid in $feeder
feed() {
    timeout 20 dd if="$1" of="$2" bs=64K status=none 2>/dev/null &
    feeder=$!
}

# reader: the command under timeout (exit 124 when it hangs)
T() { timeout 20 "$@"; }

# the checkpoints: a stand-alone file, and the next state of base.safetensors coded
# against it (the delta records the name base.safetensors)
cp "$S" base.safetensors
cp "$S" next.safetensors
python3 - next.safetensors <<'PYEOF' || fail "modify next.safetensors"
import sys
with open(sys.argv[1], "r+b") as f:
    for at in (2000000, 4000000):
        f.seek(at)
        f.write(bytes((i * 7 + 3) & 0xff for i in range(30000)))
PYEOF
"$CKPZ" -q -f -T1 --chunk-size=64K -o f.ckpz "$S" || fail "compress"
"$CKPZ" -q -f -T1 --chunk-size=64K --base base.safetensors -o d.ckpz next.safetensors || fail "compress --base"
# larger than the 4 MiB input buffer: the peeked head is followed by refills
cat "$S" "$S" > big.f32
"$CKPZ" -q -f -T1 --chunk-size=64K --format=raw --dtype=f32 -o big.ckpz big.f32 || fail "compress big"
[ "$(stat -c %s big.ckpz)" -gt $((4 << 20)) ] || fail "big.ckpz is not larger than the input buffer"
"$CKPZ" -q -d -c f.ckpz > from-file || fail "-d of the regular file"
same_file from-file "$S"

mkfifo p.ckpz || fail "mkfifo"

# --- a stand-alone file: -t, -d -c, -d -o, -d to the name beside the FIFO
feed f.ckpz p.ckpz
run 0 T "$CKPZ" -t p.ckpz
wait $feeder
feed f.ckpz p.ckpz
run 0 T "$CKPZ" -d -c p.ckpz
wait $feeder
same_file "$WORK/.out" from-file
feed f.ckpz p.ckpz
run 0 T "$CKPZ" -q -f -d -o out p.ckpz
wait $feeder
same_file out from-file
feed f.ckpz p.ckpz
run 0 T "$CKPZ" -q -f -d p.ckpz
wait $feeder
same_file p from-file
[ -p p.ckpz ] || fail "the FIFO was removed"
ok

# --- stdin: a pipe and a FIFO
run 0 T bash -c 'cat f.ckpz | "$1" -d -c' _ "$CKPZ"
same_file "$WORK/.out" from-file
feed f.ckpz p.ckpz
run 0 T bash -c '"$1" -t < p.ckpz' _ "$CKPZ"
wait $feeder

# --- larger than the input buffer, and streams back to back
feed big.ckpz p.ckpz
run 0 T "$CKPZ" -d -c p.ckpz
wait $feeder
same_file "$WORK/.out" big.f32
cat f.ckpz f.ckpz > two.ckpz
cat from-file from-file > two.orig
feed two.ckpz p.ckpz
run 0 T "$CKPZ" -d -c p.ckpz
wait $feeder
same_file "$WORK/.out" two.orig

# --- a delta file: its base found beside the FIFO's name, as for a regular file
"$CKPZ" -q -d -c d.ckpz > next.from-file || fail "-d of the regular delta file"
same_file next.from-file next.safetensors
feed d.ckpz p.ckpz
run 0 T "$CKPZ" -t p.ckpz
wait $feeder
feed d.ckpz p.ckpz
run 0 T "$CKPZ" -d -c p.ckpz
wait $feeder
same_file "$WORK/.out" next.from-file
# ... and with --base where the base is not beside it; without, the base is named
mkdir sub
mkfifo sub/q.ckpz || fail "mkfifo"
feed d.ckpz sub/q.ckpz
run 0 T "$CKPZ" -d -c --base base.safetensors sub/q.ckpz
wait $feeder
same_file "$WORK/.out" next.from-file
feed d.ckpz sub/q.ckpz
run 1 T "$CKPZ" -t sub/q.ckpz
wait $feeder
err_has "sub/q.ckpz"
err_has "base"
grep -q "not a ckpz file" "$WORK/.err" && fail "a valid delta file from a FIFO called 'not a ckpz file': $(cat "$WORK/.err")"
ok
# stdin carries no name to find a base beside: --base
run 0 T bash -c 'cat d.ckpz | "$1" -d -c --base base.safetensors' _ "$CKPZ"
same_file "$WORK/.out" next.from-file

# --- an empty FIFO is not a ckpz file, and says so
feed /dev/null p.ckpz
run 1 T "$CKPZ" -t p.ckpz
wait $feeder
err_has "p.ckpz: not a ckpz file"

# --- what needs random access, or reads a file twice, refuses a FIFO at once, with no
# writer to wait for
run 1 T "$CKPZ" -l p.ckpz
err_has "p.ckpz: needs a regular file (random access), not a pipe"
run 1 T "$CKPZ" --extract lm_head.weight -c p.ckpz
err_has "p.ckpz: needs a regular file (random access), not a pipe"
run 1 T "$CKPZ" -d -c --base p.ckpz d.ckpz
err_has "p.ckpz: a base must be a regular file"
run 1 T bash -c 'cat f.ckpz | "$1" -l' _ "$CKPZ"
err_has "stdin: needs a regular file (random access), not a pipe"

# --- the regular files themselves, as before
run 0 "$CKPZ" -t f.ckpz d.ckpz
run 0 "$CKPZ" -d -c d.ckpz
same_file "$WORK/.out" next.safetensors

echo "fifo: $CHECKS checks passed"
