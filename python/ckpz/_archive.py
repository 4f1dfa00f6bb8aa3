"""A .ckpz file opened for random access: its index (ckpz.list, ckpz.info,
ckpz.base_info) and its original bytes read by range (what ckpz.load reads an archive
through).

Only the header, trailer and index are read to open a file (the library checks them
and their checksums); chunks are read on demand, each verified before it is decoded.
ArchiveImage decodes the small opaque runs of an archive (a torch.save zip's headers,
descriptors, pickle and central directory) in one call up front and keeps them, so
that parsing the zip costs no call per header; tensors are decoded straight into their
final memory by read_into, many spans to one call (each call sets up its threads).
"""

import bisect
import collections
import contextlib
import io
import os

from . import _files, _lib

__all__ = []  # private module

_CACHE_ENTRY_MAX = 4 << 20  # opaque runs decoded up front (zip headers, the pickle) at most this long ...
_CACHE_TOTAL_MAX = 256 << 20  # ... and this much in all; the rest is read where needed

# The public records (ckpz.Entry, ...): named as the package's own, where they are found.
Entry = collections.namedtuple("Entry", "name dtype shape offset length compressed chunks lossy role role_why",
                               defaults=(None, None, None), module="ckpz")
Entry.__doc__ = """One entry of a .ckpz file's index: a tensor, or a run of opaque bytes
(name "", dtype "bytes", shape ()). offset and length locate it in the original file;
compressed is the bytes its chunks take in the .ckpz file. lossy: None when the entry
restores byte for byte, else a Lossy with its coding and errors. role: the tensor's role
as lossy="auto" sees it ("weight", "exp_avg", "exp_avg_sq" or "exact"; None for opaque
bytes) and role_why the reason, whatever coding the file used."""

Lossy = collections.namedtuple(
    "Lossy", "mode bound abs_bound mae max_error rmse psnr exceptions changed frozen", module="ckpz"
)
Lossy.__doc__ = """How a lossy tensor was coded and the errors it got: mode ("abs", "rel",
"pointwise-rel", "affine"), the bound asked for and the absolute bound applied, mean
absolute, maximum and RMS error, PSNR in dB (against the tensor's value range; inf
without error), elements stored exactly, and with a base: elements that changed since
it and how many of those restore as the base's value (most of them: training frozen)."""

Info = collections.namedtuple(
    "Info", "format_version format original_size compressed_size chunk_size content_checksum entries chunks lossy",
    defaults=(False,), module="ckpz",
)
Info.__doc__ = """A .ckpz file's summary; format is the original's ("torch", "safetensors",
"npy", "raw", ...)."""

BaseInfo = collections.namedtuple("BaseInfo", "name size checksum depth", module="ckpz")
BaseInfo.__doc__ = """What a delta .ckpz file needs to be restored: its base's recorded file name
("" if none was recorded), size in bytes and CRC-32C (of the base's original bytes), and
depth, the number of delta files to restore down to a stand-alone one, this one included
(1: the base is stand-alone), as ``ckpz -l`` shows on its "depends on:" line."""


@contextlib.contextmanager
def opened(call, params, pread, opaque, size):
    """The ckpz_archive of a complete .ckpz file of size bytes read through pread (a
    PREAD_FN) and opaque, closed on leaving."""
    handle = _lib.ctypes.c_void_p()
    call.check(_lib.archive_open(call.ctx, _lib.ctypes.byref(params), pread, opaque, size, _lib.ctypes.byref(handle)))
    try:
        yield handle
    finally:
        _lib.archive_close(handle)


def archive_info(handle):
    """The ckpz_archive_info of an open archive."""
    i = _lib.ArchiveInfo()
    _lib.archive_get_info(handle, _lib.ctypes.byref(i))
    return i


def read_into(call, handle, spans):
    """Decodes the original bytes of every (offset, length, address) straight to its
    address, in one library call (chunks verified first)."""
    if not spans:
        return
    arr = (_lib.Span * len(spans))()
    for i, (off, n, addr) in enumerate(spans):
        arr[i].offset, arr[i].length, arr[i].dst = off, n, addr
    call.check(_lib.archive_read(call.ctx, handle, arr, len(spans)))


def lossy_names(call, handle):
    """The names of an open archive's index entries that restore approximately (coded by
    a lossy policy)."""
    out = set()
    e = _lib.EntryStruct()
    for i in range(archive_info(handle).entries):
        call.check(_lib.archive_entry(handle, i, _lib.ctypes.byref(e)))
        if e.lossy:
            out.add(_lib.decode(e.name) or "")
    return out


@contextlib.contextmanager
def _open_path(path):
    """(call, handle) for the .ckpz file at path (a regular file: _files.open_input) or an
    open binary file with a descriptor."""
    with _files.open_input(path) as f:
        try:
            fd = f.fileno()
            size = os.fstat(fd).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            raise TypeError("ckpz.list/info need a file with a descriptor (a path or an open file)")
        params = _lib.make_params()
        with _lib.Call(params, path) as call:

            def pread(_o, buf, n, off):
                mv = _lib.view_at(buf, n, writable=True)
                got = 0
                while got < n:
                    r = os.preadv(fd, [mv[got:]], off + got)
                    if r <= 0:
                        return -1
                    got += r
                return 0

            with opened(call, params, call.guard(_lib.PREAD_FN, pread, -1), None, size) as handle:
                yield call, handle


def _info(handle):
    i = archive_info(handle)
    return Info(
        i.format_version, _lib.decode(_lib.input_format_name(i.format)), i.original_size, i.compressed_size,
        i.chunk_size, i.content_checksum, i.entries, i.chunks, bool(i.lossy),
    )


def info(path):
    with _open_path(path) as (_call, handle):
        return _info(handle)


def base_info(path):
    with _open_path(path) as (_call, handle):
        b = _lib.BaseInfo()
        _lib.archive_get_base(handle, _lib.ctypes.byref(b))
        if not b.needed:
            return None
        return BaseInfo(os.fsdecode(b.name), b.size, b.checksum, b.depth)


def entries(path):
    out = []
    with _open_path(path) as (call, handle):
        e = _lib.EntryStruct()
        for i in range(_info(handle).entries):
            call.check(_lib.archive_entry(handle, i, _lib.ctypes.byref(e)))
            out.append(
                Entry(
                    _lib.decode(e.name) or "",
                    _lib.decode(_lib.dtype_name(e.dtype)) or str(e.dtype),
                    tuple(e.shape[k] for k in range(e.ndim)),
                    e.offset,
                    e.length,
                    e.compressed,
                    e.chunks,
                    Lossy(
                        _lib.decode(e.lossy_mode), e.lossy_bound, e.abs_bound, e.mae, e.max_error, e.rmse, e.psnr,
                        e.exceptions, e.changed, e.frozen,
                    )
                    if e.lossy
                    else None,
                    _lib.decode(e.role),
                    _lib.decode(e.role_why),
                )
            )
    return out


class ArchiveImage:
    """The original bytes of an open .ckpz file, read through the library: the small opaque
    runs (zip headers, descriptors, the pickle, the central directory) decoded at once
    and kept, everything else decoded when asked for."""

    def __init__(self, call, handle, path):
        self.call = call
        self.handle = handle
        self.path = path
        info = archive_info(handle)
        self.size = info.original_size
        e = _lib.EntryStruct()
        starts, runs = [], []
        total = 0
        for i in range(info.entries):
            call.check(_lib.archive_entry(handle, i, _lib.ctypes.byref(e)))
            if e.dtype == _lib.DTYPE_NONE and e.length <= _CACHE_ENTRY_MAX and total + e.length <= _CACHE_TOTAL_MAX:
                starts.append(e.offset)
                runs.append((e.offset, e.length))
                total += e.length
        self._starts, self._data = [], []
        data = self.read_many(runs)
        self._starts, self._data = starts, data

    def _decode(self, spans):
        """bytearrays with the original bytes of each (offset, length), in one library call."""
        bufs = [bytearray(n) for _, n in spans]
        keep, targets = [], []
        for (off, n), b in zip(spans, bufs):
            if n:
                c, addr = _lib.address(b)
                keep.append(c)
                targets.append((off, n, addr))
        read_into(self.call, self.handle, targets)
        del keep
        return bufs

    def read_many(self, spans):
        out = [None] * len(spans)
        missing = []
        for i, (off, n) in enumerate(spans):
            got = self._cached(off, n)
            if got is None:
                missing.append(i)
            else:
                out[i] = got
        if missing:
            for i, b in zip(missing, self._decode([spans[i] for i in missing])):
                out[i] = bytes(b)
        return out

    def _cached(self, off, n):
        starts = self._starts
        if not starts:
            return None
        k = bisect.bisect_right(starts, off) - 1
        if k < 0:
            return None
        start, data = starts[k], self._data[k]
        if off + n > start + len(data):
            return None
        return bytes(data[off - start : off - start + n])

    def read(self, off, n):
        return self.read_many([(off, n)])[0]
