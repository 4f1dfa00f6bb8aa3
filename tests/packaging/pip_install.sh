#!/bin/bash
# `pip wheel` of this checkout, installed into a throwaway virtual environment, used
# from outside the checkout: what a user gets from `pip install <clone>`. Checks that
# the wheel is platform-specific (it holds libckpz.so.1) and carries no MPI, that the
# installed package loads its own bundled library, that `ckpz -V` runs from the venv's
# bin/ on PATH, that package, library, CLI and wheel metadata give CMakeLists.txt's
# version, and a round trip through compress_file / decompress_file and the CLI.
# Skipped (exit 77) only when PyPI, which the build requirements come from, cannot be
# reached; every other failure fails.
#   pip_install.sh SOURCE_DIR PYTHON VERSION
set -uo pipefail
src=$1 python=$2 version=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckpz-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Only the installed copy may be found: no checkout on the path, no library override.
unset PYTHONPATH CKPZ_LIBRARY CKPZ_CLI PYTHONHOME VIRTUAL_ENV
cd "$tmp" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
t0=$(date +%s)

"$python" -m venv "$tmp/venv" > "$tmp/venv.log" 2>&1 ||
    fail "$python -m venv failed (Debian: apt-get install python3-venv, which scripts/install-deps installs): $(tail -3 "$tmp/venv.log")"
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check)

# Is PyPI there? The same index and settings the build's requirements use (pip's own).
if ! "${pip[@]}" download --no-deps --retries 1 --timeout 20 -d "$tmp/probe" \
        'scikit-build-core>=0.10,<2' > "$tmp/probe.log" 2>&1; then
    if grep -qiE 'connection|resolve|network|timed? ?out|unreachable|No matching distribution|Could not fetch URL|SSLError' "$tmp/probe.log"; then
        echo "SKIP: PyPI cannot be reached (or its certificate not verified), so scikit-build-core cannot be installed to build the wheel:"
        tail -3 "$tmp/probe.log"
        exit 77
    fi
    fail "pip download scikit-build-core failed: $(tail -5 "$tmp/probe.log")"
fi

"${pip[@]}" wheel --no-deps -w "$tmp/wheel" "$src" > "$tmp/wheel.log" 2>&1 ||
    { tail -40 "$tmp/wheel.log" >&2; fail "pip wheel $src failed (log above)"; }
whl=$(ls "$tmp"/wheel/*.whl 2>/dev/null)
[ "$(echo "$whl" | wc -w)" -eq 1 ] || fail "pip wheel made no single wheel: $whl"
name=$(basename "$whl")
echo "built $name in $(( $(date +%s) - t0 )) s"
case $name in
ckpz-"$version"-py3-none-linux_*.whl) ;;
*) fail "wheel $name: expected ckpz-$version-py3-none-linux_<arch>.whl (a platform wheel: it holds libckpz.so.1)" ;;
esac

# A fresh environment (no system site-packages) gets the wheel alone.
"$python" -m venv "$tmp/env" > "$tmp/env.log" 2>&1 || fail "second venv failed: $(tail -3 "$tmp/env.log")"
"$tmp/env/bin/python" -m pip --disable-pip-version-check install -q --no-deps --no-index "$whl" ||
    fail "pip install $name failed"
env_bin=$tmp/env/bin
[ -x "$env_bin/ckpz" ] || fail "the wheel installed no ckpz command in $env_bin"
"$env_bin/python" - "$tmp/env" "$version" <<'EOF' || fail "the installed package (above)"
import os, sys, zipfile
env, version = sys.argv[1], sys.argv[2]
import ckpz, ckpz._lib
from importlib.metadata import version as dist_version
pkg = os.path.dirname(os.path.realpath(ckpz.__file__))
errors = []
if not pkg.startswith(os.path.realpath(env) + os.sep):
    errors.append("ckpz imported from %s, not from the environment %s" % (pkg, env))
lib = os.path.realpath(ckpz._lib.LIBRARY_PATH)
if lib != os.path.join(pkg, "libckpz.so.1"):
    errors.append("libckpz loaded from %s, not the one bundled in %s" % (lib, pkg))
got = {"ckpz.__version__": ckpz.__version__, "ckpz.library_version()": ckpz.library_version(),
       "wheel metadata": dist_version("ckpz")}
for what, v in got.items():
    if v != version:
        errors.append("%s is %s, CMakeLists.txt says %s" % (what, v, version))
with open(os.path.join(pkg, "libckpz.so.1"), "rb") as f:
    if b"libmpi" in f.read():
        errors.append("the bundled libckpz.so.1 names libmpi: MPI must be off in the wheel")
if os.path.exists(os.path.join(env, "bin", "ckpz-mpi")):
    errors.append("the wheel installed ckpz-mpi")
print("imported", pkg, "with", lib, got)
if errors:
    sys.exit("\n".join(errors))
EOF

out=$(PATH=$env_bin:$PATH; command -v ckpz; ckpz -V) || fail "ckpz -V from the venv's bin/ failed: $out"
echo "$out"
[ "$(echo "$out" | head -1)" = "$env_bin/ckpz" ] || fail "ckpz on PATH is $(echo "$out" | head -1), not $env_bin/ckpz"
case $(echo "$out" | tail -1) in
"ckpz $version (libckpz $version, "*) ;;
*) fail "ckpz -V says '$(echo "$out" | tail -1)', expected 'ckpz $version (libckpz $version, ...)'" ;;
esac

# Round trips: the package's compress_file / decompress_file, and the installed CLI
# restoring what the package wrote (one format, two front ends).
"$env_bin/python" - "$src/samples/gpt-small.bf16.safetensors" "$tmp" <<'EOF' || fail "round trip (above)"
import filecmp, os, sys
import ckpz
orig, tmp = sys.argv[1], sys.argv[2]
z, back = os.path.join(tmp, "m.safetensors.ckpz"), os.path.join(tmp, "back.safetensors")
ckpz.compress_file(orig, z)
ckpz.decompress_file(z, back)
if not filecmp.cmp(orig, back, shallow=False):
    sys.exit("decompress_file(compress_file(x)) differs from x")
print("round trip: %d -> %d bytes (%.3fx)" % (os.path.getsize(orig), os.path.getsize(z), os.path.getsize(orig) / os.path.getsize(z)))
EOF
"$env_bin/ckpz" -q -d -c "$tmp/m.safetensors.ckpz" > "$tmp/cli.safetensors" || fail "the installed ckpz -d of the package's file"
cmp "$src/samples/gpt-small.bf16.safetensors" "$tmp/cli.safetensors" || fail "ckpz -d of the package's file differs from the original"
echo "pip wheel + install + checks: $(( $(date +%s) - t0 )) s"
