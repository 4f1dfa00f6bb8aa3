#!/usr/bin/env python3
"""chunk_cost.py FILE.ckpz... -- where a ckpz file's bytes go besides its coded symbols.

Walks the stream (header, entry frames, chunk frames, index, trailer) and, for every
rANS plane (codecs 2, 8, 9, 10), splits the plane into its header fields, frequency
tables, final states and word stream, so that the container's cost per chunk can be read
off: frame, seek record, descriptors, tables and states per plane. Prints totals and the
average per chunk. doc/format.md and doc/entropy.md say what the bytes are.
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


def table_dispatch(b, p):
    """Length of a table at p: the compact table, or one of feature 5's tables if the
    writer codes them otherwise (hook for newer formats)."""
    return table_len(b, p)


def plane_parts(codec, b, n):
    """(header, tables, states) bytes of a coded plane b of n symbols; words = rest."""
    if codec in (8, 10, 11, 12):
        K = b[1]
        p = 2
        if codec in (11, 12):
            return None
        for _ in range(K):
            p += table_len(b, p)
        return 2, p - 2, 256
    if codec in (2, 9):
        sh, lg = b[0], b[1]
        nb = (n + (1 << sh) - 1) >> sh
        p, got, tabs, hdr = 2, 0, 0, 2
        while got < nb:
            c, q = leb(b, p)
            hdr += q - p
            got += c
            t = (table_len_ctab if codec == 9 else table_len)(b, q)
            tabs += t
            p = q + t
        return hdr, tabs, 4 << lg
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
    acc["index"] -= 0


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
