"""Tests of the Python package ckpz (python/ckpz) with Debian's torch and NumPy.

Run by ctest (tests/python/CMakeLists.txt) as `/usr/bin/python3 test_ckpz.py -v` with
CKPZ_LIBRARY (the built libckpz.so), CKPZ_CLI (the built ckpz) and PYTHONPATH (python/)
set. By hand from the repository, after `make`:

    PYTHONPATH=python /usr/bin/python3 tests/python/test_ckpz.py -v

PyTorch and NumPy are required: without them the run fails (it does not skip), since
`make test` installs python3-torch and python3-numpy (scripts/install-deps).
"""

import copy
import filecmp
import io
import math
import os
import subprocess
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", ".."))
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

try:
    import numpy as np
    import torch
except ImportError as e:  # fail, loudly: these tests are part of `make test`
    raise ImportError(
        "tests/python need PyTorch and NumPy in %s (import failed: %s). On Debian: "
        "apt-get install python3-torch python3-numpy (scripts/install-deps does it)." % (sys.executable, e)
    ) from e

import ckpz  # noqa: E402
from ckpz import _lib  # noqa: E402

torch.set_num_threads(1)


def cli_path():
    p = os.environ.get("CKPZ_CLI") or os.path.join(_REPO, "build", "ckpz")
    return p if os.path.exists(p) else None


def read_bytes(p):
    with open(p, "rb") as f:
        return f.read()


def storage_ptr(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


def bits(t):
    """The tensor's bytes (dtype-independent, so NaN payloads and -0.0 compare exactly)."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)


class Case(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ckpz-py-")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertSameTensor(self, a, b, where=""):
        self.assertTrue(torch.is_tensor(b), "%s: not a tensor: %r" % (where, type(b)))
        self.assertEqual(a.dtype, b.dtype, where)
        self.assertEqual(tuple(a.shape), tuple(b.shape), where)
        self.assertEqual(a.stride(), b.stride(), where)
        self.assertEqual(a.storage_offset(), b.storage_offset(), where)
        self.assertEqual(a.requires_grad, b.requires_grad, where)
        self.assertTrue(torch.equal(bits(a), bits(b)), "%s: bytes differ" % where)

    def assertSameObject(self, a, b, where="obj"):
        """Deep equality, tensors bit for bit, NaN floats equal to NaN."""
        if torch.is_tensor(a):
            self.assertSameTensor(a, b, where)
        elif isinstance(a, dict):
            self.assertIs(type(a), type(b), where)
            self.assertEqual(list(a.keys()), list(b.keys()), where)
            for k in a:
                self.assertSameObject(a[k], b[k], "%s[%r]" % (where, k))
        elif isinstance(a, (list, tuple)):
            self.assertIs(type(a), type(b), where)
            self.assertEqual(len(a), len(b), where)
            for i, (x, y) in enumerate(zip(a, b)):
                self.assertSameObject(x, y, "%s[%d]" % (where, i))
        elif isinstance(a, float) and math.isnan(a):
            self.assertTrue(isinstance(b, float) and math.isnan(b), where)
        elif isinstance(a, float):
            self.assertIs(type(b), float, where)
            self.assertEqual(math.copysign(1.0, a), math.copysign(1.0, b), where)
            self.assertEqual(a, b, where)
        else:
            self.assertIs(type(a), type(b), where)
            self.assertEqual(a, b, where)

    def leftovers(self, *keep):
        return sorted(set(os.listdir(self.dir)) - set(keep))


# ---- a small GPT and AdamW -----------------------------------------------------------


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab=61, d=32, heads=4, layers=2, ctx=16):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(ctx, d) * 0.02)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied: one storage, two state-dict names
        self.register_buffer("mask", torch.triu(torch.full((ctx, ctx), float("-inf")), 1))

    def forward(self, idx):
        n = idx.shape[1]
        x = self.tok(idx) + self.pos[:n]
        for b in self.blocks:
            x = b(x, self.mask[:n, :n])
        return self.head(self.ln(x))


def train(model, opt, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, 61, (4, 17), generator=g)
        logits = model(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 61), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return loss.item()


def make_training_state(steps=3):
    torch.manual_seed(1234)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    loss = train(model, opt, steps, seed=7)
    sched.step()
    state = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "step": steps,
        "loss": loss,
        "rng": torch.get_rng_state(),
        "config": {"vocab": 61, "d": 32, "heads": 4, "layers": 2, "name": "tiny-gpt", "dropout": None},
    }
    return model, opt, state


# ---- tests -----------------------------------------------------------------------------


class TestLibrary(unittest.TestCase):
    def test_params_layout_matches_header(self):
        raw = _lib.ctypes.create_string_buffer(1024)
        _lib.params_init(raw)
        self.assertEqual(_lib.ctypes.c_size_t.from_buffer(raw).value, _lib.ctypes.sizeof(_lib.Params))
        p = _lib.Params.from_buffer(raw)
        self.assertEqual(p.level, ckpz.LEVEL_DEFAULT)
        self.assertEqual(p.threads, 0)

    def test_version(self):
        self.assertEqual(ckpz.library_version(), "%d.%d.%d" % tuple(int(x) for x in ckpz.__version__.split(".")))

    def test_bad_options(self):
        for level in (-1, 10, 2.5, "3", True):
            with self.assertRaises(ValueError):
                ckpz.save({}, io.BytesIO(), level=level)
        with self.assertRaises(ValueError):
            ckpz.save({}, io.BytesIO(), threads=-1)

    def test_error_class(self):
        e = ckpz.Error(_lib.ERR_CHECKSUM, "chunk 3 (tensor 'w'): checksum mismatch", "/x/y.ckpz")
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(e.code, 8)
        self.assertEqual(e.name, "checksum mismatch")
        self.assertIn("chunk 3", str(e))
        self.assertIn("/x/y.ckpz", str(e))


class TestMemory(unittest.TestCase):
    def test_alloc_sizes(self):
        # the memory C restores into: exactly n writable bytes, zeroed, whether in 4 KiB
        # pages (below 1 MiB) or in whole 2 MiB pages cut to n (from 1 MiB on)
        from ckpz import _memory

        for n in (0, 1, 4095, (1 << 20) - 1, 1 << 20, 1907032, 2 << 20, (2 << 20) + 1, (5 << 20) + 3):
            buf = _memory.alloc(n)
            self.assertEqual(len(buf), n)
            mv = memoryview(buf)
            self.assertFalse(mv.readonly)
            if n:
                self.assertEqual(mv.tobytes().count(0), n, n)
                mv[n - 1] = 2
                mv[0] = 1
                self.assertEqual((mv[0], mv[n - 1]), (1, 2 if n > 1 else 1))
            mv.release()
            _memory.close_mmap(buf)

    def test_huge_span_part(self):
        # where the library's rule allows fewer 2 MiB pages than n holds (few free in a
        # fragmented memory), the first span bytes ask for them, the rest is 4 KiB pages:
        # still exactly n writable, zeroed bytes
        from ckpz import _lib, _memory

        n = (9 << 20) + 3
        span = _lib.huge_span(n)
        self.assertEqual(span % (2 << 20), 0)
        self.assertLessEqual(span, n)
        for part in (2 << 20, 4 << 20):
            buf = _memory._huge(n, part)
            self.assertEqual(len(buf), n)
            mv = memoryview(buf)
            self.assertEqual(mv.tobytes().count(0), n)
            mv[n - 1] = 7
            self.assertEqual(mv[n - 1], 7)
            mv.release()
            _memory.close_mmap(buf)


class TestInMemory(unittest.TestCase):
    def test_compress_decompress(self):
        # a safetensors file in memory and back; the same .ckpz as compress_file writes
        import ckpz.safetensors

        g = torch.Generator().manual_seed(7)
        state = {"blocks.%d.%s" % (i, k): torch.randn(16, 16 if k == "w" else 1, generator=g) * 0.02
                 for i in range(300) for k in ("w", "b")}
        plain = bytes(ckpz.decompress(ckpz.safetensors.save(state, level=3)))
        z = ckpz.compress(plain, level=3, threads=1)
        self.assertLess(len(z), len(plain) * 0.95)
        with tempfile.TemporaryDirectory() as d:
            src, dst = os.path.join(d, "m.safetensors"), os.path.join(d, "m.ckpz")
            with open(src, "wb") as f:
                f.write(plain)
            ckpz.compress_file(src, dst, level=3, threads=1)
            with open(dst, "rb") as f:
                self.assertEqual(f.read(), bytes(z))
        back = ckpz.safetensors.load(bytes(z))
        self.assertEqual(sorted(back), sorted(state))
        self.assertTrue(all(torch.equal(back[k], state[k]) for k in state))
        for src in (z, bytes(z), bytearray(bytes(z)), memoryview(bytes(z))):
            self.assertEqual(bytes(ckpz.decompress(src, threads=1)), plain)
        self.assertEqual(bytes(ckpz.compress(bytearray(plain))), bytes(z))
        self.assertEqual(len(ckpz.decompress(ckpz.compress(b""))), 0)
        # lossy through policy=: every value within its bound, a smaller file
        zl = ckpz.compress(plain, policy="* abs 1e-3")
        lossy = ckpz.safetensors.load(bytes(zl))
        self.assertLess(len(zl), len(z))
        self.assertTrue(all(float((lossy[k] - state[k]).abs().max()) <= 1e-3 for k in state))

    def test_refusals(self):
        z = bytearray(bytes(ckpz.compress(b"x" * 100000)))
        for bad, says in ((b"not a ckpz file", "not a ckpz file"), (z[:-1], None), (z[:100], None)):
            with self.assertRaises(ckpz.Error, msg=says) as cm:
                ckpz.decompress(bad)
            if says:
                self.assertIn(says, str(cm.exception))
        z[len(z) // 2] ^= 1
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress(z)
        self.assertIn("checksum", str(cm.exception))
        with self.assertRaises(ValueError):
            ckpz.compress(b"abc", level=99)


class TestTorch(Case):
    def roundtrip(self, obj, **kw):
        p = self.path("obj.ckpz")
        ckpz.save(obj, p, **kw)
        self.assertEqual(self.leftovers("obj.ckpz"), [])
        with open(p, "rb") as f:
            self.assertEqual(f.read(8), _lib.MAGIC)
        return ckpz.load(p)

    def test_training_checkpoint(self):
        model, opt, state = make_training_state()
        self.assertEqual(len(state["optimizer"]["state"]), len(list(model.parameters())))
        back = self.roundtrip(state)
        self.assertSameObject(state, back)
        # tied weights: still one storage
        self.assertEqual(storage_ptr(back["model"]["tok.weight"]), storage_ptr(back["model"]["head.weight"]))
        # resuming from the loaded state continues exactly like the original
        torch.manual_seed(99)
        model2 = TinyGPT()
        opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
        model2.load_state_dict(back["model"])
        opt2.load_state_dict(back["optimizer"])
        l1 = train(model, opt, 2, seed=11)
        l2 = train(model2, opt2, 2, seed=11)
        self.assertEqual(l1, l2)
        for (n1, p1), (n2, p2) in zip(model.state_dict().items(), model2.state_dict().items()):
            self.assertEqual(n1, n2)
            self.assertTrue(torch.equal(bits(p1), bits(p2)), n1)

    def test_dtypes_and_special_values(self):
        torch.manual_seed(5)
        special = torch.tensor([float("nan"), -0.0, 0.0, float("inf"), -float("inf"), 1e-40, -1e-45, 3.5])
        nan_payload = torch.tensor([0x7FC00001, 0xFFC12345 - 2**32, 0x7F800001], dtype=torch.int32).view(torch.float32)
        obj = {
            "f32": torch.cat([torch.randn(1000), special]),
            "f32_nan_payloads": nan_payload,
            "bf16": torch.cat([torch.randn(777), special]).to(torch.bfloat16),
            "f16": torch.cat([torch.randn(513), special]).to(torch.float16),
            "f64": torch.cat([torch.randn(100, dtype=torch.float64), special.double()]),
            "i64": torch.randint(-(2**62), 2**62, (300,), dtype=torch.int64),
            "i32": torch.randint(-(2**31), 2**31 - 1, (7, 9), dtype=torch.int32),
            "i16": torch.randint(-300, 300, (50,), dtype=torch.int16),
            "i8": torch.randint(-128, 127, (33,), dtype=torch.int8),
            "u8": torch.randint(0, 255, (2, 3, 4), dtype=torch.uint8),
            "bool": torch.rand(99) > 0.5,
            "c64": torch.randn(10, dtype=torch.complex64),
            "scalar": torch.tensor(2.5),
            "empty": torch.empty(0, 4),
            "grad": torch.randn(3, requires_grad=True),
            "big_f32": torch.randn(700_000),  # several chunks
            "zeros": torch.zeros(300_000),
        }
        back = self.roundtrip(obj, level=1, threads=2)
        self.assertSameObject(obj, back)
        self.assertTrue(torch.isnan(back["f32"][1000]).item())
        self.assertEqual(math.copysign(1.0, back["bf16"][778].item()), -1.0)

    def test_shared_storages_and_views(self):
        base = torch.arange(100, dtype=torch.float32)
        obj = {
            "base": base,
            "slice": base[10:20],
            "row": base.view(10, 10)[3],
            "transposed": base.view(10, 10).t(),
            "strided": base[::7],
            "other_dtype_same_data": [base[50:60], (base.view(4, 25)[1:3, 5:],)],
            "separate": base.clone(),
        }
        back = self.roundtrip(obj)
        self.assertSameObject(obj, back)
        p = storage_ptr(back["base"])
        for k in ("slice", "row", "transposed", "strided"):
            self.assertEqual(storage_ptr(back[k]), p, k)
        self.assertEqual(storage_ptr(back["other_dtype_same_data"][1][0]), p)
        self.assertNotEqual(storage_ptr(back["separate"]), p)
        back["base"][15] = -1.0  # the views see writes through the base
        self.assertEqual(back["slice"][5].item(), -1.0)
        self.assertEqual(back["transposed"][5, 1].item(), -1.0)

    def test_nested_python_values(self):
        obj = {
            "ints": [0, -1, 2**70, True, False],
            "floats": (0.5, -0.0, float("inf"), float("nan"), 1e308),
            "strings": ["", "naïve ✓", "x" * 1000],
            "none": None,
            "bytes": b"\x00\xff" * 10,
            "nested": {"a": [{"b": (torch.ones(2, 2), None, "c")}], 3: {"deep": [[[torch.tensor([7])]]]}},
            "tuple_of_tensors": (torch.zeros(3, dtype=torch.float16), torch.arange(4)),
            "empty": {"d": {}, "l": [], "t": ()},
        }
        self.assertSameObject(obj, self.roundtrip(obj))

    def test_map_location(self):
        obj = {"w": torch.randn(5, 5), "i": torch.arange(3)}
        p = self.path("m.ckpz")
        ckpz.save(obj, p)
        for loc in ("cpu", torch.device("cpu"), lambda storage, _loc: storage, {"cpu": "cpu"}):
            back = ckpz.load(p, map_location=loc)
            self.assertSameObject(obj, back)
            self.assertEqual(back["w"].device.type, "cpu")

    def test_file_objects(self):
        obj = {"w": torch.randn(64, 64).to(torch.bfloat16), "step": 10}
        buf = io.BytesIO()
        ckpz.save(obj, buf)
        buf.seek(0)
        self.assertSameObject(obj, ckpz.load(buf))
        with open(self.path("f.ckpz"), "wb") as f:
            ckpz.save(obj, f)
        with open(self.path("f.ckpz"), "rb") as f:
            self.assertSameObject(obj, ckpz.load(f))

    def test_load_plain_torch_file(self):
        obj = {"w": torch.randn(10), "n": 3}
        torch.save(obj, self.path("plain.pt"))
        self.assertSameObject(obj, ckpz.load(self.path("plain.pt")))
        self.assertSameObject(obj, ckpz.load(self.path("plain.pt"), map_location="cpu"))

    def test_restored_file_is_what_torch_save_writes(self):
        _, _, state = make_training_state(steps=1)
        p = self.path("s.ckpz")
        ckpz.save(state, p)
        ckpz.decompress_file(p, self.path("s.pt"))
        os.mkdir(self.path("ref"))
        torch.save(state, self.path("ref/s"))  # the archive's folder is named after the file: "s/"
        with open(self.path("s.pt"), "rb") as f, open(self.path("ref/s"), "rb") as r:
            ref = r.read()
            self.assertEqual(f.read(), ref)
        self.assertSameObject(state, torch.load(self.path("s.pt")))
        info = ckpz.info(p)
        self.assertEqual(info.original_size, len(ref))

    def test_list(self):
        _, _, state = make_training_state(steps=1)
        p = self.path("l.ckpz")
        ckpz.save(state, p)
        info = ckpz.info(p)
        entries = ckpz.list(p)
        self.assertEqual(len(entries), info.entries)
        self.assertEqual(info.compressed_size, os.path.getsize(p))
        pos = 0
        for e in entries:  # entries tile the original file in order
            self.assertEqual(e.offset, pos)
            self.assertGreater(e.length, 0)
            pos += e.length
            if e.dtype == "bytes":
                self.assertEqual((e.name, e.shape), ("", ()))
        self.assertEqual(pos, info.original_size)
        if info.format == "torch":  # once libckpz reads torch.save archives
            f32 = [e for e in entries if e.dtype == "f32"]
            self.assertTrue(f32, "no f32 storages listed")
            n_params = sum(t.numel() for t in state["model"].values()) - state["model"]["head.weight"].numel()
            self.assertGreaterEqual(sum(e.length for e in f32), 4 * n_params)


@unittest.skipUnless(cli_path(), "the ckpz CLI is not built (set CKPZ_CLI)")
class TestLossy(Case):
    def test_policy_save_load(self):
        """A lossy policy through save/load: every weight matrix and exp_avg within its
        bound, exp_avg_sq within 10% and positive, the rest (biases, norms, step counts)
        exact; list() reports the errors; a closed-loop delta against the restored
        previous checkpoint stays within the bound."""
        model, opt, state = make_training_state()
        policy = "*.exp_avg_sq pointwise-rel 0.1\n* abs 1e-4\n"
        p = self.path("lossy.ckpz")
        ckpz.save(state, p, policy=policy)
        back = ckpz.load(p)
        lossy = exact = 0
        for name, a in state["model"].items():
            b = back["model"][name]
            if a.dim() >= 2 and a.is_floating_point():
                fin = torch.isfinite(a)
                err = (b - a)[fin].abs().max().item()
                self.assertLessEqual(err, 1e-4, name)
                self.assertTrue(torch.equal(bits(a[~fin]), bits(b[~fin])), name)  # inf, NaN: exact
                lossy += err > 0
            else:
                self.assertTrue(torch.equal(bits(a), bits(b)), name)
                exact += 1
        self.assertGreater(lossy, 0)
        self.assertGreater(exact, 0)
        for i, st in state["optimizer"]["state"].items():
            bst = back["optimizer"]["state"][i]
            self.assertTrue(torch.equal(st["step"], bst["step"]))
            v, bv = st["exp_avg_sq"], bst["exp_avg_sq"]
            if v.dim() >= 2:
                self.assertTrue(bool(((bv - v).abs() <= 0.1 * v.abs()).all()), i)
                self.assertTrue(bool(((v > 0) <= (bv > 0)).all()), i)
        entries = [e for e in ckpz.list(p) if e.lossy]
        self.assertEqual({e.lossy.mode for e in entries}, {"abs", "pointwise-rel"})
        self.assertTrue(all(e.lossy.max_error <= 1e-4 for e in entries if e.lossy.mode == "abs"))
        self.assertTrue(all(e.lossy.mode == "pointwise-rel" for e in entries if e.name.endswith("exp_avg_sq")))
        self.assertTrue(ckpz.info(p).lossy)
        # the next checkpoint, coded against the restored one
        train(model, opt, 1, seed=3)
        nxt = {"model": model.state_dict(), "optimizer": opt.state_dict()}
        q = self.path("next.ckpz")
        ckpz.save(nxt, q, policy="* abs 1e-4\n", base=p)
        back2 = ckpz.load(q)
        for name, a in nxt["model"].items():
            if a.is_floating_point():
                fin = torch.isfinite(a)
                self.assertLessEqual((back2["model"][name] - a)[fin].abs().max().item(), 1e-4, name)
        self.assertIsNotNone(ckpz.base_info(q))

    def test_auto(self):
        """lossy="auto" on ckpz.save and compress_file: roles from the torch.save names
        (weights, Adam's moments, the rest exact), the bound each got, exp_avg_sq > 0
        after load, a chain against the previous file, "auto:K" moving the sizes, and
        bad knobs refused before a file is written."""
        torch.manual_seed(5)
        model = torch.nn.Sequential(torch.nn.Linear(128, 96), torch.nn.LayerNorm(96), torch.nn.Linear(96, 64))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))

        def steps(n):
            for _ in range(n):
                loss = model(torch.randn(32, 128)).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return {"model": model.state_dict(), "optimizer": opt.state_dict()}

        state = steps(3)
        p = self.path("auto.ckpz")
        ckpz.save(state, p, lossy="auto")
        roles = {e.name: (e.role, e.lossy.mode if e.lossy else None) for e in ckpz.list(p) if e.role}
        # no base: within one optimizer step of the lr param_groups state
        self.assertEqual(roles["model.0.weight"], ("weight", "abs"))
        self.assertEqual([e.lossy.bound for e in ckpz.list(p) if e.name == "model.0.weight"], [1e-3])
        self.assertEqual(roles["optimizer.state.0.exp_avg"], ("exp_avg", "pointwise-rel"))
        self.assertEqual(roles["optimizer.state.0.exp_avg_sq"], ("exp_avg_sq", "pointwise-rel"))
        for name in ("model.0.bias", "model.1.weight", "optimizer.state.0.step"):
            self.assertEqual(roles[name], ("exact", None), name)
        back = ckpz.load(p)
        for i, st in state["optimizer"]["state"].items():
            v = back["optimizer"]["state"][i]["exp_avg_sq"]
            self.assertTrue(bool((v > 0).all()) or not bool((st["exp_avg_sq"] > 0).all()), i)
        self.assertTrue(torch.equal(back["model"]["1.weight"], state["model"]["1.weight"]))
        # Adam's beta2 from param_groups: v renewed fast (0.95) is rounded to nearest, a
        # coarser grid than the unbiased rounding a slow one (0.999) gets: smaller
        self.assertIn("optimizer.state.* auto beta2 0.95\n", ckpz._lib.lossy_policy("auto", None, state))
        slow = {"model": state["model"], "optimizer": copy.deepcopy(state["optimizer"])}
        slow["optimizer"]["param_groups"][0]["betas"] = (0.9, 0.999)
        ckpz.save(slow, self.path("slow.ckpz"), lossy="auto")

        def v_bytes(f):
            return sum(e.compressed for e in ckpz.list(f) if e.role == "exp_avg_sq")
        self.assertLess(v_bytes(p), 0.9 * v_bytes(self.path("slow.ckpz")))
        two = copy.deepcopy(slow["optimizer"])
        two["param_groups"] = [dict(two["param_groups"][0], params=[0, 1]),
                               dict(two["param_groups"][0], params=[2, 3], betas=(0.9, 0.95))]
        self.assertEqual(ckpz._auto.beta2_rules({"opt": two}, "2"),
                         "".join("opt.state.%d.* auto 2 beta2 %s\n" % (i, b)
                                 for i, b in ((0, 0.999), (1, 0.999), (2, 0.95), (3, 0.95))))
        q = self.path("auto2.ckpz")
        ckpz.save(steps(5), q, lossy="auto", base=p)
        self.assertEqual({e.name: e.lossy.mode for e in ckpz.list(q) if e.lossy}["model.0.weight"], "change-rel")
        self.assertTrue(bool((ckpz.load(q)["optimizer"]["state"][0]["exp_avg_sq"] > 0).all()))
        src = self.path("state.pt")
        torch.save(state, src)
        sizes = [ckpz.compress_file(src, self.path("k%d.ckpz" % i), lossy=k)
                 for i, k in enumerate(("auto:tight", "auto", "auto:aggressive"))]
        self.assertTrue(sizes[0] > sizes[1] > sizes[2], sizes)
        for bad in ("auto:0", "auto:bogus", "autox", "manual", 1):
            with self.assertRaises(ValueError):
                ckpz.save(state, self.path("bad.ckpz"), lossy=bad)
            with self.assertRaises(ValueError):
                ckpz.compress_file(src, self.path("bad.ckpz"), lossy=bad)
        self.assertFalse(os.path.exists(self.path("bad.ckpz")))

    def test_bad_policy(self):
        _, _, state = make_training_state()
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.save(state, self.path("x.ckpz"), policy="* frobnicate 1")
        self.assertIn("policy line 1", str(cm.exception))
        self.assertEqual(self.leftovers(), [])
        with self.assertRaises(TypeError):
            ckpz.save(state, self.path("x.ckpz"), policy=b"* abs 1")
        with self.assertRaises(ValueError):
            ckpz.compress_file(__file__, self.path("y.ckpz"), max_mae=1e-3)


class TestCLI(Case):
    def run_cli(self, *args):
        r = subprocess.run([cli_path(), "-q", *args], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, "ckpz %s: %s" % (" ".join(args), r.stderr))

    def test_torch_save_file_through_cli(self):
        _, _, state = make_training_state()
        state["extra"] = {"bf16": torch.randn(1000).bfloat16(), "f16": torch.randn(100).half(), "i64": torch.arange(9)}
        pt = self.path("ckpt.pt")
        torch.save(state, pt)
        self.run_cli("-o", self.path("ckpt.pt.ckpz"), pt)
        self.run_cli("-d", "-o", self.path("restored.pt"), self.path("ckpt.pt.ckpz"))
        self.assertTrue(filecmp.cmp(pt, self.path("restored.pt"), shallow=False))
        self.assertSameObject(state, torch.load(self.path("restored.pt")))
        # and the Python side reads the CLI's file
        self.assertSameObject(state, ckpz.load(self.path("ckpt.pt.ckpz")))

    def test_cli_restores_ckpz_save(self):
        obj = {"w": torch.randn(100, 10), "t": (1, "two", None)}
        ckpz.save(obj, self.path("a.pt.ckpz"))
        self.run_cli("-t", self.path("a.pt.ckpz"))
        self.run_cli("-d", self.path("a.pt.ckpz"))
        self.assertSameObject(obj, torch.load(self.path("a.pt")))

    def test_compress_file_matches_cli_restore(self):
        src = self.path("data.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(100_000) + bytes(3_000_000))
        ckpz.compress_file(src, self.path("data.bin.ckpz"))
        self.run_cli("-d", "-o", self.path("cli.bin"), self.path("data.bin.ckpz"))
        self.assertTrue(filecmp.cmp(src, self.path("cli.bin"), shallow=False))


class TestFiles(Case):
    def test_roundtrip(self):
        torch.manual_seed(3)
        pt = self.path("m.pt")
        torch.save({"w": torch.randn(300_000), "h": torch.randn(1000).half()}, pt)
        rnd = self.path("r.bin")
        with open(rnd, "wb") as f:
            f.write(os.urandom(2_500_000))
        empty = self.path("e.bin")
        open(empty, "wb").close()
        for src in (pt, rnd, empty):
            for level, threads in ((1, 1), (3, 0), (9, 2), (ckpz.LEVEL_STORE, 1)):
                n = ckpz.compress_file(src, src + ".ckpz", level=level, threads=threads)
                self.assertEqual(n, os.path.getsize(src + ".ckpz"))
                if level == ckpz.LEVEL_STORE:  # stored: the original's bytes and the frames around them
                    self.assertGreaterEqual(n, os.path.getsize(src))
                m = ckpz.decompress_file(src + ".ckpz", src + ".out", threads=threads)
                self.assertEqual(m, os.path.getsize(src))
                self.assertTrue(filecmp.cmp(src, src + ".out", shallow=False), (src, level, threads))
                os.unlink(src + ".out")
        self.assertEqual(self.leftovers(*(os.path.basename(s) + x for s in (pt, rnd, empty) for x in ("", ".ckpz"))), [])

    def test_overwrites_destination_atomically(self):
        src = self.path("a.bin")
        with open(src, "wb") as f:
            f.write(b"hello " * 1000)
        dst = self.path("a.ckpz")
        with open(dst, "wb") as f:
            f.write(b"old")
        ckpz.compress_file(src, dst)
        ckpz.decompress_file(dst, self.path("a.out"))
        self.assertTrue(filecmp.cmp(src, self.path("a.out"), shallow=False))


class TestArrays(Case):
    def test_roundtrip(self):
        rng = np.random.default_rng(0)
        arrays = {
            "f32": rng.standard_normal((100, 37)).astype(np.float32),
            "f16": rng.standard_normal(999).astype(np.float16),
            "f64": np.array([np.nan, -0.0, np.inf, 5e-324, 1.0]),
            "i8": rng.integers(-128, 127, 500, dtype=np.int8),
            "u64": rng.integers(0, 2**63, 50, dtype=np.uint64),
            "bool": rng.random(77) > 0.3,
            "scalar": np.array(3.25, dtype=np.float32),
            "empty": np.zeros((0, 5), dtype=np.float32),
            "fortran": np.asfortranarray(rng.standard_normal((30, 40)).astype(np.float32)),
            "big_endian": np.arange(100, dtype=">f4"),
            "big": rng.standard_normal(400_000).astype(np.float32),
        }
        p = self.path("a.ckpz")
        ckpz.save_arrays(p, **arrays)
        back = ckpz.load_arrays(p)
        self.assertEqual(sorted(back), sorted(arrays))
        for k, a in arrays.items():
            b = back[k]
            self.assertIsInstance(b, np.ndarray, k)
            self.assertEqual(a.dtype, b.dtype, k)
            self.assertEqual(a.shape, b.shape, k)
            self.assertEqual(a.tobytes(order="A"), b.tobytes(order="A"), k)
        self.assertEqual(self.leftovers("a.ckpz"), [])

    def test_positional_and_plain_npz(self):
        a, b = np.arange(5), np.ones((2, 2), dtype=np.int8)
        ckpz.save_arrays(self.path("p.ckpz"), a, b, level=5)
        back = ckpz.load_arrays(self.path("p.ckpz"))
        self.assertEqual(sorted(back), ["arr_0", "arr_1"])
        np.testing.assert_array_equal(back["arr_1"], b)
        np.savez(self.path("plain.npz"), x=a)
        np.testing.assert_array_equal(ckpz.load_arrays(self.path("plain.npz"))["x"], a)
        # ckpz -d gives a normal .npz
        ckpz.decompress_file(self.path("p.ckpz"), self.path("p.npz"))
        with np.load(self.path("p.npz")) as z:
            np.testing.assert_array_equal(z["arr_0"], a)


class TestErrors(Case):
    def saved(self):
        torch.manual_seed(0)
        p = self.path("c.ckpz")
        ckpz.save({"w": torch.randn(500_000), "b": torch.randn(1000).bfloat16()}, p)
        return p

    def flip(self, p, where):
        with open(p, "r+b") as f:
            f.seek(where)
            b = f.read(1)
            f.seek(where)
            f.write(bytes([b[0] ^ 0x20]))

    def test_corrupt_file(self):
        p = self.saved()
        self.flip(p, os.path.getsize(p) // 2)
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.load(p)
        e = cm.exception
        self.assertIn(e.code, (_lib.ERR_CHECKSUM, _lib.ERR_CORRUPT))
        self.assertRegex(str(e), r"checksum|corrupt")
        self.assertIn("chunk", e.message)
        self.assertIn(p, str(e))
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(p, self.path("out.pt"))
        self.assertIn(cm.exception.code, (_lib.ERR_CHECKSUM, _lib.ERR_CORRUPT))
        self.assertEqual(self.leftovers("c.ckpz"), [])  # neither out.pt nor a temp file

    def test_corrupt_trailer_and_truncation(self):
        p = self.saved()
        data = read_bytes(p)
        with open(p, "wb") as f:
            f.write(data[:-30])
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.load(p)
        self.assertRegex(str(cm.exception), r"truncat|checksum|trailer|corrupt")
        with open(p, "wb") as f:
            f.write(data[: len(data) // 2])
        with self.assertRaises(ckpz.Error):
            ckpz.decompress_file(p, self.path("out.pt"))
        with self.assertRaises(ckpz.Error):
            ckpz.list(p)
        self.assertEqual(self.leftovers("c.ckpz"), [])

    def test_not_ckpz(self):
        with open(self.path("x.bin"), "wb") as f:
            f.write(b"not a checkpoint at all" * 10)
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path("x.bin"), self.path("y"))
        self.assertEqual(cm.exception.code, _lib.ERR_NOT_CKPZ)
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.info(self.path("x.bin"))
        self.assertEqual(self.leftovers("x.bin"), [])

    def test_missing_files(self):
        missing = self.path("nope.ckpz")
        for call in (
            lambda: ckpz.load(missing),
            lambda: ckpz.load_arrays(missing),
            lambda: ckpz.decompress_file(missing, self.path("o")),
            lambda: ckpz.compress_file(missing, self.path("o")),
            lambda: ckpz.list(missing),
        ):
            with self.assertRaises(FileNotFoundError):
                call()
        with self.assertRaises(FileNotFoundError):
            ckpz.save({"a": torch.ones(1)}, self.path("no/such/dir/x.ckpz"))
        self.assertEqual(self.leftovers(), [])

    def test_failures_leave_no_temp_files(self):
        p = self.path("keep.ckpz")
        ckpz.save({"v": 1}, p)
        before = read_bytes(p)
        big = torch.randn(400_000)  # written before the failure: compression has started
        with self.assertRaises((AttributeError, TypeError, __import__("pickle").PicklingError)):
            ckpz.save({"big": big, "bad": lambda: None}, p)  # torch.save cannot pickle a lambda
        self.assertEqual(read_bytes(p), before)
        self.assertEqual(self.leftovers("keep.ckpz"), [])

        class Interrupt:
            def __reduce__(self):
                raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            ckpz.save({"big": big, "x": Interrupt()}, p)
        self.assertEqual(read_bytes(p), before)
        self.assertEqual(self.leftovers("keep.ckpz"), [])

    def test_interrupt_during_streaming(self):
        class Interrupting(io.RawIOBase):
            """A file that raises KeyboardInterrupt after 3 MB, as Ctrl-C would."""

            def __init__(self):
                self.pos = 0

            def readable(self):
                return True

            def readinto(self, b):
                if self.pos > 3_000_000:
                    raise KeyboardInterrupt
                n = len(b)
                b[:n] = bytes(n)
                self.pos += n
                return n

        with self.assertRaises(KeyboardInterrupt):
            ckpz.compress_file(Interrupting(), self.path("k.ckpz"))
        self.assertEqual(self.leftovers(), [])
        # an exception in the output side
        p = self.saved()

        class Full(io.RawIOBase):
            def writable(self):
                return True

            def write(self, b):
                raise OSError(28, "No space left on device")

        with self.assertRaises(OSError) as cm:
            ckpz.decompress_file(p, Full())
        self.assertEqual(cm.exception.errno, 28)
        self.assertEqual(self.leftovers("c.ckpz"), [])

    def test_size_bound(self):
        # An all-zero tensor compresses far beyond 1000x; load must accept it.
        p = self.path("z.ckpz")
        ckpz.save({"z": torch.zeros(5_000_000)}, p)
        self.assertGreater(ckpz.info(p).original_size / os.path.getsize(p), 1000)
        self.assertEqual(ckpz.load(p)["z"].count_nonzero().item(), 0)


if __name__ == "__main__":
    unittest.main()
