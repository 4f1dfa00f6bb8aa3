#!/usr/bin/python3
"""resume_mgrid.py: what grids for Adam's exp_avg cost and keep of the step (issue 32).

    bench/resume_mgrid.py /work/corpus/step280_full.pt

For every exp_avg of >= 4096 elements and 2+ dimensions in a torch.save'd {'optimizer':
...} checkpoint, with u = m / (sqrt(v) + eps) the step Adam would take: bits per element
(zero-order entropy of the codes, a proxy for the entropy stage; for a grid per block,
plus 8 bits per block for its scale), the step error |u' - u| / |u| and the progress kept
sum(sign(u) u') / sum |u|, summed over the tensors. Grids: the log grid of pointwise-rel R
with a share pruned (auto's), a uniform grid of step 2 R x the tensor's RMS (change-rel R
no-base), and a uniform grid of step 2 R x the RMS of each block of 64 (not in the format).
"""
import math
import sys

import torch

EPS = 1e-8


def entropy(codes):
    _, counts = torch.unique(codes, return_counts=True)
    p = counts.double() / codes.numel()
    return float(-(p * p.log2()).sum()) * codes.numel()


def log_grid(m, r, prune):
    step = 2 * math.log2(1 + r)
    a = m.abs()
    thr = torch.quantile(a.flatten()[:: max(1, a.numel() // 65536)], prune) if prune else 0
    keep = (a >= thr) & (a > 0)
    lg = torch.where(keep, a, torch.ones_like(a)).log2()
    q = torch.round(lg / step)
    mh = torch.where(keep, m.sign() * torch.exp2(q * step), torch.zeros_like(m))
    codes = torch.where(keep, q * 2 + (m < 0), torch.full_like(q, -1e9))
    return mh, entropy(codes)


def uniform(m, r, block):
    if block:
        mb = m.reshape(-1, block)
        scale = mb.pow(2).mean(1, keepdim=True).sqrt().clamp_min(1e-30)
        step = 2 * r * scale
        q = torch.round(mb / step)
        return (q * step).reshape(m.shape), entropy(q) + 8 * mb.shape[0]
    step = 2 * r * m.pow(2).mean().sqrt()
    q = torch.round(m / step)
    return q * step, entropy(q)


def main():
    sd = torch.load(sys.argv[1], map_location="cpu")
    st = sd["optimizer"]["state"]
    pairs = [(s["exp_avg"].double(), s["exp_avg_sq"].double()) for s in st.values()
             if "exp_avg" in s and s["exp_avg"].dim() >= 2 and s["exp_avg"].numel() >= 4096]
    grids = [("log pointwise-rel 0.6 prune 0.25 (auto)", lambda m: log_grid(m, 0.6, 0.25)),
             ("log pointwise-rel 0.6", lambda m: log_grid(m, 0.6, 0))]
    grids += [(f"tensor RMS, change-rel {r} no-base", lambda m, r=r: uniform(m, r, 0)) for r in (0.1, 0.2, 0.5)]
    grids += [(f"block-64 RMS, R {r}", lambda m, r=r: uniform(m, r, 64)) for r in (0.2, 0.35, 0.5, 1.0)]
    n = sum(m.numel() for m, _ in pairs)
    print(f"{len(pairs)} exp_avg tensors, {n} elements")
    print("| grid | bits/element | step error | kept |\n|---|---|---|---|")
    for name, g in grids:
        bits = err = norm = kept = tot = 0.0
        for m, v in pairs:
            mh, b = g(m)
            d = v.sqrt() + EPS
            u, uh = m / d, mh / d
            bits += b
            err += float((uh - u).pow(2).sum())
            norm += float(u.pow(2).sum())
            kept += float((u.sign() * uh).sum())
            tot += float(u.abs().sum())
        print(f"| {name} | {bits / n:.2f} | {math.sqrt(err / norm):.3f} | {kept / tot:.3f} |")


if __name__ == "__main__":
    main()
