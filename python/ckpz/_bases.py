"""Delta files: the base checkpoint a file is coded against, found, restored and held
for the library, and whole-file restores into memory (which a base chain needs).

A base is the previous checkpoint's original bytes: a mapping of an original file, a
restored .ckpz (itself possibly a delta file, restored through its own base, found by
the library's one chain policy, ckpz_chain_open, as the CLI finds it: by the name it
recorded, beside it), or the caller's buffer.
"""

import contextlib
import os
import stat

from . import _files, _lib, _memory
from ._lib import Error

__all__ = []  # private module

_MAX_ORIGINAL = 1 << 40  # whole-file restores refuse originals over 1 TiB

# ---- delta files: the base a file is coded against --------------------------------------

class _Base:
    """A base checkpoint's original bytes, held for the library (params.base): a mapping
    of an original file, a restored .ckpz, or the caller's buffer (not copied when it is
    bytes or writable). name (bytes or None) is recorded in delta files written against
    it; depth is the number of delta files behind it (0: stand-alone)."""

    def __init__(self, buf, name=None, depth=0, owned=False):
        self._buf = buf
        self._owned = owned  # close buf (an mmap) with the base
        self.name = name
        self.depth = depth
        with memoryview(buf) as mv:
            self.size = mv.nbytes
            readonly = mv.readonly
        if self.size == 0:
            # an empty base is still a base: params.base must not be NULL
            self._keep = _lib.ctypes.create_string_buffer(1)
            self.address = _lib.ctypes.addressof(self._keep)
        elif isinstance(buf, bytes):
            # immutable and only read by C: point into the bytes object itself
            self._keep = _lib.ctypes.c_char_p(buf)
            self.address = _lib.ctypes.cast(self._keep, _lib.ctypes.c_void_p).value
        else:
            if readonly:  # another read-only buffer (e.g. a memoryview of bytes): copy it
                self._buf = buf = bytearray(memoryview(buf).cast("B"))
            self._keep, self.address = _lib.address(buf)

    def apply(self, params, compress=False):
        if compress and self.size == 0:
            return  # nothing to share: a stand-alone file, as `ckpz --base EMPTY` writes
        params.base = self.address
        params.base_size = self.size
        params.base_name = self.name
        params.base_depth = self.depth

    def close(self):
        self._keep = None  # drop the export before unmapping
        buf, self._buf = self._buf, None
        if self._owned:
            _memory.close_mmap(buf)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _head_info(head, path=None):
    """The ckpz_base_info (a _lib.BaseInfo) of a .ckpz file from its first bytes, or None
    if they do not start with the ckpz magic."""
    if bytes(head[: len(_lib.MAGIC)]) != _lib.MAGIC:
        return None
    head = bytes(head)
    info = _lib.BaseInfo()
    with _lib.Call(None, path) as call:
        call.check(_lib.base_info_read(call.ctx, head, len(head), _lib.ctypes.byref(info)))
    return info


def _locate(referrer, recorded):
    """Where the base a delta file recorded as `recorded` (bytes) lies, by the library's
    rule (ckpz_base_locate: that file name, or the name + ".ckpz", beside the referring
    file; only a plain file name is followed); None if nothing is there."""
    p = _lib.base_locate(os.fsencode(os.fspath(referrer)), bytes(recorded))
    if not p:
        return None
    try:
        return os.fsdecode(_lib.ctypes.string_at(p))
    finally:
        _lib.free(p)


def read_head(path):
    """The first BASE_PROBE bytes of the regular file at path; None for a stream (a FIFO,
    a terminal: reading them would take them from what is read next)."""
    mode = os.stat(path).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # a directory: IsADirectoryError below
        return None
    with open(_files.open_regular(path), "rb") as f:
        return f.read(_lib.BASE_PROBE)


def located_base(path, head):
    """The path of the base the .ckpz file at path (first bytes: head) needs, found beside
    it by its recorded name; None for a stand-alone file or when it is not found."""
    info = _head_info(head, path)
    if info is None or not info.needed:
        return None
    return _locate(path, info.name)


def _map_original(path):
    """A _Base over the original checkpoint at path: mapped copy-on-write (C only reads
    it), or read into memory when it cannot be mapped."""
    with open(_files.open_regular(path), "rb", buffering=0) as f:
        m = _memory.map_file(f)
        if m is not None:
            return _Base(m, owned=True)
        return _Base(f.readall())


def _chain(path):
    """[(path, BaseInfo, or None for an original checkpoint)] from path down to the bottom
    of its chain of bases, walked by the library (ckpz_chain_open: the one policy every
    front end follows: where a base is looked for, the same file by device and inode, the
    chain limit). A walk that stops short raises ckpz.Error naming the file, as the CLI
    does."""
    # The file named must exist (FileNotFoundError, as open() would say) and be a regular
    # file: the library opens it blocking (the bases it finds beside it, only regular ones).
    os.close(_files.open_regular(path))
    c = _lib.ctypes.c_void_p()
    with _lib.Call(None, path) as call:
        err = _lib.chain_open(call.ctx, os.fsencode(path), _lib.ctypes.byref(c))
        if not c:
            call.check(err)
    try:
        links = []
        for i in range(_lib.chain_length(c)):
            info = _lib.BaseInfo()
            kind = _lib.chain_link(c, i, _lib.ctypes.byref(info))
            links.append((os.fsdecode(_lib.chain_path(c, i)), info if kind == 1 else None))
        if err:
            n = _lib.chain_message(c, None, 0)
            buf = _lib.ctypes.create_string_buffer(n + 1)
            _lib.chain_message(c, buf, n + 1)
            msg = os.fsdecode(buf.value)
            # "FILE: why", FILE the last link walked or the file it leads to (a cycle)
            last, info = links[-1] if links else (path, None)
            for named in (last, _locate(last, info.name) if info is not None else None):
                if named is not None and msg.startswith(named + ": "):
                    raise Error(err, msg[len(named) + 2:], named)
            raise Error(err, msg, path)
        return links
    finally:
        _lib.chain_free(c)


def _base_from_path(path, threads):
    """A _Base for the previous checkpoint at path: an original file, a stand-alone .ckpz,
    or a delta .ckpz, restored through the chain of bases it recorded, each found beside
    the file that names it. The recorded name is path's file name."""
    links = _chain(path)
    cur = _map_original(links[-1][0]) if links[-1][1] is None else None
    try:
        for p, info in reversed(links):
            if info is None:
                continue
            restored = decompress_whole(p, threads, base=cur, locate=False)
            if cur is not None:
                cur.close()
            cur = _Base(restored.mem, owned=True)
    except BaseException:
        if cur is not None:
            cur.close()
        raise
    cur.name = os.fsencode(os.path.basename(path))
    top = links[0][1]
    cur.depth = top.depth if top is not None and top.needed else 0
    return cur


def check_not_own_base(dst, base):
    """Refuses to write a delta file over its own base: it would record itself as its
    base and could never be restored."""
    if not (_files.is_path(dst) and isinstance(base, (str, os.PathLike))):
        return
    d, b = os.path.realpath(os.fspath(dst)), os.path.realpath(os.fspath(base))
    if os.fsencode(d) == os.fsencode(b):
        raise ValueError("ckpz: %r would replace its own base: write the delta file elsewhere" % (os.fspath(dst),))


def open_base(spec, threads=0):
    """A context manager giving the _Base for a base= argument (None for None): a path
    (str or os.PathLike) to an original checkpoint or a .ckpz, or a bytes-like object
    holding the base's original bytes."""
    if spec is None:
        return contextlib.nullcontext(None)
    if isinstance(spec, _Base):
        return contextlib.nullcontext(spec)
    if isinstance(spec, (str, os.PathLike)):
        return _base_from_path(os.fsdecode(os.fspath(spec)), threads)
    try:
        memoryview(spec).release()
    except TypeError:
        raise TypeError(
            "ckpz: base must be a path (str or os.PathLike) or a bytes-like object, not %s" % type(spec).__name__
        ) from None
    return _Base(spec)


def decompress_whole(src, threads=0, base=None, locate=True):
    """_Restored with the original bytes of the .ckpz file src (path or binary file), or
    None if src is not a ckpz file.

    base: an open _Base (used, not closed), a base= value (see _open_base), or None: then,
    when locate is true and src is a path to a delta file, the base it recorded, found
    beside it (none found: the library refuses the file, naming the base it needs)."""
    with _files.open_input(src) as f:
        got = _files.read_whole(f, src)
    if got is None:
        return None
    buf, n = got
    try:
        if isinstance(base, _Base):
            opened = contextlib.nullcontext(base)
        elif base is not None:
            opened = open_base(base, threads)
        elif locate and _files.is_path(src):
            opened = open_base(located_base(src, bytes(memoryview(buf)[: _lib.BASE_PROBE])), threads)
        else:
            opened = contextlib.nullcontext(None)
        with opened as b:
            return _decompress_buffer(buf, n, src, threads, b)
    finally:
        _memory.close_mmap(buf)


def _decompress_buffer(buf, n, src, threads, base):
    """_Restored with the original of the complete .ckpz file held in buf (n bytes),
    restored against the _Base base (or None)."""
    params = _lib.make_params(threads=threads)
    if base is not None:
        base.apply(params)
    with _lib.Call(params, src) as call:
        arr, addr = _lib.address(buf)
        try:
            dst, orig = restore(call, params, addr, n, buf, src)
        finally:
            del arr
    return _memory.Restored(dst, orig)


def check_original(orig, n, chunk, src=None):
    """Refuse (ckpz.Error, ERR_LIMIT) an original of orig bytes claimed by an n-byte .ckpz
    file whose chunks hold at most chunk bytes, before anything is allocated by it (the
    trailer's checksum holds, but a file is hostile): every chunk costs at least
    MIN_CHUNK_COST bytes of the file; and never over 1 TiB."""
    bound = min(_MAX_ORIGINAL, (n // _lib.MIN_CHUNK_COST + 1) * chunk)
    if orig > bound:
        raise Error(
            _lib.ERR_LIMIT,
            "the file claims an original size of %d bytes, more than a %d-byte "
            "ckpz file can hold (limit %d)" % (orig, n, bound),
            src,
        )


def restore(call, params, data, n, head, src=None):
    """(memory from _memory.alloc, original size): the original of the complete n-byte
    .ckpz file at data (an address, or an object ctypes passes as one) decoded by call,
    head a buffer of its first 16 bytes at least; src names it in errors."""
    orig = _lib.ctypes.c_uint64()
    call.check(_lib.original_size(call.ctx, data, n, _lib.ctypes.byref(orig)))
    orig = orig.value
    check_original(orig, n, int.from_bytes(bytes(memoryview(head)[12:16]), "little"), src)
    dst = _memory.alloc(orig)
    try:
        darr, daddr = _lib.address(dst)  # (None, None) for an empty original
        try:
            call.check(_lib.decompress_buffer(call.ctx, _lib.ctypes.byref(params), data, n, daddr, orig))
        finally:
            del darr  # the mapping can be closed once no export of it is left
    except BaseException:
        _memory.close_mmap(dst)
        raise
    return dst, orig
