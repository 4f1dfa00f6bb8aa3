#!/bin/sh
# check.sh CC SOURCE_DIR — what a program that includes only <ckpz.h> sees (ctest
# header_stable): the stable API builds with -Wall -Wextra -Werror; the experimental
# names (split, zip source, predict, tune) do not build without CKPZ_EXPERIMENTAL and do
# with it; ckpz_experimental.h included itself is an error; the internal split
# calls build in neither; a deprecated field warns (an error under -Werror) unless
# CKPZ_DISABLE_DEPRECATE_WARNINGS is defined. Compiles only (-fsyntax-only).
CC=$1
SRC=$2
T=$SRC/tests/header/stable_only.c
fail=0
build() { "$CC" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$SRC/include" "$@" "$T" 2>/dev/null; }
ok() { if ! build "$@"; then echo "FAIL: does not build: $*"; build "$@" 2>&1 | head -5; fail=1; fi; }
refused() { if build "$@"; then echo "FAIL: builds, should not: $*"; fail=1; fi; }

ok
for use in SPLIT ZIP PREDICT TUNE; do
    refused -DUSE_$use
    ok -DUSE_$use -DCKPZ_EXPERIMENTAL
done
refused -DUSE_INTERNAL_SPLIT -DCKPZ_EXPERIMENTAL
refused -DUSE_DEPRECATED
ok -DUSE_DEPRECATED -DCKPZ_DISABLE_DEPRECATE_WARNINGS
# the experimental header itself, with or without the opt-in: its #error (one way in)
for def in "" "#define CKPZ_EXPERIMENTAL"; do
    if printf '%s\n#include <ckpz_experimental.h>\n' "$def" | "$CC" -fsyntax-only -I"$SRC/include" -x c - 2>/dev/null; then
        echo "FAIL: ckpz_experimental.h builds included itself (${def:-no opt-in})"
        fail=1
    fi
done
# the opt-in after a first include without it still brings the experimental part
if ! printf '#include <ckpz.h>\n#define CKPZ_EXPERIMENTAL\n#include <ckpz.h>\nint main(void) { return ckpz_predict_feature_name(0) == 0; }\n' |
    "$CC" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$SRC/include" -x c - 2>/dev/null; then
    echo "FAIL: CKPZ_EXPERIMENTAL after a first #include <ckpz.h> does not bring the experimental part"
    fail=1
fi
[ $fail = 0 ] && echo "header_stable: all checks passed"
exit $fail
