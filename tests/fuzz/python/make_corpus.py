#!/usr/bin/env python3
"""Regenerates the seed corpora of the Python fuzz harnesses (corpus/NAME/):

    PYTHONPATH=python CKPZ_LIBRARY=build/libckpz.so /usr/bin/python3 tests/fuzz/python/make_corpus.py

From the hostile suite (tests/python/hostile/make_suite.py, built in a scratch
directory with its code payloads aimed at _common.MARKER_DIR): each pickle case's
data.pkl (unpickler), its .pt (torchzip), each manifest (manifest), each hand-written
shard pickle (shard) and each DCP .metadata (dcp_metadata), those up to 64 KB, named
after the case. Hand-made safetensors files, valid and malformed, and the .ckpz of the
valid ones (safetensors). Besides them, real states as torch.save writes them (a model, AdamW,
SGD with momentum, LR schedulers, RNG states, an argparse.Namespace): their data.pkl
and archive. Files named crash-* (minimised findings, added by hand) are kept. Output
depends on the torch release only through those torch.save seeds and DCP's class paths.
"""

import os
import shutil
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import _common  # noqa: E402

LIMIT = 64 << 10


def real_states():
    """[(name, object)] of training states as torch.save meets them."""
    import argparse
    import random

    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
    adamw = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 4)).sum().backward()
    adamw.step()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sgd.step()
    steplr = torch.optim.lr_scheduler.StepLR(adamw, 5)
    multistep = torch.optim.lr_scheduler.MultiStepLR(sgd, [2, 4])
    random.seed(0)
    np.random.seed(0)
    return [
        ("model", model.state_dict()),
        ("adamw", adamw.state_dict()),
        ("training", {"model": model.state_dict(), "optim": adamw.state_dict(), "sgd": sgd.state_dict(),
                      "sched": {"step": steplr.state_dict(), "multistep": multistep.state_dict()}, "epoch": 3,
                      "args": argparse.Namespace(lr=1e-3, name="run"), "dtypes": [torch.float32, torch.Size([2, 3])],
                      "views": [torch.arange(6.0)[1:], torch.arange(6.0).reshape(2, 3).t()],
                      "ints": torch.tensor([1, -2], dtype=torch.int64), "half": torch.ones(3, dtype=torch.float16)}),
        ("rng", {"torch": torch.get_rng_state()[:64], "numpy_int": np.int64(3), "python": random.getstate()[1][:4]}),
        ("parameter", {"p": torch.nn.Parameter(torch.ones(2, 2))}),
    ]


def _st(header, data):
    """A safetensors file: header (a dict, or the JSON text as it stands), then data."""
    import json
    import struct

    h = header.encode() if isinstance(header, str) else json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    """{name: bytes}: plain safetensors files (valid and malformed) and the .ckpz that
    ckpz.safetensors.save makes of the valid ones."""
    import struct

    f32 = struct.pack("<8f", *[0.5 * i - 1 for i in range(8)])
    t = {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]}
    seeds = {
        "valid-f32.safetensors": _st({"w": t, "__metadata__": {"step": "3"}}, f32),
        "valid-mixed.safetensors": _st({
            "a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
            "b": {"dtype": "F16", "shape": [2, 2], "data_offsets": [8, 16]},
            "c": {"dtype": "I64", "shape": [1], "data_offsets": [16, 24]},
            "d": {"dtype": "BOOL", "shape": [8], "data_offsets": [24, 32]},
            "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [32, 32]}}, f32),
        "overlap.safetensors": _st({"a": t, "b": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, f32),
        "gap.safetensors": _st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, f32),
        "past-end.safetensors": _st({"a": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}}, f32),
        "huge-shape.safetensors": _st({"a": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 32]}},
                                      f32),
        "shape-mismatch.safetensors": _st({"a": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 32]}}, f32),
        "duplicate.safetensors": _st('{"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},'
                                     '"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}}', f32),
        "nan-number.safetensors": _st('{"a":{"dtype":"F32","shape":[NaN],"data_offsets":[0,32]}}', f32),
        "bad-dtype.safetensors": _st({"a": {"dtype": "Q9", "shape": [8], "data_offsets": [0, 32]}}, f32),
        "header-too-long.safetensors": struct.pack("<Q", 1 << 62) + b"{}",
        "not-json.safetensors": _st("{\"a\": [1, 2", f32),
    }
    import ckpz.safetensors

    for name in ("valid-f32", "valid-mixed"):
        seeds[name + ".safetensors.ckpz"] = ckpz.safetensors.save(ckpz.safetensors.load(seeds[name + ".safetensors"]))
    return seeds


def main():
    out = os.path.join(_HERE, "corpus")
    import make_suite
    import torch

    # a fixed scratch path: the seeds that name files (payloads, an absolute base) stay the same
    scratch = os.path.join(tempfile.gettempdir(), "ckpz-fuzz-corpus-suite")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        su = make_suite.build_suite(os.path.join(scratch, "suite"), _common.MARKER_DIR)
        seeds = {h: {} for h in ("unpickler", "torchzip", "manifest", "shard", "dcp_metadata", "safetensors")}
        seeds["safetensors"].update(safetensors_seeds())
        for case in su.cases:
            for h, rel in case["seeds"].items():
                p = os.path.join(su.out, rel)
                if not os.path.isfile(p) or os.path.islink(p) or os.path.getsize(p) > LIMIT:
                    continue
                name = case["id"].split("@")[0].replace("/", "-")
                if h == "unpickler":
                    name = name.rsplit(".", 1)[0] + ".pkl"
                with open(p, "rb") as fo:
                    seeds[h][name] = fo.read()
        for name, obj in real_states():
            import io
            import zipfile

            buf = io.BytesIO()
            torch.save(obj, buf)
            data = buf.getvalue()
            seeds["torchzip"]["real-%s.pt" % name] = data
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]
                seeds["unpickler"]["real-%s.pkl" % name] = z.read(pkl)
        total = 0
        for h, files in seeds.items():
            d = os.path.join(out, h)
            os.makedirs(d, exist_ok=True)
            for f in os.listdir(d):
                if not f.startswith("crash-"):
                    os.unlink(os.path.join(d, f))
            for name, data in sorted(files.items()):
                with open(os.path.join(d, name), "wb") as fo:
                    fo.write(data)
                total += len(data)
            print("make_corpus: %-13s %4d seeds" % (h, len(files)))
        print("make_corpus: %d bytes in %s" % (total, out))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
