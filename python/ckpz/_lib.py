"""libckpz's functions as ctypes declares them, and the plumbing of one library call.

Every function the package calls is declared here with the argument and result types
of include/ckpz.h, over the header's structs and constants (_abi, whose names are
reachable here too: _lib.ERR_BASE, _lib.Params). Call holds what one call needs (a
context kept between calls, the callbacks handed to C, the first exception a callback
met) and turns error codes into Error; address and view_at share memory with C without
copies. Finding and checking the library is _loader's job. Not public API.
"""

import ctypes
import os
import threading

from . import _auto, _loader

__all__ = []  # private module

# The header's types and constants (_abi), as _lib.NAME for the package's modules.
from ._abi import *  # noqa: F401,F403

# ---- the library ---------------------------------------------------------------------

lib, LIBRARY_PATH = _loader.load()
PACKAGE_VERSION = _loader.PACKAGE_VERSION

# ---- functions -----------------------------------------------------------------------


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
dtype_from_name = _declare("ckpz_dtype_from_name", _int, ctypes.c_char_p)
dtype_size = _declare("ckpz_dtype_size", ctypes.c_uint, _int)
dtype_format_name = _declare("ckpz_dtype_format_name", ctypes.c_char_p, _int, _int)
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
huge_span = _declare("ckpz_huge_span", _sz, _sz)
archive_open = _declare("ckpz_archive_open", _int, _vp, _P(Params), PREAD_FN, _vp, _u64, _P(_vp))
archive_close = _declare("ckpz_archive_close", None, _vp)
archive_get_info = _declare("ckpz_archive_get_info", _int, _vp, _P(ArchiveInfo))
archive_entry = _declare("ckpz_archive_entry", _int, _vp, _u64, _P(EntryStruct))
archive_get_base = _declare("ckpz_archive_get_base", _int, _vp, _P(BaseInfo))
base_info_read = _declare("ckpz_base_info_read", _int, _vp, _vp, _sz, _P(BaseInfo))
chain_open = _declare("ckpz_chain_open", _int, _vp, ctypes.c_char_p, _P(_vp))
chain_free = _declare("ckpz_chain_free", None, _vp)
chain_length = _declare("ckpz_chain_length", _sz, _vp)
chain_path = _declare("ckpz_chain_path", ctypes.c_char_p, _vp, _sz)
chain_link = _declare("ckpz_chain_link", _int, _vp, _sz, _P(BaseInfo))
chain_message = _declare("ckpz_chain_message", _sz, _vp, ctypes.c_char_p, _sz)
base_locate = _declare("ckpz_base_locate", _vp, ctypes.c_char_p, ctypes.c_char_p)
archive_read = _declare("ckpz_archive_read", _int, _vp, _vp, _P(Span), _sz)
zip_source_create = _declare("ckpz_zip_source_create", _int, _vp, _P(ZipMember), _sz, _P(_vp))
zip_options_init = _declare("ckpz_zip_options_init", None, _P(ZipOptions))
zip_source_create_opts = _declare("ckpz_zip_source_create_opts", _int, _vp, _P(ZipMember), _sz, _P(ZipOptions), _P(_vp))
zip_source_size = _declare("ckpz_zip_source_size", _u64, _vp)
zip_source_free = _declare("ckpz_zip_source_free", None, _vp)
source_init = _declare("ckpz_source_init", None, _P(Source))
safetensors_header = _declare("ckpz_safetensors_header", _int, _vp, _P(StTensor), _sz, _P(StMeta), _sz, _vp, _sz,
                              _P(_sz), _P(_u64))
publish_open = _declare("ckpz_publish_open", _int, _vp, ctypes.c_char_p, ctypes.c_uint, _P(_vp))
publish_fd = _declare("ckpz_publish_fd", _int, _vp)
publish_temp = _declare("ckpz_publish_temp", ctypes.c_char_p, _vp)
publish_commit = _declare("ckpz_publish_commit", _int, _vp, _vp, ctypes.c_uint)
publish_abort = _declare("ckpz_publish_abort", None, _vp)
publish_is_temp = _declare("ckpz_publish_is_temp", _int, ctypes.c_char_p)
publish_sweep = _declare("ckpz_publish_sweep", _int, ctypes.c_char_p)
grad_params_init = _declare("ckpz_grad_params_init", None, _P(GradParams))
grad_packet_size = _declare("ckpz_grad_packet_size", _int, _vp, _P(GradParams), _u64, _P(_sz))
grad_pack = _declare("ckpz_grad_pack", _int, _vp, _P(GradParams), _int, _vp, _u64, _vp, _vp, _sz, _P(_sz))
grad_info_read = _declare("ckpz_grad_info_read", _int, _vp, _vp, _sz, _P(GradInfo))
grad_unpack = _declare("ckpz_grad_unpack", _int, _vp, _vp, _sz, _int, _vp, _u64)
grad_unpack_add = _declare("ckpz_grad_unpack_add", _int, _vp, _vp, _sz, _vp, _u64)
tune = _declare("ckpz_tune", _int, _vp, _P(Params), _P(Source), ctypes.c_double, _int, _P(TuneResult), WRITE_FN, _vp)

# The library's own callbacks, handed back to it as function pointers: I/O through them
# never enters Python (no interpreter lock, no lost signals).
FD_READ = ctypes.cast(lib.ckpz_fd_read, READ_FN)
FD_WRITE = ctypes.cast(lib.ckpz_fd_write, WRITE_FN)
FD_PREAD = ctypes.cast(lib.ckpz_fd_pread, PREAD_FN)
ZIP_SOURCE_READ = ctypes.cast(lib.ckpz_zip_source_read, READ_FN)


_loader.check_layout(params_init, ctypes.sizeof(Params))
_loader.check_version(version_string(), LIBRARY_PATH)

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

    def __reduce__(self):
        # pickle (DCP hands a rank's error to the others so) gives back this error as it is:
        # its args and attributes, not __init__ called again with the formatted text
        return _unpickled_error, (type(self), self.args, self.__dict__)


def _unpickled_error(cls, args, state):
    e = cls.__new__(cls, *args)
    e.__dict__.update(state)
    return e


_AUTO_KNOBS = ("tight", "default", "aggressive")


def lossy_policy(lossy, policy, obj=None):
    """The policy text for lossy= ("auto" or "auto:K", as ``ckpz --lossy=auto:K``) and
    policy= together: the policy's rules, then (obj: the object ckpz.save writes) a rule
    per Adam optimizer in obj stating its beta2 (_auto.py), then the catch-all rule
    "* auto K", with " lr L" where obj's Adam groups all state one learning rate L (None
    and None: lossless). K is tight, default, aggressive or a number in 1/64..16 (the
    library's range, lib/transforms/auto.h), checked here so that a bad one fails
    before any file is touched."""
    if lossy is None:
        return policy
    if not isinstance(lossy, str) or not (lossy == "auto" or lossy.startswith("auto:")):
        raise ValueError("ckpz: lossy must be 'auto' or 'auto:K' (K = tight, default, aggressive or a number), "
                         "not %r" % (lossy,))
    knob = lossy[5:]
    if lossy != "auto" and knob not in _AUTO_KNOBS:
        try:
            k = float(knob)
        except ValueError:
            k = None
        if k is None or not 1.0 / 64 <= k <= 16:
            raise ValueError("ckpz: lossy='auto:K' takes tight, default, aggressive or a number in 0.015625..16, "
                             "not %r" % (knob,))
    if policy is not None and not isinstance(policy, str):
        raise TypeError("ckpz: policy must be a str of rules ('PATTERN MODE [OPTIONS]' per line)")
    rules = _auto.beta2_rules(obj, knob) if obj is not None else ""
    lr = _auto.lr_option(obj) if obj is not None else ""
    return (policy + "\n" if policy else "") + rules + "* auto" + (" " + knob if knob else "") + lr + "\n"


def make_params(level=LEVEL_DEFAULT, threads=0, policy=None, max_mae=None):
    """A ckpz_params filled by ckpz_params_init, with our struct_size and the options,
    each checked for type and range; policy (a str of rules, None: lossless) and max_mae
    as compress_file takes them."""
    if isinstance(level, bool) or not isinstance(level, int) or not (
            LEVEL_MIN <= level <= LEVEL_MAX or level == LEVEL_STORE):
        raise ValueError("ckpz: level must be an int in %d..%d, or %d (store), not %r"
                         % (LEVEL_MIN, LEVEL_MAX, LEVEL_STORE, level))
    if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads <= 4096:
        raise ValueError("ckpz: threads must be an int >= 0 (0 = all cores), not %r" % (threads,))
    if max_mae is not None and (isinstance(max_mae, bool) or not isinstance(max_mae, (int, float)) or max_mae < 0):
        raise ValueError("ckpz: max_mae must be a number >= 0, not %r" % (max_mae,))
    if policy is None and max_mae:
        raise ValueError("ckpz: max_mae applies to a lossy policy")
    if policy is not None and not isinstance(policy, str):
        raise TypeError("ckpz: policy must be a str of rules ('PATTERN MODE [OPTIONS]' per line)")
    raw = ctypes.create_string_buffer(1024)
    params_init(raw)
    p = Params.from_buffer(raw)  # keeps raw alive
    p.struct_size = ctypes.sizeof(Params)
    p.level = level
    p.threads = threads
    if policy is not None:
        p.policy = policy.encode("utf-8")
        p.max_mae = float(max_mae or 0)
    return p


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
    _run.run, which runs long calls on a helper thread for this).
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


def st_header(call, tensors, meta=None):
    """The header (bytes) of a safetensors file of tensors, [(name, dtype, shape)] in file
    order, their data back to back (name: UTF-8 bytes; dtype: a ckpz_dtype, or (safetensors
    name, element size) for one ckpz has no type for), with meta first (None: no
    "__metadata__"; else [(key, value)] UTF-8 bytes, in order), from the library's one
    writer (ckpz_safetensors_header); a refusal raises its Error."""
    flat = [int(d) for _, _, shape in tensors for d in shape]
    dims = (ctypes.c_uint64 * max(len(flat), 1))(*flat)
    at, rows = ctypes.addressof(dims), []
    for name, dt, shape in tensors:
        by_name = dt if isinstance(dt, tuple) else (None, 0)
        rows.append((name, DTYPE_NONE if by_name[0] else dt, len(shape), at) + by_name)
        at += 8 * len(shape)
    entries = (StTensor * max(len(rows), 1))(*rows)
    pairs = (StMeta * max(len(meta or ()), 1))(*(meta or ()))
    args = [call.ctx, entries, len(rows), pairs if meta is not None else None, len(meta or ())]
    size = ctypes.c_size_t()
    call.check(safetensors_header(*args, None, 0, ctypes.byref(size), None))
    head = ctypes.create_string_buffer(size.value)
    call.check(safetensors_header(*args, head, size.value, ctypes.byref(size), None))
    return head.raw
