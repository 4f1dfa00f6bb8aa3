#!/usr/bin/python3
"""resume_joint: how much the weights' change and Adam's moments tell of each other
(issue 32). A measurement only: nothing here changes what ckpz writes.

    bench/resume_joint.py [--ckpz build/ckpz] [--lossy auto] [--fine 64] [-v]
                          A.pt B.pt [C.pt ...]
    bench/resume_joint.py --make FAMILY PRESET SCHEDULE STEP1,STEP2[,...] OUTDIR

Each file is a torch.save of {"model": state_dict, "optimizer": AdamW state_dict} (the
corpus' stepNNN_full.pt, or what --make writes). Every consecutive pair (BASE, NEXT) is
analysed over its weight tensors (>= 2 dimensions, >= 4096 elements, with Adam state):

  weights' change d = w_next - w_base, predicted from what a decoder that restored the
  moments first has (k = step_next - step_base, lr the mean of the two files' lr, bias
  corrections from the step counts, u_X = m_X_hat / (sqrt(v_next_hat) + eps)):
    p1   -lr k (u_next + wd w_base)
    p2   -lr k ((u_base + u_next) / 2 + wd w_base)
    p3   -lr (sum over the k steps of m_s_hat / (sqrt(v_next_hat) + eps) + k wd w_base),
         m_s interpolated as if the gradient were constant: m_next = b1^k m_base +
         (1 - b1^k) g
    ls3  least squares on u_next, u_base and w_base (three floats per tensor)
  exp_avg m_next, predicted from what a decoder that restored the weights first has:
    mb   b1^k m_base
    md   from d: -(d / (lr k) + wd w_base) (sqrt(v_next_hat) + eps) (1 - b1^t_next)
    both least squares on mb and md (two floats per tensor)
  p1..p3, mb, md are scaled by one least-squares float a per tensor (a file could store
  it; fitted on the inputs of each column); "a" in the table is its element-weighted
  mean on exact inputs (1 = the formula as it stands).

Figures per predictor: the correlation of the target with it (for ls3 and both, with
the fitted combination), and "bits saved": H(x) - H(x - a p), histogram entropies of x
and of the residual at one fine common step std(x) / FINE: the difference of
differential entropies, what a uniform quantiser at any fine step saves per element.
"coarse" is the same at the step E = sqrt(12) RMS(restored - original) of the tensor
as `--lossy=auto` restored it (the uniform grid that, rounding to nearest, errs as much
as auto did): at auto's coarse steps an entropy saves less than the fine figure.
"stoch" (d only): the same with the target and the residual rounded without bias on
auto's weight grid, step R_w (--rw, 1 at auto's default) times the RMS of the coded
change, one shared uniform draw per element; "H stoch" is the target's own entropy
there, to set beside the ~2.1 bits per element auto's weights cost (`ckpz -l -v`).

Columns: "ex" uses the files' own values. "lo" codes the files as one chain (`ckpz
--lossy=auto`, the first without a base, each next one with --base the previous .ckpz:
closed loop, as bench/resume-test does), restores each, and computes the predictors from
the restored values a decoder would have: d's target is w_next - restored w_base; m's
inputs are restored m_base, v_next and the restored weights' change. "mx": d's
predictors from the restored inputs, but the exact change d as the target (what the
base's own coding error, which no moment predicts, costs "lo"). "H coarse": the
entropy of the target itself at the coarse step, bits per element. Totals weight by
elements: bits per element of the analysed tensors, and bits per model parameter (over
every tensor with Adam state). 20x of FP32 weights + m + v is 4.8 bits per parameter.

--make trains bench/resume_models.py's FAMILY at PRESET and SCHEDULE uninterrupted with
bench/resume-test's training loop and torch.saves the state after each of STEPS (comma-separated) as
OUTDIR/FAMILY_stepN.pt.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
D_PRED = ("p1", "p2", "p3", "ls3")
M_PRED = ("mb", "md", "both")
BUFFER = re.compile(r"\.(running_mean|running_var|num_batches_tracked)$")


def load(path):
    ck = torch.load(path, map_location="cpu")
    return ck["model"], ck["optimizer"]


def param_map(model, opt):
    """(state index, model name, param group) for every tensor with Adam state. The state
    dict does not name parameters: within each group they follow the model's order, so
    each is matched to the next model tensor of its shape after the previous match,
    BatchNorm's buffers (running stats) left out. On the analysed matrices a wrong match
    would show as a correlation near 0."""
    names = [n for n in model if not BUFFER.search(n)]
    out = []
    for grp in opt["param_groups"]:
        pos = 0
        for idx in grp["params"]:
            st = opt["state"].get(idx)
            if st is None or "exp_avg" not in st:
                continue
            shape = tuple(st["exp_avg"].shape)
            while pos < len(names) and tuple(model[names[pos]].shape) != shape:
                pos += 1
            if pos == len(names):
                raise ValueError(f"no model tensor of shape {shape} for state {idx}")
            out.append((idx, names[pos], grp))
            pos += 1
    return out


def f64(t):
    return t.detach().double().numpy().ravel()


def hist_bits(x, step):
    q = np.rint(x / step).astype(np.int64)
    c = np.bincount(q - q.min())
    p = c[c > 0] / x.size
    return float(-(p * np.log2(p)).sum())


def stoch_bits(x, step, u):
    """Entropy of x rounded without bias (floor(x / step + u), u uniform in [0, 1)) on a
    grid of the given step: auto's `change-rel R stochastic` grid."""
    q = np.floor(x / step + u).astype(np.int64)
    c = np.bincount(q - q.min())
    p = c[c > 0] / x.size
    return float(-(p * np.log2(p)).sum())


def fit(x, cols):
    """Least-squares coefficients of x on the columns, and the fitted combination."""
    a = np.stack(cols, axis=1)
    coef = np.linalg.lstsq(a, x, rcond=None)[0]
    return coef, a @ coef


def corr(x, y):
    sx, sy = x.std(), y.std()
    return float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy)) if sx > 0 and sy > 0 else 0.0


def score(x, fitted, fine_step, coarse_step):
    """correlation, bits saved at the fine step and (if given) at the coarse step."""
    r = x - fitted
    fine = hist_bits(x, fine_step) - hist_bits(r, fine_step)
    coarse = None
    if coarse_step:
        coarse = hist_bits(x, coarse_step) - hist_bits(r, coarse_step)
    return corr(x, fitted), fine, coarse


def hyper(opt_b, opt_n, idx, grp_n):
    grp_b = next(g for g in opt_b["param_groups"] if idx in g["params"])
    b1, b2 = grp_n["betas"]
    t_b = float(opt_b["state"][idx]["step"])
    t_n = float(opt_n["state"][idx]["step"])
    return dict(b1=b1, b2=b2, eps=grp_n["eps"], wd=grp_n["weight_decay"],
                lr=(grp_b["lr"] + grp_n["lr"]) / 2, t_b=t_b, t_n=t_n, k=int(round(t_n - t_b)))


def predictors(h, w_b, m_b, m_n, v_n, d):
    """d's and m_next's predictors from inputs as a decoder has them (h: hyper())."""
    b1, lr, k, wd = h["b1"], h["lr"], h["k"], h["wd"]
    bc1 = lambda t: 1 - b1 ** t          # noqa: E731
    den = np.sqrt(v_n / (1 - h["b2"] ** h["t_n"])) + h["eps"]
    u_n = m_n / bc1(h["t_n"]) / den
    u_b = m_b / bc1(h["t_b"]) / den
    g = (m_n - b1 ** k * m_b) / (1 - b1 ** k)
    msum = np.zeros_like(m_n)
    for s in range(1, k + 1):
        msum += (b1 ** s * m_b + (1 - b1 ** s) * g) / bc1(h["t_b"] + s)
    dp = dict(p1=[-lr * k * (u_n + wd * w_b)],
              p2=[-lr * k * ((u_n + u_b) / 2 + wd * w_b)],
              p3=[-lr * (msum / den + k * wd * w_b)],
              ls3=[u_n, u_b, w_b])
    mb = b1 ** k * m_b
    md = -(d / (lr * k) + wd * w_b) * den * bc1(h["t_n"])
    mp = dict(mb=[mb], md=[md], both=[mb, md])
    return dp, mp


def analyse_pair(base, nxt, rbase=None, rnxt=None, fine=64, rw=1.0):
    """One row (dict) per tensor, target and predictor; rbase/rnxt: the restored
    (model, optimizer) of the lossy chain, or None."""
    (mod_b, opt_b), (mod_n, opt_n) = base, nxt
    rows, n_params = [], 0
    rng = np.random.default_rng(0)
    for idx, name, grp in param_map(mod_n, opt_n):
        n_params += mod_n[name].numel()
        if mod_n[name].dim() < 2 or mod_n[name].numel() < 4096:
            continue
        h = hyper(opt_b, opt_n, idx, grp)
        ex = dict(w_b=f64(mod_b[name]), m_b=f64(opt_b["state"][idx]["exp_avg"]),
                  m_n=f64(opt_n["state"][idx]["exp_avg"]),
                  v_n=f64(opt_n["state"][idx]["exp_avg_sq"]))
        w_n = f64(mod_n[name])
        ex["d"] = w_n - ex["w_b"]
        sets = [("ex", ex, ex["d"], ex["m_n"])]
        steps = {"d": None, "m": None}
        if rbase is not None:
            (rmb, rob), (rmn, ron) = rbase, rnxt
            lo = dict(w_b=f64(rmb[name]), m_b=f64(rob["state"][idx]["exp_avg"]),
                      m_n=f64(ron["state"][idx]["exp_avg"]),
                      v_n=f64(ron["state"][idx]["exp_avg_sq"]))
            lo["d"] = f64(rmn[name]) - lo["w_b"]        # the change a decoder restored
            rms = lambda e: np.sqrt(np.mean(e ** 2))   # noqa: E731
            steps = dict(d=np.sqrt(12) * rms(f64(rmn[name]) - w_n),
                         m=np.sqrt(12) * rms(lo["m_n"] - ex["m_n"]))
            # what is coded: the weights against the restored base; m stand-alone.
            # "mx": the same restored inputs, but the exact change as d's target
            sets += [("lo", lo, w_n - lo["w_b"], ex["m_n"]), ("mx", lo, ex["d"], None)]
        res = {}
        for label, inp, d_t, m_t in sets:
            dp, mp = predictors(h, inp["w_b"], inp["m_b"], inp["m_n"], inp["v_n"], inp["d"])
            for kind, tgt, preds in (("d", d_t, dp), ("m", m_t, mp)):
                if tgt is None:
                    continue
                fstep = tgt.std() / fine
                cstep = steps[kind] if label == "lo" and steps[kind] else None
                for pname, cols in preds.items():
                    coef, fitted = fit(tgt, cols)
                    c, fb, cb = score(tgt, fitted, fstep, cstep)
                    r = res.setdefault((kind, pname), dict(
                        name=name, n=w_n.size, kind=kind, pred=pname))
                    r.update({"c_" + label: c, "b_" + label: fb})
                    if label == "ex" and len(cols) == 1:
                        r["a"] = float(coef[0])
                    if cb is not None:
                        r["b_co"], r["h_co"] = cb, hist_bits(tgt, cstep)
                    if kind == "d" and label == "lo":
                        # auto's weight grid: step R_w * RMS of the coded change
                        es, u = rw * np.sqrt(np.mean(tgt ** 2)), rng.random(tgt.size)
                        r["h_st"] = stoch_bits(tgt, es, u)
                        r["b_st"] = r["h_st"] - stoch_bits(tgt - fitted, es, u)
        rows += list(res.values())
    return rows, n_params


def group_of(name):
    return re.sub(r"\.\d+\.", ".*.", re.sub(r"^(transformer|model)\.", "", name))


COLS = (("a", "a", ".3f"), ("c_ex", "corr ex", ".3f"), ("c_lo", "corr lo", ".3f"),
        ("b_ex", "bits ex", ".3f"), ("b_lo", "bits lo", ".3f"), ("b_mx", "bits mx", ".3f"),
        ("b_co", "coarse", ".3f"), ("h_co", "H coarse", ".2f"), ("b_st", "stoch", ".3f"),
        ("h_st", "H stoch", ".2f"))


def wavg(rs, key):
    n = sum(r["n"] for r in rs)
    if any(r.get(key) is None for r in rs):
        return None
    return sum(r[key] * r["n"] for r in rs) / n


def table(title, rows, n_params, verbose=False):
    """Rows grouped by tensor group (or per tensor), then the totals by predictor."""
    print(f"\n{title}")
    print(f"{'tensor group':26s} {'elements':>9s} {'target':>6s} {'pred':>5s} "
          + " ".join(f"{h:>8s}" for _, h, _ in COLS))
    order = {p: i for i, p in enumerate(D_PRED + M_PRED)}
    keyed = {}
    for r in rows:
        keyed.setdefault((r["kind"], r["name"] if verbose else group_of(r["name"]), order[r["pred"]]),
                         []).append(r)
    for (kind, g, o), rs in sorted(keyed.items()):
        vals = [wavg(rs, k) for k, _, _ in COLS]
        print(f"{g:26s} {sum(r['n'] for r in rs):9d} {kind:>6s} {rs[0]['pred']:>5s} "
              + " ".join(f"{'-' if v is None else format(v, f):>8s}" for v, (_, _, f) in zip(vals, COLS)))
    by = {}
    for r in rows:
        by.setdefault((r["kind"], order[r["pred"]]), []).append(r)
    n_an = sum(r["n"] for r in by.get(("d", 0), []))
    print(f"totals over the {n_an} analysed elements of {n_params} parameters; bits saved "
          "per analysed element (per model parameter)")
    for (kind, _), rs in sorted(by.items()):
        parts = []
        for key, head, f in COLS[1:]:
            v = wavg(rs, key)
            if v is None:
                continue
            per_p = "" if key[0] != "b" else f" ({v * n_an / n_params:.3f})"
            parts.append(f"{head} {v:{f}}{per_p}")
        print(f"  {kind} {rs[0]['pred']:>5s}: " + ", ".join(parts))


def run_ckpz(ckpz, args):
    p = subprocess.run([ckpz] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ckpz {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")


def lossy_chain(ckpz, lossy, paths, tmp):
    """Codes the files as one closed-loop chain; returns the restored .pt paths."""
    out, prev = [], None
    for i, pt in enumerate(paths):
        cz = os.path.join(tmp, f"{i}.ckpz")
        rs = os.path.join(tmp, f"{i}.restored.pt")
        base = ["--base", prev] if prev else []
        run_ckpz(ckpz, ["-T", "1", f"--lossy={lossy}"] + base + ["-f", "-o", cz, pt])
        run_ckpz(ckpz, ["-d", "-f"] + base + ["-o", rs, cz])
        print(f"{os.path.basename(pt)}: {os.path.getsize(pt)} -> {os.path.getsize(cz)} bytes "
              f"({os.path.getsize(pt) / os.path.getsize(cz):.2f}x)"
              + (" against the previous restored file" if prev else " (no base)"))
        out.append(rs)
        prev = cz
    return out


def make(family, preset, schedule, steps, outdir):
    sys.path.insert(0, HERE)
    import resume_models as models
    rt = models.load_script("resume_test", os.path.join(HERE, "resume-test"))
    cfg = dict(models.config(family, preset), schedule=schedule)
    cfg["steps"] = max(cfg["steps"], max(steps))
    fam = models.FAMILIES[family]
    os.makedirs(outdir, exist_ok=True)

    class Saver:
        def __init__(self):
            self.steps = steps

        def __call__(self, step, model, opt, ev):
            path = os.path.join(outdir, f"{family}_step{step}.pt")
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
            print(f"wrote {path}")

    rt.train_run(family, fam, cfg, fam.make_data(cfg), cfg["seed"] + 1, Saver())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--ckpz", default=os.path.join(HERE, "..", "build", "ckpz"))
    ap.add_argument("--lossy", default="auto", help="the --lossy= value of the chain")
    ap.add_argument("--no-lossy", action="store_true", help="exact inputs only")
    ap.add_argument("--fine", type=float, default=64, help="fine step = std / FINE")
    ap.add_argument("--rw", type=float, default=1.0,
                    help="the weights' change-rel bound R_w of the 'stoch' column (auto: 1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="one row per tensor")
    ap.add_argument("--make", nargs=5, metavar=("FAMILY", "PRESET", "SCHEDULE", "STEPS", "OUTDIR"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.make:
        fam, preset, sched, steps, outdir = args.make
        make(fam, preset, sched, [int(s) for s in steps.split(",")], outdir)
        return
    if len(args.files) < 2:
        ap.error("give at least two checkpoints (BASE NEXT ...)")
    with tempfile.TemporaryDirectory(prefix="resume_joint.") as tmp:
        restored = None if args.no_lossy else lossy_chain(args.ckpz, args.lossy, args.files, tmp)
        states = [load(p) for p in args.files]
        rstates = [load(p) for p in restored] if restored else None
        for i in range(1, len(states)):
            rb, rn = (rstates[i - 1], rstates[i]) if rstates else (None, None)
            rows, n_params = analyse_pair(states[i - 1], states[i], rb, rn, args.fine, args.rw)
            table(f"{os.path.basename(args.files[i - 1])} -> {os.path.basename(args.files[i])}"
                  f" (ex: exact inputs, lo: restored by --lossy={args.lossy} chain; bits "
                  f"saved per element at step std/{args.fine:g}; coarse: at auto's error)",
                  rows, n_params, args.verbose)


if __name__ == "__main__":
    main()
