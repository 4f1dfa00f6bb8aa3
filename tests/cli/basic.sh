#!/bin/bash
# basic.sh — round trips through the ckpz command line are byte-identical, whatever
# the input (checkpoints, raw dumps of every dtype at odd sizes, empty, one byte) and
# whichever way the output is named (FILE.ckpz, -o, -c, pipes); the zstd-style flags
# (-k, --rm, -f, -T#, -1..-9, --chunk-size) do what zstd users expect; bad usage
# exits with 2.
source "$(dirname "$0")/common.bash" "$@"

# roundtrip FILE [COMPRESS OPTIONS...]: FILE -> FILE.ckpz -> FILE again, compared
roundtrip() {
    local f=$1
    shift
    rm -f "$f.ckpz" "$f.back"
    run 0 "$CKPZ" -q "$@" "$f"
    exists "$f.ckpz"
    exists "$f"
    run 0 "$CKPZ" -q -d -o "$f.back" "$f.ckpz"
    same_file "$f" "$f.back"
    rm -f "$f.back"
}

# --- real and generated checkpoints, default settings, via FILE.ckpz naming both ways
mkdir ck
n=0
while IFS= read -r s; do
    cp "$s" "ck/$(basename "$s")"
    f="ck/$(basename "$s")"
    run 0 "$CKPZ" -q "$f"
    exists "$f.ckpz"
    mv "$f" "$f.orig"
    run 0 "$CKPZ" -q -d "$f.ckpz"
    exists "$f.ckpz"
    same_file "$f" "$f.orig"
    n=$((n + 1))
done < <(sample_files)
[ "$n" -ge 2 ] || fail "no sample checkpoints found"

# --- raw dumps of every dtype, sizes that are not multiples of anything
for dt in bf16 f16 f32 f64 f8e4m3 f8e5m2 i8 i16 i32 i64 u8; do
    for size in 1 7 1001 65537 300007; do
        head -c "$size" /dev/urandom >"raw_${dt}_$size"
        roundtrip "raw_${dt}_$size" --dtype="$dt"
    done
done
# --format=raw without a dtype: opaque bytes
head -c 200003 /dev/urandom >opaque
roundtrip opaque --format=raw
roundtrip opaque --format=auto

# --- empty and one-byte inputs, from files and from pipes
: >empty
roundtrip empty
printf 'x' >one
roundtrip one
"$CKPZ" <empty | "$CKPZ" -d >empty.pipe || fail "empty through pipes"
same_file empty empty.pipe
printf 'x' | "$CKPZ" | "$CKPZ" -d >one.pipe || fail "one byte through pipes"
same_file one one.pipe

# a larger file with structure, used below
big=$(safetensors_files | head -1)
cp "$big" data
head -c 3000000 /dev/urandom >>data

# --- -o, -c, stdin -> stdout
run 0 "$CKPZ" -q -o named.ckpz data
exists named.ckpz
absent data.ckpz
run 0 "$CKPZ" -q -d -o named.out named.ckpz
same_file data named.out
run 0 "$CKPZ" -q -c data
cp "$WORK/.out" c.ckpz
absent data.ckpz
run 0 "$CKPZ" -q -d -c c.ckpz
same_file "$WORK/.out" data
cat data | "$CKPZ" | "$CKPZ" -d | cmp -s - data || fail "cat data | ckpz | ckpz -d differs"
ok
"$CKPZ" - <data >dash.ckpz || fail "ckpz - <data"
"$CKPZ" -d - <dash.ckpz | cmp -s - data || fail "ckpz -d - differs"
ok
"$CKPZ" -d <c.ckpz | cmp -s - data || fail "ckpz -d <c.ckpz differs"
ok
# --stdout long form, and -o - meaning stdout
"$CKPZ" --stdout data | "$CKPZ" -d -o - | cmp -s - data || fail "--stdout / -o -"
ok

# --- -k is the default, --rm removes the input only on success
cp data keepme
run 0 "$CKPZ" -q keepme
exists keepme
exists keepme.ckpz
rm keepme.ckpz
run 0 "$CKPZ" -q -k keepme
exists keepme
cp data gone
run 0 "$CKPZ" -q --rm gone
absent gone
exists gone.ckpz
run 0 "$CKPZ" -q -d --rm gone.ckpz
absent gone.ckpz
same_file gone data
# a failed decompression with --rm keeps its input
head -c 100000 /dev/urandom >junk.ckpz
run 1 "$CKPZ" -q -d --rm junk.ckpz
exists junk.ckpz
absent junk
# --rm with -c is ignored: the input stays
cp data rmc
run 0 "$CKPZ" -q --rm -c rmc
exists rmc

# --- existing output: refused without -f (and left untouched), replaced with -f
cp data exist
echo "precious" >exist.ckpz
cp exist.ckpz exist.ckpz.before
run 1 "$CKPZ" -q exist
err_has "exist.ckpz"
same_file exist.ckpz exist.ckpz.before
no_temp_files .
run 1 "$CKPZ" -q -o exist.ckpz exist
same_file exist.ckpz exist.ckpz.before
run 0 "$CKPZ" -q -f exist
run 0 "$CKPZ" -q -d -c exist.ckpz
same_file "$WORK/.out" exist
# decompression onto an existing file
echo "precious" >exist
cp exist exist.before
run 1 "$CKPZ" -q -d exist.ckpz
same_file exist exist.before
run 0 "$CKPZ" -q -d -f exist.ckpz
same_file exist data
# combined short flags
run 0 "$CKPZ" -dkfq exist.ckpz
same_file exist data
exists exist.ckpz
# output to a device needs no -f
run 0 "$CKPZ" -q -d -o /dev/null exist.ckpz

# --- threads, levels, chunk sizes: all restorable
for t in -T1 -T2 -T0 --threads=3; do
    roundtrip data "$t"
done
"$CKPZ" -q -T1 -c data >t1.ckpz || fail "-T1"
"$CKPZ" -q -T 2 -c data >t2.ckpz || fail "-T 2"
"$CKPZ" -q -d -c t1.ckpz | cmp -s - data || fail "-T1 output does not restore"
"$CKPZ" -q -d -c t2.ckpz | cmp -s - data || fail "-T2 output does not restore"
"$CKPZ" -q -d -T3 -c t1.ckpz | cmp -s - data || fail "-T1 output does not restore with -d -T3"
ok
for l in 1 2 3 4 5 6 7 8 9; do
    roundtrip data "-$l"
done
rm -f data.ckpz
for cs in 64K 64KiB 256k 1M 1MiB 16M 16MiB 65536; do
    roundtrip data --chunk-size="$cs"
done
roundtrip data --chunk-size 128K

# --- --codec: every back end restores; the forced ones write other bytes than auto (in
# each a plane coded with them), "rans" other bytes than auto here (no zstd for the text
# header), levels reach the back ends
S1=$(sample_files | grep '\.safetensors$' | head -1)
cp "$S1" cs.safetensors
run 0 "$CKPZ" -q -f -o cs.auto.ckpz cs.safetensors
for c in auto rans zstd lz4 snappy deflate; do
    for l in -1 -9; do
        roundtrip cs.safetensors --codec="$c" "$l"
    done
    run 0 "$CKPZ" -q -f --codec "$c" -o "cs.$c.ckpz" cs.safetensors
    run 0 "$CKPZ" -q -t "cs.$c.ckpz"
done
for c in rans zstd lz4 snappy deflate; do
    cmp -s cs.auto.ckpz "cs.$c.ckpz" && fail "--codec=$c wrote what auto writes"
    ok
done
run 2 "$CKPZ" --codec=brotli cs.safetensors
err_has "unknown codec 'brotli'"

# --- several files at once; options after file names
cp data m1
cp one m2
cp empty m3
run 0 "$CKPZ" m1 m2 m3 -q
exists m1.ckpz
exists m2.ckpz
exists m3.ckpz
rm m1 m2 m3
run 0 "$CKPZ" -d -q m1.ckpz m2.ckpz m3.ckpz
same_file m1 data
same_file m2 one
same_file m3 empty
# "--" ends options: a file named -q
cp one ./-q
run 0 "$CKPZ" -- -q
exists ./-q.ckpz
rm -f ./-q ./-q.ckpz

# --- suffix rules
cp data already.ckpz
run 1 "$CKPZ" already.ckpz
err_has "already has .ckpz suffix"
absent already.ckpz.ckpz
run 0 "$CKPZ" -q -f already.ckpz
exists already.ckpz.ckpz
run 1 "$CKPZ" -d data
err_has "unknown suffix"
rm -f data.ckpz
run 0 "$CKPZ" -q data
mv data.ckpz nosuffix
run 0 "$CKPZ" -q -d -o nosuffix.out nosuffix
same_file nosuffix.out data

# --- usage errors exit 2, touching nothing
run 2 "$CKPZ" -19 data
err_has "level must be 1..9"
run 2 "$CKPZ" -10 data
run 2 "$CKPZ" --chunk-size=1K data
run 2 "$CKPZ" --chunk-size=32M data
run 2 "$CKPZ" --chunk-size=12Q data
run 2 "$CKPZ" --format=zip data
run 2 "$CKPZ" --dtype=f128 data
run 2 "$CKPZ" -Tx data
err_has "invalid thread count 'x'"
run 2 "$CKPZ" -T4x data
run 2 "$CKPZ" --bogus data
run 2 "$CKPZ" -Y data
run 2 "$CKPZ" -o out m1.ckpz m2.ckpz
run 2 "$CKPZ" --extract
absent out
rm -f data.ckpz
run 2 "$CKPZ" --rm=1 data
absent data.ckpz

# --- help and version
run 0 "$CKPZ" -h
for opt in -d -c -k --rm -f -o -T -l -t --extract -b -q -v --progress --chunk-size --format --dtype --codec; do
    out_has -- "$opt"
done
run 0 "$CKPZ" --help
run 0 "$CKPZ" -V
grep -Eq '^ckpz [0-9]+\.[0-9]+\.[0-9]+ \(libckpz [^,]+, zstd [0-9.]+\)$' "$WORK/.out" ||
    fail "-V output: $(cat "$WORK/.out")"
ok

# --- -v prints the one-line summary even when stderr is not a terminal
run 0 "$CKPZ" -v -f data
err_has "data.ckpz"
err_has "%"
err_has "x,"
err_has "MB/s"
# at the default verbosity too, for a file to a file, as zstd (tests/cli/zstd_cli.sh
# compares the cases): one line
run 0 "$CKPZ" -f data
[ "$(wc -l <"$WORK/.err")" -eq 1 ] || fail "default summary: $(cat "$WORK/.err")"
grep -q 'data : .*% (.* => .*, data.ckpz) [0-9.]*x, .* MB/s' "$WORK/.err" || fail "summary line: $(cat "$WORK/.err")"
ok
run 0 "$CKPZ" -q -f data
[ ! -s "$WORK/.err" ] || fail "-q printed: $(cat "$WORK/.err")"
ok

# --- -9: a one-line note about its speed, which -q hides
run 0 "$CKPZ" -9 -f -c data
[ "$(grep -c 'note: -9 compresses at a few MB/s per core' "$WORK/.err")" -eq 1 ] || fail "-9 note: $(cat "$WORK/.err")"
ok
run 0 "$CKPZ" -9 -q -f -c data
[ ! -s "$WORK/.err" ] || fail "-9 -q printed: $(cat "$WORK/.err")"
ok
run 0 "$CKPZ" -3 -f -c data
grep -q note "$WORK/.err" && fail "-3 printed the -9 note"
ok

# --- on a terminal, the summary shows at the default verbosity, and -q silences it
if command -v script >/dev/null 2>&1 && script -qec true /dev/null </dev/null >/dev/null 2>&1; then
    script -qec "cd $(printf '%q' "$WORK") && $(printf '%q ' "$CKPZ" -f data)" /dev/null </dev/null >tty.log 2>&1 ||
        fail "ckpz on a terminal failed: $(cat tty.log)"
    grep -q 'data : .*% (.* => .*, data.ckpz) [0-9.]*x, .* MB/s' tty.log ||
        fail "no summary on a terminal: $(cat tty.log)"
    script -qec "cd $(printf '%q' "$WORK") && $(printf '%q ' "$CKPZ" -q -f data)" /dev/null </dev/null >tty.log 2>&1 ||
        fail "ckpz -q on a terminal failed"
    [ ! -s tty.log ] || fail "-q printed on a terminal: $(cat tty.log)"
    ok
else
    echo "SKIP: no 'script' tool; terminal summary not checked"
fi

# --- mode and mtime of the input carry over
cp data stamped
chmod 0640 stamped
touch -d '2020-01-02 03:04:05' stamped
run 0 "$CKPZ" -q stamped
[ "$(stat -c %a stamped.ckpz)" = 640 ] || fail "mode not kept: $(stat -c %a stamped.ckpz)"
[ "$(stat -c %Y stamped.ckpz)" = "$(stat -c %Y stamped)" ] || fail "mtime not kept"
ok

# --stats=json: one object per file on stderr, with the sizes of what was written
cp "$ROOT/samples/gpt-small.bf16.safetensors" st.safetensors
run 0 "$CKPZ" -f --stats=json st.safetensors -o st.ckpz
python3 - "$WORK/.err" st.safetensors st.ckpz <<'PYEOF' || fail "--stats=json output"
import json, os, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert d["operation"] == "compress" and d["file"] == "st.safetensors", d
assert d["original_bytes"] == os.path.getsize(sys.argv[2]), d
assert d["compressed_bytes"] == os.path.getsize(sys.argv[3]), d
assert abs(d["ratio"] - d["original_bytes"] / d["compressed_bytes"]) < 1e-5, d
assert d["seconds"] > 0 and d["mb_per_s"] > 0 and d["cpu_seconds"] >= 0 and d["threads"] >= 1, d
PYEOF
ok
run 0 "$CKPZ" -f -d --stats st.ckpz -o st.out
err_has "st.ckpz: decompress: ratio"
run 2 "$CKPZ" -f --stats=xml st.safetensors -o st2.ckpz
absent st2.ckpz

# --target-bw: a valid file; -v shows the cost model and the choice within --cpu-budget
# (0.2 MB/s: 4 s uncompressed, long enough for measuring to pay)
run 0 "$CKPZ" -v -f --target-bw 0.2 --cpu-budget 1 st.safetensors -o tb.ckpz
err_has "chosen: "
err_has "uncompressed"
grep "chosen:" "$WORK/.err" | grep -q -- "-T1 " || fail "--cpu-budget 1 not respected: $(grep chosen "$WORK/.err")"
ok
# per role: a checkpoint with Adam's state is measured role by role, and whatever levels
# the roles get, the file restores exactly
cp "$ROOT/samples/gpt-small.f32.safetensors" tr.safetensors
run 0 "$CKPZ" -v -f --target-bw 1 --cpu-budget 1 tr.safetensors -o tr.ckpz
err_has "measured per role"
err_has "exp_avg_sq "
err_has "exp_avg "
err_has "weights and the rest"
run 0 "$CKPZ" -q -d -f tr.ckpz -o tr.out
same_file tr.out tr.safetensors
run 0 "$CKPZ" -l tr.ckpz
grep -qi "lossy" "$WORK/.out" && fail "per-role levels made the file lossy"
ok
# --stats with --target-bw reports the link's use
run 0 "$CKPZ" -f --stats=json --target-bw 100 st.safetensors -o tb.ckpz
python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert d['target_bw_mb_per_s'] == 100 and d['link_use'] > 0, d" "$WORK/.err" || fail "--stats link use"
ok
# a save too short to measure for: the model on nominal speeds (1.1x, not predicted), -1
# where the link is the limit (10 MB/s: 84 ms stored, 77 ms at -1), storing (-0) where
# coding the file's one chunk and restoring it cost more than the link saves (100 MB/s:
# 8.8 ms stored, 9.1 ms at -1) or where nominal -1 is not twice the link's speed (1 GB/s);
# all restore exactly
run 0 "$CKPZ" -v -f --target-bw 10 st.safetensors -o tb.ckpz
err_has "cannot pay: -1 "
run 0 "$CKPZ" -q -d -f tb.ckpz -o tb.out
same_file tb.out st.safetensors
run 0 "$CKPZ" -v -f --target-bw 100 st.safetensors -o tb.ckpz
err_has "cannot pay: -0 "
run 0 "$CKPZ" -q -d -f tb.ckpz -o tb.out
same_file tb.out st.safetensors
run 0 "$CKPZ" -v -f --target-bw 1000 st.safetensors -o tb.ckpz
err_has "cannot pay (the link outruns -1 on its coding threads by over half): -0 "
run 0 "$CKPZ" -q -d -f tb.ckpz -o tb.out
same_file tb.out st.safetensors
# -0 stores: the output is the input's size and a little more, and restores exactly
run 0 "$CKPZ" -q -0 -f st.safetensors -o st0.ckpz
[ "$(stat -c %s st0.ckpz)" -gt "$(stat -c %s st.safetensors)" ] || fail "-0 made st.safetensors smaller"
run 0 "$CKPZ" -q -d -f st0.ckpz -o st0.out
same_file st0.out st.safetensors
run 2 "$CKPZ" -f --target-bw 0 st.safetensors -o tb2.ckpz
run 2 "$CKPZ" -f --target-bw fast st.safetensors -o tb2.ckpz
run 2 "$CKPZ" -f --cpu-budget 0 st.safetensors -o tb2.ckpz
absent tb2.ckpz

# --- streams back to back in a regular file of several 4 MiB buffers, read ahead by a
# thread (programs/pump.c, with -T1 on more than one core): a stream longer than a buffer is followed by another (such
# a file restored 4 MiB and then failed: where the reader looked for the trailer was
# counted from before the read that crossed the buffer's end), and its 40-byte trailer
# straddles the end of the first buffer (1, 20 and 39 bytes of it in the next), where
# only the bytes the reader keeps from the buffer before let it find the stream's end
head -c 4300000 /dev/urandom >sr.bin
head -c 100000 /dev/urandom >sr2.bin
run 0 "$CKPZ" -q -1 -f sr2.bin -o sr2.ckpz
for over in 1 20 39 100; do
    want=$((4194304 + over)) n=4190000
    for _ in 1 2 3; do # stored chunks: the stream grows with its input byte for byte
        head -c "$n" sr.bin >sr1.bin
        run 0 "$CKPZ" -q -1 -f sr1.bin -o sr1.ckpz
        n=$((n + want - $(stat -c %s sr1.ckpz)))
    done
    [ "$(stat -c %s sr1.ckpz)" -eq "$want" ] || fail "could not make a stream of $want bytes"
    cat sr1.ckpz sr2.ckpz sr1.ckpz >sr.ckpz
    cat sr1.bin sr2.bin sr1.bin >sr.want
    for t in 1 0; do
        run 0 "$CKPZ" -q -d -T$t -c sr.ckpz
        same_file "$WORK/.out" sr.want
    done
done
rm -f sr.bin sr1.bin sr2.bin sr1.ckpz sr2.ckpz sr.ckpz sr.want

no_temp_files .
no_temp_files ck
echo "basic.sh: $CHECKS checks passed"
