"""Tests of ckpz.ddp's method "lowrank" on 2 gloo processes (the spawning and the small
models of test_ddp.py): buckets made by hand whose parameters are matrices, vectors and a
matrix too thin to compress: the same result on both ranks, the exact mean where the mean
is of rank <= R (within what 8-bit quantisation of P and of the parts not factored
leaves); error feedback keeps the sum of the
results equal to the sum of the mean gradients less the mean of the last residuals, and
each residual no larger than what it came from; the state_dict's factors and residuals
resume the same step bit for bit; a NaN on one rank reaches every rank uncompressed (so
does a P that overflows); a
rank that dies is the other's ckpz.Error within the timeout; a bucket takes two 8-bit
exchanges (the parts not factored in Q's packet), and a state saved when they had one of
their own loads; the loss falls in training,
with its bytes ratio printed; bad arguments and states refused."""

import os
import sys
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_ddp as base  # noqa: E402  (spawning, the models, FakeBucket)

import ckpz  # noqa: E402
import ckpz._ddp_lowrank as lowrank  # noqa: E402
import ckpz.ddp  # noqa: E402

# a bucket: a 64 x 48 matrix, a bias, a 3 x 40 matrix (too thin at rank 2: sent as it
# is), a 4-D convolution weight (viewed as (8*3) x (3*3): plan)
SHAPES = [(64, 48), (48,), (3, 40), (8, 3, 3, 3)]
RANK = 2


class MatrixBucket(base.FakeBucket):
    def parameters(self):
        return [torch.empty(s) for s in SHAPES]


def numel(shape):
    return int(torch.tensor(shape).prod())


N = sum(numel(s) for s in SHAPES)


def grads(rank, step, low=False):
    """Rank's gradient of the bucket at step (flat FP32); low: every matrix's mean over
    the ranks of rank RANK (a column space shared by the ranks)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    parts = []
    for i, (s, (_, _, mat)) in enumerate(zip(SHAPES, lowrank.plan(SHAPES, RANK))):
        if low and len(s) >= 2:
            mat = mat or (s[0], numel(s) // s[0])  # as the hook views it (plan)
            u = torch.randn(mat[0], RANK, generator=torch.Generator().manual_seed(77 + i))
            parts.append(lowrank._flat(u @ torch.randn(RANK, mat[1], generator=g), mat))
        else:
            parts.append(torch.randn(numel(s), generator=g) * (1 + rank))
    return torch.cat(parts)


def exact(world, step, low=False):
    return torch.stack([grads(r, step, low) for r in range(world)]).mean(0)


def prog_roundtrip(rank, world, d):
    state = ckpz.ddp.CompressionState(method="lowrank:%d" % RANK)
    out = {}
    # a mean of rank <= RANK: the projection found in one step holds it all, but for the
    # 8-bit quantisation of P (0.054 of the largest value here; 1e-7 with P in FP32)
    got = ckpz.ddp.hook(state, MatrixBucket(grads(rank, 0, low=True), 0, last=True)).wait()
    want = exact(world, 0, low=True)
    assert got.shape == want.shape and got.dtype == torch.float32
    mats = [(at, k) for at, k, mat in lowrank.plan(SHAPES, RANK) if mat is not None]
    out["low_err"] = max(float((got[a:a + k] - want[a:a + k]).abs().max() / want[a:a + k].abs().max()) for a, k in mats)
    out["result"] = got.tolist()
    assert state.bytes_sent < state.bytes_allreduce / 4, (state.bytes_sent, state.bytes_allreduce)
    # the Qs came through the 8-bit exchange, laid out transposed: each block of them is
    # whole steps of its largest value / 127 (FP32 ones are not)
    qs = torch.cat([q.t().flatten() for q in state._lowrank.qs.values()])  # the bucket's order
    off = 0.0
    for b in qs.split(state.block):
        k = b / (b.abs().max() / 127)
        off = max(off, float((k - k.round()).abs().max()))
    out["q_off_grid"] = off
    # a full-rank gradient: the parts not factored are the mean within two 8-bit steps;
    # the residual is zero there, and no larger than the gradient plus the residual before
    state = ckpz.ddp.CompressionState(method="lowrank:%d" % RANK)
    g = grads(rank, 1)
    got = ckpz.ddp.hook(state, MatrixBucket(g.clone(), 0, last=True)).wait()
    res = state._buckets[0][1]
    want = exact(world, 1)
    parts = lowrank.plan(SHAPES, RANK)
    assert [p[2] is None for p in parts] == [False, True, True, False], parts
    for at, k, mat in parts:
        if mat is None:
            a = float(torch.stack([grads(r, 1)[at:at + k] for r in range(world)]).abs().max())
            assert float((got[at:at + k] - want[at:at + k]).abs().max()) <= a / 127 * 1.01, (at, k)  # 8-bit
            assert not res[at:at + k].any()
        else:
            assert res[at:at + k].norm() <= g[at:at + k].norm() * (1 + 1e-6)
            assert res[at:at + k].abs().max() > 0
    # BF16 buckets come back as BF16
    got = ckpz.ddp.hook(state, MatrixBucket(grads(rank, 2).bfloat16(), 1, last=True)).wait()
    assert got.dtype == torch.bfloat16
    base.write_json("%s/rt-%d.json" % (d, rank), out)


def prog_collectives(rank, world, d):
    """Collectives of one bucket: the parts not factored ride in Q's packet, so a bucket
    of matrices and vectors runs two 8-bit exchanges (four collectives each: sizes and
    packets, twice), one of vectors alone one; the bytes sent."""
    out = {}
    for name, bucket in (("mixed", MatrixBucket(grads(rank, 0), 0, last=True)),
                         ("flat", base.FakeBucket(torch.randn(1000), 0, last=True))):
        state = ckpz.ddp.CompressionState(method="lowrank:%d" % RANK)
        ckpz.ddp.hook(state, bucket).wait()
        out[name] = [state.exchanges, state.bytes_sent]
    base.write_json("%s/calls-%d.json" % (d, rank), out)


def prog_old_state(rank, world, d):
    """A state saved when the parts not factored had an exchange of their own (their
    residuals alone under REST, sharded as they were) loads; its residuals reach the
    packet that now carries them too, by key (the owner's where this rank owned the same
    elements: none here), zeros past them; the next step runs."""
    state = ckpz.ddp.CompressionState(method="lowrank:%d" % RANK)
    for step in range(2):
        ckpz.ddp.hook(state, MatrixBucket(grads(rank, step), 0, last=True)).wait()
    sd = state.state_dict()
    layout = sd["layouts"][str(lowrank.REST)]
    lines = [line for line in layout.split("\n") if line.startswith("rest/")]
    assert len(lines) == 2 and layout.split("\n")[-1].startswith("Q/"), layout  # the rest rides with the Qs
    nrest, n = sum(int(line.rpartition(":")[2]) for line in lines), sd["residuals"][str(lowrank.REST)].numel()
    lo, hi = ckpz._ddp_wire.shard_bounds(nrest, world, state.block)[rank]
    g = torch.Generator().manual_seed(5 + rank)
    res, owned = torch.randn(nrest, generator=g), torch.randn(hi - lo, generator=g)
    key = str(lowrank.REST)
    old = dict(sd, layouts=dict(sd["layouts"], **{key: "\n".join(lines)}),
               residuals=dict(sd["residuals"], **{key: res}), owned_residuals=dict(sd["owned_residuals"], **{key: owned}))
    loaded = ckpz.ddp.CompressionState(method="lowrank:%d" % RANK)
    loaded.load_state_dict(old)
    nlo, nhi = ckpz._ddp_wire.shard_bounds(n, world, state.block)[rank]
    r, o = loaded._residuals(lowrank.REST, layout, n, (nlo, nhi))
    assert torch.equal(r[:nrest], res) and not r[nrest:].any()
    both = range(max(lo, nlo), min(hi, nhi))
    if len(both):  # none here: the 168 elements were one block, rank 1's; now rank 0 owns them
        assert torch.equal(o[both[0] - nlo:both[-1] + 1 - nlo], owned[both[0] - lo:both[-1] + 1 - lo])
    assert not o[max(0, nrest - nlo):].any()
    got = ckpz.ddp.hook(loaded, MatrixBucket(grads(rank, 2), 0, last=True)).wait()
    assert torch.isfinite(got).all() and loaded.uncompressed_buckets == 0


def prog_feedback(rank, world, d, ef, kw=None, method="lowrank:1"):
    """Ten steps of full-rank gradients: sum of results + mean of the last residuals ==
    sum of the exact means (error feedback: the factored parts' residuals, and the
    quantised exchange's of the others: each rank's, and the owners' of their parts of
    the mean), and the results of the ranks equal."""
    state = ckpz.ddp.CompressionState(method=method, error_feedback=ef, **(kw or {}))
    total, want = torch.zeros(N), torch.zeros(N)
    for step in range(10):
        total += ckpz.ddp.hook(state, MatrixBucket(grads(rank, step), 0, last=True)).wait()
        want += exact(world, step)
    res = torch.zeros(N)
    if ef:
        res += state._buckets[0][1] / world
        _, rest, owned = state._buckets[lowrank.REST]
        lo, hi = ckpz._ddp_wire.owners(rest.numel(), world, state.block, lowrank.star_mode(state))[rank]
        nrest = sum(k for _, k, mat in lowrank.plan(SHAPES, 1) if mat is None)  # ahead of the Qs in the packet
        assert not rest[nrest:].any() and not owned[max(0, nrest - lo):].any()  # the Qs' roundings: the shares'
        assert owned.numel() == hi - lo
        rest = rest / world
        rest[lo:hi] += owned
        at = 0
        for start, k, mat in lowrank.plan(SHAPES, 1):
            if mat is None:
                res[start:start + k] += rest[at:at + k]
                at += k
    base.torch.distributed.all_reduce(res)
    err = float((total + res - want).abs().max() / want.abs().max())
    gap = float((total - want).abs().max() / want.abs().max())
    base.write_json("%s/ef-%d.json" % (d, rank), {"err": err, "gap": gap, "total": total.tolist()})


def prog_resume(rank, world, d, kw=None, method="lowrank:2"):
    """Three steps, the state saved; the fourth step of the state itself, of a fresh state
    loaded from the save (through ckpz.save / ckpz.load) and of one not loaded: the first
    two bit for bit the same, the third not."""
    kw = kw or {}
    state = ckpz.ddp.CompressionState(method=method, model=None, **kw)
    for step in range(3):
        ckpz.ddp.hook(state, MatrixBucket(grads(rank, step), 0, last=True)).wait()
    path = "%s/hook-%d.ckpz" % (d, rank)
    ckpz.save(state.state_dict(), path)
    loaded = ckpz.ddp.CompressionState(method=method, **kw)
    loaded.load_state_dict(ckpz.load(path))
    assert loaded.step == 3 and set(loaded._lowrank.qs) == set(state._lowrank.qs) and loaded._lowrank.qs
    fresh = ckpz.ddp.CompressionState(method=method, **kw)
    a, b, c = (ckpz.ddp.hook(s, MatrixBucket(grads(rank, 3), 0, last=True)).wait() for s in (state, loaded, fresh))
    assert torch.equal(a, b), float((a - b).abs().max())
    assert not torch.equal(a, c)
    for name, q in state._lowrank.qs.items():
        assert torch.equal(q, loaded._lowrank.qs[name]), name


def prog_train_resume(rank, world, d):
    """DDP training (buckets of 8 kB: several), three steps, a save (ckpz.save of model,
    optimizer and the hook's state); three more against a new DDP model loaded from the
    save, with and without the hook's state. A new DDP model starts with DDP's initial
    buckets, not the rebuilt ones saved: torch 1.13 lays this model's out alike, so the
    run goes on bit for bit; torch 2.x puts every parameter in its first bucket, in
    another order, so the 8-bit exchanges' blocks (across parameters) round otherwise:
    the residuals and factors carried over keep it far closer than a run without them."""
    ddp, opt, state = base.make("lowrank:2")
    base.train(ddp, opt, 3)
    path = "%s/ck-%d.ckpz" % (d, rank)
    ckpz.save({"model": ddp.state_dict(), "optim": opt.state_dict(), "hook": state.state_dict()}, path)
    base.train(ddp, opt, 3, first=3)
    want = base.params_of(ddp)
    gaps = []
    for load_hook in (True, False):
        ddp2, opt2, state2 = base.make("lowrank:2", seed=1)
        back = ckpz.load(path)
        ddp2.load_state_dict(back["model"])
        opt2.load_state_dict(back["optim"])
        if load_hook:
            state2.load_state_dict(back["hook"])
            assert any(k >= lowrank.REST for k in state2._buckets), list(state2._buckets)
        base.train(ddp2, opt2, 3, first=3)
        gaps.append(max(float((a - b).abs().max()) for a, b in zip(base.params_of(ddp2), want)))
    base.write_json("%s/resume-%d.json" % (d, rank), {"gaps": gaps})
    assert gaps[0] == 0 or not base.TORCH1, gaps


def prog_nan(rank, world, d, kw=None, method="lowrank:2"):
    state = ckpz.ddp.CompressionState(method=method, **(kw or {}))
    ckpz.ddp.hook(state, MatrixBucket(grads(rank, 0), 0, last=True)).wait()
    res, qs = state._buckets[0][1].clone(), {k: q.clone() for k, q in state._lowrank.qs.items()}
    rest = [t.clone() for t in state._buckets[lowrank.REST][1:]]  # the parts not factored: Q's packet's
    g = grads(rank, 1)
    if rank == 1:
        g[10] = float("nan")
    got = ckpz.ddp.hook(state, MatrixBucket(g, 0, last=True)).wait()
    assert torch.isnan(got[10]) and torch.isfinite(got[11:]).all() and state.uncompressed_buckets == 1
    assert torch.equal(state._buckets[0][1], res) and all(torch.equal(q, state._lowrank.qs[k]) for k, q in qs.items())
    assert all(torch.equal(a, b) for a, b in zip(state._buckets[lowrank.REST][1:], rest))
    # finite values whose P overflows (a row of 1e38 times Q): the packet goes uncompressed,
    # so does the bucket (not a P of infinities orthonormalised into NaNs)
    g = grads(rank, 2)
    if rank == 1:
        g[:48] = 1e38
    got = ckpz.ddp.hook(state, MatrixBucket(g, 0, last=True)).wait()
    assert torch.isfinite(got).all() and state.uncompressed_buckets == 2, (got[:4], state.uncompressed_buckets)
    assert torch.equal(state._buckets[0][1], res)


def prog_run(rank, world, d, method, steps):
    ddp, opt, state = base.make(method, cap=25)
    losses = base.train(ddp, opt, steps)
    out = {"losses": losses}
    if state is not None:
        out.update(sent=state.bytes_sent, allreduce=state.bytes_allreduce, uncompressed=state.uncompressed_buckets)
    base.write_json("%s/run-%s-%d.json" % (d, method, rank), out)


def prog_die(rank, world, d, kw=None):
    """Rank 1 dies after two steps; rank 0's next backward fails naming it within the
    state's timeout."""
    base.ckpz._dist_comm.GRACE = 2.0
    ddp, opt, state = base.make("lowrank:2", timeout=3, **(kw or {}))
    base.rank1_dies(rank, d, ddp, opt, state)


class LowRankTest(unittest.TestCase):
    def setUp(self):
        self.dir = base.tempfile.mkdtemp(prefix="ckpz-ddp-lr-")

    def tearDown(self):
        base.shutil.rmtree(self.dir, ignore_errors=True)

    def test_roundtrip(self):
        base.spawn(prog_roundtrip, 2, self.dir)
        got = [base.read_json("%s/rt-%d.json" % (self.dir, r)) for r in range(2)]
        self.assertEqual(got[0]["result"], got[1]["result"])
        print("lowrank:2, a mean of rank 2: largest error %.3g of the largest value" % got[0]["low_err"])
        self.assertLess(got[0]["low_err"], 0.1)  # P travels at 8 bits: its subspace is that close
        print("lowrank:2: the Qs' largest distance from the 8-bit grid %.3g steps" % got[0]["q_off_grid"])
        self.assertLess(got[0]["q_off_grid"], 1e-3)

    def test_error_feedback(self):
        base.spawn(prog_feedback, 2, self.dir, True)
        got = [base.read_json("%s/ef-%d.json" % (self.dir, r)) for r in range(2)]
        self.assertEqual(got[0]["total"], got[1]["total"])
        print("lowrank:1, 10 steps: sum of results vs of means %.3g, with the residuals %.3g"
              % (got[0]["gap"], got[0]["err"]))
        self.assertLess(got[0]["err"], 1e-5)
        self.assertGreater(got[0]["gap"], 0.1)  # the residuals are what closes the gap
        base.spawn(prog_feedback, 2, self.dir, False)
        self.assertGreater(base.read_json(self.dir + "/ef-0.json")["err"], 0.1)

    def test_collectives(self):
        base.spawn(prog_collectives, 2, self.dir)
        got = base.read_json(self.dir + "/calls-0.json")
        print("lowrank:%d, one bucket: %s (collectives, bytes sent)" % (RANK, got))
        self.assertEqual(got["mixed"][0], 8)  # 12 with an exchange of their own
        self.assertEqual(got["flat"][0], 4)

    def test_old_state(self):
        base.spawn(prog_old_state, 2, self.dir)

    def test_resume_same_step(self):
        base.spawn(prog_resume, 2, self.dir)

    def test_training_resumes(self):
        base.spawn(prog_train_resume, 2, self.dir)
        gaps = base.read_json(self.dir + "/resume-0.json")["gaps"]
        print("resumed: largest parameter difference %.3g with the hook's state, %.3g without" % tuple(gaps))
        self.assertLess(gaps[0], gaps[1] / 10)

    def test_nan_uncompressed(self):
        base.spawn(prog_nan, 2, self.dir)

    def test_rank_dies(self):
        base.spawn(prog_die, 2, self.dir)
        got = base.read_json(self.dir + "/die-0.json")
        print("lowrank, rank 1 died: %.1f s, %s" % (got["seconds"], got["text"][:200]))
        self.assertLess(got["seconds"], 30)

    def test_loss_falls(self):
        for method in (None, "lowrank:2"):
            base.spawn(prog_run, 2, self.dir, method, 60)
        none, lr = (base.read_json("%s/run-%s-0.json" % (self.dir, m)) for m in (None, "lowrank:2"))
        ratio = lr["allreduce"] / lr["sent"]
        last, ref = sum(lr["losses"][-10:]), sum(none["losses"][-10:])
        print("lowrank:2: %.1fx fewer bytes; loss of the last 10 steps %.4f, no hook %.4f (%+.1f %%)"
              % (ratio, last / 10, ref / 10, 100 * (last / ref - 1)))
        self.assertEqual(lr["uncompressed"], 0)
        self.assertLess(last, 0.3 * sum(lr["losses"][:10]))
        self.assertLess(last, 1.25 * ref)
        self.assertGreater(ratio, 6)  # 26x (24x when its biases had an exchange of their own)


class ArgumentsTest(unittest.TestCase):
    def test_methods(self):
        self.assertEqual(ckpz.ddp.CompressionState(method="lowrank").matrix_rank, 8)  # doc/gradients.md: both models
        s = ckpz.ddp.CompressionState(method="lowrank:3")
        self.assertEqual((s.method, s.matrix_rank, s.requested), ("lowrank", 3, "lowrank:3"))
        for bad in ("lowrank:", "lowrank:0", "lowrank:x", "lowrank:1025", "lowrank:-1", "lowrankx", "lowrank:2:3"):
            self.assertRaises(ValueError, ckpz.ddp.CompressionState, method=bad)
        for bad in ("lowrank:2:p8", "lowrank:p8:2", "lowrank:2:p8:p8", "lowrank:2:p4"):  # p8: with bits=4
            self.assertRaises(ValueError, ckpz.ddp.CompressionState, method=bad)
        s = ckpz.ddp.CompressionState(method="lowrank:3:p8", bits=4)
        self.assertEqual((s.matrix_rank, s.bits, s._lowrank.codec(s).bits, s.requested), (3, 4, 8, "lowrank:3:p8"))
        self.assertRaises(ValueError, ckpz.ddp.CompressionState, method="lowrank", bits=1)  # 8 or 4
        self.assertRaises(ValueError, ckpz.ddp.CompressionState, method="lowrank", density=0.1)

    def test_plan(self):
        # 2 r (rows + cols) <= rows * cols: compressed; 1-D, thin or small: as it is
        self.assertEqual(lowrank.plan([(10, 10), (3,), (4, 100), (16, 4, 4), (16, 2, 2)], 2),
                         [(0, 100, (10, 10)), (100, 3, None), (103, 400, None), (503, 256, (16, 16)), (759, 64, None)])
        self.assertEqual(lowrank.plan([(4, 100)], 1), [(0, 400, (4, 100))])
        # a convolution as (out kh) x (in kw) where rows + cols is less (192 + 96 < 64 + 288),
        # not where it is more (96 + 9 > 32 + 27)
        self.assertEqual(lowrank.plan([(64, 32, 3, 3), (32, 3, 3, 3), (2, 2, 2, 2)], 2),
                         [(0, 18432, (192, 96, (64, 32, 3, 3))), (18432, 864, (32, 27)), (19296, 16, None)])
        w = torch.randn(64, 32, 3, 3)
        m = lowrank._matrix(w.flatten(), (192, 96, (64, 32, 3, 3)))
        self.assertTrue(torch.equal(m[5], w[1, :, 2, :].flatten()))  # output channel 1's kernel row 2
        self.assertTrue(torch.equal(lowrank._flat(m, (192, 96, (64, 32, 3, 3))), w.flatten()))

    def test_state_refused(self):
        s = ckpz.ddp.CompressionState(method="lowrank:2")
        sd = s.state_dict()
        s.load_state_dict(sd)
        self.assertRaises(ValueError, ckpz.ddp.CompressionState(method="lowrank:3").load_state_dict, sd)
        self.assertRaises(ValueError, ckpz.ddp.CompressionState(method="q8").load_state_dict, sd)
        for factors in ({"w#0": torch.zeros(5, 3)}, {"w#0": torch.zeros(5)}, {"w#0": torch.zeros(5, 2).double()},
                        [], {1: torch.zeros(5, 2)}):
            self.assertRaises(ValueError, s.load_state_dict, dict(sd, factors=factors))
        s.load_state_dict(dict(sd, factors={"w#0": torch.ones(5, 2)}))
        self.assertEqual(s._lowrank.take("w", 5)[1].sum().item(), 10.0)


if __name__ == "__main__":
    unittest.main()
