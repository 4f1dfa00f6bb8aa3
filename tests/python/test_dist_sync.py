"""Tests of ckpz.distributed's sync strategies on 2 and 4 gloo processes on loopback:
broadcast (root compresses, receivers verify and decode), verify (one flipped bit in one
rank's replica is found and the rank named), DeltaSync, send/recv, and failures raised
on every rank instead of hanging. Messages are cut to 64 KiB here so that every stream
spans many of them. The spawn harness (timeouts, ports) is test_distributed's.
"""

import os
import shutil
import sys
import tempfile
import time
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_distributed import assert_state_equal, cloned, expect_error, prog_die, read_text, spawn, \
    train_state  # noqa: E402

import ckpz.distributed as cd  # noqa: E402


def model_state(seed):
    ddp, opt = train_state(steps=2, seed=seed)
    return cloned({"model": ddp.state_dict(), "optim": opt.state_dict(), "step": seed})


def prog_sync(rank, world, _d):
    cd._dist_sync.PIECE = 64 << 10
    mine = model_state(seed=5)
    # broadcast: only the root's state counts
    got = cd.broadcast(mine if rank == 1 else {"junk": torch.zeros(3)}, src=1)
    assert_state_equal(got, mine, "broadcast")
    # verify: all agree, then one bit of one replica flips on rank 2 (or 1)
    assert cd.verify(got) == []
    victim = 2 if world > 2 else 1
    w = got["model"]["module.0.weight"]
    if rank == victim:
        w.view(torch.int32)[3, 7] ^= 1 << 4
    found = cd.verify(got)
    assert [d.name for d in found] == ["model.module.0.weight"], found
    assert found[0].odd == [victim], found
    assert len(set(found[0].checksums.values())) == 2
    # a tensor missing on one rank is a disagreement too
    extra = dict(got, only0=torch.ones(2)) if rank == 0 else got
    assert [d.name for d in cd.verify(extra)] == ["model.module.0.weight", "only0"]
    # delta sync: the second round moves far fewer bytes
    sync = cd.DeltaSync(src=0)
    s1 = model_state(seed=7)
    assert_state_equal(sync.broadcast(s1 if rank == 0 else None), s1, "delta 1")
    full = sync.bytes_sent
    s1["model"]["module.2.bias"] += 1  # a small change
    back = sync.broadcast(s1 if rank == 0 else None)
    assert_state_equal(back, s1, "delta 2")
    assert sync.bytes_sent * 5 < full, (sync.bytes_sent, full)
    # the root fails while compressing: every rank raises, nobody hangs
    expect_error(lambda: cd.broadcast({"f": lambda: 0} if rank == 0 else None, src=0))
    # a byte flipped on the wire: receivers reject it, and so every rank raises
    real = cd._dist_sync._Link.put

    def flipping(self, head, data=b""):
        if data and len(data) > 1000:
            data = bytearray(data)
            data[500] ^= 1
        return real(self, head, bytes(data))

    if rank == 0:
        cd._dist_sync._Link.put = flipping
    expect_error(lambda: cd.broadcast(s1 if rank == 0 else None, src=0), "rank")
    cd._dist_sync._Link.put = real
    # the root's link fails on a message (on the thread that moves them): the receivers
    # are told and raise, nobody waits for the rest
    def failing(self, head, data=b""):
        if len(data):
            raise OSError("the link went down")
        return real(self, head, data)

    if rank == 0:
        cd._dist_sync._Link.put = failing
    t0 = time.monotonic()
    expect_error(lambda: cd.broadcast(s1 if rank == 0 else None, src=0), "link went down" if rank == 0 else "rank 0")
    assert time.monotonic() - t0 < 10, "a rank waited for the timeout"
    cd._dist_sync._Link.put = real
    # point to point, and with the levels chosen for a link (a slow one: measured)
    if rank == 0:
        n = cd.send(s1, 1)
        assert 0 < n
        assert 0 < cd.send(s1, 1, target_bw=0.05)
    elif rank == 1:
        assert_state_equal(cd.recv(0), s1, "recv")
        assert_state_equal(cd.recv(0), s1, "recv, target_bw")
    assert_state_equal(cd.broadcast(s1 if rank == 0 else None, src=0, target_bw=0.05), s1, "broadcast, target_bw")
    expect_error(lambda: cd.send(s1, 1 - rank if rank < 2 else 0, target_bw=-1), "target_bw")


class SyncTest(unittest.TestCase):
    def test_sync_2(self):
        spawn(prog_sync, 2, None)

    def test_sync_4(self):
        spawn(prog_sync, 4, None)

    def test_rank_dies_in_broadcast_or_send(self):
        # rank 1 dies before a broadcast from rank 0, or before rank 0 sends to it: rank 0
        # raises ckpz.Error naming it, not gloo's RuntimeError
        d = tempfile.mkdtemp(prefix="ckpz-sync-")
        try:
            for op in ("broadcast", "send"):
                spawn(prog_die, 2, d, op)
                self.assertIn("rank 1 did not answer", read_text(d + "/rank0-done"))
                os.remove(d + "/rank0-done")
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_world_of_one(self):
        s = {"a": torch.randn(4)}
        self.assertEqual(cd.verify(s), [])


if __name__ == "__main__":
    unittest.main()
