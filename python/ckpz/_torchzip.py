"""torch.save's archive, taken apart and put together without torch.save.

Writing: `pickle_state` pickles an object exactly as torch.save does (same protocol,
same persistent ids for storages, storages numbered in first-use order and stored in
sorted key order) and returns the archive's members: ARCHIVE/data.pkl, one
ARCHIVE/data/KEY per storage (its memory, not a copy), ARCHIVE/version. The library's
zip source (ckpz_zip_source) lays them out as torch's zip writer does, so what `ckpz -d`
restores is the file torch.save would have written (same bytes, for the torch release
whose layout this follows: 1.13; later releases read it).

Reading: `ZipIndex` parses a stored zip through a read(offset, n) function (the
central directory from the end, then the local headers), so that a loader finds each
member's data without reading the data itself.
"""

import io
import os
import pickle
import struct
import sys

from ._lib import Error, ERR_CORRUPT, ERR_INPUT

__all__ = []  # private module

VERSION_RECORD = b"3\n"  # torch's archive format version since 1.6
DEFAULT_PROTOCOL = 2  # torch.save's pickle protocol


def torch_module():
    """torch, imported when a save or load needs it (the rest of the package does not)."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("ckpz.save/ckpz.load need PyTorch (import torch failed: %s)" % e) from e
    return torch


def archive_name(dst):
    """The folder torch.save names its archive after: the file's name without directories
    and without its last extension, "archive" for a file object. For a .ckpz path it is
    the name of the file `ckpz -d` restores (the path without ".ckpz")."""
    if not isinstance(dst, (str, bytes, os.PathLike)):
        return "archive"
    name = os.fsdecode(os.fspath(dst))
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    if name.endswith(".ckpz"):
        name = name[: -len(".ckpz")]
    dot = name.rfind(".")
    if dot >= 0:
        name = name[:dot]
    return name or "archive"


def _storage_parts(torch, obj):
    """(untyped storage, dtype, storage class, element count) of a storage torch.save meets."""
    if isinstance(obj, torch.storage.TypedStorage):
        untyped = obj._untyped_storage if hasattr(obj, "_untyped_storage") else obj._storage
        type_name = obj._pickle_storage_type() if hasattr(obj, "_pickle_storage_type") else obj.pickle_storage_type()
        numel = obj._size() if hasattr(obj, "_size") else obj.size()
        return untyped, obj.dtype, getattr(torch, type_name), numel
    return obj, torch.uint8, torch.serialization.normalize_storage_type(type(obj)), obj.nbytes()


class Pickled:
    """What pickle_state made: the pickle, the storages by key (CPU ones as given, others
    as CPU copies) and their total size."""

    def __init__(self, data, storages, origins=None):
        self.data = data
        self.storages = storages
        self.origins = origins or {}  # key: (dtype, the original storage's address)
        self.nbytes = sum(s.nbytes() for s in storages.values())

    def members(self, prefix):
        """[(name, bytes-or-storage)] in torch.save's order."""
        out = [(prefix + "/data.pkl", self.data)]
        for key in sorted(self.storages):
            out.append((prefix + "/data/" + key, self.storages[key]))
        out.append((prefix + "/version", VERSION_RECORD))
        return out


def pickle_state(torch, obj, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL, snapshot=None):
    """Pickles obj as torch.save does. snapshot(untyped_storage) -> untyped storage, when
    given, replaces every storage by what it returns (a copy taken now, for saving in the
    background); non-CPU storages are always copied to the CPU."""
    storages = {}
    origins = {}
    id_map = {}
    dtypes = {}
    location_tag = torch.serialization.location_tag

    def persistent_id(o):
        if not (isinstance(o, torch.storage.TypedStorage) or torch.is_storage(o)):
            return None
        untyped, dtype, storage_type, numel = _storage_parts(torch, o)
        ptr = untyped.data_ptr()
        if ptr != 0:  # the same memory saved as two dtypes cannot be loaded: torch refuses too
            if dtypes.setdefault(ptr, dtype) != dtype:
                raise RuntimeError("Cannot save multiple tensors or storages that view the same data as different types")
        key = id_map.setdefault(untyped._cdata, str(len(id_map)))
        if key not in storages:
            kept = untyped
            if kept.device.type != "cpu":
                kept = kept.cpu()
            elif snapshot is not None:
                kept = snapshot(kept)
            storages[key] = kept
            origins[key] = (dtype, ptr)
        return ("storage", storage_type, key, location_tag(untyped), numel)

    buf = io.BytesIO()
    pickler = pickle_module.Pickler(buf, protocol=pickle_protocol)
    pickler.persistent_id = persistent_id
    pickler.dump(obj)
    return Pickled(buf.getvalue(), storages, origins)


# ---- reading --------------------------------------------------------------------------

_EOCD = struct.Struct("<IHHHHIIH")  # end of central directory, 22 bytes
_Z64_LOC = struct.Struct("<IIQI")  # zip64 end of central directory locator, 20 bytes
_Z64_EOCD = struct.Struct("<IQHHIIQQQQ")  # zip64 end of central directory, 56 bytes
_CDH = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory header, 46 bytes
_LFH = struct.Struct("<IHHHHHIIIHH")  # local file header, 30 bytes


class Member:
    __slots__ = ("name", "size", "header", "data_offset")

    def __init__(self, name, size, header):
        self.name = name
        self.size = size
        self.header = header
        self.data_offset = None


class ZipIndex:
    """The members of a stored zip archive of `size` bytes read through read(off, n)
    (which returns exactly n bytes). Everything read is checked against `size` before it
    is used; what() names the file in errors. read_many(list of (off, n)) -> list of bytes
    may batch the local headers' reads."""

    def __init__(self, read, size, what, read_many=None):
        self.what = what
        self.size = size
        self.members = {}
        tail_len = min(size, 22 + 65535 + 20 + 56)
        if tail_len < 22:
            self._fail("too short to be a zip archive (%d bytes)" % size)
        tail = read(size - tail_len, tail_len)
        at = tail.rfind(b"PK\x05\x06")
        while at >= 0 and at + 22 + struct.unpack_from("<H", tail, at + 20)[0] != tail_len:
            at = tail.rfind(b"PK\x05\x06", 0, at)
        if at < 0:
            self._fail("no end of central directory record")
        _, disk, cd_disk, _, count, cd_size, cd_off, _ = _EOCD.unpack_from(tail, at)
        if disk or cd_disk:
            self._fail("multi-disk archives are not supported")
        loc = at - 20
        if loc >= 0 and tail[loc : loc + 4] == b"PK\x06\x07":
            _, _, z64_off, _ = _Z64_LOC.unpack_from(tail, loc)
            if z64_off > size - 56:
                self._fail("zip64 end record outside the file")
            z = read(z64_off, 56)
            if z[:4] != b"PK\x06\x06":
                self._fail("zip64 end record missing")
            _, _, _, _, _, _, _, count, cd_size, cd_off = _Z64_EOCD.unpack(z)
        if cd_off > size or cd_size > size - cd_off or count > cd_size // 46:
            self._fail("central directory outside the file (%d bytes at %d, %d entries)" % (cd_size, cd_off, count))
        cd = read(cd_off, cd_size)
        pos = 0
        order = []
        for _ in range(count):
            if pos + 46 > len(cd) or cd[pos : pos + 4] != b"PK\x01\x02":
                self._fail("central directory entry %d damaged" % len(order))
            f = _CDH.unpack_from(cd, pos)
            flags, method, csize, usize, nlen, xlen, clen, hdr = f[3], f[4], f[8], f[9], f[10], f[11], f[12], f[16]
            end = pos + 46 + nlen + xlen + clen
            if end > len(cd):
                self._fail("central directory entry %d damaged" % len(order))
            name = cd[pos + 46 : pos + 46 + nlen].decode("utf-8", "replace")
            extra = cd[pos + 46 + nlen : pos + 46 + nlen + xlen]
            usize, csize, hdr = self._zip64(extra, usize, csize, hdr, name)
            if method != 0 or csize != usize:
                self._fail("member '%s' is compressed (method %d): torch writes stored members" % (name, method))
            if flags & 1:
                self._fail("member '%s' is encrypted" % name)
            if hdr > size or usize > size - hdr:
                self._fail("member '%s' lies outside the file" % name)
            m = Member(name, usize, hdr)
            self.members[name] = m
            order.append(m)
            pos = end
        # The local headers give where each member's data starts (their extra fields,
        # torch's alignment padding among them, differ from the central ones).
        # Only the fixed part and the name are read: the data follows the extra field.
        want = []
        for m in order:
            n = 30 + len(m.name.encode("utf-8"))
            if n > size - m.header:
                self._fail("local header of '%s' outside the file" % m.name)
            want.append((m.header, n))
        heads = read_many(want) if read_many else [read(o, n) for o, n in want]
        for m, h in zip(order, heads):
            if len(h) < 30 or h[:4] != b"PK\x03\x04" or h[30:].decode("utf-8", "replace") != m.name:
                self._fail("local header of '%s' missing or names another member" % m.name)
            f = _LFH.unpack_from(h, 0)
            start = m.header + 30 + f[9] + f[10]
            if start > size or m.size > size - start:
                self._fail("member '%s' lies outside the file" % m.name)
            m.data_offset = start

    def _zip64(self, extra, usize, csize, hdr, name):
        pos = 0
        while pos + 4 <= len(extra):
            tag, n = struct.unpack_from("<HH", extra, pos)
            if tag == 1:
                vals = extra[pos + 4 : pos + 4 + n]
                k = 0
                out = []
                for v, big in ((usize, usize == 0xFFFFFFFF), (csize, csize == 0xFFFFFFFF), (hdr, hdr == 0xFFFFFFFF)):
                    if big:
                        if k + 8 > len(vals):
                            self._fail("member '%s': zip64 field too short" % name)
                        v = struct.unpack_from("<Q", vals, k)[0]
                        k += 8
                    out.append(v)
                return tuple(out)
            pos += 4 + n
        return usize, csize, hdr

    def _fail(self, why):
        raise Error(ERR_CORRUPT if self.what else ERR_INPUT, "not a readable torch.save archive: " + why, self.what)

    def prefix(self):
        """The archive's folder ("ckpt/"), as torch finds it: from the first member."""
        if not self.members:
            self._fail("no members")
        first = next(iter(self.members))
        if "/" not in first:
            self._fail("member '%s' is not in a folder" % first)
        return first.split("/", 1)[0] + "/"

    def get(self, name):
        m = self.members.get(name)
        if m is None:
            self._fail("no member '%s'" % name)
        return m


def byteorder_ok(index, prefix, read):
    """Whether the archive's tensors are in this machine's byte order (torch >= 2.1
    records it in a 'byteorder' member; older archives are little-endian)."""
    m = index.members.get(prefix + "byteorder")
    if m is None:
        return sys.byteorder == "little"
    return read(m.data_offset, m.size).decode("ascii", "replace") == sys.byteorder
