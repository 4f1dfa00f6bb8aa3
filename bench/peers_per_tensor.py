#!/usr/bin/env python3
"""peers_per_tensor.py: where OpenZL codes a safetensors file smaller than ckpz, tensor by
tensor: ckpz's compressed bytes per tensor (`ckpz -l -v` of FILE.ckpz) beside the
smallest of bench/peers' OpenZL graphs for that tensor chosen on the file itself (a bound
on bench/peers' "openzl trained", which chooses on a sibling checkpoint). Runs in the
venv bench/peers owns (build/peers-venv: OpenZL 0.3); leaves bench/peers as it is.

    build/ckpz -3 -T1 -c FILE > FILE.ckpz   (anywhere)
    build/peers-venv/bin/python bench/peers_per_tensor.py FILE FILE.ckpz [CKPZ]

Prints the tensors sorted by ckpz's bytes less OpenZL's, the largest lead of OpenZL last,
and the totals.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers_lib import layout, lossless  # noqa: E402


def ckpz_sizes(ckpz, packed):
    out = subprocess.run([ckpz, "-l", "-v", packed], check=True, capture_output=True, text=True).stdout
    rows = (line.split() for line in out.splitlines()[1:])
    return {f[1]: int(f[-2]) for f in rows if len(f) > 3 and f[0].isdigit()}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, packed = sys.argv[1], sys.argv[2]
    ckpz = sys.argv[3] if len(sys.argv) > 3 else "build/ckpz"
    have = ckpz_sizes(ckpz, packed)
    data = open(path, "rb").read()
    zl, graphs, rows = lossless.OpenZL(), lossless._graphs(), []
    for s in layout.segments(path, data):
        if s.dtype not in graphs or not s.size or s.name not in have:
            continue
        sizes = {}
        for g, _, _ in graphs[s.dtype]:
            try:
                sizes[g] = len(zl._one(data, s, g))
            except RuntimeError:
                pass
        if sizes:
            g = min(sizes, key=sizes.get)
            rows.append((have[s.name] - sizes[g], s.name, s.size, have[s.name], sizes[g], g))
    for d, name, n, c, o, g in sorted(rows):
        print("%-44s %10d  ckpz %10d  openzl %10d (%s)  %+d" % (name, n, c, o, g, d))
    print("total: ckpz %d, openzl %d, ckpz less openzl %+d" % (sum(r[3] for r in rows), sum(r[4] for r in rows),
                                                               sum(r[0] for r in rows)))


if __name__ == "__main__":
    main()
