"""bench/resume-matrix and bench/resume-test as a judge that can fail: the quick preset's
smallest cell (lstm, constant LR, a restore every 50 of 110 steps, seed 1234) run with
`lossless` (C must equal A exactly, and does) and with a destructive lossy setting
(`--abs 1`: every weight snaps back to its base, training freezes: FAIL, frozen), and a
policy ckpz rejects (ERROR with ckpz's message, exit 2).

Needs torch (Debian's python3-torch) and the ckpz command: CKPZ_CLI, else build/ckpz.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MATRIX = os.path.join(ROOT, "bench", "resume-matrix")
CKPZ = os.environ.get("CKPZ_CLI", os.path.join(ROOT, "build", "ckpz"))
CELL = ["--quick", "--families", "lstm", "--schedules", "const", "--intervals", "50",
        "--seeds", "1234", "--threads", "1"]


def matrix(tmp, policies, more=()):
    out = os.path.join(tmp, "m.json")
    r = subprocess.run([sys.executable, MATRIX, "--ckpz", CKPZ, "--json", out, "--check",
                        "--policies", policies] + list(more) + CELL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    text = r.stdout.decode(errors="replace")
    with open(out) as f:
        return r.returncode, json.load(f), text


class ResumeJudge(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="test-resume-bench.")
        cls.rc, cls.res, cls.text = matrix(cls.tmp.name, "lossless", ["--policy", "freeze=--abs 1"])
        print(cls.text)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def cell(self, policy):
        cs = [c for c in self.res["cells"] if c["policy"] == policy]
        self.assertEqual(len(cs), 1, policy)
        return cs[0]

    def test_exit_status(self):
        self.assertEqual(self.rc, 1, "--check with a FAILing cell exits 1")

    def test_lossless_equals_reference(self):
        c = self.cell("lossless")
        self.assertEqual(c["status"], "PASS", c)
        s = c["summary"]
        self.assertEqual(s["restores"], 2)
        self.assertEqual(s["gap"], 0.0)
        self.assertEqual(s["frozen_steps"] + s["frozen_tensors"] + s["v_nonpos_made"], 0)
        self.assertGreater(s["noise_floor"], 0.0, "run B trains on another data order")
        self.assertGreater(s["mean_ratio"], 1.0)

    def test_destructive_setting_fails_frozen(self):
        c = self.cell("freeze")
        self.assertEqual(c["status"], "FAIL", c)
        s = c["summary"]
        self.assertEqual(s["frozen_steps"], 2, s)
        self.assertGreater(s["frozen_tensors"], 0, s)
        self.assertIn("training frozen", s["why"])

    def test_table(self):
        rows = {r["policy"]: r for r in self.res["rows"]}
        self.assertEqual(rows["lossless"]["verdict"], "PASS")
        self.assertEqual(rows["freeze"]["verdict"], "FAIL")
        self.assertIn("| lossless | lstm | const | 50 | 1234 | 2 |", self.text)
        self.assertIn("| freeze | lstm | const | 50 | 1234 | 2 |", self.text)

    def test_rejected_arguments_are_a_harness_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, res, text = matrix(tmp, "bad=--no-such-option")
        self.assertEqual(rc, 2, text)
        (c,) = res["cells"]
        self.assertEqual(c["status"], "ERROR")
        self.assertIn("no-such-option", c["error"])
        self.assertIn("ERROR: ", text)


if __name__ == "__main__":
    unittest.main()
