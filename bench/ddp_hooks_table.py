"""bench/ddp-hooks, the table: the runs' records summed up per cell, as Markdown.

A cell is one torch release, model, number of ranks, link rate and hook, over the seeds.
Per cell:

- bytes/step: what one rank's veth sent per step after the warm-up (mean over ranks and
  seeds), and no hook's bytes divided by it;
- step ms: the median over the seeds of each run's median step time after the warm-up
  (a step's time is its slowest rank's);
- time to target: the time from the first step until the loss (the mean over the ranks,
  averaged over a window of SMOOTH steps) first reaches the target, the median over the
  seeds ("-" when half the seeds or more never reach it; "k/n" says how many did). The
  target is no hook's smoothed loss at TARGET_AT of the steps, averaged over its seeds;
- final loss: the trained model's loss on the task's held-out set (the same for every
  run; records without one: the mean of the last SMOOTH steps' losses), averaged over the seeds, and
  the spread (max - min) over the seeds; loss/none, and whether it is within
  max(1 %, noise floor) above no hook's, the noise floor being no hook's spread over the
  seeds relative to its mean;
- load: the machine's 1-minute load average over the cell's runs (min-max of the values
  taken before and after each run). The bench's own ranks count in it (up to one each):
  overloaded() judges the load beyond them.

Notes under the table: each cell's target and noise floor, and what ckpz-auto chose in
each of its runs (records that carry auto's record).
"""

import os
import statistics

SMOOTH = 5  # steps averaged for a smoothed loss
TARGET_AT = 0.8  # the target loss: no hook's smoothed loss at this fraction of the steps
BEGIN, END = "<!-- bench/ddp-hooks begin -->", "<!-- bench/ddp-hooks end -->"


def smoothed(losses):
    """The mean of each window of SMOOTH steps ending at each step (shorter at the start)."""
    return [sum(losses[max(0, i - SMOOTH + 1):i + 1]) / (i + 1 - max(0, i - SMOOTH + 1)) for i in range(len(losses))]


def time_to(rec, target):
    """Seconds from the first step until rec's smoothed loss is <= target (None: never)."""
    t = 0.0
    for loss, s in zip(smoothed(rec["losses"]), rec["seconds"]):
        t += s
        if loss <= target:
            return t
    return None


def model_of(rec):
    """The model as the table names it: a run without a held-out loss (records from before
    the bench had one) is a cell of its own, "MODEL (train loss)", as its final loss is the
    last steps' mean and would not compare with a held-out one."""
    return rec["model"] if rec.get("heldout") is not None else rec["model"] + " (train loss)"


def cells(records, warmup):
    """[(key, cell)] in table order, key = (torch, model_of, world, rate), cell = {hook: figures}."""
    groups = {}
    for r in records:
        groups.setdefault((r["torch"], model_of(r), r["world"], r["rate"]), {}).setdefault(r["hook"], []).append(r)
    out = []
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2], rate_bits(k[3]))):
        by_hook = groups[key]
        base = by_hook.get("none")
        figures = {}
        steps = len(base[0]["losses"]) if base else 0
        at = max(0, min(steps - 1, int(round(TARGET_AT * steps)) - 1))
        target = statistics.mean(smoothed(r["losses"])[at] for r in base) if base else None
        base_final = [final(r) for r in base] if base else []
        floor = (max(base_final) - min(base_final)) / statistics.mean(base_final) if len(base_final) > 1 else 0.0
        for hook, recs in by_hook.items():
            fin = [final(r) for r in recs]
            times = [time_to(r, target) for r in recs] if target is not None else []
            reached = sorted(t for t in times if t is not None)
            med_t = None
            if len(reached) > len(recs) / 2:  # the median over seeds, unreached ones counted as infinite
                med_t = sorted(reached + [float("inf")] * (len(recs) - len(reached)))[(len(recs) - 1) // 2]
            loads = [x for r in recs for x in r["load"]]
            figures[hook] = {
                "seeds": len(recs), "bytes": statistics.mean(r["bytes_per_step"] for r in recs),
                "step_s": statistics.median(statistics.median(r["seconds"][warmup:] or r["seconds"]) for r in recs),
                "to_target": med_t, "reached": len(reached), "final": statistics.mean(fin),
                "spread": max(fin) - min(fin), "load": (min(loads), max(loads)),
                "auto": [r["auto"]["choice"] for r in recs if r.get("auto")]}
        if base:
            b = figures["none"]
            for f in figures.values():
                f["vs_bytes"] = b["bytes"] / f["bytes"] if f["bytes"] else float("inf")
                f["vs_loss"] = f["final"] / b["final"]
                f["within"] = f["vs_loss"] - 1 <= max(0.01, floor)
        out.append((key, {"figures": figures, "target": target, "target_step": at + 1, "floor": floor,
                          "steps": steps}))
    return out


def merge(saved):
    """The runs of several --json files of bench/ddp-hooks ([(name, its dict)]) as one:
    (records, hooks in the order the files gave them, steps, warmup, runs left out). A
    run (torch, model_of, ranks, link, hook, seed) already read from an earlier file is
    left out (the same run twice would count as two seeds); ValueError when the files'
    steps or warmup differ (their cells would not compare)."""
    records, hooks, seen, dropped, shape = [], [], set(), 0, None
    for name, data in saved:
        args = data.get("args") or {}
        if not isinstance(args.get("hooks"), list) or not isinstance(data.get("records"), list):
            raise ValueError("%s: not the --json of bench/ddp-hooks" % name)
        if shape is None:
            shape = (args.get("steps"), args.get("warmup"))
        if (args.get("steps"), args.get("warmup")) != shape:
            raise ValueError("%s: --steps %s --warmup %s, the first file's %s %s"
                             % (name, args.get("steps"), args.get("warmup"), shape[0], shape[1]))
        hooks += [h for h in args["hooks"] if h not in hooks]
        for r in data["records"]:
            key = (r.get("torch"), model_of(r), r.get("world"), r.get("rate"), r.get("hook"), r.get("seed"))
            if key in seen:
                dropped += 1
                continue
            seen.add(key)
            records.append(r)
    return records, hooks, shape[0] if shape else None, shape[1] if shape else None, dropped


def overloaded(records, cores):
    """A sentence for the header on the load beyond the bench's own ranks: each run's load
    averages less its ranks (each runnable at most all the time), per cell (torch, model,
    ranks, link). Where that passed half the cores, other jobs took the CPUs the ranks
    wanted: step times and times to target there say little (bytes and losses still do);
    the sentence names the cells where it did not, if any did."""
    extra = {}
    for r in records:
        key = (r["torch"], model_of(r), r["world"], r["rate"])
        extra[key] = max([extra.get(key, float("-inf"))] + [x - r["world"] for x in r["load"]])
    if not extra:
        return ""
    quiet = sorted(k for k, v in extra.items() if v <= cores / 2)
    top = max(extra.values())
    if len(quiet) == len(extra):
        return (" The load beyond the bench's own ranks (load average less the ranks) was at most %.1f on %d cores: "
                "step ms compare across hooks (the ranks share the cores)." % (max(0.0, top), cores))
    said = (" The load beyond the bench's own ranks (load average less the ranks) reached %.1f on %d cores: step ms "
            "and time to target are not meaningful" % (top, cores))
    if not quiet:
        return said + " here, only bytes and losses are."
    return said + " but in the cells where it stayed within %g (%s), only bytes and losses are." % (
        cores / 2, "; ".join("torch %s %s %d ranks %s" % k for k in quiet))


def final(rec):
    """The held-out loss of the run, else the mean of its last SMOOTH steps' losses."""
    if rec.get("heldout") is not None:
        return rec["heldout"]
    return statistics.mean(rec["losses"][-SMOOTH:])


def rate_bits(rate):
    """Bits per second of a tc rate such as 100mbit, 1gbit, 10gbit (for ordering)."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    for u, f in units.items():
        if rate.endswith(u) and rate[:-len(u)].replace(".", "", 1).isdigit():
            return float(rate[:-len(u)]) * f
    return 0.0


def markdown(table, hooks, skipped):
    """The table's lines: one row per cell, in hooks' order, then the cells' targets and
    noise floors, then the hooks not run and why."""
    lines = ["| torch | model | ranks | link | hook | bytes/step | vs none | step ms | time to target s | "
             "final loss (spread) | loss/none | within | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for (torch, model, world, rate), cell in table:
        figs = cell["figures"]
        for hook in [h for h in hooks if h in figs]:
            f = figs[hook]
            tt = "-" if f["to_target"] is None else "%.1f" % f["to_target"]
            if f["reached"] < f["seeds"]:
                tt += " (%d/%d)" % (f["reached"], f["seeds"])
            lines.append("| %s | %s | %d | %s | %s | %s | %s | %.1f | %s | %.4f (%.4f) | %s | %s | %.1f-%.1f |" % (
                torch, model, world, rate, hook, human(f["bytes"]),
                "%.1fx" % f["vs_bytes"] if "vs_bytes" in f else "?", 1e3 * f["step_s"], tt, f["final"],
                f["spread"], "%.3f" % f["vs_loss"] if "vs_loss" in f else "?",
                ("yes" if f["within"] else "no") if "within" in f else "?", f["load"][0], f["load"][1]))
        if cell["target"] is not None:
            notes.append("- torch %s, %s, %d ranks, %s: target loss %.4f (no hook's at step %d of %d); noise floor "
                         "%.2f %%, so within = loss/none <= %.4f." % (
                             torch, model, world, rate, cell["target"], cell["target_step"], cell["steps"],
                             100 * cell["floor"], 1 + max(0.01, cell["floor"])))
        for hook in [h for h in hooks if h in figs and figs[h].get("auto")]:
            chose = figs[hook]["auto"]
            notes.append("- torch %s, %s, %d ranks, %s: %s chose %s." % (torch, model, world, rate, hook, ", ".join(
                "%s (%d of %d seeds)" % (c, chose.count(c), figs[hook]["seeds"]) for c in sorted(set(chose)))))
    for (py, hook), why in sorted(skipped.items()):
        notes.append("- not run: %s on %s: %s" % (hook, py, why))
    return lines, notes


def human(b):
    for unit, f in (("MB", 1e6), ("kB", 1e3)):
        if b >= f:
            return "%.2f %s" % (b / f, unit)
    return "%.0f B" % b


def write_benchmarks(path, header, lines, notes):
    """Replaces what stands between the bench's markers in path (or adds a section at the
    end with them) by header, the table and the notes."""
    block = "%s\n%s\n\n%s\n\n%s\n%s\n" % (BEGIN, "\n".join(header), "\n".join(lines), "\n".join(notes), END)
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + ("\n\n## DDP gradient compression over emulated links (`bench/ddp-hooks`; tables "
                                    "between markers are generated)\n\n" + block)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
