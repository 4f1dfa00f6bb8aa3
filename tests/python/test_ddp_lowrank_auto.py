"""Tests of ckpz.ddp's method "lowrank:auto" (the rank adapts toward a target error) on 2
gloo processes (the spawning of test_ddp.py, the buckets of test_ddp_lowrank.py): every
rank holds the same rank in force after every step and the same result; the rank grows
on gradients of full rank (error above the target) and falls to the rank of gradients
whose matrices share a column space of rank 2 (error within the target); the state's
rank in force and factors resume the next step bit for bit; decide()'s rule on made-up
energies; bad targets and states refused."""

import os
import sys
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_ddp as base  # noqa: E402  (spawning)
import test_ddp_lowrank as lrt  # noqa: E402  (MatrixBucket, grads)

import ckpz  # noqa: E402
import ckpz._ddp_lowrank as lowrank  # noqa: E402
import ckpz.ddp  # noqa: E402


def prog_track(rank, world, d, low, target, steps):
    """steps steps of lowrank:auto=target on grads(low): the rank in force and the
    error after each, and a digest of each result."""
    state = ckpz.ddp.CompressionState(method="lowrank:auto=%g" % target)
    ranks, errors, sums = [state.rank_in_force], [], []
    for step in range(steps):
        got = ckpz.ddp.hook(state, lrt.MatrixBucket(lrt.grads(rank, step, low=low), 0, last=True)).wait()
        ranks.append(state.rank_in_force)
        errors.append(state.rank_error)
        sums.append(float(got.double().abs().sum()))
    base.write_json("%s/track-%d.json" % (d, rank), {"ranks": ranks, "errors": errors, "sums": sums,
                                                     "uncompressed": state.uncompressed_buckets})


def prog_resume(rank, world, d):
    """Three steps on full-rank gradients (the rank grows), the state saved through
    ckpz.save; the fourth step of the state, of a fresh state loaded from the save and of
    one not loaded: the first two bit for bit the same, with the same rank in force."""
    state = ckpz.ddp.CompressionState(method="lowrank:auto=0.2")
    for step in range(3):
        ckpz.ddp.hook(state, lrt.MatrixBucket(lrt.grads(rank, step), 0, last=True)).wait()
    assert state.rank_in_force > lowrank.DEFAULT_RANK, state.rank_in_force
    path = "%s/auto-%d.ckpz" % (d, rank)
    ckpz.save(state.state_dict(), path)
    loaded = ckpz.ddp.CompressionState(method="lowrank:auto=0.2")
    loaded.load_state_dict(ckpz.load(path))
    assert loaded.rank_in_force == state.rank_in_force, (loaded.rank_in_force, state.rank_in_force)
    fresh = ckpz.ddp.CompressionState(method="lowrank:auto=0.2")
    a, b, c = (ckpz.ddp.hook(s, lrt.MatrixBucket(lrt.grads(rank, 3), 0, last=True)).wait()
               for s in (state, loaded, fresh))
    assert torch.equal(a, b), float((a - b).abs().max())
    assert not torch.equal(a, c)
    assert loaded.rank_in_force == state.rank_in_force
    other = ckpz.ddp.CompressionState(method="lowrank:auto=0.3")
    try:
        other.load_state_dict(ckpz.load(path))
        raise AssertionError("a state of another target loaded")
    except ValueError as e:
        assert "lowrank_target" in str(e), e


class AutoRankTest(unittest.TestCase):
    def setUp(self):
        self.dir = base.tempfile.mkdtemp(prefix="ckpz-ddp-lra-")

    def tearDown(self):
        base.shutil.rmtree(self.dir, ignore_errors=True)

    def track(self, low, target, steps):
        base.spawn(prog_track, 2, self.dir, low, target, steps)
        got = [base.read_json("%s/track-%d.json" % (self.dir, r)) for r in range(2)]
        self.assertEqual(got[0]["ranks"], got[1]["ranks"])  # the exchange's layout agrees
        self.assertEqual(got[0]["sums"], got[1]["sums"])
        self.assertEqual(got[0]["uncompressed"], 0)
        print("lowrank:auto=%g, %s gradients: ranks %s, errors %s" % (
            target, "rank-2" if low else "full-rank", got[0]["ranks"],
            ["%.3f" % e for e in got[0]["errors"]]))
        for before, after, err in zip(got[0]["ranks"], got[0]["ranks"][1:], got[0]["errors"]):
            # toward the target: up above it (unless no matrix would factor), never up within it
            self.assertTrue(after > before or after == before == got[0]["ranks"][-1] if err > target
                            else after <= before, (before, after, err))
        return got[0]

    def test_grows_above_target(self):
        got = self.track(False, 0.2, 6)
        self.assertGreater(got["errors"][0], 0.2)
        # up to 13, the largest rank at which the 64 x 48 matrix still factors (plan)
        self.assertEqual(got["ranks"], [8, 10, 12, 13, 13, 13, 13])

    def test_falls_to_the_gradients_rank(self):
        got = self.track(True, 0.2, 12)
        self.assertLess(got["errors"][0], 0.2)  # the projection holds the gradients
        self.assertLess(max(got["ranks"][3:]), lowrank.DEFAULT_RANK)
        self.assertGreaterEqual(min(got["ranks"]), lrt.RANK)  # not below what holds the gradients

    def test_resume_same_step(self):
        base.spawn(prog_resume, 2, self.dir)


class DecideTest(unittest.TestCase):
    def test_rule(self):
        # two matrices, |mean M|^2 = 100 each, 5 of it left out by P; components' energies out of order
        energy = [(5.0, [10.0, 60.0, 20.0, 5.0], 64), (5.0, [50.0, 5.0, 30.0, 10.0], 64)]
        # kept 190 of 200: error sqrt(10/200) = 0.224
        r, err = lowrank.decide(energy, 4, 0.1)
        self.assertAlmostEqual(err, (10 / 200) ** 0.5)
        self.assertEqual(r, 5)  # above the target: a quarter more, at least 1
        self.assertEqual(lowrank.decide(energy, 16, 0.1)[0], 20)
        # rank 3 (the 3 largest per matrix) keeps 90 + 90: error sqrt(20/200) = 0.316 <= 0.35;
        # rank 2 keeps 80 + 80: 0.447
        self.assertEqual(lowrank.decide(energy, 4, 0.35)[0], 3)
        self.assertEqual(lowrank.decide(energy, 4, 0.5)[0], 3)  # at most a quarter (1) less
        self.assertEqual(lowrank.decide(energy, 4, 0.23)[0], 4)  # within the target, not below
        self.assertEqual(lowrank.decide([(0.0, [0.0], 64)], 4, 0.1), (4, None))
        # no further than the matrices factor: 5 here, then no more
        self.assertEqual(lowrank.decide([e[:2] + (5,) for e in energy], 4, 0.1)[0], 5)
        self.assertEqual(lowrank.decide([e[:2] + (5,) for e in energy], 5, 0.1)[0], 5)

    def test_take_resizes(self):
        f = lowrank.Factors(3, 0.5)
        f.qs["w#0"] = torch.tensor([[1.0, 5.0, 0.1], [1.0, 5.0, 0.1]])
        f.rank = 2
        self.assertEqual(f.take("w", 2)[1].tolist(), [[1.0, 5.0], [1.0, 5.0]])  # the two of most energy
        f.new_step()
        f.rank = 4
        q = f.take("w", 2)[1]
        self.assertEqual(tuple(q.shape), (2, 4))
        self.assertEqual(q[:, :3].tolist(), f.qs["w#0"].tolist())  # kept, two drawn

    def test_arguments(self):
        s = ckpz.ddp.CompressionState(method="lowrank:auto")
        self.assertEqual((s.matrix_rank, s.lowrank_target, s.rank_in_force), (8, lowrank.DEFAULT_TARGET, 8))
        self.assertEqual(ckpz.ddp.CompressionState(method="lowrank:auto=0.25").lowrank_target, 0.25)
        self.assertIsNone(ckpz.ddp.CompressionState(method="lowrank:4").lowrank_target)
        for bad in ("lowrank:auto=0", "lowrank:auto=1", "lowrank:auto=x", "lowrank:auto=", "lowrank:autox"):
            with self.assertRaises(ValueError):
                ckpz.ddp.CompressionState(method=bad)
        sd = s.state_dict()
        sd["rank_in_force"] = 0
        with self.assertRaises(ValueError):
            ckpz.ddp.CompressionState(method="lowrank:auto").load_state_dict(sd)


if __name__ == "__main__":
    unittest.main()
