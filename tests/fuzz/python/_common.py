"""What the Python fuzz harnesses share: finding the package and the library, importing
ckpz under atheris's instrumentation, the policy for exceptions, and the checks that
make a load that "worked" a finding anyway.

A harness is a module fuzz_NAME.py with setup() and TestOneInput(data); run directly it
fuzzes with atheris (python fuzz_NAME.py [libFuzzer flags] NEW_DIR CORPUS_DIR), and
replay.py imports it and runs each corpus file through TestOneInput without atheris.

What a harness accepts from the code under test: a value, or ckpz.Error,
pickle.UnpicklingError (ckpz.UnsafeGlobalError included) or FileNotFoundError (a
manifest naming a shard that is not there). Anything else raised is a finding (TypeError,
RecursionError, MemoryError under the address-space cap, KeyError ...), and so is a
value with a tensor outside its storage, a tensor with backward hooks, a marker file of
a code payload (the committed seeds' payloads write into MARKER_DIR), a process-wide
change (the fingerprint of tests/python/hostile/driver.py, taken before and after each
input), or a harness-specific property (see each harness).
"""

import os
import pickle
import resource
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))
HOSTILE = os.path.join(REPO, "tests", "python", "hostile")
MARKER_DIR = "/tmp/ckpz-fuzz-ran"  # where the seeds' code payloads try to create files

if HOSTILE not in sys.path:
    sys.path.insert(0, HOSTILE)
if os.path.join(REPO, "tests", "python") not in sys.path:
    sys.path.append(os.path.join(REPO, "tests", "python"))
import package_under_test  # noqa: E402  (the checkout's python/, or with CKPZ_TEST_INSTALLED=1 the installed copy)

package_under_test.use_package(append=True)  # after PYTHONPATH: another ckpz can be tested
if not package_under_test.INSTALLED and not os.environ.get("CKPZ_LIBRARY") and \
        os.path.exists(os.path.join(REPO, "build", "libckpz.so")):
    os.environ["CKPZ_LIBRARY"] = os.path.join(REPO, "build", "libckpz.so")
os.environ.setdefault("OMP_NUM_THREADS", "1")


class Finding(Exception):
    """A property the code under test broke (the fuzzer reports it as a crash)."""


_state = {}


def setup(instrument=None):
    """Imports torch (never instrumented), then ckpz and its submodules, under atheris's
    instrumentation when instrument is the atheris module; caps the address space
    (PY_FUZZ_AS_MB above what is mapped now, default 2048) and takes the fingerprint.
    Idempotent."""
    if _state:
        return _state
    import torch

    torch.set_num_threads(1)
    if instrument is not None:
        with instrument.instrument_imports(include=["ckpz"]):
            import ckpz
            import ckpz.distributed  # noqa: F401
            import ckpz.dcp  # noqa: F401
    else:
        import ckpz
        import ckpz.distributed  # noqa: F401
        import ckpz.dcp  # noqa: F401
    import driver  # tests/python/hostile: the fingerprint and the tensor checks

    _state["ckpz"] = ckpz
    _state["driver"] = driver
    _state["targets"] = driver._targets(getattr(ckpz, "_dcp_metadata", ckpz.dcp)._metadata_classes())
    os.makedirs(MARKER_DIR, exist_ok=True)
    import copyreg

    import make_suite

    for code, (mod, name) in make_suite.EXT_CODES.items():  # as the hostile suite's runner does
        if copyreg._extension_registry.get((mod, name)) != code:
            copyreg.add_extension(mod, name, code)
    sanitized = bool(os.environ.get("CKPZ_TEST_SANITIZED"))  # ASan's shadow memory: no cap, no ceiling
    _state["rss_limit"] = None if sanitized else RSS_LIMIT
    cap = 0 if sanitized else int(os.environ.get("PY_FUZZ_AS_MB", "2048"))
    if cap:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = (driver._status("VmSize") or 0) * 1024 + (cap << 20)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    _state["fingerprint"] = driver.fingerprint(_state["targets"], [])
    return _state


def workdir(name):
    """A scratch directory for a harness's files (/tmp/ckpz-fuzz-NAME-PID), removed at
    exit; those of processes that are gone are removed first (libFuzzer ends the process
    without running atexit handlers)."""
    import atexit
    import shutil
    import tempfile

    base = tempfile.gettempdir()
    prefix = "ckpz-fuzz-%s-" % name
    for entry in os.listdir(base):
        if entry.startswith(prefix) and entry[len(prefix):].isdigit():
            try:
                os.kill(int(entry[len(prefix):]), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(base, entry), ignore_errors=True)
            except OSError:
                pass
    d = os.path.join(base, prefix + str(os.getpid()))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    pid = os.getpid()
    atexit.register(lambda: os.getpid() == pid and shutil.rmtree(d, ignore_errors=True))
    return d


def warm(fn):
    """Runs fn() (a valid load: lazy imports and caches get filled), ignoring what it
    raises, then takes the fingerprint again: a harness's setup ends with it."""
    try:
        fn()
    except Exception:
        pass
    rebase()


def rebase():
    """Takes the fingerprint again (replay.py does, in each forked child: fork reseeds
    Python's random module)."""
    _state["fingerprint"] = _state["driver"].fingerprint(_state["targets"], [])


def fine(e):
    """Whether the exception e is an acceptable refusal."""
    ckpz = _state["ckpz"]
    return isinstance(e, (ckpz.Error, pickle.UnpicklingError, FileNotFoundError))


RSS_LIMIT = 256 << 20  # issue 27: peak RSS above the baseline <= max(2 x the file, 256 MB)


def run(fn, check=None, max_storage=None):
    """fn() under the policy: returns its value (None when it refused cleanly); raises
    Finding for an unclean exception, a bad value (check(value) -> why or None, after
    the tensor checks; a tensor whose storage holds more than max_storage bytes: memory
    the file does not store, a storage grown by set_), a peak RSS more than 256 MB
    above what it was before, a marker, or a process-wide change."""
    driver = _state["driver"]
    value, refused = None, False
    base_kib, reset_ok = driver.reset_peak()
    try:
        value = fn()
    except Finding:
        raise
    except Exception as e:
        if not fine(e):
            raise Finding("%s: %s" % (type(e).__name__, _short(e))) from e
        refused = True
    growth = (driver.peak_kib(reset_ok) - base_kib) * 1024
    if reset_ok and _state["rss_limit"] and growth > _state["rss_limit"]:
        raise Finding("peak RSS %d MB above the baseline (limit %d MB)" % (growth >> 20, RSS_LIMIT >> 20))
    if not refused:
        for where, t in driver.tensors_in(value):
            why = driver.tensor_problem(t)
            if why is None and max_storage is not None:
                nbytes = driver.storage_bytes(t)
                if nbytes is not None and nbytes > max_storage:
                    why = "a storage of %d bytes, where the input stores at most %d" % (nbytes, max_storage)
            if why:
                raise Finding("tensor %s: %s" % (where, why))
        why = check(value) if check is not None else None
        if why:
            raise Finding(why)
    ran = os.listdir(MARKER_DIR)
    if ran:
        for name in ran:
            os.unlink(os.path.join(MARKER_DIR, name))
        raise Finding("code ran: marker %s appeared" % ", ".join(sorted(ran)))
    after = driver.fingerprint(_state["targets"], [])
    changes = driver.differences(_state["fingerprint"], after)
    if changes:
        _state["fingerprint"] = after  # report once
        raise Finding("process-wide change: " + "; ".join(changes[:5]))
    return value


def _short(e):
    try:
        return str(e)[:500]
    except Exception:
        return "<unprintable>"


def main(test_one_input, setup_fn):
    """Fuzzes with atheris: the harness's own `python fuzz_NAME.py ...` entry point."""
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed for %s (pip install atheris==3.0.0 in a virtual environment; "
                 "scripts/fuzz-ci-python makes one)" % sys.executable)
    setup_fn(atheris)
    first = [True]

    def test(data):
        if first[0]:  # libFuzzer's signal handlers are in place now: the baseline includes them
            first[0] = False
            rebase()
        test_one_input(data)

    atheris.Setup(sys.argv, test)
    atheris.Fuzz()
