"""The base-chain policy of the Python package against the CLI's: the same outcome, the
same file named, the same message.

A delta file's base may itself be a delta file, found beside it by the name it
recorded, and so on down a chain. How far such a chain may go and when two names are
the same file decide whether a chain restores or is refused. The library walks it
(ckpz_chain_open, lib/io/chain.c) for the CLI (programs/basefile.c) and for the package
(python/ckpz/_bases.py) alike; these tests hold the two front ends to it. They run
each case through both and compare: a chain of exactly the CLI's limit restores in both
and one more delta file is refused by both, naming the same file; a cycle closed by a
hard link (two names, one device and inode: only an identity test by device and inode
sees it, a comparison of paths does not) is refused by both as a cycle, naming the same
file.

Run by ctest as `python_bases` with CKPZ_LIBRARY, CKPZ_CLI and PYTHONPATH set; by hand
from the repository, after `make`:

    PYTHONPATH=python /usr/bin/python3 tests/python/test_bases.py -v
"""

import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", ".."))
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

import ckpz  # noqa: E402
from ckpz import _lib  # noqa: E402

CLI = os.environ.get("CKPZ_CLI") or os.path.join(_REPO, "build", "ckpz")


class Case(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ckpz-bases-")
        self.dir = self._tmp.name
        self.rng = random.Random(16)
        self.data = bytearray(self.rng.randbytes(4096))

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_next(self, name):
        """Writes the next checkpoint (the last one with a byte changed) as name; returns its bytes."""
        self.data[self.rng.randrange(len(self.data))] ^= 0xFF
        with open(self.path(name), "wb") as f:
            f.write(self.data)
        return bytes(self.data)

    def cli_refusal(self, *args):
        """Runs the CLI in the test directory, which must fail; returns (file, message) of
        its "ckpz: FILE: MESSAGE" line."""
        r = subprocess.run([CLI, "-q", *args], cwd=self.dir, capture_output=True, text=True, timeout=300)
        self.assertNotEqual(r.returncode, 0, "ckpz %s succeeded" % " ".join(args))
        m = re.search(r"^ckpz: ([^:\n]+): (.+)$", r.stderr, re.M)
        self.assertIsNotNone(m, r.stderr)
        return m.group(1), m.group(2)

    def cli(self, *args):
        r = subprocess.run([CLI, "-q", *args], cwd=self.dir, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, "ckpz %s: %s" % (" ".join(args), r.stderr))

    def assertSameRefusal(self, err, cli_file, cli_message):
        """The package's ckpz.Error names the file the CLI named and says what it said."""
        self.assertEqual(err.code, _lib.ERR_BASE)
        self.assertEqual(os.path.relpath(err.path, self.dir), cli_file, str(err))
        self.assertEqual(err.message, cli_message, str(err))

    def assertFileBytes(self, name, data):
        with open(self.path(name), "rb") as f:
            self.assertTrue(f.read() == data, "%s differs" % name)


class TestChainPolicy(Case):
    def test_chain_limit(self):
        """f0 an original, f1.ckpz .. fN.ckpz each a delta file against the one before:
        restoring f{L+1}.ckpz walks L delta files below it (the CLI's limit L) and
        restores in both; f{L+2}.ckpz walks one more and both refuse it, naming f1.ckpz."""
        limit = 1000  # CKPZ_CHAIN_MAX (include/ckpz.h)
        want = {}
        self.write_next("f0")
        for k in range(1, limit + 3):
            want[k] = self.write_next("f%d" % k)
            ckpz.compress_file(self.path("f%d" % k), self.path("f%d.ckpz" % k), base=self.path("f%d" % (k - 1)))
        for k in range(1, limit + 3):
            os.unlink(self.path("f%d" % k))
        ok, over = "f%d.ckpz" % (limit + 1), "f%d.ckpz" % (limit + 2)
        self.cli("-d", "-o", "cli.out", ok)
        self.assertFileBytes("cli.out", want[limit + 1])
        ckpz.decompress_file(self.path(ok), self.path("py.out"))
        self.assertFileBytes("py.out", want[limit + 1])

        cli_file, cli_message = self.cli_refusal("-d", "-o", "cli.over", over)
        self.assertEqual(cli_file, "f1.ckpz")
        with self.assertRaises(ckpz.Error) as cm:
            ckpz.decompress_file(self.path(over), self.path("py.over"))
        self.assertSameRefusal(cm.exception, cli_file, cli_message)
        self.assertFalse(os.path.exists(self.path("py.over")))

    def test_cycle_through_a_hard_link(self):
        """a.ckpz is a delta file whose recorded base "b" is gone; b.ckpz, where both look
        next, is a hard link to a.ckpz: the chain comes back to a file it has restored
        (same device and inode, another path). Both refuse it as a cycle at b.ckpz."""
        self.write_next("b")
        self.write_next("a")
        ckpz.compress_file(self.path("a"), self.path("a.ckpz"), base=self.path("b"))
        self.assertEqual(ckpz.base_info(self.path("a.ckpz")).name, "b")
        os.unlink(self.path("b"))
        os.link(self.path("a.ckpz"), self.path("b.ckpz"))
        self.write_next("next")
        for args, call in (
            (("--base", "a.ckpz", "-o", "cli.ckpz", "next"),
             lambda: ckpz.compress_file(self.path("next"), self.path("py.ckpz"), base=self.path("a.ckpz"))),
            (("-d", "-o", "cli.out", "a.ckpz"),
             lambda: ckpz.decompress_file(self.path("a.ckpz"), self.path("py.out"))),
        ):
            cli_file, cli_message = self.cli_refusal(*args)
            self.assertEqual(cli_file, "b.ckpz")
            with self.assertRaises(ckpz.Error) as cm:
                call()
            self.assertSameRefusal(cm.exception, cli_file, cli_message)
        self.assertEqual(sorted(os.listdir(self.dir)), ["a", "a.ckpz", "b.ckpz", "next"])  # no output left


if __name__ == "__main__":
    unittest.main()
