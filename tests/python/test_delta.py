"""Delta checkpoints on real training checkpoints: the CLI (--base, --keyframe-every,
--rebase, -l, -t, --extract) and the Python package (base= of compress_file,
decompress_file, save, load; base_info).

A small MLP (about 460K parameters, its embedding frozen) is trained with AdamW on one
thread with fixed seeds; every few steps its state is written three ways: a torch.save
archive (model, optimizer state, gradients, step), a safetensors file of mixed dtypes
(F32 weights, BF16 copies, F32 Adam second moments, I64 counters) and a safetensors file
of the FP32 weights alone. Restored files are compared byte for byte.

Run by ctest (tests/python/CMakeLists.txt) as `/usr/bin/python3 test_delta.py -v` with
CKPZ_LIBRARY, CKPZ_CLI and PYTHONPATH set. By hand from the repository, after `make`:

    PYTHONPATH=python /usr/bin/python3 tests/python/test_delta.py -v

PyTorch and NumPy are required (the run fails without them, as test_ckpz.py does).
"""

import copy
import io
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", ".."))
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

try:
    import numpy  # noqa: F401  (torch's .numpy() needs it)
    import torch
except ImportError as e:  # fail, loudly: these tests are part of `make test`
    raise ImportError(
        "tests/python need PyTorch and NumPy in %s (import failed: %s). On Debian: "
        "apt-get install python3-torch python3-numpy (scripts/install-deps does it)." % (sys.executable, e)
    ) from e

import ckpz  # noqa: E402
from ckpz import _lib  # noqa: E402

torch.set_num_threads(1)

CLI = os.path.abspath(os.environ.get("CKPZ_CLI") or os.path.join(_REPO, "build", "ckpz"))
N_CKPT = 7  # checkpoints 0..6
STEPS_APART = 4


# ---- helpers ------------------------------------------------------------------------------

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    """CRC-32C (Castagnoli), computed here independently of libckpz."""
    c, t = 0xFFFFFFFF, _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value


def raw_bytes(t):
    t = t.detach().contiguous().cpu()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


_ST_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int64: "I64"}


def safetensors(tensors):
    """(file bytes, {name: (start, end)}) of a safetensors file holding the (name, tensor)
    pairs in order: 8-byte little-endian header length, JSON header, data."""
    header, blobs, pos = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors:
        b = raw_bytes(t)
        header[name] = {"dtype": _ST_DTYPE[t.dtype], "shape": list(t.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    start = 8 + len(h)
    spans = {n: (start + v["data_offsets"][0], start + v["data_offsets"][1]) for n, v in header.items() if n != "__metadata__"}
    return struct.pack("<Q", len(h)) + h + b"".join(blobs), spans


def torch_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)  # to a buffer: the archive's folder is "archive/", as ckpz.save writes it
    return buf.getvalue()


# ---- the training run ----------------------------------------------------------------------


class MLP(torch.nn.Module):
    def __init__(self, vocab=256, d=64, ctx=8, hidden=384):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.emb.weight.requires_grad_(False)  # frozen: identical in every checkpoint
        self.fc1 = torch.nn.Linear(ctx * d, hidden)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.out = torch.nn.Linear(hidden, vocab)

    def forward(self, idx):
        x = self.emb(idx).flatten(1)
        x = torch.nn.functional.gelu(self.fc1(x))
        x = torch.nn.functional.gelu(self.fc2(x))
        return self.out(x)


class Run:
    """N_CKPT checkpoints of one training run, in memory: .pt bytes, mixed safetensors,
    FP32-weights safetensors, the states themselves and the tensors' byte spans."""

    def __init__(self):
        torch.manual_seed(1234)
        model = MLP()
        self.params = sum(p.numel() for p in model.parameters())
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.01)
        g = torch.Generator().manual_seed(7)
        self.pt, self.st, self.w, self.states, self.st_spans, self.w_spans = [], [], [], [], [], []
        step = 0
        for _ in range(N_CKPT):
            for _ in range(STEPS_APART):
                idx = torch.randint(0, 256, (32, 8), generator=g)
                y = (idx[:, 0] * 7 + idx[:, -1]) % 256  # something learnable
                loss = torch.nn.functional.cross_entropy(model(idx), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
            sd = {k: v.clone() for k, v in model.state_dict().items()}
            state = {
                "model": sd,
                "optimizer": copy.deepcopy(opt.state_dict()),
                "grads": {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
                "step": step,
                "loss": loss.item(),
            }
            self.states.append(state)
            self.pt.append(torch_bytes(state))
            adam = opt.state_dict()["state"]
            names = [n for n, p in model.named_parameters() if p.requires_grad]
            mixed = [("model." + n, v) for n, v in sd.items()]
            mixed += [("bf16." + n, v.to(torch.bfloat16)) for n, v in sd.items()]
            mixed += [("adam.exp_avg_sq." + n, adam[i]["exp_avg_sq"]) for i, n in enumerate(names)]
            mixed += [("step", torch.tensor([step], dtype=torch.int64)),
                      ("tokens_seen", torch.tensor([step * 256, step * 32, 8, 0], dtype=torch.int64))]
            data, spans = safetensors(mixed)
            self.st.append(data)
            self.st_spans.append(spans)
            data, spans = safetensors([(n, v) for n, v in sd.items()])
            self.w.append(data)
            self.w_spans.append(spans)

    def data(self, kind, k):
        return {"pt": self.pt, "st": self.st, "w": self.w}[kind][k]


RUN = None
KINDS = {"pt": "ck%d.pt", "st": "ck%d.safetensors", "w": "w%d.safetensors"}


def setUpModule():
    global RUN
    if not os.path.isfile(CLI) or not os.access(CLI, os.X_OK):
        raise RuntimeError("the ckpz CLI is not built at %s (build it, or set CKPZ_CLI)" % CLI)
    RUN = Run()
    assert 200_000 <= RUN.params <= 1_000_000, RUN.params
    assert all(a != b for a, b in zip(RUN.w, RUN.w[1:])), "the weights did not change between checkpoints"


_DEPENDS = re.compile(
    r"^depends on: (.*) \((\d+) bytes, crc32c ([0-9a-f]{8})\); (\d+) of (\d+) entries coded against it; "
    r"restoring takes (\d+) delta files?$"
)


class Case(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ckpz-delta-")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(data)
        return self.path(name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def put(self, kind, k):
        """Writes checkpoint k of the kind into the test directory; returns its path."""
        return self.write(KINDS[kind] % k, RUN.data(kind, k))

    def cli(self, *args, rc=0, stdin=None, quiet=True):
        """Runs build/ckpz [-q] ARGS in the test directory; checks its exit status (rc
        None: any failure)."""
        r = subprocess.run([CLI, *(("-q",) if quiet else ()), *args], cwd=self.dir, capture_output=True,
                           timeout=120, input=stdin)
        err = r.stderr.decode("utf-8", "replace")
        if rc is None:
            self.assertNotEqual(r.returncode, 0, "ckpz %s succeeded, expected a failure" % " ".join(args))
        else:
            self.assertEqual(r.returncode, rc, "ckpz %s: exit %d: %s" % (" ".join(args), r.returncode, err))
        r.err = err
        return r

    def listing(self, name):
        """(rows, depends): rows maps a tensor name to (offset, bytes, comp. bytes) from
        `ckpz -l -v`; depends is the match of the "depends on:" line, or None."""
        out = self.cli("-l", "-v", name, quiet=False).stdout.decode()
        rows, depends = {}, None
        for line in out.splitlines():
            if line.startswith("depends on:"):
                self.assertIsNone(depends, "two depends lines:\n" + out)
                depends = _DEPENDS.match(line)
                self.assertIsNotNone(depends, "unexpected depends line: %r" % line)
            t = line.split()
            if len(t) >= 10 and t[0].isdigit() and t[1] != "(bytes)":
                rows[t[1]] = (int(t[-4]), int(t[-3]), int(t[-2]))
        self.assertTrue(rows, "no tensors listed:\n" + out)
        return rows, depends

    def assertFileBytes(self, name, data):
        got = self.read(name)
        self.assertEqual(len(got), len(data), "%s: %d bytes, expected %d" % (name, len(got), len(data)))
        self.assertTrue(got == data, "%s differs from the original" % name)

    def assertNoTemps(self):
        left = [n for n in os.listdir(self.dir) if ".tmp" in n]
        self.assertEqual(left, [], "temporary files left behind")

    def chain(self, kind, n=N_CKPT, extra=()):
        """Compresses checkpoints 0..n-1 of the kind, each against the previous .ckpz
        (0 stand-alone), then deletes the originals. Returns the .ckpz names."""
        names = []
        for k in range(n):
            src = os.path.basename(self.put(kind, k))
            if k == 0:
                self.cli(*extra, src)
            else:
                self.cli("--base", names[-1], *extra, src)
            names.append(src + ".ckpz")
        for k in range(n):
            os.unlink(self.path(KINDS[kind] % k))
        return names


# ---- CLI ------------------------------------------------------------------------------------


class TestCLIRoundTrip(Case):
    def test_each_against_previous_original(self):
        """ckpz --base PREV CUR for every consecutive pair: restored byte-identical (base
        found beside the file, and named with --base); -l names the base and its CRC-32C."""
        for kind in KINDS:
            for k in range(1, N_CKPT):
                prev = os.path.basename(self.put(kind, k - 1))
                cur = os.path.basename(self.put(kind, k))
                self.cli("--base", prev, cur)
                rows, dep = self.listing(cur + ".ckpz")
                self.assertIsNotNone(dep, "%s: no depends line" % cur)
                self.assertEqual(dep.group(1), prev)
                self.assertEqual(int(dep.group(2)), len(RUN.data(kind, k - 1)))
                self.assertEqual(dep.group(6), "1")
                if k == 1:  # the CRC-32C once per kind (pure Python is slow on 7 MB)
                    self.assertEqual(int(dep.group(3), 16), crc32c(RUN.data(kind, k - 1)))
                # every tensor of more than 16 KiB (a smaller entry may be packed instead:
                # doc/format.md "Small entries in a delta file")
                large = sum(1 for r in rows.values() if r[1] > 16384)
                self.assertGreaterEqual(int(dep.group(4)), large, dep.group(0))
                self.assertLessEqual(int(dep.group(4)), int(dep.group(5)), dep.group(0))
                self.cli("-t", cur + ".ckpz")
                self.cli("-d", "-o", "auto.out", cur + ".ckpz")
                self.assertFileBytes("auto.out", RUN.data(kind, k))
                self.cli("-d", "-f", "--base", prev, "-o", "named.out", cur + ".ckpz")
                self.assertFileBytes("named.out", RUN.data(kind, k))
                # stdin/stdout: only --base can name the base
                r = self.cli("-d", "--base", prev, stdin=self.read(cur + ".ckpz"))
                self.assertTrue(r.stdout == RUN.data(kind, k), "%s through a pipe differs" % cur)
                for n in (prev, cur, cur + ".ckpz", "auto.out", "named.out"):
                    os.unlink(self.path(n))
        self.assertEqual(os.listdir(self.dir), [])

    def test_delta_smaller_than_standalone(self):
        """FP32 weights a few AdamW steps apart: the delta file is < 0.95x the stand-alone
        one; inside the torch.save archive too, for the model's FP32 weights."""
        for k in range(1, N_CKPT):
            for kind in ("w", "pt"):
                prev = os.path.basename(self.put(kind, k - 1))
                cur = os.path.basename(self.put(kind, k))
                self.cli("-f", "-o", "alone.ckpz", cur)
                self.cli("-f", "--base", prev, "-o", "delta.ckpz", cur)
                alone, delta = os.path.getsize(self.path("alone.ckpz")), os.path.getsize(self.path("delta.ckpz"))
                if kind == "w":
                    self.assertLess(delta, 0.95 * alone, "w%d: delta %d bytes vs stand-alone %d" % (k, delta, alone))
                else:
                    self.assertLess(delta, alone, "ck%d.pt: delta %d bytes vs stand-alone %d" % (k, delta, alone))
                    ra, _ = self.listing("alone.ckpz")
                    rd, _ = self.listing("delta.ckpz")
                    weights = [n for n in ra if n.startswith("model.") and n != "model.emb.weight"]
                    self.assertEqual(len(weights), 6, sorted(ra))
                    a = sum(ra[n][2] for n in weights)
                    d = sum(rd[n][2] for n in weights)
                    self.assertLess(d, 0.95 * a, "ck%d.pt model weights: delta %d bytes vs stand-alone %d" % (k, d, a))
                self.cli("-d", "-f", "-o", "back", "--base", prev, "delta.ckpz")
                self.assertFileBytes("back", RUN.data(kind, k))

    def test_chain_of_ckpz_bases(self):
        """Each checkpoint against the previous .ckpz (7 files, 6 deltas): with the
        originals gone, the last restores through the whole chain, found by recorded
        names beside it, and with --base naming the previous .ckpz."""
        for kind in ("st", "pt"):
            names = self.chain(kind)
            for k in range(1, N_CKPT):
                _, dep = self.listing(names[k])
                self.assertEqual(dep.group(1), names[k - 1])
                self.assertEqual(int(dep.group(6)), k, dep.group(0))
            last = names[-1]
            self.cli("-t", last)
            self.cli("-d", "-o", "last.auto", last)
            self.assertFileBytes("last.auto", RUN.data(kind, N_CKPT - 1))
            self.cli("-d", "--base", names[-2], "-o", "last.named", last)
            self.assertFileBytes("last.named", RUN.data(kind, N_CKPT - 1))
            self.cli("-t", "--base", names[-2], last)
            for k, n in enumerate(names):
                self.cli("-d", "-f", "-o", "each.out", n)
                self.assertFileBytes("each.out", RUN.data(kind, k))
            # restoring in place: FILE.ckpz -> FILE
            self.cli("-d", last)
            self.assertFileBytes(KINDS[kind] % (N_CKPT - 1), RUN.data(kind, N_CKPT - 1))
            # the Python package follows the same chain
            ckpz.decompress_file(self.path(last), self.path("py.auto"))
            self.assertFileBytes("py.auto", RUN.data(kind, N_CKPT - 1))
            ckpz.decompress_file(self.path(last), self.path("py.named"), base=self.path(names[-2]))
            self.assertFileBytes("py.named", RUN.data(kind, N_CKPT - 1))
            self.assertNoTemps()
            shutil.rmtree(self.dir)
            os.mkdir(self.dir)

    def test_keyframe_every(self):
        """--keyframe-every 3 along a chain of .ckpz bases: stand-alone files at 0, 3 and 6
        (when the chain behind would reach 3 files), deltas of depth 1, 2 between."""
        names = self.chain("st", extra=("--keyframe-every", "3"))
        depths = []
        for n in names:
            _, dep = self.listing(n)
            depths.append(0 if dep is None else int(dep.group(6)))
            self.assertEqual(ckpz.base_info(self.path(n)) is None, dep is None, n)
        self.assertEqual(depths, [0, 1, 2, 0, 1, 2, 0])
        for k, n in enumerate(names):
            self.cli("-d", "-o", "out%d" % k, n)
            self.assertFileBytes("out%d" % k, RUN.data("st", k))
        # against an original, the chain behind is empty: still a delta; with 1, never
        self.put("w", 0)
        self.put("w", 1)
        self.cli("--keyframe-every", "3", "--base", "w0.safetensors", "-o", "k3.ckpz", "w1.safetensors")
        self.assertIsNotNone(self.listing("k3.ckpz")[1])
        self.cli("--keyframe-every", "1", "--base", "w0.safetensors", "-o", "k1.ckpz", "w1.safetensors")
        self.assertIsNone(self.listing("k1.ckpz")[1])
        os.unlink(self.path("w0.safetensors"))
        self.cli("-d", "-o", "k1.out", "k1.ckpz")
        self.assertFileBytes("k1.out", RUN.data("w", 1))

    def test_unchanged_tensor_costs_nothing(self):
        """The frozen embedding (same bytes in every checkpoint) costs < 100 bytes of chunk
        data in a delta file, in safetensors (F32 and its BF16 copy) and torch.save files."""
        for kind, names in (("st", ("model.emb.weight", "bf16.emb.weight")), ("pt", ("model.emb.weight",)),
                            ("w", ("emb.weight",))):
            prev = os.path.basename(self.put(kind, 2))
            cur = os.path.basename(self.put(kind, 3))
            self.cli("-o", "alone.ckpz", cur)
            self.cli("--base", prev, "-o", "delta.ckpz", cur)
            ra, _ = self.listing("alone.ckpz")
            rd, _ = self.listing("delta.ckpz")
            for n in names:
                self.assertGreater(ra[n][2], 10_000, "%s %s: stand-alone it should cost real bytes" % (kind, n))
                self.assertLess(rd[n][2], 100, "%s %s: unchanged, yet %d bytes in the delta" % (kind, n, rd[n][2]))
            self.cli("-d", "-o", "back", "delta.ckpz")
            self.assertFileBytes("back", RUN.data(kind, 3))
            for n in (prev, cur, "alone.ckpz", "delta.ckpz", "back"):
                os.unlink(self.path(n))

    def test_identical_copy_is_tiny(self):
        """A checkpoint coded against an identical copy of itself: every tensor < 100
        bytes, the whole file < 0.3% of the original; restores byte-identical."""
        for kind in KINDS:
            cur = os.path.basename(self.put(kind, 5))
            shutil.copyfile(self.path(cur), self.path("copy"))
            self.cli("--base", "copy", cur)
            size, orig = os.path.getsize(self.path(cur + ".ckpz")), len(RUN.data(kind, 5))
            self.assertLess(size, 0.003 * orig, "%s: %d bytes against an identical copy of %d" % (kind, size, orig))
            rows, dep = self.listing(cur + ".ckpz")
            for n, (_, _, comp) in rows.items():
                self.assertLess(comp, 100, "%s %s: %d bytes, unchanged" % (kind, n, comp))
            self.assertEqual(int(dep.group(3), 16), ckpz.info(self.path(cur + ".ckpz")).content_checksum)
            os.unlink(self.path(cur))
            self.cli("-d", cur + ".ckpz")
            self.assertFileBytes(cur, RUN.data(kind, 5))
            for n in (cur, "copy", cur + ".ckpz"):
                os.unlink(self.path(n))

    def test_layout_changes(self):
        """Tensors that appear, disappear, move, change shape or dtype between base and
        new file (safetensors written here): round trips byte-identical both ways, and an
        unchanged tensor that moved still costs < 100 bytes."""
        s0, s1 = RUN.states[1]["model"], RUN.states[4]["model"]
        steps = torch.arange(16, dtype=torch.int64) * 1000
        old, _ = safetensors([
            ("keep", s0["fc2.weight"]),
            ("changed", s0["fc1.weight"]),
            ("gone", s0["fc1.bias"]),
            ("reshaped", s0["emb.weight"]),
            ("retyped", steps),
            ("retyped_size", s0["out.bias"]),
            ("moved_bf16", s0["out.weight"].to(torch.bfloat16)),
            ("step", torch.tensor([4], dtype=torch.int64)),
        ])
        new, spans = safetensors([
            ("appeared", s1["fc2.bias"].to(torch.bfloat16)),
            ("moved_bf16", s0["out.weight"].to(torch.bfloat16)),
            ("changed", s1["fc1.weight"]),
            ("keep", s0["fc2.weight"]),
            ("reshaped", s0["emb.weight"].reshape(64, 256)),
            ("retyped", steps.view(torch.float32)),  # same bytes, another dtype and shape
            ("retyped_size", s1["out.bias"].to(torch.bfloat16)),
            ("step", torch.tensor([16], dtype=torch.int64)),
            ("appeared_i64", torch.arange(7, dtype=torch.int64)),
        ])
        self.write("old.safetensors", old)
        self.write("new.safetensors", new)
        for a, b, data in (("old", "new", new), ("new", "old", old)):
            self.cli("--base", a + ".safetensors", b + ".safetensors")
            _, dep = self.listing(b + ".safetensors.ckpz")
            self.assertIsNotNone(dep)
            self.assertGreaterEqual(int(dep.group(4)), 3, dep.group(0))  # keep, changed, moved_bf16 at least
            self.cli("-d", "-o", b + ".cli", b + ".safetensors.ckpz")
            self.assertFileBytes(b + ".cli", data)
            ckpz.compress_file(self.path(b + ".safetensors"), self.path(b + ".py.ckpz"), base=self.path(a + ".safetensors"))
            ckpz.decompress_file(self.path(b + ".py.ckpz"), self.path(b + ".py"), base=self.path(a + ".safetensors"))
            self.assertFileBytes(b + ".py", data)
        rows, _ = self.listing("new.safetensors.ckpz")
        for n in ("keep", "moved_bf16"):
            self.assertLess(rows[n][2], 100, "%s: unchanged, yet %d bytes" % (n, rows[n][2]))
        self.assertEqual(rows["keep"][:2], (spans["keep"][0], spans["keep"][1] - spans["keep"][0]))
        # nothing in common at all: a torch.save archive as the base of a safetensors file
        self.write("other.pt", RUN.pt[0])
        self.cli("--base", "other.pt", "-o", "unrelated.ckpz", "new.safetensors")
        self.cli("-d", "-o", "unrelated.out", "unrelated.ckpz")
        self.assertFileBytes("unrelated.out", new)

    def test_rebase(self):
        """--rebase makes a delta file stand-alone (to -o OUT, the input untouched; then in
        place): it restores with its base moved away, and a later delta that named it as
        its base still restores, its content being unchanged."""
        self.put("w", 0)
        self.put("w", 1)
        self.put("w", 2)
        self.cli("--base", "w0.safetensors", "w1.safetensors")
        self.cli("--base", "w1.safetensors.ckpz", "w2.safetensors")
        os.unlink(self.path("w1.safetensors"))
        os.unlink(self.path("w2.safetensors"))
        before = self.read("w1.safetensors.ckpz")
        self.assertIsNotNone(self.listing("w1.safetensors.ckpz")[1])
        self.cli("--rebase", "-o", "w1.rebased.ckpz", "w1.safetensors.ckpz")
        self.assertEqual(self.read("w1.safetensors.ckpz"), before, "--rebase -o changed its input")
        self.assertIsNone(self.listing("w1.rebased.ckpz")[1])
        self.cli("--rebase", "w1.safetensors.ckpz")
        self.assertIsNone(self.listing("w1.safetensors.ckpz")[1])
        self.assertIsNone(ckpz.base_info(self.path("w1.safetensors.ckpz")))
        self.assertEqual(ckpz.info(self.path("w1.safetensors.ckpz")).content_checksum, crc32c(RUN.w[1]))
        os.rename(self.path("w0.safetensors"), self.path("moved-away"))
        os.unlink(self.path("moved-away"))
        self.cli("-d", "-o", "w1.out", "w1.safetensors.ckpz")
        self.assertFileBytes("w1.out", RUN.w[1])
        self.cli("-d", "-o", "w1.rebased.out", "w1.rebased.ckpz")
        self.assertFileBytes("w1.rebased.out", RUN.w[1])
        self.cli("-t", "w2.safetensors.ckpz")
        self.cli("-d", "-o", "w2.out", "w2.safetensors.ckpz")
        self.assertFileBytes("w2.out", RUN.w[2])
        # the last one too, its base named explicitly, to another file
        self.cli("--rebase", "--base", "w1.rebased.ckpz", "-o", "w2.alone.ckpz", "w2.safetensors.ckpz")
        self.assertIsNone(self.listing("w2.alone.ckpz")[1])
        os.unlink(self.path("w1.safetensors.ckpz"))
        os.unlink(self.path("w1.rebased.ckpz"))
        self.cli("-d", "-o", "w2.alone.out", "w2.alone.ckpz")
        self.assertFileBytes("w2.alone.out", RUN.w[2])
        self.cli("-d", "-o", "w2.gone", "w2.safetensors.ckpz", rc=1)  # its base is gone now
        self.assertFalse(os.path.exists(self.path("w2.gone")))
        self.assertNoTemps()

    def test_extract_from_delta(self):
        """--extract NAME from a delta file (through a chain of .ckpz bases) gives the
        tensor's bytes: changed F32, BF16, I64 and the unchanged (copied) tensor."""
        names = self.chain("st", n=4)
        self.assertEqual(int(self.listing(names[3])[1].group(6)), 3)  # 3 delta files to restore
        spans, data = RUN.st_spans[3], RUN.st[3]
        for t in ("model.fc1.weight", "bf16.out.weight", "adam.exp_avg_sq.fc2.weight", "step", "tokens_seen",
                  "model.emb.weight"):
            a, b = spans[t]
            self.cli("--extract", t, "-o", "t.bin", names[3])
            self.assertFileBytes("t.bin", data[a:b])
            self.cli("--extract", t, "--base", names[2], "-f", "-o", "t2.bin", names[3])
            self.assertFileBytes("t2.bin", data[a:b])
            r = self.cli("--extract", t, names[3])  # to standard output
            self.assertTrue(r.stdout == data[a:b], t)
            os.unlink(self.path("t.bin"))
            os.unlink(self.path("t2.bin"))
        # a torch.save archive: a storage's bytes
        self.put("pt", 0)
        self.put("pt", 1)
        self.cli("--base", "ck0.pt", "ck1.pt")
        self.assertIsNotNone(self.listing("ck1.pt.ckpz")[1])
        for key in ("fc2.weight", "emb.weight", "out.bias"):
            self.cli("--extract", "model." + key, "-f", "-o", "t.bin", "ck1.pt.ckpz")
            self.assertFileBytes("t.bin", raw_bytes(RUN.states[1]["model"][key]))


class TestCLIErrors(Case):
    def setUp(self):
        super().setUp()
        for k in range(3):
            self.put("w", k)
        self.cli("--base", "w1.safetensors", "w2.safetensors")
        os.unlink(self.path("w2.safetensors"))
        self.expected = "%08x" % crc32c(RUN.w[1])

    def assertRefused(self, r, *texts):
        for t in texts:
            self.assertIn(t, r.err, "message lacks %r" % t)

    def test_wrong_base(self):
        """Another checkpoint as the base: refused (exit 1), the message names the file
        and the CRC-32C it needs; no output left behind."""
        r = self.cli("-d", "--base", "w0.safetensors", "-o", "out", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, "w2.safetensors.ckpz", self.expected, "wrong base")
        r = self.cli("-d", "--base", "w0.safetensors", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, "w2.safetensors.ckpz", self.expected)
        self.assertFalse(os.path.exists(self.path("w2.safetensors")))
        r = self.cli("-t", "--base", "w0.safetensors", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, self.expected)
        r = self.cli("--extract", "fc1.weight", "--base", "w0.safetensors", "-o", "t.bin", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, self.expected)
        r = self.cli("--rebase", "--base", "w0.safetensors", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, self.expected)
        r = self.cli("-d", "--base", "w0.safetensors", stdin=self.read("w2.safetensors.ckpz"), rc=1)
        self.assertRefused(r, self.expected)
        # the recorded name, found beside it, holding other content
        shutil.copyfile(self.path("w0.safetensors"), self.path("w1.safetensors"))
        r = self.cli("-d", "-o", "out", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, "w2.safetensors.ckpz", self.expected)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["w0.safetensors", "w1.safetensors", "w2.safetensors.ckpz"])
        # the Python package: ckpz.Error, code 15, the library's message
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path("w2.safetensors.ckpz"), self.path("out"), base=self.path("w0.safetensors"))
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        self.assertIn(self.expected, str(cm.exception))
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path("w2.safetensors.ckpz"), self.path("out"), base=RUN.w[2])
        self.assertIn(self.expected, str(cm.exception))
        with self.assertRaises(ckpz.Error) as cm:  # found beside it: the wrong content too
            ckpz.decompress_file(self.path("w2.safetensors.ckpz"), self.path("out"))
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["w0.safetensors", "w1.safetensors", "w2.safetensors.ckpz"])
        # the right one still works
        self.write("w1.safetensors", RUN.w[1])
        self.cli("-d", "-o", "out", "w2.safetensors.ckpz")
        self.assertFileBytes("out", RUN.w[2])

    def test_missing_base(self):
        """The base deleted: refused (exit 1) with a message naming the base's recorded
        name and CRC-32C; no output left behind. Same for a missing link of a chain."""
        os.unlink(self.path("w1.safetensors"))
        r = self.cli("-d", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, "w2.safetensors.ckpz", self.expected, "w1.safetensors", "--base")
        r = self.cli("-t", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, self.expected)
        r = self.cli("--extract", "fc1.weight", "-o", "t.bin", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, self.expected)
        r = self.cli("-d", stdin=self.read("w2.safetensors.ckpz"), rc=1)  # a pipe, no --base
        self.assertRefused(r, self.expected)
        r = self.cli("-d", "--base", "no-such-file", "w2.safetensors.ckpz", rc=1)
        self.assertRefused(r, "no-such-file")
        self.assertEqual(sorted(os.listdir(self.dir)), ["w0.safetensors", "w2.safetensors.ckpz"])
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path("w2.safetensors.ckpz"), self.path("out"))
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        self.assertIn(self.expected, str(cm.exception))
        self.assertIn("w1.safetensors", str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            ckpz.decompress_file(self.path("w2.safetensors.ckpz"), self.path("out"), base=self.path("no-such-file"))
        self.assertEqual(sorted(os.listdir(self.dir)), ["w0.safetensors", "w2.safetensors.ckpz"])
        # a chain with its first link gone
        names = self.chain("st", n=3)
        os.unlink(self.path(names[0]))
        r = self.cli("-d", names[2], rc=1)
        self.assertRefused(r, names[0], "%08x" % crc32c(RUN.st[0]))
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path(names[2]), self.path("out"))
        self.assertIn("%08x" % crc32c(RUN.st[0]), str(cm.exception))
        self.assertNoTemps()
        self.assertFalse(os.path.exists(self.path("out")))


# ---- the Python package ---------------------------------------------------------------------


class TestPython(Case):
    def test_compress_file_with_base(self):
        """compress_file(base=previous original) for every pair: the file records the base's
        name, size and CRC-32C; decompress_file restores it with the base found beside it,
        named by path, or given as bytes; the CLI restores it too, and vice versa."""
        for k in range(1, N_CKPT):
            prev = self.put("st", k - 1)
            cur = self.put("st", k)
            dst = self.path("py%d.ckpz" % k)
            n = ckpz.compress_file(cur, dst, base=prev)
            self.assertEqual(n, os.path.getsize(dst))
            bi = ckpz.base_info(dst)
            self.assertEqual((bi.name, bi.size, bi.depth), (os.path.basename(prev), len(RUN.st[k - 1]), 1))
            if k == 1:
                self.assertEqual(bi.checksum, crc32c(RUN.st[0]))
            self.assertLess(n, 0.95 * ckpz.compress_file(cur, self.path("alone.ckpz")))
            for how, base in (("auto", None), ("path", prev), ("pathlib", pathlib.Path(prev)),
                              ("bytes", RUN.st[k - 1]), ("bytearray", bytearray(RUN.st[k - 1])),
                              ("memoryview", memoryview(RUN.st[k - 1]))):
                out = self.path("out." + how)
                self.assertEqual(ckpz.decompress_file(dst, out, base=base), len(RUN.st[k]))
                self.assertFileBytes("out." + how, RUN.st[k])
                os.unlink(out)
            self.cli("-d", "-o", "cli.out", dst)
            self.assertFileBytes("cli.out", RUN.st[k])
            self.cli("--base", os.path.basename(prev), "-o", "cli.ckpz", os.path.basename(cur))
            ckpz.decompress_file(self.path("cli.ckpz"), self.path("py.out"))
            self.assertFileBytes("py.out", RUN.st[k])
            for name in ("cli.out", "cli.ckpz", "py.out"):
                os.unlink(self.path(name))
        # a bytes-like base records no name: the base must be given to restore
        self.put("w", 0)
        self.put("w", 1)
        ckpz.compress_file(self.path("w1.safetensors"), self.path("anon.ckpz"), base=RUN.w[0])
        self.assertEqual(ckpz.base_info(self.path("anon.ckpz")).name, "")
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path("anon.ckpz"), self.path("anon.out"))
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        ckpz.decompress_file(self.path("anon.ckpz"), self.path("anon.out"), base=self.path("w0.safetensors"))
        self.assertFileBytes("anon.out", RUN.w[1])
        with self.assertRaises(TypeError):
            ckpz.compress_file(self.path("w1.safetensors"), self.path("bad.ckpz"), base=12)
        self.assertFalse(os.path.exists(self.path("bad.ckpz")))
        self.assertNoTemps()

    def test_chain_of_ckpz_bases(self):
        """compress_file(base=previous .ckpz): depth grows along the chain; the last file
        restores through all of them, in Python and with the CLI."""
        names = []
        for k in range(N_CKPT):
            cur = self.put("w", k)
            names.append(cur + ".ckpz")
            ckpz.compress_file(cur, names[-1], base=names[-2] if k else None)
            bi = ckpz.base_info(names[-1])
            if k == 0:
                self.assertIsNone(bi)
            else:
                self.assertEqual((bi.name, bi.depth), (os.path.basename(names[-2]), k))
            os.unlink(cur)
        ckpz.decompress_file(names[-1], self.path("last.out"))
        self.assertFileBytes("last.out", RUN.w[-1])
        ckpz.decompress_file(names[-1], self.path("last.named"), base=names[-2])
        self.assertFileBytes("last.named", RUN.w[-1])
        self.cli("-d", "-o", "last.cli", os.path.basename(names[-1]))
        self.assertFileBytes("last.cli", RUN.w[-1])

    def test_save_load_with_base(self):
        """ckpz.save(state, base=previous .ckpz) along the run: ckpz.load gives the states
        back exactly (bases found beside the files, or named); `ckpz -d` restores what
        torch.save writes; a wrong or missing base raises ckpz.Error."""
        names = []
        for k, state in enumerate(RUN.states):
            names.append(self.path("s%d.pt.ckpz" % k))
            ckpz.save(state, names[-1], base=names[-2] if k else None)
        self.assertEqual(ckpz.base_info(names[-1]).depth, N_CKPT - 1)
        for k in (1, N_CKPT - 1):
            back = ckpz.load(names[k])
            self.assertEqual(torch_bytes(back), RUN.pt[k])
            back = ckpz.load(names[k], base=names[k - 1])
            self.assertEqual(torch_bytes(back), RUN.pt[k])
            self.cli("-d", "-o", "s%d.pt" % k, os.path.basename(names[k]))
            # what torch.save(state, "s<k>.pt") writes: its archive folder is named after the file
            os.makedirs(self.path("ref"), exist_ok=True)
            torch.save(RUN.states[k], self.path("ref/s%d.pt" % k))
            with open(self.path("ref/s%d.pt" % k), "rb") as f:
                self.assertFileBytes("s%d.pt" % k, f.read())
        # the previous checkpoint as a plain torch.save file
        self.write("plain.pt", RUN.pt[2])
        ckpz.save(RUN.states[3], self.path("from_plain.ckpz"), base=self.path("plain.pt"))
        self.assertEqual(ckpz.base_info(self.path("from_plain.ckpz")).name, "plain.pt")
        self.assertEqual(torch_bytes(ckpz.load(self.path("from_plain.ckpz"))), RUN.pt[3])
        self.assertEqual(torch_bytes(ckpz.load(self.path("from_plain.ckpz"), base=RUN.pt[2])), RUN.pt[3])
        self.assertLess(os.path.getsize(self.path("from_plain.ckpz")), 0.99 * len(ckpz_bytes(RUN.pt[3])))
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.load(self.path("from_plain.ckpz"), base=RUN.pt[1])
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        self.assertIn("%08x" % crc32c(RUN.pt[2]), str(cm.exception))
        os.unlink(self.path("plain.pt"))
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.load(self.path("from_plain.ckpz"))
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        self.assertIn("plain.pt", str(cm.exception))
        self.assertNoTemps()


    def test_own_base_and_cycles(self):
        """A delta file is never written over its own base (ValueError, the file left as
        it was); a cycle of delta files naming each other is refused with ckpz.Error."""
        for k in range(3):
            self.put("w", k)
        w = [self.path("w%d.safetensors" % k) for k in range(3)]
        ckpz.compress_file(w[0], w[0] + ".ckpz")
        before = self.read("w0.safetensors.ckpz")
        with self.assertRaises(ValueError):
            ckpz.compress_file(w[1], w[0] + ".ckpz", base=w[0] + ".ckpz")
        with self.assertRaises(ValueError):
            ckpz.save({"x": torch.zeros(3)}, w[0] + ".ckpz", base=pathlib.Path(w[0] + ".ckpz"))
        self.assertEqual(self.read("w0.safetensors.ckpz"), before)
        # y depends on w0.ckpz, x on y; then x replaces w0.ckpz: y -> w0.ckpz (= x) -> y
        ckpz.compress_file(w[1], self.path("y.ckpz"), base=w[0] + ".ckpz")
        ckpz.compress_file(w[2], self.path("x.ckpz"), base=self.path("y.ckpz"))
        os.replace(self.path("x.ckpz"), w[0] + ".ckpz")
        for p in w:
            os.unlink(p)
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path("y.ckpz"), self.path("out"))
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.compress_file(self.path("y.ckpz"), self.path("z.ckpz"), base=self.path("y.ckpz"))
        self.assertEqual(cm.exception.code, _lib.ERR_BASE)
        self.assertEqual(sorted(os.listdir(self.dir)), ["w0.safetensors.ckpz", "y.ckpz"])


def ckpz_bytes(data):
    """The stand-alone .ckpz of data (for size comparisons)."""
    out = io.BytesIO()
    ckpz.compress_file(io.BytesIO(data), out)
    return out.getvalue()


if __name__ == "__main__":
    unittest.main()
