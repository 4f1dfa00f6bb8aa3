"""ctypes declarations for libckpz (include/ckpz.h) and the plumbing around them.

Everything here mirrors the public header: the structs have its exact layout, and every
function the package calls has its argument and result types declared. Nothing in this
module is public API; ckpz/__init__.py builds on it.
"""

import ctypes
import ctypes.util
import os
import threading

__all__ = []  # private module

MAGIC = b"\x89CKPZ\r\n\x1a"  # first 8 bytes of every .ckpz file (doc/format.md)
HEADER_SIZE = 32
MIN_CHUNK_COST = 48  # bytes every chunk costs at least in a .ckpz file: frame header + seek record

LEVEL_MIN, LEVEL_MAX, LEVEL_DEFAULT = 1, 9, 3
SIZE_UNKNOWN = (1 << 64) - 1

# ckpz_error codes (fixed numbers; new ones are only appended)
OK = 0
ERR_PARAM = 1
ERR_NOMEM = 2
ERR_READ = 3
ERR_WRITE = 4
ERR_NOT_CKPZ = 5
ERR_VERSION = 6
ERR_TRUNCATED = 7
ERR_CHECKSUM = 8
ERR_CORRUPT = 9
ERR_LIMIT = 10
ERR_NOT_FOUND = 11
ERR_INPUT = 12
ERR_ABORTED = 13
ERR_INTERNAL = 14
ERR_BASE = 15

BASE_NAME_MAX = 4096  # CKPZ_BASE_NAME_MAX
BASE_PROBE = 32 + 12 + 20 + BASE_NAME_MAX  # CKPZ_BASE_PROBE: bytes ckpz_base_info_read may need

# ---- the library ---------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """Where to look for libckpz, in order (see ckpz's module docstring)."""
    env = os.environ.get("CKPZ_LIBRARY")
    if env:
        return [env], True
    paths = [os.path.join(_HERE, n) for n in ("libckpz.so.0", "libckpz.so")]
    # Written by `make install` next to this file: the installed library's path.
    try:
        from . import _install  # type: ignore

        if getattr(_install, "LIBRARY", None):
            paths.append(_install.LIBRARY)
    except ImportError:
        pass
    # Installed layout ${prefix}/lib/python3/dist-packages/ckpz -> ${prefix}/lib
    prefix_lib = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))
    paths.append(os.path.join(prefix_lib, "libckpz.so.0"))
    # Run from the repository: python/ckpz/../../build
    paths.append(os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libckpz.so")))
    found = ctypes.util.find_library("ckpz")
    if found:
        paths.append(found)
    paths.append("libckpz.so.0")
    return paths, False


# Functions this package calls: a library without one of them is older than the package.
_REQUIRED = (
    "ckpz_version_string", "ckpz_params_init", "ckpz_compress_stream", "ckpz_archive_open",
    "ckpz_archive_read", "ckpz_zip_source_create", "ckpz_fd_write", "ckpz_fd_pread",
)


def _load():
    paths, explicit = _candidates()
    errors = []
    for p in paths:
        if os.sep in p and not os.path.exists(p):
            errors.append("%s: no such file" % p)
            continue
        try:
            found = ctypes.CDLL(p)
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


lib, LIBRARY_PATH = _load()

# ---- types ---------------------------------------------------------------------------

c_ptrdiff = ctypes.c_ssize_t
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
READ_FN = ctypes.CFUNCTYPE(c_ptrdiff, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
WRITE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
PREAD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64)


class Params(ctypes.Structure):
    """struct ckpz_params."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("level", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("chunk_size", ctypes.c_size_t),
        ("format", ctypes.c_int),  # ckpz_input_format
        ("raw_dtype", ctypes.c_int),  # ckpz_dtype
        ("mem_limit", ctypes.c_size_t),
        ("progress", PROGRESS_FN),
        ("progress_opaque", ctypes.c_void_p),
        ("base", ctypes.c_void_p),
        ("base_size", ctypes.c_size_t),
        ("base_name", ctypes.c_char_p),
        ("base_depth", ctypes.c_uint32),
        ("policy", ctypes.c_char_p),
        ("max_mae", ctypes.c_double),
        ("patch", ctypes.c_void_p),  # int (*)(void *, const void *, size_t, uint64_t); unused here
        ("patch_opaque", ctypes.c_void_p),
        ("raw_ndim", ctypes.c_uint32),
        ("raw_shape", ctypes.POINTER(ctypes.c_uint64)),  # raw input's shape; unused here
    ]


class Fd(ctypes.Structure):
    """struct ckpz_fd."""

    _fields_ = [("fd", ctypes.c_int), ("error", ctypes.c_int), ("bytes", ctypes.c_uint64)]


class Span(ctypes.Structure):
    """struct ckpz_span."""

    _fields_ = [("offset", ctypes.c_uint64), ("length", ctypes.c_uint64), ("dst", ctypes.c_void_p)]


class ZipMember(ctypes.Structure):
    """struct ckpz_zip_member."""

    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("size", ctypes.c_uint64)]


class Stats(ctypes.Structure):
    """struct ckpz_stats."""

    _fields_ = [
        ("original_bytes", ctypes.c_uint64),
        ("compressed_bytes", ctypes.c_uint64),
        ("tensor_bytes", ctypes.c_uint64),
        ("tensors", ctypes.c_uint64),
        ("chunks", ctypes.c_uint64),
        ("format", ctypes.c_int),
    ]


class EntryStruct(ctypes.Structure):
    """struct ckpz_entry."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
        ("offset", ctypes.c_uint64),
        ("length", ctypes.c_uint64),
        ("compressed", ctypes.c_uint64),
        ("chunks", ctypes.c_uint64),
        ("based", ctypes.c_int),
        ("base_offset", ctypes.c_uint64),
        ("lossy", ctypes.c_int),
        ("lossy_mode", ctypes.c_char_p),
        ("lossy_bound", ctypes.c_double),
        ("abs_bound", ctypes.c_double),
        ("mae", ctypes.c_double),
        ("max_error", ctypes.c_double),
        ("rmse", ctypes.c_double),
        ("psnr", ctypes.c_double),
        ("exceptions", ctypes.c_uint64),
        ("changed", ctypes.c_uint64),
        ("frozen", ctypes.c_uint64),
    ]


class ArchiveInfo(ctypes.Structure):
    """struct ckpz_archive_info."""

    _fields_ = [
        ("format_version", ctypes.c_uint),
        ("format", ctypes.c_int),
        ("original_size", ctypes.c_uint64),
        ("compressed_size", ctypes.c_uint64),
        ("chunk_size", ctypes.c_uint32),
        ("content_checksum", ctypes.c_uint32),
        ("entries", ctypes.c_uint64),
        ("chunks", ctypes.c_uint64),
        ("lossy", ctypes.c_int),
    ]


class BaseInfo(ctypes.Structure):
    """struct ckpz_base_info."""

    _fields_ = [
        ("needed", ctypes.c_int),
        ("size", ctypes.c_uint64),
        ("checksum", ctypes.c_uint32),
        ("depth", ctypes.c_uint32),
        ("name", ctypes.c_char * (BASE_NAME_MAX + 1)),
    ]


def _declare(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_vp, _sz, _int, _u64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64
_P = ctypes.POINTER

version_number = _declare("ckpz_version_number", ctypes.c_uint)
version_string = _declare("ckpz_version_string", ctypes.c_char_p)
error_name = _declare("ckpz_error_name", ctypes.c_char_p, _int)
dtype_name = _declare("ckpz_dtype_name", ctypes.c_char_p, _int)
input_format_name = _declare("ckpz_input_format_name", ctypes.c_char_p, _int)
params_init = _declare("ckpz_params_init", None, _vp)
ctx_create = _declare("ckpz_ctx_create", _vp)
ctx_free = _declare("ckpz_ctx_free", None, _vp)
ctx_message = _declare("ckpz_ctx_message", ctypes.c_char_p, _vp)
compress_stream = _declare(
    "ckpz_compress_stream", _int, _vp, _P(Params), READ_FN, _vp, _u64, WRITE_FN, _vp, _P(Stats)
)
decompress_stream = _declare(
    "ckpz_decompress_stream", _int, _vp, _P(Params), READ_FN, _vp, WRITE_FN, _vp, _P(Stats)
)
compress_buffer = _declare("ckpz_compress_buffer", _int, _vp, _P(Params), _vp, _sz, _P(_vp), _P(_sz))
decompress_buffer = _declare("ckpz_decompress_buffer", _int, _vp, _P(Params), _vp, _sz, _vp, _sz)
original_size = _declare("ckpz_original_size", _int, _vp, _vp, _sz, _P(_u64))
free = _declare("ckpz_free", None, _vp)
archive_open = _declare("ckpz_archive_open", _int, _vp, _P(Params), PREAD_FN, _vp, _u64, _P(_vp))
archive_close = _declare("ckpz_archive_close", None, _vp)
archive_get_info = _declare("ckpz_archive_get_info", None, _vp, _P(ArchiveInfo))
archive_entry = _declare("ckpz_archive_entry", _int, _vp, _u64, _P(EntryStruct))
archive_get_base = _declare("ckpz_archive_get_base", None, _vp, _P(BaseInfo))
base_info_read = _declare("ckpz_base_info_read", _int, _vp, _vp, _sz, _P(BaseInfo))
archive_read = _declare("ckpz_archive_read", _int, _vp, _vp, _P(Span), _sz)
zip_source_create = _declare("ckpz_zip_source_create", _int, _vp, _P(ZipMember), _sz, _P(_vp))
zip_source_size = _declare("ckpz_zip_source_size", _u64, _vp)
zip_source_free = _declare("ckpz_zip_source_free", None, _vp)

# The library's own callbacks, handed back to it as function pointers: I/O through them
# never enters Python (no interpreter lock, no lost signals).
FD_READ = ctypes.cast(lib.ckpz_fd_read, READ_FN)
FD_WRITE = ctypes.cast(lib.ckpz_fd_write, WRITE_FN)
FD_PREAD = ctypes.cast(lib.ckpz_fd_pread, PREAD_FN)
ZIP_SOURCE_READ = ctypes.cast(lib.ckpz_zip_source_read, READ_FN)


def _check_layout():
    """ckpz_params_init writes the library's sizeof(ckpz_params): it must cover ours."""
    raw = ctypes.create_string_buffer(1024)  # room for a newer library's larger struct
    params_init(raw)
    c_size = ctypes.c_size_t.from_buffer(raw).value
    if c_size < ctypes.sizeof(Params):
        raise ImportError(
            "ckpz: libckpz's ckpz_params is %d bytes, this package expects at least %d: "
            "the library is older than the Python package" % (c_size, ctypes.sizeof(Params))
        )


_check_layout()


def _check_version():
    """The package and the library must come from the same release line (major.minor)."""
    v = version_string()
    have = (v or b"").decode("ascii", "replace")
    want = PACKAGE_VERSION
    if have.split(".")[:2] != want.split(".")[:2]:
        raise ImportError(
            "ckpz: libckpz at %s is version %s, this package is %s: install matching versions "
            "(or set CKPZ_LIBRARY to a libckpz %s.x)" % (LIBRARY_PATH, have, want, ".".join(want.split(".")[:2]))
        )


PACKAGE_VERSION = "0.4.0"
_check_version()

# ---- errors --------------------------------------------------------------------------


class Error(RuntimeError):
    """An error reported by libckpz.

    Attributes: ``code`` (the ckpz_error number), ``name`` (ckpz_error_name's text,
    e.g. "checksum mismatch"), ``message`` (the context's message naming the chunk and
    tensor where known) and ``path`` (the file concerned, or None).
    """

    def __init__(self, code, message="", path=None):
        self.code = int(code)
        self.name = (error_name(self.code) or b"").decode("utf-8", "replace")
        self.message = message or self.name
        self.path = os.fspath(path) if path is not None and not hasattr(path, "read") else None
        text = self.message if self.message.startswith(self.name) else "%s: %s" % (self.name, self.message)
        if self.path is not None:
            text = "%s: %s" % (self.path, text)
        super().__init__(text)


def make_params(level=LEVEL_DEFAULT, threads=0):
    """A ckpz_params filled by ckpz_params_init, with our struct_size and the options."""
    if isinstance(level, bool) or not isinstance(level, int) or not LEVEL_MIN <= level <= LEVEL_MAX:
        raise ValueError("ckpz: level must be an int in %d..%d, not %r" % (LEVEL_MIN, LEVEL_MAX, level))
    if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads <= 4096:
        raise ValueError("ckpz: threads must be an int >= 0 (0 = all cores), not %r" % (threads,))
    raw = ctypes.create_string_buffer(1024)
    params_init(raw)
    p = Params.from_buffer(raw)  # keeps raw alive
    p.struct_size = ctypes.sizeof(Params)
    p.level = level
    p.threads = threads
    return p


def policy_bytes(policy, max_mae):
    """The policy text for ckpz_params (None: lossless), checked for type."""
    if max_mae is not None and (isinstance(max_mae, bool) or not isinstance(max_mae, (int, float)) or max_mae < 0):
        raise ValueError("ckpz: max_mae must be a number >= 0, not %r" % (max_mae,))
    if policy is None:
        if max_mae:
            raise ValueError("ckpz: max_mae applies to a lossy policy")
        return None
    if not isinstance(policy, str):
        raise TypeError("ckpz: policy must be a str of rules ('PATTERN MODE [OPTIONS]' per line)")
    return policy.encode("utf-8")


# Contexts keep the library's working memory between calls (ckpz.h): a few are kept
# here, so that one save or load after another reuses it instead of faulting in new
# buffers each time. A context is used by one call at a time.
_CTX_KEEP = 2
_ctx_free_list = []
_ctx_lock = threading.Lock()


def _take_ctx():
    with _ctx_lock:
        if _ctx_free_list:
            return _ctx_free_list.pop()
    return ctx_create()


def _give_ctx(ctx):
    with _ctx_lock:
        if len(_ctx_free_list) < _CTX_KEEP:
            _ctx_free_list.append(ctx)
            return
    ctx_free(ctx)


class Call:
    """One library call (or a few on one file): a fresh context, the callbacks handed to C,
    and the first exception a callback raised.

    Callbacks never let an exception escape into C (ctypes would print and drop it):
    they record it and return the failure value, and check() raises it once C has
    returned. The progress callback is how another thread stops a running call: after
    abort() it returns non-zero and the library ends with CKPZ_ERR_ABORTED (see
    _files.run, which runs long calls on a helper thread for this).
    """

    def __init__(self, params=None, path=None):
        self.ctx = _take_ctx()
        if not self.ctx:
            raise MemoryError("ckpz: cannot create a context")
        self.exc = None
        self.path = path
        self.params = params
        self.aborted = False
        self._keep = []
        if params is not None:
            params.progress = self.progress_fn()

    def abort(self):
        """Makes the running call stop at its next progress report (any thread may call it)."""
        self.aborted = True

    def close(self):
        if self.ctx:
            _give_ctx(self.ctx)
            self.ctx = None
        self._keep = []  # the callbacks' closures may hold the caller's buffers

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def guard(self, proto, fn, fail):
        """A C callback of type `proto` calling fn; an exception in fn makes it return fail."""

        def cb(*args):
            try:
                return fn(*args)
            except BaseException as e:  # KeyboardInterrupt included
                if self.exc is None:
                    self.exc = e
                return fail

        c = proto(cb)
        self._keep.append(c)
        return c

    def progress_fn(self):
        def progress(_opaque, _done, _total):
            return 1 if self.aborted else 0

        return self.guard(PROGRESS_FN, progress, 1)

    def message(self):
        m = ctx_message(self.ctx) if self.ctx else None
        return m.decode("utf-8", "replace") if m else ""

    def check(self, err):
        """Raises the callback's exception if one was recorded, else Error for err != 0."""
        if self.exc is not None:
            e, self.exc = self.exc, None
            raise e
        if err:
            raise Error(err, self.message(), self.path)


def address(buf):
    """(ctypes object, address) of a writable buffer-protocol object, without a copy.

    The ctypes object holds an export of buf: drop it before resizing or closing buf.
    """
    mv = memoryview(buf)
    n = mv.nbytes
    if n == 0:
        return None, None
    if mv.readonly:
        raise TypeError("ckpz: need a writable buffer")
    arr = (ctypes.c_char * n).from_buffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv)
    return arr, ctypes.addressof(arr)


try:
    _from_memory = ctypes.pythonapi.PyMemoryView_FromMemory
    _from_memory.restype = ctypes.py_object
    _from_memory.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
except AttributeError:  # not CPython
    _from_memory = None
_PyBUF_READ, _PyBUF_WRITE = 0x100, 0x200


def view_at(ptr, n, writable=False):
    """A memoryview ("B") of n bytes at C address ptr: no copy; valid while the memory is,
    so release it (or let it go) before the memory is freed."""
    if n == 0 or not ptr:
        return memoryview(bytearray(0) if writable else b"")
    if _from_memory is not None:
        return _from_memory(ptr, n, _PyBUF_WRITE if writable else _PyBUF_READ)
    return memoryview((ctypes.c_char * n).from_address(ptr)).cast("B")


def decode(s):
    return s.decode("utf-8", "replace") if s is not None else None
