"""lossy="auto" and the learning rate: a chain's first file (no base) codes each weight
within one optimizer step, the lr the file's param_groups state (issue 32).

Where a torch.save file's optimizer groups all state one lr (lib/formats/pickle.c),
`--lossy=auto` codes the weights of a file without a base as `abs K x lr` (K the knob's
steps: 1 at the default, 0.25 tight, 4 aggressive); where they state none or several, as
before (`pointwise-rel`). Checked through the CLI and ckpz.save on an AdamW state:
  - one lr in two groups: every weight `abs LR`, restored within LR of the original and
    not equal to it; the knob scales it; Adam's moments and the exact tensors as before;
  - an lr far above a step's size: at most 1/16 of each weight tensor's RMS;
  - two lrs, no optimizer, hostile lr values (a string, NaN, <= 0, huge, a tensor, a
    bool): `pointwise-rel`;
  - a delta file (--base) codes the weights against their change, not by lr;
  - ckpz.save(lossy="auto") lists what the CLI's file lists;
  - an lr the pickle does not carry as a number (one held as a tensor; also safetensors
    and DCP, which have no param_groups the library reads) comes from ckpz.save's and
    ckpz.distributed.save's catch-all rule "* auto lr L", stated from the object's
    optimizers where their Adam groups all state one lr.
Run by ctest as python_auto_lr (torch 1.13) and python_auto_lr_torch2.
"""

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

torch.set_num_threads(1)

WEIGHTS = ("model.0.weight", "model.1.weight", "model.2.weight")


run = package_under_test.run_cli


def trained_state(lrs=(2e-3, 2e-3)):
    """A model of three 4096+-element matrices and an AdamW of two groups at lrs, a few
    steps in."""
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Linear(128, 96), torch.nn.Linear(96, 96), torch.nn.Linear(96, 64))
    opt = torch.optim.AdamW([{"params": model[0].parameters(), "lr": lrs[0]},
                             {"params": list(model[1].parameters()) + list(model[2].parameters()),
                              "lr": lrs[1]}], betas=(0.9, 0.95))
    for _ in range(3):
        loss = model(torch.randn(16, 128)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict()}


def modes(path, *more):
    """{name: lossy column} of `ckpz -l`'s tensors."""
    out = {}
    for line in run("-l", path, *more).splitlines():
        m = re.search(r"\s(lossless|prel \S+|change-rel \S+|abs \S+|rel \S+)\s", line)
        if m and len(line.split()) > 1:
            out[line.split()[1]] = m.group(1)
    return out


class FirstFileLr(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def code(self, state, name, lossy="--lossy=auto", base=None):
        pt, out = self.path(name + ".pt"), self.path(name + ".ckpz")
        torch.save(state, pt)
        run("-q", "-f", lossy, pt, "-o", out, *(["--base", base] if base else []))
        return out

    def test_one_lr(self):
        state = trained_state()
        out = self.code(state, "one")
        m = modes(out)
        for w in WEIGHTS:
            self.assertEqual(m[w], "abs 0.002", w)
        self.assertEqual(m["model.0.bias"], "lossless")
        self.assertTrue(m["optimizer.state.0.exp_avg_sq"].startswith("prel"))
        run("-q", "-f", "-d", out, "-o", self.path("one.back"))
        back = torch.load(self.path("one.back"))
        for w in WEIGHTS:
            a, b = state["model"][w[len("model."):]], back["model"][w[len("model."):]]
            err = (a - b).abs().max().item()
            self.assertLessEqual(err, 2e-3 * (1 + 1e-6), w)
            self.assertGreater(err, 0, w + " came back exact: nothing was coded by lr")
        for knob, want in (("tight", "abs 0.0005"), ("aggressive", "abs 0.008"), ("2", "abs 0.004")):
            self.assertEqual(modes(self.code(state, knob, "--lossy=auto:" + knob))[WEIGHTS[0]], want, knob)

    def test_no_single_lr(self):
        two = trained_state((2e-3, 1e-3))
        self.assertTrue(modes(self.code(two, "two"))[WEIGHTS[0]].startswith("prel"))
        alone = {"model": trained_state()["model"]}
        self.assertTrue(modes(self.code(alone, "alone"))[WEIGHTS[0]].startswith("prel"))

    def test_hostile_lr(self):
        state = trained_state()
        pg = state["optimizer"]["param_groups"]
        for i, lr in enumerate(["0.002", float("nan"), 0.0, -2e-3, 1e40, float("inf"), torch.tensor(2e-3), True]):
            bad = dict(state, optimizer=dict(state["optimizer"], param_groups=[dict(g, lr=lr) for g in pg]))
            m = modes(self.code(bad, "h%d" % i))
            self.assertTrue(m[WEIGHTS[0]].startswith("prel"), (lr, m[WEIGHTS[0]]))

    def test_lr_not_a_step(self):
        """An lr far above what one step moves a weight (LAMB and LARS scale theirs by the
        weights' norm): the bound stops at 1/16 of each weight tensor's RMS."""
        state = trained_state()
        pg = state["optimizer"]["param_groups"]
        big = dict(state, optimizer=dict(state["optimizer"], param_groups=[dict(g, lr=0.5) for g in pg]))
        out = self.code(big, "big")
        m = modes(out)
        run("-q", "-f", "-d", out, "-o", self.path("big.back"))
        back = torch.load(self.path("big.back"))
        for w in WEIGHTS:
            self.assertTrue(m[w].startswith("abs ") and m[w] != "abs 0.5", (w, m[w]))
            a = state["model"][w[len("model."):]]
            err = (a - back["model"][w[len("model."):]]).abs().max().item()
            self.assertLessEqual(err, a.square().mean().sqrt().item() / 16 * (1 + 1e-5), w)
            self.assertGreater(err, 0, w)

    def test_delta_file(self):
        state = trained_state()
        first = self.code(state, "first")
        later = dict(state, model={k: v + 1e-3 for k, v in state["model"].items()})
        m = modes(self.code(later, "second", base=first))
        for w in WEIGHTS:
            self.assertTrue(m[w].startswith("change-rel"), (w, m[w]))

    def test_ckpz_save(self):
        state = trained_state()
        out = self.path("save.ckpz")
        ckpz.save(state, out, lossy="auto")
        self.assertEqual(modes(out), modes(self.code(state, "cli")))
        self.assertEqual(modes(out)[WEIGHTS[0]], "abs 0.002")

    def test_rule_from_the_object(self):
        """ckpz.save states the object's one lr in its catch-all rule: an lr held as a
        tensor, which the pickle does not carry as a number, still bounds the weights."""
        from ckpz import _lib
        state = trained_state()
        self.assertTrue(_lib.lossy_policy("auto", None, state).endswith("* auto lr 0.002\n"))
        self.assertTrue(_lib.lossy_policy("auto:2", None, trained_state((2e-3, 1e-3))).endswith("* auto 2\n"))
        pg = state["optimizer"]["param_groups"]
        held = dict(state, optimizer=dict(state["optimizer"], param_groups=[dict(g, lr=torch.tensor(2e-3)) for g in pg]))
        self.assertTrue(modes(self.code(held, "held"))[WEIGHTS[0]].startswith("prel"))  # the CLI reads no tensor
        out = self.path("held.ckpz")
        ckpz.save(held, out, lossy="auto")
        self.assertEqual(modes(out)[WEIGHTS[0]], "abs 0.002")

        class Odd:  # an object of the user's with item() and numel(), which fail
            def numel(self):
                return 1

            def item(self):
                raise RuntimeError("not a number")

        # (lr, betas, a beta2 rule expected): no lr rule in any, and no exception
        for lr, betas, b2 in ((torch.tensor([2e-3, 2e-3]), (0.9, 0.95), True), (Odd(), (0.9, 0.95), True),
                              (2e-3, (0.9, torch.tensor([0.95, 0.95])), False), (2e-3, (0.9, Odd()), False)):
            odd = dict(state, optimizer=dict(state["optimizer"], param_groups=[dict(g, lr=lr, betas=betas) for g in pg]))
            rules = _lib.lossy_policy("auto", None, odd)
            self.assertNotIn(" lr ", rules)
            self.assertEqual("beta2" in rules, b2, rules)

    def test_distributed_save(self):
        """ckpz.distributed.save (a world of one): a shard's pickle keeps the optimizer under
        "skeleton.", whose float lr the library reads for the shard's weights; an lr held
        as a tensor it cannot read, and the rule from the object gives the bound all the
        same (without the rule: pointwise-rel)."""
        import ckpz.distributed
        from ckpz import _auto

        def weight_modes(d):
            m = {}
            for f in sorted(os.listdir(d)):
                if f.endswith(".ckpz"):
                    m.update(modes(os.path.join(d, f)))
            return {n: v for n, v in m.items() if n.endswith(WEIGHTS[1][len("model."):])}

        state = trained_state()
        pg = state["optimizer"]["param_groups"]
        held = dict(state, optimizer=dict(state["optimizer"], param_groups=[dict(g, lr=torch.tensor(2e-3)) for g in pg]))
        for name, st in (("float", state), ("held", held)):
            d = self.path(name)
            ckpz.distributed.save(st, d, lossy="auto")
            got = weight_modes(d)
            self.assertTrue(got and all(v == "abs 0.002" for v in got.values()), (name, got))
            back = ckpz.distributed.load(d)
            a, b = state["model"]["1.weight"], back["model"]["1.weight"]
            self.assertLessEqual((a - b).abs().max().item(), 2e-3 * (1 + 1e-6))
            self.assertFalse(torch.equal(a, b))
        saved = _auto.lr_option
        try:  # the same save without the rule: the shard's pickle holds no lr as a number
            _auto.lr_option = lambda obj: ""
            ckpz.distributed.save(held, self.path("norule"), lossy="auto")
        finally:
            _auto.lr_option = saved
        got = weight_modes(self.path("norule"))
        self.assertTrue(got and all(v.startswith("prel") for v in got.values()), got)


if __name__ == "__main__":
    unittest.main()
