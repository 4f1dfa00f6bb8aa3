"""ckpz.distributed.save: every rank writes its own shard, one rank writes the manifest.

The ranks first exchange what they hold (names, dtypes, shapes, checksums: _dist_state
plans who writes what), then each writes rank-RRRRR-of-NNNNN.ckpz with ckpz.save (the
zero-copy archive writer, with base= and policy= per shard) into a fresh temporary
directory beside the destination, then they exchange how that went. Only when every
shard is complete does rank 0 write the manifest and rename the directory into place
(exchanging it atomically with an older checkpoint of the same name), and only then
does save return, on every rank, or raise, on every rank, naming the ranks that failed.
The directory is published by the library (_files.Published: .NAME.ckpz-PID-HOST-RANDOM.tmp
until committed, removed on every error). A rank that dies mid-save leaves the previous
checkpoint untouched, and rank 0's death its temporary directory, which the next save to
the name removes; the others raise when the group's timeout expires or the peer's socket
closes. background=True copies the tensors (the snapshot: the only wait) and runs the
same steps on a thread, talking on a side group.
"""

import copy
import os
import pickle
import threading
import time

from . import _archive, _bases, _dist_comm, _dist_manifest, _dist_state, _files, _lib, _save, _torchzip
from ._dist_state import Shard
from ._lib import Error

__all__ = []  # private module

_inflight = []  # the background save in flight (one at a time)
_pool = {}  # (dtype, shape) -> [tensors]: snapshot memory of the previous background save
_pool_lock = threading.Lock()


def _commit(out, dst):
    """Puts the finished directory in place (the library exchanges it atomically with an
    older checkpoint of the same name where the system allows, and removes that); a dst
    that is not a ckpz.distributed checkpoint is refused. The directory is gone either way
    when this raises."""
    if os.path.lexists(dst) and (not os.path.isdir(dst) or (
            os.listdir(dst) and not os.path.exists(os.path.join(dst, _dist_manifest.MANIFEST)))):
        out.abort()
        raise FileExistsError("ckpz.distributed.save: %s exists and is not a ckpz.distributed checkpoint" % dst)
    out.commit(_lib.PUBLISH_REPLACE | _lib.PUBLISH_DURABLE)


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def base_spec(directory, rank, world, threads=0, chain=None):
    """What ckpz.save/load take as base= for shard `rank` of the checkpoint in directory:
    its path when it is stand-alone, else its original bytes restored down its chain
    (a shard records its base by file name, which is the same in every directory).
    chain: directory's _dist_manifest.manifest_chain, when the caller has it."""
    if chain is None:
        chain = _dist_manifest.manifest_chain(directory)
        if chain[0][1]["world_size"] != world:
            raise ValueError("ckpz.distributed: the base %s was saved by %d ranks, this checkpoint has %d: a delta "
                             "needs the same world size" % (directory, chain[0][1]["world_size"], world))
    for d, m in chain:
        if m["world_size"] != world:
            raise Error(_dist_state._lib.ERR_BASE, "saved by %d ranks, the delta checkpoint on it by %d: a delta "
                        "needs the same world size" % (m["world_size"], world),
                        os.path.join(d, _dist_manifest.MANIFEST))
    spec = os.path.join(chain[-1][0], _dist_state.shard_name(rank, world))
    for d, _ in reversed(chain[:-1]):
        restored = _bases.decompress_whole(os.path.join(d, _dist_state.shard_name(rank, world)), threads, spec,
                                           locate=False)
        try:
            spec = bytes(memoryview(restored.mem)[: restored.size])
        finally:
            restored.close()
    return spec


def _write_shard(payload, path, opts, base):
    """Writes one shard with ckpz.save; the names of its lossy storages, if a policy was given."""
    _save.save(payload, path, pickle, _torchzip.DEFAULT_PROTOCOL, True, opts["level"], opts["threads"], base,
               opts["policy"], opts["max_mae"], False, 1, opts.get("target_bw"))


def _lossy_names(path, payload):
    """Names of the tensors of payload that the shard at path restores approximately (the
    library names each tensor by its place in the pickle: "tensors.NAME")."""
    lossy = {e.name for e in _archive.entries(path) if e.lossy is not None}
    return {n for n in payload["tensors"] if "tensors." + n in lossy}


def run(torch, skeleton, tensors, dst, group, replicated, opts, ties=None):
    """The save itself, on the calling thread: tensors are CPU tensors or Shards of them (a
    snapshot, for background saves), ties {name: first name of the tensors sharing its
    storage} (_dist_state.host_tied). Rank 0's temporary directory goes on every way out
    that did not commit it (an interrupt too)."""
    held = []
    try:
        _run(torch, skeleton, tensors, dst, group, replicated, opts, ties, held)
    finally:
        for out in held:
            out.abort()  # nothing left to do once committed


def _run(torch, skeleton, tensors, dst, group, replicated, opts, ties, held):
    ties = ties or {}
    rank, world = _dist_comm.rank_world(group)
    dst = os.path.abspath(os.fspath(dst))
    parent = os.path.dirname(dst)
    out, tmp, facts, early = None, None, None, None
    try:  # an error here must still reach the others' first exchange, or they would wait
        if rank == 0:
            os.makedirs(parent, exist_ok=True)
            out = _files.Published(dst, _lib.PUBLISH_DIRECTORY)  # .NAME.ckpz-PID-HOST-RANDOM.tmp
            held.append(out)
            tmp = out.temp
        names = sorted(tensors)
        flat = [tensors[n].tensor if isinstance(tensors[n], Shard) else tensors[n] for n in names]
        sums = _dist_state.crcs(flat, opts["threads"]) if replicated is None else [None] * len(names)
        facts = [_dist_state.describe(torch, n, tensors[n], c, ties.get(n)) for n, c in zip(names, sums)]
    except Exception as e:
        early = e
    op = "ckpz.distributed.save"

    def gather(obj):  # a rank that died: rank 0 removes the temporary directory, every rank raises
        try:
            return _dist_comm.gather(obj, group, op, dst)
        except Error:
            if out is not None:
                out.abort()
            raise

    everyone = gather((tmp, facts, None if early is None else "%s: %s" % (type(early).__name__, early)))
    failed = [(r, msg) for r, (_, _, msg) in enumerate(everyone) if msg is not None]
    if failed:
        if out is not None:
            out.abort()
        if early is not None and len(failed) == 1:
            raise early
        raise Error(_dist_state._lib.ERR_WRITE, "the checkpoint was not saved: " +
                    "; ".join("rank %d: %s" % rf for rf in failed), dst)
    tmp = everyone[0][0]
    error = None
    result = {}
    try:
        writes, table = _dist_state.plan([f for _, f, _ in everyone], replicated, world)
        mine = sorted(writes[rank])
        payload = {"format": _dist_manifest.FORMAT, "rank": rank, "world_size": world, "skeleton": skeleton,
                   "tensors": {n: (tensors[n].tensor if isinstance(tensors[n], Shard) else tensors[n]) for n in mine}}
        base = None
        if opts["base"] is not None:
            base = base_spec(os.fspath(opts["base"]), rank, world, opts["threads"])
        path = os.path.join(tmp, _dist_state.shard_name(rank, world))
        _write_shard(payload, path, opts, base)
        _fsync(path)  # on disk before the manifest can name it
        if replicated is not None:
            result["crc32"] = dict(zip(mine, _dist_state.crcs([payload["tensors"][n] for n in mine], opts["threads"])))
        result["lossy"] = sorted(_lossy_names(path, payload)) if opts["policy"] is not None else []
        result["bytes"] = os.path.getsize(path)
    except Exception as e:  # reported to every rank below, raised here after
        error = e
        table = None
    done = gather((None if error is None else "%s: %s" % (type(error).__name__, error), result))
    failed = [(r, msg) for r, (msg, _) in enumerate(done) if msg is not None]
    committed = None
    if not failed and rank == 0:
        try:
            manifest = _manifest(table, done, world, opts, dst)
            _dist_manifest.write_manifest(tmp, manifest)
            _commit(out, dst)
        except Exception as e:
            out.abort()  # a refused commit leaves no directory behind
            committed = "%s: %s" % (type(e).__name__, e)
    elif rank == 0:
        out.abort()
    if not failed:
        if rank == 0 and committed is None:
            op, tmp = "ckpz.distributed.save (the checkpoint itself was written completely)", None
        committed = gather(committed)[0]
        if committed is not None:
            failed = [(0, "writing the manifest: " + committed)]
    if failed:
        if error is not None and len(failed) == 1:
            raise error
        raise Error(_dist_state._lib.ERR_WRITE, "the checkpoint was not saved (the previous one, if any, is "
                    "untouched): " + "; ".join("rank %d: %s" % rf for rf in failed), dst)


def _manifest(table, done, world, opts, dst):
    for name, e in table["replicated"].items():
        res = done[e["shard"]][1]
        if "crc32" in res:
            e["crc32"] = res["crc32"][name]
    for r, loc in enumerate(table["local"]):
        for name, e in loc.items():
            if "crc32" in done[r][1]:
                e["crc32"] = done[r][1]["crc32"][name]
    for name, s in table["sharded"].items():
        for p in s["pieces"]:
            if "crc32" in done[p["shard"]][1]:
                p["crc32"] = done[p["shard"]][1]["crc32"][name]
    for r, (_, res) in enumerate(done):  # no CRC-32 of the original for what restores approximately
        for name in res["lossy"]:
            for e in [table["replicated"].get(name), table["local"][r].get(name)]:
                if e is not None and e["shard"] == r:
                    e["crc32"], e["lossy"] = None, True
            for p in table["sharded"].get(name, {}).get("pieces", []):
                if p["shard"] == r:
                    p["crc32"], p["lossy"] = None, True
    base = None
    if opts["base"] is not None:
        base = os.path.relpath(os.path.abspath(os.fspath(opts["base"])), dst)
    shards = [{"file": _dist_state.shard_name(r, world), "bytes": res["bytes"]} for r, (_, res) in enumerate(done)]
    return dict(table, format=_dist_manifest.FORMAT, version=_dist_manifest.VERSION, world_size=world, shards=shards,
                base=base, lossy=opts["policy"] is not None)


def _snapshot(torch, x):
    t = x.tensor if isinstance(x, Shard) else x
    key = (t.dtype, tuple(t.shape))
    with _pool_lock:
        free = _pool.get(key)
        dst = free.pop() if free else None
    if dst is None:
        dst = torch.empty(t.shape, dtype=t.dtype)
    dst.copy_(t.detach())
    return Shard(dst, x.offset, x.rows) if isinstance(x, Shard) else dst


def _own_storages(snap):
    """The tensors of a snapshot that each cover a storage of their own, one per storage
    (a tie's views are not: the memory the next snapshot may reuse is its storage)."""
    seen, out = set(), []
    for x in snap.values():
        t = x.tensor if isinstance(x, Shard) else x
        st = _dist_state.storage_of(t)
        if st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            whole = t.storage_offset() == 0 and t.is_contiguous() and t.numel() * t.element_size() == st.nbytes()
            out.append(t if whole else t.as_strided((st.nbytes() // t.element_size(),), (1,), 0))
    return out


class DistSaveHandle:
    """A distributed save running in the background (ckpz.distributed.save(...,
    background=True)): wait(timeout=None) returns None or raises the save's error
    (the same on every rank); done(); attributes path, snapshot_bytes,
    snapshot_seconds (the copy), wait_seconds (waiting for the previous background
    save to finish) and stall_seconds (all the time save() blocked, both included)."""

    def __init__(self, path, snapshot_bytes, snapshot_seconds):
        self.path = path
        self.snapshot_bytes = snapshot_bytes
        self.snapshot_seconds = snapshot_seconds
        self.stall_seconds = None
        self.wait_seconds = None
        self._done = threading.Event()
        self._error = None
        self._thread = None

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError("ckpz.distributed: the background save of %r is still running" % (self.path,))
        if self._error is not None:
            raise self._error

    def __repr__(self):
        return "<ckpz.distributed.DistSaveHandle %r %s>" % (self.path, "done" if self.done() else "running")


def save(state, dst, group, replicated, opts, background, timeout):
    torch = _torchzip.torch_module()
    if replicated is not None and not isinstance(replicated, bool):
        replicated = frozenset(replicated)
    if opts["base"] is not None:
        b, d = os.path.abspath(os.fspath(opts["base"])), os.path.abspath(os.fspath(dst))
        if b == d:
            raise ValueError("ckpz.distributed.save: base= is the destination itself")
        if os.path.dirname(b) != os.path.dirname(d):
            raise ValueError("ckpz.distributed.save: base= must be a checkpoint in the same directory as the "
                             "destination (load finds it there by name): %s is not beside %s" % (b, d))
    t0 = time.perf_counter()
    skeleton, tensors = _dist_state.flatten(torch, state)
    if not background:
        while _inflight:  # a background save still writing goes first (it may name the same path)
            _inflight[0]._done.wait()
        tensors, ties = _dist_state.host_tied(torch, tensors)
        run(torch, skeleton, tensors, dst, group, replicated, opts, ties)
        return None
    skeleton = copy.deepcopy(skeleton)  # training may change lists and numbers in it
    tw = time.perf_counter()
    while _inflight:
        _inflight[0]._done.wait()
    waited = time.perf_counter() - tw
    side = _dist_comm.side_group(group, timeout)
    t1 = time.perf_counter()
    snap, ties = _dist_state.host_tied(torch, tensors, lambda x: _snapshot(torch, x))
    t2 = time.perf_counter()
    nbytes = sum(_dist_state.storage_of(t).nbytes() for t in _own_storages(snap))
    handle = DistSaveHandle(dst, nbytes, t2 - t1)
    handle.wait_seconds = waited

    def work():
        try:
            run(torch, skeleton, snap, dst, side, replicated, opts, ties)
        except BaseException as e:
            handle._error = e
        finally:
            with _pool_lock:
                _pool.clear()
                for t in _own_storages(snap):
                    _pool.setdefault((t.dtype, tuple(t.shape)), []).append(t)
            _inflight.remove(handle)
            handle._done.set()

    _inflight.append(handle)
    handle._thread = threading.Thread(target=work, name="ckpz-dist-save %s" % os.fspath(dst))
    handle._thread.start()
    handle.stall_seconds = time.perf_counter() - t0
    return handle
