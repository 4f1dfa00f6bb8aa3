"""ckpz.safetensors (issue 28 item 5): save_file / load_file / save / load with the API of
safetensors.torch, for .safetensors.ckpz files.

Round trips of every dtype the running torch has, empty and 0-d tensors, metadata;
`ckpz -d` (CKPZ_CLI) restoring the bytes safetensors.torch.save_file writes, which that
package loads bit for bit (those tests need the `safetensors` package from PyPI and are
skipped, saying so, where it is not installed: Debian's torch 1.13 has none; the torch
2.13 environment has safetensors 0.8.0); a golden header that holds without it; refusals
when saving; a set of crafted headers, plain and inside a .ckpz, each a ckpz.Error naming
the file; atomic writes.

By hand, from the repository, after `make`:

    CKPZ_LIBRARY=$PWD/build/libckpz.so CKPZ_CLI=$PWD/build/ckpz PYTHONPATH=python \\
        /usr/bin/python3 tests/python/test_safetensors.py -v
"""

import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

import torch  # noqa: E402

import ckpz  # noqa: E402
import ckpz.safetensors as cst  # noqa: E402

try:
    import safetensors.torch as st
except ImportError:
    st = None
NO_PACKAGE = "the safetensors package (PyPI) is not installed for %s: nothing to compare with" % sys.executable
CLI = os.environ.get("CKPZ_CLI")

# What safetensors 0.8.0 writes for GOLDEN_TENSORS with metadata {"format": "pt"}.
GOLDEN = (
    b'8\x01\x00\x00\x00\x00\x00\x00{"__metadata__":{"format":"pt"},"c":{"dtype":"I64","shape":[1],"data_offsets":'
    b'[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]},"a":{"dtype":"F16","shape":[],"data_offsets":'
    b'[20,22]},"B":{"dtype":"I8","shape":[2],"data_offsets":[22,24]},"e":{"dtype":"BOOL","shape":[0,2],'
    b'"data_offsets":[24,24]}}       \x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80?\x00\x00\x00@'
    b'\x00>\x01\x02'
)


def golden_tensors():
    return {"b": torch.arange(3, dtype=torch.float32), "a": torch.tensor(1.5, dtype=torch.float16),
            "c": torch.tensor([7], dtype=torch.int64), "e": torch.zeros(0, 2, dtype=torch.bool),
            "B": torch.tensor([1, 2], dtype=torch.int8)}


def dtypes():
    """{safetensors name: torch dtype} of every dtype ckpz.safetensors handles on this torch."""
    return {name: dt for name, (dt, _) in cst._dtypes(torch)[1].items()}


def random_tensor(dt, shape, seed):
    g = torch.Generator().manual_seed(seed)
    n = 1
    for d in shape:
        n *= d
    size = torch.empty(0, dtype=dt).element_size()
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    raw = torch.randint(0, 256, (n * size,), dtype=torch.uint8, generator=g)
    return raw.view(dt).reshape(shape)


def raw_bytes(t):
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).tolist()) if t.numel() else b""


def package_loads(dt):
    """Whether the safetensors package loads tensors of dtype dt (0.8.0 writes F8_E8M0 but
    cannot read it back)."""
    try:
        st.load(st.save({"x": torch.zeros(1, dtype=dt)}))
        return True
    except Exception:
        return False


def mixed_tensors(keep=lambda dt: True):
    """One tensor of every dtype (that keep(dtype) keeps), names against the dtype order,
    empty and 0-d ones."""
    out = {}
    for i, (name, dt) in enumerate(sorted(dtypes().items())):
        if keep(dt):
            out["t%02d.%s" % (40 - i, name)] = random_tensor(dt, (3, 5), i)
    out["empty"] = torch.zeros(0, 4, dtype=torch.float32)
    out["scalar"] = torch.tensor(2.5, dtype=torch.bfloat16)
    out["a.scalar"] = torch.tensor(-1, dtype=torch.int64)
    out["w"] = torch.randn(64, 33).bfloat16()
    return out


class Base(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ckpz-st-")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertSameTensors(self, got, want):
        self.assertEqual(set(got), set(want))
        for k, t in want.items():
            self.assertEqual(got[k].dtype, t.dtype, k)
            self.assertEqual(tuple(got[k].shape), tuple(t.shape), k)
            self.assertEqual(raw_bytes(got[k]), raw_bytes(t), k)

    def restore(self, ckpz_path):
        """`ckpz -d` of ckpz_path (the CLI when CKPZ_CLI is set, else decompress_file): the
        restored file's path."""
        out = ckpz_path[: -len(".ckpz")]
        if CLI:
            subprocess.run([CLI, "-d", "-f", "-q", ckpz_path], check=True)
        else:
            ckpz.decompress_file(ckpz_path, out)
        return out


class RoundTrip(Base):
    def test_every_dtype(self):
        have = dtypes()
        for name in ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"):
            self.assertIn(name, have)  # every torch has these
        for name, dt in have.items():
            for shape in [(7, 3), (), (0,), (2, 0, 3), (1,)]:
                t = random_tensor(dt, shape, 1)
                p = self.path("one.safetensors.ckpz")
                cst.save_file({"x": t, "y": t.clone()}, p)
                self.assertSameTensors(cst.load_file(p), {"x": t, "y": t})
                self.assertSameTensors(cst.load(cst.save({"x": t})), {"x": t})

    def test_mixed_file_order_and_plain_file(self):
        ts = mixed_tensors()
        p = self.path("m.safetensors.ckpz")
        cst.save_file(ts, p, metadata={"format": "pt"})
        with open(p, "rb") as f:
            self.assertEqual(f.read(8), b"\x89CKPZ\r\n\x1a")
        self.assertEqual(ckpz.info(p).format, "safetensors")
        got = cst.load_file(p)
        self.assertSameTensors(got, ts)
        order = [k for k in got]
        ranks = {dt: r for dt, (r, _, _) in cst._dtypes(torch)[0].items()}
        self.assertEqual(order, sorted(ts, key=lambda k: (ranks[ts[k].dtype], k)))
        plain = self.restore(p)
        self.assertSameTensors(cst.load_file(plain), ts)  # a plain .safetensors file is accepted
        with open(plain, "rb") as f:
            data = f.read()
        self.assertSameTensors(cst.load(data), ts)
        n = struct.unpack("<Q", data[:8])[0]
        self.assertEqual(n % 8, 0)
        self.assertEqual(json.loads(data[8:8 + n])["__metadata__"], {"format": "pt"})

    def test_golden_header_and_metadata(self):
        p = self.path("g.safetensors.ckpz")
        cst.save_file(golden_tensors(), p, metadata={"format": "pt"})
        with open(self.restore(p), "rb") as f:
            self.assertEqual(f.read(), GOLDEN)
        out = io.BytesIO()
        ckpz.decompress_file(io.BytesIO(cst.save(golden_tensors(), {"format": "pt"})), out)
        self.assertEqual(out.getvalue(), GOLDEN)
        cst.save_file({"x": torch.ones(2)}, p, metadata={"z": "1", "a": "é\n\x01\"", "m": ""})
        with open(self.restore(p), "rb") as f:
            data = f.read()
        n = struct.unpack("<Q", data[:8])[0]
        self.assertEqual(data[8:8 + n].rstrip(b" "), '{"__metadata__":{"a":"é\\n\\u0001\\"","m":"","z":"1"},'
                         '"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'.encode())
        cst.save_file({"x": torch.ones(2)}, p, metadata={})
        with open(self.restore(p), "rb") as f:
            self.assertIn(b'{"__metadata__":{},"x"', f.read())

    def test_disjoint_views_inputs_untouched_and_delta(self):
        x = torch.arange(12, dtype=torch.float32)
        ts = {"lo": x[:5], "hi": x[6:], "c": torch.randn(4, dtype=torch.complex64).conj()}
        before = {k: raw_bytes(v.resolve_conj()) for k, v in ts.items()}
        p = self.path("v.safetensors.ckpz")
        cst.save_file(ts, p)
        self.assertEqual({k: raw_bytes(v.resolve_conj()) for k, v in ts.items()}, before)
        got = cst.load_file(p)
        self.assertEqual(raw_bytes(got["c"]), before["c"])  # the conjugate's values, as they read
        self.assertTrue(torch.equal(got["hi"], x[6:]))
        q = self.path("v2.safetensors.ckpz")
        ts2 = dict(got, hi=got["hi"] + 1)
        cst.save_file(ts2, q, base=p)
        self.assertIsNotNone(ckpz.base_info(q))
        self.assertSameTensors(cst.load_file(q), ts2)
        self.assertEqual(list(cst.load_file(q, device="cpu")), list(ts2))
        with self.assertRaises(RuntimeError):
            cst.load_file(q, device="no-such-device")


@unittest.skipIf(st is None, NO_PACKAGE)
class SameAsSafetensorsPackage(Base):
    def check_same(self, ts, metadata=None):
        p, ref = self.path("c.safetensors.ckpz"), self.path("ref.safetensors")
        cst.save_file(ts, p, metadata=metadata)
        st.save_file(ts, ref, metadata=metadata)
        with open(self.restore(p), "rb") as f, open(ref, "rb") as g:
            mine, theirs = f.read(), g.read()
        if metadata is None or len(metadata) < 2:
            self.assertEqual(mine, theirs)
            out = io.BytesIO()
            ckpz.decompress_file(io.BytesIO(cst.save(ts, metadata)), out)
            self.assertEqual(out.getvalue(), st.save(ts, metadata))
        else:  # the package writes its metadata in a hash map's order
            n, m = (struct.unpack("<Q", b[:8])[0] for b in (mine, theirs))
            self.assertEqual(json.loads(mine[8:8 + n]), json.loads(theirs[8:8 + m]))
            self.assertEqual(mine[8 + n:], theirs[8 + m:])
        self.assertSameTensors(cst.load_file(ref), ts)
        if all(package_loads(v.dtype) for v in ts.values()):
            self.assertSameTensors(st.load_file(p[: -len(".ckpz")]), ts)
            return True
        return False

    def test_byte_identical(self):
        self.check_same(mixed_tensors())
        self.assertTrue(self.check_same(mixed_tensors(package_loads), {"format": "pt"}))  # loaded by the package
        self.check_same(mixed_tensors(), {"format": "pt"})
        self.check_same(mixed_tensors(), {})
        self.check_same(mixed_tensors(), {"a": "1", "b": "2", "c": "3"})
        self.check_same(golden_tensors(), {"format": "pt"})
        self.check_same({"é/ü": torch.ones(3), "": torch.zeros(()), "\n\"\\": torch.arange(4)})
        self.check_same({})

    def test_package_order_rule(self):
        ts = {"%s_%02d" % (name, i): random_tensor(dt, (2,), i) for i, (name, dt) in enumerate(dtypes().items())}
        data = st.save(ts)
        n = struct.unpack("<Q", data[:8])[0]
        theirs = [v["dtype"] for v in json.loads(data[8:8 + n]).values()]
        self.assertEqual(theirs, [d[0] for d in cst._DTYPES if d[0] in theirs])


class SaveRefusals(Base):
    def refused(self, tensors, metadata=None, words=()):
        p = self.path("r.safetensors.ckpz")
        with open(p, "wb") as f:
            f.write(b"previous")
        with self.assertRaises(ckpz.Error) as cm:
            cst.save_file(tensors, p, metadata)
        text = str(cm.exception)
        self.assertIn(p, text)
        for w in words:
            self.assertIn(w, text)
        with open(p, "rb") as f:
            self.assertEqual(f.read(), b"previous")
        self.assertEqual(os.listdir(self.dir), ["r.safetensors.ckpz"])  # no temporary file left
        with self.assertRaises(ckpz.Error):
            cst.save(tensors, metadata)

    def test_refusals(self):
        x = torch.arange(10, dtype=torch.float32)
        self.refused([x], words=["dict"])
        self.refused({"a": 3}, words=["'a'", "int"])
        self.refused({1: x}, words=["str"])
        self.refused({"__metadata__": x}, words=["__metadata__"])
        self.refused({"bad\ud800": x}, words=["UTF-8"])
        self.refused({"nul\0": x}, words=["NUL"])  # a C string cannot hold it
        self.refused({"a": x}, {"k": "v\0"}, words=["metadata", "NUL"])
        self.refused({"nc": torch.zeros(4, 4).t()}, words=["'nc'", "contiguous"])
        self.refused({"a": x, "b": x}, words=["'a'", "'b'", "share memory"])
        self.refused({"a": x[2:5], "b": x[4:8]}, words=["share memory"])
        self.refused({"s": torch.zeros(3).to_sparse()}, words=["'s'"])
        self.refused({"m": torch.zeros(3, device="meta")}, words=["'m'"])
        self.refused({"c": torch.zeros(3, dtype=torch.complex128)}, words=["'c'", "complex128"])
        self.refused({"a": x}, {"k": 1}, words=["metadata"])
        self.refused({"a": x}, {2: "v"}, words=["metadata"])
        self.refused({"a": x}, ["k"], words=["metadata"])

    def test_failure_midway_leaves_nothing(self):
        p = self.path("f.safetensors.ckpz")
        cst.save_file({"a": torch.ones(5)}, p)
        with open(p, "rb") as f:
            before = f.read()
        real = cst._Plan._read
        calls = []

        def failing(self_, opaque, buf, n):
            calls.append(n)
            if len(calls) > 1:
                raise OSError(5, "injected failure")
            return real(self_, opaque, buf, min(n, 100))

        cst._Plan._read = failing
        try:
            with self.assertRaises(OSError):
                cst.save_file({"a": torch.randn(1 << 20)}, p)
        finally:
            cst._Plan._read = real
        self.assertGreater(len(calls), 1)
        with open(p, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(os.listdir(self.dir), ["f.safetensors.ckpz"])


def header_file(header, data=b"", n=None, raw=None):
    text = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if n is None else n) + text + data


def entry(dtype="F32", shape=(2,), offs=(0, 8), **extra):
    return dict({"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}, **extra)


HOSTILE = {
    "short": b"\x10\x00\x00",
    "huge_length": struct.pack("<Q", 1 << 63) + b"{}",
    "length_past_end": header_file(None, n=1000, raw=b"{}"),
    "not_json_object": header_file(None, raw=b"[1,2]   "),
    "deep_nesting": header_file(None, raw=b'{"a":' + b"[" * 200000 + b"]" * 200000 + b"}"),
    "bad_utf8": header_file(None, raw=b'{"\xff\xfe":1}'),
    "duplicate_key": header_file(None, raw=b'{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
                                           b'"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'),
    "nan": header_file(None, raw=b'{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0],"x":NaN}}'),
    "bool_dim": header_file({"a": entry(shape=[True, True], offs=(0, 4))}, b"\0" * 4),
    "dim_over_63_bits": header_file({"a": entry(dtype="U8", shape=[1 << 63, 0], offs=(0, 0))}),
    "float_dim": header_file({"a": entry(shape=[2.0])}, b"\0" * 8),
    "negative_dim": header_file({"a": entry(shape=[-2])}, b"\0" * 8),
    "too_many_dims": header_file({"a": entry(shape=[1] * 65, offs=(0, 4))}, b"\0" * 4),
    "strides_overflow": header_file({"a": entry(shape=[0, 1 << 62, 4], offs=(0, 0))}),
    "unknown_dtype": header_file({"a": entry(dtype="F128")}, b"\0" * 8),
    "dtype_not_str": header_file({"a": entry(dtype=["F32"])}, b"\0" * 8),
    "size_mismatch": header_file({"a": entry(shape=[3])}, b"\0" * 8),
    "offsets_past_end": header_file({"a": entry(offs=(8, 16))}, b"\0" * 8),
    "begin_after_end": header_file({"a": entry(shape=[0], offs=(8, 0))}, b"\0" * 8),
    "overlap": header_file({"a": entry(), "b": entry(offs=(4, 12))}, b"\0" * 12),
    "gap": header_file({"a": entry(offs=(4, 12))}, b"\0" * 12),
    "trailing_bytes": header_file({"a": entry()}, b"\0" * 9),
    "entry_not_object": header_file({"a": [1, 2]}),
    "metadata_not_str": header_file({"__metadata__": {"k": 1}}),
    "one_offset": header_file({"a": entry(offs=(0,))}, b"\0" * 8),
    "nesting_65": header_file({"a": entry(shape=[0], offs=(0, 0), x=json.loads("[" * 63 + "]" * 63))}),
}
# The entries above whose fault is tensor 'a''s: their messages name it.
NAMES_A = {"bool_dim", "dim_over_63_bits", "float_dim", "negative_dim", "too_many_dims", "strides_overflow", "unknown_dtype",
           "dtype_not_str", "size_mismatch", "offsets_past_end", "begin_after_end", "gap", "entry_not_object",
           "one_offset"}


class HostileHeaders(Base):
    def test_each_refused_naming_the_file(self):
        for name, data in HOSTILE.items():
            for packed in (False, True):
                with self.subTest(name=name, packed=packed):
                    p = self.path(name + ".safetensors")
                    with open(p, "wb") as f:
                        f.write(data)
                    if packed:
                        ckpz.compress_file(p, p + ".ckpz")
                        p += ".ckpz"
                    with self.assertRaises(ckpz.Error) as cm:
                        cst.load_file(p)
                    self.assertIn(p, str(cm.exception))
                    if name in NAMES_A:
                        self.assertIn("tensor 'a'", str(cm.exception))
                    with open(p, "rb") as f, self.assertRaises(ckpz.Error):
                        cst.load(f.read())

    def test_what_is_accepted(self):
        # the same checks pass a valid file: unknown keys of an entry ignored (as the package
        # does), nesting 64 deep (nesting_65 is refused)
        p = self.path("ok.safetensors")
        with open(p, "wb") as f:
            f.write(header_file({"a": entry(x=json.loads("[" * 62 + "]" * 62)), "e": entry(shape=[0], offs=(8, 8))},
                                struct.pack("<2f", 1.5, -2)))
        got = cst.load_file(p)
        self.assertEqual(got["a"].tolist(), [1.5, -2.0])
        self.assertEqual(list(got["e"].shape), [0])

    def test_values_counted_before_parsing(self):
        # 2,000,001 values (a 4 MB header, 14 KB as .ckpz) would take ~250 MB as Python
        # objects: refused before json parses them; commas inside strings do not count.
        p = self.path("values.safetensors")
        with open(p, "wb") as f:
            f.write(header_file(None, raw=b'{"a":{"dtype":"F32","shape":[' + b"0," * 2000000 + b'0],'
                                b'"data_offsets":[0,0]}}'))
        with self.assertRaises(ckpz.Error) as cm:
            cst.load_file(p)
        self.assertIn(p, str(cm.exception))
        self.assertIn("more than 2000000 values", str(cm.exception))
        with open(p, "wb") as f:
            f.write(header_file({"__metadata__": {"k": "," * 2000001}, "a": entry(shape=[0], offs=(0, 0))}))
        self.assertEqual(list(cst.load_file(p)["a"].shape), [0])

    def test_other_ckpz_payloads_refused(self):
        p = self.path("model.pt.ckpz")
        ckpz.save({"w": torch.ones(3)}, p)
        with self.assertRaises(ckpz.Error) as cm:
            cst.load_file(p)
        self.assertIn(p, str(cm.exception))
        self.assertIn("torch", str(cm.exception))
        q = self.path("noise.bin")
        with open(q, "wb") as f:
            f.write(os.urandom(4096))
        ckpz.compress_file(q, q + ".ckpz")
        with self.assertRaises(ckpz.Error) as cm:
            cst.load_file(q + ".ckpz")
        self.assertIn(q + ".ckpz", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
