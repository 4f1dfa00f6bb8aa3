"""Tests of ckpz.dcp, the storage plug-in for torch's distributed checkpoint, on gloo
processes.

On every torch release: a DDP model and AdamW state saved through DCP with
ckpz.dcp.Writer and read back bit for bit with ckpz.dcp.Reader; BalancedSavePlanner
spreading the replicated tensors over both ranks where torch 1.13's planner leaves them
all to the coordinator; a corrupted file refused on every rank, naming the file and the
tensor (ckpz.Error survives DCP's pickling between ranks); a directory DCP's own
FileSystemWriter wrote refused as such; ckpz.Error and its subclasses through pickle;
and the import shim leaving Python's dataclass decorator as it was.

On torch >= 2 (skipped on 1.13, naming why): dcp.save / dcp.load / dcp.async_save (its
thread and process executors, and a stager that stages on its own thread), the
checkpoint_id route, use_collectives=False, DDP and FSDP2 (fully_shard: DTensor shards)
with AdamW, reloaded bit for bit at 4 -> 2, 2 -> 3 and 2 -> 1 ranks; and ckpz as a stream
extension of DCP's FileSystemWriter that the stock FileSystemReader decodes.

Each spawn is bounded (process group timeout 20 s, a deadline per spawn, DCP's
checkpoint processes killed with their rank), so a hang is a failure, never a stuck run.
"""

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_distributed as td  # noqa: E402
from test_distributed import train_state  # noqa: E402

import ckpz  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
NEEDS_TORCH2 = "needs torch >= 2 (dcp.save/load/async_save, DTensor, FSDP2's fully_shard); this is torch %s" % (
    torch.__version__)


def _torch2_gaps():
    """What Torch2Test drives that this torch 2.x lacks (torch 2.6, Debian 13's: no
    fully_shard on CPU, no async stager); empty on torch 2.13."""
    gaps = []
    if not hasattr(getattr(torch, "cpu", None), "Stream") or not hasattr(torch.cpu.Stream, "record_event"):
        gaps.append("FSDP2's fully_shard on CPU (torch.cpu.Stream.record_event)")
    try:
        import torch.distributed.checkpoint.staging as staging
    except ImportError:
        staging = None
    if not hasattr(staging, "DefaultStager"):
        gaps.append("dcp.async_save's async_stager (DefaultStager)")
    return gaps


def _dcp_passes_errors():
    """Whether this torch's DCP can hand one rank's error to the others: it pickles the
    error with its traceback, and torch 2.6 on Python 3.13 cannot (the frames hold code
    objects: "TypeError: cannot pickle code objects" on the failing rank while the others
    wait in the collective; later torch clears them). torch 1.13 passes errors."""
    try:
        from torch.distributed.checkpoint.utils import _wrap_exception
    except ImportError:
        return True
    try:
        raise ValueError("probe")
    except ValueError as e:
        try:
            pickle.dumps(_wrap_exception(e))
            return True
        except TypeError:
            return False


TORCH2_GAPS = _torch2_gaps() if TORCH2 else []
DCP_PASSES_ERRORS = _dcp_passes_errors()
NO_ERRORS_PASSED = ("torch %s on Python %d.%d cannot pass a rank's error to the others (DCP pickles its "
                    "traceback, whose frames hold code objects): the damaged, foreign and missing "
                    "checkpoints were not tried" % ((torch.__version__,) + sys.version_info[:2]))


# ---- helpers ---------------------------------------------------------------------------

def _started(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _children(pid):
    out = set()
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out.update(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def spawn(fn, world, *args, deadline=150):
    """td.spawn with a deadline of its own, that also ends the processes the ranks started
    (DCP's async_save checkpoint process) when they are left behind."""
    def run(port):
        ctx = mp.start_processes(td._entry_no_teardown, args=(fn, world, port) + args, nprocs=world, join=False,
                                 start_method="spawn")
        end = time.monotonic() + deadline
        seen = {}  # pid -> start time, of the ranks' children

        def note():
            for p in ctx.processes:
                for c in _children(p.pid):
                    seen.setdefault(c, _started(c))

        try:
            while not ctx.join(timeout=1):
                note()
                if time.monotonic() > end:
                    for p in ctx.processes:
                        if p.is_alive():
                            p.terminate()
                    raise AssertionError("%s: ranks still running after %d s" % (fn.__name__, deadline))
        finally:
            for pid, started in seen.items():
                if started is not None and _started(pid) == started:  # still that process
                    os.kill(pid, signal.SIGKILL)

    td.on_free_port(run)


def expect_error(fn, *needles):
    """The text of what fn raised (DCP raises CheckpointException, a BaseException),
    checked to hold every needle."""
    try:
        fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: B902
        text = "%s: %s" % (type(e).__name__, e)
        for n in needles:
            assert n in text, "%r not in %r" % (n, text)
        return text
    raise AssertionError("no error; expected one naming %s" % (needles,))


def flat_state(ddp, opt):
    sd = {k: v.detach().clone() for k, v in ddp.state_dict().items()}
    for i, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            sd["optim.%d.%s" % (i, k)] = v.clone()
    sd["param_groups"] = opt.state_dict()["param_groups"]
    return sd


def zeroed(x):
    """A target to load into: tensors zeroed, other leaves None, containers kept (torch >= 2's
    planner flattens nested dicts and lists, and loads each leaf into its place)."""
    if isinstance(x, torch.Tensor):
        return torch.zeros_like(x)
    if isinstance(x, dict):
        return {k: zeroed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [zeroed(v) for v in x]
    return None


def assert_same(got, want, where=""):
    """got == want bit for bit; DTensors (a collective: every rank calls this in the same
    order) compared whole."""
    if isinstance(want, torch.Tensor):
        if hasattr(got, "full_tensor"):
            got = got.full_tensor()
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and torch.equal(got, want), where
    elif isinstance(want, dict):
        assert sorted(got) == sorted(want), (where, sorted(got), sorted(want))
        for k in sorted(want):
            assert_same(got[k], want[k], "%s.%s" % (where, k))
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, "%s.%d" % (where, i))
    else:
        assert got == want, (where, got, want)


def whole(x):
    """x with DTensors gathered (a collective), for a reference torch.save."""
    if hasattr(x, "full_tensor"):
        return x.full_tensor()
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, dict):
        return {k: whole(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [whole(v) for v in x]
    return x


def tensors_in(path):
    return len(ckpz.load(path)["tensors"])


def flip_middle_byte(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x04
    open(path, "wb").write(bytes(data))


# ---- every torch release ---------------------------------------------------------------

def prog_dcp(rank, world, d):
    import ckpz.dcp as cdcp

    dcp = cdcp.checkpoint
    save = getattr(dcp, "save", None) or dcp.save_state_dict  # torch >= 2 / 1.13
    load = getattr(dcp, "load", None) or dcp.load_state_dict
    ddp, opt = train_state()
    sd = flat_state(ddp, opt)
    sd["big"] = torch.arange(300000, dtype=torch.float32).sin()  # chunks of its own in its file
    for name, planner in (("plain", None), ("balanced", cdcp.BalancedSavePlanner())):
        kw = {"planner": planner} if planner is not None else {}
        save(sd, storage_writer=cdcp.Writer(os.path.join(d, name)), **kw)
        got = zeroed(sd)
        load(got, storage_reader=cdcp.Reader(os.path.join(d, name)))
        assert_same(got, sd, name)
    shard0, shard1 = "rank-00000-of-00002.ckpz", "rank-00001-of-00002.ckpz"
    # torch 1.13's planner: the coordinator writes every replicated tensor; ours spreads them
    if not cdcp._N["new_api"]:
        assert tensors_in(os.path.join(d, "plain", shard1)) == 0
    assert tensors_in(os.path.join(d, "balanced", shard1)) > 0
    assert tensors_in(os.path.join(d, "balanced", shard0)) > 0
    # items are named by their fqn in the files
    names = set(ckpz.load(os.path.join(d, "balanced", shard0))["tensors"]) | set(
        ckpz.load(os.path.join(d, "balanced", shard1))["tensors"])
    assert {"big", "module.0.weight", "optim.0.exp_avg"} <= names, names
    if not DCP_PASSES_ERRORS:  # DcpTest.test_round_trip_2 says so, skipped
        return
    # a flipped byte in the file holding 'big': every rank raises a ckpz.Error naming the file and the tensor
    holder = shard0 if "big" in ckpz.load(os.path.join(d, "balanced", shard0))["tensors"] else shard1
    td.dist.barrier()
    if rank == 0:
        shutil.copytree(os.path.join(d, "balanced"), os.path.join(d, "bad"))
        flip_middle_byte(os.path.join(d, "bad", holder))
    td.dist.barrier()
    text = expect_error(lambda: load(zeroed(sd), storage_reader=cdcp.Reader(os.path.join(d, "bad"))),
                        holder, "checksum mismatch", "'big'")
    assert "invalid literal" not in text, text
    # a directory DCP's own FileSystemWriter wrote: said so, on every rank, with no advice for ckpz.load
    save(sd, storage_writer=dcp.FileSystemWriter(os.path.join(d, "fs")))
    for trusted in (False, True):
        text = expect_error(lambda: load(zeroed(sd), storage_reader=cdcp.Reader(os.path.join(d, "fs"),
                                                                                 trusted=trusted)),
                            "not a ckpz.dcp checkpoint", "FileSystemReader", os.path.join(d, "fs", ".metadata"))
        assert "ckpz.load" not in text and "safe_globals" not in text, text
    # no checkpoint there at all
    expect_error(lambda: load(zeroed(sd), storage_reader=cdcp.Reader(os.path.join(d, "none"))),
                 "no such checkpoint directory")


class DcpTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ckpz-dcp-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_round_trip_2(self):
        spawn(prog_dcp, 2, self.dir)
        if not DCP_PASSES_ERRORS:  # the round trips ran; the error cases could not
            self.skipTest(NO_ERRORS_PASSED)

    def test_errors_pickle(self):
        """ckpz.Error and its subclasses come back from pickle as they were (DCP passes a
        rank's error to the others pickled): same class, code, name, message, path, text."""
        from ckpz._lib import ERR_CHECKSUM, Error
        from ckpz._pickle_limits import PickleRefused, UnsafeGlobalError

        cases = [Error(ERR_CHECKSUM, "chunk 3 (tensor 'tensors.big'): compressed data checksum mismatch", "/c/r.ckpz"),
                 Error(ERR_CHECKSUM), PickleRefused(ERR_CHECKSUM, "nested too deep", None),
                 UnsafeGlobalError("os.system", "/c/x.pt"), UnsafeGlobalError("posix.system", None, called=True)]
        for e in cases:
            for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
                back = pickle.loads(pickle.dumps(e, proto))
                self.assertIs(type(back), type(e))
                for attr in ("code", "name", "message", "path", "args"):
                    self.assertEqual(getattr(back, attr), getattr(e, attr), attr)
                self.assertEqual(str(back), str(e))
        u = pickle.loads(pickle.dumps(UnsafeGlobalError("os.system", "/c/x.pt")))
        self.assertEqual(str(u).count("If you trust this file"), 1, str(u))
        self.assertEqual(u.name, "os.system")
        self.assertIsInstance(u, pickle.UnpicklingError)

    def test_shim_leaves_dataclasses_alone(self):
        code = ("import dataclasses; real = dataclasses.dataclass; import ckpz.dcp as d; "
                "assert dataclasses.dataclass is real; print(d.checkpoint.__name__)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("checkpoint", out.stdout)


# ---- torch >= 2 --------------------------------------------------------------------------

def fsdp2_state(world, steps=2):
    """An FSDP2 (fully_shard over a CPU mesh of the world) model after AdamW steps, and its
    state dict as DCP takes it ({"model", "optim"}: DTensor shards, optimizer keyed by fqn).
    steps=0: fresh (the optimizer's state made by get_state_dict), a target to load into."""
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(48, 64), torch.nn.ReLU(), torch.nn.Linear(64, 17))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(2000 + td.dist.get_rank())
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 48, generator=g)).pow(2).mean().backward()
        opt.step()
    msd, osd = get_state_dict(model, opt)
    return {"model": msd, "optim": osd}


def ddp_state(steps=2):
    ddp, opt = train_state(steps)
    return {"model": ddp.state_dict(), "optim": opt.state_dict()}


def close_checkpoint_process():
    """Ends the checkpoint process async_save(PROCESS) started (torch keeps it for the next)."""
    import torch.distributed.checkpoint._async_process_executor as ape

    p, ape._CHECKPOINT_PROCESS = ape._CHECKPOINT_PROCESS, None
    if p is not None:
        p.__del__()  # TERMINATE, then SIGTERM after 5 s


def saved_pair(rank, world, d, tag):
    """Saves a DDP and an FSDP2 state at this world size with ckpz.dcp, and rank 0 the
    whole of each (torch.save) as the reference a load at any world size must give."""
    import torch.distributed.checkpoint as dcp

    import ckpz.dcp as cdcp

    out = {}
    for kind, sd in (("ddp", ddp_state()), ("fsdp2", fsdp2_state(world))):
        dcp.save(sd, storage_writer=cdcp.Writer(os.path.join(d, "%s-%s" % (kind, tag))))
        ref = whole(sd)
        if rank == 0:
            torch.save(ref, os.path.join(d, "%s-%s.ref.pt" % (kind, tag)))
        out[kind] = sd
    return out


def check_loads(rank, world, d, tag):
    """Loads the DDP and FSDP2 checkpoints saved as `tag` (at another world size) into this
    world's state, and checks them against the reference."""
    import torch.distributed.checkpoint as dcp

    import ckpz.dcp as cdcp

    for kind in ("ddp", "fsdp2"):
        ref = torch.load(os.path.join(d, "%s-%s.ref.pt" % (kind, tag)), weights_only=False)
        target = fsdp2_state(world, steps=0) if kind == "fsdp2" else zeroed(ref)
        dcp.load(target, storage_reader=cdcp.Reader(os.path.join(d, "%s-%s" % (kind, tag))))
        assert_same(target, ref, "%s %s at %d ranks" % (kind, tag, world))


def prog_reshard_save(rank, world, d):
    warnings.simplefilter("ignore", FutureWarning)
    saved_pair(rank, world, d, "w%d" % world)


def prog_reshard_load(rank, world, d, tags):
    warnings.simplefilter("ignore", FutureWarning)
    for tag in tags:
        check_loads(rank, world, d, tag)


def prog_torch2(rank, world, d):
    """dcp.save/load/async_save with ckpz.dcp on DDP and FSDP2 state; the checkpoint_id
    route; use_collectives=False; the stream extension. Also saves the 2-rank checkpoints
    the reshard test loads at 3 and 1 ranks, and loads the 4-rank ones."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
    from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

    import ckpz.dcp as cdcp

    warnings.simplefilter("ignore", FutureWarning)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")  # where the checkpoint process's group meets
    states = saved_pair(rank, world, d, "w%d" % world)
    try:
        for kind, sd in states.items():
            ref = whole(sd)
            p = os.path.join(d, "t2-" + kind)

            def reload(path, reader=None, **kw):
                target = fsdp2_state(world, steps=0) if kind == "fsdp2" else zeroed(ref)
                dcp.load(target, storage_reader=reader or cdcp.Reader(path), **kw)
                assert_same(target, ref, "%s %s" % (kind, path))

            reload(os.path.join(d, "%s-w%d" % (kind, world)))
            # the checkpoint_id route: a Writer / Reader without a path, named by DCP
            dcp.save(sd, checkpoint_id=p + "-id", storage_writer=cdcp.Writer())
            target = fsdp2_state(world, steps=0) if kind == "fsdp2" else zeroed(ref)
            dcp.load(target, checkpoint_id=p + "-id", storage_reader=cdcp.Reader())
            assert_same(target, ref, kind + " checkpoint_id")
            # async_save: thread (the default), process, and a stager staging on its own thread
            f = dcp.async_save(sd, storage_writer=cdcp.Writer(p + "-thread"),
                               async_checkpointer_type=AsyncCheckpointerType.THREAD)
            f.result(timeout=60)
            reload(p + "-thread")
            f = dcp.async_save(sd, storage_writer=cdcp.Writer(p + "-process", level=5),
                               async_checkpointer_type=AsyncCheckpointerType.PROCESS)
            f.result(timeout=90)
            reload(p + "-process")
            stager = DefaultStager(StagingOptions(use_pinned_memory=False, use_shared_memory=False,
                                                  use_async_staging=True, use_non_blocking_copy=False))
            try:
                r = dcp.async_save(sd, storage_writer=cdcp.Writer(p + "-staged"), async_stager=stager)
                r.staging_completion.result(timeout=60)
                r.upload_completion.result(timeout=60)
            finally:
                stager.close()
            reload(p + "-staged")
            # every rank alone (use_collectives=False): its own file and metadata, read back alone
            dcp.save(sd, storage_writer=cdcp.Writer(p + "-alone"), use_collectives=False)
            assert os.path.exists(os.path.join(p + "-alone", "__%d.metadata" % rank))
            if kind == "ddp":  # each rank reads its own save: the whole replicated state
                reload(p + "-alone")
            # ckpz as a stream extension of DCP's own FileSystemWriter, read by the stock reader
            dcp.save(sd, storage_writer=dcp.FileSystemWriter(p + "-ext", _extensions=[cdcp.Extension()]))
            reload(p + "-ext", dcp.FileSystemReader(p + "-ext", _extension_registry=cdcp.extension_registry()))
            md = dcp.FileSystemReader(p + "-ext").read_metadata()
            info = next(iter(md.storage_data.values()))
            assert list(info.transform_descriptors) == ["stream.ckpz/1"], info
            with open(os.path.join(p + "-ext", info.relative_path), "rb") as f:
                f.seek(info.offset)
                assert f.read(8) == ckpz._lib.MAGIC  # the item's bytes are a ckpz stream
            expect_error(lambda: reload(p + "-ext", dcp.FileSystemReader(p + "-ext")), "stream.ckpz")
        # the 4-rank checkpoints, at 2 ranks
        check_loads(rank, world, d, "w4")
    finally:
        close_checkpoint_process()


@unittest.skipUnless(TORCH2, NEEDS_TORCH2)
class Torch2Test(unittest.TestCase):
    """One directory for the whole class: the 4-rank save is loaded by the 2-rank run,
    whose save is loaded at 3 and 1 ranks."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ckpz-dcp2-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_torch2_and_reshard(self):
        if TORCH2_GAPS:
            self.skipTest("torch %s lacks %s (this test drives torch 2.13's)" % (torch.__version__,
                                                                                  " and ".join(TORCH2_GAPS)))
        spawn(prog_reshard_save, 4, self.dir, deadline=240)
        spawn(prog_torch2, 2, self.dir, deadline=300)
        spawn(prog_reshard_load, 3, self.dir, ["w2"], deadline=200)
        spawn(prog_reshard_load, 1, self.dir, ["w2", "w4"], deadline=120)


if __name__ == "__main__":
    unittest.main()
