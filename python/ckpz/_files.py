"""Files: where the package's bytes come from and go.

Outputs named by path are written to a temporary file beside the destination (by the
library itself, through ckpz_fd_write: no byte passes through Python) and renamed over
it only after the call succeeded and the byte count was checked; anything else (an
error, KeyboardInterrupt, a signal) removes the temporary file and leaves the
destination as it was (Sink). Inputs named by path are read by the library through
their descriptor (Source); binary file objects on either side go through callbacks.
read_whole takes a whole .ckpz file into memory (a private mapping where it can).
"""

import contextlib
import io
import os
import secrets
import stat

from . import _lib
from ._lib import Error
from ._memory import alloc, map_file

__all__ = []  # private module


def is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


class Sink:
    """Where a library call writes: a path (a temporary file in its directory, written by
    the library through a file descriptor, renamed into place by commit()) or a binary
    file object (written from a callback). Use as a context manager: leaving it without
    commit(), normally or by an exception, removes the temporary file."""

    def __init__(self, dst):
        self.dst = dst
        self.tmp = None
        self.real = None
        self.fd = None
        self.file = None
        self._py_bytes = 0
        if is_path(dst):
            name = os.fsdecode(os.fspath(dst))
            self.real = os.path.realpath(name)  # write through a symlink, as open() would
            if os.path.isdir(self.real):
                raise IsADirectoryError(21, "Is a directory", name)
            d, base = os.path.split(self.real)
            for _ in range(100):
                tmp = os.path.join(d, ".%s.%s.tmp" % (base[:200], secrets.token_hex(6)))
                try:
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
                    break
                except FileExistsError:
                    continue
            else:
                raise FileExistsError("ckpz: cannot create a temporary file in %s" % d)
            self.tmp = tmp
            self.fd = _lib.Fd(fd, 0, 0)
        elif hasattr(dst, "write"):
            self.file = dst
        else:
            raise TypeError("ckpz: expected a path or a binary file object, not %s" % type(dst).__name__)

    def writer(self, call):
        """(write callback, opaque) for a library call made through `call`."""
        if self.fd is not None:
            return _lib.FD_WRITE, _lib.ctypes.cast(_lib.ctypes.pointer(self.fd), _lib.ctypes.c_void_p)
        out = self.file

        def wr(_o, buf, n):
            mv = _lib.view_at(buf, n)
            done = 0
            while done < n:
                if call.aborted:
                    raise KeyboardInterrupt
                r = out.write(mv[done:])
                if r is None:
                    raise BlockingIOError("ckpz: the output would block")
                done += r if isinstance(r, int) else n - done
            self._py_bytes += n
            return 0

        return call.guard(_lib.WRITE_FN, wr, -1), None

    @property
    def written(self):
        return self.fd.bytes if self.fd is not None else self._py_bytes

    def os_error(self):
        """The OSError behind a failed write through the descriptor, or None."""
        if self.fd is not None and self.fd.error:
            e = self.fd.error
            return OSError(e, os.strerror(e), os.fspath(self.dst))
        return None

    def commit(self, expected):
        """Checks that `expected` bytes went out, then renames the temporary file into place."""
        if self.written != expected:
            raise Error(
                _lib.ERR_WRITE, "%d bytes written where the library produced %d" % (self.written, expected), self.dst
            )
        if self.fd is None:
            return
        fd, self.fd = self.fd.fd, None
        os.close(fd)
        os.replace(self.tmp, self.real)
        self.tmp = None

    def close(self):
        if self.fd is not None:
            fd, self.fd = self.fd.fd, None
            os.close(fd)
        if self.tmp is not None:
            tmp, self.tmp = self.tmp, None
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Source:
    """Where a library call reads from: a path (opened here, read by the library through
    its descriptor) or a binary file object (read from a callback)."""

    def __init__(self, src):
        self.src = src
        self.file = None
        self.fd = None
        self._own = False
        if is_path(src):
            self.fd = _lib.Fd(os.open(src, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)), 0, 0)
            self._own = True
        elif hasattr(src, "read"):
            self.file = src
        else:
            raise TypeError("ckpz: expected a path or a binary file object, not %s" % type(src).__name__)

    def size(self):
        """Bytes left to read if it is a regular file at a known position, else None."""
        try:
            if self.fd is not None:
                st = os.fstat(self.fd.fd)
                return st.st_size - os.lseek(self.fd.fd, 0, os.SEEK_CUR) if stat.S_ISREG(st.st_mode) else None
            return regular_size(self.file)
        except OSError:
            return None

    def reader(self, call):
        if self.fd is not None:
            return _lib.FD_READ, _lib.ctypes.cast(_lib.ctypes.pointer(self.fd), _lib.ctypes.c_void_p)
        f = self.file

        def rd(_o, buf, n):
            if call.aborted:
                raise KeyboardInterrupt
            if n == 0:
                return 0
            r = f.readinto(_lib.view_at(buf, n, writable=True))
            if r is None:
                raise BlockingIOError("ckpz: the input would block")
            return r

        return call.guard(_lib.READ_FN, rd, -1), None

    def os_error(self):
        if self.fd is not None and self.fd.error:
            e = self.fd.error
            return OSError(e, os.strerror(e), os.fspath(self.src))
        return None

    def close(self):
        if self._own and self.fd is not None:
            fd, self.fd = self.fd.fd, None
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def open_input(src):
    """A binary file to read src from (a path, opened unbuffered, or a file object)."""
    if not is_path(src) and hasattr(src, "read"):
        yield src
        return
    with open(src, "rb", buffering=0) as f:
        yield f


def regular_size(f):
    """Bytes left in f if it is a regular file at a known position, else None."""
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return max(st.st_size - f.tell(), 0)
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None


def read_whole(f, path):
    """(buffer, size) holding the rest of f; None if f does not start with the ckpz magic
    (f is then left at its starting position when seekable)."""
    start = None
    try:
        start = f.tell()
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    head = f.read(len(_lib.MAGIC))
    if head != _lib.MAGIC:
        if start is not None:
            f.seek(start)
        return None
    size = regular_size(f)
    if size is not None and start == 0:
        m = map_file(f)  # a whole regular file: its page cache read in place
        if m is not None:
            if len(m) != size + len(head) or m[:8] != head:
                m.close()
                raise Error(_lib.ERR_READ, "the file changed while being read", path)
            return m, len(m)
    if size is not None:
        size += len(head)
        buf = alloc(size)
        mv = memoryview(buf)
        try:
            mv[: len(head)] = head
            got = len(head)
            while got < size:
                r = f.readinto(mv[got:])
                if not r:
                    break
                got += r
        finally:
            mv.release()
        if got != size or f.read(1):
            raise Error(_lib.ERR_READ, "the file changed size while being read", path)
        return buf, size
    data = bytearray(head)
    while True:
        piece = f.read(4 << 20)
        if not piece:
            break
        data += piece
    return data, len(data)
