#!/bin/bash
# stored.sh — -0 (every chunk stored as it is: what --target-bw chooses where the link
# outruns coding) through pipes and files. The bytes a pipe gets (each chunk read where
# its frame holds it) are the bytes a file gets (frames written through the pump's lent
# buffers, more than 4 MiB: the pump is on); every way restores the input exactly, on
# one and two threads, from stdin and from a file; a truncated stored stream is refused
# with a message naming the input and where it ends, and a changed byte with the
# chunk's checksum, never with a partial output under the final name.
source "$(dirname "$0")/common.bash" "$@"

cp "$ROOT/samples/gpt-small.f32.safetensors" in.st # 5 MB: five chunks of 1 MiB
cp "$ROOT/tests/data/torch/adamw.pt" in.pt         # torch.save: zip members, a pickle
head -c 300007 /dev/urandom >in.raw

for f in in.st in.pt in.raw; do
    for t in 1 2; do
        # file to file, and the same file's bytes through a pipe
        run 0 "$CKPZ" -q -0 -T$t -f "$f" -o "$f.$t.ckpz"
        "$CKPZ" -q -0 -T$t -c "$f" | cat >"$f.$t.pipe.ckpz" || fail "$f -T$t: -0 -c into a pipe"
        same_file "$f.$t.ckpz" "$f.$t.pipe.ckpz"
        # from stdin, in chunks of 64 KiB (many frames), to a pipe, restored from a pipe
        cat "$f" | "$CKPZ" -q -0 -T$t --chunk-size 65536 | cat | "$CKPZ" -q -d -T$t | cat >"$f.$t.back" ||
            fail "$f -T$t: stdin -> -0 -> -d -> stdout"
        same_file "$f" "$f.$t.back"
        # restored from a file and from a pipe
        run 0 "$CKPZ" -q -d -T$t -f "$f.$t.ckpz" -o "$f.$t.out"
        same_file "$f" "$f.$t.out"
        cat "$f.$t.ckpz" | "$CKPZ" -q -d -T$t >"$f.$t.out2" || fail "$f -T$t: -d from stdin"
        same_file "$f" "$f.$t.out2"
    done
    # stored: the input's bytes and a little more
    [ "$(stat -c %s "$f.1.ckpz")" -gt "$(stat -c %s "$f")" ] || fail "-0 made $f smaller"
    ok
done

# Streams end to end through a pipe, the first with an index of 120 KiB (20,000 tiny
# tensors with unlike names) after a chunk of 1 MiB: the decoder reads an index to the
# end of its input, in reads under 64 KiB, which the CLI looks through for the stream's
# end, while it reads bigger requests (the chunk) straight from the pipe; after such a
# chunk the index's reads find nothing buffered (where a read of 64 KiB went straight
# to the pipe, the next stream's first bytes became the index's)
python3 - many.st <<'PYEOF' || fail "many.st"
import json, random, struct, sys
rnd = random.Random(3)
header, off = {}, 0
for i in range(20000):
    header["layer%05d.%08x.weight" % (i, rnd.getrandbits(32))] = {"dtype": "F32", "shape": [1], "data_offsets": [off, off + 4]}
    off += 4
header["zz.big"] = {"dtype": "F32", "shape": [262144], "data_offsets": [off, off + 1048576]}
off += 1048576
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + bytes(rnd.getrandbits(8) for _ in range(off)))
PYEOF
run 0 "$CKPZ" -q -0 -f many.st -o many.ckpz
run 0 "$CKPZ" -q -0 -f in.pt -o pt.ckpz
cat many.st in.pt >many.both
for t in 1 2; do
    cat many.ckpz pt.ckpz | "$CKPZ" -q -d -T$t >many.out || fail "-T$t: two streams from a pipe"
    same_file many.out many.both
done

# Truncated: inside the file header, early in the stream (its first frames), inside a
# stored payload (the middle of the third chunk), one byte short of the trailer. From stdin and from
# a file: exit 1, "truncated", the input named; -o's name never appears.
size=$(stat -c %s in.st.1.ckpz)
for cut in 20 $((96 + 10)) $((2 * 1048576 + 524288)) $((size - 1)); do
    head -c "$cut" in.st.1.ckpz >cut.ckpz
    run 1 "$CKPZ" -q -d -f cut.ckpz -o cut.out
    err_has "cut.ckpz"
    grep -qi "truncated" "$WORK/.err" || fail "cut at $cut: $(cat "$WORK/.err")"
    absent cut.out
    no_temp_files .
    head -c "$cut" in.st.1.ckpz | "$CKPZ" -q -d >cut.pipe 2>"$WORK/.err"
    rc=$?
    [ "$rc" -eq 1 ] || fail "cut at $cut from stdin: exit $rc"
    err_has "stdin"
    grep -qi "truncated" "$WORK/.err" || fail "cut at $cut from stdin: $(cat "$WORK/.err")"
done
# the cut in a payload names the chunk and its tensors
head -c $((2 * 1048576 + 524288)) in.st.1.ckpz >cut.ckpz
run 1 "$CKPZ" -q -d -f cut.ckpz -o cut.out
err_has "ends inside chunk"
err_has "(tensor"

# A byte of a stored payload changed: the chunk's checksum, from a file and from stdin
cp in.st.1.ckpz bad.ckpz
printf '\x5a' | dd of=bad.ckpz bs=1 seek=$((1048576 + 777)) conv=notrunc status=none
run 1 "$CKPZ" -q -d -f bad.ckpz -o bad.out
err_has "bad.ckpz"
err_has "checksum mismatch"
err_has "chunk "
absent bad.out
cat bad.ckpz | "$CKPZ" -q -d >bad.pipe 2>"$WORK/.err" && fail "a changed byte restored from stdin"
err_has "checksum mismatch"

# The pipes ckpz reads and writes hold 1 MiB (F_SETPIPE_SZ) where the system allows it, so
# that each end wakes the other per MiB, not per 64 KiB (3x faster through a pipeline of
# three processes on a 2-core VM). The reader of its output sees the size once a byte came;
# the writer of its input waits (bounded) for the size to change.
if [ "$(cat /proc/sys/fs/pipe-max-size 2>/dev/null || echo 0)" -ge 1048576 ]; then
    size=$("$CKPZ" -q -0 -c in.st | python3 -c 'import fcntl, sys
sys.stdin.buffer.read(1)
print(fcntl.fcntl(0, 1032))  # F_GETPIPE_SZ
sys.stdin.buffer.read()')
    [ "$size" -ge 1048576 ] || fail "the pipe ckpz writes holds $size bytes"
    python3 -c 'import fcntl, sys, time
n = fcntl.fcntl(1, 1032)
for _ in range(500):  # until the reader widened it, 5 s at most
    if fcntl.fcntl(1, 1032) != n:
        break
    time.sleep(0.01)
open("pipe.size", "w").write("%d" % fcntl.fcntl(1, 1032))
sys.stdout.buffer.write(open("in.st.1.ckpz", "rb").read())' | "$CKPZ" -q -d -c >pipe.back || fail "-d from a widened pipe"
    same_file in.st pipe.back
    [ "$(cat pipe.size)" -ge 1048576 ] || fail "the pipe ckpz reads holds $(cat pipe.size) bytes"
    ok
else
    echo "SKIP: pipe-max-size below 1 MiB"
fi

echo "stored.sh: $CHECKS checks passed"
