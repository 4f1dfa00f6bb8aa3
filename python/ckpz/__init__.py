"""ckpz: lossless compression of deep-learning checkpoints, from Python.

A drop-in for torch.save / torch.load; the swap is two lines::

    import ckpz
    ckpz.save(state, "ckpt.pt.ckpz")        # instead of torch.save(state, "ckpt.pt")
    ...
    state = ckpz.load("ckpt.pt.ckpz")       # instead of torch.load("ckpt.pt")

``ckpz.save`` writes exactly what torch.save writes, compressed by libckpz: ``ckpz -d
ckpt.pt.ckpz`` (the CLI) gives back a normal ``.pt`` that torch.load reads, byte for
byte what torch.save would have written. ``ckpz.load`` also reads plain torch.save files.

Also here: ``compress_file`` / ``decompress_file`` (any file, like the CLI),
``save_arrays`` / ``load_arrays`` (NumPy arrays, as a compressed .npz), ``list`` and
``info`` (the tensor index of a .ckpz file), ``base_info`` (what a delta file needs),
and ``Error`` (what libckpz reports).

Delta checkpoints: ``save``, ``compress_file`` take ``base=`` (the previous checkpoint,
original or .ckpz) and write a file coded against it, like ``ckpz --base PREV``;
``load`` and ``decompress_file`` take the same base, or find it by the file name the
delta file recorded, in its directory (as ``ckpz -d`` does)::

    ckpz.save(state, "step200.pt.ckpz", base="step100.pt.ckpz")
    state = ckpz.load("step200.pt.ckpz")     # reads step100.pt.ckpz beside it

The package is pure Python over libckpz through ctypes. It looks for the library at,
in order: the path in the environment variable ``CKPZ_LIBRARY``; ``libckpz.so.0`` or
``libckpz.so`` in the package's own directory; the path recorded by ``make install``
(``ckpz/_install.py``); ``<prefix>/lib/libckpz.so.0`` for a package installed in
``<prefix>/lib/python3/dist-packages``; the repository's ``build/libckpz.so`` when run
from a checkout (``python/ckpz/../../build``); then the system's search path
(``ctypes.util.find_library("ckpz")``, ``libckpz.so.0``).

Files are written to a temporary name in the destination's directory and renamed into
place once complete; on any error (Ctrl-C included) the temporary file is removed and
an existing destination is left untouched. Tensor bytes go to C without Python-level
copies, and ``load`` has C decode straight into the buffer torch.load reads from.
"""

import collections
import contextlib
import io
import mmap
import os
import secrets
import stat
import threading

from . import _lib
from ._lib import Error

__all__ = [
    "save",
    "load",
    "compress_file",
    "decompress_file",
    "save_arrays",
    "load_arrays",
    "list",
    "info",
    "Lossy",
    "base_info",
    "Entry",
    "Info",
    "BaseInfo",
    "Error",
    "library_version",
    "LEVEL_DEFAULT",
]

__version__ = "0.4.0"
LEVEL_DEFAULT = _lib.LEVEL_DEFAULT
_MAX_ORIGINAL = 1 << 40  # load() refuses originals over 1 TiB


def library_version():
    """The loaded libckpz's version string, e.g. "0.1.0"."""
    return _lib.decode(_lib.version_string())


# ---- helpers ---------------------------------------------------------------------------


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("ckpz.save/ckpz.load need PyTorch (import torch failed: %s)" % e) from e
    return torch


def _numpy():
    try:
        import numpy
    except ImportError as e:
        raise ImportError("ckpz.save_arrays/load_arrays need NumPy (import numpy failed: %s)" % e) from e
    return numpy


@contextlib.contextmanager
def _output(dst):
    """A binary file to write dst through: a temporary file in dst's directory, renamed
    to dst when the block ends normally and removed when it raises (anything, Ctrl-C
    included). A file object given as dst is used as is."""
    if not isinstance(dst, (str, bytes, os.PathLike)) and hasattr(dst, "write"):
        yield dst
        return
    dst = os.fsdecode(os.fspath(dst))
    real = os.path.realpath(dst)  # write through a symlink, as open() would
    d, base = os.path.split(real)
    if os.path.isdir(real):
        raise IsADirectoryError(21, "Is a directory", dst)
    for _ in range(100):
        tmp = os.path.join(d, ".%s.%s.tmp" % (base[:200], secrets.token_hex(6)))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError("ckpz: cannot create a temporary file in %s" % d)
    try:
        with open(fd, "wb") as f:
            yield f
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def _input(src):
    """A binary file to read src from (a path, opened unbuffered, or a file object)."""
    if not isinstance(src, (str, bytes, os.PathLike)) and hasattr(src, "read"):
        yield src
        return
    with open(src, "rb", buffering=0) as f:
        yield f


def _regular_size(f):
    """Bytes left in f if it is a regular file at a known position, else None."""
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return max(st.st_size - f.tell(), 0)
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None


class _MemReader(io.RawIOBase):
    """A seekable read-only binary file over a buffer (no copy at construction; each
    readinto is one copy, straight into the caller's memory: torch.load's storages)."""

    def __init__(self, buf):
        super().__init__()
        self._mv = memoryview(buf).cast("B")
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = len(self._mv) + offset
        else:
            raise ValueError("invalid whence (%r)" % (whence,))
        if pos < 0:
            raise ValueError("negative seek position %d" % pos)
        self._pos = pos
        return pos

    def readinto(self, b):
        with memoryview(b) as out:
            out = out.cast("B")
            n = min(len(out), max(len(self._mv) - self._pos, 0))
            out[:n] = self._mv[self._pos : self._pos + n]
        self._pos += n
        return n

    def readall(self):
        data = bytes(self._mv[self._pos :])
        self._pos = len(self._mv)
        return data

    def close(self):
        if not self.closed:
            self._mv.release()
        super().close()


class _Restored:
    """The original bytes of a .ckpz file, decoded into anonymous memory (closed after use)."""

    def __init__(self, mem, size):
        self._mem = mem
        self.size = size

    def reader(self):
        return _MemReader(memoryview(self._mem)[: self.size])

    def close(self):
        mem, self._mem = self._mem, None
        if isinstance(mem, mmap.mmap):
            try:
                mem.close()
            except BufferError:  # a view is still alive somewhere: let the GC unmap it
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def _alloc(n):
    """n bytes of writable memory for C to fill: an anonymous mapping, its pages faulted in
    at once by the kernel where it can (MAP_POPULATE; much cheaper than one fault per page
    from the decoding threads, or bytearray(n)'s zeroing pass)."""
    if n <= 0:
        return bytearray(0)
    if _POPULATE:
        try:
            return mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE)
        except OSError:
            pass
    return mmap.mmap(-1, n)


def _read_whole(f, path):
    """(buffer, size) holding the rest of f; None if f does not start with the ckpz magic
    (f is then left at its starting position when seekable)."""
    start = None
    try:
        start = f.tell()
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    head = f.read(len(_lib.MAGIC))
    if head != _lib.MAGIC:
        if start is not None:
            f.seek(start)
        return None
    size = _regular_size(f)
    if size is not None and start == 0:
        # A whole regular file: map it (private, copy-on-write: C only reads it), so the
        # page cache is read in place instead of copied.
        try:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):
            m = None
        if m is not None:
            if len(m) != size + len(head) or m[:8] != head:
                m.close()
                raise Error(_lib.ERR_READ, "the file changed while being read", path)
            return m, len(m)
    if size is not None:
        size += len(head)
        buf = _alloc(size)
        mv = memoryview(buf)
        try:
            mv[: len(head)] = head
            got = len(head)
            while got < size:
                r = f.readinto(mv[got:])
                if not r:
                    break
                got += r
        finally:
            mv.release()
        if got != size or f.read(1):
            raise Error(_lib.ERR_READ, "the file changed size while being read", path)
        return buf, size
    data = bytearray(head)
    while True:
        piece = f.read(4 << 20)
        if not piece:
            break
        data += piece
    return data, len(data)


# ---- delta files: the base a file is coded against --------------------------------------

_MAX_CHAIN = 4096  # delta files restored one through another, at most (as the CLI)


def _is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


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
        if self._owned and isinstance(buf, mmap.mmap):
            try:
                buf.close()
            except BufferError:  # a view is still alive somewhere: let the GC unmap it
                pass

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


def _file_head_info(path):
    return _head_info(_read_head(path), path)


def _locate(referrer, recorded):
    """Where the base a delta file recorded as `recorded` (bytes) lies, as the CLI finds
    it: that file name, or the name + ".ckpz", in the referring file's directory. Only a
    plain file name is followed (it is data from the file); None if nothing is there."""
    if not recorded or b"/" in recorded or recorded in (b".", b".."):
        return None
    d = os.path.dirname(os.fsencode(os.fspath(referrer)))
    for name in (recorded, recorded + b".ckpz"):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return os.fsdecode(p)
    return None


def _read_head(path):
    with open(path, "rb") as f:
        return f.read(_lib.BASE_PROBE)


def _located_base(path, head):
    """The path of the base the .ckpz file at path (first bytes: head) needs, found beside
    it by its recorded name; None for a stand-alone file or when it is not found."""
    info = _head_info(head, path)
    if info is None or not info.needed:
        return None
    return _locate(path, info.name)


def _map_original(path):
    """A _Base over the original checkpoint at path: mapped copy-on-write (C only reads
    it), or read into memory when it cannot be mapped."""
    with open(path, "rb", buffering=0) as f:
        try:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):  # empty, or not a mappable file
            m = None
        if m is not None:
            return _Base(m, owned=True)
        return _Base(f.readall())


def _base_from_path(path, threads):
    """A _Base for the previous checkpoint at path: an original file, a stand-alone .ckpz,
    or a delta .ckpz, restored through the chain of bases it recorded, each found beside
    the file that names it. The recorded name is path's file name."""
    chain = []  # (path, BaseInfo) of the .ckpz files to restore, path first
    seen = set()
    p, original = path, None
    while True:
        info = _file_head_info(p)
        if info is None:
            original = p
            break
        chain.append((p, info))
        if not info.needed:
            break
        if len(chain) >= _MAX_CHAIN:
            raise Error(_lib.ERR_BASE, "chain of delta files longer than %d" % _MAX_CHAIN, path)
        seen.add(os.path.realpath(p))
        nxt = _locate(p, info.name)
        if nxt is None or os.path.realpath(nxt) in seen:
            break  # restoring p fails below, with the library's message naming its base
        p = nxt
    cur = _map_original(original) if original is not None else None
    try:
        for p, _info in reversed(chain):
            restored = _decompress(p, threads, base=cur, locate=False)
            if cur is not None:
                cur.close()
            cur = _Base(restored._mem, owned=True)
    except BaseException:
        if cur is not None:
            cur.close()
        raise
    cur.name = os.fsencode(os.path.basename(path))
    cur.depth = chain[0][1].depth if chain and chain[0][1].needed else 0
    return cur


def _check_not_own_base(dst, base):
    """Refuses to write a delta file over its own base: it would record itself as its
    base and could never be restored."""
    if not (_is_path(dst) and isinstance(base, (str, os.PathLike))):
        return
    d, b = os.path.realpath(os.fspath(dst)), os.path.realpath(os.fspath(base))
    if os.fsencode(d) == os.fsencode(b):
        raise ValueError("ckpz: %r would replace its own base: write the delta file elsewhere" % (os.fspath(dst),))


def _open_base(spec, threads=0):
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


def _decompress(src, threads=0, base=None, locate=True):
    """_Restored with the original bytes of the .ckpz file src (path or binary file), or
    None if src is not a ckpz file.

    base: an open _Base (used, not closed), a base= value (see _open_base), or None: then,
    when locate is true and src is a path to a delta file, the base it recorded, found
    beside it (none found: the library refuses the file, naming the base it needs)."""
    with _input(src) as f:
        got = _read_whole(f, src)
    if got is None:
        return None
    buf, n = got
    try:
        if isinstance(base, _Base):
            opened = contextlib.nullcontext(base)
        elif base is not None:
            opened = _open_base(base, threads)
        elif locate and _is_path(src):
            opened = _open_base(_located_base(src, bytes(memoryview(buf)[: _lib.BASE_PROBE])), threads)
        else:
            opened = contextlib.nullcontext(None)
        with opened as b:
            return _decompress_buffer(buf, n, src, threads, b)
    finally:
        if isinstance(buf, mmap.mmap):
            try:
                buf.close()
            except BufferError:
                pass


def _decompress_buffer(buf, n, src, threads, base):
    """_Restored with the original of the complete .ckpz file held in buf (n bytes),
    restored against the _Base base (or None)."""
    params = _lib.make_params(threads=threads)
    if base is not None:
        base.apply(params)
    dst = None
    try:
        with _lib.Call(params, src) as call:
            arr, addr = _lib.address(buf)
            try:
                orig = _lib.ctypes.c_uint64()
                call.check(_lib.original_size(call.ctx, addr, n, _lib.ctypes.byref(orig)))
                orig = orig.value
                # The trailer's checksum has been verified, but bound the size before
                # allocating by it: every chunk costs at least MIN_CHUNK_COST bytes of the
                # file and holds at most the header's chunk size.
                chunk = int.from_bytes(bytes(memoryview(buf)[12:16]), "little")
                bound = min(_MAX_ORIGINAL, (n // _lib.MIN_CHUNK_COST + 1) * chunk)
                if orig > bound:
                    raise Error(
                        _lib.ERR_LIMIT,
                        "the file claims an original size of %d bytes, more than a %d-byte "
                        "ckpz file can hold (limit %d)" % (orig, n, bound),
                        src,
                    )
                dst = _alloc(orig)
                darr, daddr = _lib.address(dst)
                try:
                    call.check(_lib.decompress_buffer(call.ctx, _lib.ctypes.byref(params), addr, n, daddr, orig))
                finally:
                    del darr
            finally:
                del arr
    except BaseException:
        if isinstance(dst, mmap.mmap):
            dst.close()
        raise
    return _Restored(dst, orig)


def _policy_bytes(policy, max_mae):
    """The policy text for ckpz_params (None: lossless), checked for type."""
    if max_mae is not None and (isinstance(max_mae, bool) or not isinstance(max_mae, (int, float)) or max_mae < 0):
        raise ValueError("ckpz: max_mae must be a number >= 0, not %r" % (max_mae,))
    if policy is None:
        if max_mae:
            raise ValueError("ckpz: max_mae applies to a lossy policy")
        return None
    if not isinstance(policy, str):
        raise TypeError("ckpz: policy must be a str of rules ('PATTERN MODE [OPTIONS]' per line)")
    return policy.encode("utf-8")


def _compress_stream(read_into, size, dst, level, threads, path, base=None, policy=None, max_mae=None):
    """Compresses what read_into(out_memoryview) -> count (0 at the end) yields into dst
    (a temporary file renamed into place): compression runs on `threads` threads while
    the calling thread feeds input and writes output, and memory stays bounded by a
    few chunks per thread. base: an open _Base to code against (None: stand-alone).
    policy: lossy rules as bytes (None: lossless). Returns the ckpz_stats."""
    params = _lib.make_params(level, threads)
    if base is not None:
        base.apply(params, compress=True)
    if policy is not None:
        params.policy = policy  # ctypes keeps the bytes object alive with params
        params.max_mae = float(max_mae or 0)
    stats = _lib.Stats()
    fed = [0]
    with _output(dst) as out, _lib.Call(params, path) as call:

        def rd(_o, buf, n):
            r = read_into(_lib.view_at(buf, n, writable=True)) if n else 0
            if r is None:
                raise BlockingIOError("ckpz: the input would block")
            fed[0] += r
            return r

        def wr(_o, buf, n):
            out.write(_lib.view_at(buf, n))
            return 0

        err = _lib.compress_stream(
            call.ctx,
            _lib.ctypes.byref(params),
            call.guard(_lib.READ_FN, rd, -1),
            None,
            _lib.SIZE_UNKNOWN if size is None else size,
            call.guard(_lib.WRITE_FN, wr, -1),
            None,
            _lib.ctypes.byref(stats),
        )
        call.check(err)
        if stats.original_bytes != fed[0]:
            raise Error(_lib.ERR_INTERNAL, "byte counts disagree (interrupted?)", path)
    return stats


def _compress_memory(view, dst, level, threads, path=None):
    """Compresses the bytes of `view` into dst; each piece is copied once, straight into
    the library's chunk buffers."""
    src = memoryview(view).cast("B")
    pos = [0]

    def read_into(out):
        k = min(len(out), len(src) - pos[0])
        out[:k] = src[pos[0] : pos[0] + k]
        pos[0] += k
        return k

    try:
        _compress_stream(read_into, len(src), dst, level, threads, path)
    finally:
        src.release()


class _Pipe:
    """A write-only file that hands what torch.save writes (on a worker thread) to the
    library's read callback (on the calling thread).

    Large writes (tensor storages) are not copied here: write() waits until the reader
    has copied the bytes straight into the library's chunk buffers. Small writes (zip
    headers, the pickle) are staged, up to 1 MiB. abort() makes a waiting or later
    write() raise, so the writer thread ends when compression fails.
    """

    _SMALL = 64 << 10

    def __init__(self):
        self._cond = threading.Condition()
        self._small = bytearray()
        self._small_pos = 0
        self._big = None
        self._big_pos = 0
        self._done = False
        self._aborted = False
        self.error = None

    # -- writer side (torch.save's thread) --
    def writable(self):
        return True

    def flush(self):
        pass

    def write(self, b):
        mv = memoryview(b).cast("B")
        n = mv.nbytes
        with self._cond:
            if n < self._SMALL:
                while len(self._small) - self._small_pos > (1 << 20) and not self._aborted:
                    self._cond.wait()
                if self._aborted:
                    raise OSError("ckpz: compression stopped")
                self._small += mv
            else:
                if self._aborted:
                    raise OSError("ckpz: compression stopped")
                self._big, self._big_pos = mv, 0
                self._cond.notify_all()
                while self._big is not None and not self._aborted:
                    self._cond.wait()
                if self._aborted:
                    self._big = None
                    raise OSError("ckpz: compression stopped")
            self._cond.notify_all()
        return n

    def finish(self, error=None):
        with self._cond:
            self.error = error
            self._done = True
            self._cond.notify_all()

    # -- reader side (the calling thread, inside the library's read callback) --
    def read_into(self, out):
        n = len(out)
        with self._cond:
            while True:
                have = len(self._small) - self._small_pos
                if have:  # staged bytes always precede the pending large write
                    k = min(n, have)
                    out[:k] = self._small[self._small_pos : self._small_pos + k]
                    self._small_pos += k
                    if self._small_pos == len(self._small):
                        del self._small[:]
                        self._small_pos = 0
                    self._cond.notify_all()
                    return k
                if self._big is not None:
                    k = min(n, self._big.nbytes - self._big_pos)
                    out[:k] = self._big[self._big_pos : self._big_pos + k]
                    self._big_pos += k
                    if self._big_pos == self._big.nbytes:
                        self._big = None
                        self._cond.notify_all()
                    return k
                if self._done:
                    if self.error is not None:
                        raise self.error
                    return 0
                self._cond.wait()

    def abort(self):
        with self._cond:
            self._aborted = True
            self._cond.notify_all()


# ---- files -----------------------------------------------------------------------------


def compress_file(src, dst, level=LEVEL_DEFAULT, threads=0, base=None, policy=None, max_mae=None):
    """Compresses the file src into the .ckpz file dst, like ``ckpz -o dst src``.

    src and dst are paths (or binary file objects). The format (safetensors, .npy,
    torch.save archive, ...) is detected from the content; anything else is compressed
    as opaque bytes. level is 1..9 (default 3); threads counts the calling thread, 0 =
    all cores. Returns the number of bytes written. Raises ckpz.Error on failure and
    OSError for file errors; dst is written to a temporary name and renamed when done.

    base: the previous checkpoint, to write a delta file like ``ckpz --base PREV``:
    tensors unchanged since it cost almost nothing, changed ones are coded against it.
    Either a path (str or os.PathLike) to the original checkpoint or to its .ckpz, or a
    bytes-like object holding the previous checkpoint's original bytes (bytes is taken
    as content, never as a file name). A .ckpz base is restored in memory first; when it
    is itself a delta file, its own base is found as the CLI finds it: by the name it
    recorded, in the same directory (that name, or the name + ".ckpz"), and so on down
    the chain. The delta file records the base's file name (without directories; none
    for a bytes-like base), size and CRC-32C: restoring it needs the same bytes, and
    ``decompress_file`` / ``ckpz -d`` find it by that name beside the file. dst must not
    be the base file itself (ValueError: the file would depend on itself).

    policy: lossy coding, as ``ckpz --policy``: rules "PATTERN MODE [OPTIONS]", one per
    line, first match wins, e.g. ``"*.exp_avg_sq pointwise-rel 0.1\n* abs 1e-4"``
    (modes lossless, abs E, rel R, pointwise-rel R, int8, bits 8|16; options sym, asym,
    block N, per-channel, pct P, prune RATE, max-mae X; doc/lossy.md). Norms, biases,
    tensors of fewer than two dimensions and integer tensors stay lossless. The file
    then restores values within the stated errors, not the original bytes (``list``
    shows each tensor's errors). With base=, lossy tensors are coded around the base's
    values: pass the previous lossy file as the base (closed loop). max_mae: default
    for rules without their own max-mae.
    """
    _check_not_own_base(dst, base)
    pol = _policy_bytes(policy, max_mae)
    with _open_base(base, threads) as b, _input(src) as f:
        stats = _compress_stream(f.readinto, _regular_size(f), dst, level, threads, src, b, pol, max_mae)
    return stats.compressed_bytes


def decompress_file(src, dst, threads=0, base=None):
    """Restores the original of the .ckpz file src into dst, like ``ckpz -d``.

    Every chunk checksum and the whole content's checksum are verified. Returns the
    number of bytes written. Raises ckpz.Error (corrupt, truncated, not a ckpz file, ...)
    or OSError; dst is written to a temporary name and only renamed into place once
    everything has been verified.

    A delta file (written with base=, or ``ckpz --base``) needs its base: pass it as
    base= (a path to the original checkpoint or to its .ckpz, itself possibly a delta
    file, or a bytes-like object with the base's original bytes; see compress_file), or,
    when src is a path, leave base=None and it is found like ``ckpz -d`` finds it: by the
    name recorded in src, in src's directory (that name or the name + ".ckpz"), a delta
    base restored through its own recorded base in turn. The base is checked by size and
    CRC-32C before use: a wrong or missing one raises ckpz.Error (code ERR_BASE, 15)
    whose message names the size and CRC-32C of the base the file needs.
    """
    if base is None and _is_path(src):
        base = _located_base(src, _read_head(src))
    params = _lib.make_params(threads=threads)
    stats = _lib.Stats()
    with _open_base(base, threads) as b, _input(src) as f, _output(dst) as out, _lib.Call(params, src) as call:
        if b is not None:
            b.apply(params)
        wrote = [0]

        def rd(_o, buf, n):
            if n == 0:
                return 0
            r = f.readinto(_lib.view_at(buf, n, writable=True))
            if r is None:
                raise BlockingIOError("ckpz: the input would block")
            return r

        def wr(_o, buf, n):
            out.write(_lib.view_at(buf, n))
            wrote[0] += n
            return 0

        err = _lib.decompress_stream(
            call.ctx,
            _lib.ctypes.byref(params),
            call.guard(_lib.READ_FN, rd, -1),
            None,
            call.guard(_lib.WRITE_FN, wr, -1),
            None,
            _lib.ctypes.byref(stats),
        )
        call.check(err)
        if stats.original_bytes != wrote[0]:
            raise Error(_lib.ERR_INTERNAL, "byte counts disagree (interrupted?)", src)
    return wrote[0]


# ---- PyTorch ---------------------------------------------------------------------------


def save(obj, path, level=LEVEL_DEFAULT, threads=0, base=None, policy=None, max_mae=None):
    """Saves obj like ``torch.save(obj, path)``, compressed.

    Anything torch.save accepts: state dicts with tensors of any dtype in nested dicts,
    lists and tuples, shared storages and views, and non-tensor values (step counters,
    RNG state, scheduler state). CUDA tensors are written from CPU copies, one storage at
    a time, and keep their device tag exactly as torch.save writes it: ``load`` puts them
    back on the GPU unless map_location says otherwise. The file holds exactly the bytes
    torch.save writes (its zip format), compressed; ``ckpz -d`` restores that .pt.

    path is a filename (written to a temporary name, renamed when complete) or a binary
    file object. level: 1..9 (default 3); threads: 0 = all cores.

    torch.save runs on a helper thread and its writes are compressed as they come: a
    storage's bytes are copied once, straight into libckpz's chunk buffers, and no
    uncompressed copy of the whole file is ever held in memory.

    base: the previous checkpoint file (what an earlier ``save`` wrote, or a torch.save
    ``.pt``), to write a delta file against it: tensors unchanged since then cost a few
    bytes, changed ones are coded against their previous values. A path or a bytes-like
    object with the previous checkpoint's original bytes (see compress_file). ``load``
    (and ``ckpz -d``) then need that base: they find it by its recorded file name in the
    same directory, or take it as base=.

    policy, max_mae: lossy coding (see compress_file); ``load`` then returns the
    restored approximations.
    """
    torch = _torch()
    _lib.make_params(level, threads)  # check the options before starting
    _check_not_own_base(path, base)
    pol = _policy_bytes(policy, max_mae)
    with _open_base(base, threads) as b:
        _save(torch, obj, path, level, threads, b, pol, max_mae)


def _save(torch, obj, path, level, threads, base, policy=None, max_mae=None):
    pipe = _Pipe()

    def writer():
        err = None
        try:
            torch.save(obj, pipe)
        except BaseException as e:
            err = e
        pipe.finish(err)

    t = threading.Thread(target=writer, name="ckpz.save", daemon=True)
    t.start()
    try:
        _compress_stream(pipe.read_into, None, path, level, threads, path, base, policy, max_mae)
    finally:
        pipe.abort()
        t.join()


def load(path, map_location=None, threads=0, base=None, **torch_load_args):
    """Loads what ``save`` wrote, like ``torch.load(path, map_location=map_location)``.

    The file is decoded by libckpz straight into memory that torch.load then reads its
    storages from; every checksum is verified first. A file that is not a .ckpz (a plain
    torch.save file) is passed to torch.load as is. Extra keyword arguments go to
    torch.load. Raises ckpz.Error if the file is corrupt, OSError if it cannot be read.

    A delta file (``save(..., base=...)``) needs its base: base= names it (a path to the
    previous checkpoint, original or .ckpz, or its original bytes), or with base=None
    and path a file name it is found by its recorded name beside the file, as
    decompress_file does. A missing or wrong base raises ckpz.Error (ERR_BASE) naming
    the size and CRC-32C of the base needed. base is ignored for a plain torch.save file.
    """
    torch = _torch()
    restored = _decompress(path, threads, base)
    if restored is None:
        return torch.load(path, map_location=map_location, **torch_load_args)
    with restored, restored.reader() as r:
        return torch.load(r, map_location=map_location, **torch_load_args)


# ---- NumPy -----------------------------------------------------------------------------


def save_arrays(path, *args, level=LEVEL_DEFAULT, threads=0, **arrays):
    """Saves NumPy arrays like ``numpy.savez(path, *args, **arrays)``, compressed.

    The file holds an uncompressed .npz (``ckpz -d`` restores it; numpy.load reads that);
    its arrays go through libckpz's tensor path. Positional arrays are named arr_0,
    arr_1, ... as numpy.savez names them. The keywords level and threads are options,
    not array names (pass such arrays as ``save_arrays(path, **{...})`` under other
    names, or positionally).
    """
    np = _numpy()
    buf = io.BytesIO()
    np.savez(buf, *args, **arrays)
    view = buf.getbuffer()
    try:
        _compress_memory(view, path, level, threads, path)
    finally:
        view.release()


def load_arrays(path, allow_pickle=False, threads=0):
    """Loads what ``save_arrays`` wrote: a dict of name -> numpy.ndarray (in memory, not
    lazy). A plain .npz file (not compressed by ckpz) is read too. allow_pickle is
    numpy.load's (object arrays); off by default."""
    np = _numpy()
    restored = _decompress(path, threads)
    if restored is None:
        with _input(path) as f:
            return _npz_dict(np.load(f, allow_pickle=allow_pickle), path)
    with restored, restored.reader() as r:
        return _npz_dict(np.load(r, allow_pickle=allow_pickle), path)


def _npz_dict(z, path):
    if not hasattr(z, "files"):
        raise ValueError("ckpz.load_arrays: %r holds a single array, not an .npz archive" % (path,))
    with z:
        return {k: z[k] for k in z.files}


# ---- index -----------------------------------------------------------------------------

Entry = collections.namedtuple("Entry", "name dtype shape offset length compressed chunks lossy", defaults=(None,))
Entry.__doc__ = """One entry of a .ckpz file's index: a tensor, or a run of opaque bytes
(name "", dtype "bytes", shape ()). offset and length locate it in the original file;
compressed is the bytes its chunks take in the .ckpz file. lossy: None when the entry
restores byte for byte, else a Lossy with its coding and errors."""

Lossy = collections.namedtuple(
    "Lossy", "mode bound abs_bound mae max_error rmse psnr exceptions changed frozen"
)
Lossy.__doc__ = """How a lossy tensor was coded and the errors it got: mode ("abs", "rel",
"pointwise-rel", "affine"), the bound asked for and the absolute bound applied, mean
absolute, maximum and RMS error, PSNR in dB (against the tensor's value range; inf
without error), elements stored exactly, and with a base: elements that changed since
it and how many of those restore as the base's value (most of them: training frozen)."""

Info = collections.namedtuple(
    "Info", "format_version format original_size compressed_size chunk_size content_checksum entries chunks lossy",
    defaults=(False,),
)
Info.__doc__ = """A .ckpz file's summary; format is the original's ("torch", "safetensors",
"npy", "raw", ...)."""


@contextlib.contextmanager
def _archive(path):
    with _input(path) as f:
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

            handle = _lib.ctypes.c_void_p()
            err = _lib.archive_open(
                call.ctx, _lib.ctypes.byref(params), call.guard(_lib.PREAD_FN, pread, -1), None, size,
                _lib.ctypes.byref(handle),
            )
            call.check(err)
            try:
                yield call, handle
            finally:
                _lib.archive_close(handle)


def _info(handle):
    i = _lib.ArchiveInfo()
    _lib.archive_get_info(handle, _lib.ctypes.byref(i))
    return Info(
        i.format_version, _lib.decode(_lib.input_format_name(i.format)), i.original_size, i.compressed_size,
        i.chunk_size, i.content_checksum, i.entries, i.chunks, bool(i.lossy),
    )


def info(path):
    """Summary of the .ckpz file at path (an Info). Checks the header, trailer and index."""
    with _archive(path) as (_call, handle):
        return _info(handle)


BaseInfo = collections.namedtuple("BaseInfo", "name size checksum depth")
BaseInfo.__doc__ = """What a delta .ckpz file needs to be restored: its base's recorded file name
("" if none was recorded), size in bytes and CRC-32C (of the base's original bytes), and
depth, the number of delta files to restore down to a stand-alone one, this one included
(1: the base is stand-alone), as ``ckpz -l`` shows on its "depends on:" line."""


def base_info(path):
    """A BaseInfo for the delta .ckpz file at path, or None for a stand-alone file.
    Checks the header, trailer and index; the base itself is not needed."""
    with _archive(path) as (_call, handle):
        b = _lib.BaseInfo()
        _lib.archive_get_base(handle, _lib.ctypes.byref(b))
        if not b.needed:
            return None
        return BaseInfo(os.fsdecode(b.name), b.size, b.checksum, b.depth)


def list(path):  # noqa: A001 - the name matches `ckpz -l`
    """The index of the .ckpz file at path: a list of Entry, in file order (tensors with
    name, dtype such as "f32" or "bf16", shape; opaque runs with name "" and dtype
    "bytes"). Only the header, trailer and index are read."""
    out = []
    with _archive(path) as (call, handle):
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
                )
            )
    return out
