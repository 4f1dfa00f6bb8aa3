"""Tests of ckpz.ddp's method "lowrank" with raw codes (entropy=False), whose exchanges go
through rank 0 (a gather of every rank's packet, a broadcast of the mean's:
_ddp_wire.star_allreduce), and of "lowrank:R:p8" (P's exchange at 8 bits, the rest at 4),
on 4 gloo processes (2 where said; the spawning of test_ddp.py, the buckets and programs
of test_ddp_lowrank.py): the bytes each rank sends and the packets' layout (one slot of
the whole exchange a rank: flag, header, scales, codes, CRC; the parts not factored ahead
of the Qs from a block boundary), the same result on every rank; error feedback exact
(the sum of the results plus the mean of the last residuals is the sum of the means);
the state resumes the next step bit for bit; a NaN on one rank reaches every rank
uncompressed; a damaged packet to rank 0, and a damaged mean from it, are every rank's
ckpz.Error; rank 0 or another rank that dies is every other rank's ckpz.Error within the
timeout; the loss falls."""

import math
import os
import sys
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_ddp as base  # noqa: E402  (spawning)
import test_ddp_lowrank as lrt  # noqa: E402  (MatrixBucket, grads, the programs)

import ckpz  # noqa: E402
import ckpz._ddp_lowrank as lowrank  # noqa: E402
import ckpz.ddp  # noqa: E402

RAW = {"bits": 4, "entropy": False}
P8 = "lowrank:%d:p8" % lrt.RANK
WORLD = 4


def slot_bytes(n, bits, block=256):
    """A raw slot of n elements, written out: flag, 24-byte header, an FP32 scale a block,
    the codes, CRC-32C (doc/gradients.md)."""
    return 1 + 24 + 4 * math.ceil(n / block) + math.ceil(n * bits / 8) + 4


def tree_sends(rank, world):
    """Copies rank sends in gloo's binomial-tree broadcast from rank 0."""
    return sum(1 for i in range(world.bit_length()) if rank < (1 << i) and rank + (1 << i) < world)


def prog_layout(rank, world, d):
    """One step of the hand-made bucket at 4 bits raw and with P at 8 bits: the results,
    the bytes and collectives, the Qs' values on the 4-bit grid."""
    out = {}
    for name, method in (("raw", "lowrank:%d" % lrt.RANK), ("p8", P8)):
        state = ckpz.ddp.CompressionState(method=method, **RAW)
        got = ckpz.ddp.hook(state, lrt.MatrixBucket(lrt.grads(rank, 0), 0, last=True)).wait()
        qs = torch.cat([q.t().flatten() for q in state._lowrank.qs.values()])
        off = max(float(((b / (b.abs().max() / 7)) - (b / (b.abs().max() / 7)).round()).abs().max())
                  for b in qs.split(state.block))
        out[name] = {"result": got.tolist(), "bytes": state.bytes_sent, "calls": state.exchanges, "q_off": off}
    base.write_json("%s/layout-%d.json" % (d, rank), out)


def prog_hostile(rank, world, d, who, which, call):
    """Rank who flips a bit of the packet its codec of P's or Q's exchange (which) packs
    at its packing number call (rank 2's first of the Qs: its values, sent to rank 0;
    rank 0's second of P's: the mean, broadcast): every rank raises ckpz.Error, rank 0
    (and the mean's receivers) naming what was damaged, the others naming rank 0."""
    state = ckpz.ddp.CompressionState(method=P8, **RAW)
    if rank == who:
        codec = state._lowrank.codec(state) if which == "P" else state.codec
        assert codec.bits == (8 if which == "P" else 4)
        real = codec.pack

        def damaging(grad, residual, dst, seed=0):
            size = real(grad, residual, dst, seed)
            damaging.calls += 1
            if damaging.calls == call:
                dst[size // 2] ^= 16
            return size

        damaging.calls = 0
        codec.pack = damaging
    try:
        ckpz.ddp.hook(state, lrt.MatrixBucket(lrt.grads(rank, 0), 0, last=True)).wait()
    except ckpz.Error as e:
        base.write_json("%s/hostile-%d.json" % (d, rank), {"text": str(e)})
        return
    raise AssertionError("rank %d: a damaged packet went through" % rank)


def prog_die(rank, world, d, victim):
    """Two steps of DDP training, then rank victim exits: every other rank's next step
    fails with ckpz.Error (torch 1.13: a RuntimeError carrying its text) within the
    state's timeout, written to d/die-RANK.json with the seconds it took."""
    base.ckpz._dist_comm.GRACE = 2.0
    ddp, opt, state = base.make(P8, timeout=3, **RAW)
    base.train(ddp, opt, 2)
    if rank == victim:
        os._exit(0)
    t0 = time.monotonic()
    try:
        base.train(ddp, opt, 1)
    except RuntimeError as e:
        text = str(e)
    else:
        raise AssertionError("rank %d: no error when rank %d died" % (rank, victim))
    assert isinstance(state.error, ckpz.Error), state.error
    base.write_json("%s/die-%d.json" % (d, rank), {"text": text, "seconds": time.monotonic() - t0})
    os._exit(0)  # the group is broken: leave without destroying it


def prog_train(rank, world, d, tag, method, kw):
    ddp, opt, state = base.make(method, cap=25, **kw)
    out = {"losses": base.train(ddp, opt, 60)}
    if state is not None:
        out.update(sent=state.bytes_sent, allreduce=state.bytes_allreduce, uncompressed=state.uncompressed_buckets)
    base.write_json("%s/train-%s-%d.json" % (d, tag, rank), out)


class StarTest(unittest.TestCase):
    def setUp(self):
        self.dir = base.tempfile.mkdtemp(prefix="ckpz-ddp-star-")

    def tearDown(self):
        base.shutil.rmtree(self.dir, ignore_errors=True)

    def test_through_root_bounded(self):
        """Through rank 0 only where asked, up to STAR_MAX elements, and while rank 0's
        W - 1 packets stay within STAR_ROOT_MAX elements; else the ring's shards."""
        from ckpz import _ddp_wire as wire

        self.assertTrue(wire.through_root(wire.STAR_MAX, 4, True))
        self.assertFalse(wire.through_root(wire.STAR_MAX + 1, 4, True))
        self.assertFalse(wire.through_root(1000, 4, False))
        self.assertTrue(wire.through_root(8322, 64, True))
        self.assertFalse(wire.through_root(8323, 64, True))
        self.assertEqual(wire.owners(9000, 64, 256, True), wire.shard_bounds(9000, 64, 256))
        self.assertEqual(wire.owners(9000, 4, 256, True)[1:], [(9000, 9000)] * 3)

    def test_bytes_and_layout(self):
        base.spawn(prog_layout, WORLD, self.dir)
        got = [base.read_json("%s/layout-%d.json" % (self.dir, r)) for r in range(WORLD)]
        parts = lowrank.plan(lrt.SHAPES, lrt.RANK)
        n_p = sum(m[0] * lrt.RANK for _, _, m in parts if m) + 1  # every P and the flag
        n_rest = sum(k for _, k, m in parts if m is None)
        n_q = -n_rest % 256 + n_rest + sum(m[1] * lrt.RANK for _, _, m in parts if m)  # rest, pad, the Qs
        for name, p_bits in (("raw", 4), ("p8", 8)):
            slots = slot_bytes(n_p, p_bits) + slot_bytes(n_q, 4)
            sent = [g[name]["bytes"] for g in got]
            print("lowrank:%d %s, %d ranks: P's slot %d bytes, the rest's and Qs' %d; sent per rank %s"
                  % (lrt.RANK, name, WORLD, slot_bytes(n_p, p_bits), slot_bytes(n_q, 4), sent))
            # a gather (every rank but 0 its slot) and a broadcast down gloo's tree, per exchange
            self.assertEqual(sent, [slots * ((r > 0) + tree_sends(r, WORLD)) for r in range(WORLD)])
            self.assertEqual(sum(sent), 2 * (WORLD - 1) * slots)  # a ring's 2 (W - 1) / W a rank, on average
            self.assertEqual([g[name]["calls"] for g in got], [4] * WORLD)
            for g in got[1:]:
                self.assertEqual(g[name]["result"], got[0][name]["result"])
            self.assertLess(got[0][name]["q_off"], 1e-3)  # the Qs came at 4 bits
        self.assertEqual(tree_sends(0, 4), 2)
        self.assertNotEqual(got[0]["raw"]["result"], got[0]["p8"]["result"])

    def test_error_feedback_exact(self):
        for method in ("lowrank:1", "lowrank:1:p8"):
            base.spawn(lrt.prog_feedback, WORLD, self.dir, True, RAW, method)
            got = [base.read_json("%s/ef-%d.json" % (self.dir, r)) for r in range(WORLD)]
            for g in got[1:]:
                self.assertEqual(g["total"], got[0]["total"])
            print("%s raw, %d ranks, 10 steps: sum of results vs of means %.3g, with the residuals %.3g"
                  % (method, WORLD, got[0]["gap"], got[0]["err"]))
            self.assertLess(got[0]["err"], 1e-5)
            self.assertGreater(got[0]["gap"], 0.1)

    def test_resume_same_step(self):
        base.spawn(lrt.prog_resume, WORLD, self.dir, RAW, P8)

    def test_nan_uncompressed(self):
        base.spawn(lrt.prog_nan, WORLD, self.dir, RAW, P8)

    def test_hostile_packets_refused_on_every_rank(self):
        for who, which, call, where in ((2, "Q", 1, "the packet of rank 2"), (0, "P", 2, "the mean of rank 0")):
            base.spawn(prog_hostile, WORLD, self.dir, who, which, call)
            texts = [base.read_json("%s/hostile-%d.json" % (self.dir, r))["text"] for r in range(WORLD)]
            print("rank %d's packing %d of %s's exchange damaged: %s" % (who, call, which, texts[0][:200]))
            self.assertIn(where, texts[0])
            self.assertIn("checksum", texts[0])
            for t in texts[1:]:
                self.assertIn(where if who == 0 else "rank 0 refused a packet", t)

    def test_rank_dies(self):
        for victim in (0, 3):
            base.spawn(prog_die, WORLD, self.dir, victim)
            for r in range(WORLD):
                if r == victim:
                    continue
                got = base.read_json("%s/die-%d.json" % (self.dir, r))
                print("rank %d died; rank %d after %.1f s: %s" % (victim, r, got["seconds"], got["text"][:160]))
                self.assertIn("ckpz.ddp.hook (step 2, bucket 0)", got["text"])
                self.assertLess(got["seconds"], 30)
                os.remove("%s/die-%d.json" % (self.dir, r))

    def test_loss_falls(self):
        for tag, method, kw in (("none", None, {}), ("p8", "lowrank:2:p8", RAW)):
            base.spawn(prog_train, 2, self.dir, tag, method, kw)
        none, p8 = (base.read_json("%s/train-%s-0.json" % (self.dir, t)) for t in ("none", "p8"))
        ref, last = sum(none["losses"][-10:]), sum(p8["losses"][-10:])
        print("lowrank:2:p8 raw, 2 ranks: %.1fx fewer bytes; last 10 steps' loss %+.1f %% against no hook"
              % (p8["allreduce"] / p8["sent"], 100 * (last / ref - 1)))
        self.assertEqual(p8["uncompressed"], 0)
        self.assertLess(last, 0.3 * sum(p8["losses"][:10]))
        self.assertLess(last, 1.25 * ref)


if __name__ == "__main__":
    unittest.main()
