#!/usr/bin/env python3
"""Writes small NumPy .npy files byte for byte as numpy.save does, with nothing but the
standard library (no numpy).

Layout (numpy.lib.format): b"\\x93NUMPY", major, minor, header length (u16 LE for 1.0,
u32 LE for 2.0), then the header: the repr of a dict with the keys in sorted order,
    "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
followed by spare spaces for the growth axis (numpy >= 1.23 reserves 21 digits), then
spaces up to a multiple of 64 bytes including the preamble, and a final '\\n'.

Files: float16/32/64 with NaN, +-Inf, denormals and -0.0; int8/int64/uint8/bool with
extremes; a 0-d array, an empty array, a one-element array, odd lengths, a Fortran-order
array, a version 2.0 header, a big-endian float32 array and an ml_dtypes-style bfloat16
('<V2') array. Deterministic for a given --seed.

Usage: python3 tests/data/make_npy.py OUTDIR [--seed N]
"""
import os
import random
import struct
import sys

ARRAY_ALIGN = 64
GROWTH_AXIS_MAX_DIGITS = 21
MAGIC = b"\x93NUMPY"


def header_bytes(descr, fortran_order, shape, version):
    d = {"descr": descr, "fortran_order": fortran_order, "shape": tuple(shape)}
    h = "{" + "".join("'%s': %s, " % (k, repr(d[k])) for k in sorted(d)) + "}"
    if len(shape) > 0:
        h += " " * (GROWTH_AXIS_MAX_DIGITS - len(repr(shape[-1 if fortran_order else 0])))
    hb = h.encode("latin1" if version < 3 else "utf8")
    fmt = "<H" if version == 1 else "<I"
    pre = len(MAGIC) + 2 + struct.calcsize(fmt)
    hlen = len(hb) + 1
    pad = (ARRAY_ALIGN - (pre + hlen) % ARRAY_ALIGN) % ARRAY_ALIGN
    hb += b" " * pad + b"\n"
    if version == 1 and len(hb) > 65535:
        raise ValueError("header too long for version 1.0")
    return MAGIC + bytes([version, 0]) + struct.pack(fmt, len(hb)) + hb


def write_npy(path, descr, shape, data, fortran_order=False, version=1):
    with open(path, "wb") as f:
        f.write(header_bytes(descr, fortran_order, shape, version))
        f.write(data)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def pack_bits(fmt, values):
    return b"".join(struct.pack(fmt, v) for v in values)


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def bf16_bits(x):
    b = f32_bits(x)
    if (b & 0x7F800000) == 0x7F800000 and (b & 0x007FFFFF):
        return ((b >> 16) & 0x8000) | 0x7FC0
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


NAN, INF = float("nan"), float("inf")
F32_SPECIAL = [f32_bits(v) for v in (NAN, INF, -INF, -0.0, 0.0)] + \
    [0x00000001, 0x807FFFFF, 0x7FA00000, 0xFFC00001, 0x7F7FFFFF]
F64_SPECIAL = [f64_bits(v) for v in (NAN, INF, -INF, -0.0, 0.0)] + \
    [0x0000000000000001, 0x800FFFFFFFFFFFFF, 0x7FF0000000000001]
F16_SPECIAL = [f16_bits(v) for v in (NAN, INF, -INF, -0.0, 0.0)] + \
    [0x0001, 0x83FF, 0x7C01, 0xFE00, 0x7BFF]


def floats(rng, n, bits_fn, specials, scale):
    vals = [bits_fn(rng.gauss(0.0, scale)) for _ in range(n)]
    for i, s in enumerate(specials):
        if n:
            vals[(i * 7919) % n] = s
    return vals


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    seed = 1234
    for i, a in enumerate(argv):
        if a == "--seed" and i + 1 < len(argv):
            seed = int(argv[i + 1])
            args = [x for x in args if x != argv[i + 1]]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    out = args[0]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    files = []

    def w(name, descr, shape, data, **kw):
        path = os.path.join(out, name)
        write_npy(path, descr, shape, data, **kw)
        files.append(path)

    w("f32_2d.npy", "<f4", (37, 11), pack_bits("<I", floats(rng, 407, f32_bits, F32_SPECIAL, 1.0)))
    w("f16_odd.npy", "<f2", (101,), pack_bits("<H", floats(rng, 101, f16_bits, F16_SPECIAL, 0.1)))
    w("f64.npy", "<f8", (3, 5), pack_bits("<Q", floats(rng, 15, f64_bits, F64_SPECIAL, 1.0)))
    w("i8.npy", "|i1", (9,), pack_bits("<b", [-128, 127, 0, -1] + [rng.randint(-128, 127) for _ in range(5)]))
    w("i64.npy", "<i8", (4,), pack_bits("<q", [0, -1, 2**63 - 1, -2**63]))
    w("u8.npy", "|u1", (2, 3, 5), pack_bits("<B", [rng.randint(0, 255) for _ in range(30)]))
    w("bool.npy", "|b1", (7,), pack_bits("<?", [rng.random() < 0.5 for _ in range(7)]))
    w("scalar.npy", "<f4", (), pack_bits("<I", [f32_bits(-0.0)]))
    w("empty.npy", "<f4", (0,), b"")
    w("empty_2d.npy", "<f8", (4, 0), b"")
    w("one.npy", "<i4", (1,), pack_bits("<i", [-2147483648]))
    w("fortran.npy", "<f4", (3, 4), pack_bits("<I", floats(rng, 12, f32_bits, [], 1.0)),
      fortran_order=True)
    w("big_f32_v1.npy", "<f4", (300, 257), pack_bits("<I", floats(rng, 300 * 257, f32_bits,
                                                                   F32_SPECIAL, 0.02)))
    w("f32_v2.npy", "<f4", (5, 7), pack_bits("<I", floats(rng, 35, f32_bits, F32_SPECIAL, 1.0)),
      version=2)
    w("bigendian_f32.npy", ">f4", (6,), pack_bits(">I", floats(rng, 6, f32_bits, F32_SPECIAL, 1.0)))
    w("bf16.npy", "<V2", (3, 3), pack_bits("<H", floats(rng, 9, bf16_bits, [], 0.02)))
    for p in files:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
