"""The judge of bench/resume-test: what a restore did to the state (errors per tensor
family, Adam's exp_avg_sq made <= 0, weights whose progress it erased), the verdict of a
run, and its report. No training here; bench/resume-test calls these.

Verdict (the limits of issue 32): PASS when the gap |C - A| / A <= max(0.5 %, noise floor
|B - A| / A: the largest over the runs B, one per data order), every loss of run C is
finite (no divergence), no restore froze training (neither the weights as a whole nor any
one weight tensor lost more than half of its progress since the previous restore), no restore made an exp_avg_sq value <= 0 that was
positive before it (or negative at all), nothing non-finite came back, and, for a
lossless run, C's eval curve equals A's exactly.
"""
import math
import os
import shlex

import torch

import resume_budget

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FREEZE_LIMIT = 0.5      # share of the weights' progress a restore erased = frozen
GAP_FLOOR = 0.005       # 0.5%: gaps below this are accepted whatever the noise floor
FREEZE_MIN_MOVED = 256  # a tensor is judged frozen alone only with this many moved values


class HarnessError(Exception):
    pass


def log(msg):
    print(msg, flush=True)


def family(name):
    if name.startswith("model."):
        return "weights"
    for f in ("exp_avg_sq", "exp_avg"):       # exp_avg_sq first: exp_avg is its prefix
        if name.endswith("." + f):
            return f
    return "other"       # the optimizer's step counters


def compare(pre, restored, metrics):
    """Error per tensor family, exp_avg_sq sign counts, non-finite count."""
    fam = {}
    nonpos_before = nonpos_after = neg_after = made = nonfinite = 0
    other_changed = []
    for name, x in pre.items():
        y = restored.get(name)
        if y is None or y.shape != x.shape:
            raise HarnessError(f"restored checkpoint lacks or reshapes {name}")
        f = family(name)
        xn = x.detach().double().numpy()
        yn = y.detach().double().numpy()
        if f == "other":
            if not (xn == yn).all():
                other_changed.append(name)
            continue
        st = metrics.error_stats(xn, yn)
        fam.setdefault(f, []).append((st, float(xn.min()), float(xn.max())))
        if y.is_floating_point():
            nonfinite += int((~torch.isfinite(y)).sum())
        if f == "exp_avg_sq":
            nonpos_before += int((x <= 0).sum())
            nonpos_after += int((y <= 0).sum())
            neg_after += int((y < 0).sum())
            made += int(((x > 0) & (y <= 0)).sum())
    err = {}
    for f, parts in fam.items():
        c = metrics.combine_errors(parts)
        err[f] = dict(max_abs=c["max_abs"], mae=c["mae"], n=c["n"])
    return dict(errors=err, exp_avg_sq_nonpos_restored=nonpos_after,
                exp_avg_sq_nonpos_before=nonpos_before, exp_avg_sq_neg_restored=neg_after,
                exp_avg_sq_nonpos_made=made, nonfinite_restored=nonfinite,
                other_changed=other_changed)


def freeze_check(pre, restored, prev):
    """How much of training's progress since the previous restored state (prev) the
    restore kept. For each weight element the update is u = x - prev and the restore
    moved it by d = restored - prev; kept = sum(sign(u) * d) / sum(|u|): 1 when updates
    survive (exactly, or on average with unbiased rounding), near 0 when the compressor
    snaps values back to where they were (training silently frozen). `frac` is the
    erased share over all weight tensors, 1 - kept; `frozen_tensors` the tensors (with
    at least FREEZE_MIN_MOVED moved values) whose own erased share is over
    FREEZE_LIMIT; `snapped` counts the values restored exactly to their previous value,
    for information."""
    moved = snapped = 0
    up = kept = 0.0
    worst = (0.0, None)
    frozen = []
    for name, x in pre.items():
        if family(name) != "weights" or not x.is_floating_point():
            continue
        p, r = prev[name].double(), restored[name].double()
        u = x.double() - p
        fin = torch.isfinite(u) & torch.isfinite(r)
        ch = (x != prev[name]) & fin
        n_ch = int(ch.sum())
        moved += n_ch
        snapped += int((ch & (restored[name] == prev[name])).sum())
        t_up = float(u[fin].abs().sum())
        t_kept = float((torch.sign(u[fin]) * (r[fin] - p[fin])).sum())
        up += t_up
        kept += t_kept
        if n_ch >= 64 and t_up > 0 and 1 - t_kept / t_up > worst[0]:
            worst = (1 - t_kept / t_up, name)
        if n_ch >= FREEZE_MIN_MOVED and t_up > 0 and 1 - t_kept / t_up > FREEZE_LIMIT:
            frozen.append(name)
    frac = 1 - kept / up if up > 0 else 0.0
    return dict(moved=moved, snapped=snapped, snapped_frac=snapped / moved if moved else 0.0,
                kept=1 - frac, frac=max(0.0, frac), worst_tensor=worst[1], worst_frac=worst[0],
                frozen_tensors=frozen)


def is_frozen(row):
    return row["freeze"]["frac"] > FREEZE_LIMIT or bool(row["freeze"]["frozen_tensors"])


def b_names(k):
    """The names of K runs B, one per data order: B, B2, ... BK."""
    return ["B"] + [f"B{j}" for j in range(2, k + 1)]


def floors(res):
    """|B - A| / A of each run B; nan where B's final loss is not finite (a run B that
    diverged says nothing of the spread: it neither raises the floor nor lowers it)."""
    A = res["runs"]["A"]["final"]
    return [abs(B - A) / A if math.isfinite(B) else math.nan
            for B in (res["runs"][k]["final"] for k in b_names(res["floor_runs"]))]


def verdict(res):
    A, C = res["runs"]["A"]["final"], res["runs"]["C"]["final"]
    ck = res["checkpoints"]
    nfs = floors(res)
    nf = max((x for x in nfs if not math.isnan(x)), default=0.0)
    gap = abs(C - A) / A if math.isfinite(C) else math.inf
    limit = max(GAP_FLOOR, nf)
    frozen = [r["step"] for r in ck if is_frozen(r)]
    made = sum(r["exp_avg_sq_nonpos_made"] + r["exp_avg_sq_neg_restored"] for r in ck)
    why = []
    div = res["runs"]["C"].get("diverged")
    if div is not None:
        why.append(f"run C diverged (non-finite training loss at step {div})")
    elif not math.isfinite(C):
        why.append("run C's final loss is not finite")
    gap_fail = math.isfinite(C) and div is None and gap > limit
    if gap_fail:
        why.append(f"gap {gap:.4%} > limit {limit:.4%}")
    if frozen:
        why.append(f"training frozen at steps {frozen}")
    if made:
        why.append(f"{made} exp_avg_sq values made <= 0 by restores")
    if any(r["nonfinite_restored"] for r in ck):
        why.append("non-finite values restored")
    if res["lossless"] and res["runs"]["C"]["curve"] != res["runs"]["A"]["curve"]:
        why.append("lossless, yet C's eval curve differs from A's")
    ok = not why
    sound = len(why) == int(gap_fail)     # nothing but the gap against this seed's floor
    if ok:
        of = f" (the largest of {len(nfs)} runs B)" if len(nfs) > 1 else ""
        why.append(f"gap {gap:.4%} <= max(0.5%, noise floor {nf:.4%}{of}), no freeze, "
                   f"no exp_avg_sq made <= 0, finite")
    return dict(noise_floor=nf, noise_floors=nfs, gap=gap, limit=limit, frozen_steps=frozen,
                frozen_tensors=sum(len(r["freeze"]["frozen_tensors"]) for r in ck),
                v_nonpos_made=made, diverged=div, pass_=ok, sound=sound, why="; ".join(why))


def summary(res, metrics):
    """The figures one matrix cell shows, from one run's results."""
    ck = res["checkpoints"]
    ratios = [r["ratio"] for r in ck]
    tot_o = sum(r["orig_bytes"] for r in ck)
    tot_c = sum(r["lossy_bytes"] for r in ck)
    v = res["verdict"]
    return dict(restores=len(ck), mean_ratio=sum(ratios) / len(ratios) if ratios else None,
                min_ratio=min(ratios, default=None), max_ratio=max(ratios, default=None),
                all_ratio=metrics.ratio(tot_o, tot_c) if ck else None,
                gap=v["gap"], noise_floor=v["noise_floor"], limit=v["limit"],
                noise_floors=v["noise_floors"],
                signed_gap=(res["runs"]["C"]["final"] - res["runs"]["A"]["final"]) / res["runs"]["A"]["final"],
                passed=v["pass"], frozen_steps=len(v["frozen_steps"]),
                frozen_tensors=v["frozen_tensors"], v_nonpos_made=v["v_nonpos_made"],
                diverged=v["diverged"], sound=v["sound"], why=v["why"], wall_s=res.get("wall_s"),
                budget=resume_budget.of_run(ck))


# ------------------------------------------------------------------------- reporting
def fmt_e(x):
    return "-" if x is None else (f"{x:.2e}" if x != 0 else "0")


def report(res, metrics):
    v = res["verdict"]
    log("")
    log(f"resume-test family={res['family']} preset={res['preset']} "
        f"schedule={res['config']['schedule']} seed={res['config']['seed']} "
        f"steps={res['config']['steps']} checkpoints at {res['checkpoint_steps']} "
        f"base={'no' if res['no_base'] else 'previous lossy'}")
    log(f"policy {res['policy']}: lossy args {shlex.join(res['lossy']) or '(none: lossless)'}"
        + (f"; EXPERIMENT --moment-sign {res['moment_sign']}" if res.get("moment_sign") else ""))
    log("")
    log("  run                          final eval loss   wall")
    for k, what in ([("A", "lossless reference")]
                    + [(b, f"noise floor (data seed {s})")
                       for b, s in zip(b_names(res["floor_runs"]), res["noise_seeds"])]
                    + [("C", "lossy closed loop")]):
        r = res["runs"][k]
        log(f"  {k:3s} {what:30s} {r['final']:10.4f}      {r['wall_s']:5.0f}s")
    each = (" (" + " / ".join(f"{x:.4%}" for x in v["noise_floors"]) + ")"
            if len(v["noise_floors"]) > 1 else "")
    log(f"  noise floor |B-A|/A = {v['noise_floor']:.4%}{each}   gap |C-A|/A = {v['gap']:.4%}   "
        f"limit {v['limit']:.4%}")
    if res["runs"]["C"]["curve"] == res["runs"]["A"]["curve"]:
        log("  C's eval curve is identical to A's")
    log("")
    log(f"  {'step':>4s} {'orig B':>11s} {'ckpz B':>11s} {'ratio':>7s} {'lossless':>8s} "
        f"{'v<=0 rest/pre':>13s} {'w max':>8s} {'w MAE':>8s} {'m max':>8s} {'m MAE':>8s} "
        f"{'v max':>8s} {'v MAE':>8s} {'freeze':>7s} {'frozen':>6s} {'dloss':>8s}")
    for r in res["checkpoints"]:
        e = r["errors"]

        def g(f, k):
            return fmt_e(e.get(f, {}).get(k))

        log(f"  {r['step']:4d} {r['orig_bytes']:11d} {r['lossy_bytes']:11d} {r['ratio']:6.2f}x "
            f"{r['lossless_ratio']:7.2f}x "
            f"{r['exp_avg_sq_nonpos_restored']:6d}/{r['exp_avg_sq_nonpos_before']:<6d} "
            f"{g('weights', 'max_abs'):>8s} {g('weights', 'mae'):>8s} "
            f"{g('exp_avg', 'max_abs'):>8s} {g('exp_avg', 'mae'):>8s} "
            f"{g('exp_avg_sq', 'max_abs'):>8s} {g('exp_avg_sq', 'mae'):>8s} "
            f"{r['freeze']['frac']:6.1%} {len(r['freeze']['frozen_tensors']):6d} "
            f"{r['eval_after'] - r['eval_before']:+8.4f}")
    log("  (w/m/v = weights/exp_avg/exp_avg_sq; freeze = share of the weights' progress since the "
        "previous restore that the restore erased, 1 - sum(sign(u) d) / sum(|u|); frozen = weight "
        "tensors of which it erased more than half; dloss = eval loss after minus before the restore)")
    ck = res["checkpoints"]
    tot_o = sum(r["orig_bytes"] for r in ck)
    tot_c = sum(r["lossy_bytes"] for r in ck)
    tot_l = sum(r["lossless_bytes"] for r in ck)
    if ck:
        s = summary(res, metrics)
        log(f"  all checkpoints: {tot_o} -> {tot_c} B, {metrics.ratio(tot_o, tot_c):.2f}x; "
            f"per checkpoint mean {s['mean_ratio']:.2f}x, {s['min_ratio']:.2f}-{s['max_ratio']:.2f}x "
            f"(lossless stand-alone {metrics.ratio(tot_o, tot_l):.2f}x)")
    resume_budget.report(ck, log)
    for r in ck:
        if (r["exp_avg_sq_neg_restored"] or r["exp_avg_sq_nonpos_made"]
                or r["nonfinite_restored"] or r["other_changed"]):
            log(f"  WARNING step {r['step']}: {r['exp_avg_sq_nonpos_made']} exp_avg_sq made <= 0 "
                f"({r['exp_avg_sq_neg_restored']} negative), {r['nonfinite_restored']} non-finite "
                f"values, changed non-float state: {r['other_changed'] or 'none'}")
    if v["frozen_steps"]:
        log("")
        log("  " + "!" * 76)
        log(f"  !!! FREEZE: at steps {v['frozen_steps']} the restores erased most of the progress")
        log(f"  !!! since the previous restore ({v['frozen_tensors']} frozen weight tensors in all):")
        log("  !!! training is silently frozen. FAIL.")
        log("  " + "!" * 76)
    log("")
    log(f"  {'PASS' if v['pass'] else 'FAIL'}: {v['why']}")


def shown(args):
    """ckpz arguments with repository paths as a user types them."""
    return shlex.join(os.path.relpath(a, ROOT) if a.startswith(ROOT + os.sep) else a
                      for a in args)


def write_markdown(path, res, metrics):
    """One row per lossy setting in BENCHMARKS.md's resume-test table (between the
    bench/resume-test markers; a row with the same setting and preset is replaced)."""
    begin, end = "<!-- bench/resume-test begin -->", "<!-- bench/resume-test end -->"
    head = ("| ckpz flags (chain: each file against the previous lossy one) | preset | restores | "
            "whole checkpoint ratio (all / first / last) | final loss A / B / C | gap | noise floor | "
            "max freeze | exp_avg_sq <= 0 made | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n")
    A, C = res["runs"]["A"]["final"], res["runs"]["C"]["final"]
    v, ck = res["verdict"], res["checkpoints"]
    nfs = [-1.0 if math.isnan(x) else x for x in v["noise_floors"]]   # B: the run that sets the floor
    B = res["runs"][b_names(len(nfs))[nfs.index(max(nfs))]]["final"]
    tot_o = sum(r["orig_bytes"] for r in ck)
    tot_c = sum(r["lossy_bytes"] for r in ck)
    made = sum(r["exp_avg_sq_nonpos_made"] for r in ck)
    flags = shown(res["lossy"]) or "(lossless)"
    if res.get("keyframe_lossy") is not None:
        flags += "; first file: " + (shown(res["keyframe_lossy"]) or "(lossless)")
    if res["no_base"]:
        flags += "; no base"
    preset = res["preset"] if res["family"] == "gpt" else f"{res['family']} {res['preset']}"
    key = "| `%s` | %s |" % (flags, preset)
    row = "%s %d | %.2fx / %.2fx / %.2fx | %.4f / %.4f / %.4f | %.3f%% | %.3f%% | %.1f%% | %d | %s |\n" % (
        key, len(ck), metrics.ratio(tot_o, tot_c), ck[0]["ratio"], ck[-1]["ratio"], A, B, C,
        100 * v["gap"], 100 * v["noise_floor"], 100 * max(r["freeze"]["frac"] for r in ck), made,
        "PASS" if v["pass"] else "FAIL")
    text = open(path).read() if os.path.exists(path) else ""
    if begin in text and end in text:
        a, b = text.index(begin) + len(begin), text.index(end)
        rows = [r + "\n" for r in text[a:b].strip("\n").split("\n")[2:] if r.startswith("|")]
        rows = [r for r in rows if not r.startswith(key)] + [row]
        text = text[:a] + "\n" + head + "".join(rows) + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n" + begin + "\n" + head + row + end + "\n"
    with open(path, "w") as f:
        f.write(text)
