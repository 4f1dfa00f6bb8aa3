"""bench/resume-matrix and bench/resume-test as a judge that can fail: the quick preset's
smallest cell (lstm, constant LR, a restore every 50 of 110 steps, seed 1234) run with
`lossless` (C must equal A exactly, and does) and with a destructive lossy setting
(`--abs 1`: every weight snaps back to its base, training freezes: FAIL, frozen), and a
policy ckpz rejects (ERROR with ckpz's message, exit 2). MomentSign: the --moment-sign
experiment's approximations (bench/resume_moment.py) on tensors built to fit them.

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


class MomentSign(unittest.TestCase):
    """m = sign * c * sqrt(v) exactly is restored exactly, at the bytes the docstring says."""

    def setUp(self):
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import resume_moment
        import torch
        self.rm, self.torch = resume_moment, torch
        g = torch.Generator().manual_seed(5)
        self.v = torch.rand(64, 48, generator=g, dtype=torch.float64) * 1e-4
        self.v[3, :5] = 0.0                            # v = 0: m_hat must be 0 there
        self.sign = torch.where(torch.rand(64, 48, generator=g) < 0.5, -1.0, 1.0).double()

    def test_tensor_scale_exact(self):
        m = (self.sign * 0.3 * self.v.sqrt()).float()
        mh, cost = self.rm.approx(m, self.v.float(), "tensor")
        self.assertTrue(self.torch.allclose(mh, m, rtol=1e-5, atol=0), (mh - m).abs().max())
        self.assertEqual(int((mh[3, :5] != 0).sum()), 0)
        self.assertEqual(cost, 64 * 48 // 8 + self.rm.HEAD)

    def test_row_and_two_class_scales_exact(self):
        rows = self.torch.linspace(0.1, 0.5, 64).double()[:, None]
        m = (self.sign * rows * self.v.sqrt()).float()
        mh, cost = self.rm.approx(m, self.v.float(), "row")
        self.assertTrue(self.torch.allclose(mh, m, rtol=1e-5, atol=0))
        self.assertEqual(cost, 64 * 48 // 8 + 4 * 64 + self.rm.HEAD)
        mh, _ = self.rm.approx(m, self.v.float(), "tensor")      # one scale cannot fit
        self.assertGreater(float((mh - m).norm() / m.norm()), 0.1)
        cls = self.torch.where(self.torch.arange(48) % 3 == 0, 1.6, 0.9).double()
        m = (self.sign * cls * self.v.sqrt()).float()
        mh, cost = self.rm.approx(m, self.v.float(), "z2")
        self.assertTrue(self.torch.allclose(mh, m, rtol=1e-5, atol=0))
        self.assertLess(cost, 64 * 48 * 2 // 8 + 3 * self.rm.HEAD)

    def test_unknown_mode(self):
        with self.assertRaises(ValueError):
            self.rm.approx(self.v.float(), self.v.float(), "nope")


if __name__ == "__main__":
    unittest.main()
