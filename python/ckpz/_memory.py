"""Memory the package hands to C, and bytes held in memory read back as files.

Restored originals and decoded storages live in anonymous mappings (alloc: from 1 MiB on
in 2 MiB pages as far as the kernel has them free, the kernel faulting them in at once,
much cheaper than one fault per page from the decoding threads or bytearray's zeroing
pass) and are unmapped as soon as
they are done with (close_mmap), so restoring a chain of delta files holds two restored
files at a time, not the chain. MemReader reads such memory as a seekable file without copying it first.
"""

import io
import mmap

from . import _lib

__all__ = []  # private module


class MemReader(io.RawIOBase):
    """A seekable read-only binary file over a buffer (no copy at construction; each
    readinto is one copy, straight into the caller's memory)."""

    def __init__(self, buf):
        super().__init__()
        self._mv = memoryview(buf).cast("B")
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = len(self._mv) + offset
        else:
            raise ValueError("invalid whence (%r)" % (whence,))
        if pos < 0:
            raise ValueError("negative seek position %d" % pos)
        self._pos = pos
        return pos

    def readinto(self, b):
        with memoryview(b) as out:
            out = out.cast("B")
            n = min(len(out), max(len(self._mv) - self._pos, 0))
            out[:n] = self._mv[self._pos : self._pos + n]
        self._pos += n
        return n

    def readall(self):
        data = bytes(self._mv[self._pos :])
        self._pos = len(self._mv)
        return data

    def close(self):
        if not self.closed:
            self._mv.release()
        super().close()


class Restored:
    """The original bytes of a .ckpz file, decoded into anonymous memory (closed after use)."""

    def __init__(self, mem, size):
        self.mem = mem
        self.size = size

    def reader(self):
        return MemReader(memoryview(self.mem)[: self.size])

    def close(self):
        mem, self.mem = self.mem, None
        close_mmap(mem)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def close_mmap(buf):
    """Unmaps buf if it is an mmap; a view still alive somewhere leaves it to the GC."""
    if isinstance(buf, mmap.mmap):
        try:
            buf.close()
        except BufferError:
            pass


def map_file(f):
    """A private, copy-on-write mapping of the whole open file f (C only reads it, so the
    page cache is read in place instead of copied), or None where it cannot be mapped
    (an empty file, a pipe)."""
    try:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None


_POPULATE = getattr(mmap, "MAP_POPULATE", 0)
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)
_MADV_POPULATE_WRITE = 23  # Linux 5.14 on; older kernels refuse it (EINVAL), harmlessly
_HUGE = 2 << 20
_HUGE_FROM = 1 << 20


def _huge(n, span):
    """n bytes, the first span of them in 2 MiB pages, faulted in at once, or None. The
    mapping is asked for in whole 2 MiB pages (Linux aligns an anonymous mapping of such a
    length to them; one of n bytes may not be), faulted in, then cut to n bytes (the
    pages past n go back)."""
    size = -(-n // _HUGE) * _HUGE
    try:
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError:
        return None
    for advice, length in ((_MADV_HUGEPAGE, span), (_MADV_POPULATE_WRITE, size)):
        try:
            m.madvise(advice, 0, length)
        except (OSError, ValueError):
            break
    if size != n:
        try:
            m.resize(n)
        except (OSError, ValueError, SystemError):  # a platform that cannot shrink it
            m.close()
            return None
    return m


def alloc(n):
    """n bytes of writable memory for C to fill: an anonymous mapping, faulted in at once.
    From 1 MiB on, the part the library's rule allows (_lib.huge_span: all of it where
    the kernel would not compact memory to make a 2 MiB page, else as many as are free)
    in 2 MiB pages (a fault per 4 KiB page costs about 4 us on a small VM, 512 times as
    many faults; a 1.9 MB output took 0.19 ms so against 0.48 ms for MAP_POPULATE's
    4 KiB pages), the rest by MADV_POPULATE_WRITE; with none allowed, or below 1 MiB, by
    MAP_POPULATE in 4 KiB pages. All much cheaper than one fault per page from the
    decoding threads, or bytearray(n)'s zeroing pass. Every request is only a hint:
    nothing fails without it."""
    if n <= 0:
        return bytearray(0)
    if n >= _HUGE_FROM and _MADV_HUGEPAGE is not None:
        span = _lib.huge_span(n)
        m = _huge(n, span) if span else None
        if m is not None:
            return m
    if _POPULATE:
        try:
            return mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE)
        except OSError:
            pass
    return mmap.mmap(-1, n)
