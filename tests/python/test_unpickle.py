"""Tests of ckpz's safe unpickler and of the tensors the loaders build, against files an
attacker writes: tensors larger than their storage (ckpz.load, ckpz.distributed.load
and ckpz.dcp.Reader, which used to decode into freed memory), BUILD on classes,
tensors and shared objects, allocations from a few bytes of pickle, and nesting that
crashes CPython or its recursive code. Every case that could crash or take the process
over runs in a child process, so a crash, a hang or a process-wide change is a failed
test, not a broken test run.

Run by ctest (tests/python/CMakeLists.txt) like test_ckpz.py; by hand after `make`:

    PYTHONPATH=python /usr/bin/python3 tests/python/test_unpickle.py -v
"""

import collections
import io
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import textwrap
import unittest
import warnings
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

import torch  # noqa: E402

import ckpz  # noqa: E402
import ckpz.distributed as cd  # noqa: E402
from ckpz import _torchzip  # noqa: E402
from test_ckpz import Case  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore", "TypedStorage is deprecated")

# ---- writing what an attacker writes ----------------------------------------------------


def archive(pkl, storages=()):
    """A torch.save zip archive holding the pickle pkl and the storages [(key, bytes)]."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        for key, data in storages:
            z.writestr("archive/data/%s" % key, data)
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


class Rebuild:
    """Pickles as fn(*args): a tensor rebuilt from a real storage with the arguments an
    attacker chose (the storage itself is written as torch.save writes it)."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def crafted(obj):
    """The archive torch.save would write for obj, Rebuild objects included."""
    p = _torchzip.pickle_state(torch, obj)
    return archive(p.data, [(k, bytes(s.tolist())) for k, s in sorted(p.storages.items())])


def typed(t):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return t.storage()


def v2(t, offset, size, stride):
    return Rebuild(torch._utils._rebuild_tensor_v2, typed(t), offset, size, stride, False, collections.OrderedDict())


def pickle_ops(*parts):
    """A protocol-2 pickle from raw opcode bytes."""
    return b"\x80\x02" + b"".join(parts) + b"."


def glob(module, name):
    return b"c%s\n%s\n" % (module.encode(), name.encode())


def unicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def intop(n):
    return b"J" + struct.pack("<i", n) if -(1 << 31) <= n < 1 << 31 else b"\x8a\x08" + struct.pack("<q", n)


def tuple_of(xs):
    return b"(" + b"".join(intop(x) for x in xs) + b"t"


def tensor_ops(storage_cls, key, numel, offset, size, stride):
    """Opcodes of torch's _rebuild_tensor_v2 over the persistent storage (storage_cls, key,
    numel elements), as torch.save writes a tensor."""
    pid = b"(" + unicode("storage") + glob("torch", storage_cls) + unicode(key) + unicode("cpu") + intop(numel) + b"tQ"
    return (glob("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + intop(offset) + tuple_of(size)
            + tuple_of(stride) + b"\x89" + glob("collections", "OrderedDict") + b")RtR")


def child(code, timeout=120):
    """Runs code in a fresh interpreter with ckpz and torch imported; returns (returncode,
    output, peak RSS growth in MiB over the import baseline)."""
    prog = textwrap.dedent("""
        import io, os, resource, sys, warnings
        warnings.filterwarnings("ignore")
        sys.path.insert(0, %r)
        import torch, ckpz
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        def report():
            print("RSS_GROWTH_MIB", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
        try:
    """ % (package_under_test.package_dir(),)) + textwrap.indent(textwrap.dedent(code), "    ") + textwrap.dedent("""
        finally:
            report()
    """)
    try:
        out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=timeout,
                             env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return "hang", "", 0
    growth = 0
    for line in out.stdout.splitlines():
        if line.startswith("RSS_GROWTH_MIB"):
            growth = int(line.split()[1])
    return out.returncode, out.stdout + out.stderr, growth


class Hostile(Case):
    def write(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def both(self, name, data):
        """The archive as a .pt and as the .ckpz ckpz.compress_file makes of it."""
        pt = self.write(name + ".pt", data)
        ckpz.compress_file(pt, pt + ".ckpz")
        return pt, pt + ".ckpz"

    def assertRefused(self, path, pattern, **kw):
        with self.assertRaisesRegex(ckpz.Error, pattern) as cm:
            ckpz.load(path, **kw)
        self.assertIn(os.path.basename(path), str(cm.exception))
        return cm.exception

    def assertChildRefuses(self, code, pattern, max_mib=256, timeout=120, refused=True):
        """code, run in a child, neither crashes, hangs, grows past max_mib nor fails its
        own checks; it printed REFUSED (when refused) and output matching pattern."""
        rc, out, growth = child(code, timeout)
        self.assertNotEqual(rc, "hang", "the load hung")
        self.assertEqual(rc, 0, "the child failed (a crash is a negative code):\n" + out[-3000:])
        if refused:
            self.assertIn("REFUSED", out, out[-3000:])
        if pattern:
            self.assertRegex(out, pattern)
        self.assertLessEqual(growth, max_mib, "peak RSS grew by %d MiB" % growth)
        return out


# ---- tensors outside their storage -------------------------------------------------------


class TestTensorExtents(Hostile):
    def test_tensors_outside_their_storage(self):
        # A storage of 10 floats and tensors that reach past it: torch.set_ grows the
        # storage silently (one of these would allocate 4 GiB), what lies past the
        # stored bytes is not the file's.
        base = torch.arange(10, dtype=torch.float32)
        cases = {
            "size": v2(base, 0, (11,), (1,)),
            "offset": v2(base, 8, (3,), (1,)),
            "stride": v2(base, 0, (2, 3), (8, 1)),
            "huge": v2(base, 0, (1 << 30,), (1,)),
            "negative-offset": v2(base, -1, (2,), (1,)),
            "negative-size": v2(base, 0, (-2,), (1,)),
            "negative-stride": v2(base, 5, (3,), (-1,)),
            "overflow": v2(base, 0, (1 << 40, 1 << 40), (0, 0)),
            "not-ints": v2(base, 0, ("1",), (1,)),
            "v1": Rebuild(torch._utils._rebuild_tensor, typed(base), 0, (12,), (1,)),
            "parameter": Rebuild(torch._utils._rebuild_parameter, v2(base, 4, (7,), (1,)), True,
                                 collections.OrderedDict()),
            "from-type": Rebuild(torch._tensor._rebuild_from_type_v2, torch._utils._rebuild_tensor_v2,
                                 torch.nn.Parameter, (typed(base), 0, (20,), (1,), False, collections.OrderedDict()),
                                 None),
        }
        for name, obj in cases.items():
            with self.subTest(name):
                for p in self.both(name, crafted({"ok": torch.ones(2), "t": obj})):
                    self.assertRefused(p, "storage|negative|integer|elements|sequences")
        # trusted=True runs any global, but torch's rebuild still may not grow a storage
        for p in self.both("trusted", crafted({"t": v2(base, 0, (1 << 20,), (1,))})):
            self.assertRefused(p, "storage", trusted=True)
        # the honest file loads
        for p in self.both("honest", crafted({"t": v2(base, 2, (2, 4), (4, 1))})):
            self.assertTrue(torch.equal(ckpz.load(p)["t"], base[2:10].view(2, 4)))

    def test_storage_named_with_two_types(self):
        # one storage of 16 bytes named as 4 floats and as 2 doubles: torch.save never
        # writes that (it refuses); a loader that took the first name would build the
        # second tensor from the wrong type
        data = pickle_ops(b"}", unicode("a"), tensor_ops("FloatStorage", "0", 4, 0, (4,), (1,)), b"s",
                          unicode("b"), tensor_ops("DoubleStorage", "0", 2, 0, (2,), (1,)), b"s")
        for p in self.both("twice", archive(data, [("0", bytes(16))])):
            self.assertRefused(p, "named as")


SHARD_CODE = """
import collections, ckpz.distributed as cd, torch, shutil
from ckpz import _torchzip
path = %(path)r
cd.save({"w": torch.arange(64, dtype=torch.float32), "b": torch.ones(3)}, path)
shard = path + "/rank-00000-of-00001.ckpz"
# the shard's pickle, rewritten: tensor "w" now claims 2**20 elements of its 64
payload = ckpz.load(shard)
w = payload["tensors"]["w"]
class Big:
    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, (w.storage(), 0, (1 << 20,), (1,), False, collections.OrderedDict())
payload["tensors"]["w"] = Big()
ckpz.save(payload, shard)
try:
    cd.load(path)
    print("LOADED")
except ckpz.Error as e:
    print("REFUSED", e)
"""

DCP_CODE = """
import collections, io, os, torch
import ckpz, ckpz.dcp as cdcp
d = %(path)r
dcp = cdcp.checkpoint
sd = {"w": torch.arange(64, dtype=torch.float32), "b": torch.ones(3)}
dcp.save_state_dict(sd, storage_writer=cdcp.Writer(d), no_dist=True)
shard = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".ckpz")][0]
payload = ckpz.load(shard)
class Big:
    def __init__(self, t):
        self.t = t
    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, (self.t.storage(), 0, (1 << 20,), (1,), False,
                                                 collections.OrderedDict())
payload["tensors"] = {k: Big(t) for k, t in payload["tensors"].items()}
ckpz.save(payload, shard)
try:
    dcp.load_state_dict({"w": torch.zeros(64), "b": torch.zeros(3)}, storage_reader=cdcp.Reader(d), no_dist=True)
    print("LOADED")
except BaseException as e:  # DCP wraps the reader's ckpz.Error in its CheckpointException (a BaseException)
    print("REFUSED", type(e).__name__, e)
"""


class TestShardTensorExtents(Hostile):
    """A shard whose pickle gives a tensor more elements than its storage: the loader
    used to record the storage's address, then Tensor.set_ grew (reallocated) it, and
    the library decoded into the freed block (SIGSEGV)."""

    def test_distributed_load(self):
        self.assertChildRefuses(SHARD_CODE % {"path": self.path("ck")}, "rank-00000-of-00001.ckpz.*storage")

    def test_dcp_reader(self):
        self.assertChildRefuses(DCP_CODE % {"path": self.path("dcp")}, r"ckpz\._lib\.Error: .*\.ckpz: .*storage")


# ---- BUILD --------------------------------------------------------------------------------

AFTER_LOAD_CHECKS = """
import argparse, collections, pathlib
assert pathlib.Path("/").exists() is True, "pathlib.Path changed"
assert argparse.Namespace(a=1).a == 1 and "a" in argparse.Namespace(a=1), "argparse.Namespace changed"
assert collections.Counter("aab")["a"] == 2 and collections.Counter()["x"] == 0, "collections.Counter changed"
assert collections.OrderedDict(a=1).popitem() == ("a", 1), "OrderedDict changed"
"""


def build_on(module, name, attr, value_ops=glob("builtins", "list")):
    """GLOBAL module.name, then BUILD with slot state {attr: value}: pickle's setattr on
    the class itself."""
    return pickle_ops(glob(module, name), b"N}", unicode(attr), value_ops, b"s\x86b")


class TestBuild(Hostile):
    def load_in_child(self, data, pattern, checks=AFTER_LOAD_CHECKS):
        p = self.write("b.pt", archive(data))
        code = "try:\n    ckpz.load(%r)\n    print('LOADED')\nexcept ckpz.Error as e:\n    print('REFUSED', e)\n" % p
        return self.assertChildRefuses(code + checks, pattern)

    def test_build_on_classes(self):
        for module, name, attr in (("pathlib", "Path", "exists"), ("pathlib", "PosixPath", "exists"),
                                   ("argparse", "Namespace", "__contains__"),
                                   ("collections", "Counter", "__missing__"),
                                   ("collections", "OrderedDict", "popitem")):
            with self.subTest(name):
                self.load_in_child(build_on(module, name, attr), "state of the class|BUILD")

    def test_build_on_a_tensor(self):
        # Tensor.__setstate__: a 3-tuple sets backward hooks, a 4-tuple calls set_ (which
        # grows the storage)
        t = typed(torch.ones(2))
        for what, state in (("hooks", (False, None, collections.OrderedDict([(0, list)]))),
                            ("set_", (t, 0, (1 << 20,), (1,)))):
            with self.subTest(what):
                p = self.write(what + ".pt", crafted({"t": _tensor_with_state(torch.zeros(2), state)}))
                self.assertRefused(p, "state of a Tensor")

    def test_build_on_shared_dtype(self):
        # numpy.dtype(..., copy=False) is the process's float64 descriptor: a BUILD on it
        # would change float64 for everyone
        data = pickle_ops(glob("numpy", "dtype"), unicode("f8"), b"\x89\x89\x87R",  # dtype("f8", False, False)
                          b"(K\x03", unicode(">"), b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb")
        p = self.write("dtype.pt", archive(data))
        code = "ckpz.load(%r)\n" % p + AFTER_LOAD_CHECKS + textwrap.dedent("""
            import numpy
            assert numpy.dtype("f8").byteorder == "=", "numpy's float64 changed"
            assert numpy.ones(2).sum() == 2
        """)
        self.assertChildRefuses(code, "", refused=False)

    def test_build_state_on_plain_instances_still_loads(self):
        # what torch.save writes: OrderedDict's _metadata, a Namespace's fields
        import argparse

        sd = torch.nn.Linear(2, 2).state_dict()
        obj = {"sd": sd, "ns": argparse.Namespace(lr=0.1, name="x")}
        p = self.write("ok.pt", crafted(obj))
        back = ckpz.load(p)
        self.assertEqual(back["ns"], obj["ns"])
        self.assertEqual(back["sd"]._metadata, sd._metadata)


# A tensor pickled with a BUILD state: (rebuild, args, state) as __reduce__ returns it.
def _tensor_with_state(t, state):
    class R:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2, (typed(t), 0, tuple(t.shape), t.stride(), False,
                                                      collections.OrderedDict()), state)

    return R()


# ---- memory from nothing -------------------------------------------------------------------


class TestMemoryFromNothing(Hostile):
    LONG_2_31 = b"\x8a\x05\x00\x00\x00\x80\x00"  # LONG1 2**31
    # name -> (pickle, whether it must be refused; else it may load, within the memory)
    CASES = {
        "bytearray": (pickle_ops(glob("builtins", "bytearray"), LONG_2_31, b"\x85R"), True),
        "list-of-range": (pickle_ops(glob("builtins", "list"), glob("builtins", "range"), intop(3 * 10 ** 7),
                                     b"\x85R\x85R"), True),
        "reconstructor": (pickle_ops(glob("copyreg", "_reconstructor"), glob("builtins", "bytearray"),
                                     glob("builtins", "bytearray"), LONG_2_31, b"\x87R"), True),
        "memo-index": (pickle_ops(b"N", b"r\xff\xff\xff\x3f"), False),  # LONG_BINPUT 2**30 - 1
        "numpy-shape": (pickle_ops(glob("numpy.core.multiarray", "_reconstruct"), glob("numpy", "ndarray"),
                                   intop(1 << 30), b"\x85", unicode("f8"), b"\x87R"), True),  # 8 GiB
        "torch-tensor": (pickle_ops(glob("torch", "Tensor"), intop(1 << 30), b"\x85R"), True),  # 4 GiB
        "tuple-newobj": (pickle_ops(glob("builtins", "tuple"), glob("builtins", "range"), intop(3 * 10 ** 7),
                                    b"\x85R\x85\x81"), True),
        "empty-sets": (pickle_ops(b"]", b"\x8fa" * 1500000), True),  # 1.5 M sets from 3 MB: 330 MB
    }

    def test_allocations_from_a_few_bytes(self):
        for name, (data, refuse) in self.CASES.items():
            with self.subTest(name):
                p = self.write(name + ".pt", archive(data))
                code = ("try:\n    ckpz.load(%r)\n    print('LOADED')\n"
                        "except ckpz.Error as e:\n    print('REFUSED', e)\n") % p
                self.assertChildRefuses(code, "REFUSED" if refuse else "", max_mib=256, timeout=180, refused=refuse)

    def test_str_of_a_shared_dag(self):
        # str() of a list holding one list 100 times, which holds one list 100 times, 8
        # levels: 10**16 characters from 2 KB of pickle
        data = pickle_ops(glob("builtins", "str"), b"K\x01q\x000", *[b"](" + b"h\x00" * 100 + b"eq\x000"] * 8,
                          b"h\x00\x85R")
        p = self.write("dag.pt", archive(data))
        code = "try:\n    ckpz.load(%r)\n    print('LOADED')\nexcept ckpz.Error as e:\n    print('REFUSED', e)\n" % p
        self.assertChildRefuses(code, "str", timeout=60)


# ---- nesting ---------------------------------------------------------------------------------


class TestNesting(Hostile):
    def test_deep_tuple_as_a_dict_key(self):
        # hashing a 10**6-deep tuple recurses in C without a guard: SIGSEGV
        data = pickle_ops(b"}", b")" + b"\x85" * 1000000, b"K\x01s")
        p = self.write("deep.pt", archive(data))
        code = "try:\n    ckpz.load(%r)\n    print('LOADED')\nexcept ckpz.Error as e:\n    print('REFUSED', e)\n" % p
        self.assertChildRefuses(code, "nested")

    def test_deep_lists_and_dicts(self):
        # built bottom-up through the memo, so the pickle's stack stays flat
        lists = pickle_ops(b"]q\x00", b"0]h\x00aq\x00" * 100000)
        dicts = pickle_ops(b"}q\x00", b"0}K\x01h\x00sq\x00" * 100000)
        for name, data in (("lists", lists), ("dicts", dicts)):
            with self.subTest(name):
                for p in self.both(name, archive(data)):
                    self.assertRefused(p, "nested more than")

    def test_nesting_a_checkpoint_uses_loads(self):
        obj = {"a": [[[{"b": (1, (2, (3,)))}]]], "t": torch.ones(2)}
        p = self.write("fine.pt", crafted(obj))
        self.assertEqual(ckpz.load(p)["a"], obj["a"])


# ---- the manifests' pickles and JSON are tested in test_distributed; the malformed pickle ----


class TestTorchAllowList(Hostile):
    def test_add_safe_globals_is_honoured(self):
        if not hasattr(torch.serialization, "add_safe_globals"):
            self.skipTest("torch %s has no torch.serialization.add_safe_globals (torch >= 2.4)" % torch.__version__)
        obj = {"t": torch.ones(2), "p": _Point(3, 4)}
        p = self.write("point.pt", crafted(obj))
        self.assertRefused(p, "_Point")
        with torch.serialization.safe_globals([_Point]):
            back = ckpz.load(p)
        self.assertEqual((back["p"].x, back["p"].y), (3, 4))
        self.assertRefused(p, "_Point")  # the context ended


class _Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


class TestMalformed(Hostile):
    def test_every_truncation_is_a_ckpz_error(self):
        data = crafted({"a": torch.arange(3), "b": {"c": [1.5, "x", (2, 3)]}})
        pkl = zipfile.ZipFile(io.BytesIO(data)).read("archive/data.pkl")
        storages = [(n.rsplit("/", 1)[1], zipfile.ZipFile(io.BytesIO(data)).read(n))
                    for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if "/data/" in n]
        for cut in range(len(pkl)):
            with self.subTest(cut=cut):
                with self.assertRaises(ckpz.Error):
                    ckpz.load(io.BytesIO(archive(pkl[:cut], storages)))

    def test_refusals_are_unpickling_errors(self):
        p = self.write("x.pt", archive(build_on("pathlib", "Path", "exists")))
        with self.assertRaises(pickle.UnpicklingError):
            ckpz.load(p)


if __name__ == "__main__":
    unittest.main()
