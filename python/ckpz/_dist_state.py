"""The pieces of a distributed checkpoint that are pure data: naming the tensors of a
nested state dict, checksumming them, deciding which rank writes what, and the manifest.

A state dict is walked (dicts, lists, tuples) into a skeleton whose tensor leaves are
replaced by a marker naming the tensor ("model.fc.weight", "optim.state.0.exp_avg"):
the skeleton travels in the shard file's pickle, the tensors beside it, so loading can
choose which tensors to read. Every rank computes the same plan from the same gathered
facts (names, dtypes, shapes, bytes, checksums): replicated tensors are assigned
largest first to the rank with the fewest bytes so far, counting each rank's own
tensors, so no rank writes everything. Checksums are CRC-32 (zlib, which releases the
GIL, so tensors are checksummed on several threads); the container adds its own
CRC-32C per chunk. The manifest is _dist_manifest's.

A skeleton read back is data from a file: check_skeleton refuses one that is not a tree
of plain containers with markers naming tensors by str (a shared subtree would make
every walker's work grow exponentially).
"""

import concurrent.futures
import os
import zlib

from . import _lib

__all__ = []  # private module

MARK = "__ckpz_tensor__"  # a skeleton leaf {MARK: name} stands for the tensor named name


def shard_name(rank, world):
    return "rank-%05d-of-%05d.ckpz" % (rank, world)


class Shard:
    """Rows [offset, offset + tensor.shape[0]) of a tensor of `rows` rows split along dim 0
    over the ranks (ckpz.distributed.Shard)."""

    def __init__(self, tensor, offset, rows):
        if not isinstance(offset, int) or not isinstance(rows, int) or offset < 0 or rows < 0:
            raise ValueError("ckpz.distributed.Shard: offset and rows are ints >= 0, not %r, %r" % (offset, rows))
        if tensor.dim() < 1 or offset + tensor.shape[0] > rows:
            raise ValueError("ckpz.distributed.Shard: rows %d..%d of a %d-row tensor do not fit"
                             % (offset, offset + (tensor.shape[0] if tensor.dim() else 0), rows))
        self.tensor = tensor
        self.offset = offset
        self.rows = rows

    def __repr__(self):
        return "Shard(rows %d..%d of %d, %s %s)" % (self.offset, self.offset + self.tensor.shape[0], self.rows,
                                                  self.tensor.dtype, tuple(self.tensor.shape))


def flatten(torch, state):
    """(skeleton, {name: tensor or Shard}) for a nested state dict."""
    out = {}

    def walk(x, path):
        if isinstance(x, Shard) or isinstance(x, torch.Tensor):
            name = ".".join(path) or "."
            if name in out:
                raise ValueError("ckpz.distributed: two tensors are both named %r (keys with dots?)" % name)
            out[name] = x
            return {MARK: name}
        if isinstance(x, dict):
            if MARK in x:
                raise ValueError("ckpz.distributed: a state dict may not use the key %r" % MARK)
            y = type(x)() if type(x) is not dict else {}
            for k, v in x.items():
                y[k] = walk(v, path + [str(k)])
            return y
        if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
            return type(x)(walk(v, path + [str(i)]) for i, v in enumerate(x))
        return x

    return walk(state, []), out


def unflatten(skeleton, tensors):
    """The state dict again: every marker replaced by tensors[name]."""

    def walk(x):
        if isinstance(x, dict):
            if len(x) == 1 and MARK in x:
                return tensors[x[MARK]]
            y = type(x)() if type(x) is not dict else {}
            for k, v in x.items():
                y[k] = walk(v)
            return y
        if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
            return type(x)(walk(v) for v in x)
        return x

    return walk(skeleton)


def check_skeleton(skeleton, path):
    """Refuses (ckpz.Error naming path) a skeleton read from a shard that is not what
    flatten makes: a tree (no container reached twice: walking a shared one again and
    again takes exponential time) whose markers name tensors by str."""
    seen = set()
    todo = [skeleton]
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            if MARK in x:
                if len(x) != 1 or type(x[MARK]) is not str:
                    raise _lib.Error(_lib.ERR_CORRUPT, "the shard's skeleton has a malformed tensor marker", path)
                continue
            kids = x.values()
        elif type(x) in (list, tuple):
            kids = x
        else:
            continue
        if not kids:
            continue  # nothing below (and the empty tuple is one object everywhere)
        if id(x) in seen:
            raise _lib.Error(_lib.ERR_CORRUPT, "the shard's skeleton shares a container between two places: not "
                             "what ckpz.distributed.save writes", path)
        seen.add(id(x))
        todo.extend(kids)


def names_in(skeleton):
    found = []
    unflatten(skeleton, _Recorder(found))
    return found


class _Recorder(dict):
    def __init__(self, found):
        super().__init__()
        self.found = found

    def __getitem__(self, name):
        self.found.append(name)
        return None


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def storage_of(t):
    """t's storage, untyped where the release has that (data_ptr(), nbytes())."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def host(torch, t):
    """t detached, contiguous, on the CPU (a view of t when it already is)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if storage_of(t).nbytes() != t.numel() * t.element_size():
        t = t.clone()  # a view of a larger tensor: torch.save would write all of it
    return t


def host_tied(torch, tensors, copy=None):
    """({name: host tensor or Shard}, {name: the first name of its tie}) for the tensors
    of a flattened state. Plain tensors that share one storage (tied weights: the same
    Parameter under two names; views into one tensor) stay views of one host tensor
    holding the part of the storage they cover (the whole storage, zero-copy, when they
    cover it and it is on the CPU), so it is written once, as torch.save writes it; a
    tie is named by its first name. Every other tensor is host()'s, Shards included.
    copy(flat tensor) -> a host copy of it (background saves: the snapshot), else None
    (copied only where host() would copy)."""
    out, ties, groups = {}, {}, {}
    for name in sorted(tensors):
        x = tensors[name]
        if isinstance(x, torch.Tensor) and x.numel() and storage_of(x).data_ptr():
            groups.setdefault((x.device, storage_of(x).data_ptr()), []).append(name)
    for names in groups.values():
        ts = [tensors[n].detach() for n in names]
        if len(names) < 2 or len({t.dtype for t in ts}) > 1:
            continue  # alone, or one storage seen as several dtypes: each tensor its own copy
        lo = min(t.storage_offset() for t in ts)
        hi = max(t.storage_offset() + 1 + sum((k - 1) * st for k, st in zip(t.shape, t.stride())) for t in ts)
        flat = ts[0].as_strided((hi - lo,), (1,), lo)
        if copy is not None:
            base = copy(flat)
        elif flat.device.type != "cpu":
            base = flat.cpu()
        else:
            whole = lo == 0 and (hi - lo) * flat.element_size() == storage_of(flat).nbytes()
            base = flat if whole else flat.clone()
        for n, t in zip(names, ts):
            out[n] = base.as_strided(t.shape, t.stride(), t.storage_offset() - lo)
            ties[n] = names[0]
    for name, x in tensors.items():
        if name in out:
            continue
        if copy is not None:
            out[name] = copy(x)
        elif isinstance(x, Shard):
            out[name] = Shard(host(torch, x.tensor), x.offset, x.rows)
        else:
            out[name] = host(torch, x)
    return out, ties


def crc(t):
    """CRC-32 of a CPU tensor's bytes (in row-major order: a copy of a view that is not
    contiguous)."""
    n = t.numel() * t.element_size()
    if n == 0:
        return 0
    if not t.is_contiguous():
        t = t.contiguous()
    return zlib.crc32(_lib.view_at(t.data_ptr(), n))


def crcs(tensors, threads=0):
    """[crc(t)] for contiguous CPU tensors, on several threads (zlib drops the GIL)."""
    workers = threads or min(8, os.cpu_count() or 1)
    if workers <= 1 or len(tensors) < 2:
        return [crc(t) for t in tensors]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(crc, tensors))


def describe(torch, name, x, checksum, tie=None):
    """What every rank tells the others about one of its tensors; tie: the first name of
    the tensors sharing its storage (host_tied), whose bytes ("span") are written once."""
    t = x.tensor if isinstance(x, Shard) else x
    d = {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape), "bytes": t.numel() * t.element_size(),
         "crc32": checksum}
    if isinstance(x, Shard):
        d["offset"], d["rows"] = x.offset, x.rows
    if tie is not None:
        d["tie"], d["span"] = tie, storage_of(t).nbytes()
    return d


def _whole_ties(by_name, repl):
    """repl less the tensors of ties that are not the same on every rank or not all in
    repl: a tie is written by one rank, whole."""
    members = [{} for _ in by_name]
    for m, b in zip(members, by_name):
        for name, d in b.items():
            if d.get("tie") is not None:
                m.setdefault(d["tie"], set()).add(name)
    changed = True
    while changed:
        changed = False
        for name in sorted(repl):
            ties = {b[name].get("tie") for b in by_name}
            tie = next(iter(ties))
            if len(ties) > 1 or (tie is not None and (any(m.get(tie) != members[0].get(tie) for m in members)
                                                      or not members[0][tie] <= repl)):
                repl.discard(name)
                changed = True
    return repl


def plan(facts, replicated, world):
    """From every rank's list of describe() dicts: (writes, manifest entries).

    writes[r] is the set of names rank r writes; the entries are the manifest's
    "replicated", "local" and "sharded" parts. replicated: True (every plain tensor
    present on all ranks), False (none), None (those whose dtype, shape and checksum
    agree on every rank), or a set of names."""
    by_name = [{d["name"]: d for d in f} for f in facts]
    common = set(by_name[0])
    for b in by_name[1:]:
        common &= set(b)
    repl = set()
    for name in sorted(common):
        ds = [b[name] for b in by_name]
        if any("offset" in d for d in ds):
            continue
        same = all(d["dtype"] == ds[0]["dtype"] and d["shape"] == ds[0]["shape"] for d in ds)
        if replicated is True or (isinstance(replicated, (set, frozenset)) and name in replicated):
            if not same:
                raise ValueError("ckpz.distributed: %r is declared replicated but its dtype or shape differs "
                                 "between ranks" % name)
            repl.add(name)
        elif replicated is None and same and len({d["crc32"] for d in ds}) == 1:
            repl.add(name)
    repl = _whole_ties(by_name, repl)
    load = [0] * world
    writes = [set() for _ in range(world)]
    local = [{} for _ in range(world)]
    sharded = {}
    for r, b in enumerate(by_name):
        for name, d in b.items():
            if name in repl:
                continue
            writes[r].add(name)
            load[r] += d["bytes"] if d.get("tie") is None else d["span"] if d["tie"] == name else 0
            if "offset" in d:
                s = sharded.setdefault(name, {"dtype": d["dtype"], "shape": [d["rows"]] + d["shape"][1:], "pieces": []})
                if s["dtype"] != d["dtype"] or s["shape"] != [d["rows"]] + d["shape"][1:]:
                    raise ValueError("ckpz.distributed: the pieces of %r disagree on dtype or shape (rank %d)"
                                     % (name, r))
                s["pieces"].append({"shard": r, "rows": [d["offset"], d["offset"] + d["shape"][0]], "crc32": d["crc32"]})
            else:
                local[r][name] = {"shard": r, "dtype": d["dtype"], "shape": d["shape"], "crc32": d["crc32"]}
    for name, s in sharded.items():
        s["pieces"].sort(key=lambda p: p["rows"][0])
        at = 0
        for p in s["pieces"]:
            if p["rows"][0] != at:
                raise ValueError("ckpz.distributed: the pieces of %r do not cover rows %d.. exactly once"
                                 % (name, at))
            at = p["rows"][1]
        if at != s["shape"][0]:
            raise ValueError("ckpz.distributed: the pieces of %r cover %d of its %d rows" % (name, at, s["shape"][0]))
    table, units = {}, {}  # units: a tensor, or the tensors of a tie, with their bytes
    for name in repl:
        d = by_name[0][name]
        unit = units.setdefault(d.get("tie") or name, [d["bytes"] if d.get("tie") is None else d["span"], []])
        unit[1].append(name)
    for key in sorted(units, key=lambda k: (-units[k][0], k)):
        r = min(range(world), key=lambda k: (load[k], k))
        load[r] += units[key][0]
        for name in units[key][1]:
            writes[r].add(name)
            d = by_name[r][name]
            table[name] = {"shard": r, "dtype": d["dtype"], "shape": d["shape"], "crc32": d["crc32"]}
    return writes, {"replicated": table, "local": local, "sharded": sharded}


def even_rows(rows, rank, world):
    """The rows [start, stop) that rank gets of `rows` split as evenly as possible (the
    first rows % world ranks get one more), as torch.tensor_split splits."""
    q, extra = divmod(rows, world)
    start = rank * q + min(rank, extra)
    return start, start + q + (1 if rank < extra else 0)
