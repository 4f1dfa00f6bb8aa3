"""ckpz.compress and ckpz.decompress: a file held in memory to its .ckpz and back, one
library call each (ckpz_compress_buffer, ckpz_decompress_buffer) on a context the package
keeps, without copies: the .ckpz comes back in the buffer the library wrote it into,
freed with the object; the original in memory from _memory.alloc (faulted in at once)."""

import ctypes
import weakref

from . import _lib, _memory

__all__ = []  # private module

_MAX_ORIGINAL = 1 << 40  # as whole-file restores from files (_bases)


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
        orig = ctypes.c_uint64()
        call.check(_lib.original_size(call.ctx, src, n, ctypes.byref(orig)))
        # bounded before allocating by it, as ckpz.load does (_bases): every chunk costs at
        # least MIN_CHUNK_COST bytes of the file and holds at most the header's chunk size
        chunk = int.from_bytes(bytes(memoryview(src)[12:16]), "little")
        if orig.value > min(_MAX_ORIGINAL, (n // _lib.MIN_CHUNK_COST + 1) * chunk):
            raise _lib.Error(_lib.ERR_LIMIT, "the data claims an original size of %d bytes, more than a %d-byte "
                             "ckpz file can hold" % (orig.value, n))
        dst = _memory.alloc(orig.value)
        darr, daddr = _lib.address(dst)  # (None, None) for an empty original
        try:
            err = _lib.decompress_buffer(call.ctx, ctypes.byref(params), src, n, daddr, orig.value)
        finally:
            del darr  # the mapping can be closed once no export of it is left
        try:
            call.check(err)
        except BaseException:
            _memory.close_mmap(dst)
            raise
    return dst
