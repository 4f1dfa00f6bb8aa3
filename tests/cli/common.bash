# common.bash — sourced by every tests/cli/*.sh (not a test itself: ctest runs *.sh).
# Usage in a test: source "$(dirname "$0")/common.bash" "$@"
# Sets CKPZ (absolute path of the binary), ROOT (repository root), FAULTSHIM (the fault
# injection library, when given) and WORK (a fresh directory removed on exit, its
# physical path), and gives small helpers whose failures name the check.

if [ $# -lt 2 ]; then
    echo "usage: bash $0 /path/to/ckpz REPO_ROOT [FAULT_SHIM.so]" >&2
    exit 2
fi
CKPZ=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$2" && pwd)
[ -x "$CKPZ" ] || { echo "FAIL: $CKPZ is not executable" >&2; exit 1; }
# FAULTSHIM: absolute path of the fault-injection library (tests/cli/faultshim.c), the
# optional third argument (ctest passes it); empty when not given.
FAULTSHIM=
if [ $# -ge 3 ] && [ -n "$3" ]; then
    [ -f "$3" ] || { echo "FAIL: fault shim $3 not found" >&2; exit 1; }
    FAULTSHIM=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckpz-cli.XXXXXX") || exit 1
WORK=$(cd "$WORK" && pwd -P) # as /proc/PID/fd shows it
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
CHECKS=0

fail() {
    echo "FAIL [$(basename "$0")]: $*" >&2
    exit 1
}

ok() { CHECKS=$((CHECKS + 1)); }

# run WANT_RC CMD...: runs CMD (stdout -> $WORK/.out, stderr -> $WORK/.err) and
# checks the exit status.
run() {
    local want=$1
    shift
    "$@" >"$WORK/.out" 2>"$WORK/.err"
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "--- stderr:" >&2
        head -c 2000 "$WORK/.err" >&2
        fail "exit status $rc, expected $want: $*"
    fi
    ok
}

# same_file A B: byte-identical
same_file() {
    cmp -s "$1" "$2" || fail "$1 and $2 differ"
    ok
}

exists() { [ -e "$1" ] || fail "$1 should exist"; ok; }
absent() { [ ! -e "$1" ] || fail "$1 should not exist"; ok; }

# no_temp_files DIR: no temporary output (.NAME.ckpz-PID-HOST-RANDOM.tmp) left behind
no_temp_files() {
    local left
    left=$(find "${1:-.}" -maxdepth 1 -name '.*.tmp*' | head -5)
    [ -z "$left" ] || fail "temporary files left: $left"
    ok
}

# temp_output_of PID DIR: how process PID is writing its output in DIR (absolute):
# "named" when DIR holds a .NAME.ckpz-PID-HOST-RANDOM.tmp file, "anonymous" when PID has an unnamed
# (O_TMPFILE) file of DIR open, nothing when neither (yet)
temp_output_of() {
    local l
    if [ -n "$(find "$2" -maxdepth 1 -name '.*.tmp*' | head -1)" ]; then
        echo named
        return
    fi
    for l in /proc/"$1"/fd/*; do
        case "$(readlink "$l" 2>/dev/null)" in
        "$2"/\#*" (deleted)") echo anonymous; return ;;
        esac
    done
}

# err_has TEXT: the last run's stderr mentions TEXT
err_has() {
    grep -qF -- "$1" "$WORK/.err" || { cat "$WORK/.err" >&2; fail "stderr lacks '$1'"; }
    ok
}
out_has() {
    grep -qF -- "$1" "$WORK/.out" || { cat "$WORK/.out" >&2; fail "stdout lacks '$1'"; }
    ok
}

# make_safetensors OUT [DTYPE]: a small, valid safetensors file (pure python3) with
# tensors of several dtypes and shapes, including a 0-dim one.
make_safetensors() {
    python3 - "$1" "${2:-BF16}" <<'PYEOF' || fail "make_safetensors $1"
import json, random, struct, sys
out, main = sys.argv[1], sys.argv[2]
rnd = random.Random(7)
def floats(n, scale):
    return [rnd.gauss(0.0, scale) for _ in range(n)]
def enc(dtype, n):
    if dtype == "F32":
        return struct.pack("<%df" % n, *floats(n, 0.02))
    if dtype == "BF16":
        raw = struct.pack("<%df" % n, *floats(n, 0.02))
        return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))
    if dtype == "F16":
        return struct.pack("<%de" % n, *floats(n, 0.5))
    if dtype == "I64":
        return struct.pack("<%dq" % n, *[rnd.randrange(-1000, 1000) for _ in range(n)])
    raise SystemExit("dtype " + dtype)
specs = [("model.embed_tokens.weight", main, [96, 64]),
         ("model.layers.0.self_attn.q_proj.weight", main, [64, 64]),
         ("model.layers.0.input_layernorm.weight", "F16", [64]),
         ("model.layers.0.mlp.up_proj.weight", "F32", [128, 64]),
         ("step", "I64", [])]
header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
for name, dt, shape in specs:
    n = 1
    for d in shape:
        n *= d
    b = enc(dt, n)
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PYEOF
}

# tensor_range FILE NAME: "START LENGTH" of tensor NAME's bytes in a safetensors file
tensor_range() {
    python3 - "$1" "$2" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
a, b = h[sys.argv[2]]["data_offsets"]
print(8 + n + a, b - a)
PYEOF
}

# tensor_names FILE: the tensor names of a safetensors file, one a line
tensor_names() {
    python3 - "$1" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
for k in h:
    if k != "__metadata__":
        print(k)
PYEOF
}

# sample_files: checked-in samples and generated checkpoints, safetensors and .npy (at
# most 64 MiB each, so that the tests stay quick), one a line; safetensors_files: only
# the safetensors ones
sample_files() {
    mkdir -p "$WORK/.gen"
    if [ ! -e "$WORK/.gen/done" ]; then
        local gen
        for gen in make_safetensors.py make_npy.py; do
            if [ -f "$ROOT/tests/data/$gen" ]; then
                python3 "$ROOT/tests/data/$gen" "$WORK/.gen" >/dev/null 2>&1 ||
                    echo "NOTE: tests/data/$gen failed; its files are not used" >&2
            fi
        done
        make_safetensors "$WORK/.gen/builtin_bf16.safetensors" BF16
        make_safetensors "$WORK/.gen/builtin_f32.safetensors" F32
        touch "$WORK/.gen/done"
    fi
    find "$ROOT/samples" "$WORK/.gen" -maxdepth 2 -type f \
        \( -name '*.safetensors' -o -name '*.npy' \) -size -65M 2>/dev/null | sort
}

safetensors_files() {
    sample_files | grep '\.safetensors$'
}
