#!/usr/bin/env python3
"""Writes small safetensors files the way the reference writer (huggingface/safetensors,
Rust) lays them out, with nothing but the standard library (no torch, no numpy).

Layout, as the reference writer produces it:
  * 8-byte little-endian header length N, then N bytes of compact JSON
    ({"__metadata__": {...}, "name": {"dtype", "shape", "data_offsets"}, ...}), padded
    with spaces so that N is a multiple of 8;
  * tensors sorted by dtype (largest alignment first, in the order of the reference's
    Dtype enum), then by name; "__metadata__" first in the JSON, the tensors after it in
    data order; data offsets relative to the first byte after the header; no gaps.

Values include NaN (several payloads), +-Inf, denormals, -0.0, the extremes of each
integer type, empty and one-element tensors and odd lengths. The output is
deterministic for a given --seed.

Usage: python3 tests/data/make_safetensors.py OUTDIR [--seed N]
"""
import json
import math
import os
import random
import struct
import sys

# The reference writer's Dtype enum order (safetensors >= 0.4); it sorts descending.
DTYPE_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
               "I32", "U32", "F32", "F64", "I64", "U64"]
DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
              "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


# ---- element encoders -------------------------------------------------------------------

def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_bits(x):
    """float -> bfloat16 bits, round to nearest even (as torch does); NaN stays quiet."""
    b = f32_bits(x)
    if (b & 0x7F800000) == 0x7F800000 and (b & 0x007FFFFF):
        return ((b >> 16) & 0x8000) | 0x7FC0
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def enc(dtype, values):
    """Encodes a flat list. For float types an element may be ('bits', int) to give the
    exact bit pattern (NaN payloads, denormals)."""
    def bits_or(v, conv):
        return v[1] if isinstance(v, tuple) else conv(v)
    if dtype == "F32":
        return b"".join(struct.pack("<I", bits_or(v, f32_bits)) for v in values)
    if dtype == "F64":
        return b"".join(struct.pack("<Q", bits_or(v, lambda x: struct.unpack(
            "<Q", struct.pack("<d", x))[0])) for v in values)
    if dtype == "F16":
        return b"".join(struct.pack("<H", bits_or(v, lambda x: struct.unpack(
            "<H", struct.pack("<e", x))[0])) for v in values)
    if dtype == "BF16":
        return b"".join(struct.pack("<H", bits_or(v, bf16_bits)) for v in values)
    fmt = {"I64": "<q", "I32": "<i", "I16": "<h", "I8": "<b", "U64": "<Q", "U32": "<I",
           "U16": "<H", "U8": "<B", "BOOL": "<?", "F8_E4M3": "<B", "F8_E5M2": "<B"}[dtype]
    return b"".join(struct.pack(fmt, v) for v in values)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# ---- the writer ---------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata=None, ensure_ascii=False):
    """tensors: {name: (dtype, shape, bytes)}. Returns the header length."""
    for name, (dtype, shape, data) in tensors.items():
        assert len(data) == numel(shape) * DTYPE_SIZE[dtype], name
    order = sorted(tensors.items(),
                   key=lambda kv: (-DTYPE_ORDER.index(kv[1][0]), kv[0].encode("utf-8")))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, (dtype, shape, data) in order:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [off, off + len(data)]}
        off += len(data)
    js = json.dumps(header, separators=(",", ":"), ensure_ascii=ensure_ascii).encode("utf-8")
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for _, (_, _, data) in order:
            f.write(data)
    return len(js)


# ---- content ------------------------------------------------------------------------------

F32_SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0,
               ("bits", 0x00000001),  # smallest denormal
               ("bits", 0x807FFFFF),  # largest negative denormal
               ("bits", 0x7FA00000),  # signalling NaN
               ("bits", 0xFFC00001),  # negative NaN with payload
               3.4028234663852886e38, 1.1754943508222875e-38]
BF16_SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0,
                ("bits", 0x0001), ("bits", 0x8001), ("bits", 0x007F),  # denormals
                ("bits", 0x7F81), ("bits", 0xFFC1),                   # NaN payloads
                ("bits", 0x7F7F), ("bits", 0xFF7F)]                   # +-max
F16_SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0,
               ("bits", 0x0001), ("bits", 0x83FF), ("bits", 0x7C01), ("bits", 0xFE00),
               65504.0, -65504.0, 6.103515625e-05]
F64_SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0,
               ("bits", 0x0000000000000001), ("bits", 0x800FFFFFFFFFFFFF),
               ("bits", 0x7FF0000000000001), 1.7976931348623157e308]


def gauss(rng, n, scale):
    return [rng.gauss(0.0, scale) for _ in range(n)]


def with_specials(rng, n, scale, specials):
    vals = gauss(rng, n, scale)
    for i, s in enumerate(specials):
        if n:
            vals[(i * 7919) % n] = s
    return vals


def mixed(rng):
    t = {}
    t["w.bf16"] = ("BF16", (7, 9), enc("BF16", with_specials(rng, 63, 0.02, BF16_SPECIAL)))
    t["w.f16"] = ("F16", (5, 3), enc("F16", with_specials(rng, 15, 0.5, F16_SPECIAL)))
    t["w.f32"] = ("F32", (33,), enc("F32", with_specials(rng, 33, 1.0, F32_SPECIAL)))
    t["w.f64"] = ("F64", (3, 3), enc("F64", with_specials(rng, 9, 1.0, F64_SPECIAL)))
    t["step"] = ("I64", (), enc("I64", [300]))
    t["idx"] = ("I64", (5,), enc("I64", [0, -1, 2**63 - 1, -2**63, 12345678901]))
    t["q"] = ("I8", (11,), enc("I8", [-128, 127, 0, -1, 1] + [rng.randint(-128, 127) for _ in range(6)]))
    t["u"] = ("U8", (13,), enc("U8", [0, 255] + [rng.randint(0, 255) for _ in range(11)]))
    t["mask"] = ("BOOL", (10,), enc("BOOL", [rng.random() < 0.5 for _ in range(10)]))
    t["empty"] = ("F32", (0,), b"")
    t["empty2"] = ("BF16", (3, 0), b"")
    t["one"] = ("F32", (1,), enc("F32", [-0.0]))
    t["scalar.bf16"] = ("BF16", (), enc("BF16", [1.0]))
    return t


def model_bf16(rng):
    """A small BF16 "model": a few weight matrices (one > 256 KiB, so several chunks),
    biases, a layer norm and odd-sized leftovers."""
    t = {}
    for name, shape, scale in [("embed.weight", (1000, 160), 0.02),
                               ("layers.0.attn.qkv.weight", (96, 288), 0.05),
                               ("layers.0.attn.qkv.bias", (288,), 0.01),
                               ("layers.0.mlp.fc1.weight", (384, 97), 0.03),
                               ("layers.0.ln.weight", (96,), 0.0),
                               ("head.bias", (3,), 0.1)]:
        n = numel(shape)
        vals = [1.0] * n if name.endswith("ln.weight") else gauss(rng, n, scale)
        t[name] = ("BF16", shape, enc("BF16", vals))
    return t


def adam_f32(rng):
    """FP32 weights with Adam moments (exp_avg ~ small signed, exp_avg_sq >= 0)."""
    t = {}
    n0, n1 = 257, 129
    w = gauss(rng, n0 * n1, 0.02)
    m = gauss(rng, n0 * n1, 1e-4)
    v = [x * x for x in gauss(rng, n0 * n1, 1e-3)]
    v[0] = 0.0
    t["w"] = ("F32", (n0, n1), enc("F32", w))
    t["w.exp_avg"] = ("F32", (n0, n1), enc("F32", m))
    t["w.exp_avg_sq"] = ("F32", (n0, n1), enc("F32", v))
    t["step"] = ("F32", (), enc("F32", [300.0]))
    return t


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

    def w(name, tensors, **kw):
        path = os.path.join(out, name)
        write_safetensors(path, tensors, **kw)
        files.append(path)

    w("mixed.safetensors", mixed(rng), metadata={"format": "pt"})
    w("model_bf16.safetensors", model_bf16(rng), metadata={"format": "pt"})
    w("adam_f32.safetensors", adam_f32(rng), metadata={"format": "pt"})
    names = {"caf\u00e9.weight": ("F16", (3,), enc("F16", [1.0, -2.0, 0.5])),
             "\u6a21\u578b.\U0001F600": ("U8", (5,), enc("U8", [1, 2, 3, 4, 5])),
             'quote"back\\slash': ("I16", (2,), enc("I16", [-32768, 32767])),
             "": ("I32", (1,), enc("I32", [-2147483648]))}
    # Non-ASCII names written raw (as the reference does) and \u-escaped.
    w("names_utf8.safetensors", names, metadata={"format": "pt"})
    w("names_escaped.safetensors", names, metadata={"format": "pt"}, ensure_ascii=True)
    w("no_tensors.safetensors", {}, metadata={"format": "pt", "note": "empty"})
    w("no_metadata.safetensors", {"x": ("F64", (2,), enc("F64", [math.pi, -math.e]))})
    for p in files:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
