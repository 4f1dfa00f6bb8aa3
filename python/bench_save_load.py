#!/usr/bin/python3
"""Benchmark: ckpz.save / ckpz.load against torch.save / torch.load, on the same state, in one run.

Builds a real training state of over 300 MB with the running torch (Debian's 1.13 with
/usr/bin/python3, or torch 2.x in a venv: a GPT-style transformer's FP32 weights and
AdamW's two moments after real optimisation steps, an LR scheduler, step counters and
the RNG state), then measures, every figure a median of --repeat runs with the tools
interleaved run by run (the load average is printed before and after each part: the
machine may be shared):

  identity    `ckpz -d` of ckpz.save's file against torch.save's file of the same state,
              byte for byte; records that differ are named, with whether they also
              differ between two torch.save calls of the state (a per-save record).
              Target: identical (torch 2.13's .data/serialization_id included: it is a
              hash of the record names and contents).
  local       save and load on --dir (default /dev/shm: tmpfs, so the disk is not what
              is measured): torch.save vs ckpz.save, torch.load vs ckpz.load (both with
              weights_only=True on torch 2.x, the default there since 2.6), and the
              round trip; targets: ckpz.save <= torch.save, ckpz.load <= torch.load,
              ckpz save + load <= 0.8x torch's. The CPU seconds of the same runs (all
              threads) follow: torch works on one thread, ckpz on every core, so its
              wall time nears CPU / cores only when the machine is otherwise idle.
  link        the same through a pipe limited to each --rate (a pacing process, as a
              disk or a network that moves that many bytes a second): save = until the
              last byte has arrived at the far end; load = from the first byte sent
              until the state is in memory (the stream is received into memory, then
              loaded, the same way for both). Target: ckpz faster than torch by at least
              the size ratio.
  memory      peak RSS of a fresh process that imports torch and ckpz and loads the
              file with torch.load / ckpz.load (VmHWM; ru_maxrss printed beside it),
              the tools alternating. Target: ckpz <= 1.1x torch.
  background  a training loop (forward, backward, AdamW step) that saves every
              --every steps with ckpz.save(background=True): per save, the time the
              loop stalled against the time the snapshot (the copy of the tensors)
              took. Target: stall <= 1.2x snapshot; torch.save's stall for comparison.

Usage, from the repository after `make`:

    PYTHONPATH=python /usr/bin/python3 python/bench_save_load.py [--repeat 5] [--rate 1000M --rate 200M]
    PYTHONPATH=python venv/bin/python python/bench_save_load.py --skip link --skip background   # torch 2.x

Exits non-zero when a target is missed. Files are removed afterwards.
"""

import argparse
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import ckpz  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
CLI = os.environ.get("CKPZ_CLI") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "ckpz")


def torch_load(f):
    """torch.load as a torch 2.x user calls it: weights_only=True (the default since 2.6,
    said explicitly); on 1.13 plain (its weights_only refuses AdamW's state)."""
    return torch.load(f, weights_only=True) if TORCH2 else torch.load(f)


def load_average():
    return "load average %.2f %.2f %.2f" % os.getloadavg()


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(torch.nn.Module):
    def __init__(self, vocab, d, heads, layers, ctx):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(ctx, d) * 0.02)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((ctx, ctx), float("-inf")), 1))

    def forward(self, idx):
        n = idx.shape[1]
        x = self.tok(idx) + self.pos[:n]
        for b in self.blocks:
            x = b(x, self.mask[:n, :n])
        return self.head(self.ln(x))


class Trainer:
    """A small GPT trained with AdamW on random tokens (real gradients, real moments)."""

    def __init__(self, vocab=8192, d=512, heads=8, layers=7, ctx=64, batch=4):
        torch.manual_seed(0)
        self.vocab, self.ctx, self.batch = vocab, ctx, batch
        self.model = GPT(vocab, d, heads, layers, ctx)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, 1000)
        self.gen = torch.Generator().manual_seed(1)
        self.steps = 0
        self.config = {"vocab": vocab, "d": d, "heads": heads, "layers": layers, "ctx": ctx}

    def step(self):
        idx = torch.randint(0, self.vocab, (self.batch, self.ctx + 1), generator=self.gen)
        out = self.model(idx[:, :-1]).reshape(-1, self.vocab)
        loss = torch.nn.functional.cross_entropy(out, idx[:, 1:].reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.steps += 1
        return loss.item()

    def state(self):
        return {
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "step": self.steps,
            "rng": torch.get_rng_state(),
            "config": self.config,
        }


def tensor_bytes(obj):
    if torch.is_tensor(obj):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def same(a, b):
    if torch.is_tensor(a):
        return (a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


def cpu_seconds():
    """CPU time of this process, every thread (user + system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_cpu(fn):
    """(wall seconds, CPU seconds of all threads, result) of fn()."""
    c = cpu_seconds()
    t, r = timed(fn)
    return t, cpu_seconds() - c, r


med = statistics.median


def fmt(xs):
    return "%.3f s [%.3f-%.3f]" % (med(xs), min(xs), max(xs))


# ---- local ------------------------------------------------------------------------------


def bench_local(state, work, repeat, results):
    """Saves, then loads, each tool's runs interleaved (who goes first alternates); a
    first round of each warms up (page cache, allocator) and is not counted. Saves and
    loads are measured apart so that a load's freshly allocated state does not land in
    the middle of the saves (on this VM, memory freed back to the host is slow to touch
    again, whoever touches it)."""
    pt, ck = os.path.join(work, "x.pt"), os.path.join(work, "x.pt.ckpz")
    ts, cs, tl, cl = [], [], [], []
    cpu = {"ts": [], "cs": [], "tl": [], "cl": []}  # CPU seconds of the same runs
    for r in range(repeat + 1):
        for who in ([0, 1] if r % 2 else [1, 0]):
            t, c, _ = timed_cpu(lambda: torch.save(state, pt) if who == 0 else ckpz.save(state, ck))
            if r:
                (ts if who == 0 else cs).append(t)
                cpu["ts" if who == 0 else "cs"].append(c)
    for r in range(repeat + 1):
        for who in ([0, 1] if r % 2 else [1, 0]):
            t, c, back = timed_cpu(lambda: torch_load(pt) if who == 0 else ckpz.load(ck))
            if r:
                (tl if who == 0 else cl).append(t)
                cpu["tl" if who == 0 else "cl"].append(c)
            elif not same(state, back):
                sys.exit("%s: the loaded state differs" % ("torch" if who == 0 else "ckpz"))
            del back
    pt_size, ck_size = os.path.getsize(pt), os.path.getsize(ck)
    rt_t = [a + b for a, b in zip(ts, tl)]
    rt_c = [a + b for a, b in zip(cs, cl)]
    print("local (%s), median [min-max] of %d:" % (work, repeat))
    print("  file        torch.save %.1f MB   ckpz %.1f MB   ratio %.3fx" % (pt_size / 1e6, ck_size / 1e6, pt_size / ck_size))
    print("  save        torch %s   ckpz %s   ckpz/torch %.2f" % (fmt(ts), fmt(cs), med(cs) / med(ts)))
    print("  load        torch %s   ckpz %s   ckpz/torch %.2f" % (fmt(tl), fmt(cl), med(cl) / med(tl)))
    print("  save+load   torch %s   ckpz %s   ckpz/torch %.2f" % (fmt(rt_t), fmt(rt_c), med(rt_c) / med(rt_t)))
    # CPU seconds (all threads): what the runs cost whatever else the machine was doing.
    # torch runs on one thread; ckpz's wall time approaches its CPU time / cores only on
    # an otherwise idle machine.
    m = {k: med(v) for k, v in cpu.items()}
    print("  cpu (s)     save torch %.3f ckpz %.3f (%.2f)   load torch %.3f ckpz %.3f (%.2f)   save+load %.2f"
          % (m["ts"], m["cs"], m["cs"] / m["ts"], m["tl"], m["cl"], m["cl"] / m["tl"],
             (m["cs"] + m["cl"]) / (m["ts"] + m["tl"])))
    results["save <= torch.save"] = med(cs) / med(ts) <= 1.0
    results["load <= torch.load"] = med(cl) / med(tl) <= 1.0
    results["save + load <= 0.8x torch's"] = med(rt_c) / med(rt_t) <= 0.8
    os.unlink(pt)
    os.unlink(ck)
    return pt_size / ck_size


# ---- through a rate-limited pipe ---------------------------------------------------------

# A link of RATE bytes a second between two pipes, in pieces of up to 1 MiB: a piece
# that was already waiting (FIONREAD: bytes in the pipe) starts when the link is free,
# so the pacer's own sleeps and scheduling cost nothing; one that had to be waited for
# starts when it came (time the link stood idle is lost, as on a real link: pv -L
# instead lets a slow starter catch up at more than the rate, which favours the writer
# that starts slowly). The pacer runs at a higher priority, as a network device would
# not wait for the sender's CPUs. The link is up before the clock starts: a sender
# waits for "go" (a byte on stdin) before it sends.
_LINK = r"""
import array, fcntl, os, sys, termios, time
try:
    os.nice(-10)
except OSError:
    pass
rate = float(sys.argv[1])
src = os.open(sys.argv[2], os.O_RDONLY)
dst = os.open(sys.argv[3], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if sys.argv[3] != "-" else 1
for fd in (src, dst):
    try:
        fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: pieces of 1 MiB
    except OSError:
        pass  # not a pipe
buf = bytearray(1 << 20)  # one buffer, reused: no allocation per piece
if len(sys.argv) > 4:
    os.read(0, 1)  # go
free = None
avail = array.array("i", [0])
while True:
    try:
        fcntl.ioctl(src, termios.FIONREAD, avail, True)
        waiting = avail[0] > 0
    except OSError:  # a regular file: its bytes are always there
        waiting = True
    n = os.readv(src, [buf])
    if not n:
        break
    now = time.monotonic()
    start = free if free is not None and waiting else now
    done = start + n / rate
    delay = done - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    free = done
    v = memoryview(buf)[:n]
    while v:
        v = v[os.write(dst, v):]
"""


def _rate_bytes(rate):
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}
    return float(rate[:-1]) * mult[rate[-1].upper()] if rate[-1].upper() in mult else float(rate)


def _link(args, **kw):
    p = subprocess.Popen([sys.executable, "-c", _LINK] + args, **kw)
    time.sleep(0.3)  # the link is up (the interpreter started) before the clock starts
    return p


def save_through(rate, dst, fn):
    """fn(file object) writes into a link of `rate` that ends in dst; seconds from the
    call until the last byte has arrived."""
    p = _link([str(_rate_bytes(rate)), "/dev/stdin", dst], stdin=subprocess.PIPE)
    t = time.perf_counter()
    with p.stdin:
        fn(p.stdin)
    p.wait()
    return time.perf_counter() - t


def receive(f, size):
    """The whole stream in memory faulted in at once (the same for both tools)."""
    import mmap

    m = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0))
    mv = memoryview(m)
    got = 0
    while got < size:
        r = f.readinto(mv[got:])
        if not r:
            break
        got += r
    mv.release()
    m.seek(0)
    return m


def load_through(rate, src, fn):
    """The file at src sent over a link of `rate`, received into memory and given to
    fn(file object); seconds from the first byte sent until fn returns."""
    p = _link([str(_rate_bytes(rate)), src, "-", "go"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    t = time.perf_counter()
    p.stdin.write(b"g")
    p.stdin.close()
    with p.stdout:
        m = receive(p.stdout, os.path.getsize(src))
    p.wait()
    r = fn(m)
    return time.perf_counter() - t, r


def bench_link(state, work, rates, repeat, ratio, results):
    """Saves go through the link to /dev/null (the far end's disk is not what is measured);
    loads read files written beforehand. "raw" is the bound: the tool's own file sent
    through the same link by a plain write loop."""
    pt, ck = os.path.join(work, "l.pt"), os.path.join(work, "l.pt.ckpz")
    torch.save(state, pt)
    ckpz.save(state, ck)
    raw = {pt: read_file(pt), ck: read_file(ck)}

    def send(data):
        def fn(f):
            mv = memoryview(data)
            for i in range(0, len(mv), 1 << 20):
                f.write(mv[i : i + (1 << 20)])
        return fn

    for rate in rates:
        rs = {k: [] for k in ("ts", "cs", "tr", "cr", "tl", "cl")}
        for r in range(repeat + 1):  # round 0 warms up and is not counted
            order = ("t", "c") if r % 2 else ("c", "t")
            for who in order:
                if who == "t":
                    t = save_through(rate, "/dev/null", lambda f: torch.save(state, f))
                    b = save_through(rate, "/dev/null", send(raw[pt]))
                else:
                    t = save_through(rate, "/dev/null", lambda f: ckpz.save(state, f))
                    b = save_through(rate, "/dev/null", send(raw[ck]))
                if r:
                    rs["ts" if who == "t" else "cs"].append(t)
                    rs["tr" if who == "t" else "cr"].append(b)
            for who in order:
                if who == "t":
                    t, back = load_through(rate, pt, lambda f: torch_load(f))
                else:
                    t, back = load_through(rate, ck, lambda f: ckpz.load(f))
                if r:
                    rs["tl" if who == "t" else "cl"].append(t)
                elif not same(state, back):
                    sys.exit("link %s: the loaded state differs" % rate)
                del back
        sp = med(rs["ts"]) / med(rs["cs"])
        lp = med(rs["tl"]) / med(rs["cl"])
        bound = med(rs["tr"]) / med(rs["cr"])
        print("link %sB/s (a pacing pipe), median [min-max] of %d; torch/ckpz, target >= the size ratio %.3fx:"
              % (rate, repeat, ratio))
        print("  save        torch %s   ckpz %s   torch/ckpz %.2fx" % (fmt(rs["ts"]), fmt(rs["cs"]), sp))
        print("  raw write   torch's file %s   ckpz's file %s   ratio %.2fx (the bound: each file sent as it is)"
              % (fmt(rs["tr"]), fmt(rs["cr"]), bound))
        print("  save vs its own file's raw write: torch %.3f   ckpz %.3f"
              % (med(rs["ts"]) / med(rs["tr"]), med(rs["cs"]) / med(rs["cr"])))
        print("  load        torch %s   ckpz %s   torch/ckpz %.2fx" % (fmt(rs["tl"]), fmt(rs["cl"]), lp))
        results["link %s save >= size ratio" % rate] = sp >= ratio
        results["link %s save within 5%% of the link's bound" % rate] = med(rs["cs"]) <= 1.05 * med(rs["cr"])
        results["link %s load >= size ratio" % rate] = lp >= ratio
    for p in (pt, ck):
        os.unlink(p)


def read_file(p):
    with open(p, "rb") as f:
        return f.read()


# ---- memory -----------------------------------------------------------------------------

# VmHWM (the peak RSS of this process's memory since exec), and getrusage's ru_maxrss,
# which a child forked from a large parent inherits (its copy of the parent's memory
# counts, and exec keeps the peak): so the child is forked by a small shell, not by this
# benchmark, and both agree.
_RSS_CHILD = r"""
import resource, sys
sys.path.insert(0, %r)
import torch, ckpz
def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
which, path = sys.argv[1], sys.argv[2]
before = hwm()
if which == "torch":
    x = torch.load(path, weights_only=True) if int(torch.__version__.split(".")[0]) >= 2 else torch.load(path)
else:
    x = ckpz.load(path)
print(before, hwm(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bench_memory(state, work, repeat, results):
    pt, ck = os.path.join(work, "m.pt"), os.path.join(work, "m.pt.ckpz")
    torch.save(state, pt)
    ckpz.save(state, ck)
    code = _RSS_CHILD % os.path.dirname(os.path.abspath(__file__))
    rss = {"torch": [], "ckpz": []}
    base = {"torch": [], "ckpz": []}
    maxrss = {"torch": [], "ckpz": []}
    for r in range(repeat):
        for which, path in ((("torch", pt), ("ckpz", ck)) if r % 2 == 0 else (("ckpz", ck), ("torch", pt))):
            out = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh", sys.executable, "-c", code, which, path],
                                 capture_output=True, text=True, check=True)
            b, a, m = (int(x) for x in out.stdout.split())
            base[which].append(b / 1024)
            rss[which].append(a / 1024)
            maxrss[which].append(m / 1024)
    t, c = med(rss["torch"]), med(rss["ckpz"])
    print("memory: peak RSS of a process loading the file (imports alone: torch %.0f MB, ckpz %.0f MB), median of %d:"
          % (med(base["torch"]), med(base["ckpz"]), repeat))
    print("  VmHWM      torch.load %.0f MiB [%.0f-%.0f]   ckpz.load %.0f MiB [%.0f-%.0f]   ckpz/torch %.3f   (state %.0f MiB)"
          % (t, min(rss["torch"]), max(rss["torch"]), c, min(rss["ckpz"]), max(rss["ckpz"]), c / t,
             tensor_bytes(state) / 2**20))
    print("  ru_maxrss  torch.load %.0f MiB   ckpz.load %.0f MiB   ckpz/torch %.3f"
          % (med(maxrss["torch"]), med(maxrss["ckpz"]), med(maxrss["ckpz"]) / med(maxrss["torch"])))
    results["load RSS <= 1.1x"] = c / t <= 1.1
    os.unlink(pt)
    os.unlink(ck)


# ---- ckpz -d against torch.save ---------------------------------------------------------


def _records(data):
    """{name without the archive's folder: bytes} of a torch.save archive."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n.split("/", 1)[1]: z.read(n) for n in z.namelist()}


def bench_identity(state, work, results):
    """torch.save twice (per-save records are those that differ), ckpz.save, then
    `ckpz -d` (the CLI when it is found, else ckpz.decompress_file: the same library)."""
    refs = []
    for k in range(2):
        d = os.path.join(work, "ref%d" % k)
        os.mkdir(d)
        torch.save(state, os.path.join(d, "x.pt"))
        refs.append(read_file(os.path.join(d, "x.pt")))
        shutil.rmtree(d)
    per_save = sorted(n for n, v in _records(refs[0]).items() if _records(refs[1]).get(n) != v)
    ck, out = os.path.join(work, "x.pt.ckpz"), os.path.join(work, "x.pt")
    ckpz.save(state, ck)
    if os.path.exists(CLI):
        subprocess.run([CLI, "-d", "-q", "-f", "-o", out, ck], check=True)
        how = "ckpz -d (%s)" % os.path.normpath(CLI)
    else:
        ckpz.decompress_file(ck, out)
        how = "ckpz.decompress_file (no CLI at %s)" % CLI
    got = read_file(out)
    os.unlink(ck)
    os.unlink(out)
    names = list(_records(refs[0]))
    print("identity: %s of ckpz.save's file against torch.save's (%d records: %s ... %s)"
          % (how, len(names), ", ".join(names[:5]), ", ".join(names[-2:])))
    print("  records that differ between two torch.save calls of the state: %s" % (", ".join(per_save) or "none"))
    key = "ckpz -d == torch.save's file (per-save records excepted)"
    if got == refs[0]:
        print("  identical, %d bytes" % len(got))
        results[key] = True
        return
    mine, theirs = _records(got), _records(refs[0])
    differ = sorted(set(mine) ^ set(theirs) | {n for n in mine if n in theirs and mine[n] != theirs[n]})
    print("  DIFFERENT: %d vs %d bytes; records that differ: %s; of them per-save: %s"
          % (len(got), len(refs[0]), ", ".join(differ) or "none (the layout)",
             ", ".join(sorted(set(differ) & set(per_save))) or "none"))
    results[key] = bool(differ) and set(differ) <= set(per_save)


# ---- background saves in a training loop ------------------------------------------------


def bench_background(trainer, work, saves, every, results):
    ratios, stalls, snaps, torch_stalls, step_times = [], [], [], [], []
    handle = None
    for k in range(saves):
        t = time.perf_counter()
        for _ in range(every):
            trainer.step()
        step_times.append((time.perf_counter() - t) / every)
        st = trainer.state()
        t = time.perf_counter()
        handle = ckpz.save(st, os.path.join(work, "bg-%d.pt.ckpz" % (k % 2)), background=True)
        stall = time.perf_counter() - t
        stalls.append(stall)
        snaps.append(handle.snapshot_seconds)
        ratios.append(stall / handle.snapshot_seconds)
        del st
    handle.wait()
    ckpz.wait_saves()
    back = ckpz.load(os.path.join(work, "bg-%d.pt.ckpz" % ((saves - 1) % 2)))
    if back["step"] != trainer.steps or not same(back["model"], trainer.model.state_dict()):
        sys.exit("background: the last checkpoint does not hold the last state")
    for _ in range(3):
        trainer.step()
        st = trainer.state()
        t, _ = timed(lambda: torch.save(st, os.path.join(work, "bg.pt")))
        torch_stalls.append(t)
    print("background: %d saves, one every %d steps (%.2f s a step), snapshot %.0f MB:"
          % (saves, every, med(step_times), handle.snapshot_bytes / 1e6))
    print("  stall per save %s   snapshot %s   stall/snapshot median %.2f, max %.2f   (torch.save stalls %s)"
          % (fmt(stalls), fmt(snaps), med(ratios), max(ratios), fmt(torch_stalls)))
    results["background stall <= 1.2x snapshot"] = max(ratios) <= 1.2
    for p in os.listdir(work):
        if p.startswith("bg"):
            os.unlink(os.path.join(work, p))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where files go (default /dev/shm, a tmpfs)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="training steps before the measured state")
    ap.add_argument("--rate", action="append", help="link rates in bytes/s (default 1000M and 200M)")
    ap.add_argument("--saves", type=int, default=6, help="background saves in the training loop")
    ap.add_argument("--every", type=int, default=8, help="training steps between background saves")
    ap.add_argument("--skip", action="append", default=[],
                    choices=["identity", "local", "link", "memory", "background"])
    args = ap.parse_args()
    rates = args.rate or ["1000M", "200M"]

    work = tempfile.mkdtemp(prefix="ckpz-bench-", dir=args.dir)
    results = {}
    try:
        trainer = Trainer()
        t = time.perf_counter()
        for _ in range(args.steps):
            trainer.step()
        state = trainer.state()
        size = tensor_bytes(state)
        print("state: GPT (%.1f M parameters) + AdamW + scheduler + RNG after %d steps: %.1f MB of tensors (%.1f s)"
              % (sum(p.numel() for p in trainer.model.parameters()) / 1e6, args.steps, size / 1e6,
                 time.perf_counter() - t))
        print("libckpz %s, ckpz %s, torch %s, %d cores, files in %s" % (ckpz.library_version(), ckpz.__version__,
              torch.__version__, os.cpu_count(), work))
        if size < 300e6:
            print("warning: state under 300 MB")
        ratio = 1.0
        print(load_average())
        if "identity" not in args.skip:
            bench_identity(state, work, results)
            print(load_average())
        if "local" not in args.skip:
            ratio = bench_local(state, work, args.repeat, results)
            print(load_average())
        if "link" not in args.skip:
            bench_link(state, work, rates, args.repeat, ratio, results)
            print(load_average())
        if "memory" not in args.skip:
            bench_memory(state, work, max(3, args.repeat), results)
            print(load_average())
        if "background" not in args.skip:
            del state
            bench_background(trainer, work, args.saves, args.every, results)
            print(load_average())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    for k, ok in results.items():
        print("  %-36s %s" % (k, "met" if ok else "MISSED"))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
