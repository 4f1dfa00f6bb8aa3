#!/usr/bin/python3
"""Writes small torch.save archives and .npz files for tests/test_torchzip.c, with a
sidecar FILE.expect per file that lists what lib/formats should find in it.

Needs Debian's torch and numpy (/usr/bin/python3); the C test only reads the output.

Files (all small): fp32_state.pt (a small model's state_dict), bf16_state.pt,
nested.pt (nested dicts/lists/tuples, ints, strings, FP16/INT64/INT32/INT8/UINT8/BOOL/
F64 tensors), shared.pt (tied weights and views of one storage), adamw.pt
({"model", "optimizer", "step"} after a few AdamW steps), scalar.pt (a 0-dim tensor),
empty.pt (empty tensors), arrays.npz (np.savez) and arrays_z.npz (np.savez_compressed);
and the same objects but adamw.pt in torch.save's legacy format
(_use_new_zipfile_serialization=False), as legacy1_NAME.pt under torch 1.x and
legacy2_NAME.pt under torch 2.x (`--legacy`: only those).

FILE.expect: one line per tensor data segment the reader should describe,
    offset length dtype name shape...
(offset/length in bytes within FILE; shape as the reader reports it: the shape of the
first tensor using the storage when it covers the storage exactly and is contiguous,
else [numel]). The name of a torch storage is the dict/list key path of the first
tensor (in pickle order) that uses it, joined with '.', or data/KEY for a bare tensor.
Deflated .npz members are not listed (they stay opaque).

In a legacy file the tensor segments are the storages' bytes after each one's 8-byte
count, in the order of the storage-key list.

Usage: /usr/bin/python3 tests/data/make_torch.py [--legacy] OUTDIR
       /work/venv-t2/bin/python tests/data/make_torch.py --legacy OUTDIR
"""
import io
import os
import pickle
import struct
import sys
import zipfile
from collections import OrderedDict

import numpy as np
import torch

STORAGE_DTYPES = {
    "FloatStorage": ("f32", 4), "HalfStorage": ("f16", 2), "BFloat16Storage": ("bf16", 2),
    "DoubleStorage": ("f64", 8), "LongStorage": ("i64", 8), "IntStorage": ("i32", 4),
    "ShortStorage": ("i16", 2), "CharStorage": ("i8", 1), "ByteStorage": ("u8", 1),
    "BoolStorage": ("bool", 1),
}
NPY_DTYPES = {"<f2": "f16", "<f4": "f32", "<f8": "f64", "|i1": "i8", "<i2": "i16",
              "<i4": "i32", "<i8": "i64", "|u1": "u8", "<u2": "u16", "<u4": "u32",
              "<u8": "u64", "|b1": "bool"}


def data_offset(raw, info):
    h = info.header_offset
    assert raw[h:h + 4] == b"PK\x03\x04"
    n, m = struct.unpack_from("<HH", raw, h + 26)
    return h + 30 + n + m


class Ref:
    def __init__(self, key, offset, size, stride):
        self.key, self.offset, self.size, self.stride = key, offset, tuple(size), tuple(stride)


class Probe(pickle.Unpickler):
    def __init__(self, f):
        super().__init__(f)
        self.storages = {}

    def persistent_load(self, pid):
        assert pid[0] == "storage"
        self.storages.setdefault(pid[2], (pid[1], pid[4]))
        return pid[2]

    def find_class(self, mod, name):
        if mod == "torch._utils" and name == "_rebuild_tensor_v2":
            return lambda st, off, size, stride, *a: Ref(st, off, size, stride)
        if mod == "torch._utils" and name == "_rebuild_parameter":
            return lambda t, *a: t
        if mod == "torch" and name.endswith("Storage"):
            return name
        return super().find_class(mod, name)


def walk(obj, path, first):
    if isinstance(obj, Ref):
        first.setdefault(obj.key, (path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, path + [str(k)], first)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk(v, path + [str(i)], first)


def contiguous(size):
    st, acc = [], 1
    for d in reversed(size):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def storage_name(key, numel, first):
    name = "data/" + key
    shape = (numel,)
    if key in first:
        p, ref = first[key]
        if p:
            name = ".".join(p)
        n = 1
        for d in ref.size:
            n *= d
        if ref.offset == 0 and n == numel and (numel == 0 or ref.stride == contiguous(ref.size)):
            shape = ref.size
    return name, shape


def expect_pt(path):
    raw = open(path, "rb").read()
    z = zipfile.ZipFile(path)
    infos = z.infolist()
    pkl = infos[0]
    assert pkl.filename.endswith("data.pkl")
    prefix = pkl.filename[: -len("data.pkl")]
    pr = Probe(io.BytesIO(z.read(pkl)))
    obj = pr.load()
    first = {}
    walk(obj, [], first)
    lines = []
    for info in infos:
        if not info.filename.startswith(prefix + "data/"):
            continue
        key = info.filename[len(prefix + "data/"):]
        stype, numel = pr.storages[key]
        dt, esz = STORAGE_DTYPES[stype]
        assert info.file_size == numel * esz and info.compress_type == 0
        name, shape = storage_name(key, numel, first)
        lines.append((data_offset(raw, info), info.file_size, dt, name, shape))
    return lines


def expect_legacy(path):
    f = open(path, "rb")
    for _ in range(3):  # magic number, protocol version, sys_info
        pickle.load(f)
    pr = Probe(f)
    obj = pr.load()
    keys = pickle.load(f)
    first = {}
    walk(obj, [], first)
    lines = []
    for key in keys:
        count = struct.unpack("<q", f.read(8))[0]
        stype, numel = pr.storages[key]
        dt, esz = STORAGE_DTYPES[stype]
        assert count == numel
        name, shape = storage_name(key, numel, first)
        lines.append((f.tell(), count * esz, dt, name, shape))
        f.seek(count * esz, 1)
    return lines


def expect_npz(path):
    raw = open(path, "rb").read()
    lines = []
    for info in zipfile.ZipFile(path).infolist():
        if info.compress_type != 0 or not info.filename.endswith(".npy"):
            continue
        off = data_offset(raw, info)
        f = io.BytesIO(raw[off:off + info.file_size])
        ver = np.lib.format.read_magic(f)
        shape, fortran, dtype = np.lib.format._read_array_header(f, ver)
        hl = f.tell()
        lines.append((off + hl, info.file_size - hl, NPY_DTYPES[dtype.str], info.filename[:-4], shape))
    return lines


def write_expect(path, lines):
    with open(path + ".expect", "w") as f:
        for off, ln, dt, name, shape in lines:
            f.write("%d %d %s %s%s\n" % (off, ln, dt, name, "".join(" %d" % d for d in shape)))


def optim_groups():
    """Two optimizer state dicts as torch's Optimizer.state_dict() writes them: one with
    groups at beta2 0.95 and 0.999 (the betas tuple shared as pickle shares it), one whose
    groups are hostile (betas of the wrong type, length or range, params not ints, a
    group that is not a dict); no random numbers, so the other files do not change."""
    def st(i):
        return {"step": torch.tensor(3.0), "exp_avg": torch.full((4, 4), 0.1 * i),
                "exp_avg_sq": torch.full((4, 4), 0.01 * (i + 1))}
    fast = (0.9, 0.95)
    good = {"state": {i: st(i) for i in range(4)},
            "param_groups": [{"lr": 1e-3, "betas": fast, "weight_decay": 0.1, "params": [0, 1]},
                             {"lr": 1e-3, "betas": (0.9, 0.999), "weight_decay": 0, "params": [2]},
                             {"lr": 1e-3, "betas": fast, "weight_decay": 0.1, "params": [3, 2]}]}
    bad = {"state": {i: st(i) for i in range(6)},
           "param_groups": [{"betas": "0.9, 0.95", "params": [0]}, {"betas": (0.9, 0.95, 0.97), "params": [1]},
                            {"betas": (0.9, 1.5), "params": [2]}, {"betas": (0, 1), "params": [3]},
                            {"betas": fast, "params": ["4", 4.0, True, -1]}, 5, None,
                            {"betas": fast, "params": {5: 5}}]}
    return {"optimizer": good, "opt.bad": bad}


def main():
    args = sys.argv[1:]
    legacy_only = "--legacy" in args
    args = [a for a in args if a != "--legacy"]
    out = args[0] if args else "tests/data/torch"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1234)
    np.random.seed(1234)

    model = torch.nn.Sequential(OrderedDict([
        ("embed", torch.nn.Embedding(40, 16)),
        ("norm", torch.nn.LayerNorm(16)),
        ("proj", torch.nn.Linear(16, 24)),
        ("head", torch.nn.Linear(24, 10)),
    ]))
    files = {}
    files["fp32_state.pt"] = model.state_dict()
    files["bf16_state.pt"] = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}

    files["nested.pt"] = {
        "config": {"name": "tiny", "layers": [1, 2, 3], "lr": 1e-3, "flags": (True, False, None)},
        "blocks": [
            {"w": torch.randn(8, 4).half(), "ids": torch.arange(12, dtype=torch.int64)},
            {"w": torch.randn(3, 5).double(), "mask": torch.rand(7) > 0.5},
        ],
        "tuple": (torch.randint(-100, 100, (9,), dtype=torch.int8),
                  torch.randint(0, 255, (6,), dtype=torch.uint8),
                  torch.randint(-9, 9, (5,), dtype=torch.int32)),
        3: torch.randn(4),
        "text": "caf\u00e9 \u2713",
    }

    base = torch.randn(6, 8)
    emb = torch.nn.Parameter(torch.randn(20, 8))
    files["shared.pt"] = {
        "emb": emb, "tied": emb,               # one storage, one object
        "full": base, "row": base[2],          # views of one storage
        "slice": base[:, 1:3], "t": base.t(),
        "view_first": torch.randn(10)[2:7],    # the first user does not cover it
    }

    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):
        x = torch.randint(0, 40, (5,))
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    files["adamw.pt"] = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 5}
    files["optim_groups.pt"] = optim_groups()
    files["scalar.pt"] = torch.tensor(3.25)
    files["empty.pt"] = {"e": torch.empty(0), "e2": torch.zeros(3, 0, dtype=torch.bfloat16),
                         "x": torch.ones(2)}

    legacy = "legacy%s_" % torch.__version__.split(".")[0]
    for name, obj in files.items():
        if name != "adamw.pt":
            p = os.path.join(out, legacy + name)
            torch.save(obj, p, _use_new_zipfile_serialization=False)
            write_expect(p, expect_legacy(p))
        if legacy_only:
            continue
        p = os.path.join(out, name)
        torch.save(obj, p)
        write_expect(p, expect_pt(p))
    if legacy_only:
        return

    arrays = {"w": np.random.randn(7, 5).astype(np.float32),
              "ids": np.arange(11, dtype=np.int64),
              "h": np.random.randn(13).astype(np.float16),
              "flags": np.random.rand(9) > 0.5,
              "scalar": np.float64(2.5) * np.ones(()),
              "empty": np.zeros((0, 3), np.float32)}
    p = os.path.join(out, "arrays.npz")
    np.savez(p, **arrays)
    write_expect(p, expect_npz(p))
    p = os.path.join(out, "arrays_z.npz")
    np.savez_compressed(p, big=np.zeros(3000, np.float32), w=arrays["w"])
    write_expect(p, expect_npz(p))


if __name__ == "__main__":
    main()
