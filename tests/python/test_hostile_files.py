"""Tests that the Python and distributed loaders refuse what the C decoder refuses
(issue 27): files a user did not write must end in a ckpz.Error naming the file, never
in a RecursionError, a hang, a silently wrong tensor or a read outside the checkpoint.

- ckpz.distributed manifests: nesting and size bounded, base chains bounded and free of
  cycles, a base only beside the checkpoint (as the writer records it), a CRC-32 on
  every entry except the tensors a lossy policy coded (checked against the shard).
- Files that are not regular files where a loader opens a file (a FIFO blocks forever
  otherwise): refused, naming them; except ckpz.load, which reads a FIFO as a stream.

Cases that could hang run in a child process bounded by a timeout: a hang fails the
test, it never stalls the run. By hand, after `make`:

    CKPZ_LIBRARY=build/libckpz.so PYTHONPATH=python /usr/bin/python3 tests/python/test_hostile_files.py -v
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest
from unittest import mock

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

import torch  # noqa: E402

import ckpz  # noqa: E402
import ckpz.distributed as cd  # noqa: E402
from ckpz import _dist_manifest  # noqa: E402
from test_ckpz import Case  # noqa: E402

torch.set_num_threads(1)
CHILD_TIMEOUT = 60  # seconds: what a child may take before it counts as hung
SHARD = "rank-00000-of-00001.ckpz"


def in_child(code, timeout=CHILD_TIMEOUT):
    """Runs code in a fresh interpreter (this one, this package); its output, or a line
    saying it was still running after timeout seconds (killed)."""
    env = package_under_test.child_env()
    prog = "import sys\ntry:\n" + "".join("    " + line + "\n" for line in code.strip().splitlines()) + \
        "    print('RESULT ok')\nexcept BaseException as e:\n" \
        "    print('RESULT %s: %s' % (type(e).__name__, e))\n"
    try:
        p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=timeout, env=env,
                           start_new_session=True)
    except subprocess.TimeoutExpired:
        return "HUNG: still running after %d s" % timeout
    return p.stdout + p.stderr


def result_line(out):
    lines = [x for x in out.splitlines() if x.startswith("RESULT ")]
    return lines[-1][7:] if lines else out


def edit_manifest(directory, fn):
    path = os.path.join(directory, "manifest.json")
    with open(path) as f:
        m = json.load(f)
    fn(m)
    with open(path, "w") as f:
        json.dump(m, f)


def entries(m):
    """Every entry that carries a crc32: replicated, local and sharded pieces."""
    out = list(m["replicated"].values())
    for t in m["local"]:
        out += list(t.values())
    for s in m["sharded"].values():
        out += s["pieces"]
    return out


def state(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"a": torch.randn(64, 8, generator=g), "b": [torch.arange(10), 2.5], "c": torch.ones(3, 4) * seed}


class DistCase(Case):
    def save(self, name, st=None, **kw):
        d = self.path(name)
        cd.save(state() if st is None else st, d, **kw)
        return d

    def assertLoadRefused(self, d, *needles):
        with self.assertRaises(ckpz.Error) as cm:
            cd.load(d)
        for n in needles:
            self.assertIn(n, str(cm.exception))
        return str(cm.exception)


class TestManifestParsing(DistCase):
    def test_deep_nesting_refused(self):
        d = self.save("c1")
        path = os.path.join(d, "manifest.json")
        for text in ("[" * 100000 + "]" * 100000,
                     '{"format": "ckpz.distributed", "x": %s1%s}' % ("[" * 40, "]" * 40)):
            with open(path, "w") as f:
                f.write(text)
            self.assertLoadRefused(d, path, "nested")

    def test_size_limit(self):
        d = self.save("c1")
        path = os.path.join(d, "manifest.json")
        size = os.path.getsize(path)
        with mock.patch.object(_dist_manifest, "MANIFEST_FLOOR", size - 1):
            self.assertLoadRefused(d, path, "%d bytes" % size)
        with mock.patch.object(_dist_manifest, "MANIFEST_FLOOR", size):
            cd.load(d)
        # beyond the floor, a sixteenth of the shard files beside it
        shards = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".ckpz"))
        self.assertLess(shards // 16, size)
        with mock.patch.object(_dist_manifest, "MANIFEST_FLOOR", 1):
            self.assertLoadRefused(d, path, "%d bytes" % size)
            with open(os.path.join(d, "rank-00009-of-00009.ckpz"), "wb") as f:
                f.truncate(16 * size)
            cd.load(d)
            with mock.patch.object(_dist_manifest, "MANIFEST_MAX", size - 1):
                self.assertLoadRefused(d, path, "%d bytes" % size)

    def test_malformed_is_ckpz_error_naming_the_manifest(self):
        d = self.save("c1")
        path = os.path.join(d, "manifest.json")
        for text in (b"\xff\xfe{}", b'{"a": "\\ud800"', b"1e999999", b'"' + b"x" * 100 + b'"', b"null"):
            with open(path, "wb") as f:
                f.write(text)
            self.assertLoadRefused(d, path)


class TestManifestBases(DistCase):
    def setUp(self):
        super().setUp()
        self.c1 = self.save("c1")
        self.c2 = self.save("c2", state(1), base=self.c1)
        self.c3 = self.save("c3", state(2), base=self.c2)

    def test_chain_loads(self):
        self.assertEqual(cd.manifest(self.c3)["base"], "../c2")
        self.assertTrue(torch.equal(cd.load(self.c3)["a"], state(2)["a"]))

    def test_base_dot_refused(self):
        edit_manifest(self.c2, lambda m: m.update(base="."))
        self.assertLoadRefused(self.c2, os.path.join(self.c2, "manifest.json"), "itself")
        self.assertLoadRefused(self.c3, os.path.join(self.c2, "manifest.json"), "itself")

    def test_cycle_refused(self):
        edit_manifest(self.c1, lambda m: m.update(base="../c3"))
        text = self.assertLoadRefused(self.c3, "cycle")
        self.assertIn(os.path.join(self.c1, "manifest.json"), text)
        edit_manifest(self.c2, lambda m: m.update(base="../c2"))
        self.assertLoadRefused(self.c2, "itself")

    def test_chain_length_bounded(self):
        with mock.patch.object(_dist_manifest, "BASE_CHAIN_MAX", 1):
            self.assertLoadRefused(self.c3, "longer than 1")
            cd.load(self.c2)

    def test_base_outside_parent_refused(self):
        other = self.path("elsewhere")
        os.mkdir(other)
        shutil.copytree(self.c1, os.path.join(other, "c1"))
        for base in (os.path.join(other, "c1"), "../elsewhere/c1", "../../%s/elsewhere/c1" % os.path.basename(self.dir),
                     "c1", "../c1/../c1", "..", "../", "../.", "", "../c1\x00"):
            edit_manifest(self.c2, lambda m: m.update(base=base))
            self.assertLoadRefused(self.c2, os.path.join(self.c2, "manifest.json"), "base")

    def test_writer_refuses_a_base_elsewhere(self):
        other = self.path("elsewhere")
        os.mkdir(other)
        with self.assertRaisesRegex(ValueError, "same directory"):
            cd.save(state(3), os.path.join(other, "c4"), base=self.c1)
        self.assertFalse(os.path.exists(os.path.join(other, "c4")))


class TestManifestChecksums(DistCase):
    def swap_a(self, good, other):
        """good's shard replaced by other's."""
        shutil.copy(os.path.join(other, SHARD), os.path.join(good, SHARD))

    def test_missing_crc_refused_when_lossless(self):
        for how in ("null", "absent"):
            good, other = self.save("good-" + how), self.save("other-" + how, dict(state(), a=state(5)["a"]))
            self.swap_a(good, other)  # only "a" differs

            def drop(m):
                e = m["local"][0]["a"] if "a" in m["local"][0] else m["replicated"]["a"]
                if how == "null":
                    e["crc32"] = None
                else:
                    del e["crc32"]
            edit_manifest(good, drop)
            self.assertLoadRefused(good, os.path.join(good, "manifest.json"), "'a'", "CRC-32")

    def test_lossy_entries_marked(self):
        d = self.save("lossy", policy="*.a abs 1e-3")
        m = cd.manifest(d)
        self.assertTrue(m["lossy"])
        by_name = dict(m["replicated"], **m["local"][0])
        self.assertIsNone(by_name["a"]["crc32"])
        self.assertIs(by_name["a"].get("lossy"), True)
        self.assertIsInstance(by_name["c"]["crc32"], int)
        self.assertNotIn("lossy", by_name["c"])
        back = cd.load(d)
        self.assertLessEqual((back["a"] - state()["a"]).abs().max().item(), 1e-3 * 1.0001)

    def test_old_lossy_manifest_loads(self):
        """A lossy checkpoint's manifest as the writer before issue 27 wrote it: no
        per-entry marks, only "lossy": true."""
        d = self.save("lossy", policy="*.a abs 1e-3")
        edit_manifest(d, lambda m: [e.pop("lossy", None) for e in entries(m)])
        back = cd.load(d)
        self.assertLessEqual((back["a"] - state()["a"]).abs().max().item(), 1e-3 * 1.0001)

    def test_null_crc_of_a_lossless_tensor_refused_in_a_lossy_checkpoint(self):
        good, other = self.save("good", policy="*.a abs 1e-3"), self.save("other", state(5), policy="*.a abs 1e-3")
        self.swap_a(good, other)  # "c" differs too, and is lossless in both

        def hide(m):
            e = m["local"][0]["c"] if "c" in m["local"][0] else m["replicated"]["c"]
            e["crc32"] = None
            e["lossy"] = True
        edit_manifest(good, hide)
        self.assertLoadRefused(good, "'c'", "lossily")
        edit_manifest(good, lambda m: [e.pop("lossy", None) for e in entries(m)])  # as old manifests were
        self.assertLoadRefused(good, "'c'", "lossily")

    def test_lossy_mark_must_be_bool(self):
        d = self.save("lossy", policy="*.a abs 1e-3")
        edit_manifest(d, lambda m: [e.update(lossy="yes") for e in entries(m) if "lossy" in e])
        self.assertLoadRefused(d, "malformed")


class TestDcpChecksums(Case):
    """ckpz.dcp keeps a CRC-32 per item in DCP's metadata: a null one must not turn the
    check off for a lossless item (a swapped or damaged file would load silently)."""

    def save(self, name, st, **kw):
        import ckpz.dcp as cdcp

        d = self.path(name)
        cdcp.checkpoint.save_state_dict(st, storage_writer=cdcp.Writer(d, **kw), no_dist=True)
        return d

    def load(self, d, like):
        import ckpz.dcp as cdcp

        got = {k: torch.zeros_like(v) for k, v in like.items()}
        try:
            cdcp.checkpoint.load_state_dict(got, storage_reader=cdcp.Reader(d), no_dist=True)
        except BaseException as e:  # DCP wraps the reader's error in its CheckpointException
            return got, str(e)
        return got, None

    def edit_metadata(self, d, fn):
        import pickle

        p = os.path.join(d, ".metadata")
        with open(p, "rb") as f:
            md = pickle.load(f)
        md.storage_data = {k: fn(k, v) for k, v in md.storage_data.items()}
        with open(p, "wb") as f:
            pickle.dump(md, f)

    def test_null_crc_of_a_lossless_item_refused(self):
        # the policy codes "w" (2-D) lossily; "v" (1-D) stays lossless, as every vector does
        a, b = {"w": torch.arange(64.0).view(8, 8), "v": torch.ones(4)}, {"w": -torch.ones(8, 8), "v": torch.zeros(4)}
        for policy in (None, "* abs 1e-3"):
            with self.subTest(policy=policy):
                tag = "lossy" if policy else "lossless"
                good, other = self.save("good-" + tag, a, policy=policy), self.save("other-" + tag, b, policy=policy)
                shard = [f for f in os.listdir(good) if f.endswith(".ckpz")][0]
                shutil.copy(os.path.join(other, shard), os.path.join(good, shard))
                self.edit_metadata(good, lambda k, v: v[:2] + (None,))
                got, err = self.load(good, a)
                if policy is None:  # "w" and "v" are lossless: refused, naming the file
                    self.assertIsNotNone(err, "the swapped file loaded: %s" % got)
                    self.assertIn("no CRC-32", err)
                    self.assertIn(shard, err)
                else:  # "w" is lossy in the file (unchecked, as written); "v" is not
                    self.assertIsNotNone(err)
                    self.assertIn("'v'", err)

    def test_lossy_save_keeps_crcs_of_lossless_items(self):
        w = torch.arange(64.0).view(8, 8)
        d = self.save("lossy", {"w": w, "v": torch.ones(4)}, policy="* abs 1e-3")
        import pickle

        with open(os.path.join(d, ".metadata"), "rb") as f:
            md = pickle.load(f)
        crcs = {k.fqn: v[2] for k, v in md.storage_data.items()}
        self.assertIsNone(crcs["w"])
        self.assertIsInstance(crcs["v"], int)
        got, err = self.load(d, {"w": w, "v": torch.ones(4)})
        self.assertIsNone(err)
        self.assertLessEqual((got["w"] - w).abs().max().item(), 1e-3 * 1.0001)
        self.assertTrue(torch.equal(got["v"], torch.ones(4)))


class TestNonRegularFiles(DistCase):
    """A FIFO (or another non-regular file) where a loader opens a file: a ckpz.Error
    naming it, at once; each call in a child process bounded by a timeout."""

    def fifo_instead_of(self, path):
        os.remove(path)
        os.mkfifo(path)
        return path

    def assertRefusedInChild(self, call, path):
        out = in_child("import ckpz, ckpz.distributed as cd\n" + call)
        res = result_line(out)
        self.assertTrue(res.startswith("Error: "), out)
        self.assertIn(path, res)
        self.assertIn("not a regular file", res)

    def test_distributed_files(self):
        for k, (which, name, call) in enumerate((("c1", SHARD, "load"), ("c1", "manifest.json", "load"),
                                                 ("c2", SHARD, "load"), ("c2", "manifest.json", "manifest"))):
            os.mkdir(self.path(str(k)))
            c1 = self.save(os.path.join(str(k), "c1"))
            c2 = self.save(os.path.join(str(k), "c2"), state(1), base=c1)
            fifo = self.fifo_instead_of(os.path.join(c1 if which == "c1" else c2, name))
            self.assertRefusedInChild("cd.%s(%r)" % (call, c2), fifo)

    def test_single_files(self):
        p = self.path("x.pt.ckpz")
        ckpz.save(state(), p)
        f = self.path("fifo")
        os.mkfifo(f)
        self.assertRefusedInChild("ckpz.info(%r)" % f, f)
        self.assertRefusedInChild("ckpz.list(%r)" % f, f)
        self.assertRefusedInChild("ckpz.base_info(%r)" % f, f)
        self.assertRefusedInChild("ckpz.load(%r, base=%r)" % (p, f), f)
        self.assertRefusedInChild("ckpz.save({'a': 1}, %r, base=%r)" % (self.path("y.ckpz"), f), f)
        self.assertRefusedInChild("ckpz.compress_file(%r, %r, base=%r)" % (p, self.path("z.ckpz"), f), f)

    def test_dcp_metadata(self):
        d = self.path("dcp")
        os.mkdir(d)
        m = os.path.join(d, ".metadata")
        os.mkfifo(m)
        self.assertRefusedInChild("import ckpz.dcp\nckpz.dcp.Reader(%r).read_metadata()" % d, m)

    def test_directory_is_an_oserror(self):
        d = self.path("dir.ckpz")
        os.mkdir(d)
        self.assertRaises(IsADirectoryError, ckpz.load, d)
        self.assertRaises(IsADirectoryError, ckpz.info, d)


class TestLoadFromFifo(Case):
    """ckpz.load reads a FIFO as it reads a pipe given as a file object: the stream into
    memory, then decoded; bounded here by a timeout, so a hang fails."""

    def feed(self, fifo, data, deadline=30):
        """A thread that opens fifo for writing once a reader has it open, writes data and
        closes it (gives up after deadline seconds without a reader)."""

        def run():
            end = time.monotonic() + deadline
            while True:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError:  # ENXIO: no reader yet
                    if time.monotonic() > end:
                        return
                    time.sleep(0.01)
            os.set_blocking(fd, True)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except BrokenPipeError:
                pass
            finally:
                os.close(fd)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def load_bounded(self, fn, timeout=60):
        box = {}

        def run():
            try:
                box["value"] = fn()
            except BaseException as e:
                box["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(timeout)
        self.assertFalse(t.is_alive(), "still loading after %d s" % timeout)
        if "error" in box:
            raise box["error"]
        return box["value"]

    def test_ckpz_and_torch_files(self):
        st = {"w": torch.randn(300, 100), "step": 3, "l": [torch.arange(7)]}
        p = self.path("c.pt.ckpz")
        ckpz.save(st, p)
        t = self.path("c.pt")
        torch.save(st, t)
        for src in (p, t):
            fifo = self.path("fifo")
            os.mkfifo(fifo)
            with open(src, "rb") as f:
                self.feed(fifo, f.read())
            back = self.load_bounded(lambda: ckpz.load(fifo))
            self.assertTrue(torch.equal(back["w"], st["w"]))
            self.assertEqual(back["step"], 3)
            os.remove(fifo)

    def test_delta_file_finds_its_base_beside_the_fifo(self):
        st = {"w": torch.randn(300, 100)}
        p1, p2 = self.path("c1.pt.ckpz"), self.path("c2.pt.ckpz")
        ckpz.save(st, p1)
        st["w"][0] += 1
        ckpz.save(st, p2, base=p1)
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        with open(p2, "rb") as f:
            self.feed(fifo, f.read())
        back = self.load_bounded(lambda: ckpz.load(fifo))
        self.assertTrue(torch.equal(back["w"], st["w"]))

    def test_errors_name_the_fifo(self):
        p = self.path("c.pt.ckpz")
        ckpz.save({"w": torch.randn(1000)}, p)
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        with open(p, "rb") as f:
            self.feed(fifo, f.read()[:-100])
        with self.assertRaises(ckpz.Error) as cm:
            self.load_bounded(lambda: ckpz.load(fifo))
        self.assertIn(fifo, str(cm.exception))

    def test_decompress_file_from_fifo(self):
        p = self.path("c.pt.ckpz")
        st = {"w": torch.randn(1000)}
        ckpz.save(st, p)
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        with open(p, "rb") as f:
            self.feed(fifo, f.read())
        out = self.path("c.pt")
        self.load_bounded(lambda: ckpz.decompress_file(fifo, out))
        self.assertTrue(torch.equal(torch.load(out)["w"], st["w"]))

    def test_interrupt_while_no_writer(self):
        """Ctrl-C while the FIFO has no writer yet: KeyboardInterrupt, promptly (load,
        decompress_file, compress_file)."""
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        for call in ("ckpz.load(%r)" % fifo, "ckpz.decompress_file(%r, %r)" % (fifo, self.path("out")),
                     "ckpz.compress_file(%r, %r)" % (fifo, self.path("out.ckpz"))):
            out = in_child("""
import signal, time, torch, ckpz
def alarm(*a):
    raise KeyboardInterrupt
signal.signal(signal.SIGALRM, alarm)
signal.setitimer(signal.ITIMER_REAL, 0.5)
t = time.monotonic()
try:
    %s
except KeyboardInterrupt as e:
    print("INTERRUPTED after %%.1f s: %%r" %% (time.monotonic() - t, e))
""" % call, timeout=30)
            self.assertIn("INTERRUPTED", out, call)
            self.assertIn("KeyboardInterrupt()", out, call)  # plain: nothing was written
            self.assertEqual(sorted(os.listdir(self.dir)), ["fifo"])


if __name__ == "__main__":
    unittest.main()
