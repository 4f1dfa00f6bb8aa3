#!/bin/bash
# predict.sh — ckpz --predict: one line per tensor and a `total: N.NNx` line in a sane
# range on the checked-in GPT sample; a lossy setting (--rel, --int8, --bits/--block,
# --pointwise-rel, --policy) predicts a larger ratio than lossless, close to what
# compression with it gives, and lossless coding for norms, biases and vectors;
# =features prints the model's inputs as TSV; a file that is not a checkpoint, a
# missing file, a .ckpz file and a missing or malformed --model exit 1 with a message
# naming the file.
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

# total_of FILE: the ratio on the last line of FILE
total_of() { tail -n 1 "$1" | sed -nE 's/^total: ([0-9.]+)x.*/\1/p'; }
# close PREDICTED ACTUAL: within 3 points of space savings
close() {
    python3 -c "import sys; p, a = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs((1 - 1/p) - (1 - 1/a)) <= 0.03 else 1)" "$1" "$2" ||
        fail "predicted $1, compression gives $2 ($3)"
    ok
}
# feature_of TENSOR COLUMN: a column of the last --predict=features output
feature_of() {
    awk -F'\t' -v n="$1" -v c="$2" '$1 == "offset" { for (i = 1; i <= NF; i++) if ($i == c) k = i } $4 == n { print $k }' "$WORK/.out"
}
# coding_of NAME: the coding column of tensor NAME in the last --predict output
coding_of() { awk -v n="$1" '$2 == n {print $(NF - 2)}' "$WORK/.out"; }

# lossy settings: a larger ratio than lossless, close to compression's, and exact
# coding for what the policy's safe defaults keep exact
for setting in "--rel 1e-3" "--int8" "--bits 8 --block 64" "--pointwise-rel 0.01" "-6"; do
    # shellcheck disable=SC2086
    run 0 "$CKPZ" --predict $setting "$S"
    r=$(total_of "$WORK/.out")
    [ "$(grep -c '^total: ' "$WORK/.out")" -eq 1 ] || fail "$setting: no total line"
    if [ "$setting" != "-6" ]; then
        python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 1.5 * float(sys.argv[2]) else 1)" "$r" "$ratio" ||
            fail "$setting predicted $r, not well above lossless $ratio"
        ok
        [ "$(coding_of transformer.h.0.attn.c_attn.weight)" != lossless ] || fail "$setting: c_attn.weight predicted lossless"
        ok
        for exact in transformer.h.0.ln_1.weight transformer.h.0.attn.c_attn.bias transformer.ln_f.weight; do
            [ "$(coding_of "$exact")" = lossless ] || fail "$setting: $exact predicted '$(coding_of "$exact")', not lossless"
            ok
        done
        # Adam's second moment: lossy only on the log grid
        v=$(coding_of optim.exp_avg_sq.transformer.h.0.attn.c_attn.weight)
        case "$setting" in
        --pointwise-rel*) [ "$v" = pointwise-rel ] || fail "$setting: exp_avg_sq predicted '$v'" ;;
        *) [ "$v" = lossless ] || fail "$setting: exp_avg_sq predicted '$v', not lossless" ;;
        esac
        ok
    fi
    # shellcheck disable=SC2086
    "$CKPZ" $setting -c "$S" > "$WORK/lossy.ckpz" || fail "ckpz $setting failed"
    actual=$(python3 -c "import os,sys; print(os.path.getsize(sys.argv[1]) / os.path.getsize(sys.argv[2]))" "$S" "$WORK/lossy.ckpz")
    close "$r" "$actual" "$setting"
done
# the same through a policy file: only the tensors its rule names are lossy
printf '# test rules\n*c_attn.weight int8\n' > rules.txt
run 0 "$CKPZ" --predict --policy rules.txt "$S"
[ "$(coding_of transformer.h.0.attn.c_attn.weight)" = affine ] || fail "policy: c_attn.weight not predicted int8"
ok
[ "$(coding_of transformer.h.0.mlp.c_fc.weight)" = lossless ] || fail "policy: c_fc.weight predicted lossy"
ok
rp=$(total_of "$WORK/.out")
python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) < float(sys.argv[1]) < 2.5 else 1)" "$rp" "$ratio" ||
    fail "policy on c_attn only predicted $rp (lossless $ratio)"
ok
# a rule's 'level N' is the level of the tensors it matches, lossless ones too
printf '* lossless level 6\n' > level6.txt
run 0 "$CKPZ" --predict=features --policy level6.txt "$S"
[ "$(feature_of transformer.h.0.attn.c_attn.weight level)" = "$(awk 'BEGIN { printf "%.9g", 6 / 9 }')" ] ||
    fail "policy level 6: level column $(feature_of transformer.h.0.attn.c_attn.weight level)"
ok
# a delta is not predicted, and says so
run 0 "$CKPZ" --predict --base "$S" "$S"
err_has "--base is not predicted"
printf '* bogus 1\n' > badrules.txt
run 1 "$CKPZ" --predict --policy badrules.txt "$S"
err_has "line 1"

# features: header plus one row of 4 + 30 + 1 fields per tensor, with the setting's columns
run 0 "$CKPZ" --predict=features "$S"
rows=$(grep -vc '^#\|^offset' "$WORK/.out")
[ "$rows" -eq "$ntens" ] || fail "features: $rows rows for $ntens tensors"
ok
bad_fields=$(grep -v '^#' "$WORK/.out" | awk -F'\t' 'NF != 35' | wc -l)
[ "$bad_fields" -eq 0 ] || fail "features rows without 35 fields"
ok
# the c_attn weight's columns under --rel 1e-3: lossless 0, mode_grid 1, code bits > 0
run 0 "$CKPZ" --predict=features --rel 1e-3 "$S"
W=transformer.h.0.attn.c_attn.weight
[ "$(feature_of $W lossless)" = 0 ] || fail "rel: lossless column '$(feature_of $W lossless)'"
ok
[ "$(feature_of $W mode_grid)" = 1 ] && [ "$(feature_of $W mode_affine)" = 0 ] || fail "rel: mode columns"
ok
python3 -c "import sys; sys.exit(0 if 0 < float(sys.argv[1]) < 1 else 1)" "$(feature_of $W code_bits)" ||
    fail "code_bits $(feature_of $W code_bits)"
ok
# a norm gain keeps its lossless columns
[ "$(feature_of transformer.h.0.ln_1.weight lossless)" = 1 ] && [ "$(feature_of transformer.h.0.ln_1.weight code_bits)" = 0 ] ||
    fail "ln_1.weight has lossy columns under --rel"
ok
# --model none: the features alone (how a new model is trained), a '-' for the savings
run 0 "$CKPZ" --predict=features --model none "$S"
[ "$(grep -v '^#' "$WORK/.out" | grep -v '^offset' | awk -F'\t' '$35 != "-"' | wc -l)" -eq 0 ] || fail "--model none printed savings"
ok
run 1 "$CKPZ" --predict --model none "$S"
err_has "--model none"
run 2 "$CKPZ" --model "$ROOT/data/ratio_mlp.txt" -c "$S"

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
printf 'ckpz-ratio-mlp 1\ninputs 30\nlayers 1\nmean nan\n' > bad_model.txt
CKPZ_PREDICT_MODEL=$WORK/bad_model.txt run 1 "$CKPZ" --predict "$S"
err_has "bad_model.txt"
err_has "line 4"
# --model: a missing file, a malformed one (named with its line, once for several
# inputs), one for another feature count (the lossless-only model had 16 inputs)
run 1 "$CKPZ" --predict --model "$WORK/no_such_model.txt" "$S"
err_has "no_such_model.txt"
[ ! -s "$WORK/.out" ] || fail "a table was printed before the model error"
ok
run 1 "$CKPZ" --predict --model bad_model.txt "$S" "$ROOT/samples/gpt-small.bf16.safetensors"
err_has "bad_model.txt"
err_has "line 4"
[ "$(grep -c 'bad_model.txt' "$WORK/.err")" -eq 1 ] || fail "the model error is repeated per input"
ok
sed 's/^inputs 30$/inputs 16/' "$ROOT/data/ratio_mlp.txt" > old_model.txt
run 1 "$CKPZ" --predict --model old_model.txt "$S"
err_has "old_model.txt"
err_has "16 inputs"
# --model wins over the environment
CKPZ_PREDICT_MODEL=$WORK/bad_model.txt run 0 "$CKPZ" --predict --model "$ROOT/data/ratio_mlp.txt" "$S"
# the shipped model file loads and gives the built-in copy's answer
run 0 "$CKPZ" --predict --model "$ROOT/data/ratio_mlp.txt" "$S"
[ "$(tail -n 1 "$WORK/.out" | cut -d' ' -f2)" = "${ratio}x" ] || fail "data/ratio_mlp.txt differs from the built-in model"
ok
CKPZ_PREDICT_MODEL=$ROOT/data/ratio_mlp.txt run 0 "$CKPZ" --predict "$S"
[ "$(tail -n 1 "$WORK/.out" | cut -d' ' -f2)" = "${ratio}x" ] || fail "CKPZ_PREDICT_MODEL: data/ratio_mlp.txt differs"
ok
run 2 "$CKPZ" --predict=bogus "$S"
# a .ckpz file is not a checkpoint to predict: said, with where its ratio is shown
cp "$ROOT/samples/gpt-small.bf16.safetensors" bf.safetensors
run 0 "$CKPZ" -q bf.safetensors
run 1 "$CKPZ" --predict bf.safetensors.ckpz
err_has "bf.safetensors.ckpz: is a .ckpz file"
err_has "ckpz -l bf.safetensors.ckpz"
grep -q '^total' "$WORK/.out" && fail "a ratio was predicted for a .ckpz file"
ok
echo "predict.sh: $CHECKS checks passed"
