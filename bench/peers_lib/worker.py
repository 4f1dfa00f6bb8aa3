"""One family of codecs in its own process, driven by bench/peers over a pipe.

    python -m peers_lib.worker FAMILY [--train-step N --step M]

Requests and replies are JSON lines (the replies on a duplicate of the original
standard output; the libraries' own printing goes to standard error):
  {"op": "load", "path": P, "sample_mb": N}  read the file, find its tensors
  {"op": "run", "tool": T, "threads": N, "sample": B}  one timed round trip, checked
  {"op": "quit"}
The first reply lists the family's settings. A run's reply: compressed size, wall and
CPU seconds of compression and decompression (each starting with the heap's free pages
handed back, so that neither writes into pages an earlier step faulted in, and with as
much memory as the file touched and freed just before: see _recycle), VmRSS before
and the larger VmHWM after each (the peak, reset through /proc/self/clear_refs), and the check (lossless: every
byte; lossy: the worst error over its bound and whether the other bytes are exact).
"""

import ctypes
import gc
import json
import mmap
import os
import sys
import time

from . import layout, lossless, lossy


def _status_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _recycle(n):
    """Touches n bytes of new memory in 2 MiB pages and n in 4 KiB pages, and frees them:
    the kernel then hands the next allocations of either kind pages just freed. On a
    virtual machine that reports free memory to its host (virtio-balloon free page
    reporting, as here: ~2 s after it is freed), a page the host took back costs a fault
    on the host at its next first touch: 128 MiB of fresh 2 MiB pages took 17 ms right
    after a free and 118-172 ms after 3 s idle (4 KiB pages: 53 against 68-139 ms), so
    without this a round trip was timed up to 5x slower whenever the settings before it
    had run long enough, at random and by the page size each tool's allocator asks for."""
    for advice in (getattr(mmap, "MADV_HUGEPAGE", None), getattr(mmap, "MADV_NOHUGEPAGE", None)):
        fresh_pages(n + (2 << 20), advice).close()


def fresh_pages(n, advice):
    """An anonymous mapping of n bytes, given the advice (MADV_HUGEPAGE or NOHUGEPAGE;
    None: none), with every page faulted in (MADV_POPULATE_WRITE; on an older kernel, a
    write to each 4 KiB page). The caller closes it."""
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if advice is not None:
        try:
            m.madvise(advice)
        except OSError:
            pass
    try:
        m.madvise(23)  # MADV_POPULATE_WRITE
    except OSError:
        for off in range(0, n, 4096):
            m[off] = 1
    return m


def _reset_peak(n=0):
    """Frees what earlier runs left (the collector, then malloc_trim hands free heap pages
    back), recycles n bytes (_recycle), then resets VmHWM to the RSS now: the peak read
    after the run is this run's."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
    if n:
        _recycle(n)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def sample_of(data, mb):
    """A slice of mb MiB from the middle of the file, 4 KiB aligned (the slow settings'
    timed input)."""
    n = min(len(data), mb << 20)
    start = (len(data) - n) // 2 // 4096 * 4096
    return bytes(data[start:start + n])


class Worker:
    def __init__(self, family, train_step, step):
        fams = dict(lossless.families(train_step, step))
        fams.update(lossy.families())
        self.tools = {}
        for make in fams[family]:
            t = make()
            self.tools[t.name] = t
        self.prepared = {}

    def load(self, path, sample_mb):
        with open(path, "rb") as f:
            self.data = f.read()
        self.path = path
        self.segs = layout.segments(path, self.data)
        self.sample = sample_of(self.data, sample_mb)
        self.prepared = {}
        return {"bytes": len(self.data), "sample": len(self.sample), "dtype": layout.main_dtype(self.segs)}

    def run(self, name, threads, sample):
        t = self.tools[name]
        data = self.sample if sample else self.data
        if self.prepared.get(name) != sample:  # per file, and again on a switch to or from the sample
            t.prepare(self.path, data, self.segs if not sample else [layout.Segment(0, len(data))])
            self.prepared[name] = sample
        # Every compress reads a copy of the input made just before it (zipnn 0.5.4 writes
        # into its input, even a bytes object): the same bytes, last written just now, for
        # every tool, as a checkpoint just serialized or read is. Handing the others the
        # file's bytes as loaded gave them an input the other families' rounds had pushed
        # out of the caches, and zipnn a fresh one (ckpz -3 on 20 MB of BF16 gradients
        # read its input from memory 4-5 % slower, 1.9 MB of small tensors 3-6 %).
        src = bytes(bytearray(data))
        peak_ok = _reset_peak(len(data))
        rss0 = _status_kb("VmRSS")
        w0, c0 = time.perf_counter(), time.process_time()
        blob = t.compress(src, threads)
        w1, c1 = time.perf_counter(), time.process_time()
        hwm = _status_kb("VmHWM") if peak_ok else 0
        # Decompression starts as compression did, with the heap's free pages handed
        # back: its output is fresh memory whatever compression left behind (a loader in
        # a new process has no pages faulted in for it either).
        peak_ok = _reset_peak(len(data)) and peak_ok
        w1d, c1d = time.perf_counter(), time.process_time()
        out = t.decompress(blob, threads)
        w2, c2 = time.perf_counter(), time.process_time()
        hwm = max(hwm, _status_kb("VmHWM")) if peak_ok else 0
        r = {"size": lossless.size(blob), "bytes": len(data), "c_wall": w1 - w0, "c_cpu": c1 - c0,
             "d_wall": w2 - w1d, "d_cpu": c2 - c1d, "rss0_kb": rss0, "hwm_kb": hwm}
        del blob
        if hasattr(t, "bound"):
            worst, exact, n = lossy.check(data, out, self.segs, t.mode, t.bound)
            r.update(ok=bool(worst <= 1.0 and exact), worst=worst, exact=exact, lossy_values=n)
        else:
            r["ok"] = len(out) == len(data) and memoryview(out).cast("B") == memoryview(data).cast("B")
        return r


def main():
    args = sys.argv[1:]
    family = args[0]
    train_step = int(args[args.index("--train-step") + 1]) if "--train-step" in args else None
    step = int(args[args.index("--step") + 1]) if "--step" in args else None
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    w = Worker(family, train_step, step)
    reply.write(json.dumps({"tools": [[n, t.threaded] for n, t in w.tools.items()]}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "quit":
                break
            if req["op"] == "load":
                out = w.load(req["path"], req.get("sample_mb", 8))
            else:
                out = w.run(req["tool"], req["threads"], req.get("sample", False))
        except Exception as e:  # reported, and the run counts as failed
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        reply.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
