#!/bin/bash
# signals.sh — Ctrl-C (SIGINT), SIGTERM and SIGHUP in the middle of a run leave
# neither the output nor a temporary file behind, and the process dies of the signal.
# The input comes from a pipe that stalls after 24 MiB, so the signal is sure to land
# while the temporary output is open.
source "$(dirname "$0")/common.bash" "$@"

PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# interrupt SIGNAL MODE: MODE "c" compresses, "d" decompresses
interrupt() {
    local sig=$1 mode=$2 out pid prod i rc
    rm -f fifo
    mkfifo fifo || fail "mkfifo"
    if [ "$mode" = c ]; then
        out=out.ckpz
        (head -c 24M /dev/urandom; exec sleep 20) >fifo 2>/dev/null &
    else
        out=out.bin
        (cat big.ckpz; exec sleep 20) >fifo 2>/dev/null &
    fi
    prod=$!
    PIDS+=("$prod")
    if [ "$mode" = c ]; then
        "$CKPZ" -q -o "$out" <fifo 2>ckpz.err &
    else
        "$CKPZ" -q -d -o "$out" <fifo 2>ckpz.err &
    fi
    pid=$!
    PIDS+=("$pid")
    # wait until the temporary output exists, then let the reader drain the pipe
    for i in $(seq 1 100); do
        ls -A | grep -q "^\.$out\.tmp" && break
        sleep 0.1
    done
    ls -A | grep -q "^\.$out\.tmp" || fail "$sig/$mode: no temporary output appeared"
    ok
    sleep 1
    kill -0 "$pid" 2>/dev/null || fail "$sig/$mode: ckpz ended before the signal: $(cat ckpz.err)"
    kill "-$sig" "$pid"
    wait "$pid" 2>/dev/null
    rc=$?
    kill "$prod" 2>/dev/null
    wait "$prod" 2>/dev/null
    [ "$rc" -gt 128 ] || fail "$sig/$mode: exit status $rc, expected death by signal"
    ok
    absent "$out"
    no_temp_files .
}

make_safetensors seed.safetensors BF16
cat seed.safetensors seed.safetensors >big
head -c 20M /dev/urandom >>big
run 0 "$CKPZ" -q -o big.ckpz big

for sig in INT TERM HUP; do
    interrupt "$sig" c
done
interrupt INT d
interrupt TERM d

# a run that is not interrupted still works with the same plumbing
(head -c 3M /dev/urandom) >fifo_data
"$CKPZ" -q -o fine.ckpz <fifo_data || fail "plain run"
"$CKPZ" -q -d -c fine.ckpz | cmp -s - fifo_data || fail "plain run round trip"
ok
echo "signals.sh: $CHECKS checks passed"
