"""Where ckpz.load reads a torch.save archive from, when it is not a .ckpz file's: a plain
file (read with pread, in pieces, so an abort is seen), memory a file object exposes
(an mmap, io.BytesIO: read in place), or a stream read into memory first (a pipe, a
socket, a FIFO named by path: FifoReader).

Each image offers read(offset, n), read_many(spans) and size, which the zip parser
(_zipindex.ZipIndex) reads the archive through, and a way to copy a storage's bytes
straight into its final memory (read_into, copy_out). A read past the end is a
ckpz.Error (ERR_TRUNCATED), never a short read.
"""

import bisect
import io
import os
import select

from . import _lib, _memory
from ._lib import Error

__all__ = []  # private module


class FileImage:
    """A plain torch.save file, read with pread (stopping when the call is aborted)."""

    def __init__(self, fd, size, path, call):
        self.fd = fd
        self.size = size
        self.path = path
        self.call = call

    def read(self, off, n):
        out = bytearray(n)
        self.read_into(off, memoryview(out))
        return bytes(out)

    def read_many(self, spans):
        return [self.read(o, n) for o, n in spans]

    def read_into(self, off, mv):
        got = 0
        n = len(mv)
        while got < n:
            if self.call.aborted:
                raise Error(_lib.ERR_ABORTED, "aborted", self.path)
            r = os.preadv(self.fd, [mv[got : got + (64 << 20)]], off + got)  # pieces: abort is seen
            if r <= 0:
                raise Error(_lib.ERR_TRUNCATED, "the file ended inside a tensor", self.path)
            got += r


def buffer_of(f):
    """A read-only byte view of f's content from its position when f exposes its memory
    (an mmap, or io.BytesIO), else None."""
    try:
        if isinstance(f, io.BytesIO):
            mv = f.getbuffer()
        else:
            mv = memoryview(f)
        mv = mv.cast("B")
    except (TypeError, ValueError, BufferError):
        return None
    try:
        pos = f.tell()
    except (AttributeError, OSError, ValueError):
        pos = 0
    return mv[pos:]


class Pieces:
    """What a stream held, read into memory in pieces of memory faulted in at once
    (_memory.alloc: one call, not a fault per page), read back at any offset. Pieces
    double from 1 MiB to 64 MiB, so a small stream takes little memory. Pieces(None,
    None) starts empty and is filled by write() (a writable file object: what a
    streaming decoder restores), then read back the same way."""

    PIECE = 64 << 20

    def __init__(self, f, call):
        self.path = None
        self.pieces, self.ends = [], []
        self.size = 0
        self._room = None  # write(): the piece being filled, and how full it is
        self._fill = 0
        if f is None:
            return
        total = 0
        while True:
            if call.aborted:
                raise Error(_lib.ERR_ABORTED, "aborted")
            buf = _memory.alloc(min(self.PIECE, max(1 << 20, total)))  # pieces grow with the stream
            mv = memoryview(buf)
            n = 0
            while n < len(mv):
                r = f.readinto(mv[n:]) if hasattr(f, "readinto") else None
                if r is None:  # no readinto: read() what comes
                    piece = f.read(len(mv) - n)
                    r = len(piece)
                    mv[n : n + r] = piece
                if not r:
                    break
                n += r
            if n:
                self.pieces.append(mv[:n])
                total += n
                self.ends.append(total)
            if n < len(mv):
                break
        self.size = total

    # ---- filled by writes ------------------------------------------------------------

    def writable(self):
        return True

    def write(self, b):
        mv = memoryview(b).cast("B")
        n, done = len(mv), 0
        while done < n:
            if self._room is None or self._fill == len(self._room):
                self._room = memoryview(_memory.alloc(min(self.PIECE, max(1 << 20, self.size))))
                self._fill = 0
                self.pieces.append(self._room[:0])
                self.ends.append(self.size)
            k = min(n - done, len(self._room) - self._fill)
            self._room[self._fill : self._fill + k] = mv[done : done + k]
            self._fill += k
            done += k
            self.size += k
            self.pieces[-1] = self._room[: self._fill]
            self.ends[-1] = self.size
        return n

    def flush(self):
        pass

    # ---- read back ---------------------------------------------------------------------

    def view(self, torch, off, n):
        """An untyped storage of the n bytes at off, viewing the piece that holds them (no
        copy; the piece stays alive as long as the storage), or None when they cross
        pieces."""
        k = bisect.bisect_right(self.ends, off)
        if k >= len(self.pieces) or n <= 0 or off + n > self.ends[k]:
            return None
        at = off - (self.ends[k] - len(self.pieces[k]))
        t = torch.frombuffer(self.pieces[k], dtype=torch.uint8, count=n, offset=at)
        return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()._storage

    def head(self, n):
        return bytes(self.pieces[0][:n]) if self.pieces else b""

    def copy_out(self, off, out):
        """Copies len(out) bytes at off into the memoryview out; False past the end."""
        n = len(out)
        if off > self.size or n > self.size - off:
            return False
        k = bisect.bisect_right(self.ends, off)
        done = 0
        while done < n:
            start = self.ends[k] - len(self.pieces[k])
            take = min(n - done, self.ends[k] - (off + done))
            at = off + done - start
            out[done : done + take] = self.pieces[k][at : at + take]
            done += take
            k += 1
        return True

    def read(self, off, n):
        out = bytearray(n)
        if not self.copy_out(off, memoryview(out)):
            raise Error(_lib.ERR_TRUNCATED, "the stream ended inside the archive")
        return bytes(out)

    def read_many(self, spans):
        return [self.read(o, n) for o, n in spans]


class FifoReader:
    """A FIFO opened by _files.open_regular(path, fifo=True), read by readinto (what Pieces
    reads) until its writer closes it. Each read waits in poll() a tenth of a second at a
    time, so that call.abort() (Ctrl-C, through _run) stops it with ckpz.Error
    ERR_ABORTED, also while no writer has opened the FIFO yet: Linux's poll reports
    nothing on a FIFO until a first writer came (a FIFO nobody writes to waits, as
    `cat FIFO` does). The descriptor stays the caller's."""

    def __init__(self, fd, call, path):
        self.fd, self.call, self.path = fd, call, path
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    def readinto(self, b):
        while True:
            if self.call.aborted:
                raise Error(_lib.ERR_ABORTED, "aborted while reading the FIFO", self.path)
            if self._poll.poll(100):
                try:
                    return os.readv(self.fd, [b])  # 0: the writer closed it
                except BlockingIOError:
                    pass


class MemImage:
    """An archive held in memory (a memoryview)."""

    def __init__(self, data):
        self.data = data
        self.size = len(data)
        self.path = None

    def head(self, n):
        return bytes(self.data[:n])

    def copy_out(self, off, out):
        n = len(out)
        if off > self.size or n > self.size - off:
            return False
        out[:] = self.data[off : off + n]
        return True

    def read(self, off, n):
        if off > self.size or n > self.size - off:
            raise Error(_lib.ERR_TRUNCATED, "the archive ends early")
        return bytes(self.data[off : off + n])

    def read_many(self, spans):
        return [self.read(o, n) for o, n in spans]
