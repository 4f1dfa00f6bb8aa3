"""ckpz.compress and ckpz.decompress: a file held in memory to its .ckpz and back, one
library call each (ckpz_compress_buffer, ckpz_decompress_buffer) on a context the package
keeps, without copies: the .ckpz comes back in the buffer the library wrote it into,
freed with the object; the original in memory from _memory.alloc (faulted in at once)."""

import ctypes
import weakref

from . import _bases, _lib

__all__ = []  # private module


def _source(data):
    """(object to pass as a const void *, length) for a bytes-like data, without a copy
    where it is bytes or writable; a read-only buffer of another kind is copied."""
    if isinstance(data, bytes):
        return data, len(data)
    mv = memoryview(data)
    if mv.readonly:
        b = mv.tobytes()
        return b, len(b)
    arr, addr = _lib.address(mv)
    return arr, mv.nbytes


def _owned(addr, n):
    """n bytes the library allocated at addr, as a ctypes array that ckpz_free's them
    when it goes."""
    arr = (ctypes.c_char * n).from_address(addr)
    weakref.finalize(arr, _lib.free, ctypes.c_void_p(addr))
    return arr


def compress(data, level, threads, policy, max_mae):
    params = _lib.make_params(level, threads, policy, max_mae)
    src, n = _source(data)
    out, size = ctypes.c_void_p(), ctypes.c_size_t()
    with _lib.Call(params) as call:
        call.check(_lib.compress_buffer(call.ctx, ctypes.byref(params), src, n, ctypes.byref(out), ctypes.byref(size)))
    return _owned(out.value, size.value)


def decompress(data, threads):
    params = _lib.make_params(threads=threads)
    src, n = _source(data)
    with _lib.Call(params) as call:
        return _bases.restore(call, params, src, n, src)[0]
