"""The few torch.distributed calls the distributed front end makes, in one place.

Everything goes through gather (an all-gather of picklable objects) on the caller's
process group: every rank learns what every other rank did, so a failure anywhere is
raised everywhere, and no rank waits on a message another rank will never send except
through a collective the group's timeout bounds (init_process_group(timeout=...); gloo
honours it). Without an initialised process group the calls act for a world of one, so
the same code saves and loads in a single process. Background saves talk on a second
group over the same ranks (side_group): collectives from two threads on one group could
interleave differently on different ranks.

A rank that dies: the collective fails on the others (gloo: the peer's socket closed, or
the group's timeout). gather then asks the process group's store which ranks are alive
(each rank counts there the exchanges it entered; a rank whose exchange failed says so
and waits up to GRACE seconds for the others to say it too) and raises a ckpz.Error
naming the operation and the ranks that did not answer, instead of gloo's RuntimeError.

Tensors handed to gloo are kept for HOLD seconds after their collective completed
(hold; emptied, so their memory goes at once). gloo's worker thread drops its reference
to a finished collective a moment after the caller's wait returns, holding the group's
work lock; when that is the last reference to a tensor Python made, freeing it needs the
interpreter lock. A group destroyed in that moment (destroy_process_group right after a
save or a verify, or the interpreter's exit) takes the work lock with the interpreter
lock held: a deadlock (issue 28: runs of a 2-rank save/load/verify hung at exit on torch
1.13). With ckpz holding the tensors, gloo's reference is never the last. Side groups
are destroyed at exit (atexit), before the interpreter tears modules down.
"""

import atexit
import collections
import datetime
import pickle
import threading
import time

from . import _lib
from ._lib import Error

__all__ = []  # private module

GRACE = 5.0  # seconds a rank whose exchange failed waits for the others to say they are alive
HOLD = 2.0  # seconds the tensors of a finished collective are kept (see above)

_side = {}  # (name of the group, timeout) -> the side group for background saves
_held = collections.deque()  # (time the collective finished, tensors, works)
_held_lock = threading.Lock()


def dist_module():
    import torch.distributed as dist

    return dist


def active(group):
    dist = dist_module()
    if dist.is_available() and dist.is_initialized():
        return True
    if group is not None:
        raise RuntimeError("ckpz.distributed: group= given but torch.distributed is not initialised")
    return False


def rank_world(group):
    if not active(group):
        return 0, 1
    dist = dist_module()
    return dist.get_rank(group), dist.get_world_size(group)


def global_ranks(group):
    dist = dist_module()
    if group is None or group is dist.group.WORLD:
        return list(range(dist.get_world_size()))
    ranks = dist.distributed_c10d._pg_group_ranks[group]
    return [g for g, _ in sorted(ranks.items(), key=lambda kv: kv[1])]


def global_rank(group, rank):
    return global_ranks(group)[rank]


def _group_name(group):
    c10d = dist_module().distributed_c10d
    pg = group if group is not None else c10d._get_default_group()
    names = getattr(getattr(c10d, "_world", None), "pg_names", None)
    if names is None:
        names = getattr(c10d, "_pg_names", {})
    return names.get(pg) or ",".join(map(str, global_ranks(group)))


def hold(tensors, works=()):
    """Keeps the tensors of a finished collective HOLD seconds (lets go of older ones),
    their memory released now: each is set to an empty storage, which gloo's reference,
    the same tensor, sees too (the collective is over: gloo reads and writes no more).
    works: the collective's work objects, kept as long, so that gloo's worker thread is
    never the last to hold one (on torch 2.13 freeing a work frees Python objects, which
    takes the interpreter lock: at exit that aborted the process; doc/gradients.md)."""
    for t in tensors:
        t.set_()
    now = time.monotonic()
    with _held_lock:
        _held.append((now, tensors, list(works)))
        while _held and now - _held[0][0] > HOLD:
            _held.popleft()


def _all_gather(obj, group):
    """[obj of rank 0, obj of rank 1, ...]: all_gather_object's two all_gathers (sizes,
    then the pickles padded to the longest), with the tensors kept (hold)."""
    import torch

    dist = dist_module()
    n = dist.get_world_size(group)
    dev = torch.device("cpu")
    if dist.get_backend(group) == "nccl":
        dev = torch.device("cuda", torch.cuda.current_device())
    data = pickle.dumps(obj, protocol=4)
    size = torch.tensor([len(data)], dtype=torch.int64, device=dev)
    sizes = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(n)]
    work = dist.all_gather(sizes, size, group=group, async_op=True)
    work.wait()
    lengths = [int(s.item()) for s in sizes]
    if dev.type == "cpu":
        hold([size] + sizes, [work])
    mine = torch.zeros(max(lengths), dtype=torch.uint8)
    if data:
        mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    mine = mine.to(dev)
    outs = [torch.empty(max(lengths), dtype=torch.uint8, device=dev) for _ in range(n)]
    work = dist.all_gather(outs, mine, group=group, async_op=True)
    work.wait()
    got = [o[:k].cpu().numpy().tobytes() for o, k in zip(outs, lengths)]
    if dev.type == "cpu":
        hold([mine] + outs, [work])
    return [pickle.loads(g) for g in got]


def _store():
    try:
        return dist_module().distributed_c10d._get_default_store()
    except Exception:  # a torch without it, or no default group: no diagnosis, only gloo's words
        return None


def gather(obj, group, op="ckpz.distributed", path=None):
    """[obj of rank 0, obj of rank 1, ...] on every rank. A collective that fails (a rank
    died or stopped answering) raises ckpz.Error naming op, path and the silent ranks."""
    if not active(group):
        return [obj]
    dist = dist_module()
    me = dist.get_rank()  # global: the store's keys are global ranks
    store, prefix, step = _store(), "ckpz/%s/" % _group_name(group), None
    if store is not None:
        try:
            step = store.add(prefix + "entered/%d" % me, 1)  # this rank's count of exchanges on the group
        except Exception:
            store = None
    try:
        return _all_gather(obj, group)
    except RuntimeError as e:
        if isinstance(e, Error):
            raise
        raise _dead_rank_error(e, group, store, prefix, step, op, path) from None


def peer_call(fn, op, peer):
    """fn(), a transfer to or from rank peer: a link that failed (gloo: the peer's socket
    closed, or the group's timeout) raised as ckpz.Error naming the peer."""
    try:
        return fn()
    except RuntimeError as e:
        if isinstance(e, Error):
            raise
        raise Error(_lib.ERR_READ, "%s: rank %d did not answer (it died, or stopped at another call): %s"
                    % (op, peer, _first_line(e))) from None


def _first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _dead_rank_error(e, group, store, prefix, step, op, path):
    """The ckpz.Error for collective number step of group that failed with e here."""
    ranks = global_ranks(group)
    me = dist_module().get_rank()
    cause = _first_line(e)
    code = _lib.ERR_WRITE if ".save" in op else _lib.ERR_READ

    def named(g):
        r = ranks.index(g)
        return "rank %d" % r if r == g else "rank %d (global rank %d)" % (r, g)

    silent, entered = None, {}
    if store is not None and step is not None:
        try:
            store.add(prefix + "failed/%d/%d" % (step, me), 1)
            end = time.monotonic() + GRACE
            while True:
                silent = [g for g in ranks if g != me and store.add(prefix + "failed/%d/%d" % (step, g), 0) == 0]
                if not silent or time.monotonic() > end:
                    break
                time.sleep(0.05)
            entered = {g: store.add(prefix + "entered/%d" % g, 0) >= step for g in silent}
        except Exception as se:
            silent = None
            cause += " (the store: %s)" % _first_line(se)
    if silent is None:
        text = "the exchange failed, and the store that says which ranks are alive did not answer either: rank 0, " \
               "which holds a TCP store, probably died; here the exchange failed with: %s" % cause
    elif not silent:
        text = "the exchange failed on every rank, and every rank is still alive: %s" % cause
    else:
        parts = []
        for inside, why in ((False, "never reached this exchange: died, or stuck before it"),
                            (True, "entered this exchange but did not answer within %g s of its failure: died in "
                                   "it, or still waiting in it" % GRACE)):
            who = [named(g) for g in silent if entered.get(g, False) == inside]
            if who:
                who = "ranks " + ", ".join(w[5:] for w in who) if len(who) > 1 else who[0]
                parts.append("%s did not answer (%s)" % (who, why))
        text = "%s; the exchange failed here with: %s" % ("; ".join(parts), cause)
    return Error(code, "%s: %s" % (op, text), path)


def side_group(group, timeout):
    """A gloo group over the ranks of group, made once (a collective over the default
    group: every process calls the first background save). A side group whose default
    group was destroyed is dropped (and destroyed) and made again."""
    if not active(group):
        return None
    dist = dist_module()
    c10d = dist.distributed_c10d
    live = getattr(getattr(c10d, "_world", None), "pg_map", None)
    if live is None:
        live = c10d._pg_map
    for k in [k for k, g in _side.items() if g not in live]:
        del _side[k]
    key = (_group_name(group), tuple(global_ranks(group)), timeout)
    if key not in _side:
        t = datetime.timedelta(seconds=timeout) if timeout is not None else None
        kw = {"timeout": t} if t is not None else {}
        _side[key] = dist.new_group(ranks=global_ranks(group), backend="gloo", **kw)
    return _side[key]


@atexit.register
def _close_side_groups():
    """Destroys the side groups before the interpreter's exit tears modules down in an
    order of its own (threads are joined by then: no background save is running)."""
    dist = dist_module() if _side else None
    while _side:
        _, g = _side.popitem()
        try:
            if dist.is_initialized():
                dist.destroy_process_group(g)
        except Exception:
            pass
        del g
    _keep_held_past_exit()


def _keep_held_past_exit():
    """Gives _held one reference nobody drops, so that the interpreter's teardown never
    frees the tensors of the last collectives. Freed by Python while a gloo work still
    holds them, a tensor's Python object would pass to that work, whose worker thread
    then needs the interpreter lock to free it: during Py_FinalizeEx that thread is ended
    from inside a C++ destructor, and the process aborts ("terminate called without an
    active exception"; caught in a core dump: ProcessGroupGloo::runLoop ->
    ~AsyncAllgatherWork -> TensorImpl::decref_pyobject -> take_gil ->
    PyThread_exit_thread, the main thread in Py_FinalizeEx's collection). The tensors
    are empty (hold): what stays is a few small objects, until the process ends."""
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_held))
