#!/bin/bash
# Runs a command (a Python test: VENV's python and its arguments) in the torch 2.13
# environment of the python_*_torch2 tests (tests/python/CMakeLists.txt): the ckpz that
# scripts/torch2-venv installed into VENV with pip, with its bundled libckpz and its
# `ckpz` command, instead of the checkout's python/ and build/: no PYTHONPATH, no
# CKPZ_LIBRARY, CKPZ_CLI=VENV/bin/ckpz, VENV/bin first on PATH, and CKPZ_TEST_INSTALLED=1
# (tests/python/package_under_test.py keeps the checkout off sys.path under it).
#
#   tests/python/torch2.sh VENV COMMAND [ARG...]
#   e.g. tests/python/torch2.sh build/torch2-venv python tests/python/test_ckpz.py -v
#
# Exits 77 (ctest: skipped), printing why, when VENV could not be made on this machine
# (VENV.skip, written by scripts/torch2-venv), is not there, or holds a ckpz older than
# the checkout's sources (run scripts/torch2-venv VENV, as `make test` does); exits 1
# when its making failed (VENV.failed).
set -u
venv=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -f "$venv.skip" ]; then
    echo "SKIP: no torch 2.13.0 run on this machine: $(cat "$venv.skip")"
    exit 77
fi
if [ -f "$venv.failed" ]; then
    echo "FAIL: scripts/torch2-venv could not install ckpz into $venv: $(cat "$venv.failed")"
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "SKIP: no torch 2.13.0 venv at $venv: make test makes it (scripts/torch2-venv $venv)"
    exit 77
fi
if [ "$("$root/scripts/torch2-venv" --stamp)" != "$(cat "$venv/ckpz-source.stamp" 2>/dev/null)" ]; then
    echo "SKIP: the ckpz installed in $venv was built from other sources than the checkout's now:" \
         "scripts/torch2-venv $venv reinstalls it (make test does)"
    exit 77
fi
venv=$(cd "$venv" && pwd)
unset PYTHONPATH PYTHONHOME CKPZ_LIBRARY
export CKPZ_TEST_INSTALLED=1 CKPZ_CLI=$venv/bin/ckpz VIRTUAL_ENV=$venv PATH=$venv/bin:$PATH
exec "$@"
