"""EXPERIMENT (issue 32, step 1): Adam's first moment stored as its sign plus a scale.

bench/resume-test --moment-sign MODE measures what training does if exp_avg were kept as
sign(m) and one scale c, restored as m_hat = sign(m) * c * sqrt(v_hat) (v_hat the RESTORED
exp_avg_sq of the same parameter: what a decoder would have), WITHOUT a format change:
the .ckpz file is written as the policy says; after each restore, every exp_avg that the
file stored lossily (and whose exp_avg_sq has its shape) is replaced by m_hat, computed
from the ORIGINAL m (what an encoder sees) and the restored v. Where v_hat is 0, m_hat is 0.

Modes (c fitted by least squares of |m| against sqrt(v_hat) over the elements it covers):
  tensor   one c per tensor                       cost n/8 B + 8 B
  row      one c per row (first dimension)        cost n/8 B + 4 B per row + 8 B
  tern     ternary: 0 where |m|/sqrt(v_hat) < TERN_T * its mean over the tensor, else
           sign * c * sqrt(v_hat), c per tensor   cost n * H / 8 B + 8 B (H: entropy of
           the three symbols, an ideal order-0 coder's bound)
  q2       sign + 2-bit class of r = |m|/sqrt(v_hat) (quartiles of r per tensor), each
           class restored as its mean r            cost n * (1 + H) / 8 B + 24 B (H: entropy
           of the class symbols)
  z2       sign + 1-bit class of z = m/sqrt(v_hat): |z| below or above 0.9816 * rms(z)
           (the 4-level grid that is optimal for a Gaussian z), each class restored as
           sign * c_k * sqrt(v_hat), c_k fitted per class    cost n * (1 + H) / 8 B + 16 B

The ratio resume-test reports in this mode is computed as: the .ckpz file's size minus the
replaced exp_avg entries' coded bytes (from the file's index) plus the mode's cost above.
"""
import math
import os
import sys

import torch

MODES = ("tensor", "row", "tern", "q2", "z2")
TERN_T = 0.5
HEAD = 8                     # bytes per tensor: a scale and a reference to the v entry


def _entries(ckpz_bin, path):
    """name -> Entry of the .ckpz file (the library next to the ckpz binary)."""
    lib = os.path.join(os.path.dirname(ckpz_bin), "libckpz.so")
    os.environ.setdefault("CKPZ_LIBRARY", lib)
    py = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    if py not in sys.path:
        sys.path.insert(0, py)
    import ckpz
    return {e.name: e for e in ckpz.list(path) if e.name}


def _entropy_bits(sym, k):
    """Order-0 entropy in bits per symbol of integer symbols 0..k-1."""
    cnt = torch.bincount(sym.flatten(), minlength=k).double()
    p = cnt[cnt > 0] / cnt.sum()
    return float(-(p * p.log2()).sum())


def _ls_scale(a, s):
    """c minimising |a - c s|^2 (a = |m|, s = sqrt(v_hat)) over the given elements."""
    den = float((s * s).sum())
    return float((a * s).sum()) / den if den > 0 else 0.0


def approx(m, v_hat, mode):
    """(m_hat, coded bytes) of one exp_avg m given the restored exp_avg_sq v_hat."""
    m64, s = m.double(), v_hat.double().clamp(min=0).sqrt()
    a, sg = m64.abs(), torch.sign(m64)
    n = m.numel()
    if mode == "tensor":
        mh, cost = sg * _ls_scale(a, s) * s, math.ceil(n / 8) + HEAD
    elif mode == "row":
        a2, s2 = a.reshape(m.shape[0], -1), s.reshape(m.shape[0], -1)
        den = (s2 * s2).sum(1)
        c = torch.where(den > 0, (a2 * s2).sum(1) / den.clamp(min=1e-300), torch.zeros_like(den))
        mh = sg * (c[:, None] * s2).reshape(m.shape)
        cost = math.ceil(n / 8) + 4 * m.shape[0] + HEAD
    elif mode == "tern":
        r = torch.where(s > 0, a / s.clamp(min=1e-300), torch.zeros_like(a))
        keep = r >= TERN_T * float(r.mean())
        c = _ls_scale(a[keep], s[keep])
        mh = torch.where(keep, sg * c * s, torch.zeros_like(s))
        sym = torch.where(keep, (sg > 0).long() + 1, torch.zeros_like(keep, dtype=torch.long))
        cost = math.ceil(n * _entropy_bits(sym, 3) / 8) + HEAD
    elif mode == "q2":
        r = torch.where(s > 0, a / s.clamp(min=1e-300), torch.zeros_like(a))
        edges = torch.quantile(r.flatten().float(), torch.tensor([0.25, 0.5, 0.75])).double()
        cls = torch.bucketize(r, edges)
        means = torch.stack([r[cls == k].mean() if bool((cls == k).any()) else r.new_zeros(())
                             for k in range(4)])
        mh = sg * means[cls] * s
        cost = math.ceil(n * (1 + _entropy_bits(cls, 4)) / 8) + HEAD + 16
    elif mode == "z2":
        r = torch.where(s > 0, a / s.clamp(min=1e-300), torch.zeros_like(a))
        outer = r >= 0.9816 * float((r * r).mean().sqrt())
        c0, c1 = _ls_scale(a[~outer], s[~outer]), _ls_scale(a[outer], s[outer])
        mh = sg * torch.where(outer, c1 * s, c0 * s)
        cost = math.ceil(n * (1 + _entropy_bits(outer.long(), 2)) / 8) + HEAD + 8
    else:
        raise ValueError(f"unknown --moment-sign mode {mode!r} ({', '.join(MODES)})")
    return mh.to(m.dtype), cost


def apply(mode, ckpz_bin, cz_path, pre, restored):
    """Replaces, in the restored checkpoint dict, every lossily stored exp_avg by its
    sign approximation from the original m (pre: flat name -> original tensor).
    Returns (bytes the file spent on those entries, bytes the mode would spend, count)."""
    ents = _entries(ckpz_bin, cz_path)
    spent = cost = count = 0
    for i, st in restored["optimizer"]["state"].items():
        name = f"optimizer.state.{i}.exp_avg"
        e = ents.get(name)
        v_hat = st.get("exp_avg_sq")
        if e is None or e.lossy is None or v_hat is None or v_hat.shape != st["exp_avg"].shape:
            continue
        mh, c = approx(pre[name], v_hat, mode)
        st["exp_avg"].copy_(mh)
        spent += e.compressed
        cost += c
        count += 1
    return spent, cost, count
