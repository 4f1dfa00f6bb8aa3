#!/usr/bin/env python3
"""Writes GGUF files (llama.cpp's model format) from real safetensors weights, following
the published specification (ggml's docs/gguf.md, version 3) and nothing of ckpz: the
tests compare what ckpz finds in these files with what this writer put there.

Layout written (little-endian):
  * "GGUF", version u32 (3), tensor count u64, metadata key-value count u64;
  * the key-values: key (u64 length + UTF-8), value type u32, value (scalars, strings,
    arrays of a type and a u64 count, nested arrays);
  * the tensor infos: name string, n_dims u32, dims u64 innermost first, GGML type u32,
    offset u64 from the start of the data section (a multiple of the alignment);
  * zero padding to the alignment (general.alignment, u32; 32 when absent), the data,
    each tensor padded with zeros to the alignment.

Tensors: a model's weights (not its optimizer state), each once, as a mixed-precision
model file holds them: vectors F32, the largest matrices quantised here to Q8_0 (per
32 elements an f16 scale max|x|/127 and 32 int8 codes) and Q4_0 (an f16 scale of the
signed extreme / -8 and 32 4-bit codes, low nibbles the first 16), the other matrices
F16 and BF16 by turns (BF16 as a BF16 file of the same model holds it, else rounded
here). Standard library only (no numpy, no torch).

    python3 tests/data/make_gguf.py OUT.gguf --f32 A.safetensors [--bf16 B.safetensors]
        [--alignment N] [--q8 K] [--q4 K] [--expect OUT.json]
    python3 tests/data/make_gguf.py --hostile DIR --f32 A.safetensors
    python3 tests/data/make_gguf.py --seeds tests/fuzz/corpus/gguf --f32 samples/gpt-small.f32.safetensors

--expect writes what a reader should find: per tensor its name (block types as
"name:q8_0"), ckpz dtype, shape outermost first (block types: rows and bytes per row),
absolute offset and byte length. --hostile writes damaged variants of a small valid file
(each must still restore byte for byte) with a line per file in DIR/hostile.txt: the
file, then "tensors N" (the tensors a reader can still vouch for), "opaque" (none) or
"any" (what a reader makes of it is not defined). --seeds writes the same variants of a
file of a few KB (matrices cut to two rows), the fuzzing seeds.
"""
import array
import json
import os
import struct
import sys

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i", T_F32: "<f",
          T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
# GGML types this writer produces: id, block elements, block bytes
GGML = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q8_0": (8, 32, 34), "i32": (26, 1, 4),
        "bf16": (30, 1, 2)}
CKPZ_DTYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16", "i32": "i32"}


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    if t in SCALAR:
        return struct.pack(SCALAR[t], v)
    if t == T_STR:
        return gstr(v)
    et, items = v
    return struct.pack("<IQ", et, len(items)) + b"".join(gvalue(et, x) for x in items)


def read_safetensors(path):
    d = open(path, "rb").read()
    n = struct.unpack("<Q", d[:8])[0]
    h = json.loads(d[8:8 + n])
    out = []
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out.append((k, v["dtype"], list(v["shape"]), d[8 + n + s:8 + n + e]))
    out.sort(key=lambda t: t[0])
    return out


def f16(x):
    try:
        return struct.pack("<e", x)
    except OverflowError:
        return struct.pack("<e", 65504.0 if x > 0 else -65504.0)


def quant_q8_0(xs):
    out = bytearray()
    for b in range(0, len(xs), 32):
        blk = xs[b:b + 32]
        amax = max(abs(x) for x in blk)
        d = amax / 127.0
        inv = 1.0 / d if d else 0.0
        out += f16(d)
        out += bytes((max(-127, min(127, round(x * inv))) & 0xFF) for x in blk)
    return bytes(out)


def quant_q4_0(xs):
    out = bytearray()
    for b in range(0, len(xs), 32):
        blk = xs[b:b + 32]
        ext = max(blk, key=abs)
        d = ext / -8.0
        inv = 1.0 / d if d else 0.0
        q = [min(15, int(x * inv + 8.5)) for x in blk]
        out += f16(d)
        out += bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    return bytes(out)


def bf16_round(xs):
    """f32 values to bf16 (round to nearest even), as torch casts them."""
    out = bytearray()
    for u in array.array("I", xs.tobytes()):
        if (u & 0x7F800000) == 0x7F800000:
            out += struct.pack("<H", (u >> 16) | (0x40 if u & 0xFFFF else 0))
        else:
            out += struct.pack("<H", ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
    return bytes(out)


def tensors_from(f32_path, bf16_path, nq8, nq4):
    """(name, ggml type, shape outermost first, data): the model's weights (not optimizer
    state) once each, in a mixed-precision layout: vectors F32, the largest matrices
    Q8_0 (then Q4_0), the other matrices F16 and BF16 by turns (BF16 as the BF16 file
    holds it when given)."""
    out = []
    src = [t for t in read_safetensors(f32_path) if t[1] == "F32" and not t[0].startswith(("optim.", "grad."))]
    bf = {t[0]: t[3] for t in read_safetensors(bf16_path) if t[1] == "BF16"} if bf16_path else {}
    mats = [t for t in src if len(t[2]) == 2 and t[2][1] % 32 == 0]
    mats.sort(key=lambda t: (-len(t[3]), t[0]))
    q8 = {t[0] for t in mats[:nq8]}
    q4 = {t[0] for t in mats[nq8:nq8 + nq4]}
    turn = 0
    for name, _, shape, data in src:
        xs = array.array("f", data)
        if name in q8:
            out.append((name, "q8_0", shape, quant_q8_0(xs)))
        elif name in q4:
            out.append((name, "q4_0", shape, quant_q4_0(xs)))
        elif len(shape) < 2:
            out.append((name, "f32", shape, data))
        else:
            turn += 1
            if turn % 2:
                out.append((name, "f16", shape, b"".join(f16(x) for x in xs)))
            else:
                out.append((name, "bf16", shape, bf.get(name) or bf16_round(xs)))
    out.append(("position_ids", "i32", [16], struct.pack("<16i", *range(16))))
    return out


def metadata(alignment, ntokens=300):
    kv = [("general.architecture", T_STR, "gpt2"),
          ("general.name", T_STR, "ckpz test model"),
          ("general.quantization_version", T_U32, 2),
          ("gpt2.context_length", T_U64, 256),
          ("gpt2.attention.layer_norm_epsilon", T_F32, 1e-5),
          ("gpt2.use_parallel_residual", T_BOOL, True),
          ("test.signed", T_I64, -12345678901),
          ("test.double", T_F64, 2.5),
          ("tokenizer.ggml.tokens", T_ARR, (T_STR, ["tok%d" % i for i in range(ntokens)])),
          ("tokenizer.ggml.scores", T_ARR, (T_F32, [float(i) / 7 for i in range(ntokens)])),
          ("test.nested", T_ARR, (T_ARR, [(T_U8, [1, 2, 3]), (T_I16, [-1, 7])]))]
    if alignment is not None:
        kv.append(("general.alignment", T_U32, alignment))
    return kv


def build(tensors, kv, alignment=32, version=3):
    """The file's bytes and what a reader should find in it."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    head += b"".join(gstr(k) + struct.pack("<I", t) + gvalue(t, v) for k, t, v in kv)
    infos, blobs, off = b"", [], 0
    placed = []
    for name, ty, shape, data in tensors:
        gid, blck, size = GGML[ty]
        dims = list(reversed(shape))
        infos += gstr(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        infos += struct.pack("<IQ", gid, off)
        placed.append((name, ty, shape, off, len(data)))
        pad = (alignment - len(data) % alignment) % alignment
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    pre = head + infos
    pre += b"\0" * ((alignment - len(pre) % alignment) % alignment)
    expect = []
    for name, ty, shape, o, n in placed:
        gid, blck, size = GGML[ty]
        if blck == 1:
            expect.append({"name": name, "dtype": CKPZ_DTYPE[ty], "shape": shape, "offset": len(pre) + o,
                           "length": n})
        else:
            rows = shape[:-1] + [shape[-1] // blck * size]
            expect.append({"name": name + ":" + ty, "dtype": "u8", "shape": rows, "offset": len(pre) + o,
                           "length": n})
    return pre + b"".join(blobs), expect


def hostile(outdir, f32_path, rows=None):
    """Damaged variants of a small valid file: each must still restore exactly. rows:
    keep only the first rows of each matrix (fuzzing seeds of a few KB)."""
    src = [t for t in read_safetensors(f32_path) if t[1] == "F32"]
    small = [t for t in src if len(t[2]) == 2 and t[2][1] % 32 == 0 and len(t[3]) <= 65536][:2]
    vec = [t for t in src if len(t[2]) == 1][:1]
    if rows:
        small = [(k, d, [rows, s[1]], b[:rows * s[1] * 4]) for k, d, s, b in small]
    ts = [(small[0][0], "f32", small[0][2], small[0][3]),
          (small[1][0], "q8_0", small[1][2], quant_q8_0(array.array("f", small[1][3]))),
          (vec[0][0], "f16", vec[0][2], b"".join(f16(x) for x in array.array("f", vec[0][3])))]
    kv = metadata(None, ntokens=4 if rows else 20)
    good, exp = build(ts, kv)
    os.makedirs(outdir, exist_ok=True)
    lines = []

    def put(name, data, what):
        open(os.path.join(outdir, name), "wb").write(data)
        lines.append("%s %s" % (name, what))

    def info_at(i):
        """Offset of tensor info i in `good` (walks the layout as written)."""
        p = 24
        for _ in range(len(kv)):
            kl = struct.unpack_from("<Q", good, p)[0]
            p += 8 + kl
            t = struct.unpack_from("<I", good, p)[0]
            p = skip_value(good, p + 4, t)
        for _ in range(i):
            nl = struct.unpack_from("<Q", good, p)[0]
            nd = struct.unpack_from("<I", good, p + 8 + nl)[0]
            p += 8 + nl + 4 + 8 * nd + 12
        return p

    def patch(buf, off, fmt, v):
        b = bytearray(buf)
        struct.pack_into(fmt, b, off, v)
        return bytes(b)

    def type_off(i):
        p = info_at(i)
        nl = struct.unpack_from("<Q", good, p)[0]
        nd = struct.unpack_from("<I", good, p + 8 + nl)[0]
        return p + 8 + nl + 4 + 8 * nd

    put("good.gguf", good, "tensors 3")
    for cut in (3, 7, 20, 24, 40, info_at(0) + 5, info_at(2) + 3, exp[0]["offset"] - 1, exp[1]["offset"] + 10,
                len(good) - 1):
        # a file cut short: the header (or the tensors past the cut) cannot be vouched for
        n = sum(1 for e in exp if e["offset"] + e["length"] <= cut) if cut >= exp[0]["offset"] else 0
        put("cut-%d.gguf" % cut, good[:cut], "tensors %d" % n if n else "opaque")
    put("version1.gguf", patch(good, 4, "<I", 1), "opaque")
    put("bigendian.gguf", patch(good, 4, "<I", 3 << 24), "opaque")
    put("tensors-huge.gguf", patch(good, 8, "<Q", 1 << 62), "opaque")
    put("kv-huge.gguf", patch(good, 16, "<Q", (1 << 64) - 1), "opaque")
    put("kv-count-short.gguf", patch(good, 16, "<Q", len(kv) + 1), "any")  # infos read as key-values
    put("key-len-huge.gguf", patch(good, 24, "<Q", (1 << 63) + 5), "opaque")
    put("value-type-bad.gguf", patch(good, 24 + 8 + len(kv[0][0]), "<I", 13), "opaque")
    deep = (T_ARR, [(T_ARR, [(T_ARR, [(T_ARR, [(T_ARR, [(T_ARR, [(T_ARR, [(T_ARR, [(T_ARR, [(T_U8, [1])])])])])])])])])])
    put("nested-deep.gguf", build(ts, kv + [("test.deep", T_ARR, deep)])[0], "opaque")
    put("array-huge.gguf", build(ts, [("test.a", T_ARR, (T_STR, ["x"]))])[0].replace(
        struct.pack("<IQ", T_STR, 1), struct.pack("<IQ", T_STR, 1 << 60), 1), "opaque")
    for a, what in ((0, "opaque"), (7, "opaque"), (64, "tensors 3")):
        put("align-%d.gguf" % a, build(ts, kv + [("general.alignment", T_U32, a)], alignment=a or 32)[0], what)
    put("align-u8.gguf", build(ts, kv + [("general.alignment", T_U8, 32)])[0], "opaque")
    put("type-unknown.gguf", patch(good, type_off(1), "<I", 99), "tensors 2")
    put("offset-misaligned.gguf", patch(good, type_off(0) + 4, "<Q", 8), "tensors 2")
    put("offset-past-end.gguf", patch(good, type_off(2) + 4, "<Q", 1 << 40), "tensors 2")
    put("overlap.gguf", patch(good, type_off(1) + 4, "<Q", 0), "tensors 1")
    p = info_at(0)
    nl = struct.unpack_from("<Q", good, p)[0]
    put("ndims-huge.gguf", patch(good, p + 8 + nl, "<I", 1000), "opaque")
    put("dims-overflow.gguf", patch(good, p + 8 + nl + 4, "<Q", 1 << 62), "tensors 2")
    put("rows-not-blocks.gguf", patch(good, info_at(1) + 8 + len(ts[1][0]) + 4, "<Q", 33), "tensors 2")
    put("name-nul.gguf", good[:p + 9] + b"\0" + good[p + 10:], "tensors 2")
    put("name-len-huge.gguf", patch(good, p, "<Q", 1 << 40), "opaque")
    dup = [(ts[0][0], "f32", ts[0][2], ts[0][3]), (ts[0][0], "f32", ts[0][2], ts[0][3])]
    put("duplicate-names.gguf", build(dup, kv)[0], "tensors 2")
    put("zero-dims.gguf", build([("empty", "f32", [0, 4], b"")] + ts, kv)[0], "tensors 4")
    put("no-tensors.gguf", build([], kv)[0], "opaque")
    open(os.path.join(outdir, "hostile.txt"), "w").write("\n".join(lines) + "\n")


def skip_value(b, p, t):
    if t in SCALAR:
        return p + struct.calcsize(SCALAR[t])
    if t == T_STR:
        return p + 8 + struct.unpack_from("<Q", b, p)[0]
    et, n = struct.unpack_from("<IQ", b, p)
    p += 12
    for _ in range(n):
        p = skip_value(b, p, et)
    return p


def main(argv):
    args = {"--f32": None, "--bf16": None, "--alignment": None, "--q8": "1", "--q4": "0", "--expect": None,
            "--hostile": None, "--seeds": None}
    out, i = None, 0
    while i < len(argv):
        if argv[i] in args:
            args[argv[i]] = argv[i + 1]
            i += 2
        else:
            out = argv[i]
            i += 1
    if not args["--f32"]:
        sys.exit(__doc__)
    if args["--hostile"]:
        hostile(args["--hostile"], args["--f32"])
        return
    if args["--seeds"]:
        hostile(args["--seeds"], args["--f32"], rows=2)
        os.remove(os.path.join(args["--seeds"], "hostile.txt"))
        return
    align = int(args["--alignment"]) if args["--alignment"] else None
    ts = tensors_from(args["--f32"], args["--bf16"], int(args["--q8"]), int(args["--q4"]))
    data, expect = build(ts, metadata(align), alignment=align or 32)
    open(out, "wb").write(data)
    if args["--expect"]:
        json.dump(expect, open(args["--expect"], "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
