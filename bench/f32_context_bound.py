#!/usr/bin/env python3
"""f32_context_bound.py: empirical conditional entropies of the FP32 byte planes of a
safetensors checkpoint, the bounds behind issue 33's gap to a trained OpenZL (doc: the
report of branch i33-f32). Needs numpy.

    python3 bench/f32_context_bound.py FILE [TENSOR]

Per file (F32 tensors of 16384 elements or more, in 1 MiB chunks as ckpz cuts them): the
top mantissa byte's order-0 entropy and its entropy given the element's exponent, in
bytes. With TENSOR (a 2-D one): its exponent's entropy alone, given the left neighbour,
the byte 16 back, the one a row up, both neighbours, and given the row's and the
column's mean exponent (side information not counted), in bits per element.
"""
import json
import struct
import sys

import numpy as np


def entropy(v, k):
    c = np.bincount(np.ravel(v), minlength=k).astype(float)
    c = c[c > 0]
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum())


def cond(x, ctx):
    """H(x | ctx) in bits, x of 8 bits."""
    return entropy(ctx * 256 + x, int(ctx.max() + 1) * 256) - entropy(ctx, int(ctx.max() + 1))


def tensors(path):
    d = open(path, "rb").read()
    n = struct.unpack_from("<Q", d)[0]
    for name, v in json.loads(d[8:8 + n]).items():
        if name != "__metadata__" and v["dtype"] == "F32":
            s, e = v["data_offsets"]
            yield name, v["shape"], np.frombuffer(d, np.uint32, (e - s) // 4, 8 + n + s)


def mantissa(path):
    elems = h0 = hj = 0.0
    for _, _, a in tensors(path):
        if a.size < 16384:
            continue
        ex = ((a >> 23) & 0xFF).astype(np.int64)
        m1 = ((a >> 15) & 0xFF).astype(np.int64)
        for o in range(0, a.size, 262144):
            e, m = ex[o:o + 262144], m1[o:o + 262144]
            elems += e.size
            h0 += entropy(m, 256) * e.size / 8
            hj += cond(m, e) * e.size / 8
    print("top mantissa byte: %d bytes raw, order 0 %.0f, given the exponent %.0f" % (elems, h0, hj))


def exponent(path, want):
    for name, shape, a in tensors(path):
        if name != want:
            continue
        ex = ((a >> 23) & 0xFF).astype(np.int64).reshape(shape)
        flat = ex.ravel()
        pred = np.round(ex.mean(1)[:, None] + ex.mean(0)[None, :] - ex.mean()).astype(np.int64)
        print("%s %s exponent bits/element: alone %.3f, left %.3f, 16 back %.3f, up %.3f, up+left %.3f, "
              "row+column means %.3f" % (name, shape, entropy(flat, 256), cond(ex[:, 1:], ex[:, :-1]),
                                         cond(flat[16:], flat[:-16]), cond(ex[1:], ex[:-1]),
                                         cond(ex[1:, 1:], ex[:-1, 1:] * 256 + ex[1:, :-1]),
                                         entropy(ex - pred + 256, 512)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mantissa(sys.argv[1])
    if len(sys.argv) > 2:
        exponent(sys.argv[1], sys.argv[2])
