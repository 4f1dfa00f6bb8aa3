# zip_inputs.sh — torch.save archives (and torch.save's legacy format) and .npz files
# through the CLI, as files and through pipes: byte-identical restores, storages found
# (listed with dtypes), and archives whose members are deflated or padded (the rest of
# the file kept as opaque bytes, never lost).
# Needs /usr/bin/python3 with numpy and torch (installed by scripts/install-deps).
source "$(dirname "$0")/common.bash" "$@"

PY=/usr/bin/python3
$PY -c "import numpy, torch" 2>/dev/null || fail "/usr/bin/python3 lacks numpy or torch (run scripts/install-deps)"

$PY - <<'PYEOF' || fail "could not write the test inputs"
import numpy as np, torch
rng = np.random.default_rng(7)
big = rng.standard_normal((300, 300)).astype(np.float32)        # > 64 KiB: several resume points
np.savez("stored.npz", w=big, h=big.astype(np.float16), i=np.arange(5000), e=np.zeros(0, np.float32))
np.savez_compressed("deflated.npz", w=big, b=rng.standard_normal(1000).astype(np.float32))
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
for _ in range(3):
    opt.zero_grad(); m(torch.randn(32, 256)).square().mean().backward(); opt.step()
torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "step": 3}, "ckpt.pt")
torch.save({k: v.bfloat16() for k, v in m.state_dict().items()}, "bf16.pt")
torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "step": 3}, "legacy.pt",
           _use_new_zipfile_serialization=False)
PYEOF

for f in stored.npz deflated.npz ckpt.pt bf16.pt legacy.pt; do
    run 0 "$CKPZ" -q "$f"
    cp "$f" "$f.orig"
    run 0 "$CKPZ" -q -d -f "$f.ckpz"
    same_file "$f" "$f.orig"
    # the same through pipes (no size known, piecewise description from a stream)
    "$CKPZ" -c < "$f.orig" | "$CKPZ" -d -c > "$f.piped" || fail "pipe round trip of $f"
    same_file "$f.piped" "$f.orig"
    run 0 "$CKPZ" -t "$f.ckpz"
done

run 0 "$CKPZ" -l stored.npz.ckpz
grep -q "npz" "$WORK/.out" || fail "-l of stored.npz does not say npz"
grep -Eq "^ *[0-9]+ +w +f32 +\[300, 300\]" "$WORK/.out" || fail "-l of stored.npz lacks w f32 [300, 300]"
grep -Eq "^ *[0-9]+ +h +f16 " "$WORK/.out" || fail "-l of stored.npz lacks h f16"

run 0 "$CKPZ" -l ckpt.pt.ckpz
grep -q "torch" "$WORK/.out" || fail "-l of ckpt.pt does not say torch"
grep -Eq "model\.0\.weight +f32" "$WORK/.out" || fail "-l of ckpt.pt lacks model.0.weight f32"
grep -Eq "exp_avg_sq +f32" "$WORK/.out" || fail "-l of ckpt.pt lacks an exp_avg_sq storage"
run 0 "$CKPZ" -l bf16.pt.ckpz
grep -Eq "bf16" "$WORK/.out" || fail "-l of bf16.pt lacks bf16 storages"

# the legacy format: detected, or forced with --format=torch; its storages listed
run 0 "$CKPZ" -l legacy.pt.ckpz
grep -q "torch" "$WORK/.out" || fail "-l of legacy.pt does not say torch"
grep -Eq "model\.0\.weight +f32 +\[512, 256\]" "$WORK/.out" || fail "-l of legacy.pt lacks model.0.weight f32 [512, 256]"
grep -Eq "exp_avg_sq +f32" "$WORK/.out" || fail "-l of legacy.pt lacks an exp_avg_sq storage"
run 0 "$CKPZ" -q -f --format=torch -o forced.ckpz legacy.pt.orig
run 0 "$CKPZ" -l forced.ckpz
grep -Eq "model\.2\.bias +f32" "$WORK/.out" || fail "-l of legacy.pt forced to torch lacks model.2.bias"
run 0 "$CKPZ" -q -d -c forced.ckpz
same_file "$WORK/.out" legacy.pt.orig

# torch.load of the restored file equals the original
$PY -c "
import torch
a, b = torch.load('ckpt.pt.orig'), torch.load('ckpt.pt')
assert all(torch.equal(a['model'][k], b['model'][k]) for k in a['model'])
assert a['step'] == b['step'] == 3
a, b = torch.load('legacy.pt.orig'), torch.load('legacy.pt')
assert all(torch.equal(a['model'][k], b['model'][k]) for k in a['model'])
" || fail "torch.load of the restored ckpt.pt or legacy.pt differs"
ok
echo "zip_inputs.sh: $CHECKS checks passed"
