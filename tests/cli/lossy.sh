#!/bin/bash
# lossy.sh — lossy coding from the command line, without torch: every mode flag on the
# committed sample (restores within the bound on every element, checked here by an
# independent reader in Python; norms and biases stay exact; -l shows the errors), a
# --policy file, closed-loop chains with --base and the frozen-training warning, raw
# dumps with and without --shape, the usage errors, and that lossy flags never change
# decompression.
source "$(dirname "$0")/common.bash" "$@"

S="$ROOT/samples/gpt-small.f32.safetensors"
[ -f "$S" ] || fail "missing $S"
cp "$S" a.safetensors

# check ORIG RESTORED MODE BOUND: every element of every 2-D float tensor within the
# bound; every other tensor, and the header, byte for byte. Prints the max err/bound.
check() {
    python3 - "$@" <<'PYEOF' || fail "check $*"
import json, struct, sys, array, math
orig, rest, mode, bound = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
a, b = open(orig, "rb").read(), open(rest, "rb").read()
assert len(a) == len(b), "sizes differ"
n = struct.unpack("<Q", a[:8])[0]
assert a[:8 + n] == b[:8 + n], "header changed"
h = json.loads(a[8:8 + n])
worst, lossy = 0.0, 0
for k, v in h.items():
    if k == "__metadata__":
        continue
    s, e = v["data_offsets"]
    x, y = a[8 + n + s:8 + n + e], b[8 + n + s:8 + n + e]
    exact = v["dtype"] != "F32" or len(v["shape"]) < 2 or any(w in k.lower() for w in ("norm", "bias", "ln_"))
    if exact:
        assert x == y, "%s should be exact" % k
        continue
    xs, ys = array.array("f", x), array.array("f", y)
    fin = [t for t in xs if math.isfinite(t)]
    rng = max(fin) - min(fin)
    lossy += x != y
    for p, q in zip(xs, ys):
        lim = bound if mode == "abs" else bound * rng if mode == "rel" else bound * abs(p)
        err = abs(q - p)
        assert err <= lim, "%s: |%r - %r| > %g" % (k, q, p, lim)
        if mode == "prel":
            assert (p > 0) == (q > 0) and (p < 0) == (q < 0), "%s: sign changed" % k
        if lim > 0:
            worst = max(worst, err / lim)
assert lossy > 0, "nothing was lossy"
print("%.6f" % worst)
PYEOF
}

for m in "abs 1e-4 abs" "rel 1e-3 rel" "pointwise-rel 0.01 prel"; do
    set -- $m
    run 0 "$CKPZ" -q --"$1" "$2" a.safetensors -o "$1.ckpz"
    run 0 "$CKPZ" -q -d "$1.ckpz" -o "$1.out"
    w=$(check a.safetensors "$1.out" "$3" "$2")
    ok
    run 0 "$CKPZ" -t "$1.ckpz"
    run 0 "$CKPZ" -l "$1.ckpz"
    grep -q "^lossy: " "$WORK/.out" || fail "-l has no lossy summary"
    grep -q "MAE" "$WORK/.out" || fail "-l has no MAE column"
    grep -q "lossless" "$WORK/.out" || fail "-l marks no lossless tensor"
    ok
    # smaller than lossless
    [ "$(stat -c %s "$1.ckpz")" -lt "$(stat -c %s "$S")" ] || fail "$1: not smaller"
done
run 0 "$CKPZ" -q a.safetensors -o lossless.ckpz
[ "$(stat -c %s rel.ckpz)" -lt "$(stat -c %s lossless.ckpz)" ] || fail "rel 1e-3 not smaller than lossless"
ok

# unbiased rounding on the log grid keeps the same bound and signs
run 0 "$CKPZ" -q -f --pointwise-rel 0.5 --stochastic a.safetensors -o ps.ckpz
run 0 "$CKPZ" -q -d -f ps.ckpz -o ps.out
w=$(check a.safetensors ps.out prel 0.5)
ok
# ... kept on average in log2 (another rounding: another file, the same bound)
run 0 "$CKPZ" -q -f --pointwise-rel 0.5 --stochastic-log a.safetensors -o psl.ckpz
run 0 "$CKPZ" -q -d -f psl.ckpz -o psl.out
w=$(check a.safetensors psl.out prel 0.5)
cmp -s ps.ckpz psl.ckpz && fail "--stochastic-log wrote what --stochastic did"
ok

# fixed-rate modes and pruning: restore, and differ from the original
for m in "--int8" "--int8=asym" "--bits 8" "--bits 16 --block 128" "--bits 8 --percentile 99.5" "--abs 1e-4 --prune 0.5"; do
    run 0 "$CKPZ" -q -f $m a.safetensors -o m.ckpz
    run 0 "$CKPZ" -q -d -f m.ckpz -o m.out
    cmp -s m.out a.safetensors && fail "$m restored the original exactly"
    ok
done

# a policy file: first match wins; a lossless rule keeps a tensor exact
cat > policy.txt <<'POL'
# the embedding stays exact, everything else within 1e-4
*wte* lossless
*  abs 1e-4   # catch-all
POL
run 0 "$CKPZ" -q -f --policy policy.txt a.safetensors -o p.ckpz
run 0 "$CKPZ" -l p.ckpz
grep "wte" "$WORK/.out" | grep -q lossless || fail "policy: wte not lossless"
ok
run 0 "$CKPZ" -q -d -f p.ckpz -o p.out
check a.safetensors p.out abs 1e-4 >/dev/null

# -v after a lossy compression lists the errors
run 0 "$CKPZ" -v -f --abs 1e-4 a.safetensors -o v.ckpz
grep -q "MAE" "$WORK/.out" || fail "-v did not list the errors"
ok

# closed loop: b = a + small steps, coded against the restored a; a bound far above the
# steps is reported as freezing training
python3 - <<'PYEOF' || fail "make b"
import json, struct, array, random
d = bytearray(open("a.safetensors", "rb").read())
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
rnd = random.Random(3)
for k, v in h.items():
    if k == "__metadata__" or v["dtype"] != "F32":
        continue
    s, e = v["data_offsets"]
    xs = array.array("f", d[8 + n + s:8 + n + e])
    for i in range(len(xs)):
        xs[i] += rnd.gauss(0, 1e-3)
    d[8 + n + s:8 + n + e] = xs.tobytes()
open("b.safetensors", "wb").write(bytes(d))
PYEOF
run 0 "$CKPZ" -q -f --abs 1e-4 a.safetensors -o a.ckpz
run 0 "$CKPZ" -f --abs 1e-4 --base a.ckpz b.safetensors -o b.ckpz
grep -q "training would not move" "$WORK/.err" && fail "a small bound was reported as freezing"
ok
run 0 "$CKPZ" -q -d -f b.ckpz -o b.out
check b.safetensors b.out abs 1e-4 >/dev/null
run 0 "$CKPZ" -l b.ckpz
grep -q "^depends on: a.ckpz" "$WORK/.out" || fail "b.ckpz does not depend on a.ckpz"
ok
run 0 "$CKPZ" -f --abs 0.1 --base a.ckpz b.safetensors -o frozen.ckpz
err_has "training would not move"
run 0 "$CKPZ" -l frozen.ckpz
grep -q FROZEN "$WORK/.out" || fail "-l does not flag frozen tensors"
ok

# a raw dump with --shape is coded lossy as the same tensor in a safetensors file; without
# a shape it is one dimension: stored exactly, with a warning naming the file
shape=$(python3 - <<'PYEOF'
import json, struct
d = open("a.safetensors", "rb").read()
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
k, v = max(((k, v) for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F32" and len(v["shape"]) == 2),
           key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])
s, e = v["data_offsets"]
raw = d[8 + n + s:8 + n + e]
open("w.bin", "wb").write(raw)
hd = json.dumps({k: {"dtype": "F32", "shape": v["shape"], "data_offsets": [0, len(raw)]}}).encode()
hd += b" " * (-len(hd) % 8)
open("w.safetensors", "wb").write(struct.pack("<Q", len(hd)) + hd + raw)
print("x".join(map(str, v["shape"])))
PYEOF
) || fail "extract a 2-D tensor"
run 0 "$CKPZ" -q -f --dtype f32 --shape "$shape" --rel 1e-3 w.bin -o wb.ckpz
run 0 "$CKPZ" -q -f --rel 1e-3 w.safetensors -o ws.ckpz
run 0 "$CKPZ" -l -v wb.ckpz
out_has "[${shape/x/, }]"
grep -E "^0 +data +f32" "$WORK/.out" | grep -q "rel 0.001" || fail "--shape: the raw tensor is not lossy"
ok
rawcomp=$(awk '$2 == "data" { print $(NF - 1) }' "$WORK/.out")
run 0 "$CKPZ" -l -v ws.ckpz
stcomp=$(awk '$3 == "f32" { print $(NF - 1) }' "$WORK/.out")
[ -n "$rawcomp" ] && [ "$rawcomp" = "$stcomp" ] || fail "--shape: tensor coded to $rawcomp bytes raw, $stcomp in safetensors"
ok
run 0 "$CKPZ" -q -d -f wb.ckpz -o wb.out
cmp -s wb.out w.bin && fail "--shape --rel restored the dump exactly"
ok
run 0 "$CKPZ" -f --dtype f32 --rel 1e-3 w.bin -o w1.ckpz
err_has "w.bin: nothing was coded lossy: raw input is one dimension"
run 0 "$CKPZ" -q -d -f w1.ckpz -o w1.out
same_file w1.out w.bin
run 0 "$CKPZ" -f --format=raw --rel 1e-3 w.bin -o w0.ckpz
err_has "w.bin: nothing was coded lossy: raw input without --dtype is opaque bytes"
# the size must match the shape: from a file at once, from a pipe at its end
run 1 "$CKPZ" -f --dtype f32 --shape "${shape}0" w.bin -o bad.ckpz
err_has "not a f32 tensor of shape ${shape}0"
absent bad.ckpz
run 1 sh -c "cat w.bin w.bin | '$CKPZ' -q --dtype f32 --shape '$shape' -c >/dev/null"
err_has "not a f32 tensor of shape $shape"
for bad in "--shape $shape" "--format=safetensors --dtype f32 --shape $shape" "--dtype f32 --shape 0x4" \
           "--dtype f32 --shape 3y4" "--dtype f32 --shape x" "--dtype f32 --shape 4x"; do
    run 2 "$CKPZ" -f $bad w.bin -o bad.ckpz
    absent bad.ckpz
done

# usage errors: exit 2, nothing written
for bad in "--abs" "--abs 0" "--abs -1" "--rel x" "--pointwise-rel 1" "--bits 12" "--int8=foo" \
           "--prune 0.5" "--block 64" "--abs 1e-3 --rel 1e-3" "--abs 1e-3 --block 64" "--max-mae -1" \
           "--int8 --stochastic" "--abs 1e-3 --stochastic-log" "--stochastic-log"; do
    run 2 "$CKPZ" -f $bad a.safetensors -o bad.ckpz
    absent bad.ckpz
done
run 2 "$CKPZ" -d --abs 1e-3 a.ckpz -o x.out
absent x.out
echo "* frobnicate 3" > badpolicy.txt
run 1 "$CKPZ" -f --policy badpolicy.txt a.safetensors -o bad.ckpz
err_has "policy line 1"
absent bad.ckpz
run 2 "$CKPZ" -f --policy missing.txt a.safetensors -o bad.ckpz
absent bad.ckpz
no_temp_files .

# --lossy=auto: roles from the names of an Adam checkpoint; -l shows role, mode and why;
# a keyframe codes weights pointwise-rel, a delta file change-rel against the restored
# keyframe; exp_avg_sq restores > 0 everywhere; auto:aggressive writes less than
# auto:tight; bad knobs and flags auto sets itself are usage errors
adam_file() { # OUT SEED
    python3 - "$1" "$2" <<'PYEOF' || fail "adam_file $1"
import json, math, random, struct, sys
out, seed = sys.argv[1], int(sys.argv[2])
r0, r = random.Random(1), random.Random(seed)
n = 64 * 128
w = [r0.gauss(0, 0.02) + seed * 1e-3 * r.gauss(0.3, 1) for _ in range(n)]
v = [math.exp(r0.gauss(-14, 3) + 0.3 * r.gauss(0, 1)) for _ in range(n)]
m = [1e-1 * r.gauss(0, 1) * math.sqrt(x) for x in v]
specs = [("model.fc.weight", w, [64, 128]), ("model.norm.weight", w, [64, 128]),
         ("optimizer.state.0.exp_avg", m, [64, 128]), ("optimizer.state.0.exp_avg_sq", v, [64, 128]),
         ("optimizer.state.0.step", [100.0 + seed], [1]),
         # Adam's moments of a 1-D parameter (a bias or a gain): auto codes them too
         ("optimizer.state.1.exp_avg", m[:1024], [1024]), ("optimizer.state.1.exp_avg_sq", v[:1024], [1024])]
header, blobs, off = {}, [], 0
for name, vals, shape in specs:
    b = struct.pack("<%df" % len(vals), *vals)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PYEOF
}
v_positive() { # RESTORED: every exp_avg_sq value > 0
    python3 - "$1" <<'PYEOF' || fail "exp_avg_sq <= 0 in $1"
import json, struct, sys, array
a = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", a[:8])[0]
for k in ("optimizer.state.0.exp_avg_sq", "optimizer.state.1.exp_avg_sq"):
    s, e = json.loads(a[8:8 + n])[k]["data_offsets"]
    v = array.array("f", a[8 + n + s:8 + n + e])
    assert min(v) > 0, (k, min(v))
PYEOF
    ok
}
adam_file adam0.safetensors 0
adam_file adam1.safetensors 1
run 0 "$CKPZ" -q -f --lossy=auto adam0.safetensors -o adam0.ckpz
run 0 "$CKPZ" -f --lossy=auto --base adam0.ckpz adam1.safetensors -o adam1.ckpz
# Adam's moments restored as the base's within their bound are not frozen training
! grep -q "would not move" "$WORK/.err" || { cat "$WORK/.err" >&2; fail "auto: a frozen-training warning"; }
ok
for f in adam0 adam1; do
    run 0 "$CKPZ" -q -d -f $f.ckpz -o $f.out
    v_positive $f.out
done
run 0 "$CKPZ" -l adam0.ckpz
grep -E "model\.fc\.weight .* prel .* weight " "$WORK/.out" >/dev/null || fail "keyframe weight not prel/weight"
grep -E "exp_avg_sq .* prel .* exp_avg_sq +Adam second moment" "$WORK/.out" >/dev/null || fail "-l: exp_avg_sq role"
grep -E "model\.norm\.weight .* lossless .* exact +norm or bias" "$WORK/.out" >/dev/null || fail "-l: norm role"
grep -E "step .* lossless .* exact +fewer than 2 dimensions" "$WORK/.out" >/dev/null || fail "-l: step role"
grep -E "state\.1\.exp_avg_sq .* prel .* exp_avg_sq +Adam second moment \(name\), 1-D" "$WORK/.out" >/dev/null ||
    fail "-l: 1-D exp_avg_sq not on the log grid"
grep -E "state\.1\.exp_avg .* prel .* exp_avg +Adam first moment \(name\), 1-D" "$WORK/.out" >/dev/null ||
    fail "-l: 1-D exp_avg not on the log grid"
out_has "role        why"
run 0 "$CKPZ" -l adam1.ckpz
grep -E "model\.fc\.weight .* change-rel .* weight " "$WORK/.out" >/dev/null || fail "delta weight not change-rel"
run 0 "$CKPZ" -q -f --lossy=auto:tight adam0.safetensors -o tight.ckpz
run 0 "$CKPZ" -q -f --lossy=auto:aggressive adam0.safetensors -o aggr.ckpz
[ "$(stat -c %s aggr.ckpz)" -lt "$(stat -c %s adam0.ckpz)" ] && [ "$(stat -c %s adam0.ckpz)" -lt "$(stat -c %s tight.ckpz)" ] ||
    fail "auto:aggressive / auto / auto:tight sizes not ordered"
ok
for bad in "--lossy=foo" "--lossy=auto:0" "--lossy=auto:17" "--lossy=auto:x" "--lossy=auto:" "--lossy=auto --abs 1e-3" \
           "--lossy=auto --prune 0.5" "--lossy=autox"; do
    run 2 "$CKPZ" -f $bad adam0.safetensors -o bad.ckpz
    absent bad.ckpz
done
run 2 "$CKPZ" -f --lossy=auto:bogus adam0.safetensors -o bad.ckpz
err_has "tight, default, aggressive or a number"
echo "* auto bogus" > badpolicy.txt
run 1 "$CKPZ" -f --policy badpolicy.txt adam0.safetensors -o bad.ckpz
err_has "policy line 1: auto takes tight, default, aggressive"
absent bad.ckpz

# BF16 weights at --rel 1e-3: the grid is finer than BF16's own steps, so every element
# restores exactly; the listing says so (it used to count 14 of 40 tensors as restoring
# approximately), and no lossy frame is larger than the same chunk's lossless frame
bf16=$ROOT/samples/gpt-small.bf16.safetensors
run 0 "$CKPZ" -q -f --rel 1e-3 "$bf16" -o bf16.ckpz
run 0 "$CKPZ" -q -f "$bf16" -o bf16.plain.ckpz
run 0 "$CKPZ" -q -d -f bf16.ckpz -o bf16.out
same_file "$bf16" bf16.out
run 0 "$CKPZ" -l bf16.ckpz
out_has "lossy: 0 of 40 tensors restore approximately, 14 more were coded lossy and restore exactly"
[ "$(stat -c %s bf16.ckpz)" -le $(($(stat -c %s bf16.plain.ckpz) * 1006 / 1000)) ] ||
    fail "--rel 1e-3 on BF16: $(stat -c %s bf16.ckpz) bytes against $(stat -c %s bf16.plain.ckpz) lossless"
ok

echo "lossy.sh: $CHECKS checks passed"
