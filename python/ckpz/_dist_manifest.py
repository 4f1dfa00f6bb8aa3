"""The manifest of a ckpz.distributed checkpoint: manifest.json, written by rank 0 once
every shard is in place (through a temporary name, synced, renamed), read by every rank
that loads.

A manifest read is data from a file, checked as the C decoder checks a header before
anything in it is used: its size is bounded before it is read (by the shards it
describes: JSON takes about 20 times its size once parsed) and its nesting before it is
parsed (the parser recurses per level), every field load relies on is checked
(_malformed), every tensor has a CRC-32 unless a lossy policy coded it, and a base is
only ever a checkpoint beside this one, followed down a chain of bounded length that
may not come back to itself (manifest_chain).
"""

import errno
import json
import os
import re

from . import _files, _lib

__all__ = []  # private module

MANIFEST = "manifest.json"
FORMAT = "ckpz.distributed"
VERSION = 1
# A manifest may take MANIFEST_FLOOR (~160 MB once parsed), or a sixteenth of the shard
# files beside it (an entry is about 90 bytes; each tensor costs its shard more than
# that), up to MANIFEST_MAX: 2.8 million pieces, 2,700 split tensors over 1,024 ranks. A
# larger one is refused unread.
MANIFEST_FLOOR = 8 << 20
MANIFEST_MAX = 256 << 20
NESTING_MAX = 32  # a manifest's JSON nests 6 deep (sharded / name / pieces / piece / rows)
BASE_CHAIN_MAX = 1000  # delta checkpoints down to a stand-alone one, as CKPZ_CHAIN_MAX
_SHARD_FILE = re.compile(r"rank-\d{5}-of-\d{5}\.ckpz\Z")


class CheckpointMissing(_lib.Error, FileNotFoundError):
    """A checkpoint that is not there: no such directory, or a directory without the
    manifest (metadata) a complete checkpoint has. Both a ckpz.Error (code ERR_READ) and
    a FileNotFoundError (errno ENOENT; filename: the path); str() is "WHAT: PATH", e.g.
    "no such checkpoint directory: ckpt/step1000"."""

    def __init__(self, what, path):
        _lib.Error.__init__(self, _lib.ERR_READ, what, path)
        self.errno, self.strerror, self.filename = errno.ENOENT, what, os.fspath(path)

    def __str__(self):
        return "%s: %s" % (self.strerror, self.filename)

    def __reduce__(self):  # pickled (DCP hands errors between ranks so): the same error again
        return type(self), (self.strerror, self.filename)


def missing(directory, name, what):
    """The CheckpointMissing for the file name (the manifest, the metadata) that is not
    in directory: "no such checkpoint directory" when directory itself is not there
    (ckpz.Error when it is not a directory), else `what` naming the file."""
    if not os.path.exists(directory):
        return CheckpointMissing("no such checkpoint directory", directory)
    if not os.path.isdir(directory):
        return _lib.Error(_lib.ERR_INPUT, "not a checkpoint directory", directory)
    return CheckpointMissing(what, os.path.join(directory, name))


def write_manifest(directory, manifest):
    """Writes directory/manifest.json through a temporary name, synced."""
    _files.write_file(os.path.join(directory, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True).encode())


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


def _size_limit(directory):
    """The bytes the manifest of the checkpoint in directory may take (see MANIFEST_FLOOR)."""
    shards = 0
    with os.scandir(directory) as it:
        for e in it:
            if _SHARD_FILE.match(e.name) and e.is_file(follow_symlinks=False):
                shards += e.stat(follow_symlinks=False).st_size
    return min(MANIFEST_MAX, max(MANIFEST_FLOOR, shards // 16))


def read_manifest(directory):
    """The manifest of the checkpoint directory, checked; ckpz.Error naming it for anything
    wrong with it; CheckpointMissing (a FileNotFoundError too) when the directory or the
    manifest is not there."""
    path = os.path.join(directory, MANIFEST)
    try:
        fd = _files.open_regular(path)
    except (FileNotFoundError, NotADirectoryError):
        shards = os.path.isdir(directory) and any(_SHARD_FILE.match(f) for f in os.listdir(directory))
        raise missing(directory, MANIFEST, "no %s: %s" % (MANIFEST, "an incomplete checkpoint (shards without "
                      "the manifest, which is written last)" if shards else "not a ckpz.distributed checkpoint")) \
            from None
    with open(fd, "rb") as f:
        size = os.fstat(fd).st_size
        limit = _size_limit(directory) if size > MANIFEST_FLOOR else MANIFEST_FLOOR
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise _lib.Error(_lib.ERR_LIMIT, "the manifest is %d bytes, more than the %d bytes a manifest of shards this "
                         "size may take" % (max(size, len(data)), limit), path)
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

    def entry_bad(name, e, shape=True, shard=None):
        if not isinstance(e, dict) or not _uint(e.get("shard"), n) or (shard is not None and e["shard"] != shard):
            return "bad entry of %r" % name
        if not isinstance(e.get("lossy", False), bool):
            return "the lossy mark of %r is not true or false" % name
        if e.get("crc32") is None:
            if not (e.get("lossy") or lossy):
                return "tensor %r has no CRC-32 (only a tensor coded lossily may go without)" % name
        elif not _uint(e["crc32"], 1 << 32):
            return "bad CRC-32 of %r" % name
        if shape and not (isinstance(e.get("shape"), list) and all(_uint(x) for x in e["shape"])
                          and isinstance(e.get("dtype"), str)):
            return "bad shape or dtype of %r" % name
        return None

    def table_bad(t, shard=None):  # a rank's own tensors are in its own shard
        return next((w for w in (entry_bad(k, e, True, shard) for k, e in t.items()) if w), None) \
            if isinstance(t, dict) else "not a table"

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
    why = next((w for w in (table_bad(t, r) for r, t in enumerate(loc)) if w), None)
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
        # as save writes them: one piece per shard, the pieces covering the rows once
        # (two pieces in one shard would both read that shard's one tensor)
        if len({p["shard"] for p in e["pieces"]}) != len(e["pieces"]):
            return "two pieces of %r in one shard" % name
        at = 0
        for lo, hi in sorted(tuple(p["rows"]) for p in e["pieces"]):
            if lo != at:
                break
            at = hi
        if at != e["shape"][0]:
            return "the pieces of %r do not cover its %d rows once" % (name, e["shape"][0])
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
