#!/bin/sh
# prepare-device.sh DEST FILE.ckpz... — one folder that a machine with a CUDA GPU runs
# as it is: the device tests built here (run.sh, BUILD_ONLY), the shared libraries they
# load, the .ckpz files, and DEST/run-device.sh, which writes its results under $OUT
# (default /tmp/out) and prints them. BENCH: names (not paths) of the FILEs to time tiled
# to 1 GiB (default: none). Keep DEST under 64 MiB if it travels with a device run that
# caps what it carries (the files are most of it: `du -sb DEST`).
#   sh tests/gpu/prepare-device.sh /work/main/build-i34 a.ckpz b.ckpz && BENCH=a.ckpz ...
set -eu
[ $# -ge 2 ] || { echo "usage: BENCH='NAME...' $0 DEST FILE.ckpz..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=$1
shift
mkdir -p "$dest/bin" "$dest/solib" "$dest/data"
BUILD_DIR="$dest/obj" BUILD_ONLY=1 sh "$root/tests/gpu/run.sh"
mv "$dest/obj/test_twin" "$dest/obj/test_planes_gpu" "$dest/obj/test_decode_gpu" "$dest/bin/"
rm -rf "$dest/obj"
# the libraries libckpz.a needs, as this machine has them (the device may lack them)
for lib in libzstd.so.1 liblz4.so.1 libdeflate.so.0 libsnappy.so.1; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
    cp -L "$path" "$dest/solib/"
done
names=
for f in "$@"; do
    cp "$f" "$dest/data/"
    names="$names data/$(basename "$f")"
done
bench=
for b in ${BENCH:-}; do bench="$bench data/$b"; done
cat > "$dest/run-device.sh" <<EOF
#!/bin/sh
# made by tests/gpu/prepare-device.sh: CPU twins, device restore of CPU-written files,
# changed planes, 1 GiB benchmark, and a memcheck of one restore when compute-sanitizer is there
cd "\$(dirname "\$0")"
export LD_LIBRARY_PATH=\$PWD/solib
O=\${OUT:-/tmp/out}
mkdir -p "\$O"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; nproc; } > "\$O/env.txt" 2>&1
timeout 120 bin/test_twin$names > "\$O/twin.txt" 2>&1; echo "rc=\$?" >> "\$O/twin.txt"
timeout 240 bin/test_decode_gpu$names${bench:+ --bench$bench} > "\$O/decode.txt" 2>&1; echo "rc=\$?" >> "\$O/decode.txt"
CS=\$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "\$CS" ]; then
    timeout 100 "\$CS" --tool memcheck --print-limit 5 bin/test_decode_gpu$(echo "$names" | awk '{print " " $1}') > "\$O/memcheck.txt" 2>&1
    echo "rc=\$?" >> "\$O/memcheck.txt"
else echo "no compute-sanitizer" > "\$O/memcheck.txt"; fi
cat "\$O/env.txt" "\$O/twin.txt" "\$O/decode.txt"; tail -5 "\$O/memcheck.txt"
EOF
chmod +x "$dest/run-device.sh"
du -sb "$dest"
