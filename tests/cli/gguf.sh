#!/bin/bash
# gguf.sh — GGUF model files through the CLI, written by an independent writer that
# follows the published spec (tests/data/make_gguf.py) from the committed sample's real
# weights: F32, F16, BF16, I32 and Q8_0/Q4_0 tensors restore byte for byte (from a file
# and through pipes); -l lists each tensor where the writer put it, with its dtype or
# GGML block type and its shape outermost first; tensor coding beats an opaque pass;
# delta coding matches the tensors by name; and damaged files (cut short, huge counts
# and lengths, unknown types, overlapping or misaligned tensors, deep arrays, bad
# alignment) still restore exactly, with the tensors the reader can vouch for.
source "$(dirname "$0")/common.bash" "$@"

W="$ROOT/tests/data/make_gguf.py"
F32="$ROOT/samples/gpt-small.f32.safetensors"
BF16="$ROOT/samples/gpt-small.bf16.safetensors"
python3 "$W" m.gguf --f32 "$F32" --bf16 "$BF16" --q8 1 --q4 1 --expect m.json || fail "make_gguf.py"
python3 "$W" m64.gguf --f32 "$F32" --q8 2 --alignment 64 --expect m64.json || fail "make_gguf.py --alignment"

# lists_as FILE.ckpz EXPECT.json: every tensor the writer placed, and nothing else, at its
# offset and length, with its dtype and shape (from -l -v)
lists_as() {
    run 0 "$CKPZ" -l -v "$1"
    python3 - "$WORK/.out" "$2" <<'PYEOF' || fail "-l of $1 does not match $2"
import json, re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"^\s*\d+\s+(\S+)\s+(\S+)\s+(\[[^\]]*\]|-)\s.*?\s(\d+)\s+(\d+)\s+\d+\s+\d+\s*$", line)
    if m and m.group(2) != "bytes":
        shape = json.loads(m.group(3))
        rows[m.group(1)] = (m.group(2), shape, int(m.group(4)), int(m.group(5)))
want = {e["name"]: (e["dtype"], e["shape"], e["offset"], e["length"]) for e in json.load(open(sys.argv[2]))}
for k in sorted(set(rows) | set(want)):
    if rows.get(k) != want.get(k):
        sys.exit("%s: listed %r, written %r" % (k, rows.get(k), want.get(k)))
assert any(k.endswith(":q8_0") for k in rows), "no q8_0 tensor"
PYEOF
    out_has ", gguf, crc32c"
}

for f in m m64; do
    run 0 "$CKPZ" -q -f "$f.gguf"
    run 0 "$CKPZ" -q -d -f "$f.gguf.ckpz" -o "$f.out"
    same_file "$f.out" "$f.gguf"
    lists_as "$f.gguf.ckpz" "$f.json"
    # through pipes: no size known
    run 0 sh -c "cat $f.gguf | '$CKPZ' -q -c | '$CKPZ' -q -dc > $f.pipe"
    same_file "$f.pipe" "$f.gguf"
done
grep -q "bf16" m.json && grep -q "q4_0" m.json && grep -q '"f16"' m.json && grep -q '"i32"' m.json ||
    fail "the writer left out a type"
ok

# tensor coding pays: smaller than the same bytes coded opaque
run 0 "$CKPZ" -q -f --format=raw m.gguf -o opaque.ckpz
[ "$(stat -c %s m.gguf.ckpz)" -lt "$(stat -c %s opaque.ckpz)" ] || fail "GGUF coding no smaller than opaque"
ok

# a forced format that does not match; --format=gguf on a GGUF file
run 1 "$CKPZ" -f --format=gguf "$F32" -o bad.ckpz
err_has "not valid gguf"
absent bad.ckpz
run 0 "$CKPZ" -q -f --format=gguf m.gguf -o forced.ckpz
same_file forced.ckpz m.gguf.ckpz

# delta coding finds the tensors by name: a file against itself is copies
run 0 "$CKPZ" -q -f --base m.gguf m.gguf -o self.ckpz
[ "$(stat -c %s self.ckpz)" -lt $(( $(stat -c %s m.gguf) / 50 )) ] || fail "--base: not coded as copies"
run 0 "$CKPZ" -q -d -f --base m.gguf self.ckpz -o self.out
same_file self.out m.gguf

# prediction reads the same tensors
run 0 "$CKPZ" --predict m.gguf
out_has "transformer.wte.weight:q8_0"

# damaged files: restored exactly, with the tensors the reader can still vouch for
python3 "$W" --hostile hostile --f32 "$F32" || fail "make_gguf.py --hostile"
n=0
while read -r name _; do
    f="hostile/$name"
    run 0 "$CKPZ" -q -f "$f" -o h.ckpz
    run 0 "$CKPZ" -q -d -f h.ckpz -o h.out
    same_file h.out "$f"
    run 0 "$CKPZ" -l h.ckpz
    got=$(sed -n 's/.*  \([0-9]*\) tensors, .*/\1/p' "$WORK/.out")
    want=$(awk -v n="$name" '$1 == n { print ($2 == "tensors" ? $3 : $2 == "opaque" ? 0 : "any") }' hostile/hostile.txt)
    [ "$want" = any ] || [ "$got" = "$want" ] || fail "$name: $got tensors listed, $want expected"
    ok
    n=$((n + 1))
done < hostile/hostile.txt
[ "$n" -ge 30 ] || fail "only $n damaged files"
ok

echo "gguf.sh: $CHECKS checks passed"
