"""Tests of bench/ddp_hooks_table.py, the figures bench/ddp-hooks reports per cell (bytes
ratio, median step, time to the target loss, final loss within the noise floor) and its
rewrite of BENCHMARKS.md between markers, against records made by hand.

    /usr/bin/python3 tests/python/test_ddp_hooks_table.py -v

No torch, no ckpz build, no namespaces.
"""
import os
import shutil
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(_HERE, "..", "..", "bench")))

import ddp_hooks_table as tbl  # noqa: E402

STEPS = 10


def rec(hook, seed, losses, seconds=0.1, bytes_per_step=1000.0, load=(1.0, 2.0), heldout="last"):
    """A run's record; its held-out loss the last SMOOTH steps' mean unless given (None: a
    record from before the bench had one)."""
    seconds = seconds if isinstance(seconds, list) else [seconds] * STEPS
    if heldout == "last":
        heldout = sum(losses[-tbl.SMOOTH:]) / len(losses[-tbl.SMOOTH:])
    return {"torch": "2.13", "model": "gpt", "world": 2, "rate": "1gbit", "hook": hook, "seed": seed,
            "losses": list(losses), "seconds": seconds, "bytes_per_step": bytes_per_step, "load": list(load),
            "heldout": heldout}


def flat(v):
    return [v] * STEPS


class HookNamesTest(unittest.TestCase):
    def test_lowrank_names(self):
        import importlib.machinery

        path = os.path.join(_HERE, "..", "..", "bench", "ddp-hooks")
        bench = importlib.machinery.SourceFileLoader("ddp_hooks_bench", path).load_module()
        for name in ("ckpz-lowrank:8", "ckpz-lowrank:20:4", "ckpz-lowrank:20:4:raw", "ckpz-lowrank:8:raw"):
            self.assertTrue(bench.hook_ok(name), name)
        for name in ("ckpz-lowrank:8:5", "ckpz-lowrank:8:raw:4", "ckpz-lowrank:0:4", "ckpz-lowrank:8:4:4",
                     "ckpz-lowrank:x:4"):
            self.assertFalse(bench.hook_ok(name), name)


class SmoothTest(unittest.TestCase):
    def test_window(self):
        self.assertEqual(tbl.smoothed([5, 3, 1]), [5, 4, 3])
        s = tbl.smoothed(list(range(10)))
        self.assertEqual(s[9], (5 + 6 + 7 + 8 + 9) / 5)  # SMOOTH = 5: the last five only
        self.assertEqual(s[4], 2)

    def test_time_to(self):
        r = rec("none", 0, [10, 8, 6, 4, 2, 2, 2, 2, 2, 2], seconds=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        # smoothed: 10, 9, 8, 7, 6, 4.4, 3.2, 2.4, 2, 2
        self.assertEqual(tbl.time_to(r, 6.0), 1 + 2 + 3 + 4 + 5)
        self.assertEqual(tbl.time_to(r, 4.4), 21)
        self.assertIsNone(tbl.time_to(r, 1.9))


class CellTest(unittest.TestCase):
    def cell(self, records, warmup=2):
        table = tbl.cells(records, warmup)
        self.assertEqual(len(table), 1)
        return table[0][1]

    def test_target_floor_and_within(self):
        # no hook: final losses 2.0 and 2.1 (spread 0.1, floor 0.1 / 2.05), smoothed at step 8 of 10
        base = [rec("none", 0, flat(2.0), bytes_per_step=4000), rec("none", 1, flat(2.1), bytes_per_step=4000)]
        q8 = [rec("q8", 0, flat(2.1), bytes_per_step=1000), rec("q8", 1, flat(2.1), bytes_per_step=1000)]
        bad = [rec("bad", 0, flat(2.2), bytes_per_step=100), rec("bad", 1, flat(2.2), bytes_per_step=100)]
        c = self.cell(base + q8 + bad)
        self.assertEqual(c["target_step"], 8)
        self.assertAlmostEqual(c["target"], 2.05)
        self.assertAlmostEqual(c["floor"], 0.1 / 2.05)
        f = c["figures"]
        self.assertAlmostEqual(f["q8"]["vs_bytes"], 4.0)
        self.assertAlmostEqual(f["bad"]["vs_bytes"], 40.0)
        self.assertAlmostEqual(f["q8"]["vs_loss"], 2.1 / 2.05)
        self.assertTrue(f["q8"]["within"])  # 2.4 % above: over 1 %, under the floor (4.9 %)
        self.assertFalse(f["bad"]["within"])  # 7.3 % above

    def test_within_is_max_of_one_percent_and_floor(self):
        base = [rec("none", 0, flat(2.0)), rec("none", 1, flat(2.0))]  # no spread: the 1 % rule
        ok = [rec("ok", s, flat(2.019)) for s in range(2)]
        over = [rec("over", s, flat(2.021)) for s in range(2)]
        lower = [rec("lower", s, flat(1.5)) for s in range(2)]
        f = self.cell(base + ok + over + lower)["figures"]
        self.assertEqual(self.cell(base)["floor"], 0.0)
        self.assertTrue(f["ok"]["within"])
        self.assertFalse(f["over"]["within"])
        self.assertTrue(f["lower"]["within"])  # a lower loss is never worse

    def test_median_step_after_warmup(self):
        base = [rec("none", 0, flat(1.0), seconds=[9] * 6 + [0.1] * 4)]
        slow = [rec("slow", 0, flat(1.0), seconds=[0.1] * 6 + [0.3] * 3 + [5])]
        f = self.cell(base + slow, warmup=6)["figures"]
        self.assertAlmostEqual(f["none"]["step_s"], 0.1)  # the warm-up's 9 s left out
        self.assertAlmostEqual(f["slow"]["step_s"], 0.3)

    def test_time_to_target_over_seeds(self):
        base = [rec("none", s, [3, 3, 3, 3, 3, 1, 1, 1, 1, 1]) for s in range(3)]  # target: smoothed at step 8 = 1.8
        never = [rec("never", s, flat(2.5)) for s in range(3)]
        some = [rec("some", 0, flat(1.0)), rec("some", 1, flat(1.0)), rec("some", 2, flat(2.5))]
        few = [rec("few", 0, flat(1.0)), rec("few", 1, flat(2.5)), rec("few", 2, flat(2.5))]
        f = self.cell(base + never + some + few)["figures"]
        self.assertIsNone(f["few"]["to_target"])  # 1 of 3 seeds: the median never reached it
        self.assertEqual(f["few"]["reached"], 1)
        self.assertAlmostEqual(f["none"]["to_target"], 0.8)  # smoothed 1.8 first at step 8
        self.assertIsNone(f["never"]["to_target"])
        self.assertEqual(f["never"]["reached"], 0)
        self.assertAlmostEqual(f["some"]["to_target"], 0.1)  # 2 of 3 seeds: median of 0.1, 0.1, inf
        self.assertEqual(f["some"]["reached"], 2)
        lines, _ = tbl.markdown(tbl.cells(base + never + some, 2), ["none", "never", "some"], {})
        self.assertIn("| - (0/3) |", lines[3])
        self.assertIn("| 0.1 (2/3) |", lines[4])

    def test_load_range(self):
        f = self.cell([rec("none", 0, flat(1.0), load=(3.0, 5.5)), rec("none", 1, flat(1.0), load=(4.0, 2.5))])
        self.assertEqual(f["figures"]["none"]["load"], (2.5, 5.5))


class MergeTest(unittest.TestCase):
    def saved(self, hooks, records, steps=STEPS, warmup=2):
        return {"args": {"hooks": hooks, "steps": steps, "warmup": warmup}, "records": records}

    def test_runs_of_several_files(self):
        a = self.saved(["none", "q8"], [rec("none", 0, flat(2.0)), rec("q8", 0, flat(2.0))])
        b = self.saved(["none", "fp16", "q8"], [rec("none", 0, flat(9.0)), rec("none", 1, flat(2.2)),
                                                rec("fp16", 0, flat(2.0)), dict(rec("none", 0, flat(3.0)), world=4)])
        records, hooks, steps, warmup, dropped = tbl.merge([("a", a), ("b", b)])
        self.assertEqual(hooks, ["none", "q8", "fp16"])
        self.assertEqual((steps, warmup, dropped), (STEPS, 2, 1))
        # b's none of seed 0 (2 ranks) is a's run again: left out, not a third seed
        self.assertEqual([(r["hook"], r["seed"], r["world"], r["losses"][0]) for r in records],
                         [("none", 0, 2, 2.0), ("q8", 0, 2, 2.0), ("none", 1, 2, 2.2), ("fp16", 0, 2, 2.0),
                          ("none", 0, 4, 3.0)])

    def test_refused(self):
        a = self.saved(["none"], [rec("none", 0, flat(2.0))])
        self.assertRaises(ValueError, tbl.merge, [("a", a), ("b", self.saved(["none"], [], steps=STEPS + 1))])
        self.assertRaises(ValueError, tbl.merge, [("a", a), ("b", self.saved(["none"], [], warmup=3))])
        self.assertRaises(ValueError, tbl.merge, [("a", {"records": []})])

    def test_overloaded(self):
        # 2 ranks on 2 cores: a load of 3.0 is 1.0 beyond the ranks (half the cores: still fine)
        self.assertNotIn("not meaningful", tbl.overloaded([rec("none", 0, flat(1), load=(1.0, 3.0))], 2))
        self.assertIn("at most 1.0", tbl.overloaded([rec("none", 0, flat(1), load=(1.0, 3.0))], 2))
        self.assertEqual(tbl.overloaded([], 2), "")
        self.assertIn("not meaningful", tbl.overloaded([rec("none", 0, flat(1), load=(1.0, 3.5))], 2))
        four = dict(rec("none", 0, flat(1), load=(4.2, 4.4)), world=4)  # 4 ranks alone on 2 cores
        self.assertNotIn("not meaningful", tbl.overloaded([four], 2))
        loaded = dict(rec("none", 0, flat(1), load=(9.0, 9.0)), rate="100mbit")
        said = tbl.overloaded([four, loaded], 2)  # per cell: the quiet one named
        self.assertIn("not meaningful but in the cells where it stayed within 1 (torch 2.13 gpt 4 ranks 1gbit)", said)

    def test_final_heldout(self):
        r = rec("none", 0, [9, 9, 9, 9, 9, 1, 2, 3, 4, 5], heldout=None)
        self.assertEqual(tbl.final(r), 3)  # the last SMOOTH steps
        self.assertEqual(tbl.final(dict(r, heldout=2.5)), 2.5)

    def test_train_loss_cells_apart(self):
        """Runs without a held-out loss (older records) are cells of their own: a held-out
        loss is never compared with a last steps' mean, and a newer run of the same seed
        and hook is not left out as a repeat of an older one without it."""
        old = [rec("none", 0, flat(2.0), heldout=None), rec("ckpz-q8", 0, flat(2.0), heldout=None)]
        new = [rec("none", 0, flat(2.0), heldout=1.0), rec("ckpz-q4", 0, flat(2.0), heldout=1.05)]
        records, _, _, _, dropped = tbl.merge([("old.json", {"args": {"hooks": ["none", "ckpz-q8"]}, "records": old}),
                                               ("new.json", {"args": {"hooks": ["none", "ckpz-q4"]}, "records": new})])
        self.assertEqual(dropped, 0)
        table = dict(tbl.cells(records, 0))
        self.assertEqual(sorted(table), [("2.13", "gpt", 2, "1gbit"), ("2.13", "gpt (train loss)", 2, "1gbit")])
        q4 = table[("2.13", "gpt", 2, "1gbit")]["figures"]["ckpz-q4"]
        self.assertAlmostEqual(q4["vs_loss"], 1.05)  # against the held-out none, not the 2.0 mean
        self.assertEqual(sorted(table[("2.13", "gpt (train loss)", 2, "1gbit")]["figures"]), ["ckpz-q8", "none"])


class MarkdownTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "B.md")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def read(self):
        with open(self.path) as f:
            return f.read()

    def test_rows_order_and_skipped(self):
        records = [rec("none", 0, flat(1.0)), rec("ckpz-q8", 0, flat(1.0), bytes_per_step=250.0)]
        records.append(dict(rec("none", 0, flat(1.0)), rate="100mbit"))
        lines, notes = tbl.markdown(tbl.cells(records, 2), ["none", "ckpz-q8"], {("2.13 (py)", "bf16"): "no CPU"})
        self.assertEqual([line.split(" | ")[3] for line in lines[2:]], ["100mbit", "1gbit", "1gbit"])
        self.assertIn("| ckpz-q8 | 250 B | 4.0x |", lines[4])
        self.assertIn("- not run: bf16 on 2.13 (py): no CPU", notes)

    def test_auto_choices_noted(self):
        # ckpz-auto's records carry what it chose; the notes say it per cell, seeds counted
        records = [rec("none", 0, flat(1.0))]
        records += [dict(rec("ckpz-auto", s, flat(1.0)), auto={"choice": c}) for s, c in enumerate(["q4", "q8", "q4"])]
        records.append(rec("ckpz-q8", 0, flat(1.0)))  # no auto record: no note
        _, notes = tbl.markdown(tbl.cells(records, 2), ["none", "ckpz-auto", "ckpz-q8"], {})
        chose = [n for n in notes if "chose" in n]
        self.assertEqual(chose, ["- torch 2.13, gpt, 2 ranks, 1gbit: ckpz-auto chose q4 (2 of 3 seeds), "
                                 "q8 (1 of 3 seeds)."])

    def test_write_between_markers(self):
        with open(self.path, "w") as f:
            f.write("# top\n\n%s\nold table\n%s\n\n## after\n" % (tbl.BEGIN, tbl.END))
        tbl.write_benchmarks(self.path, ["head"], ["| a |"], ["- note"])
        text = self.read()
        self.assertEqual(text, "# top\n\n%s\nhead\n\n| a |\n\n- note\n%s\n\n## after\n" % (tbl.BEGIN, tbl.END))
        tbl.write_benchmarks(self.path, ["head 2"], ["| b |"], [])
        self.assertEqual(self.read().count(tbl.BEGIN), 1)
        self.assertIn("head 2", self.read())
        self.assertNotIn("| a |", self.read())

    def test_write_appends_a_section_without_markers(self):
        with open(self.path, "w") as f:
            f.write("# top\n")
        tbl.write_benchmarks(self.path, ["head"], ["| a |"], [])
        text = self.read()
        self.assertTrue(text.startswith("# top\n\n## DDP gradient compression"))
        self.assertTrue(text.endswith(tbl.END + "\n"))


if __name__ == "__main__":
    unittest.main()
