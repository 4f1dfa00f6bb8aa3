"""The printed table, the CSV and the SVG chart (ratio against decompression MB/s per
core, one thread, each setting over all files: total bytes over total compressed, total
bytes over total CPU seconds)."""

import csv
import html
import math

from .layout import kind_of

COLUMNS = ["file", "tool", "threads", "ratio", "comp_mbs_core", "decomp_mbs_core", "comp_mbs_wall",
           "decomp_mbs_wall", "peak_rss_mb", "added_rss_mb", "bytes", "compressed", "runs", "comp_spread",
           "sampled", "checked", "worst_err_over_bound", "lossy_values"]


def table(rows, lossy=False):
    head = "%-26s %-24s %2s %8s %9s %9s %9s %9s %8s %7s" % (
        "file", "setting", "T", "ratio", "comp/core", "dec/core", "comp", "dec", "peak MB", "+MB")
    if lossy:
        head += " %9s" % "err/bound"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = "%-26s %-24s %2d %7.4fx %9.1f %9.1f %9.1f %9.1f %8.0f %7.0f" % (
            kind_of(r["file"])[:26], r["tool"] + ("*" if r["sampled"] else ""), r["threads"], r["ratio"],
            r["comp_mbs_core"], r["decomp_mbs_core"], r["comp_mbs_wall"], r["decomp_mbs_wall"],
            r["peak_rss_mb"], r["added_rss_mb"])
        if lossy:
            line += " %9.3f" % r.get("worst_err_over_bound", float("nan"))
        if not r["checked"]:
            line += "  CHECK FAILED"
        lines.append(line)
    return "\n".join(lines)


def write_csv(path, rows, meta):
    with open(path, "w", newline="") as f:
        for k, v in meta:
            f.write("# %s: %s\n" % (k, v))
        w = csv.DictWriter(f, fieldnames=["kind"] + COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            out = dict(r)
            for k, v in out.items():
                if isinstance(v, float):
                    out[k] = "%.6g" % v
            w.writerow(out)


def read_csv(path):
    """(rows, meta) of a CSV write_csv wrote: numbers and flags as they were measured."""
    meta, lines = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("# ") and not lines:
                k, _, v = line[2:].rstrip("\n").partition(": ")
                meta.append((k, v))
            else:
                lines.append(line)
    rows = []
    for r in csv.DictReader(lines):
        for k in ("ratio", "comp_mbs_core", "decomp_mbs_core", "comp_mbs_wall", "decomp_mbs_wall", "peak_rss_mb",
                  "added_rss_mb", "comp_spread", "worst_err_over_bound"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else float("nan")
        for k in ("threads", "bytes", "compressed", "runs", "lossy_values"):
            r[k] = int(r[k]) if r.get(k) not in (None, "") else 0
        for k in ("sampled", "checked"):
            r[k] = r.get(k) == "True"
        rows.append(r)
    return rows, [(k, v) for k, v in meta if k != "partial"]


def totals(rows):
    """Per setting over every file, one thread: (ratio, decompression MB/s per core)."""
    acc = {}
    for r in rows:
        if r["threads"] != 1:
            continue
        a = acc.setdefault(r["tool"], [0, 0, 0.0])
        a[0] += r["bytes"]
        a[1] += r["compressed"]
        a[2] += r["bytes"] / 1e6 / r["decomp_mbs_core"]
    return {t: (a[0] / a[1], a[0] / 1e6 / a[2]) for t, a in acc.items()}


def write_svg(path, rows, title):
    pts = totals(rows)
    if not pts:
        return
    W, H, L, R, T, B = 760, 460, 70, 200, 40, 50
    xs = [math.log10(v[1]) for v in pts.values()]
    ys = [v[0] for v in pts.values()]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    x1 = max(x1, x0 + 1)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.1 or 0.05
    y0, y1 = y0 - pad, y1 + pad

    def X(v):
        return L + (math.log10(v) - x0) / (x1 - x0) * (W - L - R)

    def Y(v):
        return H - B - (v - y0) / (y1 - y0) * (H - T - B)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (W, H), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="13">%s</text>' % (L, html.escape(title))]
    for e in range(x0, x1 + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if x0 <= math.log10(v) <= x1:
                out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (X(v), T, X(v), H - B))
                out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (X(v), H - B + 15, v))
    step = 10 ** math.floor(math.log10((y1 - y0) / 4 or 1))
    v = math.ceil(y0 / step) * step
    while v <= y1:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, Y(v), W - R, Y(v)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>' % (L - 5, Y(v) + 4, v))
        v += step
    out.append('<text x="%d" y="%d" text-anchor="middle">decompression MB/s per core (one thread, log)</text>'
               % ((L + W - R) // 2, H - 12))
    out.append('<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">ratio (all files)</text>'
               % ((T + H - B) // 2))
    for name, (ratio, speed) in sorted(pts.items()):
        color = "#c0392b" if name.startswith("ckpz") else "#2c3e50"
        out.append('<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>' % (X(speed), Y(ratio), color))
        out.append('<text x="%.1f" y="%.1f" fill="%s">%s</text>' % (X(speed) + 6, Y(ratio) + 4, color,
                                                                   html.escape(name)))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


BEGIN, END = "<!-- bench/peers begin -->", "<!-- bench/peers end -->"


def _one(rows, f, tool, threads=1):
    return next((r for r in rows if r["file"] == f and r["tool"] == tool and r["threads"] == threads), None)


def _against(rows, files):
    """The acceptance's lines against ZipNN and OpenZL, per file and thread count: ckpz
    -3's decompression per core over ZipNN's and over OpenZL's fastest decoder; its
    compression over ZipNN's and over OpenZL's fastest setting (that setting's ratio
    beside it); ckpz -1, the fast level, its ratio and compression over the same two."""
    out = ["", "Against ZipNN and OpenZL, per core (CPU seconds), each thread count of the run: ckpz -3's "
           "decompression and compression over theirs (OpenZL: its fastest setting, whose ratio is given); "
           "ckpz -1, the fast level, beside it. Below 1.30x (decompression) or 2.00x (compression) in bold.", "",
           "| file | T | dec ckpz -3 / zipnn | / openzl fastest | comp ckpz -3 / zipnn | openzl fastest "
           "comp (ratio) | ckpz -3 / it | ckpz -1 ratio | ckpz -1 comp / openzl fastest | / zipnn |",
           "|---" * 10 + "|"]

    def x(a, b, k, need):
        if not a or not b:
            return "–"
        v = a[k] / b[k]
        return ("**%.2fx**" if v < need else "%.2fx") % v
    for t in sorted({r["threads"] for r in rows}):
        for f in files:
            me, fast, zn = (_one(rows, f, tool, t) for tool in ("ckpz -3", "ckpz -1", "zipnn"))
            oz = [r for r in rows if r["file"] == f and r["threads"] == t and r["tool"].startswith("openzl")]
            if not me:
                continue
            ozd = max(oz, key=lambda r: r["decomp_mbs_core"]) if oz else None
            ozc = max(oz, key=lambda r: r["comp_mbs_core"]) if oz else None
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                kind_of(f), t, x(me, zn, "decomp_mbs_core", 1.3), x(me, ozd, "decomp_mbs_core", 1.3),
                x(me, zn, "comp_mbs_core", 2.0),
                "%.0f (%.4fx)" % (ozc["comp_mbs_core"], ozc["ratio"]) if ozc else "–",
                x(me, ozc, "comp_mbs_core", 2.0), "%.4fx" % fast["ratio"] if fast else "–",
                x(fast, ozc, "comp_mbs_core", 2.0), x(fast, zn, "comp_mbs_core", 2.0)))
    return out


def markdown(rows, lrows, meta):
    """BENCHMARKS.md's section: per file, one thread, ckpz -3 against the best peer by
    ratio and the speeds per core of the peers of comparable ratio; then the lossy table."""
    m = dict(meta)
    out = ["Generated by `%s` (%s; %s; load average %s at the start, %s at the end). Versions: %s." % (
        m["command"], m["date"], m["machine"], m["load average at start"], m.get("load average at end", "?"),
        m["versions"]), "",
        "Lossless, one thread: ckpz -3 against the best peer by ratio, and MB/s per core (from CPU seconds) of "
        "ckpz -3 and of the peers of comparable ratio (openzl: the faster of its settings).", "",
        "| file | ckpz -3 | best peer (ratio) | ckpz vs best | dec/core ckpz -3 | zipnn | openzl "
        "| comp/core ckpz -3 | zipnn | openzl |", "|---" * 10 + "|"]
    files = [f for i, f in enumerate(r["file"] for r in rows) if f not in [r["file"] for r in rows[:i]]]
    for f in files:
        me = _one(rows, f, "ckpz -3")
        peers = [r for r in rows if r["file"] == f and r["threads"] == 1 and not r["tool"].startswith("ckpz")]
        if not me or not peers:
            continue
        best = max(peers, key=lambda r: r["ratio"])
        zn = _one(rows, f, "zipnn")
        oz = [r for r in peers if r["tool"].startswith("openzl")]
        ozd = max(oz, key=lambda r: r["decomp_mbs_core"]) if oz else None
        ozc = max(oz, key=lambda r: r["comp_mbs_core"]) if oz else None

        def sp(r, k):
            return "%.0f" % r[k] if r else "–"
        out.append("| %s | %.4fx | %s (%.4fx) | %+.2f%% | %s | %s | %s | %s | %s | %s |" % (
            kind_of(f), me["ratio"], best["tool"], best["ratio"], (me["ratio"] / best["ratio"] - 1) * 100,
            sp(me, "decomp_mbs_core"), sp(zn, "decomp_mbs_core"), sp(ozd, "decomp_mbs_core"),
            sp(me, "comp_mbs_core"), sp(zn, "comp_mbs_core"), sp(ozc, "comp_mbs_core")))
    out += _against(rows, files)
    if lrows:
        out += ["", "Lossy, one thread, at ckpz's `--rel`/`--abs` bounds (err/bound: the worst restored value "
                "over the file, measured here; above 1.000 fails, marked \"over\"):", "",
                "| file | bound | ckpz | SZ3 | zfp | ckpz / best | worst err/bound ckpz, SZ3, zfp |",
                "|---" * 7 + "|"]
        for r in lrows:
            if not r["tool"].startswith("ckpz "):
                continue
            bound = r["tool"][len("ckpz "):]
            trio = [r] + [_one(lrows, r["file"], "%s %s" % (p, bound)) for p in ("sz3", "zfp")]
            ratios = ["%.2fx" % t["ratio"] if t else "–" for t in trio]
            others = [t["ratio"] for t in trio[1:] if t]  # a peer over its bound still counts
            errs = ["%.3f%s" % (t["worst_err_over_bound"], "" if t["checked"] else " (over)") if t else "–"
                    for t in trio]
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                kind_of(r["file"]).split(".")[0], bound, ratios[0], ratios[1], ratios[2],
                "%.2fx" % (r["ratio"] / max(others)) if others else "–", ", ".join(errs)))
    return "\n".join(out)


def splice(path, text):
    """Puts text between BENCHMARKS.md's bench/peers markers."""
    with open(path) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit("bench/peers: %s has no %s ... %s markers" % (path, BEGIN, END))
    head, rest = doc.split(BEGIN, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])
