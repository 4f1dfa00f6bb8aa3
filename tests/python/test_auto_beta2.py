"""lossy="auto" and Adam's beta2: the CLI on a torch.save file codes each tensor as
ckpz.save(lossy="auto") of the same state does (issue 32).

ckpz.save reads each optimizer's param_groups from the object (python/ckpz/_auto.py) and
states them as policy rules; the library reads the same groups from the file's pickle
(lib/formats/pickle.c) for the CLI and compress_file. Checked on a state of two AdamW
optimizers, the first with two param groups (betas (0.9, 0.95) and (0.9, 0.999)):
  - the same torch.save file coded by the CLI (no rule) and by compress_file with
    ckpz.save's rules restores to the same bytes, in the zip and the legacy format, and
    unlike a coding told beta2 0.999 everywhere where a group's beta2 is 0.95 (so the
    comparison fails when the library does not read them);
  - `ckpz -l` of the CLI's file and of ckpz.save's shows, per tensor, the same lossy
    mode, bound and role, and beta2 0.95 / 0.999 from the group that lists it;
  - ckpz.distributed.save states the same beta2 for its shards' names;
  - hostile param_groups (betas of the wrong type or length or out of range, params not
    ints, a group that is not a dict, a params list of a million ints) compress and
    restore without error, no beta2 taken from them.
Run by ctest as python_auto_beta2 (torch 1.13) and python_auto_beta2_torch2.
"""

import fnmatch
import os
import re
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import package_under_test  # noqa: E402

package_under_test.use_package()

import torch  # noqa: E402

import ckpz  # noqa: E402
from ckpz import _auto, _dist_state  # noqa: E402

torch.set_num_threads(1)


run = package_under_test.run_cli


def state_of_two_optimizers():
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(128, 96), torch.nn.Linear(96, 96), torch.nn.Linear(96, 64))
    head = torch.nn.Linear(64, 128)
    opt = torch.optim.AdamW([{"params": model[0].parameters()},
                             {"params": list(model[1].parameters()) + list(model[2].parameters()),
                              "betas": (0.9, 0.999)}], lr=1e-3, betas=(0.9, 0.95))
    opt2 = torch.optim.AdamW(head.parameters(), lr=3e-4, betas=(0.9, 0.95))
    for _ in range(3):
        loss = head(model(torch.randn(16, 128))).square().mean()
        opt.zero_grad()
        opt2.zero_grad()
        loss.backward()
        opt.step()
        opt2.step()
    return {"model": model.state_dict(), "head": head.state_dict(), "optimizer": opt.state_dict(),
            "optimizer2": opt2.state_dict()}


def listing(path, *more):
    """{name: (lossy column, role, beta2 note)} of `ckpz -l`'s tensors."""
    out = {}
    for line in run("-l", path, *more).splitlines():
        role = re.search(r"\s(exact|weight|exp_avg_sq|exp_avg)  ([^;]*)(; beta2 .*)?$", line)
        mode = re.search(r"\s(lossless|prel \S+|change-rel \S+|abs \S+|rel \S+|affine)\s", line)
        if role and mode:
            out[line.split()[1]] = (mode.group(1), role.group(1), role.group(3) or "")
    return out


class Beta2Test(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def restored(self, src, name, **kw):
        """src compressed to NAME.ckpz by compress_file (kw) or, without kw, by the CLI;
        the restored bytes."""
        dst, back = self.path(name + ".ckpz"), self.path(name + ".back")
        if kw:
            ckpz.compress_file(src, dst, **kw)
        else:
            run("-q", "-f", "--lossy=auto", src, "-o", dst)
        ckpz.decompress_file(dst, back)
        with open(back, "rb") as f:
            return f.read()

    def check_same_coding(self, legacy):
        state = state_of_two_optimizers()
        pt = self.path("state.pt")
        torch.save(state, pt, _use_new_zipfile_serialization=not legacy)
        rules = _auto.beta2_rules(state, "")
        self.assertIn("optimizer.state.0.* auto beta2 0.95", rules)
        self.assertIn("optimizer.state.2.* auto beta2 0.999", rules)
        self.assertIn("optimizer2.state.* auto beta2 0.95", rules)
        # ckpz.distributed.save states the same rules for the names its shards give
        _, flat = _dist_state.flatten(torch, state)
        pats = [r.split()[0] for r in rules.splitlines()]
        for name in flat:
            if name.endswith(".exp_avg_sq"):
                self.assertTrue(any(fnmatch.fnmatchcase(name, p) for p in pats), name)
        by_cli = self.restored(pt, "cli")
        by_rules = self.restored(pt, "rules", lossy="auto", policy=rules)
        slow = self.restored(pt, "slow", lossy="auto", policy="* auto beta2 0.999")
        self.assertEqual(len(by_cli), os.path.getsize(pt))
        self.assertTrue(by_cli == by_rules, "the CLI's coding differs from ckpz.save's rules (legacy %s)" % legacy)
        self.assertNotEqual(by_cli, slow, "beta2 0.95 made no difference: the test cannot tell")
        back = torch.load(self.path("cli.back"))
        for k in ("optimizer", "optimizer2"):
            for i, st in back[k]["state"].items():
                self.assertTrue(bool((st["exp_avg_sq"] > 0).all()), (k, i))

    def test_same_coding_zip(self):
        self.check_same_coding(False)

    def test_same_coding_legacy(self):
        self.check_same_coding(True)

    def test_listing(self):
        state = state_of_two_optimizers()
        pt, by_save, by_cli = self.path("s.pt"), self.path("save.ckpz"), self.path("cli.ckpz")
        torch.save(state, pt)
        ckpz.save(state, by_save, lossy="auto")
        run("-q", "-f", "--lossy=auto", pt, "-o", by_cli)
        a, b = listing(by_cli), listing(by_save)
        self.assertGreater(len(a), 20)
        self.assertEqual(a, b)
        want = {"optimizer.state.0.exp_avg_sq": "; beta2 0.95 from optimizer.param_groups[0]",
                "optimizer.state.2.exp_avg_sq": "; beta2 0.999 from optimizer.param_groups[1]",
                "optimizer.state.4.exp_avg_sq": "; beta2 0.999 from optimizer.param_groups[1]",
                "optimizer2.state.0.exp_avg_sq": "; beta2 0.95 from optimizer2.param_groups[0]"}
        for name, note in want.items():
            self.assertEqual(a[name][1:], ("exp_avg_sq", note), name)
        self.assertEqual(a["optimizer.state.0.exp_avg"][2], "")  # shown where it acts only
        # a delta file's pickle is coded against its base: -l says so, -l --base reads it
        delta = self.path("delta.ckpz")
        run("-q", "-f", "--lossy=auto", "--base", by_cli, pt, "-o", delta)
        self.assertIn("beta2 not shown: the pickle is coded against the base", run("-l", delta))
        self.assertEqual({n: v[1:] for n, v in listing(delta, "--base", by_cli).items()},
                         {n: v[1:] for n, v in a.items()})

    def test_distributed_save(self):
        """ckpz.distributed.save (a world of one) codes the exp_avg_sq of a beta2-0.95
        group unlike a save told 0.999 everywhere, and of a 0.999 group alike."""
        import ckpz.distributed
        state = state_of_two_optimizers()
        ckpz.distributed.save(state, self.path("d1"), lossy="auto")
        ckpz.distributed.save(state, self.path("d2"), lossy="auto", policy="* auto beta2 0.999")
        a, b = ckpz.distributed.load(self.path("d1")), ckpz.distributed.load(self.path("d2"))
        fast, slow = a["optimizer"]["state"], b["optimizer"]["state"]
        self.assertFalse(torch.equal(fast[0]["exp_avg_sq"], slow[0]["exp_avg_sq"]))
        self.assertFalse(torch.equal(a["optimizer2"]["state"][0]["exp_avg_sq"],
                                     b["optimizer2"]["state"][0]["exp_avg_sq"]))
        self.assertTrue(torch.equal(fast[2]["exp_avg_sq"], slow[2]["exp_avg_sq"]))

    def test_hostile_param_groups(self):
        state = state_of_two_optimizers()
        groups = state["optimizer"]["param_groups"]
        hostile = [
            [dict(groups[0], betas="0.9, 0.95")],
            [dict(groups[0], betas=(0.9, 0.95, 0.97))],
            [dict(groups[0], betas=(0, 1))],
            [dict(groups[0], betas=(0.9, 1.5))],
            [dict(groups[0], betas=(0.9, float("nan")))],
            [dict(groups[0], betas=(0.9, torch.tensor(0.95)))],
            [dict(groups[0], params=["0", 1.5, True, -1])],
            [dict(groups[0], params={0: 0})],
            [5, "x", None],
            {"0": groups[0]},
            [dict(groups[0], params=list(range(10 ** 6)), betas=(0.9, 0.5))] + [dict(groups[0], betas=(0.9, 0.5))] * 300,
        ]
        pt = self.path("h.pt")
        for i, pg in enumerate(hostile):
            bad = dict(state, optimizer=dict(state["optimizer"], param_groups=pg))
            torch.save(bad, pt)
            out = self.path("h%d.ckpz" % i)
            run("-q", "-f", "--lossy=auto", pt, "-o", out)
            lst = listing(out)
            shown = {n: v[2] for n, v in lst.items() if n.startswith("optimizer.") and v[2]}
            if i < len(hostile) - 1:
                self.assertEqual(shown, {}, "case %d" % i)
            else:  # a real beta2 (0.5) in a group with a million params: read, and bounded
                self.assertEqual(shown.get("optimizer.state.0.exp_avg_sq"),
                                 "; beta2 0.5 from optimizer.param_groups[0]")
            ckpz.decompress_file(out, self.path("h.back"))
            self.assertEqual(os.path.getsize(self.path("h.back")), os.path.getsize(pt))


if __name__ == "__main__":
    unittest.main()
