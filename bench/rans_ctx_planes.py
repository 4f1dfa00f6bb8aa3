#!/usr/bin/env python3
"""Writes the exponent planes of a safetensors file for bench/rans_ctx_bench.c.

Plane 0 of the float transform (each element rotated left by one bit, its top byte:
the whole 8-bit exponent for FP32 and BF16) of every 4 MiB chunk of every F32, BF16
and F16 tensor, each as a little-endian u32 length and its bytes.
Usage: rans_ctx_planes.py FILE.safetensors OUT
"""
import json
import struct
import sys

import numpy as np


def planes(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    base = 8 + n
    for name, t in hdr.items():
        if name == "__metadata__" or t["dtype"] not in ("F32", "BF16", "F16"):
            continue
        s, e = t["data_offsets"]
        if t["dtype"] == "F32":
            a = np.frombuffer(b, np.uint32, (e - s) // 4, base + s)
            ex, step = ((a << 1 | a >> 31) >> 24).astype(np.uint8), 1 << 20
        else:
            a = np.frombuffer(b, np.uint16, (e - s) // 2, base + s)
            ex, step = (((a << 1) | (a >> 15)) >> 8).astype(np.uint8), 1 << 21
        for off in range(0, a.size, step):
            yield ex[off:off + step]


def main():
    count = total = 0
    with open(sys.argv[2], "wb") as out:
        for p in planes(sys.argv[1]):
            out.write(struct.pack("<I", p.size))
            out.write(p.tobytes())
            count += 1
            total += p.size
    print(f"{sys.argv[1]}: {count} planes, {total} bytes")


if __name__ == "__main__":
    main()
