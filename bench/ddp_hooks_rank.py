"""bench/ddp-hooks, inside a rank: the two models, the hooks by name, a training run.

A rank gets its whole list of runs (model, hook, seed) at once and trains them one after
the other on one process group, so runs of different hooks and seeds alternate in time
(the machine's load falls on all of them alike) and no run pays for starting torch. Per
run, rank 0 writes each step's loss (the mean over the ranks) and time (the slowest
rank's), the bytes and packets this rank's veth sent after the warm-up (mean over the
ranks; beside them ckpz.ddp's own count of bytes and collectives), the
1-minute load average before and after, and the torch release.

probe() tells, for one interpreter, which hooks its torch and the installed ckpz.ddp can
run at all (a world of one on loopback): bf16 all-reduces need a gloo that sums BF16 on
the CPU; ckpz-topk and ckpz-auto need a ckpz.ddp that has those methods. A hook that
cannot run is listed with the reason and left out of the matrix.
"""

import datetime
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DENSITY = 0.01  # ckpz-topk's density when the hook's name gives none (ckpz-topk:0.001)
Q1_BLOCK = 512  # ckpz-q1's block when the hook's name gives none (ckpz-q1:1024)


TASK_SEED = 1234  # the data's law (patterns, Markov chain): the same for every seed


HELD_OUT = 16  # batches of the held-out set (CNN: 512 images; GPT: 256 sequences)
CNN_CLASSES, CNN_SIGNAL, CNN_LABEL_NOISE = 10, 0.5, 0.5  # see bench/ddp-hooks: a loss that stays above 0


def build(name, seed):
    """(model, batch(generator) -> (x, y), loss(model, batch), held-out batches) of model
    name: the task is the same for every seed (the seeds' spread is training noise, not
    easier or harder tasks), and so is the held-out set (HELD_OUT batches drawn from the
    task's law apart from any run's); seed draws the initial weights (the caller's
    generator draws the batches)."""
    import torch
    import torch.nn as nn

    torch.manual_seed(TASK_SEED)
    if name == "cnn":
        def net():
            return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(64, 10))
        # class c: a fixed smooth pattern of its own (4x4 noise upsampled) times CNN_SIGNAL
        # under unit noise; a share CNN_LABEL_NOISE of the labels drawn at random
        patterns = nn.functional.interpolate(torch.randn(CNN_CLASSES, 3, 4, 4), size=32, mode="bilinear",
                                             align_corners=False)

        def batch(g):
            y = torch.randint(CNN_CLASSES, (32,), generator=g)
            x = patterns[y] * CNN_SIGNAL + torch.randn(32, 3, 32, 32, generator=g)
            flip = torch.rand(32, generator=g) < CNN_LABEL_NOISE
            return x, torch.where(flip, torch.randint(CNN_CLASSES, (32,), generator=g), y)

        held = _held(batch)
        torch.manual_seed(seed + 1)
        return net(), batch, lambda m, xy: nn.functional.cross_entropy(m(xy[0]), xy[1]), held

    vocab, ctx, d = 64, 64, 128
    chain = torch.softmax(torch.randn(vocab, vocab) * 3, 1)  # text: a fixed random Markov chain

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(ctx, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
            self.body = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(d, vocab)
            self.register_buffer("mask", torch.triu(torch.full((ctx, ctx), float("-inf")), 1))

        def forward(self, x):
            return self.head(self.body(self.tok(x) + self.pos, mask=self.mask))

    def batch(g):
        x = torch.empty(16, ctx + 1, dtype=torch.long)
        x[:, 0] = torch.randint(vocab, (16,), generator=g)
        for t in range(ctx):
            x[:, t + 1] = torch.multinomial(chain[x[:, t]], 1, generator=g)[:, 0]
        return x[:, :-1], x[:, 1:]

    held = _held(batch)
    torch.manual_seed(seed + 1)
    return GPT(), batch, lambda m, xy: nn.functional.cross_entropy(m(xy[0]).reshape(-1, vocab), xy[1].reshape(-1)), held


def _held(batch):
    import torch

    g = torch.Generator().manual_seed(TASK_SEED + 1)
    return [batch(g) for _ in range(HELD_OUT)]


def register(ddp, hook, warmup):
    """Registers hook (a name of the bench's) on ddp; returns its state (None: none)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if hook == "none":
        return None
    if hook in ("fp16", "bf16"):
        ddp.register_comm_hook(None, getattr(default_hooks, hook + "_compress_hook"))
        return None
    if hook.startswith("powersgd-"):
        st = powerSGD_hook.PowerSGDState(None, matrix_approximation_rank=int(hook.split("-")[1]),
                                         start_powerSGD_iter=max(2, warmup))
        ddp.register_comm_hook(st, powerSGD_hook.powerSGD_hook)
        return st
    import ckpz.ddp

    method, _, arg = hook[len("ckpz-"):].partition(":")
    kw = {}
    if method == "topk":
        kw["density"] = float(arg) if arg else DENSITY
    if method == "auto" and arg:  # ckpz-auto:topk: auto_max
        kw["auto_max"] = arg
    if method in ("q8", "q4") and arg == "raw":  # ckpz-q8:raw: the codes as they are (2 collectives, not 4)
        kw["entropy"] = False
    if method == "q1":  # ckpz-q1:B: signs in blocks of B (512: ~30x)
        kw["block"] = int(arg) if arg else Q1_BLOCK
    if method == "lowrank" and arg:  # ckpz-lowrank:R[:4][:p8][:raw]: matrix rank R, 4-bit exchanges (P's at 8), raw
        rank, *opts = arg.split(":")
        method += ":" + rank + (":p8" if "p8" in opts else "")
        kw.update({"bits": 4} if "4" in opts else {}, **({"entropy": False} if "raw" in opts else {}))
    st = ckpz.ddp.CompressionState(method=method, warmup_steps=warmup, model=ddp, **kw)
    ddp.register_comm_hook(st, ckpz.ddp.hook)
    return st


def _use_tree():
    """ckpz from the tree being benchmarked (python/, and CKPZ_LIBRARY as the driver set it)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))


def _leave():
    """Ends the process without the interpreter's teardown: torch 2.13's gloo worker thread
    can still be dropping its last collective when Py_FinalizeEx runs, and aborts the
    process (doc/gradients.md, known issues). Everything is written by now."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def train(spec, run, dist, tx):
    """One run on the process group; on rank 0 its record, else None."""
    import torch

    rank, world, warm, steps = spec["rank"], spec["world"], spec["warmup"], spec["steps"]
    model, batch, loss_of, held = build(run["model"], run["seed"])
    # broadcast_buffers=False: DDP would send the GPT's constant mask (16 kB) from rank 0 before
    # every forward; the bytes counted are the gradient exchange's
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1024, broadcast_buffers=False)
    state = register(ddp, run["hook"], warm)
    rank_of = getattr(state, "rank_in_force", None) is not None
    opt = torch.optim.AdamW(ddp.parameters(), lr=spec["lr"][run["model"]])
    g = torch.Generator().manual_seed(1000 * run["seed"] + rank)
    load0 = os.getloadavg()[0]
    mine = torch.zeros(steps, 4, dtype=torch.float64)  # loss, seconds, lowrank's rank in force and error
    dist.barrier()
    b0, own0 = tx(), _own(state)
    for step in range(steps):
        xy = batch(g)
        if step == warm:
            dist.barrier()
            b0, own0 = tx(), _own(state)
        t0 = time.perf_counter()
        loss = loss_of(ddp, xy)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mine[step, 1] = time.perf_counter() - t0
        mine[step, 0] = float(loss.detach())
        if rank_of:
            mine[step, 2], mine[step, 3] = state.rank_in_force, state.rank_error or 0.0
    heldout = _evaluate(model, loss_of, held) if rank == 0 else None  # the ranks' models are the same
    moved = torch.tensor([float(a - b) for a, b in zip(tx() + _own(state), b0 + own0)], dtype=torch.float64)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    sent = [torch.zeros(4, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(sent, moved)
    dist.barrier()
    if rank != 0:
        return None
    both = torch.stack(every)
    rec = dict(run, torch=torch.__version__, losses=both[:, :, 0].mean(0).tolist(),
               seconds=both[:, :, 1].max(0).values.tolist(), heldout=heldout,
               bytes_per_step=float(sum(s[0] for s in sent)) / world / max(1, steps - warm),
               # the veth's packets, and ckpz's own count of its collectives' bytes and the collectives
               packets_per_step=float(sum(s[1] for s in sent)) / world / max(1, steps - warm),
               hook_bytes_per_step=float(sum(s[2] for s in sent)) / world / max(1, steps - warm),
               collectives_per_step=float(sent[0][3]) / max(1, steps - warm),
               load=[load0, os.getloadavg()[0]])
    if rank_of:  # the rank in force after each step, and the error it was decided on
        rec.update(ranks=[int(x) for x in mine[:, 2].tolist()], rank_errors=mine[:, 3].tolist())
    if getattr(state, "_auto", None) is not None and state._auto.choice:  # what auto chose, from what
        rec["auto"] = dict(state._auto.record)
    return rec


def _own(state):
    """(bytes, collectives) ckpz.ddp's state counted so far; (0, 0) for other hooks."""
    return (getattr(state, "bytes_sent", 0), getattr(state, "exchanges", 0)) if state is not None else (0, 0)


def _evaluate(model, loss_of, held):
    """The mean loss of the trained model on the held-out batches."""
    import torch

    with torch.no_grad():
        return sum(float(loss_of(model, xy)) for xy in held) / len(held)


def worker(spec):
    """One rank inside its namespace: every run of spec, records to spec["out"] (JSON lines)."""
    import torch
    import torch.distributed as dist

    _use_tree()
    torch.set_num_threads(1)
    dev = "vr%d" % spec["rank"]
    dist.init_process_group("gloo", init_method="tcp://%s:%d?use_libuv=0" % (spec["master"], spec["port"]),
                            rank=spec["rank"], world_size=spec["world"], timeout=datetime.timedelta(seconds=600))

    def tx():  # (bytes, packets) the rank's veth sent
        out = []
        for what in ("bytes", "packets"):
            with open("/sys/class/net/%s/statistics/tx_%s" % (dev, what)) as f:
                out.append(int(f.read()))
        return tuple(out)

    # one bucket per model, for every hook: PowerSGD's chained all-reduces of several
    # buckets in flight reach gloo in different orders on different ranks (gloo aborts:
    # "op.preamble.length <= op.nbytes"); DDP's first bucket is capped apart
    if hasattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES"):
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    for run in spec["runs"]:
        rec = train(spec, run, dist, tx)
        if rec is not None:
            with open(spec["out"], "a") as f:
                f.write(json.dumps(rec) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    _leave()


def probe(hooks):
    """{hook: None (runs) or why not} for this interpreter, as JSON on stdout, plus its
    torch release: each hook registered on a tiny DDP model in a world of one and run
    past its warm-up."""
    import torch
    import torch.distributed as dist

    _use_tree()
    torch.set_num_threads(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d?use_libuv=0" % port, rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    why = {}
    for hook in hooks:
        try:
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            register(ddp, hook, 2)  # auto measures over at least 2 warm-up steps
            for _ in range(5):
                ddp(torch.randn(4, 8)).pow(2).mean().backward()
            why[hook] = None
        except Exception as e:  # what the hook's own code or torch said
            said = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:200])
            why[hook] = "the ckpz.ddp under test refused it (%s)" % said if hook.startswith("ckpz-") else said
    dist.destroy_process_group()
    import ckpz

    print(json.dumps({"torch": torch.__version__, "why": why, "ckpz": os.path.dirname(os.path.abspath(ckpz.__file__)),
                      "library": os.environ.get("CKPZ_LIBRARY", "(the package's own)")}))
    _leave()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--probe":
        probe(sys.argv[2].split(","))
    else:
        sys.exit("usage: ddp_hooks_rank.py --worker SPEC | --probe HOOKS (run by bench/ddp-hooks)")
