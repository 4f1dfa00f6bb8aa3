"""Which ckpz package the Python tests import: decided here, once, for every test file
of tests/python and for the fuzz replay (tests/fuzz/python/_common.py).

By default (the python_* tests, Debian's torch 1.13): the checkout's python/ goes on
sys.path and the package loads the libckpz that ctest names in CKPZ_LIBRARY (build/).
With CKPZ_TEST_INSTALLED=1 (the python_*_torch2 tests: tests/python/torch2.sh, torch
2.13.0 in the virtual environment scripts/torch2-venv makes): nothing puts the checkout
on the path, so `import ckpz` finds the copy that `pip install` put in the interpreter's
environment, with its bundled libckpz and its `ckpz` command (CKPZ_CLI), as a user gets
them. A checkout copy found there anyway, or a CKPZ_LIBRARY, is an error, not a silent
test of the wrong files.

Children (subprocesses of sys.executable) get the directory of the package this process
imported, package_dir(), never the checkout's by name: under the switch that is the
environment's site-packages, so parent and child test the same copy.

    import package_under_test
    package_under_test.use_package()      # before `import ckpz`
"""

import importlib.util
import os
import sys

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CHECKOUT = os.path.join(REPO, "python")
INSTALLED = os.environ.get("CKPZ_TEST_INSTALLED") == "1"


def _is_checkout(path):
    return os.path.realpath(path or os.curdir) == os.path.realpath(CHECKOUT)


def use_package(append=False):
    """Makes `import ckpz` find the package under test. Checkout mode: python/ first on
    sys.path (last with append=True, so that a ckpz on PYTHONPATH wins: the fuzz harnesses
    test another copy that way). Installed mode: the checkout's python/ is taken off
    sys.path, CKPZ_CLI defaults to the `ckpz` beside sys.executable, and an environment
    without ckpz installed, or one that would still load the checkout's files or library,
    raises ImportError saying so."""
    if not INSTALLED:
        if CHECKOUT not in sys.path:
            if append:
                sys.path.append(CHECKOUT)
            else:
                sys.path.insert(0, CHECKOUT)
        return
    sys.path[:] = [p for p in sys.path if not _is_checkout(p)]
    if os.environ.get("CKPZ_LIBRARY"):
        raise ImportError("CKPZ_TEST_INSTALLED=1 tests the installed package with its own libckpz, "
                          "but CKPZ_LIBRARY=%s is set" % os.environ["CKPZ_LIBRARY"])
    spec = importlib.util.find_spec("ckpz")
    if spec is None or not spec.origin:
        raise ImportError("CKPZ_TEST_INSTALLED=1: ckpz is not installed for %s (scripts/torch2-venv DIR installs "
                          "it from this checkout with pip)" % sys.executable)
    if os.path.realpath(spec.origin).startswith(os.path.realpath(CHECKOUT) + os.sep):
        raise ImportError("CKPZ_TEST_INSTALLED=1, but `import ckpz` would load the checkout's %s" % spec.origin)
    cli = os.path.join(os.path.dirname(sys.executable), "ckpz")
    if not os.environ.get("CKPZ_CLI") and os.path.exists(cli):
        os.environ["CKPZ_CLI"] = cli


def package_dir():
    """The directory holding the ckpz package this process imports (python/ or the
    environment's site-packages): what a child interpreter needs on its path."""
    import ckpz

    return os.path.dirname(os.path.dirname(os.path.abspath(ckpz.__file__)))


def child_env(env=None):
    """os.environ (or env) for a child interpreter that must import the same ckpz:
    package_dir() first on its PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_dir(), env.get("PYTHONPATH")) if p)
    return env


def cli():
    """The `ckpz` command under test: CKPZ_CLI (set in installed mode), else the checkout's
    build/ckpz; the test is skipped without one."""
    import unittest

    p = os.environ.get("CKPZ_CLI") or os.path.join(REPO, "build", "ckpz")
    if not os.path.exists(p):
        raise unittest.SkipTest("no ckpz command (CKPZ_CLI)")
    return p


def run_cli(*args):
    """`ckpz ARGS...`: its standard output; an AssertionError with its message when it fails."""
    import subprocess

    r = subprocess.run([cli()] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode:
        raise AssertionError("ckpz %s: %s" % (" ".join(map(str, args)), r.stderr))
    return r.stdout
