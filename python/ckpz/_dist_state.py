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
CRC-32C per chunk. The manifest is JSON, written to a temporary name and renamed.

A manifest read is data from a file, checked as the C decoder checks a header before
anything in it is used: its size and nesting are bounded before it is parsed, every
field load relies on is checked (_malformed), every tensor has a CRC-32 unless a lossy
policy coded it, and a base is only ever a checkpoint beside this one, followed down a
chain of bounded length that may not come back to itself (manifest_chain).
"""

import concurrent.futures
import json
import os
import re
import zlib

from . import _files, _lib

__all__ = []  # private module

MANIFEST = "manifest.json"
FORMAT = "ckpz.distributed"
VERSION = 1
MARK = "__ckpz_tensor__"  # a skeleton leaf {MARK: name} stands for the tensor named name
# A manifest over this is refused unread. A piece of a dim-0 split tensor takes about 90
# bytes, so it holds 2.8 million: 2,700 split tensors over 1,024 ranks (parsed: ~2 GB).
MANIFEST_MAX = 256 << 20
NESTING_MAX = 32  # a manifest's JSON nests 6 deep (sharded / name / pieces / piece / rows)
BASE_CHAIN_MAX = 1000  # delta checkpoints down to a stand-alone one, as CKPZ_CHAIN_MAX


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


def host(torch, t):
    """t detached, contiguous, on the CPU (a view of t when it already is)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.storage().nbytes() != t.numel() * t.element_size():
        t = t.clone()  # a view of a larger tensor: torch.save would write all of it
    return t


def crc(t):
    """CRC-32 of a contiguous CPU tensor's bytes."""
    n = t.numel() * t.element_size()
    if n == 0:
        return 0
    return zlib.crc32(_lib.view_at(t.data_ptr(), n))


def crcs(tensors, threads=0):
    """[crc(t)] for contiguous CPU tensors, on several threads (zlib drops the GIL)."""
    workers = threads or min(8, os.cpu_count() or 1)
    if workers <= 1 or len(tensors) < 2:
        return [crc(t) for t in tensors]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(crc, tensors))


def describe(torch, name, x, checksum):
    """What every rank tells the others about one of its tensors."""
    t = x.tensor if isinstance(x, Shard) else x
    d = {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape), "bytes": t.numel() * t.element_size(),
         "crc32": checksum}
    if isinstance(x, Shard):
        d["offset"], d["rows"] = x.offset, x.rows
    return d


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
    load = [0] * world
    writes = [set() for _ in range(world)]
    local = [{} for _ in range(world)]
    sharded = {}
    for r, b in enumerate(by_name):
        for name, d in b.items():
            if name in repl:
                continue
            writes[r].add(name)
            load[r] += d["bytes"]
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
    table = {}
    for name in sorted(repl, key=lambda n: (-by_name[0][n]["bytes"], n)):
        r = min(range(world), key=lambda k: (load[k], k))
        load[r] += by_name[0][name]["bytes"]
        writes[r].add(name)
        d = by_name[r][name]
        table[name] = {"shard": r, "dtype": d["dtype"], "shape": d["shape"], "crc32": d["crc32"]}
    return writes, {"replicated": table, "local": local, "sharded": sharded}


def write_manifest(directory, manifest):
    """Writes directory/manifest.json through a temporary name, synced."""
    path = os.path.join(directory, MANIFEST)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


_NOT_BRACKET = bytes(range(256)).translate(None, b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


def _nests_deeper(data, limit):
    """Whether the JSON bytes nest deeper than limit (brackets in strings counted too),
    found without the parser, which recurses per level: each pass removes the innermost
    pairs. (Strings can also hide depth; the parser's RecursionError is the backstop.)"""
    marks = data.translate(None, _NOT_BRACKET)
    for _ in range(limit + 1):
        inner = _INNERMOST.sub(b"", marks)
        if len(inner) == len(marks):
            return False
        marks = inner
    return True


def read_manifest(directory):
    """The manifest of the checkpoint directory, checked; ckpz.Error naming it for anything
    wrong with it (FileNotFoundError when there is none: not a complete checkpoint)."""
    path = os.path.join(directory, MANIFEST)
    try:
        fd = _files.open_regular(path)
    except FileNotFoundError:
        raise FileNotFoundError("ckpz.distributed: %s has no %s: not a complete checkpoint (a save that did not "
                                "finish leaves none)" % (directory, MANIFEST)) from None
    with open(fd, "rb") as f:
        size = os.fstat(fd).st_size
        data = f.read(MANIFEST_MAX + 1) if size <= MANIFEST_MAX else b""
    if size > MANIFEST_MAX or len(data) > MANIFEST_MAX:
        raise _lib.Error(_lib.ERR_LIMIT, "the manifest is %d bytes, more than the %d bytes a manifest may take"
                         % (max(size, len(data)), MANIFEST_MAX), path)
    try:
        if _nests_deeper(data, NESTING_MAX):
            raise _lib.Error(_lib.ERR_CORRUPT, "the manifest's JSON is nested deeper than %d" % NESTING_MAX, path)
        m = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError, JSONDecodeError: ValueErrors
        raise _lib.Error(_lib.ERR_CORRUPT, "the manifest is not valid JSON: %s" % e, path) from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or type(m.get("world_size")) is not int:
        raise _lib.Error(_lib.ERR_INPUT, "not a ckpz.distributed manifest", path)
    if m.get("version") != VERSION:
        raise _lib.Error(_lib.ERR_VERSION, "manifest version %r; this ckpz reads version %d"
                         % (m.get("version"), VERSION), path)
    why = _malformed(m)
    if why:
        raise _lib.Error(_lib.ERR_CORRUPT, "malformed manifest: " + why, path)
    return m


def _uint(x, bound=None):
    return type(x) is int and x >= 0 and (bound is None or x < bound)


def _malformed(m):
    """Why the manifest m cannot be used, or None: every field load relies on is checked
    before it is used (shard numbers in range, shapes of ints, CRCs of 32 bits), and every
    entry has a CRC-32 unless a lossy policy coded its tensor: the entry says "lossy":
    true (or, as manifests written before that mark was, the checkpoint says "lossy":
    true; load then checks that the shard holds the tensor lossily)."""
    n = m["world_size"]
    lossy = m.get("lossy", False)

    def entry_bad(name, e, shape=True):
        if not isinstance(e, dict) or not _uint(e.get("shard"), n):
            return "bad entry of %r" % name
        if not isinstance(e.get("lossy", False), bool):
            return "the lossy mark of %r is not true or false" % name
        if e.get("crc32") is None:
            if not (e.get("lossy") or lossy):
                return "tensor %r has no CRC-32 (only a tensor coded lossily may go without)" % name
        elif not _uint(e["crc32"], 1 << 32):
            return "bad CRC-32 of %r" % name
        if shape and not (isinstance(e.get("shape"), list) and all(_uint(x) for x in e["shape"])):
            return "bad shape of %r" % name
        return None

    def table_bad(t):
        return next((w for w in (entry_bad(k, e) for k, e in t.items()) if w), None) if isinstance(t, dict) \
            else "not a table"

    if n < 1 or not isinstance(m.get("shards"), list) or len(m["shards"]) != n:
        return "world_size and shards disagree"
    if not isinstance(m.get("base"), (str, type(None))):
        return "base is not a path"
    if not isinstance(lossy, bool):
        return "lossy is not true or false"
    why = table_bad(m.get("replicated"))
    if why:
        return "bad replicated table: " + why
    loc = m.get("local")
    if not isinstance(loc, list) or len(loc) != n:
        return "bad local tables"
    why = next((w for w in map(table_bad, loc) if w), None)
    if why:
        return "bad local tables: " + why
    if not isinstance(m.get("sharded"), dict):
        return "bad sharded table"
    for name, e in m["sharded"].items():
        if not isinstance(e, dict) or not isinstance(e.get("shape"), list) or not e["shape"] or \
                not all(_uint(x) for x in e["shape"]) or not isinstance(e.get("pieces"), list) or \
                not isinstance(e.get("dtype"), str):
            return "bad sharded entry %r" % name
        for p in e["pieces"]:
            r = p.get("rows") if isinstance(p, dict) else None
            why = entry_bad(name, p, False)
            if why or not (isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r)
                           and 0 <= r[0] <= r[1] <= e["shape"][0]):
                return why or "bad piece of %r" % name
    return None


def base_directory(directory, m):
    """The checkpoint that the one in directory (manifest m) is a delta against, or None.
    The manifest records it as save does, "../NAME": a checkpoint beside this one (in the
    parent directory of the path as written); anything else (an absolute path, another
    directory, this checkpoint itself) is refused with ckpz.Error naming the manifest."""
    base = m.get("base")
    if base is None:
        return None
    path = os.path.join(directory, MANIFEST)
    here = os.path.abspath(directory)
    name = base[3:] if base.startswith("../") else None
    if "\0" not in base and os.path.normpath(os.path.join(here, base)) == here:
        raise _lib.Error(_lib.ERR_BASE, "the base %r is this checkpoint itself" % base, path)
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise _lib.Error(_lib.ERR_BASE, "the base %r is not a checkpoint beside this one ('../NAME', as "
                         "ckpz.distributed.save records it): refused" % base, path)
    return os.path.join(os.path.dirname(here), name)


def manifest_chain(directory):
    """[(directory, manifest)]: the checkpoint in directory, its base, and so on down to a
    stand-alone one (base_directory finds each). A chain that comes back to a checkpoint
    (by device and inode: paths lie) or holds more than BASE_CHAIN_MAX deltas is refused
    with ckpz.Error naming the manifest whose base closes the cycle or goes too far."""
    chain = [(directory, read_manifest(directory))]
    st = os.stat(directory)
    seen = {(st.st_dev, st.st_ino)}
    while True:
        d, m = chain[-1]
        below = base_directory(d, m)
        if below is None:
            return chain
        path = os.path.join(d, MANIFEST)
        if len(chain) > BASE_CHAIN_MAX:
            raise _lib.Error(_lib.ERR_BASE, "chain of delta checkpoints longer than %d" % BASE_CHAIN_MAX, path)
        try:
            st = os.stat(below)
        except FileNotFoundError:
            raise FileNotFoundError("ckpz.distributed: %s: the base %s is missing" % (path, below)) from None
        if (st.st_dev, st.st_ino) in seen:
            raise _lib.Error(_lib.ERR_BASE, "the base %r comes back to %s: a cycle of delta checkpoints"
                             % (m["base"], below), path)
        seen.add((st.st_dev, st.st_ino))
        chain.append((below, read_manifest(below)))


def even_rows(rows, rank, world):
    """The rows [start, stop) that rank gets of `rows` split as evenly as possible (the
    first rows % world ranks get one more), as torch.tensor_split splits."""
    q, extra = divmod(rows, world)
    start = rank * q + min(rank, extra)
    return start, start + q + (1 if rank < extra else 0)
