"""The child side of run_suite.py: loads one hostile case in a process of its own and
reports, as JSON, what happened and what the load left behind.

    driver.py --serve SUITE_DIR          (a fork server: run_suite sends cases on stdin)
    driver.py --one CASE_JSON RESULT     (one case in this fresh interpreter)

Both import torch, NumPy, ckpz, ckpz.distributed and ckpz.dcp and load one valid file
first (lazy caches filled), so that what a case changes is the case's doing. A fork
server then forks one child per case: a fresh process, crash-isolated, without paying
for torch's import each time. In the child: stdin from /dev/null, stdout and stderr to
the case's log, faulthandler on (a SIGSEGV leaves its traceback there), RLIMIT_AS at
the address space now plus --as-mb (a memory bomb becomes MemoryError instead of taking
the machine), the peak RSS reset through /proc/self/clear_refs, then a fingerprint of
what must not change (the __dict__ of the allow-listed classes, functions and modules,
torch's and Python's global state, what probes of Path, Namespace, Counter and Tensor
return), the load, and then: the exception or the value (every tensor in it checked to
lie inside its storage and to have no backward hooks, and compared with the expected
value), the peak RSS above the baseline, and the fingerprint's differences. The runner
judges; this file only measures.
"""

import faulthandler
import io
import json
import os
import resource
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)


def _status(key):
    try:
        with open("/proc/self/status") as fo:
            for line in fo:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak():
    """Resets the peak RSS (VmHWM); (the RSS now in KiB, whether the reset worked)."""
    try:
        with open("/proc/self/clear_refs", "w") as fo:
            fo.write("5")
        return _status("VmRSS"), True
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, False


def peak_kib(reset_ok):
    if reset_ok:
        v = _status("VmHWM")
        if v is not None:
            return v
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ---- what must not change ----------------------------------------------------------------

_MODULES = ["builtins", "os", "posix", "sys", "subprocess", "pickle", "_pickle", "copyreg", "_codecs", "codecs",
            "collections", "argparse", "pathlib", "types", "datetime", "functools", "operator", "json", "io",
            "torch", "torch._utils", "torch.serialization", "torch._tensor", "torch.nn.parameter", "torch.storage",
            "numpy", "numpy.core.multiarray", "ckpz"]
_CLASSES = ["pathlib.Path", "pathlib.PosixPath", "pathlib.PurePath", "pathlib.PurePosixPath", "pathlib.WindowsPath",
            "pathlib.PureWindowsPath", "argparse.Namespace", "collections.Counter", "collections.OrderedDict",
            "collections.defaultdict", "collections.deque", "types.SimpleNamespace", "builtins.object",
            "builtins.dict", "builtins.list", "builtins.tuple", "builtins.set", "builtins.frozenset",
            "builtins.bytearray", "builtins.str", "builtins.bytes", "builtins.int", "builtins.float", "builtins.range",
            "builtins.slice", "builtins.complex", "datetime.datetime", "datetime.timedelta", "torch.Tensor",
            "torch.nn.parameter.Parameter", "torch.Size", "torch.device", "torch.Generator", "torch.dtype",
            "torch.storage.TypedStorage", "torch.UntypedStorage", "numpy.ndarray", "numpy.dtype",
            "numpy.random.mtrand.RandomState"]
_FUNCTIONS = ["copyreg._reconstructor", "torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2",
              "torch._utils._rebuild_tensor_v3", "torch._utils._rebuild_parameter",
              "torch._utils._rebuild_parameter_with_state", "torch._utils._rebuild_qtensor",
              "torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_sparse_csr_tensor",
              "torch._utils._rebuild_nested_tensor", "torch._utils._rebuild_meta_tensor_no_storage",
              "torch._utils._rebuild_device_tensor_from_numpy", "torch._tensor._rebuild_from_type_v2",
              "torch.serialization._get_layout", "numpy.core.multiarray._reconstruct", "numpy.core.multiarray.scalar",
              "_codecs.encode"]
# Module attributes that change on their own (not the load's doing).
_VOLATILE = {"sys": {"last_type", "last_value", "last_traceback", "last_exc", "exc_info"}, "builtins": {"_"}}


def _resolve(dotted):
    import importlib

    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for p in parts[k:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)


def _targets(extra_classes=()):
    out = []
    for group in (_MODULES, _CLASSES, _FUNCTIONS):
        for name in group:
            try:
                out.append((name, _resolve(name)))
            except Exception:
                pass
    for cls in extra_classes:
        out.append(("%s.%s" % (cls.__module__, cls.__qualname__), cls))
    return out


def _probe(fn):
    try:
        return repr(fn())[:200]
    except BaseException as e:  # noqa: B902 - the probe itself may be what broke
        return "raised %s: %s" % (type(e).__name__, str(e)[:100])


def fingerprint(targets, forbidden_modules):
    import copyreg
    import random
    import signal
    import types
    import zlib

    import numpy
    import torch

    fp = {}
    for name, obj in targets:
        try:
            d = vars(obj)
        except TypeError:
            d = {}
        is_module = isinstance(obj, types.ModuleType)
        items = list(d.items())  # keys and ids as tuples: built and compared in C (fuzzers call this per input)
        fp["dict:" + name] = ((tuple(k for k, _ in items), tuple(map(id, (v for _, v in items)))), is_module)
        if isinstance(obj, types.FunctionType):
            fp["func:" + name] = (id(obj.__code__), id(obj.__defaults__), id(obj.__kwdefaults__))
    fp["state"] = {
        "grad_enabled": torch.is_grad_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "torch_threads": torch.get_num_threads(),
        "torch_rng": zlib.crc32(torch.get_rng_state().numpy().tobytes()),
        "python_rng": hash(random.getstate()),
        "numpy_rng": zlib.crc32(numpy.random.get_state()[1].tobytes()),
        "recursion_limit": sys.getrecursionlimit(),
        "switch_interval": sys.getswitchinterval(),
        "cwd": os.getcwd(),
        "environ": hash(tuple(sorted(os.environ.items()))),
        "signals": [repr(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM,
                                                          signal.SIGCHLD, signal.SIGPIPE, signal.SIGUSR1)],
        "copyreg_dispatch": sorted(repr(k) for k in copyreg.dispatch_table),
        "copyreg_extensions": sorted((repr(k), v) for k, v in copyreg._extension_registry.items()),
        "sparse_to_validate": len(getattr(torch._utils, "_sparse_tensors_to_validate", [])),
        "modules_forbidden": sorted(m for m in forbidden_modules + ["this", "antigravity"] if m in sys.modules),
    }
    fp["probes"] = {
        "Path('/etc/passwd').exists()": _probe(lambda: __import__("pathlib").Path("/etc/passwd").exists()),
        "Namespace(a=1).a": _probe(lambda: __import__("argparse").Namespace(a=1).a),
        "Counter('aab')['a']": _probe(lambda: __import__("collections").Counter("aab")["a"]),
        "torch.ones(2) + 1": _probe(lambda: (torch.ones(2) + 1).tolist()),
        "Parameter(torch.ones(1))": _probe(lambda: torch.nn.Parameter(torch.ones(1)).tolist()),
        "OrderedDict(a=1)": _probe(lambda: dict(__import__("collections").OrderedDict(a=1))),
    }
    return fp


def differences(before, after):
    out = []
    for key, (t0, is_module) in ((k, v) for k, v in before.items() if k.startswith("dict:")):
        t1 = after.get(key, (((), ()), is_module))[0]
        if t0 == t1:
            continue
        d0, d1 = dict(zip(*t0)), dict(zip(*t1))
        name = key[5:]
        volatile = _VOLATILE.get(name, set())
        for k in sorted(set(d0) | set(d1)):
            if k in volatile:
                continue
            if k not in d1:
                out.append("%s.%s deleted" % (name, k))
            elif k not in d0:
                if not is_module:
                    out.append("%s.%s added" % (name, k))
            elif d0[k] != d1[k]:
                out.append("%s.%s replaced" % (name, k))
    for key in before:
        if key.startswith("func:") and before[key] != after.get(key):
            out.append("%s: code, defaults or kwdefaults replaced" % key[5:])
    for group in ("state", "probes"):
        for k, v in before[group].items():
            if after[group].get(k) != v:
                out.append("%s: %r -> %r" % (k, v, after[group].get(k)))
    return out


# ---- expected values and what was returned -----------------------------------------------


class TypeIs:
    def __init__(self, name):
        self.name = name


def decode(spec):
    import argparse
    import collections

    import torch

    if isinstance(spec, list):
        return [decode(v) for v in spec]
    if not isinstance(spec, dict):
        return spec
    if "$t" in spec:
        dtype, shape, values = spec["$t"]
        return torch.tensor(values, dtype=getattr(torch, dtype)).reshape(shape)
    if "$param" in spec:
        t, rg = spec["$param"]
        return torch.nn.Parameter(decode(t), requires_grad=rg)
    if "$tuple" in spec:
        return tuple(decode(spec["$tuple"]))
    if "$set" in spec:
        return set(decode(spec["$set"]))
    if "$frozenset" in spec:
        return frozenset(decode(spec["$frozenset"]))
    if "$odict" in spec:
        return collections.OrderedDict((k, decode(v)) for k, v in spec["$odict"])
    if "$counter" in spec:
        return collections.Counter({k: v for k, v in spec["$counter"]})
    if "$ns" in spec:
        return argparse.Namespace(**{k: decode(v) for k, v in spec["$ns"].items()})
    if "$bytes" in spec:
        return bytes.fromhex(spec["$bytes"])
    if "$shard" in spec:
        import ckpz.distributed

        t, off, rows = spec["$shard"]
        return ckpz.distributed.Shard(decode(t), off, rows)
    if "$type" in spec:
        return TypeIs(spec["$type"])
    return {k: decode(v) for k, v in spec.items()}


def same(got, want, where="value"):
    """None when got equals want (types included), else why not."""
    import torch

    if isinstance(want, TypeIs):
        return None if type(got).__name__ == want.name else "%s is a %s, not a %s" % (where, type(got).__name__,
                                                                                      want.name)
    if isinstance(want, torch.Tensor):
        if type(got) is not type(want):
            return "%s is a %s, not a %s" % (where, type(got).__name__, type(want).__name__)
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            return "%s: %s %s, expected %s %s" % (where, got.dtype, tuple(got.shape), want.dtype, tuple(want.shape))
        if got.requires_grad != want.requires_grad:
            return "%s: requires_grad %s" % (where, got.requires_grad)
        if got.layout != torch.strided or got.device.type != "cpu":
            return "%s: layout %s on %s" % (where, got.layout, got.device)
        if not torch.equal(got.detach(), want.detach()):
            return "%s: values differ (silent wrong tensor): %s" % (where, got.detach().flatten()[:8].tolist())
        return None
    if type(got) is not type(want):
        return "%s is a %s, not a %s" % (where, type(got).__name__, type(want).__name__)
    if type(want).__name__ == "Shard":
        if (got.offset, got.rows) != (want.offset, want.rows):
            return "%s: rows %d.. of %d, expected %d.. of %d" % (where, got.offset, got.rows, want.offset, want.rows)
        return same(got.tensor, want.tensor, where + ".tensor")
    if isinstance(want, dict):
        if list(got.keys()) != list(want.keys()) and set(got.keys()) != set(want.keys()):
            return "%s: keys %r, expected %r" % (where, sorted(map(repr, got))[:10], sorted(map(repr, want))[:10])
        for k in want:
            why = same(got[k], want[k], "%s[%r]" % (where, k))
            if why:
                return why
        return None
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return "%s: %d items, expected %d" % (where, len(got), len(want))
        for n, (a, b) in enumerate(zip(got, want)):
            why = same(a, b, "%s[%d]" % (where, n))
            if why:
                return why
        return None
    if hasattr(want, "__dict__") and not isinstance(want, type):
        return same(vars(got), vars(want), where + ".__dict__")
    return None if got == want else "%s: %r, expected %r" % (where, got, want)


def tensors_in(value, limit=2_000_000):
    """[(where, tensor)] for the tensors reachable through containers, each object once
    (iterative: no recursion on deep or shared structures)."""
    import torch

    out, seen, stack, n = [], set(), [("value", value)], 0
    while stack and n < limit:
        where, x = stack.pop()
        n += 1
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, torch.Tensor):
            out.append((where, x))
            continue
        if isinstance(x, dict):
            for k, v in x.items():
                stack.append(("%s[%r]" % (where, k) if len(where) < 200 else where, v))
                stack.append((where + ".key", k))
        elif isinstance(x, (list, tuple, set, frozenset)) or type(x).__name__ == "deque":
            for k, v in enumerate(x):
                stack.append(("%s[%d]" % (where, k) if len(where) < 200 else where, v))
        elif type(x).__name__ in ("Namespace", "SimpleNamespace", "Shard", "Metadata"):
            stack.append((where + ".__dict__", vars(x)))
    return out


def storage_bytes(t):
    """The size of the storage under t (None for sparse, meta, nested tensors)."""
    import torch

    if t.layout != torch.strided or t.device.type == "meta":
        return None
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return st.nbytes()
    except Exception:
        return None


def tensor_problem(t):
    """Why the tensor t is not sound (outside its storage, hooks, an invalid sparse
    tensor), or None."""
    import torch

    hooks = getattr(t, "_backward_hooks", None)
    if hooks:
        return "has backward hooks %r" % (list(hooks.values())[:2],)
    if t.is_sparse:
        try:
            torch._validate_sparse_coo_tensor_args(t._indices(), t._values(), t.size())
        except Exception as e:
            return "invalid sparse tensor: %s" % str(e)[:200]
        return tensor_problem(t._indices()) or tensor_problem(t._values())
    if t.layout != torch.strided:
        return None
    if t.device.type == "meta":
        return None
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        nbytes = st.nbytes()
    except Exception as e:
        return "its storage cannot be read: %s" % str(e)[:200]
    if t.numel() == 0:
        return None
    if t.storage_offset() < 0 or any(s < 0 for s in t.stride()):
        return "negative offset or stride"
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    if (last + 1) * t.element_size() > nbytes:
        return "reaches byte %d of a %d-byte storage (silent wrong tensor)" % ((last + 1) * t.element_size(), nbytes)
    return None


# ---- loading -----------------------------------------------------------------------------


def unwrap(e):
    """The error inside torch DCP's CheckpointException (it wraps each rank's)."""
    failures = getattr(e, "failures", None)
    if type(e).__name__ == "CheckpointException" and isinstance(failures, dict) and failures:
        inner = next(iter(failures.values()))
        if isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
            inner = inner[0]
        if isinstance(inner, BaseException):
            return inner
    return e


def zeros_like_spec(value):
    import torch

    out = {}
    for k, v in decode(value).items():
        out[k] = torch.zeros_like(v) if isinstance(v, torch.Tensor) else v
    return out


def do_load(case, path):
    import ckpz

    kind = case["load"]
    if kind == "load":
        return ckpz.load(path, trusted=False)
    if kind == "load_trusted":  # run_suite's self-test only: the full unpickler, code and all
        return ckpz.load(path, trusted=True)
    if kind == "load_mem":
        with open(path, "rb") as fo:
            data = fo.read()
        return ckpz.load(io.BytesIO(data), trusted=False)
    if kind == "dist":
        import ckpz.distributed

        return ckpz.distributed.load(path)
    if kind == "dcp_metadata":
        import ckpz.dcp

        return ckpz.dcp.Reader(path).read_metadata()
    if kind == "dcp_read":
        import warnings

        import ckpz.dcp

        dcp = ckpz.dcp.checkpoint
        sd = zeros_like_spec(case["value"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if ckpz.dcp._N["new_api"] and hasattr(dcp, "load"):
                dcp.load(sd, storage_reader=ckpz.dcp.Reader(path))
            else:
                dcp.load_state_dict(sd, storage_reader=ckpz.dcp.Reader(path), no_dist=True)
        return sd
    raise ValueError("unknown load kind %r" % kind)


def exc_info(e):
    import pickle

    import ckpz

    try:
        msg = str(e)
    except BaseException as e2:  # noqa: B902
        msg = "<str() of the exception raised %s>" % type(e2).__name__
    tb = traceback.extract_tb(e.__traceback__)[-4:]
    # torch >= 2's DCP turns a failed read_metadata into AssertionError("metadata is None;
    # global metadata read failed: <the error's text>"), dropping the exception itself:
    # ckpz cannot choose that type, so the text of its refusal is judged instead.
    dcp_wrapped = isinstance(e, AssertionError) and "global metadata read failed: " in msg
    return {
        "type": "%s.%s" % (type(e).__module__, type(e).__qualname__),
        "ckpz_error": isinstance(e, ckpz.Error) or dcp_wrapped,
        "dcp_wrapped": dcp_wrapped,
        "unsafe_global": isinstance(e, ckpz.UnsafeGlobalError),
        "unpickling": isinstance(e, pickle.UnpicklingError),
        "oserror": isinstance(e, OSError),
        "message": msg[:2000],
        "where": ["%s:%d %s" % ("/".join(f.filename.split(os.sep)[-2:]), f.lineno, f.name) for f in tb],
    }


class Env:
    """What both modes prepare once: the imports, a valid load, the fingerprint targets."""

    def __init__(self, suite_dir):
        import torch  # noqa: F401
        import numpy  # noqa: F401

        import ckpz
        import ckpz.distributed  # noqa: F401

        self.suite_dir = suite_dir
        with open(os.path.join(suite_dir, "index.json")) as fo:
            self.index = json.load(fo)
        self.dcp_error = None
        extra = []
        try:
            import ckpz.dcp

            extra = list(getattr(ckpz, "_dcp_metadata", ckpz.dcp)._metadata_classes())
        except Exception as e:
            self.dcp_error = "import ckpz.dcp failed: %s: %s" % (type(e).__name__, e)
        import craft

        warm = craft.torch_archive(craft.pkl(craft.sdict(w=craft.tensor("0", (2,)))), {"0": craft.f32([1.0, 2.0])})
        try:
            ckpz.load(io.BytesIO(warm))
        except Exception as e:
            self.warm_error = "%s: %s" % (type(e).__name__, e)
        else:
            self.warm_error = None
        self.targets = _targets(extra)
        import torch as t

        self.versions = {"python": sys.version.split()[0], "torch": t.__version__, "ckpz": ckpz.__version__}


def run_case(env, case, result_path, as_mb):
    """Runs the case here and writes its result to result_path (in the child)."""
    import copyreg

    res = {"id": case["id"], "versions": env.versions}
    path = os.path.join(env.suite_dir, case["path"])
    try:
        for rel in case.get("fifo", []):
            p = os.path.join(env.suite_dir, rel)
            if os.path.lexists(p):
                os.unlink(p)
            os.mkfifo(p)
        for rel, src in case.get("fifo_feed", {}).items():  # a writer at the other end of the FIFO
            import threading

            def feed(p=os.path.join(env.suite_dir, rel), src=os.path.join(env.suite_dir, src)):
                with open(src, "rb") as fi, open(p, "wb") as fo:
                    fo.write(fi.read())

            threading.Thread(target=feed, daemon=True).start()
        if "copyreg_ext" in case.get("setup", []):
            for code, (mod, name) in env.index["ext_codes"].items():
                copyreg.add_extension(mod, name, int(code))
        if case["load"].startswith("dcp") and env.dcp_error:
            raise RuntimeError(env.dcp_error)
    except Exception as e:
        res["setup_error"] = "%s: %s" % (type(e).__name__, e)
        _write(result_path, res)
        return
    before = fingerprint(env.targets, case.get("forbidden_modules", []))
    as_soft, as_hard = resource.getrlimit(resource.RLIMIT_AS)
    if as_mb:  # the soft limit only, so that it can be lifted again for the checks after
        limit = (_status("VmSize") or 0) * 1024 + (as_mb << 20)
        if as_hard != resource.RLIM_INFINITY:
            limit = min(limit, as_hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, as_hard))
    base_kib, reset_ok = reset_peak()
    t0 = time.monotonic()
    value = None
    try:
        value = do_load(case, path)
        res["outcome"] = "loaded"
    except BaseException as e:  # noqa: B902 - SystemExit, MemoryError, RecursionError included
        res["outcome"] = "raised"
        res["exc"] = exc_info(unwrap(e))
        del e
    res["seconds"] = round(time.monotonic() - t0, 3)
    res["rss_base_kib"] = base_kib
    res["rss_peak_kib"] = peak_kib(reset_ok)
    res["rss_reset"] = reset_ok
    resource.setrlimit(resource.RLIMIT_AS, (as_soft, as_hard))
    if res["outcome"] == "loaded":
        try:
            res["type"] = type(value).__name__
            found = tensors_in(value)
            res["tensors"] = len(found)
            res["bad_tensors"] = [("%s: %s" % (w, why)) for w, why in ((w, tensor_problem(t)) for w, t in found) if why]
            if case.get("value") is not None and not res["bad_tensors"]:
                res["differs"] = same(value, decode(case["value"]))
        except BaseException as e:  # noqa: B902
            res["check_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
    try:
        after = fingerprint(env.targets, case.get("forbidden_modules", []))
        res["changes"] = differences(before, after)
    except BaseException as e:  # noqa: B902
        res["changes"] = ["the fingerprint could not be taken after the load: %s: %s" % (type(e).__name__, e)]
    _write(result_path, res)


def _write(path, res):
    tmp = path + ".tmp"
    with open(tmp, "w") as fo:
        json.dump(res, fo, default=repr)
    os.replace(tmp, path)


def wait_bounded(pid, t0, timeout, poll):
    """(wait status, timed out) of the child pid, a session leader: killed with its
    process group once timeout seconds have passed since t0 (time.monotonic()).
    tests/fuzz/python/replay.py waits for its children the same way."""
    import signal

    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return status, False
        if time.monotonic() - t0 > timeout:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1], True
        time.sleep(poll)


def child_setup(log_path):
    """In the child, before the case: stdin, stdout and stderr, faulthandler, no core."""
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
    faulthandler.enable(sys.stderr)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def serve(suite_dir):
    """The fork server: one JSON request per stdin line, one JSON reply per stdout line."""
    env = Env(suite_dir)
    out = sys.stdout
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    out.write(json.dumps({"ready": True, "versions": env.versions, "threads": threads, "warm_error": env.warm_error,
                          "dcp_error": env.dcp_error}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        case = req["case"]
        out.flush()
        sys.stderr.flush()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.setsid()
                os.chdir(req["cwd"])
                child_setup(req["log"])
                run_case(env, case, req["result"], req["as_mb"])
            except BaseException:  # noqa: B902
                traceback.print_exc()
                code = 70
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                except BaseException:  # noqa: B902
                    pass
                os._exit(code)
        status, timed_out = wait_bounded(pid, t0, req["timeout"], 0.005)
        reply = {"id": case["id"], "timed_out": timed_out, "wall": round(time.monotonic() - t0, 3)}
        if os.WIFSIGNALED(status):
            reply["signal"] = os.WTERMSIG(status)
        else:
            reply["exit"] = os.WEXITSTATUS(status)
        out.write(json.dumps(reply) + "\n")
        out.flush()


def one(case_json, result_path):
    """Fresh-interpreter mode: the case is in a JSON file {"suite", "case", "as_mb"}."""
    with open(case_json) as fo:
        req = json.load(fo)
    faulthandler.enable()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    env = Env(req["suite"])
    run_case(env, req["case"], result_path, req["as_mb"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"] and len(sys.argv) == 3:
        serve(sys.argv[2])
    elif sys.argv[1:2] == ["--one"] and len(sys.argv) == 4:
        one(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: driver.py --serve SUITE_DIR | driver.py --one CASE_JSON RESULT_JSON")
