#!/usr/bin/python3
"""resume_budget: where the bytes of a lossy checkpoint go, by the role `--lossy=auto`
gave each tensor (`ckpz -l -v`'s role column): weights (coded as their change since the
base), Adam's exp_avg, exp_avg_sq, tensors kept exact (small ones, biases, norms, step
counters), and the overhead (the bytes outside tensors such as the pickle, and the
container's own index and headers: the file's size less its entries').

    bench/resume_budget.py [--ckpz BIN] FILE.ckpz ...   # one line per file, then the mean

Per role: bytes, share of the file, bits per element of that role and bits per model
parameter (the role's bits spread over every parameter of the model: the five add up to
the file's bits per parameter; 20x of FP32 weights + exp_avg + exp_avg_sq is 96 / 20 =
4.8 bits per parameter in all). bench/resume-test calls budget() on each lossy file.
"""
import argparse
import os
import re
import subprocess
import sys

ROLES = ("weight", "exp_avg", "exp_avg_sq", "exact", "overhead")
DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2}
# an entry row ends with: offset, bytes, comp. bytes, chunks, then the role and why
ROW = re.compile(r"^\s*\d+\s+(\S+)\s+(\S+)\s.*?\s(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
                 r"(?:\s+(exact|weight|exp_avg_sq|exp_avg)(?:\s.*)?)?$")
SIZES = re.compile(r"^format version \d+,.* (\d+) bytes => (\d+) bytes")


def parse(text):
    """Entries (name, dtype, bytes, compressed bytes, role or None) and the file's
    (original, compressed) bytes from `ckpz -l -v` of one file."""
    entries, sizes = [], None
    for line in text.splitlines():
        m = SIZES.match(line)
        if m:
            sizes = (int(m.group(1)), int(m.group(2)))
            continue
        m = ROW.match(line)
        if m:
            name, dtype, _off, nbytes, comp, _chunks, role = m.groups()
            entries.append((name, dtype, int(nbytes), int(comp), role))
    if sizes is None or not entries:
        raise ValueError("not a `ckpz -l -v` listing (no entries or no size line)")
    return entries, sizes


def tally(entries, sizes, n_params=None):
    """Bytes and elements per role; n_params defaults to the float elements of the
    tensors named model.* (bench/resume-test's names)."""
    out = {r: dict(bytes=0, elems=0) for r in ROLES}
    model_elems = 0
    for name, dtype, nbytes, comp, role in entries:
        width = DTYPE_BYTES.get(dtype)
        elems = nbytes // width if width else 0
        if name.startswith("model.") and width:
            model_elems += elems
        key = role if role in ROLES[:3] else "exact" if role else "overhead"
        out[key]["bytes"] += comp
        out[key]["elems"] += elems
    out["overhead"]["bytes"] += sizes[1] - sum(e[3] for e in entries)   # index, headers
    n = n_params or model_elems
    for r in ROLES:
        b = out[r]["bytes"]
        out[r]["share"] = b / sizes[1] if sizes[1] else 0.0
        out[r]["bits_per_elem"] = 8 * b / out[r]["elems"] if out[r]["elems"] else None
        out[r]["bits_per_param"] = 8 * b / n if n else None
    return dict(roles=out, orig_bytes=sizes[0], file_bytes=sizes[1], n_params=n,
                bits_per_param=8 * sizes[1] / n if n else None)


def budget(ckpz, path, n_params=None):
    r = subprocess.run([ckpz, "-l", "-v", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError(f"ckpz -l -v {path}: exit {r.returncode}: "
                           f"{r.stderr.decode(errors='replace').strip()}")
    return tally(*parse(r.stdout.decode(errors="replace")), n_params=n_params)


def mean(budgets):
    """The mean budget of several files (each role's figures averaged)."""
    n = len(budgets)
    out = dict(roles={}, n_params=budgets[0]["n_params"], files=n)
    for k in ("orig_bytes", "file_bytes", "bits_per_param"):
        out[k] = sum(b[k] for b in budgets) / n
    for r in ROLES:
        rs = [b["roles"][r] for b in budgets]
        out["roles"][r] = {k: (sum(x[k] for x in rs) / n if rs[0][k] is not None else None)
                           for k in rs[0]}
    return out


def fmt(b, label):
    """One line: ratio, then bytes (share) and bits per element / per parameter per role."""
    parts = []
    for r in ROLES:
        x = b["roles"][r]
        bpe = "-" if x["bits_per_elem"] is None else f"{x['bits_per_elem']:.2f}"
        parts.append(f"{r} {x['bytes']:.0f} B {x['share']:.0%} {bpe}/{x['bits_per_param']:.2f}")
    return (f"{label}: {b['orig_bytes'] / b['file_bytes']:.2f}x, {b['bits_per_param']:.2f} bits/param "
            f"(20x = {96 / 20:.1f}); " + "; ".join(parts))


def of_run(rows):
    """The mean budget of a run's delta files (those with a base), or of all its files
    when none has one; None without budgets."""
    bs = [r["budget"] for r in rows if r.get("budget") and r.get("base")]
    bs = bs or [r["budget"] for r in rows if r.get("budget")]
    return mean(bs) if bs else None


def report(rows, log):
    """resume-test's lines: the chain's first file, and the mean of its delta files."""
    if not rows or not rows[0].get("budget"):
        return
    log("  " + header())
    log("  " + fmt(rows[0]["budget"], f"first file (step {rows[0]['step']})"))
    deltas = [r["budget"] for r in rows[1:] if r.get("base")]
    if deltas:
        log("  " + fmt(mean(deltas), f"delta files, mean of {len(deltas)}"))


def header():
    return ("budget per role: bytes, share of the file, bits per element of the role / "
            "per model parameter")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpz", default=os.path.join(os.path.dirname(here), "build", "ckpz"))
    ap.add_argument("--params", type=int, help="model parameters (default: model.* elements)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    print(header())
    bs = []
    for f in a.files:
        try:
            bs.append(budget(a.ckpz, f, a.params))
        except (RuntimeError, ValueError) as e:
            print(f"resume_budget: {f}: {e}", file=sys.stderr)
            return 1
        print(fmt(bs[-1], os.path.basename(f)))
    if len(bs) > 1:
        print(fmt(mean(bs), f"mean of {len(bs)}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
