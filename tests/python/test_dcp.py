"""Tests of ckpz.dcp, the storage plug-in for torch's distributed checkpoint, on 2 gloo
processes: a DDP model and AdamW state saved through DCP's save_state_dict with
ckpz.dcp.Writer and read back bit for bit through load_state_dict with ckpz.dcp.Reader;
BalancedSavePlanner spreading the replicated tensors over both ranks where torch 1.13's
planner leaves them all to the coordinator; a corrupted file refused on every rank,
naming the file; and the import shim leaving Python's dataclass decorator as it was.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_distributed import expect_error, spawn, train_state  # noqa: E402

import ckpz  # noqa: E402


def flat_state(ddp, opt):
    sd = {k: v.detach().clone() for k, v in ddp.state_dict().items()}
    for i, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            sd["optim.%d.%s" % (i, k)] = v.clone()
    sd["param_groups"] = opt.state_dict()["param_groups"]
    return sd


def zeroed(sd):
    return {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else None) for k, v in sd.items()}


def tensors_in(path):
    return len(ckpz.load(path)["tensors"])


def prog_dcp(rank, world, d):
    import ckpz.dcp as cdcp

    dcp = cdcp.checkpoint
    ddp, opt = train_state()
    sd = flat_state(ddp, opt)
    for name, planner in (("plain", None), ("balanced", cdcp.BalancedSavePlanner())):
        kw = {"planner": planner} if planner is not None else {}
        dcp.save_state_dict(sd, storage_writer=cdcp.Writer(os.path.join(d, name)), **kw)
        got = zeroed(sd)
        dcp.load_state_dict(got, storage_reader=cdcp.Reader(os.path.join(d, name)))
        for k, v in sd.items():
            if isinstance(v, torch.Tensor):
                assert torch.equal(got[k], v), (name, k)
            else:
                assert got[k] == v, (name, k)
    shard1 = "rank-00001-of-00002.ckpz"
    # torch 1.13's planner: the coordinator writes every replicated tensor; ours spreads them
    if not cdcp._N["new_api"]:
        assert tensors_in(os.path.join(d, "plain", shard1)) == 0
    assert tensors_in(os.path.join(d, "balanced", shard1)) > 0
    assert tensors_in(os.path.join(d, "balanced", "rank-00000-of-00002.ckpz")) > 0
    # a flipped byte in one file: both ranks raise, naming it
    torch.distributed.barrier()
    if rank == 0:
        shutil.copytree(os.path.join(d, "balanced"), os.path.join(d, "bad"))
        p = os.path.join(d, "bad", shard1)
        data = bytearray(open(p, "rb").read())
        data[len(data) // 2] ^= 0x04
        open(p, "wb").write(bytes(data))
    torch.distributed.barrier()
    expect_error(lambda: dcp.load_state_dict(zeroed(sd), storage_reader=cdcp.Reader(os.path.join(d, "bad"))), shard1)


class DcpTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ckpz-dcp-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_round_trip_2(self):
        spawn(prog_dcp, 2, self.dir)

    def test_shim_leaves_dataclasses_alone(self):
        code = ("import dataclasses; real = dataclasses.dataclass; import ckpz.dcp as d; "
                "assert dataclasses.dataclass is real; print(d.checkpoint.__name__)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("checkpoint", out.stdout)


if __name__ == "__main__":
    unittest.main()
