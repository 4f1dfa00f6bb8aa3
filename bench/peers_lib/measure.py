"""Interleaved timed rounds over the worker processes, and their medians.

For each file: every worker loads it (and prepares: element type, training); a setting in
SLOW first runs once on the whole file (its ratio and check), then is timed on the
file's sample. Then, for each thread count: a warm-up round (not recorded) and `runs`
rounds, each running every setting once (compression, decompression, check) in an order
rotated by one per round, so that no setting always runs first or after the same one.
"""

import json
import os
import statistics
import subprocess
import sys


class Pool:
    def __init__(self, families, env, train_step=None, step=None):
        self.procs, self.owner, self.threaded, self.order = {}, {}, {}, []
        for fam in families:
            cmd = [sys.executable, "-m", "peers_lib.worker", fam]
            if train_step is not None:
                cmd += ["--train-step", str(train_step), "--step", str(step)]
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
            self.procs[fam] = p
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("bench/peers: worker %s did not start (exit %s; its errors above)" % (fam, p.wait()))
            hello = json.loads(line)
            for name, threaded in hello["tools"]:
                self.owner[name], self.threaded[name] = fam, threaded
                self.order.append(name)

    def ask(self, fam, req):
        p = self.procs[fam]
        p.stdin.write(json.dumps(req) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("worker %s ended (exit %s)" % (fam, p.wait()))
        return json.loads(line)

    def close(self):
        for p in self.procs.values():
            try:
                p.stdin.write('{"op": "quit"}\n')
                p.stdin.close()
            except OSError:
                pass
            p.wait()


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def summarise(path, tool, threads, runs, full, sampled):
    """One row: medians over the recorded runs."""
    ok = all(r.get("ok") for r in runs) and (full is None or full.get("ok"))
    size = full["size"] if full else runs[0]["size"]
    nbytes = full["bytes"] if full else runs[0]["bytes"]
    tb = runs[0]["bytes"]
    c_cpu, d_cpu = _median([r["c_cpu"] for r in runs]), _median([r["d_cpu"] for r in runs])
    c_wall, d_wall = _median([r["c_wall"] for r in runs]), _median([r["d_wall"] for r in runs])
    row = {
        "file": os.path.basename(path), "tool": tool, "threads": threads, "sampled": sampled,
        "bytes": nbytes, "compressed": size, "ratio": nbytes / size, "runs": len(runs),
        "comp_mbs_core": tb / c_cpu / 1e6, "decomp_mbs_core": tb / d_cpu / 1e6,
        "comp_mbs_wall": tb / c_wall / 1e6, "decomp_mbs_wall": tb / d_wall / 1e6,
        "comp_spread": (max(r["c_cpu"] for r in runs) - min(r["c_cpu"] for r in runs)) / c_cpu,
        "peak_rss_mb": max(r["hwm_kb"] for r in runs) / 1024,
        "added_rss_mb": max(r["hwm_kb"] - r["rss0_kb"] for r in runs) / 1024,
        "checked": ok,
    }
    if "worst" in runs[0]:
        row["worst_err_over_bound"] = max(r["worst"] for r in runs)
        row["lossy_values"] = runs[0]["lossy_values"]
    return row


def measure_file(pool, path, tools, thread_counts, runs, slow, sample_mb, log):
    fams = sorted({pool.owner[t] for t in tools})
    for fam in fams:
        info = pool.ask(fam, {"op": "load", "path": path, "sample_mb": sample_mb})
        if "error" in info:
            raise RuntimeError("%s: %s" % (path, info["error"]))
    full = {}
    for t in tools:
        if t in slow:
            r = pool.ask(pool.owner[t], {"op": "run", "tool": t, "threads": 1})
            if "error" in r:
                raise RuntimeError("%s %s: %s" % (path, t, r["error"]))
            full[t] = r
    rows = []
    for threads in thread_counts:
        todo = [t for t in tools if threads == 1 or pool.threaded[t]]
        if not todo:
            continue
        got = {t: [] for t in todo}
        for rnd in range(runs + 1):
            k = rnd % len(todo)
            for t in todo[k:] + todo[:k]:
                r = pool.ask(pool.owner[t], {"op": "run", "tool": t, "threads": threads, "sample": t in slow})
                if "error" in r:
                    raise RuntimeError("%s %s: %s" % (path, t, r["error"]))
                if not r["ok"]:
                    log("  CHECK FAILED: %s %s threads=%d %s" % (os.path.basename(path), t, threads,
                                                              {k: v for k, v in r.items() if k != "ok"}))
                if rnd:
                    got[t].append(r)
        for t in todo:
            row = summarise(path, t, threads, got[t], full.get(t), t in slow)
            rows.append(row)
            log("  %-34s %-26s T%-2d %7.4fx  c %7.1f  d %7.1f MB/s/core%s" % (
                row["file"], t, threads, row["ratio"], row["comp_mbs_core"], row["decomp_mbs_core"],
                "" if row["checked"] else "  CHECK FAILED"))
    return rows
