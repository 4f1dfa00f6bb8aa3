"""One checkout's ckpz adapter (bench/peers_lib, imported from the checkout run in) timed
as bench/peers' worker times it; run by bench/inmem-ab.

    python3 inmem_worker.py FILE ROUNDS LEVEL
"""

import ctypes
import gc
import statistics
import sys
import time

# the checkout's own bench/peers_lib (PYTHONPATH), not the one beside this script
del sys.path[0]
from peers_lib import lossless  # noqa: E402


def main():
    path, rounds, level = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path, "rb") as f:
        data = f.read()
    tool = lossless.Ckpz(level)
    trim = ctypes.CDLL(None).malloc_trim
    cs, ds, size = [], [], 0
    for r in range(rounds + 1):  # round 0 warms up
        gc.collect()
        trim(0)
        c0 = time.process_time()
        blob = tool.compress(data, 1)
        c1 = time.process_time()
        size = lossless.size(blob)
        gc.collect()
        trim(0)
        d0 = time.process_time()
        out = tool.decompress(blob, 1)
        d1 = time.process_time()
        if bytes(out) != data:
            sys.exit("inmem-ab: %s did not come back byte for byte" % path)
        del blob, out
        if r:
            cs.append(c1 - c0)
            ds.append(d1 - d0)
    n = len(data)
    print("ratio %.4f  compress %7.1f  decompress %7.1f MB/s per core (CPU time, medians of %d)"
          % (n / size, n / statistics.median(cs) / 1e6, n / statistics.median(ds) / 1e6, rounds))


if __name__ == "__main__":
    main()
