#!/bin/bash
# publish.sh — the leftovers of outputs (lib/file/publish.c, ckpz_publish_*): a killed
# writer's temporary output .NAME.ckpz-PID-HOST-RANDOM.tmp is removed by the next run
# writing NAME, but only the library's pattern for that NAME, from this host, of a
# process that is gone and whose file nobody holds locked; `ckpz -r` never takes a
# temporary output as an input.
source "$(dirname "$0")/common.bash" "$@"

# the HOST field: FNV-1a of the host name, as the library hashes it
host=$(python3 -c 'import socket
h = 2166136261
for c in socket.gethostname().encode():
    h = ((h ^ c) * 16777619) & 0xFFFFFFFF
print("%08x" % h)')
other_host=$(printf '%08x' $((0x$host ^ 1)))
dead=$(sh -c 'echo $$') # a process that has ended
kill -0 "$dead" 2>/dev/null && fail "pid $dead still in use"

head -c 300000 "$ROOT/samples/gpt-small.bf16.safetensors" >in.bin

# --- the next run removes a dead writer's file and directory, nothing else
removed=(".out.ckpz.ckpz-$dead-$host-0000abcd.tmp" ".out.ckpz.ckpz-$dead-$host-0000abce.tmp"
         ".out.ckpz.ckpz-$dead-$host-0000abcd.tmp.locktest.1") # MPI-IO's file beside a killed rank's
kept=(".out.ckpz.ckpz-$$-$host-0000abcf.tmp"         # a live writer (this shell)
      ".out.ckpz.ckpz-$dead-$other_host-0000abd0.tmp" # another host's: its pid means nothing here
      ".other.ckpz.ckpz-$dead-$host-0000abd1.tmp"     # another name's
      ".out.ckpz.ckpz-$dead-$host-0000abd2.tmp"       # locked by a live process (below)
      ".out.ckpz.tmpAbC123" ".out.ckpz.1234.0123456789ab.tmp" "out.ckpz.x1Y2z3") # other patterns
echo partial >"${removed[0]}"
mkdir "${removed[1]}" && echo shard >"${removed[1]}/rank-00000-of-00001.ckpz"
echo lock >"${removed[2]}"
for x in "${kept[@]}"; do echo keep >"$x"; done
echo keep >".out.ckpz.ckpz-$$-$host-0000abcf.tmp.locktest.1" # a live writer's companion
python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)' "${kept[3]}" >lock.out &
locker=$!
for _ in $(seq 1 500); do [ -s lock.out ] && break; sleep 0.01; done
[ -s lock.out ] || fail "the lock holder did not start"
run 0 "$CKPZ" -q -o out.ckpz in.bin
for x in "${removed[@]}"; do absent "$x"; done
for x in "${kept[@]}"; do exists "$x"; done
exists ".out.ckpz.ckpz-$$-$host-0000abcf.tmp.locktest.1"
kill "$locker"
wait "$locker" 2>/dev/null
"$CKPZ" -q -dc out.ckpz | cmp -s - in.bin || fail "out.ckpz does not restore in.bin"
ok
# its lock gone, the next run removes that one too; the others stay
run 0 "$CKPZ" -q -f -o out.ckpz in.bin
absent "${kept[3]}"
for i in 0 1 2 4 5 6; do exists "${kept[$i]}"; done
rm -f .out.ckpz.* .other.ckpz.* out.ckpz.* out.ckpz

# --- ckpz -r skips temporary outputs (restoring takes only *.ckpz, which they are not)
mkdir -p t/sub
cp in.bin t/a.bin
cp in.bin t/sub/b.bin
cp in.bin "t/.a.bin.ckpz.ckpz-$$-$host-00000001.tmp"     # being written (a live writer)
cp in.bin "t/sub/.c.bin.ckpz-$dead-$host-00000002.tmp"    # a dead writer's, of another name
run 0 "$CKPZ" -q -r t
exists t/a.bin.ckpz
exists t/sub/b.bin.ckpz
[ -z "$(find t -name '*.tmp.ckpz')" ] || fail "ckpz -r compressed a temporary output: $(find t -name '*.tmp.ckpz')"
ok
exists "t/.a.bin.ckpz.ckpz-$$-$host-00000001.tmp"

echo "publish.sh: $CHECKS checks passed"
