"""Tests of ckpz.ddp's method "lowrank" with bits=4 (its two exchanges, factors and the
parts not factored, at 4 bits), codes raw (entropy=False: two collectives an exchange)
and coded, on 2 gloo processes (the spawning of test_ddp.py, the buckets and programs of
test_ddp_lowrank.py): the Qs lie on the 4-bit grid and the bucket costs fewer bytes than
at 8 bits; error feedback stays exact (the sum of the results plus the mean of the last
residuals is the sum of the means); the state resumes the next step bit for bit and is
refused by a state of other bits; a damaged packet of the Qs' exchange is every rank's
ckpz.Error; a rank that dies is the other's ckpz.Error within the timeout; the loss
falls in training."""

import os
import sys
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_ddp as base  # noqa: E402  (spawning)
import test_ddp_lowrank as lrt  # noqa: E402  (MatrixBucket, grads, the programs)

import ckpz  # noqa: E402
import ckpz.ddp  # noqa: E402

RAW = {"bits": 4, "entropy": False}
CODED = {"bits": 4}


def prog_grid(rank, world, d, kw):
    """One step at kw and one at 8 bits: how far each block of the Qs lies from whole
    steps of its largest value / 7 (the 4-bit grid), the bytes and collectives of each."""
    out = {}
    for name, k in (("mine", kw), ("q8", {})):
        state = ckpz.ddp.CompressionState(method="lowrank:%d" % lrt.RANK, **k)
        ckpz.ddp.hook(state, lrt.MatrixBucket(lrt.grads(rank, 0), 0, last=True)).wait()
        qs = torch.cat([q.t().flatten() for q in state._lowrank.qs.values()])
        off = 0.0
        for b in qs.split(state.block):
            c = b / (b.abs().max() / 7)
            off = max(off, float((c - c.round()).abs().max()))
        out[name] = {"off": off, "bytes": state.bytes_sent, "calls": state.exchanges}
    base.write_json("%s/grid-%d.json" % (d, rank), out)


def prog_damaged(rank, world, d, kw):
    """Coded codes: rank 1 flips a bit of the mean of its shard of the Qs (its sixth
    packing: P's exchange packs two shards and a mean, the Qs' two shards, then that
    mean), which goes to every rank; raw codes (through rank 0): rank 0 flips a bit of
    the Qs' mean (its fourth: P's exchange packs its values and the mean, the Qs' the
    same), which it broadcasts: every rank raises ckpz.Error naming the rank."""
    state = ckpz.ddp.CompressionState(method="lowrank:%d" % lrt.RANK, **kw)
    star = not state.codec.entropy
    who, call = (0, 4) if star else (1, 6)
    if rank == who:
        real = state.codec.pack

        def damaging(grad, residual, dst, seed=0):
            size = real(grad, residual, dst, seed)
            damaging.calls += 1
            if damaging.calls == call:
                assert size > 60, size  # codes, not only a header
                dst[size // 2] ^= 4
            return size

        damaging.calls = 0
        state.codec.pack = damaging
    try:
        ckpz.ddp.hook(state, lrt.MatrixBucket(lrt.grads(rank, 0), 0, last=True)).wait()
    except ckpz.Error as e:
        text = str(e)
        assert "the mean of rank %d" % who in text and "checksum" in text, text
        base.write_json("%s/damaged-%d.json" % (d, rank), {"text": text})
        return
    raise AssertionError("a damaged packet went through")


def prog_train(rank, world, d, tag, method, kw):
    ddp, opt, state = base.make(method, cap=25, **kw)
    losses = base.train(ddp, opt, 60)
    out = {"losses": losses}
    if state is not None:
        out.update(sent=state.bytes_sent, allreduce=state.bytes_allreduce)
    base.write_json("%s/train-%s-%d.json" % (d, tag, rank), out)


class LowRankBitsTest(unittest.TestCase):
    def setUp(self):
        self.dir = base.tempfile.mkdtemp(prefix="ckpz-ddp-lr4-")

    def tearDown(self):
        base.shutil.rmtree(self.dir, ignore_errors=True)

    def test_grid_and_bytes(self):
        for kw, calls in ((RAW, 4), (CODED, 8)):  # raw: a gather and a broadcast an exchange
            base.spawn(prog_grid, 2, self.dir, kw)
            got = base.read_json(self.dir + "/grid-0.json")
            print("lowrank:%d %s: %s" % (lrt.RANK, kw, got))
            self.assertLess(got["mine"]["off"], 1e-3)  # on the 4-bit grid
            self.assertGreater(got["q8"]["off"], 0.05)  # 8-bit Qs are not on it
            self.assertLess(got["mine"]["bytes"], 0.75 * got["q8"]["bytes"])
            self.assertEqual(got["mine"]["calls"], calls)

    def test_error_feedback_exact(self):
        for kw in (RAW, CODED):
            base.spawn(lrt.prog_feedback, 2, self.dir, True, kw)
            got = [base.read_json("%s/ef-%d.json" % (self.dir, r)) for r in range(2)]
            self.assertEqual(got[0]["total"], got[1]["total"])
            print("lowrank:1 %s, 10 steps: sum of results vs of means %.3g, with the residuals %.3g"
                  % (kw, got[0]["gap"], got[0]["err"]))
            self.assertLess(got[0]["err"], 1e-5)
            self.assertGreater(got[0]["gap"], 0.1)

    def test_resume_same_step(self):
        base.spawn(lrt.prog_resume, 2, self.dir, RAW)

    def test_damaged_packet_refused_on_every_rank(self):
        for kw in (RAW, CODED):
            base.spawn(prog_damaged, 2, self.dir, kw)
            for r in range(2):
                print("lowrank %s, rank %d: %s" % (kw, r, base.read_json("%s/damaged-%d.json" % (self.dir, r))))

    def test_rank_dies(self):
        base.spawn(lrt.prog_die, 2, self.dir, RAW)
        got = base.read_json(self.dir + "/die-0.json")
        print("lowrank 4-bit, rank 1 died: %.1f s, %s" % (got["seconds"], got["text"][:200]))
        self.assertLess(got["seconds"], 30)

    def test_loss_falls(self):
        for tag, method, kw in (("none", None, {}), ("q8", "lowrank:2", {}), ("q4", "lowrank:2", RAW)):
            base.spawn(prog_train, 2, self.dir, tag, method, kw)
        none, q8, q4 = (base.read_json("%s/train-%s-0.json" % (self.dir, t)) for t in ("none", "q8", "q4"))
        ref = sum(none["losses"][-10:])
        for name, r in (("8-bit", q8), ("4-bit raw", q4)):
            print("lowrank:2 %s: %.1fx fewer bytes; last 10 steps' loss %+.1f %% against no hook" % (
                name, r["allreduce"] / r["sent"], 100 * (sum(r["losses"][-10:]) / ref - 1)))
        self.assertLess(sum(q4["losses"][-10:]), 0.3 * sum(q4["losses"][:10]))
        self.assertLess(sum(q4["losses"][-10:]), 1.25 * ref)
        self.assertGreater(q8["sent"], 1.3 * q4["sent"])

    def test_state_of_other_bits_refused(self):
        s4, s8 = (ckpz.ddp.CompressionState(method="lowrank:2", **k) for k in (RAW, {}))
        self.assertEqual((s4.bits, s8.bits), (4, 8))
        s4.load_state_dict(s4.state_dict())
        self.assertRaises(ValueError, s8.load_state_dict, s4.state_dict())
        self.assertRaises(ValueError, s4.load_state_dict, s8.state_dict())
        for bad in (1, 2, 16):
            self.assertRaises(ValueError, ckpz.ddp.CompressionState, method="lowrank", bits=bad)


if __name__ == "__main__":
    unittest.main()