"""Finding libckpz and checking that it is one this package can use.

The package is pure Python over the shared library, so the library is found at import
(the search order is the one ckpz's docstring gives) and checked before anything is
declared against it: it must hold every function the package calls, come from the same
release line (major.minor) and have a ckpz_params at least as large as the package's.
Each failure is an ImportError saying what was tried, so a stale or foreign libckpz is
refused at import, never met as a crash inside a later call.
"""

import ctypes
import ctypes.util
import os

__all__ = []  # private module

PACKAGE_VERSION = "0.4.0"

_HERE = os.path.dirname(os.path.abspath(__file__))


# The library's file name with CMakeLists.txt's SOVERSION: the ABI _abi.py declares (the
# output structs start with struct_size since SOVERSION 1).
SONAME = "libckpz.so.1"


def _candidates():
    """Where to look for libckpz, in order (see ckpz's module docstring)."""
    env = os.environ.get("CKPZ_LIBRARY")
    if env:
        return [env], True
    paths = [os.path.join(_HERE, n) for n in (SONAME, "libckpz.so")]
    # Written by `make install` next to this file: the installed library's path.
    try:
        from . import _install  # type: ignore

        if getattr(_install, "LIBRARY", None):
            paths.append(_install.LIBRARY)
    except ImportError:
        pass
    # Installed layout ${prefix}/lib/python3/dist-packages/ckpz -> ${prefix}/lib
    prefix_lib = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))
    paths.append(os.path.join(prefix_lib, SONAME))
    # Run from the repository: python/ckpz/../../build
    paths.append(os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libckpz.so")))
    found = ctypes.util.find_library("ckpz")
    if found:
        paths.append(found)
    paths.append(SONAME)
    return paths, False


# Functions this package calls: a library without one of them is older than the package.
_REQUIRED = (
    "ckpz_version_string", "ckpz_params_init", "ckpz_compress_stream", "ckpz_archive_open",
    "ckpz_archive_read", "ckpz_zip_source_create", "ckpz_zip_source_create_opts", "ckpz_fd_write", "ckpz_fd_pread",
)


def load():
    """(ctypes.CDLL, its path) of the first usable libckpz; ImportError listing every try."""
    paths, explicit = _candidates()
    errors = []
    for p in paths:
        if os.sep in p and not os.path.exists(p):
            errors.append("%s: no such file" % p)
            continue
        try:
            found = ctypes.CDLL(p, use_errno=True)  # errno of a failed publish (_files)
        except OSError as e:
            errors.append(str(e))
            if explicit:
                break
            continue
        missing = [f for f in _REQUIRED if not hasattr(found, f)]
        if missing:
            errors.append("%s: not a libckpz this package can use (no %s)" % (p, ", ".join(missing)))
            if explicit:
                break
            continue
        return found, p
    raise ImportError(
        "ckpz: cannot load libckpz (%s). Build it (make) or set CKPZ_LIBRARY to the path of "
        "libckpz.so. Tried:\n  %s"
        % ("CKPZ_LIBRARY=" + paths[0] if explicit else "searched the usual places", "\n  ".join(errors))
    )


def check_layout(params_init, params_size):
    """ckpz_params_init writes the library's sizeof(ckpz_params): it must cover ours."""
    raw = ctypes.create_string_buffer(1024)  # room for a newer library's larger struct
    params_init(raw)
    c_size = ctypes.c_size_t.from_buffer(raw).value
    if c_size < params_size:
        raise ImportError(
            "ckpz: libckpz's ckpz_params is %d bytes, this package expects at least %d: "
            "the library is older than the Python package" % (c_size, params_size)
        )


def check_version(version, path):
    """The package and the library (version: ckpz_version_string's bytes, loaded from
    path) must come from the same release line (major.minor)."""
    have = (version or b"").decode("ascii", "replace")
    want = PACKAGE_VERSION
    if have.split(".")[:2] != want.split(".")[:2]:
        raise ImportError(
            "ckpz: libckpz at %s is version %s, this package is %s: install matching versions "
            "(or set CKPZ_LIBRARY to a libckpz %s.x)" % (path, have, want, ".".join(want.split(".")[:2]))
        )
