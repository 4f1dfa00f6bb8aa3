"""Files: where the package's bytes come from and go.

Outputs named by path are published by the library (Published: a temporary file beside
the destination, written by the library itself through ckpz_fd_write, so that no byte
passes through Python) and renamed over it only after the call succeeded and the byte
count was checked; anything else (an error, KeyboardInterrupt, a signal) removes the
temporary file and leaves the destination as it was (Sink); what SIGKILL leaves, the
next save to the name removes (the library's rule, below). Inputs named by
path are read by the library through their descriptor (Source); binary file objects on
either side go through callbacks. A loader opens files by path with open_regular, which
refuses without blocking what is not a regular file (a FIFO blocks forever, a device
never ends). read_whole takes a whole .ckpz file into memory (mapped where it can).
"""

import contextlib
import errno
import io
import os
import select
import stat

from . import _lib
from ._lib import Error
from ._memory import alloc, map_file

__all__ = []  # private module


def is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


# ---- inputs named by path ------------------------------------------------------------------

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket"}


def _refuse_unless_regular(mode, path, fifo):
    if stat.S_ISREG(mode) or (fifo and stat.S_ISFIFO(mode)):
        return
    if stat.S_ISDIR(mode):  # what open() says, an OSError like any file that cannot be read
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fsdecode(os.fspath(path)))
    kind = _KINDS.get(stat.S_IFMT(mode), "of file type %o" % stat.S_IFMT(mode))
    raise Error(_lib.ERR_READ, "not a regular file (%s): ckpz reads it only from a regular file" % kind, path)


def open_regular(path, fifo=False):
    """A read-only descriptor of the regular file at path (the caller closes it).

    Anything else is refused without blocking: a FIFO, a device or a socket with a
    ckpz.Error naming path, a directory with IsADirectoryError (as open() says). The type
    is checked before opening (opening a device can act) and on the descriptor, opened
    O_NONBLOCK (a FIFO put there in between cannot block) and then made blocking again.

    fifo=True also accepts a FIFO, returned non-blocking: read it with
    _images.FifoReader (which waits for its writer without blocking an abort)."""
    _refuse_unless_regular(os.stat(path).st_mode, path, fifo)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        _refuse_unless_regular(mode, path, fifo)
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


# ---- publishing outputs -------------------------------------------------------------------
#
# Every output named by path (a save's file, a distributed save's directory, a DCP
# metadata file) is published by the library (ckpz_publish_*, lib/file/publish.c), as the
# CLI's and ckpz-mpi's are: written as .NAME.ckpz-PID-HOST-RANDOM.tmp beside NAME, held
# locked by its writer, renamed into place once complete, removed on any error. What a
# writer killed outright (SIGKILL, a crash) leaves, the next save to NAME removes, but
# only a dead writer's: this pattern for this NAME, this host, no live process PID here,
# and nobody holding its lock (include/ckpz.h, "publishing outputs", has the whole rule).


def _publish_error(ctx, path):
    e = _lib.ctypes.get_errno()
    msg = _lib.decode(_lib.ctx_message(ctx) or b"") or "cannot publish"
    return OSError(e, msg) if e else Error(_lib.ERR_WRITE, msg, path)


class Published:
    """An output being written under the library's temporary name beside path: `temp`
    (its path), `fd` (a file's descriptor, owned by this object; -1 for a directory).
    commit() puts it in place; abort() (or leaving the with block without a commit)
    removes it."""

    def __init__(self, path, flags=0):
        self.path = os.fsdecode(os.fspath(path))
        handle = _lib.ctypes.c_void_p()
        ctx = _lib._take_ctx()
        try:
            if _lib.publish_open(ctx, os.fsencode(self.path), flags, _lib.ctypes.byref(handle)):
                raise _publish_error(ctx, self.path)
        finally:
            _lib._give_ctx(ctx)
        self._handle = handle
        self.temp = os.fsdecode(_lib.publish_temp(handle))
        self.fd = _lib.publish_fd(handle)

    def commit(self, flags=_lib.PUBLISH_REPLACE):
        handle, self._handle = self._handle, None
        ctx = _lib._take_ctx()
        try:
            if _lib.publish_commit(ctx, handle, flags):
                raise _publish_error(ctx, self.path)
        finally:
            _lib._give_ctx(ctx)

    def abort(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _lib.publish_abort(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.abort()


def write_file(path, data):
    """Writes the bytes data to path (published, synced)."""
    with Published(path) as out:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(out.fd, view):]
        out.commit(_lib.PUBLISH_REPLACE | _lib.PUBLISH_DURABLE)


class Sink:
    """Where a library call writes: a path (a temporary file in its directory, written by
    the library through a file descriptor, renamed into place by commit()) or a binary
    file object (written from a callback). Use as a context manager: leaving it without
    commit(), normally or by an exception, removes the temporary file."""

    def __init__(self, dst):
        self.dst = dst
        self.out = None
        self.fd = None
        self.file = None
        self._py_bytes = 0
        if is_path(dst):
            name = os.fsdecode(os.fspath(dst))
            real = os.path.realpath(name)  # write through a symlink, as open() would
            if os.path.isdir(real):
                raise IsADirectoryError(21, "Is a directory", name)
            self.out = Published(real)
            self.fd = _lib.Fd(self.out.fd, 0, 0)
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
        if self.out is not None:
            self.fd = None
            self.out.commit()  # closes the descriptor

    def close(self):
        self.fd = None
        if self.out is not None:
            self.out.abort()

    @property
    def tmp(self):
        return self.out.temp if self.out is not None else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Source:
    """Where a library call reads from: a path (opened here, read by the library through
    its descriptor: any file that reads as a stream, a FIFO or a terminal too) or a
    binary file object (read from a callback). A FIFO is opened without blocking and its
    first writer awaited in poll(), so that call.abort() stops the wait."""

    def __init__(self, src, call=None):
        self.src = src
        self.file = None
        self.fd = None
        self._own = False
        if is_path(src):
            fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
            try:
                if call is not None and stat.S_ISFIFO(os.fstat(fd).st_mode):
                    poll = select.poll()
                    poll.register(fd, select.POLLIN)
                    while not poll.poll(100):  # nothing until a writer came (Linux)
                        if call.aborted:
                            raise Error(_lib.ERR_ABORTED, "aborted while waiting for the FIFO's writer", src)
                os.set_blocking(fd, True)
            except BaseException:
                os.close(fd)
                raise
            self.fd = _lib.Fd(fd, 0, 0)
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
    """A binary file to read src from (a path to a regular file, opened unbuffered by
    open_regular, or a file object)."""
    if not is_path(src) and hasattr(src, "read"):
        yield src
        return
    with open(open_regular(src), "rb", buffering=0) as f:
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
