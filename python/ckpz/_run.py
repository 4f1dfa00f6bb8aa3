"""Long library calls on a helper thread, so that Ctrl-C can stop them without corrupting
anything.

Python delivers signals to the main thread only, and between bytecodes: a
KeyboardInterrupt raised inside a ctypes callback, before its `try:`, is printed and
dropped, and the callback returns whatever ctypes makes of that. So the main thread's
long calls run on one helper thread (`run`; kept for the process's life), where no
signal can arrive in a callback; the main thread waits, and when Ctrl-C reaches it, it
asks the library to stop (the call's progress callback returns non-zero), waits for it
to return, and raises the KeyboardInterrupt itself. Whatever the call created (a
temporary file) is cleaned up on the helper thread, by the code that created it.
"""

import queue
import threading

__all__ = []  # private module


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
