"""bench/resume-matrix and bench/resume-test as a judge that can fail: the quick preset's
smallest cell (lstm, constant LR, a restore every 50 of 110 steps, seed 1234) run with
`lossless` (C must equal A exactly, and does) and with a destructive lossy setting
(`--abs 1`: every weight snaps back to its base, training freezes: FAIL, frozen), and a
policy ckpz rejects (ERROR with ckpz's message, exit 2). MomentSign: the --moment-sign
experiment's approximations (bench/resume_moment.py) on tensors built to fit them.
CellFloor: a matrix cell's floor is the largest of its seeds' floors, and only the gap is
judged against it. Floors: a seed's floor is the largest over its runs B (one per data
order; a diverged one counts for nothing), and --ref refuses a file with fewer runs B.
FromJson: --from-json judges the cells of runs made apart as one matrix (rows in run
order, seeds together, the preset's markers), and refuses runs of other sizes, a cell
twice, a file that is no run, and options that would choose runs. Budget: bench/resume_budget.py's bytes per role add up to the file and
match `ckpz -l -v`'s entries. Joint: bench/resume_joint.py finds each optimizer state's
parameter past a buffer, and a weights' change that is Adam's step exactly is predicted
(near 1 correlation, bits saved) where a change unrelated to the moments is not.

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

    def test_floor_of_three_data_orders(self):
        s = self.cell("lossless")["summary"]
        fl = s["noise_floors"]
        self.assertEqual(len(fl), 3, "--floor-runs defaults to 3 runs B per seed")
        self.assertEqual(s["noise_floor"], max(fl))
        self.assertEqual(len(set(fl)), 3, "each run B trains on a data order of its own")
        self.assertIn("3 run(s) B per seed", self.text)

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


def load_matrix():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("resume_matrix", MATRIX)
    spec = importlib.util.spec_from_loader("resume_matrix", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def judged_cell(policy, fam, sched, every, seed, gap, floor, sound=True, why=""):
    """A matrix cell as run_cell records it: two restores, C ending gap below A."""
    s = dict(restores=2, mean_ratio=10.0, min_ratio=9.0, max_ratio=11.0, gap=gap, signed_gap=-gap,
             noise_floor=floor, sound=sound, passed=sound and gap <= max(0.005, floor), frozen_steps=0,
             frozen_tensors=0, v_nonpos_made=0, diverged=None, why=why)
    return dict(policy=policy, family=fam, schedule=sched, interval=every, seed=seed,
                status="PASS" if s["passed"] else "FAIL", summary=s)


class CellFloor(unittest.TestCase):
    def setUp(self):
        self.m = load_matrix()

    def cells(self, *seeds):
        """seeds: (gap, floor, sound) per seed."""
        out = [judged_cell("p", "cnn", "const", 10, i, gap, floor, sound, "w%d" % i)
               for i, (gap, floor, sound) in enumerate(seeds)]
        (row,) = self.m.rows_of(out)
        return row

    def test_largest_floor_of_the_seeds(self):
        r = self.cells((0.008, 0.003, True), (0.002, 0.010, True))
        self.assertEqual(r["verdict"], "PASS", r)       # seed 0 alone fails its own floor
        self.assertIn("(1.00)", r["floor"])
        self.assertIn("-0.80", r["gap"])

    def test_gap_above_every_floor_fails(self):
        r = self.cells((0.012, 0.003, True), (0.002, 0.010, True))
        self.assertEqual(r["verdict"], "FAIL", r)

    def test_floor_does_not_excuse_other_failures(self):
        r = self.cells((0.002, 0.003, False), (0.002, 0.010, True))
        self.assertEqual(r["verdict"], "FAIL", r)

    def test_half_percent_minimum(self):
        self.assertEqual(self.cells((0.004, 0.001, True), (0.001, 0.002, True))["verdict"], "PASS")
        self.assertEqual(self.cells((0.006, 0.001, True), (0.001, 0.002, True))["verdict"], "FAIL")


class Floors(unittest.TestCase):
    """resume_judge.verdict over K runs B, on results built by hand."""

    def setUp(self):
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import resume_judge
        self.j = resume_judge

    def res(self, c, *bs):
        runs = dict(A=dict(final=2.0, curve=[]), C=dict(final=c, curve=[]))
        for i, b in enumerate(bs):
            runs["B" if i == 0 else "B%d" % (i + 1)] = dict(final=b, curve=[])
        return dict(runs=runs, checkpoints=[], lossless=False, floor_runs=len(bs))

    def test_largest_run_b(self):
        v = self.j.verdict(self.res(2.03, 2.01, 1.96, 2.02))           # floors 0.5, 2, 1 %
        self.assertAlmostEqual(v["noise_floor"], 0.02)
        self.assertEqual(len(v["noise_floors"]), 3)
        self.assertTrue(v["pass_"], v)                                  # gap 1.5 % <= 2 %
        self.assertIn("the largest of 3 runs B", v["why"])
        v = self.j.verdict(self.res(2.03, 2.01))                        # one run B: 0.5 %
        self.assertFalse(v["pass_"], v)

    def test_diverged_run_b_counts_for_nothing(self):
        v = self.j.verdict(self.res(2.03, 2.01, float("nan"), float("inf")))
        self.assertAlmostEqual(v["noise_floor"], 0.005)
        self.assertFalse(v["pass_"], v)
        v = self.j.verdict(self.res(2.005, float("nan")))
        self.assertEqual(v["noise_floor"], 0.0)
        self.assertTrue(v["pass_"], v)                                  # 0.25 % <= 0.5 %

    def test_ref_with_fewer_runs_b_refused(self):
        test = os.path.join(ROOT, "bench", "resume-test")
        with tempfile.TemporaryDirectory() as tmp:
            one = os.path.join(tmp, "one.json")
            base = [sys.executable, test, "--ckpz", CKPZ, "--quick", "--family", "lstm", "--seed", "1234",
                    "--first", "100", "--every", "100", "--policy", "lossless", "--threads", "1"]
            subprocess.run(base + ["--json", one], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=300)
            r = subprocess.run(base + ["--floor-runs", "2", "--ref", one], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=300)
        self.assertEqual(r.returncode, 2, r.stderr.decode())
        self.assertIn("1 run(s) B, 2 asked (--floor-runs)", r.stderr.decode())


class FromJson(unittest.TestCase):
    """Two runs (one schedule each, both seeds) of the default preset judged together."""

    def setUp(self):
        self.m = load_matrix()
        self.tmp = tempfile.TemporaryDirectory(prefix="test-resume-merge.")
        self.addCleanup(self.tmp.cleanup)

    def run_file(self, name, cells, preset="default", steps=300):
        meta = dict(command="bench/resume-matrix --json %s" % name, date="2026-12-06", torch="1.13",
                    wall_min=3.0, load=[0.5, 1.5], preset=preset, steps=steps)
        out = [judged_cell("auto", fam, sched, every, seed, gap, floor)
               for fam, sched, every, seed, gap, floor in cells]
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            json.dump(dict(meta=meta, cells=out, rows=[]), f)
        return path

    def two_runs(self):
        # The second run names its cells in another order; seed 4321 comes first in it.
        a = self.run_file("const.json", [("gpt", "const", 10, 1234, 0.004, 0.001),
                                         ("gpt", "const", 50, 1234, 0.001, 0.001),
                                         ("cnn", "const", 10, 1234, 0.012, 0.010),
                                         ("gpt", "const", 10, 4321, 0.003, 0.002),
                                         ("gpt", "const", 50, 4321, 0.009, 0.002),
                                         ("cnn", "const", 10, 4321, 0.001, 0.020)])
        b = self.run_file("cosine.json", [("cnn", "cosine", 10, 4321, 0.001, 0.001),
                                          ("gpt", "cosine", 10, 4321, 0.001, 0.001),
                                          ("gpt", "cosine", 10, 1234, 0.002, 0.001),
                                          ("cnn", "cosine", 10, 1234, 0.001, 0.001)])
        return a, b

    def test_rows_in_run_order_seeds_together(self):
        cells, metas = self.m.merge_runs(list(self.two_runs()))
        self.assertEqual(len(metas), 2)
        rows = self.m.rows_of(cells)
        self.assertEqual([(r["family"], r["schedule"], r["interval"]) for r in rows],
                         [("gpt", "const", 10), ("gpt", "const", 50), ("gpt", "cosine", 10),
                          ("cnn", "const", 10), ("cnn", "cosine", 10)])
        self.assertTrue(all(r["seeds"] == "1234, 4321" for r in rows), rows)
        by = {(r["family"], r["schedule"], r["interval"]): r for r in rows}
        self.assertEqual(by[("gpt", "const", 10)]["verdict"], "PASS")
        self.assertEqual(by[("gpt", "const", 50)]["verdict"], "FAIL")      # 0.9 % > max(0.5, 0.2)
        self.assertEqual(by[("cnn", "const", 10)]["verdict"], "PASS")      # 1.2 % <= the other seed's 2 %
        self.assertEqual(by[("gpt", "const", 10)]["restores"], 4)

    def test_refused(self):
        a, b = self.two_runs()
        with self.assertRaisesRegex(self.m.MergeError, "cell auto gpt const every 10 seed 1234 is in .*const.json and in .*const.json"):
            self.m.merge_runs([a, a])
        quick = self.run_file("quick.json", [("lstm", "const", 10, 1234, 0.0, 0.001)], "quick", 110)
        with self.assertRaisesRegex(self.m.MergeError, "quick.json: preset quick, 110 steps, where .*const.json has default"):
            self.m.merge_runs([a, quick])
        junk = os.path.join(self.tmp.name, "junk.json")
        with open(junk, "w") as f:
            json.dump({"cells": []}, f)
        with self.assertRaisesRegex(self.m.MergeError, "junk.json: not a bench/resume-matrix --json file \\(no field 'meta'\\)"):
            self.m.merge_runs([junk])
        with self.assertRaisesRegex(self.m.MergeError, "missing.json: cannot read it"):
            self.m.merge_runs([os.path.join(self.tmp.name, "missing.json")])

    def cli(self, *args):
        r = subprocess.run([sys.executable, MATRIX] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    def test_command_writes_the_presets_table(self):
        a, b = self.two_runs()
        doc = os.path.join(self.tmp.name, "B.md")
        text = ("intro\n<!-- bench/resume-matrix quick begin -->\nquick table\n"
                "<!-- bench/resume-matrix quick end -->\nmiddle\n<!-- bench/resume-matrix default begin -->\n"
                "old table\n<!-- bench/resume-matrix default end -->\noutro\n")
        with open(doc, "w") as f:
            f.write(text)
        out = os.path.join(self.tmp.name, "m.json")
        rc, so, se = self.cli("--from-json", a, b, "--json", out, "--check", "--write-benchmarks", doc)
        self.assertEqual(rc, 1, so + se)                                   # --check: one cell FAILs
        with open(doc) as f:
            new = f.read()
        self.assertTrue(new.startswith("intro\n<!-- bench/resume-matrix quick begin -->\nquick table\n"), new)
        self.assertTrue(new.endswith("<!-- bench/resume-matrix default end -->\noutro\n"), new)
        self.assertNotIn("old table", new)
        self.assertIn("the cells of 2 runs judged together: `bench/resume-matrix --json const.json`", new)
        self.assertIn("| auto | gpt | const | 50 | 1234, 4321 | 4 |", new)
        self.assertIn("- auto: 4 of 5 cells pass", new)
        with open(out) as f:
            res = json.load(f)
        self.assertEqual(len(res["cells"]), 10)
        self.assertEqual(len(res["meta"]["sources"]), 2)
        # a merged file judged again with one more run: the runs it came from are named
        c = self.run_file("more.json", [("lstm", "const", 10, 1234, 0.001, 0.001)])
        md = os.path.join(self.tmp.name, "m.md")
        rc, so, se = self.cli("--from-json", out, c, "--markdown", md)
        self.assertEqual(rc, 0, so + se)
        with open(md) as f:
            text = f.read()
        self.assertIn("the cells of 3 runs judged together: `bench/resume-matrix --json const.json`", text)
        self.assertIn("| auto | lstm | const | 10 | 1234 | 2 |", text)

    def test_command_refusals(self):
        a, _ = self.two_runs()
        rc, so, se = self.cli("--from-json", a, a)
        self.assertEqual(rc, 2, so + se)
        self.assertIn("resume-matrix: --from-json: cell auto gpt const every 10 seed 1234", se)
        rc, so, se = self.cli("--from-json", a, "--quick", "--seeds", "1", "--floor-runs", "2")
        self.assertEqual(rc, 2, so + se)
        self.assertIn("--from-json trains nothing: --quick, --seeds, --floor-runs would choose runs", se)
        doc = os.path.join(self.tmp.name, "nomark.md")
        with open(doc, "w") as f:
            f.write("<!-- bench/resume-matrix quick begin -->\n<!-- bench/resume-matrix quick end -->\n")
        rc, so, se = self.cli("--from-json", a, "--write-benchmarks", doc)
        self.assertNotEqual(rc, 0)
        self.assertIn("has not one <!-- bench/resume-matrix default begin -->", se)


class Budget(unittest.TestCase):
    def test_roles_add_up_to_the_file(self):
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import resume_budget
        import torch
        g = torch.Generator().manual_seed(3)
        w = torch.randn(96, 128, generator=g)
        st = {0: dict(step=torch.tensor(5.0), exp_avg=torch.randn(96, 128, generator=g) * 1e-3,
                      exp_avg_sq=torch.rand(96, 128, generator=g) * 1e-6),
              1: dict(step=torch.tensor(5.0), exp_avg=torch.randn(16, generator=g),
                      exp_avg_sq=torch.rand(16, generator=g))}
        ck = {"model": {"lin.weight": w, "lin.bias": torch.zeros(16)},
              "optimizer": {"state": st, "param_groups": [{"lr": 1e-3, "params": [0, 1]}]}}
        with tempfile.TemporaryDirectory() as tmp:
            pt, cz = os.path.join(tmp, "a.pt"), os.path.join(tmp, "a.pt.ckpz")
            torch.save(ck, pt)
            subprocess.run([CKPZ, "--lossy=auto", "-o", cz, pt], check=True)
            b = resume_budget.budget(CKPZ, cz, n_params=96 * 128 + 16)
            listing = subprocess.run([CKPZ, "-l", "-v", cz], stdout=subprocess.PIPE,
                                     check=True).stdout.decode()
            size = os.path.getsize(cz)
        r = b["roles"]
        self.assertEqual(b["file_bytes"], size)
        self.assertEqual(sum(x["bytes"] for x in r.values()), size)
        self.assertEqual(r["weight"]["elems"], 96 * 128)
        self.assertEqual(r["exp_avg"]["elems"], 96 * 128)
        self.assertEqual(r["exp_avg_sq"]["elems"], 96 * 128)
        self.assertEqual(r["exact"]["elems"], 16 * 3 + 2)      # bias, two 1-D moments, steps
        for role, name in (("weight", "model.lin.weight"), ("exp_avg", "optimizer.state.0.exp_avg")):
            row = next(x for x in listing.splitlines() if " %s " % name in x)
            self.assertIn(" %d " % r[role]["bytes"], row, (role, row))
        self.assertGreater(r["overhead"]["bytes"], 0)
        self.assertAlmostEqual(b["bits_per_param"], 8 * size / (96 * 128 + 16))
        self.assertAlmostEqual(sum(x["bits_per_param"] for x in r.values()), b["bits_per_param"])


class Joint(unittest.TestCase):
    def pair(self, exact_step):
        import torch
        g = torch.Generator().manual_seed(7)
        lr, wd, k, b1, b2, eps = 1e-3, 0.1, 10, 0.9, 0.95, 1e-8

        def state(step, m, v):
            return {"step": torch.tensor(float(step)), "exp_avg": m, "exp_avg_sq": v}
        w_b = torch.randn(64, 96, generator=g, dtype=torch.float64) * 0.02
        m_b, m_n = (torch.randn(64, 96, generator=g, dtype=torch.float64) * 1e-3 for _ in "ab")
        v_n = torch.rand(64, 96, generator=g, dtype=torch.float64) * 1e-6 + 1e-8
        u = (m_n / (1 - b1 ** 30)) / ((v_n / (1 - b2 ** 30)).sqrt() + eps)
        d = -lr * k * (u + wd * w_b) if exact_step else torch.randn(64, 96, generator=g) * 1e-3
        grp = dict(lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, params=[0, 1])
        bn = torch.ones(96)
        mk = lambda w, t, m, v: ({"conv.weight": w, "bn.running_mean": bn, "bn.weight": bn},  # noqa
                                 {"state": {0: state(t, m, v), 1: state(t, bn * 0, bn)},
                                  "param_groups": [grp]})
        return mk(w_b, 20, m_b, v_n), mk(w_b + d, 30, m_n, v_n)

    def rows(self, exact_step):
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import resume_joint
        base, nxt = self.pair(exact_step)
        self.assertEqual([n for _, n, _ in resume_joint.param_map(*nxt)], ["conv.weight", "bn.weight"])
        rows, n_params = resume_joint.analyse_pair(base, nxt)
        self.assertEqual(n_params, 64 * 96 + 96)
        return {(r["kind"], r["pred"]): r for r in rows}

    def test_adam_step_predicted(self):
        r = self.rows(True)[("d", "p1")]
        self.assertGreater(r["c_ex"], 0.999)
        self.assertAlmostEqual(r["a"], 1.0, places=3)
        self.assertGreater(r["b_ex"], 4.0)

    def test_unrelated_change_not_predicted(self):
        r = self.rows(False)
        self.assertLess(abs(r[("d", "p1")]["c_ex"]), 0.1)
        self.assertLess(abs(r[("d", "ls3")]["b_ex"]), 0.1)


if __name__ == "__main__":
    unittest.main()
