"""Background saves: ckpz.save(..., background=True) returns once the state is copied, and
a thread compresses and writes it while training goes on.

The copy (the snapshot) is the only time the caller waits: every storage is copied into
host memory of its own, so training may change the tensors at once. At most
max_pending saves are in flight; a further one first waits for the oldest, which bounds
memory to max_pending snapshots. A finished save's snapshot memory goes to a pool the
next save takes same-sized pieces from, so a training loop holds one state's worth,
faulted in once. The save threads are not daemons: the interpreter waits for a save in
flight before it exits, and a crash mid-save leaves the previous file intact (the write
goes to a temporary file, _stream). What is pickled and how it is written is the
caller's (_save): this module only runs it.
"""

import collections
import os
import threading
import time
import warnings

from . import _files, _lib

__all__ = []  # private module

_pending = collections.deque()  # SaveHandles in flight, oldest first
_pending_lock = threading.Lock()
_pool = {}  # nbytes -> [untyped storages]: the snapshot memory of the last finished save, for reuse
_pool_lock = threading.Lock()


class SaveHandle:
    """A save running in the background (ckpz.save(..., background=True)).

    wait(timeout=None) waits for it and returns None, or raises what the save raised
    (ckpz.Error, OSError, ...); done() says whether it has finished; exception() is the
    error or None. Attributes: path, snapshot_bytes (host memory holding the copy of the
    tensors), snapshot_seconds (how long taking it stalled the caller), stall_seconds
    (the whole time save() blocked, waiting for an earlier save included)."""

    def __init__(self, path, snapshot_bytes, snapshot_seconds):
        self.path = path
        self.snapshot_bytes = snapshot_bytes
        self.snapshot_seconds = snapshot_seconds
        self.stall_seconds = None
        self._done = threading.Event()
        self._error = None
        self._retrieved = False
        self._thread = None

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError("ckpz: the background save of %r is still running" % (self.path,))
        self._retrieved = True
        if self._error is not None:
            raise self._error

    def exception(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError("ckpz: the background save of %r is still running" % (self.path,))
        self._retrieved = True
        return self._error

    def __repr__(self):
        state = "running" if not self.done() else ("failed: %s" % self._error if self._error else "done")
        return "<ckpz.SaveHandle %r %s, snapshot %d bytes>" % (self.path, state, self.snapshot_bytes)

    def __del__(self):
        if self._done.is_set() and self._error is not None and not self._retrieved:
            warnings.warn("ckpz: background save of %r failed and nobody asked: %s" % (self.path, self._error),
                          RuntimeWarning)


def _snapshotter(torch):
    """A function copying an untyped CPU storage into host memory of its own, reusing the
    previous save's snapshot memory when a piece of the same size is free."""

    def snapshot(u):
        n = u.nbytes()
        with _pool_lock:
            free = _pool.get(n)
            dst = free.pop() if free else None
        if dst is None:
            dst = torch.UntypedStorage(n)
        if n:
            view = torch.empty(0, dtype=torch.uint8)
            view.set_(dst)
            src = torch.empty(0, dtype=torch.uint8)
            src.set_(u)
            view.copy_(src)
        return dst

    return snapshot


def save(torch, f, params, max_pending, pickle_state, write):
    """Takes the snapshot (pickle_state(snapshot) -> _torchzip.Pickled) and starts a thread
    running write(pickled, call); returns its SaveHandle."""
    if not isinstance(max_pending, int) or max_pending < 1:
        raise ValueError("ckpz.save: max_pending must be an int >= 1, not %r" % (max_pending,))
    if not _files.is_path(f):
        raise TypeError("ckpz.save(background=True) writes to a path, not a file object")
    t0 = time.perf_counter()
    while True:  # at most max_pending saves in flight: wait for the oldest
        with _pending_lock:
            oldest = _pending[0] if len(_pending) >= max_pending else None
        if oldest is None:
            break
        oldest._done.wait()
    t1 = time.perf_counter()
    pickled = pickle_state(_snapshotter(torch))
    with _pool_lock:
        _pool.clear()  # what this save did not reuse is freed
    t2 = time.perf_counter()
    handle = SaveHandle(f, pickled.nbytes, t2 - t1)
    call = _lib.Call(params, f)

    def work():
        try:
            write(pickled, call)
        except BaseException as e:
            handle._error = e
        finally:
            call.close()
            with _pool_lock:
                for s in pickled.storages.values():
                    _pool.setdefault(s.nbytes(), []).append(s)
            with _pending_lock:
                try:
                    _pending.remove(handle)
                except ValueError:
                    pass
            handle._done.set()

    with _pending_lock:
        _pending.append(handle)
    # not a daemon: the interpreter waits for a save in flight before it exits
    handle._thread = threading.Thread(target=work, name="ckpz-save %s" % os.fspath(f))
    handle._thread.start()
    handle.stall_seconds = time.perf_counter() - t0
    return handle


def wait_saves():
    """Waits for every background save in flight; raises the first one's error."""
    with _pending_lock:
        handles = list(_pending)
    for h in handles:
        h.wait()
