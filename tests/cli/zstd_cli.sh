#!/bin/bash
# zstd_cli.sh — where ckpz follows zstd's command line, the same command is run with
# zstd (1.5.4 when these were written down) and with ckpz, and both must do the same:
# -c with several files (the streams back to back), concatenated files on -d/-t, -r over
# directories, -c together with -o (the later one counts), and which summary lines go
# to a stderr that is not a terminal. The expected answers are written here too, so that
# without zstd the ckpz half still runs, and a zstd that changed is noticed.
# (Restored output to a terminal, which zstd allows, is checked in errors.sh.)
source "$(dirname "$0")/common.bash" "$@"

have_zstd=0
if command -v zstd >/dev/null 2>&1; then
    have_zstd=1
else
    echo "SKIP: no zstd: only ckpz's half of each comparison runs"
fi

# tool NAME: the command and the suffix of a tool ("ckpz" or "zstd")
sfx() { [ "$1" = zstd ] && echo .zst || echo .ckpz; }
cmd() { [ "$1" = zstd ] && echo zstd || echo "$CKPZ"; }
tools() { [ "$have_zstd" = 1 ] && echo "zstd ckpz" || echo ckpz; }

cp "$ROOT/samples/gpt-small.bf16.safetensors" a
head -c 200000 /dev/urandom >b
cat a b >ab

# --- -c with several files: one stream after the other; -dc restores both, in order
for t in $(tools); do
    x=$(cmd "$t")
    run 0 "$x" -q -c a b
    mv "$WORK/.out" "c$(sfx "$t")"
    run 0 "$x" -q -dc "c$(sfx "$t")"
    same_file "$WORK/.out" ab
done

# --- files put end to end: -dc, -d and -t take every stream; bytes after the last
# stream that are not a stream are an error
for t in $(tools); do
    x=$(cmd "$t")
    s=$(sfx "$t")
    rm -f "a$s" "b$s"
    run 0 "$x" -q a b
    cat "a$s" "b$s" >"cat$s"
    run 0 bash -c 'cat "$2" | "$1" -q -dc' _ "$x" "cat$s"
    same_file "$WORK/.out" ab
    run 0 "$x" -q -d -o "restored.$t" "cat$s"
    same_file "restored.$t" ab
    run 0 "$x" -q -t "cat$s"
    cat "a$s" "b$s" "a$s" >"three$s"
    run 0 "$x" -q -dc "three$s"
    cat a b a | cmp -s - "$WORK/.out" || fail "$t: three streams"
    ok
    (cat "a$s"; printf 'not a stream at all') >"junk$s"
    run 1 "$x" -q -dc "junk$s"
    run 1 "$x" -q -d -o "junkout.$t" "junk$s"
    absent "junkout.$t"
    head -c -7 "b$s" | cat "a$s" - >"cut$s" # the second stream truncated
    run 1 "$x" -q -dc "cut$s"
done
# ckpz names where it stopped
run 1 "$CKPZ" -q -dc junk.ckpz
err_has "after 1 complete stream"

# --- -r: the files under a directory, links not followed (a warning names them); ckpz
# skips .ckpz files when compressing, as zstd --exclude-compressed does with .zst
tree() { # DIR SUFFIX
    mkdir -p "$1/sub/deeper" "$1/empty"
    cp a "$1/x"
    cp b "$1/sub/y"
    cp b "$1/sub/deeper/w"
    cp a "$1/sub/done"
    ln -s ../x "$1/sub/link"
}
for t in $(tools); do
    x=$(cmd "$t")
    s=$(sfx "$t")
    tree "r.$t" "$s"
    "$x" -q "r.$t/sub/done" || fail "$t: compress done"
    rm "r.$t/sub/done"
    extra=
    [ "$t" = zstd ] && extra=--exclude-compressed
    # shellcheck disable=SC2086
    run 0 "$x" -r $extra "r.$t"
    err_has "r.$t/sub/link"
    for f in x sub/y sub/deeper/w sub/done; do exists "r.$t/$f$s"; done
    absent "r.$t/sub/done$s$s"
    absent "r.$t/sub/link$s"
    rm "r.$t/x" "r.$t/sub/y" "r.$t/sub/deeper/w"
    run 0 "$x" -q -d -r "r.$t"
    same_file "r.$t/x" a
    same_file "r.$t/sub/y" b
    same_file "r.$t/sub/deeper/w" b
    same_file "r.$t/sub/done" a
done
# zstd -t -r tests every file, and fails on the originals; ckpz takes the .ckpz ones
run 0 "$CKPZ" -t -r r.ckpz
[ "$(grep -c ': OK$' "$WORK/.err")" -eq 4 ] || fail "-t -r: $(cat "$WORK/.err")"
ok
# the same sets of files on both sides
if [ "$have_zstd" = 1 ]; then
    [ "$(cd r.zstd && find . | sed 's/\.zst$/.ckpz/' | sort)" = "$(cd r.ckpz && find . | sort)" ] ||
        fail "-r: zstd and ckpz left different trees"
    ok
fi
run 2 "$CKPZ" -r --extract x r.ckpz

# --- -c and -o together: the later one counts (ckpz says so on stderr)
for t in $(tools); do
    x=$(cmd "$t")
    rm -f "o1.$t" "o2.$t"
    run 0 "$x" -c -o "o1.$t" a
    exists "o1.$t"
    [ ! -s "$WORK/.out" ] || fail "$t -c -o: wrote to stdout too"
    ok
    run 0 "$x" -o "o2.$t" -c a
    absent "o2.$t"
    [ -s "$WORK/.out" ] || fail "$t -o -c: nothing on stdout"
    ok
done
run 0 "$CKPZ" -c -o o3 a
err_has "both -c and -o given: the later one counts (writing o3)"

# --- summaries on a stderr that is not a terminal (a log): how many lines each prints
# (zstd's version banner with -v left out)
lines_of() { # TOOL ARGS...: the number of lines its stderr gets
    local t=$1 x
    shift
    x=$(cmd "$t")
    rm -f a.zst b.zst a.ckpz b.ckpz out
    case "$*" in *-d*) "$x" -q a b ;; esac
    "$x" "$@" </dev/null >/dev/null 2>"$WORK/.err" || fail "$t $*: failed: $(cat "$WORK/.err")"
    grep -vc '^\*\*\* Zstandard' "$WORK/.err"
}
# expect N ARGS...: zstd (when here) and ckpz print N lines; {} stands for the suffix
expect() {
    local want=$1 t got
    shift
    for t in $(tools); do
        s=$(sfx "$t")
        got=$(lines_of "$t" "${@//\{\}/$s}")
        [ "$got" = "$want" ] || { cat "$WORK/.err" >&2; fail "$t $*: $got summary lines, expected $want"; }
        ok
    done
}
expect 1 -f a                 # one file to a file: its line
expect 1 -f a b               # several: one total line
expect 3 -f -v a b            # -v: a line per file and the total
expect 0 -f -c a              # to stdout: nothing
expect 0 -f -q a              # -q: nothing
expect 1 -d -f a{}            # the same on -d
expect 1 -d -f a{} b{}
expect 3 -d -f -v a{} b{}
expect 0 -d -f -c a{}
run 0 "$CKPZ" -f a b
grep -q '^2 files compressed : .*% (.* => .*)' "$WORK/.err" || fail "total line: $(cat "$WORK/.err")"
ok

echo "zstd_cli.sh: $CHECKS checks passed"
