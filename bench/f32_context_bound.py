#!/usr/bin/env python3
"""f32_context_bound.py: empirical conditional entropies of the FP32 byte planes of a
safetensors checkpoint, the bounds behind issue 33's gap to a trained OpenZL (doc: the
report of branch i33-f32). Needs numpy.

    python3 bench/f32_context_bound.py FILE [TENSOR]
    python3 bench/f32_context_bound.py --tables FILE
    python3 bench/f32_context_bound.py --rows FILE
    python3 bench/f32_context_bound.py --exp FILE

Per file (F32 tensors of 16384 elements or more, in 1 MiB chunks as ckpz cuts them): the
top mantissa byte's order-0 entropy and its entropy given the element's exponent, in
bytes. With TENSOR (a 2-D one): its exponent's entropy alone, given the left neighbour,
the byte 16 back, the one a row up, both neighbours, and given the row's and the
column's mean exponent (side information not counted), in bits per element.

With --tables, what a coder of the top mantissa byte given the exponent can keep with its
tables counted (the model of branch i33-f32ctx's codec 10): the plane's order-0 table
(1-2 bytes a symbol) against, per exponent worth it (at most 16 per chunk), that table
times one ratio byte per 32-value bin (33 bytes a context); chunks whose top mantissa
bytes are mostly zero apart, since ckpz codes those planes with zstd, which the order-0
figure does not show.

With --rows, per 2-D tensor with all-zero rows (an embedding's gradient: rows of tokens
not in the batch): an order-0 bound of its rows as a mask of the zero rows plus the other
rows' four byte planes (exponent, top mantissa byte given the exponent, two lower bytes),
against which `ckpz -l -v` shows what ckpz codes the tensor to.

With --exp, per file (chunks as above): the exponent's entropy given the byte 16 back
(codec 8's context) and given the rounded mean of the previous aligned 16 exponents (one
context for 16 lanes of a round), in bytes, tables not counted; then both as codec 8
buckets them (16 contexts around the chunk's most common exponent), tables counted.
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


def pieces(path):
    """(exponent, top mantissa byte) of each 256 Ki values of every FP32 tensor of at
    least 16 Ki values, as int64 arrays."""
    for _, _, a in tensors(path):
        if a.size < 16384:
            continue
        ex = ((a >> 23) & 0xFF).astype(np.int64)
        m1 = ((a >> 15) & 0xFF).astype(np.int64)
        for o in range(0, a.size, 262144):
            e, m = ex[o:o + 262144], m1[o:o + 262144]
            yield e, m


def mantissa(path):
    elems = h0 = hj = 0.0
    for e, m in pieces(path):
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


def table_bytes(c):
    nz = np.nonzero(c)[0]
    if len(nz) == 0:
        return 2
    big = (c.sum() * 127 + 4095) // 4096
    return 2 + int(sum(1 + (c[s] > big) for s in range(nz[0], nz[-1])))


def order0(c):
    c = c[c > 0].astype(float)
    return float(-(c * np.log2(c / c.sum())).sum()) / 8


def binned_gain(j, c0):
    """Bytes the contexts of joint counts j (exponent x byte) save against counts c0,
    33 bytes of table each, the 16 largest savings that pay."""
    pb = c0.reshape(32, 8).sum(1) / c0.sum()
    gains = []
    for cb in j.reshape(256, 32, 8).sum(2):
        n = cb.sum()
        if n < 4096:
            continue
        m = cb > 0
        gains.append((cb[m] * np.log2(cb[m] / n / pb[m])).sum() / 8 - 33)
    return sum(sorted([g for g in gains if g > 0])[-16:])


def tables(path):
    tot = {"mostly zero": [0, 0.0, 0.0], "other": [0, 0.0, 0.0]}
    for e, m in pieces(path):
        c0 = np.bincount(m, minlength=256)
        j = np.bincount(e * 256 + m, minlength=65536)
        t = tot["mostly zero" if 2 * c0[0] > m.size else "other"]
        alone = order0(c0) + table_bytes(c0)
        t[0] += m.size
        t[1] += alone
        t[2] += alone - binned_gain(j, c0)
    for k, t in tot.items():
        print("top mantissa byte, chunks %s: %d bytes raw, order 0 with its table %.0f, given the exponent "
              "with tables %.0f (%.0f less)" % (k, t[0], t[1], t[2], t[1] - t[2]))


def rows(path):
    for name, shape, a in tensors(path):
        if len(shape) != 2 or a.size < 16384:
            continue
        a = a.reshape(shape)
        nz = (a != 0).any(1)
        if nz.all():
            continue
        r = a[nz]
        ex, b1 = (r >> 23) & 0xFF, (r >> 15) & 0xFF
        planes = [entropy(ex, 256), cond(b1, ex), entropy((r >> 7) & 0xFF, 256), entropy((r << 1 | r >> 31) & 0xFF, 256)]
        print("%s %s: %d zero rows; bound %.0f bytes (mask %d, planes %s)" %
              (name, shape, shape[0] - nz.sum(), sum(planes) * r.size / 8 + shape[0] / 8, shape[0] // 8,
               ", ".join("%.0f" % (h * r.size / 8) for h in planes)))


def exp_mean(path):
    back = mean = kback = kmean = 0.0
    for _, _, a in tensors(path):
        if a.size < 16384:
            continue
        for o in range(0, a.size, 262144):
            ex = ((a[o:o + 262144] >> 23) & 0xFF).astype(np.int64)
            ex = ex[:ex.size - ex.size % 16]
            ctx = np.repeat(np.round(ex.reshape(-1, 16).mean(1)).astype(np.int64)[:-1], 16)
            back += cond(ex[16:], ex[:-16]) * (ex.size - 16) / 8
            mean += cond(ex[16:], ctx) * (ex.size - 16) / 8
            lo = int(np.bincount(ex).argmax()) - 8
            kback += bucketed(ex[16:], np.clip(ex[:-16] - lo, 0, 15))
            kmean += bucketed(ex[16:], np.clip(ctx - lo, 0, 15))
    print("exponent bytes given the byte 16 back %.0f, given the previous 16's mean %.0f (%.0f less); "
          "in 16 buckets with tables %.0f and %.0f (%.0f less)" % (back, mean, back - mean, kback, kmean, kback - kmean))


def bucketed(x, ctx):
    """Bytes of x coded with one order-0 table per context, tables counted."""
    j = np.bincount(ctx * 256 + x, minlength=16 * 256).reshape(16, 256)
    return sum(order0(c) + table_bytes(c) for c in j if c.sum())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    modes = {"--tables": tables, "--rows": rows, "--exp": exp_mean}
    if sys.argv[1] in modes:
        modes[sys.argv[1]](sys.argv[2])
        sys.exit(0)
    mantissa(sys.argv[1])
    if len(sys.argv) > 2:
        exponent(sys.argv[1], sys.argv[2])
