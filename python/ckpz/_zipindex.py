"""A stored zip archive (torch.save's .pt, or what `ckpz -d` would restore from a
.ckpz) read as hostile input: `ZipIndex` parses it through a read(offset, n) function
(the central directory from the end, zip64 records, then the local headers), checking
every offset and size against the archive's size and refusing overlapping or duplicate
members, so that a loader finds each member's data without reading the data itself.
Every failure is a ckpz.Error naming the file. Writing such archives: _torchzip.
"""

import struct
import sys

from ._lib import Error, ERR_CORRUPT, ERR_INPUT

__all__ = []  # private module


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


def _records_ok(extra):
    """Whether a zip extra field is a run of whole (tag, length, data) records."""
    pos = 0
    while pos < len(extra):
        if pos + 4 > len(extra):
            return False
        pos += 4 + struct.unpack_from("<H", extra, pos + 2)[0]
    return pos == len(extra)


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
        while at >= 0 and (at + 22 > tail_len or at + 22 + struct.unpack_from("<H", tail, at + 20)[0] != tail_len):
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
            if not _records_ok(extra):
                self._fail("central extra field of '%s' damaged" % name)
            usize, csize, hdr = self._zip64(extra, usize, csize, hdr, name)
            if method != 0 or csize != usize:
                self._fail("member '%s' is compressed (method %d): torch writes stored members" % (name, method))
            if flags & 1:
                self._fail("member '%s' is encrypted" % name)
            if hdr > size or usize > size - hdr:
                self._fail("member '%s' lies outside the file" % name)
            if name in self.members:
                self._fail("member '%s' appears twice" % name)
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
        extras = []
        for m, h in zip(order, heads):
            if len(h) < 30 or h[:4] != b"PK\x03\x04" or h[30:].decode("utf-8", "replace") != m.name:
                self._fail("local header of '%s' missing or names another member" % m.name)
            f = _LFH.unpack_from(h, 0)
            start = m.header + 30 + f[9] + f[10]
            if start > size or m.size > size - start:
                self._fail("member '%s' lies outside the file" % m.name)
            m.data_offset = start
            if f[10]:
                extras.append((m, (m.header + 30 + f[9], f[10])))
        # the local extra fields (torch's alignment padding) must hold whole records
        got = read_many([e for _, e in extras]) if read_many else [read(o, n) for _, (o, n) in extras]
        for (m, _), extra in zip(extras, got):
            if not _records_ok(extra):
                self._fail("local extra field of '%s' damaged" % m.name)
        # Members lie one after another before the central directory, as every zip
        # writer lays them out: bytes shared by two members (one storage read as many,
        # 0.5 MB of file as 300 MB of tensors) or a member running into the next are
        # refused.
        spans = sorted((m.header, m.data_offset + m.size, m.name) for m in order)
        for (_, end, name), (nxt, _, other) in zip(spans, spans[1:]):
            if end > nxt:
                self._fail("members '%s' and '%s' overlap" % (name, other))
        if spans and spans[-1][1] > cd_off:
            self._fail("member '%s' runs into the central directory" % spans[-1][2])

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
