#!/usr/bin/python3
"""Benchmark: ckpz.save + ckpz.load against torch.save + `zstd -1` and `zstd -d` + torch.load.

Builds a real training checkpoint of over 200 MB (a GPT-style transformer's FP32 weights
and AdamW's two moments after a few real optimisation steps, plus step counters and the
RNG state), then times, in one run, median of --repeat runs each:

  (a) ckpz.save(state, "x.pt.ckpz")       then  ckpz.load("x.pt.ckpz")
  (b) torch.save(state, "x.pt"); zstd -1   then  zstd -d; torch.load("x.pt")

Files go to --dir (default: a new folder under /tmp) and are removed afterwards.
Usage, from the repository after `make`:

    PYTHONPATH=python /usr/bin/python3 python/bench_save_load.py [--threads N] [--repeat 3]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import ckpz  # noqa: E402


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


def make_state(steps, vocab=8192, d=512, heads=8, layers=6, ctx=128):
    torch.manual_seed(0)
    model = GPT(vocab, d, heads, layers, ctx)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        idx = torch.randint(0, vocab, (8, ctx + 1), generator=g)
        loss = torch.nn.functional.cross_entropy(model(idx[:, :-1]).reshape(-1, vocab), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "step": steps,
        "loss": loss.item(),
        "rng": torch.get_rng_state(),
        "config": {"vocab": vocab, "d": d, "heads": heads, "layers": layers, "ctx": ctx},
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", help="folder for the files (default: a new one under /tmp)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2, help="training steps before saving")
    ap.add_argument("--threads", type=int, default=0, help="ckpz threads (0 = all cores)")
    ap.add_argument("--level", type=int, default=ckpz.LEVEL_DEFAULT)
    ap.add_argument("--zstd", default=shutil.which("zstd") or "zstd")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="ckpz-bench-", dir=args.dir or "/tmp")
    try:
        t, state = timed(lambda: make_state(args.steps))
        size = tensor_bytes(state)
        print("checkpoint: GPT (%.1f M parameters) + AdamW after %d steps: %.1f MB of tensors, built in %.1f s"
              % (sum(v.numel() for v in state["model"].values()) / 1e6, args.steps, size / 1e6, t))
        print("libckpz %s, %d cores, torch %s, %s" % (ckpz.library_version(), os.cpu_count(), torch.__version__,
              subprocess.run([args.zstd, "-V"], capture_output=True, text=True).stdout.strip()))
        if size < 200e6:
            print("warning: checkpoint under 200 MB")

        ck = os.path.join(work, "x.pt.ckpz")
        pt = os.path.join(work, "x.pt")
        zs = pt + ".zst"
        a_save, a_load, b_save, b_zstd, b_unzstd, b_load = [], [], [], [], [], []
        for r in range(args.repeat):
            # (a) ckpz
            t, _ = timed(lambda: ckpz.save(state, ck, level=args.level, threads=args.threads))
            a_save.append(t)
            t, back = timed(lambda: ckpz.load(ck, threads=args.threads))
            a_load.append(t)
            if r == 0 and not same(state, back):
                sys.exit("ckpz.load(ckpz.save(state)) differs from state")
            del back
            # (b) torch.save + zstd -1, zstd -d + torch.load
            t, _ = timed(lambda: torch.save(state, pt))
            b_save.append(t)
            t, _ = timed(lambda: subprocess.run([args.zstd, "-1", "-q", "-f", pt], check=True))
            b_zstd.append(t)
            os.unlink(pt)
            t, _ = timed(lambda: subprocess.run([args.zstd, "-d", "-q", "-f", zs], check=True))
            b_unzstd.append(t)
            t, back = timed(lambda: torch.load(pt))
            b_load.append(t)
            if r == 0 and not same(state, back):
                sys.exit("torch.load differs from state")
            del back
            pt_size, zs_size, ck_size = os.path.getsize(pt), os.path.getsize(zs), os.path.getsize(ck)
            os.unlink(pt)
            os.unlink(zs)

        med = statistics.median
        a = med(x + y for x, y in zip(a_save, a_load))
        b = med(s + z + u + lo for s, z, u, lo in zip(b_save, b_zstd, b_unzstd, b_load))
        mb = pt_size / 1e6
        print()
        print("torch.save file: %.1f MB" % mb)
        print("(a) ckpz -%d:   %.1f MB (%.3fx)   save %.3f s + load %.3f s = %.3f s   (%.0f MB/s round trip)"
              % (args.level, ck_size / 1e6, pt_size / ck_size, med(a_save), med(a_load), a, mb / a))
        print("(b) zstd -1:   %.1f MB (%.3fx)   torch.save %.3f s + zstd -1 %.3f s + zstd -d %.3f s + torch.load "
              "%.3f s = %.3f s   (%.0f MB/s round trip)"
              % (zs_size / 1e6, pt_size / zs_size, med(b_save), med(b_zstd), med(b_unzstd), med(b_load), b, mb / b))
        print("(a) < (b): %s   (b)/(a) = %.2fx   [median of %d; totals are medians of per-run sums]"
              % ("yes" if a < b else "NO", b / a, args.repeat))
        return 0 if a < b else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
