"""ckpz.distributed: checkpoints of state spread over torch.distributed ranks, and moving
state between ranks, compressed and checksummed.

Sharded checkpoints (a directory, read by all ranks: a shared file system)::

    ckpz.distributed.save(state, "ckpt/step1000")        # on every rank, collectively
    state = ckpz.distributed.load("ckpt/step1000")       # on every rank, any world size

Each rank writes its own shard file (rank-00003-of-00008.ckpz, a ckpz-coded torch.save
archive) in parallel with the others. Tensors that are the same on every rank (DDP's
model and optimizer state) are written once, the work spread over the ranks by bytes;
a piece of a tensor split along dim 0 is given as ckpz.distributed.Shard(tensor,
offset, rows). The manifest (manifest.json: every tensor's shard, dtype, shape, CRC-32)
is written by rank 0 after every rank reported its shard complete, into a temporary
directory that is then renamed into place: a save that fails or dies half-way leaves
the previous checkpoint as it was. Loading reads, on each rank, only the tensors that
rank needs and checks them against the manifest; any failure is raised on every rank,
naming the rank, the shard file and the tensor.

Moving state (any process group, gloo or NCCL; tensors travel as CPU bytes):
``broadcast`` (the root compresses once, the others verify and decode), ``DeltaSync``
(the same, coded against the last state all ranks share), ``verify`` (which ranks'
replicas disagree, tensor by tensor), ``send``/``recv`` (point to point).

Every collective here runs on the caller's process group and is bounded by its timeout
(init_process_group(timeout=...)): a rank that died makes the others raise ckpz.Error
naming it and the operation, not hang (doc/distributed.md, "Timeouts and hangs").
"""

from . import _dist_load, _dist_manifest, _dist_save, _dist_sync, _lib, _tune
from ._dist_manifest import CheckpointMissing
from ._dist_save import DistSaveHandle
from ._dist_state import Shard, even_rows
from ._dist_sync import DeltaSync, Disagreement

__all__ = ["save", "load", "Shard", "DistSaveHandle", "even_rows", "manifest", "broadcast", "DeltaSync", "verify",
           "Disagreement", "send", "recv", "CheckpointMissing"]


def save(state_dict, path, group=None, *, replicated=None, level=_lib.LEVEL_DEFAULT, threads=0, base=None,
         policy=None, max_mae=None, background=False, timeout=None, target_bw=None, lossy=None):
    """Saves each rank's state_dict into the checkpoint directory path, collectively:
    every rank of group (None: the default group; without torch.distributed initialised,
    a world of one) calls it with its own state and the same path.

    state_dict: nested dicts, lists and tuples of tensors (any device: saved from CPU
    copies), Shards and anything torch.save can pickle. Tensors are named by their keys
    joined with dots ("model.fc.weight"); the names must be the same on every rank for
    the tensors that are replicated.

    replicated: None (default): a tensor present on every rank with the same dtype, shape
    and bytes (compared by CRC-32: every rank checksums its tensors first) is written
    once. True: every tensor present on all ranks is taken as replicated without
    comparing (DDP state; faster). False: none. Or a set of names. Everything else is
    the rank's own: each rank writes its own tensors and its pieces of Shards. Tensors
    sharing a storage (tied weights, views of one tensor) are written once, by one rank,
    and load sharing one storage, as torch.save and torch.load keep them.

    level, threads, policy, max_mae, lossy, target_bw: as ckpz.save, per shard (target_bw: the
    MB/s each rank's link to the file system gives it). base: the directory of an
    earlier checkpoint saved by as many ranks, in the same directory as path (else
    ValueError): each shard is a delta against the same rank's shard there (load then
    needs that directory, found by the name the manifest records, "../NAME"). A
    checkpoint directory that exists is replaced atomically.

    background=True: returns a DistSaveHandle once every tensor has been copied to host
    memory (the only wait); compression, writing and the manifest happen on a thread,
    which talks on a gloo group of its own over the same ranks (made by the first
    background save: a collective over the default group). One background save is in
    flight at a time: a further save, background or not, waits for it. timeout
    (seconds) is that group's.

    Raises on every rank if any rank failed (ckpz.Error naming the ranks and what
    happened; a rank that died or stopped answering is named as such), and ValueError
    when the ranks' states do not fit together (a tensor declared replicated differs in
    shape, Shards that do not cover their rows)."""
    if target_bw is not None:
        _tune.check(target_bw)
    # with its optimizers' beta2 and lr (_auto.py), for the names a shard gives: "tensors.NAME"
    policy = _lib.lossy_policy(lossy, policy, {"tensors": state_dict})
    opts = {"level": level, "threads": threads, "base": base, "policy": policy, "max_mae": max_mae,
            "target_bw": target_bw}
    return _dist_save.save(state_dict, path, group, replicated, opts, background, timeout)


def load(path, group=None, *, threads=0, into=None):
    """Loads the checkpoint directory path on every rank of group, collectively; returns
    this rank's state dict.

    Rank r of M gets the state saved by rank r (rank 0's when r is beyond the ranks that
    saved): its non-tensor values and own tensors as saved, replicated tensors wherever
    they were written, and for each Shard the rows even_rows(rows, r, M) as a Shard (so M
    may differ from the world size that saved). Only the shard files holding what this
    rank needs are opened, and only those tensors decoded; every tensor is checked
    against the manifest's CRC-32 (lossy tensors: the container's checksums only).

    A path that is not there raises CheckpointMissing ("no such checkpoint directory:
    PATH"; a ckpz.Error and a FileNotFoundError), and so does a directory without a
    manifest ("no manifest.json: ..."). A missing, truncated or corrupted shard raises
    on every rank: ckpz.Error (or FileNotFoundError where only this rank failed) naming
    the rank, the shard file and the tensor. The manifest is checked before it is used (size, nesting, fields, a
    CRC-32 for every tensor not coded lossily, a base only beside this checkpoint, base
    chains without cycles): ckpz.Error naming it. A FIFO or a device in place of a
    manifest or a shard is a ckpz.Error naming it, never a hang (doc/distributed.md).

    into: a state dict laid out like the saved one (e.g. {"model": model.state_dict(),
    "optim": optimizer.state_dict()}), to load in place as torch's DCP does: each tensor
    in it whose place, dtype and shape match a saved tensor is filled and returned in the
    state instead of a new one. A contiguous CPU tensor is decoded straight into its own
    memory (no second copy of the state, no fresh memory to fault in); others (a GPU
    tensor, a view) get copy_ of the checked host tensor; a Shard gets its rows when
    they are the rows this rank loads. Everything else in the state is new, as without
    into. If loading fails, tensors already filled keep what was decoded into them."""
    return _dist_load.load(path, group, threads, into)


def manifest(path):
    """The manifest of the checkpoint directory path, as a dict (see doc/distributed.md)."""
    return _dist_manifest.read_manifest(path)


# ---- moving state between ranks ------------------------------------------------------


def broadcast(state, src=0, group=None, *, level=_lib.LEVEL_DEFAULT, threads=0, target_bw=None):
    """Gives every rank of group the state of rank src, collectively (the others pass
    anything, e.g. None). The root compresses once, as ckpz.save does, and the compressed
    bytes go out in messages of at most 4 MiB while it compresses; each receiver verifies
    every chunk's checksum and the stream's CRC-32 and decodes. Returns the state (on
    src, state itself). A failure on any rank raises on every rank. target_bw (MB/s, the
    root's link): the root chooses levels and threads for it, as ckpz.save(target_bw=)."""
    if target_bw is not None:
        _tune.check(target_bw)
    return _dist_sync.broadcast(state, src, group, {"level": level, "threads": threads, "target_bw": target_bw})[0]


def verify(state, group=None, *, threads=0):
    """Compares every rank's copies of the tensors in state (a replica: the same names on
    every rank), collectively: a list of Disagreement(name, checksums, odd), the same on
    every rank, empty when all copies agree bit for bit. odd names the ranks outside the
    largest group of equal copies. One CRC-32 per tensor per rank is exchanged; nothing
    else moves."""
    return _dist_sync.verify(state, group, threads)


def send(state, dst, group=None, *, level=_lib.LEVEL_DEFAULT, threads=0, target_bw=None):
    """Sends state to rank dst of group (which calls recv), compressed while it is sent;
    returns the compressed bytes sent. An error here is sent too: recv raises it.
    target_bw (MB/s, the link to dst): levels and threads chosen for it, as
    ckpz.save(target_bw=) chooses them (the migration of a job to another node)."""
    if target_bw is not None:
        _tune.check(target_bw)
    return _dist_sync.send(state, dst, group, {"level": level, "threads": threads, "target_bw": target_bw})


def recv(src, group=None, *, threads=0):
    """Receives the state rank src sends with send(), verified and decoded."""
    return _dist_sync.recv(src, group, {"level": _lib.LEVEL_DEFAULT, "threads": threads})
