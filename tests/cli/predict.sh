#!/bin/bash
# predict.sh — ckpz --predict: one line per tensor and a `total: N.NNx` line in a sane
# range on the checked-in GPT sample; =features prints the model's inputs as TSV; a
# file that is not a checkpoint, a missing file and a malformed model file exit 1
# with a message naming the file.
source "$(dirname "$0")/common.bash" "$@"

S=$ROOT/samples/gpt-small.f32.safetensors
run 0 "$CKPZ" --predict "$S"
# every tensor is listed
ntens=$(tensor_names "$S" | wc -l)
nrows=$(grep -cE '^ *[0-9]+  ' "$WORK/.out")
[ "$nrows" -eq "$ntens" ] || fail "--predict listed $nrows tensors, the file has $ntens"
ok
for name in transformer.wte.weight transformer.h.0.attn.c_attn.weight; do out_has "$name"; done
# the last line is the total, within what lossless coding of f32 can do
last=$(tail -n 1 "$WORK/.out")
ratio=$(printf '%s\n' "$last" | sed -nE 's/^total: ([0-9]+\.[0-9][0-9])x.*/\1/p')
[ -n "$ratio" ] || fail "last line is not 'total: N.NNx': $last"
python3 -c "import sys; r = float(sys.argv[1]); sys.exit(0 if 1.05 <= r <= 1.6 else 1)" "$ratio" ||
    fail "total ratio $ratio outside 1.05..1.6"
ok
# the prediction is close to what compression gives (within 3 points of savings)
run 0 "$CKPZ" -c "$S"
actual=$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1]) / os.path.getsize(sys.argv[2]))" "$S" "$WORK/.out")
python3 -c "import sys; p, a = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs((1 - 1/p) - (1 - 1/a)) <= 0.03 else 1)" "$ratio" "$actual" ||
    fail "predicted $ratio, compression gives $actual"
ok

# BF16 predicts a better ratio than FP32 (exponent plane is a larger share)
run 0 "$CKPZ" --predict "$ROOT/samples/gpt-small.bf16.safetensors"
rb=$(tail -n 1 "$WORK/.out" | sed -nE 's/^total: ([0-9.]+)x.*/\1/p')
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$rb" "$ratio" ||
    fail "bf16 predicted $rb, not above f32's $ratio"
ok

# features: header plus one row of 4 + 16 + 1 fields per tensor
run 0 "$CKPZ" --predict=features "$S"
rows=$(grep -vc '^#\|^offset' "$WORK/.out")
[ "$rows" -eq "$ntens" ] || fail "features: $rows rows for $ntens tensors"
ok
bad_fields=$(grep -v '^#' "$WORK/.out" | awk -F'\t' 'NF != 21' | wc -l)
[ "$bad_fields" -eq 0 ] || fail "features rows without 21 fields"
ok

# several files: one total line each
run 0 "$CKPZ" --predict "$S" "$ROOT/samples/gpt-small.bf16.safetensors"
[ "$(grep -c '^total: ' "$WORK/.out")" -eq 2 ] || fail "two files, not two total lines"
ok

# errors: a missing file, a directory, a forced format that does not match, a bad model
run 1 "$CKPZ" --predict "$WORK/missing.safetensors"
err_has "missing.safetensors"
run 1 "$CKPZ" --predict "$WORK"
err_has "$WORK"
run 1 "$CKPZ" --predict --format=npy "$S"
err_has "gpt-small.f32.safetensors"
printf 'ckpz-ratio-mlp 1\ninputs 16\nlayers 1\nmean nan\n' > bad_model.txt
CKPZ_PREDICT_MODEL=$WORK/bad_model.txt run 1 "$CKPZ" --predict "$S"
err_has "bad_model.txt"
err_has "line 4"
# the shipped model file loads and gives the built-in copy's answer
CKPZ_PREDICT_MODEL=$ROOT/data/ratio_mlp.txt run 0 "$CKPZ" --predict "$S"
[ "$(tail -n 1 "$WORK/.out" | cut -d' ' -f2)" = "${ratio}x" ] || fail "data/ratio_mlp.txt differs from the built-in model"
ok
run 2 "$CKPZ" --predict=bogus "$S"
echo "predict.sh: $CHECKS checks passed"
