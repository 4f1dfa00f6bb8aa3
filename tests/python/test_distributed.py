"""Tests of ckpz.distributed's sharded checkpoints on 2 and 4 gloo processes on loopback.

Each test spawns its ranks (torch.multiprocessing, a fresh port each time), with the
process group's timeout at 20 s and the whole spawn bounded by the test's own deadline,
so a hang is a failure, never a stuck ctest. The ranks train a small model wrapped in
DDP with AdamW for a few real steps, so the replicated state is what DDP makes; tensors
split along dim 0 are made by hand. Ranks report failures by raising (the spawn then
raises with their traceback).
"""

import datetime
import os
import random
import shutil
import socket
import sys
import tempfile
import time
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessRaisedException

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

import ckpz  # noqa: E402
import ckpz._dist_comm  # noqa: E402
import ckpz.distributed as cd  # noqa: E402

DEADLINE = 100  # seconds for one spawn


def free_port():
    """A port free on 127.0.0.1 for a spawn's rendezvous, taken below the kernel's ephemeral
    range. A port the kernel hands out for port 0 is closed again before rank 0 listens on
    it, and meanwhile the kernel may give it to any connection, such as another test's gloo
    pairs (seen in CI: rank 0's TCPStore failed with errno 98)."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if low > 11024:  # room for a thousand ports or more below it
        pick = random.SystemRandom()
        for _ in range(100):
            port = pick.randrange(10000, low)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT_TRIES = 3


def on_free_port(run):
    """run(port), once more on another port (at most PORT_TRIES in all) when rank 0 could
    not listen on the one picked: another process took it after free_port looked. The ranks
    fail in init_process_group then, before they do anything the test checks, and the
    spawn's join ends those still waiting."""
    for attempt in range(PORT_TRIES):
        try:
            return run(free_port())
        except ProcessRaisedException as e:
            if "Address already in use" not in str(e) or attempt == PORT_TRIES - 1:
                raise
            print("port taken before rank 0 listened on it; spawning again on another", file=sys.stderr)


def spawn(fn, world, *args, entry=None, deadline=DEADLINE):
    """fn(rank, world, *args) on world ranks, each through entry (_entry), bounded by
    deadline seconds."""
    def run(port):
        ctx = mp.start_processes(entry or _entry, args=(fn, world, port) + args, nprocs=world, join=False,
                                 start_method="spawn")
        end = time.monotonic() + deadline
        while not ctx.join(timeout=max(0.1, end - time.monotonic())):
            if time.monotonic() > end:
                for p in ctx.processes:
                    if p.is_alive():
                        p.terminate()
                raise AssertionError("%s: ranks still running after %d s" % (fn.__name__, deadline))

    on_free_port(run)


def _entry(rank, fn, world, port, *args):
    torch.set_num_threads(1)
    # use_libuv=0: Debian 13's torch 2.6 is built without libuv, which torch >= 2.4's TCP
    # store asks for by default (1.13 ignores the option)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d?use_libuv=0" % port, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def _entry_no_teardown(rank, fn, world, port, *args):
    """_entry, then out without the interpreter's teardown once the rank is done (test_ddp's
    and test_dcp's ranks): on torch 2.13 a gloo worker still freeing a finished collective
    (DDP's own ones too) while Py_FinalizeEx runs aborts the process now and then, with or
    without ckpz ("terminate called without an active exception"; doc/gradients.md, "Known
    issues"; seen in 1 of 3 runs of test_dcp's 3-rank reshard load). What those files check
    is done by then; a rank that failed raised before this and exits as it did. Not for
    this file's ranks, whose background saves are checked to finish at exit."""
    _entry(rank, fn, world, port, *args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def train_state(steps=2, seed=0):
    """A DDP model and its AdamW after real steps; the same on every rank."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(48, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1000 + dist.get_rank())
    for _ in range(steps):
        opt.zero_grad()
        ddp(torch.randn(8, 48, generator=g)).pow(2).mean().backward()
        opt.step()
    return ddp, opt


def full_table(rows=13):
    return torch.arange(rows * 5, dtype=torch.float32).reshape(rows, 5).sin()


def rank_state(rank, world, ddp, opt, rows=13):
    lo, hi = cd.even_rows(rows, rank, world)
    return {"model": ddp.state_dict(), "optim": opt.state_dict(), "emb": cd.Shard(full_table(rows)[lo:hi], lo, rows),
            "rng": torch.full((4,), float(rank)), "step": 11, "note": ["r", rank]}


def assert_state_equal(a, b, where=""):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, cd.Shard):
        assert a.offset == b.offset and a.rows == b.rows, where
        assert_state_equal(a.tensor, b.tensor, where)
    elif isinstance(a, dict):
        assert list(a) == list(b), (where, list(a), list(b))
        for k in a:
            assert_state_equal(a[k], b[k], "%s.%s" % (where, k))
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_state_equal(x, y, "%s.%d" % (where, i))
    else:
        assert a == b, (where, a, b)


def read_text(path):
    with open(path) as f:
        return f.read()


def shard_tensor_names(path):
    """The tensor names one shard file holds (read with the plain ckpz.load)."""
    return set(ckpz.load(path)["tensors"])


# ---- rank programs --------------------------------------------------------------------


def prog_roundtrip(rank, world, d):
    ddp, opt = train_state()
    state = rank_state(rank, world, ddp, opt)
    cd.save(state, d + "/c1")
    assert_state_equal(cd.load(d + "/c1"), state, "c1")
    m = cd.manifest(d + "/c1")
    # replicated state is written once, by more than one rank
    writers = {e["shard"] for e in m["replicated"].values()}
    assert writers == set(range(world)), writers
    names = [shard_tensor_names(d + "/c1/" + s["file"]) for s in m["shards"]]
    for a in range(world):
        for b in range(a + 1, world):
            assert not (names[a] & names[b] & set(m["replicated"])), "a replicated tensor written twice"
    assert "rng" in m["local"][rank] and "model.module.0.weight" in m["replicated"]
    # a delta against c1 after another step, and a lossy save
    opt.zero_grad()
    ddp(torch.randn(8, 48)).pow(2).mean().backward()
    opt.step()
    state2 = rank_state(rank, world, ddp, opt)
    cd.save(state2, d + "/c2", base=d + "/c1")
    assert_state_equal(cd.load(d + "/c2"), state2, "c2")
    assert ckpz.base_info(d + "/c2/rank-%05d-of-%05d.ckpz" % (rank, world)) is not None
    shared = {n for n in cd.manifest(d + "/c2")["replicated"]}
    cd.save(state2, d + "/c3", base=d + "/c2", replicated=shared)  # a chain of two deltas
    assert_state_equal(cd.load(d + "/c3"), state2, "c3")
    cd.save(state2, d + "/lossy", policy="*.weight abs 1e-3\n*.exp_avg abs 1e-5")
    back = cd.load(d + "/lossy")
    w, w0 = back["model"]["module.0.weight"], state2["model"]["module.0.weight"]
    assert not torch.equal(w, w0) and (w - w0).abs().max() <= 1e-3 * 1.0001
    assert cd.manifest(d + "/lossy")["replicated"]["model.module.0.weight"]["crc32"] is None
    assert_state_equal(back["emb"], state2["emb"], "lossy emb")
    # the same directory again: replaced as a whole
    cd.save(state, d + "/c2")
    assert_state_equal(cd.load(d + "/c2"), state, "c2 replaced")
    # rank 0 cannot make the directory: every rank raises, none waits
    if rank == 0:
        open(d + "/afile", "w").close()
    dist.barrier()
    expect_error(lambda: cd.save(state, d + "/afile/ck"), "rank 0" if rank else "afile")
    dist.barrier()
    if rank == 0:
        assert not [x for x in os.listdir(d) if x.startswith(".")], os.listdir(d)


def prog_reshard(rank, world, d):
    """4 ranks: saves from 4 load into 2 and 3; saves from 2 load into 4."""
    ddp, opt = train_state()
    cd.save(rank_state(rank, world, ddp, opt), d + "/w4")
    for m in (2, 3):
        sub = dist.new_group(ranks=list(range(m)))
        if rank < m:
            back = cd.load(d + "/w4", group=sub)
            assert_state_equal(back, rank_state(rank, m, ddp, opt), "4->%d" % m)
    sub = dist.new_group(ranks=[0, 1])
    if rank < 2:
        cd.save(rank_state(rank, 2, ddp, opt), d + "/w2", group=sub)
    dist.barrier()
    back = cd.load(d + "/w2")
    want = rank_state(rank, 4, ddp, opt)
    if rank >= 2:  # beyond the ranks that saved: rank 0's own state
        want["rng"], want["note"] = torch.zeros(4), ["r", 0]
    assert_state_equal(back, want, "2->4")


def expect_error(fn, *needles):
    try:
        fn()
    except Exception as e:
        text = str(e)
        for n in needles:
            assert n in text, "%r not in %r" % (n, text)
        return text
    raise AssertionError("no error; expected one naming %s" % (needles,))


def cloned(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, cd.Shard):
        return cd.Shard(x.tensor.clone(), x.offset, x.rows)
    if isinstance(x, dict):
        return type(x)((k, cloned(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return type(x)(cloned(v) for v in x)
    return x


def prog_damage(rank, world, d):
    ddp, opt = train_state()
    state = cloned(rank_state(rank, world, ddp, opt))
    cd.save(state, d + "/good")
    opt.step()
    cd.save(rank_state(rank, world, ddp, opt), d + "/other")
    shard1 = "rank-00001-of-00002.ckpz"
    m = cd.manifest(d + "/good")
    in1 = sorted(n for n, e in m["replicated"].items() if e["shard"] == 1)
    victim = max(in1, key=lambda n: m["replicated"][n]["shape"][0] * (m["replicated"][n]["shape"] + [1])[-1])
    cases = []

    def setup(kind):
        dist.barrier()
        if rank == 0:
            shutil.rmtree(d + "/bad", ignore_errors=True)
            shutil.copytree(d + "/good", d + "/bad")
            p = d + "/bad/" + shard1
            if kind == "missing":
                os.remove(p)
            elif kind == "truncated":
                os.truncate(p, os.path.getsize(p) // 2)
            elif kind == "flipped":
                data = bytearray(open(p, "rb").read())
                data[len(data) // 3] ^= 0x10
                open(p, "wb").write(bytes(data))
            elif kind == "swapped":  # a valid shard of another checkpoint
                shutil.copy(d + "/other/" + shard1, p)
        dist.barrier()

    for kind, needles in (("missing", [shard1, "missing"]), ("truncated", [shard1]),
                          ("flipped", [shard1, "tensor"]), ("swapped", [shard1, "tensor", "CRC-32"])):
        setup(kind)
        text = expect_error(lambda: cd.load(d + "/bad"), *needles)
        if rank == 0:
            assert "rank 0" in text or "rank 1" in text, text
        cases.append((kind, text))
    # the corrupted tensor is named: flip a byte inside one tensor's chunks
    setup("flipped")
    assert any(n in cases[2][1] for n in m["replicated"]) or "tensor" in cases[2][1], cases[2][1]
    assert_state_equal(cd.load(d + "/good"), state, "good after all that")
    del victim


def prog_die(rank, world, d, op="save", victim=None):
    """The last rank dies (os._exit): while writing its shard of the second save, or just
    before a load, a verify, a broadcast or a send to it (test_dist_sync). Every other
    rank raises ckpz.Error (not gloo's
    RuntimeError) naming the dead rank and the operation, within the group's timeout
    (20 s) and the wait for the ranks' answers (GRACE, 2 s here)."""
    ckpz._dist_comm.GRACE = 2.0
    ddp, opt = train_state()
    cd.save(rank_state(rank, world, ddp, opt), d + "/ck")
    victim = world - 1 if victim is None else victim
    if rank == victim:
        if op != "save":
            os._exit(0)
        real = cd._dist_save._write_shard

        def dying(payload, path, opts, base):
            real(payload, path + ".partial", opts, base)
            with open(path, "wb") as f:
                f.write(open(path + ".partial", "rb").read()[:1000])
            os._exit(0)

        cd._dist_save._write_shard = dying
    opt.step()
    state = rank_state(rank, world, ddp, opt)
    call = {"save": lambda: cd.save(state, d + "/ck"), "load": lambda: cd.load(d + "/ck"),
            "verify": lambda: cd.verify(state["model"]), "broadcast": lambda: cd.broadcast(state["model"]),
            "send": lambda: [cd.send(state["model"], victim) for _ in range(20)]}[op]
    t0 = time.monotonic()
    try:
        call()
    except ckpz.Error as e:  # gloo's own RuntimeError is not caught here: the spawn fails
        text = str(e)
    else:
        raise AssertionError("rank %d: no error when rank %d died" % (rank, victim))
    assert "ckpz.distributed." + op in text, text
    if victim == 0:  # with it went the store (tcp://): who is alive is not known
        assert "rank 0, which holds a TCP store, probably died" in text, text
    else:
        assert "%d did not answer" % victim in text, text
        assert op == "send" or "never reached this exchange" in text, text
    assert time.monotonic() - t0 < 40
    with open(d + "/rank%d-done" % rank, "w") as f:
        f.write(text)
    if rank == 0:  # rank 0 holds the store the others ask who is alive: it leaves last
        others = [r for r in range(world) if r not in (0, victim)]
        end = time.monotonic() + 30
        while time.monotonic() < end and not all(os.path.exists(d + "/rank%d-done" % r) for r in others):
            time.sleep(0.05)
    os._exit(0)  # the group is broken: leave without destroying it


def prog_background(rank, world, d):
    ddp, opt = train_state()
    state = rank_state(rank, world, ddp, opt)
    want = cloned(state)
    real = cd._dist_save._write_shard

    def slow(*a):
        time.sleep(1.5)  # a slow disk: the caller must not wait for it
        real(*a)

    cd._dist_save._write_shard = slow
    h = cd.save(state, d + "/bg", background=True)
    assert not h.done() and h.stall_seconds < 1.0, (h.done(), h.stall_seconds)
    assert h.snapshot_seconds <= h.stall_seconds
    for v in ddp.module.parameters():  # training goes on at once
        v.data.add_(1.0)
    assert not os.path.exists(d + "/bg/manifest.json") or h.done()
    h.wait(60)
    back = cd.load(d + "/bg")
    assert_state_equal(back["model"], want["model"], "snapshot")
    cd._dist_save._write_shard = real
    h2 = cd.save(rank_state(rank, world, ddp, opt), d + "/bg", background=True)
    h2.wait(60)
    assert torch.equal(cd.load(d + "/bg")["model"]["module.0.weight"], ddp.module[0].weight.detach())


def prog_into(rank, world, d):
    """load(into=...) fills the given tensors in place: the model's own parameters, the
    optimizer's moments, a Shard's rows; a tensor that does not fit is left alone."""
    ddp, opt = train_state()
    saved = cloned(rank_state(rank, world, ddp, opt))
    cd.save(saved, d + "/c")
    with torch.no_grad():
        for p in ddp.parameters():
            p.zero_()
    for st in opt.state.values():
        st["exp_avg"].fill_(7.0)
    lo, hi = cd.even_rows(13, rank, world)
    emb = cd.Shard(torch.zeros(hi - lo, 5), lo, 13)
    wrong = torch.zeros(3)  # rng is 4 elements: not filled, a new tensor comes back
    bias = ddp.module[0].bias
    wide = torch.zeros(5, 16)
    view = wide.t()  # 16 x 5, not contiguous: gets copy_
    into = {"model": ddp.state_dict(), "optim": opt.state_dict(), "emb": emb, "rng": wrong, "view": view}
    saved["view"] = torch.arange(80, dtype=torch.float32).reshape(16, 5)
    cd.save(saved, d + "/c")
    back = cd.load(d + "/c", into=into)
    assert_state_equal(back, saved, "into")
    assert torch.equal(ddp.module[0].weight.detach(), saved["model"]["module.0.weight"])
    assert back["model"]["module.0.bias"].data_ptr() == bias.data_ptr()
    moment = opt.state_dict()["state"][0]["exp_avg"]
    assert moment.data_ptr() == back["optim"]["state"][0]["exp_avg"].data_ptr()
    assert torch.equal(moment, saved["optim"]["state"][0]["exp_avg"])
    assert back["emb"] is emb and torch.equal(emb.tensor, saved["emb"].tensor)
    assert back["rng"] is not wrong and torch.equal(wrong, torch.zeros(3))
    assert back["view"] is view and torch.equal(wide.t(), saved["view"])
    # a corrupted shard: an error on every rank, as without into
    dist.barrier()
    if rank == 0:
        path = d + "/c/rank-00001-of-00002.ckpz"
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0x10
        open(path, "wb").write(bytes(data))
    dist.barrier()
    expect_error(lambda: cd.load(d + "/c", into=into), "rank-00001-of-00002.ckpz")


def tied_model():
    """Embedding and output head tied (one Parameter under two names), as GPT-2 does."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(200, 32)
    head = torch.nn.Linear(32, 200, bias=False)
    head.weight = emb.weight
    return torch.nn.Sequential(emb, torch.nn.Linear(32, 32), head)


def prog_tied(rank, world, d):
    """Tensors sharing one storage (tied weights, views of one tensor, replicated or a
    rank's own) are written once, by one rank, and load as tensors sharing one storage,
    as torch.save / torch.load keep them; background saves and into= too."""
    ddp = torch.nn.parallel.DistributedDataParallel(tied_model())
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    ddp(torch.arange(8)).pow(2).mean().backward()
    opt.step()
    big = torch.arange(60, dtype=torch.float32).reshape(12, 5).sin()
    mine = torch.full((6,), float(rank))
    state = {"model": ddp.state_dict(), "optim": opt.state_dict(), "views": [big[2:6], big[4:10], big.t()],
             "own": [mine, mine[1:4]]}

    def storage(t):
        return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()

    def shared(back):
        m = back["model"]
        assert storage(m["module.0.weight"]).data_ptr() == storage(m["module.2.weight"]).data_ptr()
        assert len({storage(v).data_ptr() for v in back["views"]}) == 1
        assert storage(back["own"][0]).data_ptr() == storage(back["own"][1]).data_ptr()

    cd.save(state, d + "/t")
    m = cd.manifest(d + "/t")
    assert m["replicated"]["model.module.0.weight"]["shard"] == m["replicated"]["model.module.2.weight"]["shard"]
    assert len({m["replicated"]["views.%d" % i]["shard"] for i in range(3)}) == 1
    back = cd.load(d + "/t")
    assert_state_equal(back, state, "tied")
    shared(back)
    # written once: an untied copy of the state takes about the embedding's bytes more
    cd.save(cloned(state), d + "/u")
    tied_bytes = sum(s["bytes"] for s in m["shards"])
    untied_bytes = sum(s["bytes"] for s in cd.manifest(d + "/u")["shards"])
    assert untied_bytes - tied_bytes > 0.8 * 200 * 32 * 4, (tied_bytes, untied_bytes)
    h = cd.save(state, d + "/bg", background=True)
    h.wait(60)
    back = cd.load(d + "/bg")
    assert_state_equal(back, state, "tied, background")
    shared(back)
    cd.save(cloned(state), d + "/bg2", background=True).wait(60)  # the snapshot memory reused, untied
    assert_state_equal(cd.load(d + "/bg2"), state, "untied after tied, background")
    # in place: the model's one tied Parameter is filled
    want = cloned(state)
    with torch.no_grad():
        for p in ddp.parameters():
            p.zero_()
    back = cd.load(d + "/t", into={"model": ddp.state_dict()})
    assert torch.equal(ddp.module[2].weight.detach(), want["model"]["module.2.weight"])
    assert back["model"]["module.0.weight"].data_ptr() == ddp.module[0].weight.data_ptr()


def prog_held(rank, world, d):
    """Every tensor ckpz hands to gloo outlives the call by HOLD seconds: gloo's worker
    never drops the last reference to one (which needs the interpreter lock while it
    holds the group's work lock: destroying the group then deadlocked, issue 28). Later
    collectives let older tensors go."""
    import gc
    import weakref

    seen = []
    for mod in (dist, dist.distributed_c10d):
        for name in ("all_gather", "broadcast", "send", "recv"):
            def spy(*args, _real=getattr(mod, name), **kw):
                for x in list(args) + list(kw.values()):
                    for t in (x if isinstance(x, list) else [x]):
                        if isinstance(t, torch.Tensor):
                            seen.append(weakref.ref(t))
                return _real(*args, **kw)

            setattr(mod, name, spy)
    ddp, opt = train_state()
    state = rank_state(rank, world, ddp, opt)
    for call in (lambda: cd.save(state, d + "/h"), lambda: cd.load(d + "/h"), lambda: cd.verify(state["model"]),
                 lambda: cd.broadcast(state["model"] if rank == 0 else None)):
        del seen[:]
        call()
        time.sleep(0.1)
        gc.collect()
        assert seen and all(r() is not None for r in seen), "%d of %d tensors freed" % (
            sum(r() is None for r in seen), len(seen))
    ckpz._dist_comm.HOLD = 0.2
    time.sleep(0.3)
    earlier = list(seen)
    cd.verify(state["model"])
    gc.collect()
    assert all(r() is None for r in earlier), "held past HOLD"


class DistributedTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ckpz-dist-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_roundtrip_delta_lossy_2(self):
        spawn(prog_roundtrip, 2, self.dir)

    def test_reshard_4(self):
        spawn(prog_reshard, 4, self.dir)

    def test_damaged_shards_2(self):
        spawn(prog_damage, 2, self.dir)

    def test_rank_dies_mid_save(self):
        spawn(prog_die, 2, self.dir)
        self.assertTrue(os.path.exists(self.dir + "/rank0-done"))
        self.assertFalse(os.path.exists(self.dir + "/ck/rank-00001-of-00002.ckpz.partial"))
        self.assertEqual([x for x in os.listdir(self.dir) if x.startswith(".")], [])  # rank 0 removed its temporary
        # the previous checkpoint loads, here in a world of one (rank 0's state, whole Shards)
        back = cd.load(self.dir + "/ck")
        self.assertEqual(back["emb"].rows, 13)
        self.assertTrue(torch.equal(back["emb"].tensor, full_table()))
        self.assertEqual(back["step"], 11)

    def test_rank_dies_3(self):
        # rank 2 of 3 dies mid-save: ranks 0 and 1 both name it
        spawn(prog_die, 3, self.dir)
        for r in (0, 1):
            self.assertIn("2 did not answer", read_text(self.dir + "/rank%d-done" % r))

    def test_rank_dies_before_load_or_verify(self):
        for op in ("load", "verify"):
            spawn(prog_die, 2, self.dir, op)
            self.assertIn("rank 1 did not answer", read_text(self.dir + "/rank0-done"))
            os.remove(self.dir + "/rank0-done")
        spawn(prog_die, 2, self.dir, "verify", 0)  # rank 0, and the store it holds
        self.assertIn("rank 0", read_text(self.dir + "/rank1-done"))

    def test_tied_storages_2(self):
        spawn(prog_tied, 2, self.dir)

    def test_collective_tensors_held_2(self):
        spawn(prog_held, 2, self.dir)

    def test_background_2(self):
        spawn(prog_background, 2, self.dir)

    def test_load_into_2(self):
        spawn(prog_into, 2, self.dir)

    def hidden(self, name):
        return sorted(x for x in os.listdir(self.dir) if x.startswith("." + name + "."))

    def test_killed_save_leaves_a_directory_the_next_save_removes(self):
        import signal
        import subprocess

        k = self.dir + "/k"
        cd.save({"w": torch.zeros(3)}, k)
        dying = ("import os, signal, torch, ckpz.distributed as cd\nfrom ckpz import _dist_save\n"
                 "real = _dist_save._write_shard\n"
                 "def dying(payload, path, opts, base):\n"
                 "    real(payload, path, opts, base)\n"
                 "    os.kill(os.getpid(), signal.SIGKILL)\n"
                 "_dist_save._write_shard = dying\n"
                 "cd.save({'w': torch.randn(1 << 20)}, %r)\n" % k)
        proc = subprocess.run([sys.executable, "-c", dying], env=package_under_test.child_env(), timeout=DEADLINE)
        self.assertEqual(proc.returncode, -signal.SIGKILL)
        left = self.hidden("k")
        self.assertEqual(len(left), 1, left)  # the killed save's directory, with its shard
        self.assertTrue(os.path.isdir(os.path.join(self.dir, left[0])))
        self.assertTrue(os.listdir(os.path.join(self.dir, left[0])))
        # a save still running elsewhere (holding its directory): never removed
        live = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom ckpz import _files, _lib\n"
                                 "d = _files.Published(%r, _lib.PUBLISH_DIRECTORY)\nprint(d.temp, flush=True)\n"
                                 "time.sleep(120)\n" % k], env=package_under_test.child_env(),
                                stdout=subprocess.PIPE, text=True)
        try:
            theirs = os.path.basename(live.stdout.readline().strip())
            self.assertNotIn(theirs, left)
            cd.save({"w": torch.ones(3)}, k)
            self.assertEqual(self.hidden("k"), [theirs])
        finally:
            live.kill()
            live.wait()
            live.stdout.close()
        self.assertTrue(torch.equal(cd.load(k)["w"], torch.ones(3)))
        cd.save({"w": torch.ones(3)}, k)  # its writer gone too: removed
        self.assertEqual(self.hidden("k"), [])

    def test_refused_commit_leaves_no_directory(self):
        os.mkdir(self.dir + "/notck")
        open(self.dir + "/notck/x", "w").close()
        with self.assertRaisesRegex(ckpz.Error, "not saved.*exists and is not a ckpz.distributed checkpoint"):
            cd.save({"w": torch.ones(3)}, self.dir + "/notck")
        self.assertEqual(self.hidden("notck"), [])
        self.assertEqual(os.listdir(self.dir + "/notck"), ["x"])

    def test_single_process(self):
        state = {"a": torch.randn(5, 3), "b": [torch.arange(4), 3.5]}
        cd.save(state, self.dir + "/one")
        assert_state_equal(cd.load(self.dir + "/one"), state)
        self.assertRaisesRegex(FileNotFoundError, "manifest", cd.load, self.dir)
        # a path that is not there, a directory without a manifest, one with shards but no
        # manifest: each said so, as a ckpz.Error that is a FileNotFoundError too
        import pickle

        import ckpz.dcp

        none = self.dir + "/none"
        for call in (cd.load, cd.manifest, lambda p: ckpz.dcp.Reader(p).read_metadata()):
            with self.assertRaises(ckpz.Error) as cm:
                call(none)
            e = cm.exception
            self.assertIsInstance(e, FileNotFoundError)
            self.assertIn("no such checkpoint directory: " + none, str(e))
            self.assertNotIn("did not finish", str(e))
            again = pickle.loads(pickle.dumps(e))
            self.assertEqual((type(again), str(again), again.filename), (type(e), str(e), e.filename))
        self.assertRaisesRegex(ckpz.Error, "no manifest.json: not a ckpz.distributed checkpoint", cd.load, self.dir)
        shutil.copytree(self.dir + "/one", self.dir + "/half")
        os.remove(self.dir + "/half/manifest.json")
        self.assertRaisesRegex(FileNotFoundError, "no manifest.json: an incomplete checkpoint", cd.load,
                               self.dir + "/half")
        # a manifest pointing outside its shards, or not JSON: a clear error, no KeyError
        import json

        path = self.dir + "/one/manifest.json"
        good = open(path).read()
        m = json.loads(good)
        m["replicated"]["a"]["shard"] = 5
        open(path, "w").write(json.dumps(m))
        self.assertRaisesRegex(ckpz.Error, "malformed manifest: bad replicated", cd.load, self.dir + "/one")
        open(path, "w").write(good[:-10])
        self.assertRaisesRegex(ckpz.Error, "not valid JSON", cd.load, self.dir + "/one")


if __name__ == "__main__":
    unittest.main()
