"""Tests of ckpz.ddp's communication hook on 2 gloo processes on loopback.

Each test spawns its ranks (torch.multiprocessing, a fresh port each time), with the
process group's timeout at 20 s and the whole spawn bounded by the test's own deadline,
so a hang is a failure, never a stuck ctest. Ranks report failures by raising (the spawn
then raises with their traceback) and their figures through files the test reads.
Training runs are a small regression MLP under DDP whose buckets have odd sizes; the
hook is also called with buckets made by hand (sizes 0 to a few thousand, FP32, BF16,
FP16), so its results can be compared with the exact mean.
"""

import json
import os
import shutil
import sys
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

import ckpz  # noqa: E402
import ckpz._dist_comm  # noqa: E402
import ckpz._ddp_wire  # noqa: E402
import ckpz.ddp  # noqa: E402
import ckpz.distributed as cd  # noqa: E402
import test_distributed as td  # noqa: E402
from test_distributed import _entry_no_teardown  # noqa: E402  (a rank's start and its exit)

DEADLINE = 120  # seconds for one spawn
TORCH1 = torch.__version__.startswith("1.")


def spawn(fn, world, *args):
    td.spawn(fn, world, *args, entry=_entry_no_teardown, deadline=DEADLINE)


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ---- a small training run -------------------------------------------------------------

TEACHER = torch.randn(33, 3, generator=torch.Generator().manual_seed(7))


def make(method, seed=0, cap=0.008, **kw):
    """A DDP regression MLP (buckets of odd sizes; cap: DDP's bucket_cap_mb), its SGD and
    the hook's state (None: no hook)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(33, 65), torch.nn.Tanh(), torch.nn.Linear(65, 47), torch.nn.Tanh(),
                                torch.nn.Linear(47, 3))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap)
    state = None
    if method is not None:
        state = ckpz.ddp.CompressionState(method=method, **kw)
        ddp.register_comm_hook(state, ckpz.ddp.hook)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9), state


def train(ddp, opt, steps, first=0):
    """Steps first..first+steps-1, each on a batch of its own per rank; the losses."""
    losses = []
    for s in range(first, first + steps):
        g = torch.Generator().manual_seed(1000 * s + dist.get_rank())
        x = torch.randn(32, 33, generator=g)
        loss = (ddp(x) - torch.tanh(x @ TEACHER)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def prog_train(rank, world, d, method):
    # one bucket of 5456 elements (DDP's small buckets differ between torch releases,
    # and each shard's packet costs a 29-byte header and flag)
    ddp, opt, state = make(method, cap=25)
    losses = train(ddp, opt, 60)
    out = {"losses": losses}
    if state is not None:
        out.update(sent=state.bytes_sent, allreduce=state.bytes_allreduce, steps=state.step,
                   uncompressed=state.uncompressed_buckets)
    write_json("%s/%s-%d.json" % (d, method, rank), out)


# ---- buckets made by hand -------------------------------------------------------------


class FakeBucket:
    """What the hook reads of DDP's GradBucket."""

    def __init__(self, buf, index, last=False):
        self.buf, self.i, self.last = buf, index, last

    def buffer(self):
        return self.buf

    def index(self):
        return self.i

    def is_last(self):
        return self.last

    def parameters(self):
        return [self.buf]


SIZES = (0, 1, 7, 255, 257, 1000, 3001)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def grad_of(rank, n, dtype, step=0):
    g = torch.Generator().manual_seed(rank * 100003 + n * 7 + step)
    return (torch.randn(n, generator=g) * (1 + rank)).to(dtype)


def prog_buckets(rank, world, d, bits, entropy=True):
    """Each bucket's result on every rank is the exact mean within two quantisation steps
    (the ranks' packets, then the owner's packet of the mean) plus the dtype's rounding;
    the same on every rank; a NaN on one rank reaches every rank's result. Collectives
    per bucket: 4 (sizes, then packets, twice), 2 with raw codes (sizes known)."""
    state = ckpz.ddp.CompressionState(method="q%d" % bits, entropy=entropy)
    qmax = 127 if bits == 8 else 7
    index, results = 0, {}
    for dtype in DTYPES:
        for n in SIZES:
            buf = grad_of(rank, n, dtype)
            got = ckpz.ddp.hook(state, FakeBucket(buf.clone(), index)).wait()
            assert got.dtype == dtype and got.shape == buf.shape, (got.dtype, got.shape)
            every = torch.stack([grad_of(r, n, dtype).float() for r in range(world)]) if n else torch.zeros(world, 0)
            exact = every.mean(0)
            a = float(every.abs().max()) if n else 0.0
            tol = a / qmax * 1.01 + a * {torch.float32: 0, torch.bfloat16: 2 ** -8, torch.float16: 2 ** -11}[dtype]
            err = float((got.float() - exact).abs().max()) if n else 0.0
            assert err <= tol, (dtype, n, err, tol)
            results["%s/%d" % (dtype, n)] = got.float().tolist()
            index += 1
            assert state.exchanges == index * (4 if entropy else 2), (state.exchanges, index)
    # a NaN on rank 1 only: every rank's result has it, no rank's residual changed
    buf = grad_of(rank, 1000, torch.float32)
    if rank == 1:
        buf[5] = float("nan")
        buf[6] = float("inf")
    res_before = state._buckets[5][1].clone()  # bucket 5: FP32, 1000 elements
    got = ckpz.ddp.hook(state, FakeBucket(buf, 5, last=True)).wait()
    assert torch.isnan(got[5]) and not torch.isfinite(got[6]) and torch.isfinite(got[7:]).all(), got[:8]
    assert state.uncompressed_buckets == 1 and state.step == 1
    if rank == 1:
        assert torch.equal(state._buckets[5][1], res_before)
    write_json("%s/buckets-%d.json" % (d, rank), results)


def prog_hostile(rank, world, d, entropy=True):
    """Rank 1 flips one bit of the packet it sends rank 0: rank 0 refuses it (checksum,
    naming rank 1), and rank 1 learns that rank 0 refused; both raise ckpz.Error."""
    state = ckpz.ddp.CompressionState(entropy=entropy)
    if rank == 1:
        real = state.codec.pack

        def damaging(grad, residual, dst, seed=0):
            ok = real(grad, residual, dst, seed)
            if dst.numel() > 40 and not damaging.done:
                dst[40] ^= 4
                damaging.done = True
            return ok

        damaging.done = False
        state.codec.pack = damaging
    try:
        ckpz.ddp.hook(state, FakeBucket(grad_of(rank, 3000, torch.float32), 0))
    except ckpz.Error as e:
        text = str(e)
    else:
        raise AssertionError("rank %d: a damaged packet went through" % rank)
    assert state.error is not None and str(state.error) == text
    if rank == 0:
        assert "checksum mismatch" in text and "the packet of rank 1" in text, text
    else:
        assert "rank 0 refused a packet" in text, text
    assert "step 0, bucket 0" in text, text


def prog_die(rank, world, d, how):
    """Rank 1 dies (os._exit) or stops answering (sleeps) after a step: rank 0's next
    backward fails with ckpz.Error naming it (torch 1.13: a RuntimeError carrying its
    text; state.error is the ckpz.Error), within the group's timeout (20 s) or the
    state's (3 s)."""
    ckpz._dist_comm.GRACE = 2.0
    ddp, opt, state = make("q8", timeout=3 if how == "stall" else None)
    rank1_dies(rank, d, ddp, opt, state, stall=how == "stall")


def rank1_dies(rank, d, ddp, opt, state, stall=False, overlap=False):
    """Two steps, then rank 1 exits (after 15 s of silence when stall); rank 0's next
    step must fail with the ckpz.Error naming rank 1 (torch 1.13, or an exchange on the
    state's thread (overlap) on any torch: a RuntimeError whose text names it), which it
    writes to d/die-0.json with the seconds it took. Never returns."""
    train(ddp, opt, 2)
    if rank == 1:
        if stall:
            time.sleep(15)
        os._exit(0)
    t0 = time.monotonic()
    try:
        train(ddp, opt, 1)
    except RuntimeError as e:
        text = str(e)
        assert isinstance(e, ckpz.Error) or TORCH1 or overlap, type(e)
    else:
        raise AssertionError("no error when rank 1 died")
    took = time.monotonic() - t0
    assert isinstance(state.error, ckpz.Error), state.error
    assert str(state.error) in text or overlap, (text, str(state.error))
    assert "ckpz.ddp.hook (step 2, bucket 0)" in text and "rank 1 did not answer" in text, text
    assert took < (12 if stall else 30), took
    write_json("%s/die-%d.json" % (d, rank), {"text": text, "error": str(state.error), "seconds": took})
    os._exit(0)  # the group is broken: leave without destroying it


def params_of(ddp):
    return [p.detach().clone() for p in ddp.parameters()]


def prog_resume(rank, world, d):
    """Three steps, then the hook's state carried over to a new DDP model in memory, and
    three more; against three steps, a save (ckpz.distributed.save of the model, the
    optimizer and the hook's state), new objects loaded from it and three more: the same
    parameters bit for bit. Without the hook's state loaded they differ (so the residuals
    carried over are what makes them equal). A new DDP model starts with other buckets
    than the rebuilt ones the state was saved with: the residuals follow the parameters."""
    kw = dict(warmup_steps=1)
    ddp, opt, state = make("q8", **kw)
    train(ddp, opt, 3)
    ddp2, _, _ = make(None, seed=1)
    ddp2.load_state_dict(ddp.state_dict())
    ddp2.register_comm_hook(state, ckpz.ddp.hook)
    opt2 = torch.optim.SGD(ddp2.parameters(), lr=0.05, momentum=0.9)
    opt2.load_state_dict(opt.state_dict())
    train(ddp2, opt2, 3, first=3)
    want = params_of(ddp2)

    ddp, opt, state = make("q8", **kw)
    train(ddp, opt, 3)
    saved = state.state_dict()
    assert saved["step"] == 3 and saved["residuals"] and any(t.abs().sum() > 0 for t in saved["residuals"].values())
    cd.save({"model": ddp.state_dict(), "optim": opt.state_dict(), "hook": saved}, d + "/ck")
    ckpz.save(saved, "%s/hook-%d.ckpz" % (d, rank))

    for load_hook in (True, False):
        ddp2, opt2, state2 = make("q8", seed=1, **kw)  # another init: what is loaded must count
        back = cd.load(d + "/ck")
        ddp2.load_state_dict(back["model"])
        opt2.load_state_dict(back["optim"])
        if load_hook:
            state2.load_state_dict(back["hook"])
            mine = state2.state_dict()
            for key in ("residuals", "owned_residuals", "layouts"):
                assert list(mine[key]) == list(saved[key]), key
            for key in ("residuals", "owned_residuals"):
                for name, t in saved[key].items():
                    assert torch.equal(mine[key][name], t), (key, name)
        train(ddp2, opt2, 3, first=3)
        same = all(torch.equal(a, b) for a, b in zip(params_of(ddp2), want))
        assert same == load_hook, ("resumed with the hook's state" if load_hook else "without it", same)

    single = ckpz.load("%s/hook-%d.ckpz" % (d, rank))
    state3 = ckpz.ddp.CompressionState(method="q8")
    state3.load_state_dict(single)  # the rank and world come from the group, as when saved
    assert state3.step == 3 and all(torch.equal(state3._buckets[int(k)][1], t) for k, t in saved["residuals"].items())


# ---- tests -------------------------------------------------------------------------------


class DDPTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ckpz-ddp-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_loss_falls_and_bytes(self):
        runs = {}
        for method in ("none", "q8", "q4"):
            spawn(prog_train, 2, self.dir, None if method == "none" else method)
            runs[method] = [read_json("%s/%s-%d.json" % (self.dir, method if method != "none" else None, r))
                            for r in range(2)]
        base = runs["none"][0]["losses"]
        for method, ratio in (("q8", 3.85), ("q4", 7.5)):
            r0 = runs[method][0]
            losses = r0["losses"]
            self.assertLess(sum(losses[-10:]), 0.3 * sum(losses[:10]), (method, losses))
            self.assertLess(sum(losses[-10:]), 1.25 * sum(base[-10:]), (method, losses[-10:], base[-10:]))
            self.assertEqual(r0["steps"], 60)
            self.assertEqual(r0["uncompressed"], 0)
            # 8 bits of 32 and a 4-byte scale per 256 elements: 4 / (1 + 1/64) = 3.94x at most,
            # less a 29-byte header and flag per shard: 3.90x on this model's 5456 elements
            self.assertGreaterEqual(r0["allreduce"] / r0["sent"], ratio, (method, r0["allreduce"], r0["sent"]))
            self.assertLess(r0["allreduce"] / r0["sent"], {"q8": 4.0, "q4": 8.0}[method])

    def test_buckets_exact_mean_within_bounds_8(self):
        spawn(prog_buckets, 2, self.dir, 8)
        self.assertEqual(read_json(self.dir + "/buckets-0.json"), read_json(self.dir + "/buckets-1.json"))

    def test_buckets_exact_mean_within_bounds_4(self):
        spawn(prog_buckets, 2, self.dir, 4)
        self.assertEqual(read_json(self.dir + "/buckets-0.json"), read_json(self.dir + "/buckets-1.json"))

    def test_buckets_exact_mean_within_bounds_raw(self):
        spawn(prog_buckets, 2, self.dir, 8, False)
        self.assertEqual(read_json(self.dir + "/buckets-0.json"), read_json(self.dir + "/buckets-1.json"))

    def test_hostile_packet_refused_on_every_rank(self):
        spawn(prog_hostile, 2, self.dir)
        spawn(prog_hostile, 2, self.dir, False)

    def test_rank_dies(self):
        spawn(prog_die, 2, self.dir, "die")
        self.assertIn("did not answer", read_json(self.dir + "/die-0.json")["text"])

    def test_rank_stalls_state_timeout(self):
        spawn(prog_die, 2, self.dir, "stall")
        self.assertLess(read_json(self.dir + "/die-0.json")["seconds"], 12)

    def test_resume_with_the_same_residuals(self):
        spawn(prog_resume, 2, self.dir)


class StateTest(unittest.TestCase):
    """What needs no process group."""

    def test_arguments(self):
        for bad in (dict(method="top"), dict(bits=5, method="quantize"), dict(method="q8", bits=4), dict(block=0), dict(block=65537),
                    dict(warmup_steps=-1), dict(timeout=0), dict(density=0.01)):
            self.assertRaises(ValueError, ckpz.ddp.CompressionState, **bad)
        s = ckpz.ddp.CompressionState(method="q4", block=64)
        self.assertEqual((s.bits, s.block, s.rank, s.world), (4, 64, 0, 1))

    def test_state_dict_refused(self):
        s = ckpz.ddp.CompressionState()
        good = s.state_dict()
        s.load_state_dict(good)
        for change in ({"format": "x"}, {"bits": 4}, {"block": 128}, {"world": 2}, {"step": -1}, {"step": 1.5},
                       {"residuals": {"0": torch.zeros(3)}}, {"residuals": []},
                       {"layouts": {"a": "x"}, "residuals": {"a": torch.zeros(2)}, "owned_residuals": {"a": torch.zeros(1)}},
                       {"layouts": {"0": "x"}, "residuals": {"0": torch.zeros(2, 2)}, "owned_residuals": {"0": torch.zeros(1)}},
                       {"layouts": {"0": "x"}, "residuals": {"0": torch.zeros(2, dtype=torch.float64)},
                        "owned_residuals": {"0": torch.zeros(1)}}):
            bad = dict(good, **change)
            self.assertRaises(ValueError, s.load_state_dict, bad)
        self.assertRaises(ValueError, s.load_state_dict, [])

    def test_shard_bounds(self):
        for n in (0, 1, 255, 256, 257, 5000):
            for w in (1, 2, 3, 4, 8):
                b = ckpz._ddp_wire.shard_bounds(n, w, 256)
                self.assertEqual(len(b), w)
                self.assertEqual(b[0][0], 0)
                self.assertEqual(b[-1][1], n)
                for (lo, hi), (lo2, _) in zip(b, b[1:]):
                    self.assertEqual(hi, lo2)
                    self.assertTrue(lo <= hi and (hi % 256 == 0 or hi == n))

    def test_residuals_follow_parameters(self):
        # a bucket laid out b, a (DDP's rebuilt order) gets each parameter's residuals
        # from the bucket laid out a, b; a key held twice gets zeros
        res = torch.arange(1.0, 6.0)
        owned = torch.arange(11.0, 16.0)  # world of one: the owner's shard is the bucket
        _, r, o = ckpz.ddp._moved("b:2\na:3", 5, (0, 5), [("a:3\nb:2", res, owned)], 1, 0, 256)
        self.assertEqual(r.tolist(), [4.0, 5.0, 1.0, 2.0, 3.0])
        self.assertEqual(o.tolist(), [14.0, 15.0, 11.0, 12.0, 13.0])
        _, r, o = ckpz.ddp._moved("b:2\na:3", 5, (0, 5), [("a:3\nb:2", res, owned), ("a:3", res[:3], owned[:3])],
                                  1, 0, 256)
        self.assertEqual(r.tolist(), [4.0, 5.0, 0.0, 0.0, 0.0])
        # two ranks, block 2: rank 1 owns elements 2.. of each bucket
        _, r, o = ckpz.ddp._moved("b:2\na:3", 5, (2, 5), [("a:3\nb:2", res, owned[2:])], 2, 1, 2)
        self.assertEqual(r.tolist(), [4.0, 5.0, 1.0, 2.0, 3.0])
        self.assertEqual(o.tolist(), [0.0, 0.0, 13.0])  # a's first two were rank 0's to keep

    def test_world_of_one(self):
        s = ckpz.ddp.CompressionState()
        t = torch.randn(10)
        self.assertIs(ckpz.ddp.hook(s, FakeBucket(t, 0, last=True)).wait(), t)
        self.assertEqual(s.step, 1)


if __name__ == "__main__":
    unittest.main()
