#!/bin/bash
# interrupts.sh — SIGINT and SIGKILL at many points of a compression and of a
# decompression between files (signals.sh covers one point of a stalled pipe): each
# run is timed uninterrupted, then signalled at evenly spread fractions of that time
# (and once at three times it), with and without -f over an existing output and with --rm. Whatever the moment:
# either the run finished (exit 0, a complete output that tests good, the input gone
# only with --rm) or it died of the signal with the input intact (with --rm: or removed, once the output was whole) and either the old
# output untouched (-f) or nothing under the final name, or, when the signal came after
# the output got its name, that output whole; and no temporary file left
# (SIGKILL too: the output is an O_TMPFILE file until complete; that check is skipped
# where the file system has none). Most signals must land inside the run, or the test
# says it measured nothing.
source "$(dirname "$0")/common.bash" "$@"

POINTS=${CKPZ_INTERRUPT_POINTS:-8}

tmpfile_ok=$(python3 -c 'import os
try:
    os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)); print(1)
except (OSError, AttributeError):
    print(0)')

# An input of real tensors (the BF16 sample, repeated) large enough that one thread
# takes a few tenths of a second on it.
sample=$ROOT/samples/gpt-small.bf16.safetensors
[ -f "$sample" ] || fail "missing $sample"
for i in $(seq 1 40); do cat "$sample"; done >input
cp input input.orig
run 0 "$CKPZ" -q -T1 -o input.ckpz input
cp input.ckpz input.ckpz.orig
echo "old output" >old.orig

# seconds a command takes (the median of three)
timed() {
    local t=() i s e
    for i in 1 2 3; do
        rm -f timed.out
        s=$(date +%s%N)
        "$@" >/dev/null 2>&1 || fail "timing run failed: $*"
        e=$(date +%s%N)
        t+=($(((e - s) / 1000)))
    done
    rm -f timed.out
    printf '%s\n' "${t[@]}" | sort -n | sed -n 2p
}

landed=0
tried=0
committed=0
# one SIGNAL MODE(c|d) VARIANT(plain|force|rm) DELAY_US
one() {
    local sig=$1 mode=$2 variant=$3 delay=$4 in out ref pid rc what="$1/$2/$3 at ${4}us"
    rm -rf run && mkdir run && cd run || fail "mkdir run"
    if [ "$mode" = c ]; then
        in=input; out=input.ckpz; ref=../input.orig
        cp ../input.orig input
    else
        in=input.ckpz; out=input; ref=../input.ckpz.orig
        cp ../input.ckpz.orig input.ckpz
    fi
    local args=(-q -T1)
    [ "$mode" = d ] && args+=(-d)
    case $variant in
    force) cp ../old.orig "$out"; args+=(-f) ;;
    rm) args+=(--rm) ;;
    esac
    "$CKPZ" "${args[@]}" "$in" 2>../ckpz.err &
    pid=$!
    sleep "$(printf '%d.%06d' $((delay / 1000000)) $((delay % 1000000)))"
    kill "-$sig" "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=$?
    tried=$((tried + 1))
    whole() { # the output is complete and right
        if [ "$mode" = c ]; then
            "$CKPZ" -q -t "$out" 2>/dev/null
        else
            cmp -s "$out" ../input.orig
        fi
    }
    if [ "$rc" -eq 0 ]; then # finished before the signal: a whole, good output
        [ -f "$out" ] || fail "$what: exit 0 without $out"
        whole || fail "$what: exit 0 but $out is not whole"
        if [ "$variant" = rm ]; then
            [ ! -e "$in" ] || fail "$what: --rm finished but kept $in"
        else
            cmp -s "$in" "$ref" || fail "$what: the input changed"
        fi
    else
        [ "$rc" -gt 128 ] || fail "$what: exit status $rc (not the signal): $(cat ../ckpz.err)"
        if [ "$variant" = rm ] && [ ! -e "$in" ]; then
            # --rm removes the input only after the output got its name: a signal that
            # came later still finds the work done, so the output must be whole
            [ -e "$out" ] && whole || fail "$what: the input is gone and $out is not whole"
            committed=$((committed + 1))
        elif ! cmp -s "$in" "$ref"; then
            fail "$what: the input is gone or changed"
        elif [ "$variant" = force ] && cmp -s "$out" ../old.orig; then
            landed=$((landed + 1)) # the old output untouched
        elif [ -e "$out" ]; then
            # the signal came after the output got its name (the last step): it is whole
            whole || fail "$what: $out exists after the signal and is not whole"
            committed=$((committed + 1))
        else
            [ "$variant" != force ] || fail "$what: the old $out is gone"
            landed=$((landed + 1))
        fi
        if [ "$sig" = KILL ] && [ "$tmpfile_ok" = 0 ]; then
            rm -f .*.tmp* # only O_TMPFILE survives SIGKILL without a trace
        fi
    fi
    local left
    left=$(ls -A | grep -vxF -e "$in" -e "$out")
    [ -z "$left" ] || fail "$what: left behind: $left"
    ok
    cd "$WORK" || fail "cd"
}

for mode in c d; do
    if [ "$mode" = c ]; then
        us=$(timed "$CKPZ" -q -T1 -c input)
    else
        us=$(timed "$CKPZ" -q -T1 -d -c input.ckpz)
    fi
    [ "$us" -gt 20000 ] || echo "note: $mode takes only ${us}us; few signals may land"
    for sig in INT KILL; do
        for variant in plain force rm; do
            for k in $(seq 1 "$POINTS"); do
                one "$sig" "$mode" "$variant" $((us * k / (POINTS + 1)))
            done
            one "$sig" "$mode" "$variant" $((us * 3)) # most likely after the end
        done
    done
    echo "interrupts.sh: $mode: ${us}us a run"
done
[ "$tmpfile_ok" = 1 ] || echo "SKIP: no O_TMPFILE here: a SIGKILL's named temporary file is not checked"
# signals sent at 1/9..8/9 of the measured time should mostly land inside the run
[ $((landed * 2)) -ge "$tried" ] || fail "only $landed of $tried signals landed inside a run"
ok
echo "interrupts.sh: $landed of $tried signals landed inside a run, $committed after the output was complete; $CHECKS checks passed"
