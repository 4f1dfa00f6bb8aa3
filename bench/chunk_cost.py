#!/usr/bin/env python3
"""chunk_cost.py FILE.ckpz... -- where a ckpz file's bytes go besides its coded symbols.

Walks the stream (header, entry frames, chunk frames, index, trailer) and, for every
rANS plane (codecs 2, 8, 9, 10, 11), splits the plane into its header fields, frequency
tables, final states and word stream, so that the container's cost per chunk can be read
off: frame, seek record, descriptors, tables and states per plane. Prints totals and the
average per chunk. doc/format.md and doc/entropy.md say what the bytes are. Lossless
stand-alone files only (no base frame's predictors or lossy planes are split).
"""
import struct
import sys
from collections import defaultdict


def leb(b, p):
    v = s = 0
    while True:
        c = b[p]
        p += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return v, p


def table_len(b, p):  # compact varint table (codecs 2, 3, 8, 10)
    lo, hi = b[p], b[p + 1]
    q = p + 2
    for _ in range(hi - lo):
        q += 2 if b[q] & 0x80 else 1
    return q - p


def table_len_ctab(b, p):  # codec 9's Rice table: walk the bits
    lo, hi, sk = b[p], b[p + 1], b[p + 2]
    s, k = sk & 15, sk >> 4
    if s == 0:
        return 3
    bit = 0
    base = p + 3
    for _ in range(hi - lo):
        while (b[base + bit // 8] >> (bit % 8)) & 1:
            bit += 1
        bit += 1 + k
    return 3 + (bit + 7) // 8


class Bits:  # a bit string read least significant bit first, from byte p
    def __init__(self, b, p):
        self.b, self.bit = b, 8 * p

    def get(self, k):
        v = 0
        for i in range(k):
            v |= ((self.b[self.bit // 8] >> (self.bit % 8)) & 1) << i
            self.bit += 1
        return v

    def unary(self):
        u = 0
        while self.get(1):
            u += 1
        return u

    def end(self):
        return (self.bit + 7) // 8


def table_len_d(b, p):  # codec 11's table: lo, hi, mode bit, bit lengths against 1 or 2 back
    lo, hi = b[p], b[p + 1]
    r = Bits(b, p + 2)
    m = r.get(1)
    bl = []
    for i in range(hi - lo):
        u = r.unary()
        d = -(u + 1) // 2 if u & 1 else u // 2
        bb = (bl[i - 1 - m] if i > m else 0) + 1 - m + d
        r.get(max(bb - 1, 0))
        bl.append(bb)
    return r.end() - p


def states_len_packed(b, p, N):  # codec 11's states: N nibbles, then 16 + e bits each
    bits = sum(16 + ((b[p + j // 2] >> (4 * (j & 1))) & 15) for j in range(N))
    return (N + 1) // 2 + (bits + 7) // 8


def plane_parts(codec, b, n):
    """(header, tables, states) bytes of a coded plane b of n symbols; words = rest."""
    if codec in (8, 10):
        K = b[1]
        p = 2
        for _ in range(K):
            p += table_len(b, p)
        return 2, p - 2, 256
    if codec in (2, 9, 11):
        sh, lg = b[0], b[1] & 7
        nb = (n + (1 << sh) - 1) >> sh
        p, got, tabs, hdr = 2, 0, 0, 2
        while got < nb:
            c, q = leb(b, p)
            hdr += q - p
            got += c
            t = {9: table_len_ctab, 11: table_len_d}.get(codec, table_len)(b, q)
            tabs += t
            p = q + t
        return hdr, tabs, states_len_packed(b, p, 1 << lg) if codec == 11 else 4 << lg
    return None


def walk(path, acc):
    b = open(path, "rb").read()
    acc["file"] += len(b)
    p = 32
    acc["header+trailer"] += 32 + 40
    ix_off = struct.unpack_from("<Q", b, len(b) - 40)[0]
    acc["index"] += len(b) - 40 - ix_off
    while p < ix_off:
        tag = b[p:p + 4]
        if tag in (b"CKEL", b"CKEN", b"CKBS"):
            ln = struct.unpack_from("<I", b, p + 4)[0]
            acc["entry frames"] += 12 + ln
            p += 12 + ln
            continue
        assert tag == b"CKCH", (path, p, tag)
        _, R, P, tr, es, npl, pred = struct.unpack_from("<IIIBBBB", b, p + 4)
        acc["chunks"] += 1
        acc["chunk frames"] += 32
        acc["seek records"] += 16
        acc["descriptors"] += 8 * npl
        q = p + 32 + 8 * npl
        for k in range(npl):
            codec = b[p + 32 + 8 * k]
            ln = struct.unpack_from("<I", b, p + 32 + 8 * k + 4)[0]
            E = es if tr in (1, 2) else 1
            n = R // E if (tr in (1, 2) and k < E) else (R % E if tr in (1, 2) else R)
            parts = plane_parts(codec, b[q:q + ln], n) if tr in (0, 1, 2) else None
            key = "codec %2d" % codec
            acc[key + " planes"] += 1
            acc[key + " bytes"] += ln
            if parts:
                h, t, s = parts
                acc[key + " head"] += h
                acc[key + " tables"] += t
                acc[key + " states"] += s
            q += ln
        p += 32 + P


def main():
    for path in sys.argv[1:]:
        acc = defaultdict(int)
        walk(path, acc)
        c = max(acc["chunks"], 1)
        print("%s: %d bytes, %d chunks" % (path, acc["file"], acc["chunks"]))
        for k in sorted(acc):
            if k in ("file", "chunks"):
                continue
            print("  %-24s %12d  %10.1f /chunk" % (k, acc[k], acc[k] / c))


if __name__ == "__main__":
    main()
