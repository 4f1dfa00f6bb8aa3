"""Files and interruptions: where the package's bytes come from and go, and how a long
library call is run so that Ctrl-C can stop it without corrupting anything.

Outputs named by path are written to a temporary file beside the destination (by the
library itself, through ckpz_fd_write: no byte passes through Python) and renamed over
it only after the call succeeded and the byte count was checked; anything else (an
error, KeyboardInterrupt, a signal) removes the temporary file and leaves the
destination as it was.

Long calls run on a helper thread (`run`; one thread, kept). Python delivers signals to
the main thread only, and between bytecodes: a KeyboardInterrupt raised inside a ctypes callback, before
its `try:`, is printed and dropped, and the callback returns whatever ctypes makes of
that. On the helper thread no signal can arrive in a callback; the main thread waits,
and when Ctrl-C reaches it, it asks the library to stop (the progress callback returns
non-zero), waits for it to return, and raises the KeyboardInterrupt itself.
"""

import contextlib
import io
import mmap
import os
import queue
import secrets
import stat
import threading

from . import _lib
from ._lib import Error

__all__ = []  # private module


def is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


class _Worker:
    """The one thread that runs the main thread's library calls, kept for the process's
    life: one thread means one malloc arena, so the memory a load frees is what the next
    load's storages reuse, without page faults (and no thread is started per call)."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="ckpz-calls", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            self.jobs.get()()


_worker = None
_worker_lock = threading.Lock()


def _get_worker():
    global _worker
    with _worker_lock:
        if _worker is None or not _worker.thread.is_alive():
            _worker = _Worker()
        return _worker


def run(fn, call):
    """fn() (which makes library calls through `call`, a _lib.Call) on the helper thread;
    on an exception in the waiting thread (KeyboardInterrupt), call.abort(), wait for fn
    to return, and raise that exception. fn's own result or exception otherwise."""
    if threading.current_thread() is not threading.main_thread():
        return fn()  # signals are never delivered here: nothing to protect against
    box = {}
    finished = threading.Event()
    gate = threading.Lock()
    state = {"began": False, "abandoned": False}

    def job():
        with gate:
            if state["abandoned"]:  # the caller gave up before this began: do nothing
                return
            state["began"] = True
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e
        finally:
            finished.set()

    worker = _get_worker()
    interrupted = None
    try:
        worker.jobs.put(job)
    except BaseException as e:  # interrupted around put(): the job may or may not be queued
        call.aborted = True
        interrupted = e
        with gate:
            if not state["began"]:
                state["abandoned"] = True  # if it was queued, the worker skips it
        if state["abandoned"]:
            raise
    # Wait on an Event the job sets last: the caller must not free or close what the
    # library is still using, whatever interrupts the wait. A signal's exception is raised
    # at the next point where the interpreter checks for one: a call, or a loop's jump
    # back. So nothing here calls or loops outside a try (the loop's condition is the
    # call inside it), the handlers make no call (call.aborted is what call.abort() sets),
    # and the one jump back, taken only after a handler ran, is guarded once more for a
    # second signal on its heels. (The wait used to be `while not finished.is_set()`: a
    # signal landing on that call escaped, and the save went on, and left its temporary
    # file, after save() had raised.)
    while True:
        try:
            while True:
                try:
                    if finished.wait():
                        break
                except BaseException as e:  # KeyboardInterrupt, or what a signal handler raised
                    call.aborted = True
                    if interrupted is None:
                        interrupted = e
            break
        except BaseException as e:  # landed on the inner loop's jump back
            call.aborted = True
            if interrupted is None:
                interrupted = e
    if interrupted is not None:
        raise interrupted
    if "error" in box:
        raise box["error"]
    return box.get("value")


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


_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def alloc(n):
    """n bytes of writable memory for C to fill: an anonymous mapping, its pages faulted in
    at once by the kernel where it can (MAP_POPULATE; much cheaper than one fault per page
    from the decoding threads, or bytearray(n)'s zeroing pass)."""
    if n <= 0:
        return bytearray(0)
    if _POPULATE:
        try:
            return mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE)
        except OSError:
            pass
    return mmap.mmap(-1, n)


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
        # A whole regular file: map it (private, copy-on-write: C only reads it), so the
        # page cache is read in place instead of copied.
        try:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):
            m = None
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
