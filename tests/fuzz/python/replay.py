#!/usr/bin/env python3
"""Replays the Python fuzz harnesses' corpora without atheris: every file of
corpus/NAME through fuzz_NAME.TestOneInput, so that every seed (the hostile suite's
files among them) and every finding ever committed is a regression test of `make test`
(ctest python_fuzz_replay).

    replay.py [--jobs N] [--timeout S] [HARNESS ...]     (default: every harness)
    replay.py --harness NAME [FILE_OR_DIR ...]            (one harness, one process)

Each harness runs in a process of its own (--jobs at a time, default 2) that imports
torch and ckpz once and then forks a child per input, so that an input that crashes
the interpreter (SIGSEGV), hangs (--timeout, default 20 s), or changes something
process-wide is reported with its file name and leaves the next inputs unaffected.
Prints each failing input (harness, file, what happened) and a count per harness;
exits 1 if any input failed.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
HARNESSES = ["unpickler", "torchzip", "manifest", "shard", "dcp_metadata", "safetensors"]


def inputs(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += [os.path.join(p, f) for f in sorted(os.listdir(p)) if not f.startswith(".") or f == ".metadata"]
        else:
            out.append(p)
    return [p for p in out if os.path.isfile(p)]


def replay_one(name, paths, timeout):
    """In this process: setup, then a forked child per input. Returns the failures."""
    sys.path.insert(0, _HERE)
    mod = __import__("fuzz_" + name)
    mod.setup()
    import _common
    import driver  # tests/python/hostile, on the path through _common
    failures = []
    files = inputs(paths)
    for path in files:
        with open(path, "rb") as fo:
            data = fo.read()
        r, w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = 0
            try:
                os.setsid()
                fd = os.open(os.devnull, os.O_RDWR)
                os.dup2(fd, 0)
                os.dup2(fd, 1)
                os.close(fd)
                _common.rebase()
                mod.TestOneInput(data)
            except BaseException as e:  # noqa: B902
                code = 1
                msg = "%s: %s" % (type(e).__name__, str(e)[:600])
                tb = traceback.extract_tb(e.__traceback__)
                if e.__cause__ is not None:
                    tb = traceback.extract_tb(e.__cause__.__traceback__)
                if tb:
                    f = tb[-1]
                    msg += " [at %s:%d %s]" % ("/".join(f.filename.split(os.sep)[-2:]), f.lineno, f.name)
                os.write(w, msg.encode("utf-8", "replace")[:2000])
            finally:
                os._exit(code)
        os.close(w)
        t0 = time.monotonic()
        status, timed_out = driver.wait_bounded(pid, t0, timeout, 0.002)
        with os.fdopen(r, "rb") as fo:
            msg = fo.read().decode("utf-8", "replace")
        rel = os.path.relpath(path, _HERE)
        if timed_out:
            failures.append((rel, "hang: no outcome after %.0f s" % timeout))
        elif os.WIFSIGNALED(status):
            failures.append((rel, "crash: killed by %s" % signal.Signals(os.WTERMSIG(status)).name))
        elif os.WEXITSTATUS(status) != 0:
            failures.append((rel, msg or "exit status %d" % os.WEXITSTATUS(status)))
    return len(files), failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harness", help="replay this harness here (internal; or by hand)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("rest", nargs="*")
    a = ap.parse_args()
    if a.harness:
        paths = a.rest or [os.path.join(_HERE, "corpus", a.harness)]
        t0 = time.monotonic()
        n, failures = replay_one(a.harness, paths, a.timeout)
        for rel, why in failures:
            print("FAIL %s %s: %s" % (a.harness, rel, why))
        print("replay %s: %d inputs, %d failed (%.0f s)" % (a.harness, n, len(failures), time.monotonic() - t0))
        return 1 if failures else 0
    names = a.rest or HARNESSES
    for n in names:
        if n not in HARNESSES:
            sys.exit("replay: no harness %r (%s)" % (n, ", ".join(HARNESSES)))
    running, results = [], {}
    pending = list(names)
    while pending or running:
        while pending and len(running) < max(1, a.jobs):
            n = pending.pop(0)
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--harness", n, "--timeout",
                                  str(a.timeout)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            running.append((n, p))
        n, p = running[0]
        out = p.communicate()[0].decode("utf-8", "replace")
        running.pop(0)
        results[n] = (p.returncode, out)
        sys.stdout.write(out)
        sys.stdout.flush()
    bad = [n for n in names if results[n][0] != 0]
    total = sum(1 for n in names)
    print("%d passed, %d failed" % (total - len(bad), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
