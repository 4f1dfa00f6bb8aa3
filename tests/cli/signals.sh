#!/bin/bash
# signals.sh — Ctrl-C (SIGINT), SIGTERM and SIGHUP in the middle of a run leave
# neither the output nor a temporary file behind, and the process dies of the signal;
# so does SIGKILL, which no handler sees: the output is an anonymous (O_TMPFILE) file
# until it is complete (the check is skipped where the file system has none). The
# input comes from a pipe that stalls after 24 MiB, so the signal is sure to land while
# the temporary output is open.
source "$(dirname "$0")/common.bash" "$@"

PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# interrupt SIGNAL MODE: MODE "c" compresses, "d" decompresses; in a directory of its
# own, which must hold nothing afterwards: no output, no hidden temporary file
interrupt() {
    local sig=$1 mode=$2 out pid prod i rc how dir=$WORK/$1.$2 left
    mkdir "$dir" && cd "$dir" || fail "mkdir $dir"
    mkfifo fifo || fail "mkfifo"
    if [ "$mode" = c ]; then
        out=out.ckpz
        (head -c 24M /dev/urandom; exec sleep 20) >fifo 2>/dev/null &
    else
        out=out.bin
        (cat ../big.ckpz; exec sleep 20) >fifo 2>/dev/null &
    fi
    prod=$!
    PIDS+=("$prod")
    if [ "$mode" = c ]; then
        "$CKPZ" -q -o "$out" <fifo 2>../ckpz.err &
    else
        "$CKPZ" -q -d -o "$out" <fifo 2>../ckpz.err &
    fi
    pid=$!
    PIDS+=("$pid")
    # wait until the temporary output is open (an anonymous O_TMPFILE file, or a named
    # one where the file system has none), then let the reader drain the pipe
    for i in $(seq 1 100); do
        how=$(temp_output_of "$pid" "$dir")
        [ -n "$how" ] && break
        sleep 0.1
    done
    [ -n "$how" ] || fail "$sig/$mode: no temporary output appeared"
    ok
    sleep 1
    kill -0 "$pid" 2>/dev/null || fail "$sig/$mode: ckpz ended before the signal: $(cat ../ckpz.err)"
    kill "-$sig" "$pid"
    wait "$pid" 2>/dev/null
    rc=$?
    kill "$prod" 2>/dev/null
    wait "$prod" 2>/dev/null
    [ "$rc" -gt 128 ] || fail "$sig/$mode: exit status $rc, expected death by signal"
    ok
    absent "$out"
    if [ "$sig" = KILL ] && [ "$how" = named ]; then
        # nothing can remove a named file after SIGKILL: only O_TMPFILE leaves nothing
        [ "$tmpfile_ok" = 0 ] || fail "KILL/$mode: a named temporary file, where the file system has O_TMPFILE"
        echo "SKIP: the file system of $dir has no O_TMPFILE: SIGKILL leaves the named temporary file behind"
        rm -f .*.tmp*
    fi
    left=$(ls -A | grep -v '^fifo$')
    [ -z "$left" ] || fail "$sig/$mode: left behind: $left"
    ok
    cd "$WORK" || fail "cd"
}

# does this file system have O_TMPFILE (tmpfs, ext4, xfs, btrfs do)?
tmpfile_ok=$(python3 -c 'import os
try:
    os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o600)); print(1)
except (OSError, AttributeError):
    print(0)')
make_safetensors seed.safetensors BF16
cat seed.safetensors seed.safetensors >big
head -c 20M /dev/urandom >>big
run 0 "$CKPZ" -q -o big.ckpz big

for sig in INT TERM HUP KILL; do
    interrupt "$sig" c
done
interrupt INT d
interrupt TERM d
interrupt KILL d

# a run that is not interrupted still works with the same plumbing
(head -c 3M /dev/urandom) >fifo_data
"$CKPZ" -q -o fine.ckpz <fifo_data || fail "plain run"
"$CKPZ" -q -d -c fine.ckpz | cmp -s - fifo_data || fail "plain run round trip"
ok
echo "signals.sh: $CHECKS checks passed"
