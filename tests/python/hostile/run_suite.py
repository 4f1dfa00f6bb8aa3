#!/usr/bin/env python3
"""Loads every case of a hostile-file suite (make_suite.py) in a process of its own and
judges the outcome against issue 27's bar; exits 1 if any case fails.

    run_suite.py SUITE_DIR [--python PY] [--jobs N] [--timeout S] [--fresh]
                 [--only REGEX] [--json OUT]

A case passes when nothing below happens and its outcome is the expected one:
  code      its marker file appeared, a module it names got imported, or it left files
            in the directory it ran in
  crash     the process died of a signal (SIGSEGV...) or without writing its result
  hang      it ran past --timeout seconds (default 20) and was killed
  wrong     it loaded, and a tensor lies outside its storage, has backward hooks, or
            differs from the expected value (a silent wrong tensor)
  change    something process-wide changed (a class's or module's __dict__, torch's or
            Python's global state, what Path/Namespace/Counter/Tensor probes return)
  memory    the peak RSS above the baseline (measured after importing torch and ckpz in
            the same process) exceeded max(2 x the bytes the file stores, 256 MB); a
            MemoryError under the address-space cap (--as-mb) counts here too
  unclear   refused with something else than ckpz.Error, ckpz.UnsafeGlobalError or
            pickle.UnpicklingError (or OSError, for cases about missing or special files):
            RecursionError, MemoryError, KeyError, TypeError, SystemError ...
  unnamed   refused cleanly, but the message does not name the file (loads from memory
            are exempt)
  loaded    it loaded where a refusal was expected
  refused   it was refused where it should load (the controls)

The interpreter under test is --python (default: this one); it needs torch, NumPy and
ckpz (PYTHONPATH, CKPZ_LIBRARY as for the other tests). Cases run --jobs at a time
(default 2) in fork servers of driver.py: each server imports torch and ckpz once and
forks a fresh child per case; --fresh starts a new interpreter per case instead
(slower, the same verdicts). One line per case, then a table by category.
"""

import argparse
import collections
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(_HERE, "driver.py")
KINDS = ["code", "crash", "hang", "wrong", "change", "memory", "unclear", "unnamed", "loaded", "refused"]


def stored_bytes(path):
    """The bytes the case's file (or directory) really stores: regular files only."""
    if os.path.islink(path) or not os.path.exists(path):
        return 0
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p) and os.path.isfile(p):
                total += os.path.getsize(p)
    return total


def judge(case, reply, res, suite, scratch, log_tail, new_markers):
    """(list of (kind, why), short description of the outcome)."""
    fails = []
    outcome = ""
    for m in new_markers:
        fails.append(("code", "CODE RAN: marker %s appeared" % m))
    leftovers = sorted(os.listdir(scratch)) if os.path.isdir(scratch) else []
    if leftovers:
        fails.append(("code", "left files where it ran: %s" % ", ".join(leftovers[:5])))
    if reply.get("timed_out"):
        fails.append(("hang", "no outcome after %.0f s: killed" % reply.get("timeout", 0)))
        return fails, "timeout"
    if "signal" in reply:
        sig = reply["signal"]
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        fails.append(("crash", "killed by %s%s" % (name, (": " + log_tail) if log_tail else "")))
        return fails, name
    if res is None:
        fails.append(("crash", "exited with status %s and no result%s" % (reply.get("exit"),
                                                                         (": " + log_tail) if log_tail else "")))
        return fails, "died"
    if "setup_error" in res:
        fails.append(("crash", "setup failed: " + res["setup_error"]))
        return fails, "setup"
    limit = max(2 * case["stored"], 256 << 20)
    growth = (res["rss_peak_kib"] - res["rss_base_kib"]) * 1024
    res["growth"] = growth
    if growth > limit and not case.get("no_memory_check"):
        fails.append(("memory", "peak RSS +%d MB over the baseline (limit %d MB)" % (growth >> 20, limit >> 20)))
    for ch in res.get("changes", []):
        if ch.startswith("modules_forbidden"):  # a module the payload names was imported
            fails.append(("code", "imported: " + ch))
        else:
            fails.append(("change", "process-wide change: " + ch))
    expect = case["expect"]
    if res["outcome"] == "raised":
        e = res["exc"]
        short = e["type"].rsplit(".", 1)[-1]
        outcome = "%s: %s" % (short, e["message"].replace("\n", " ")[:150])
        clean = e["ckpz_error"] or e["unsafe_global"] or e["unpickling"] or (case["oserror"] and e["oserror"])
        if e["type"] == "builtins.MemoryError" and not case.get("no_memory_check"):
            fails.append(("memory", "MemoryError (the address-space cap was reached)"))
        if expect == "equal":
            fails.append(("refused", "refused a file that must load: %s" % outcome))
        elif not clean:
            where = (" at " + e["where"][-1]) if e.get("where") else ""
            fails.append(("unclear", "not a clean refusal: %s%s" % (outcome, where)))
        elif case["load"] != "load_mem" and case["names"] and not any(n in e["message"] for n in case["names"]):
            fails.append(("unnamed", "the message does not name %s" % " or ".join(case["names"])))
    else:
        outcome = "loaded a %s (%d tensors)" % (res.get("type", "?"), res.get("tensors", 0))
        if res.get("check_error"):
            fails.append(("wrong", "the value could not be checked: " + res["check_error"]))
        for bad in res.get("bad_tensors", []):
            fails.append(("wrong", "tensor " + bad))
        if res.get("differs"):
            fails.append(("wrong", res["differs"]))
        if expect == "refuse":
            fails.append(("loaded", "loaded, where a refusal was expected"))
    return fails, outcome


class Server:
    """One fork server (driver.py --serve) under the interpreter being tested."""

    def __init__(self, python, suite, env):
        self.args = [python, DRIVER, "--serve", suite]
        self.env = env
        self.proc = None
        self.info = None

    def start(self):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=self.env, bufsize=1)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the driver did not start (%s): see its error output above" % " ".join(self.args))
        self.info = json.loads(line)

    def run(self, req):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:  # the server itself died: start another for the next case
            self.proc = None
            return {"exit": None, "server_died": True}
        return json.loads(line)

    def stop(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()


def run_fresh(python, suite, env, req):
    """--fresh: one interpreter for the case, killed (with its process group) on timeout."""
    cj = req["result"] + ".case.json"
    with open(cj, "w") as fo:
        json.dump({"suite": suite, "case": req["case"], "as_mb": req["as_mb"]}, fo)
    t0 = time.monotonic()
    with open(req["log"], "wb") as log:
        p = subprocess.Popen([python, DRIVER, "--one", cj, req["result"]], stdin=subprocess.DEVNULL, stdout=log,
                             stderr=log, cwd=req["cwd"], env=env, start_new_session=True)
        try:
            rc = p.wait(timeout=req["timeout"])
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return {"timed_out": True, "wall": round(time.monotonic() - t0, 3)}
    reply = {"timed_out": False, "wall": round(time.monotonic() - t0, 3)}
    if rc < 0:
        reply["signal"] = -rc
    else:
        reply["exit"] = rc
    return reply


# The self-test: cases each of which must trip the detector named, so that a run shows
# its detectors work: most loaded with trusted=True (the full unpickler, as torch.load,
# runs the payloads), some with their expectation changed.
_ODD = {"w": {"$t": ["float32", [2, 3], [9.0, 9.0, 9.0, 9.0, 9.0, 9.0]]}, "step": 7}
SELF_TEST = [("code/os_system.pt", "code", {}), ("code/module_with_import_side_effect.pt", "code", {}),
             ("build/class_counter_slots.pt", "change", {}), ("build/class_path_exists.pt", "change", {}),
             ("build/tensor_3tuple_hooks_real.pt", "wrong", {}), ("size/deep_tuple_dict_key.pt", "crash", {}),
             ("size/str_of_dag.pt", "hang", {}), ("size/bytearray_2g.pt", "memory", {}),
             ("files/missing.pt", "unclear", {"load": "load", "oserror": False}),
             ("files/missing.pt", "unnamed", {"load": "load", "names": ["<a name the message lacks>"]}),
             ("valid/tensor.pt", "loaded", {"load": "load", "expect": "refuse"}),
             ("valid/tensor.pt", "wrong", {"load": "load", "expect": "equal", "value": _ODD}),
             ("code/posix_system.pt", "refused", {"load": "load", "expect": "equal", "value": _ODD})]


def run_cases(cases, a, suite, env, work, marker_dir, info, timeout, show=True):
    """Runs the cases --jobs at a time; returns their results (in completion order)."""
    lock = threading.Lock()
    results = []
    todo = queue.Queue()
    for n, c in enumerate(cases):
        todo.put((n, c))
    servers = []

    def marker_path(case):
        m = case.get("marker")
        if not m:
            return None
        return m if os.path.isabs(m) else os.path.join(suite, m)

    def worker():
        srv = None if a.fresh else Server(a.python, suite, env)
        if srv is not None:
            servers.append(srv)
            try:
                srv.start()
                info.setdefault("driver", srv.info)
            except Exception as e:
                info["error"] = str(e)
                return
        while True:
            try:
                n, case = todo.get_nowait()
            except queue.Empty:
                return
            tag = "%s-%d" % (case["id"].split("/")[0], n)
            scratch = os.path.join(work, "cwd-" + tag)
            os.makedirs(scratch, exist_ok=True)
            req = {"case": case, "cwd": scratch, "log": os.path.join(work, "log-" + tag),
                   "result": os.path.join(work, "result-%s.json" % tag), "timeout": timeout, "as_mb": a.as_mb}
            mine = marker_path(case)
            if mine and os.path.exists(mine):
                os.unlink(mine)
            reply = run_fresh(a.python, suite, env, req) if a.fresh else srv.run(req)
            reply["timeout"] = timeout
            res = None
            if os.path.exists(req["result"]):
                with open(req["result"]) as fo:
                    res = json.load(fo)
            tail = ""
            if os.path.exists(req["log"]):
                with open(req["log"], "rb") as fo:
                    tail = crash_lines(fo.read()[-3000:].decode("utf-8", "replace"))
            new = []
            if mine and os.path.exists(mine):
                new.append(os.path.relpath(mine, suite) if mine.startswith(suite) else mine)
                os.unlink(mine)
            fails, outcome = judge(case, reply, res, suite, scratch, tail, new)
            entry = {"id": case["id"], "category": case["category"], "expect": case["expect"], "fails": fails,
                     "outcome": outcome, "wall": reply.get("wall"), "growth_mb": ((res or {}).get("growth") or 0) >> 20,
                     "result": res, "reply": reply}
            with lock:
                results.append(entry)
                if show:
                    print_case(entry)
            if not a.keep:
                shutil.rmtree(scratch, ignore_errors=True)
                for p in (req["log"], req["result"], req["result"] + ".case.json"):
                    if os.path.exists(p):
                        os.unlink(p)

    threads = [threading.Thread(target=worker) for _ in range(max(1, a.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in servers:
        s.stop()
    return results


def self_test(index, a, suite, env, work, marker_dir, info):
    """Runs SELF_TEST; returns the list of detectors that did not trip."""
    by_id = {c["id"]: c for c in index["cases"]}
    cases = []
    for n, (cid, kind, change) in enumerate(SELF_TEST):
        if cid not in by_id:
            continue
        c = json.loads(json.dumps(by_id[cid]))
        c.update(id="self-test/%d/%s" % (n, cid), load="load_trusted", expect="refuse", category="self-test",
                 want=kind, stored=stored_bytes(os.path.join(suite, c["path"])), no_memory_check=False)
        c.update(change)
        cases.append(c)
    # the case that must hang gets a short timeout (str_of_dag hangs for good); the others
    # the suite's own (2 GiB of zeros takes a while on a busy machine), plus the
    # interpreter's start for --fresh
    start = 10 if a.fresh else 0
    results = []
    for group, timeout in (([c for c in cases if c["want"] == "hang"], min(a.timeout, 5.0) + start),
                           ([c for c in cases if c["want"] != "hang"], a.timeout + start)):
        if group:
            results += run_cases(group, a, suite, env, work, marker_dir, info, timeout, show=False)
    missed = []
    for r in results:
        want = next(c["want"] for c in cases if c["id"] == r["id"])
        if want not in {k for k, _ in r["fails"]}:
            missed.append("%s: expected the '%s' detector to trip, got %s" % (r["id"], want,
                                                                          [k for k, _ in r["fails"]] or "a pass"))
    if len(results) != len(cases):
        missed.append("%d of %d self-test cases gave no result" % (len(cases) - len(results), len(cases)))
    return missed, len(cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite")
    ap.add_argument("--python", default=sys.executable, help="interpreter under test (default: this one)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang")
    ap.add_argument("--as-mb", type=int, default=3072, help="address space a case may add (MiB; 0: no cap)")
    ap.add_argument("--fresh", action="store_true", help="a new interpreter per case instead of fork servers")
    ap.add_argument("--only", help="run the cases whose id matches this regular expression")
    ap.add_argument("--json", help="write every case's result here")
    ap.add_argument("--keep", action="store_true", help="keep the logs and scratch directories")
    ap.add_argument("--make", action="store_true", help="first write the suite into SUITE with make_suite.py, "
                    "run by --python (the DCP template depends on its torch)")
    ap.add_argument("--no-self-test", action="store_true", help="skip the check that the detectors trip on "
                    "payloads loaded with trusted=True")
    a = ap.parse_args()

    suite = os.path.abspath(a.suite)
    sanitized = bool(os.environ.get("CKPZ_TEST_SANITIZED"))
    if sanitized:  # ASan: no address-space cap (its shadow memory), no memory ceiling
        a.as_mb = 0
    if a.make:
        r = subprocess.run([a.python, os.path.join(_HERE, "make_suite.py"), suite])
        if r.returncode != 0:
            print("run_suite: make_suite.py failed (status %d)" % r.returncode, file=sys.stderr)
            return 2
    with open(os.path.join(suite, "index.json")) as fo:
        index = json.load(fo)
    cases = [c for c in index["cases"] if not a.only or re.search(a.only, c["id"])]
    for c in cases:
        c["stored"] = stored_bytes(os.path.join(suite, c["path"]))
        c["no_memory_check"] = sanitized
    marker_dir = index["marker_dir"]
    os.makedirs(marker_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ckpz-hostile-run-")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    # the children run in directories of their own: relative paths would break there
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else p for p in env["PYTHONPATH"].split(os.pathsep))
    for k in ("CKPZ_LIBRARY", "CKPZ_CLI"):
        if env.get(k) and os.path.exists(env[k]):
            env[k] = os.path.abspath(env[k])
    info = {}

    def markers_now():
        out = set()
        for root, _, files in os.walk(marker_dir):
            out.update(os.path.join(root, f) for f in files)
        return out

    t0 = time.monotonic()
    missed, tested = [], 0
    if not a.no_self_test and not sanitized:
        missed, tested = self_test(index, a, suite, env, work, marker_dir, info)
        if "error" in info:
            print("run_suite: " + info["error"], file=sys.stderr)
            return 2
        print("run_suite: self-test: %d of %d detectors tripped%s" % (
            tested - len(missed), tested, "" if not missed else ":\n  " + "\n  ".join(missed)))
    print("run_suite: %d cases from %s under %s, %d at a time%s" % (len(cases), suite, a.python, a.jobs,
                                                                     " (fresh interpreters)" if a.fresh else ""))
    sys.stdout.flush()
    before = markers_now()
    results = run_cases(cases, a, suite, env, work, marker_dir, info, a.timeout)
    if "error" in info and not results:
        print("run_suite: " + info["error"], file=sys.stderr)
        return 2
    stray = sorted(markers_now() - before)
    summary(results, time.monotonic() - t0, info.get("driver"), stray)
    if missed:
        print("run_suite: the self-test FAILED: the runner itself cannot be trusted (see above)")
    if a.json:
        with open(a.json, "w") as fo:
            json.dump({"driver": info.get("driver"), "results": results, "stray_markers": stray,
                       "self_test_missed": missed}, fo, indent=1, default=repr)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("run_suite: logs kept in %s" % work)
    failed = sum(1 for r in results if r["fails"]) + len(stray) + len(missed)
    return 1 if failed or len(results) != len(cases) else 0


def crash_lines(text):
    """The informative lines of a dead child's log: what glibc or the C++ runtime said,
    the fatal error and the top frames of the thread that crashed (faulthandler); else
    the last lines (a Python traceback)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not any(ln.startswith("Fatal Python error") for ln in lines):
        return " | ".join(lines[-3:])[-400:]
    out = []
    for k, ln in enumerate(lines):
        if ln.startswith("Current thread"):
            out.extend(x for x in lines[k + 1:k + 3] if x.startswith("File"))
        elif not (ln.startswith("File ") or ln.startswith("Thread 0x") or ln.startswith("Extension modules")):
            out.append(ln)
    return " | ".join(out[:6])[:400]


def print_case(e):
    verdict = "FAIL" if e["fails"] else "pass"
    extra = "%.2fs" % (e["wall"] or 0)
    if e["growth_mb"]:
        extra += " +%dMB" % e["growth_mb"]
    line = "%s %-15s %-52s %s (%s)" % (verdict, e["expect"], e["id"], e["outcome"][:110], extra)
    print(line)
    for kind, why in e["fails"][:4]:
        print("       %-8s %s" % (kind, why[:300]))
    sys.stdout.flush()


def summary(results, seconds, driver, stray):
    by = collections.OrderedDict()
    for r in sorted(results, key=lambda r: r["category"]):
        row = by.setdefault(r["category"], collections.Counter())
        row["cases"] += 1
        row["fail" if r["fails"] else "pass"] += 1
        for kind in {k for k, _ in r["fails"]}:
            row[kind] += 1
    total = collections.Counter()
    for row in by.values():
        total.update(row)
    cols = ["cases", "pass", "fail"] + KINDS
    print()
    if driver:
        print("interpreter: Python %s, torch %s, ckpz %s" % (driver["versions"]["python"], driver["versions"]["torch"],
                                                             driver["versions"]["ckpz"]))
        for k in ("warm_error", "dcp_error"):
            if driver.get(k):
                print("driver note: %s: %s" % (k, driver[k]))
    print("%-10s " % "category" + " ".join("%7s" % c for c in cols))
    for cat, row in list(by.items()) + [("total", total)]:
        print("%-10s " % cat + " ".join("%7d" % row[c] for c in cols))
    if stray:
        print("stray markers (code ran, case unknown): %s" % ", ".join(stray))
    print("run_suite: %d of %d cases failed (%.0f s)" % (total["fail"], total["cases"], seconds))
    print("%d passed, %d failed" % (total["pass"], total["fail"]))


if __name__ == "__main__":
    sys.exit(main())
