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

A call that writes a file (`write`) may be interrupted too late: the job renamed its
file into place and returned while the interrupt was landing, in the wait or in the
caller's last steps. Its KeyboardInterrupt then says that the file was written, so that
a KeyboardInterrupt out of a save never hides a replaced file (a plain one used to be
raised over the new file: 3 saves of 21 interrupted near their end).
"""

import os
import queue
import threading

from . import _lib

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
    finished = threading.Lock()  # held until the job releases it, last
    finished.acquire()
    gate = threading.Lock()
    state = {"began": False, "abandoned": False, "done": False}

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
            state["done"] = True
            finished.release()

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
    # Wait for the job to finish: the caller must not free or close what the library is
    # still using, whatever interrupts the wait. A signal's exception is raised at the
    # next point where the interpreter checks for one: a call, or a loop's jump back. So
    # nothing here calls or loops outside a try (the loop's condition is the call inside
    # it), the handlers make no call (call.aborted is what call.abort() sets), and the one
    # jump back, taken only after a handler ran, is guarded once more for a second signal
    # on its heels. (The wait used to be `while not finished.is_set()`: a signal landing
    # on that call escaped, and the save went on, and left its temporary file, after
    # save() had raised.) The wait is a plain lock's acquire, in C: threading.Event.wait
    # takes its Condition's lock in Python code, and a signal landing just after that
    # lock was taken left it held, so the next wait blocked for ever (seen once in four
    # runs of test_late_interrupt_never_hides_a_completed_save, on a loaded machine). An
    # exception raised just after acquire() succeeded loses that success: the job's
    # "done", set before it releases, says so before acquiring again.
    while True:
        try:
            while True:
                try:
                    if state["done"] or finished.acquire():
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
    return box["value"] if "value" in box else None  # no call here: nothing for a signal to land on


def write(job, params, path, what):
    """job(call) on the helper thread (run), in a fresh _lib.Call(params, path), for a job
    that writes a file and returns once it is in place; its result.

    An interrupt (the exception a signal handler raised) that comes once job has
    returned, in the wait or while the call is closed, is raised all the same, but says
    what was done: a KeyboardInterrupt whose message is "ckpz: interrupted after " + what
    (e.g. "the save completed: ckpt.pt.ckpz was written"); another exception gets that
    note added (Python >= 3.11). One that comes before raises as it is: the job stopped,
    and wrote nothing."""
    done = []
    try:
        with _lib.Call(params, path) as call:
            run(lambda: done.append(job(call)), call)
        return done[0]
    except BaseException as e:
        if not done:
            raise
        text = "ckpz: interrupted after " + what
        if isinstance(e, KeyboardInterrupt):
            late = KeyboardInterrupt(text)
            late.__suppress_context__ = True
            raise late
        if hasattr(e, "add_note"):
            e.add_note(text)
        raise


def wrote(dst, what="the save"):
    """The `what` of write() for a job writing dst (a path or a binary file object)."""
    if hasattr(dst, "write") and not isinstance(dst, (str, bytes, os.PathLike)):
        return "%s completed: the file object %r has every byte" % (what, getattr(dst, "name", dst))
    return "%s completed: %s was written" % (what, os.fsdecode(os.fspath(dst)))
