"""ckpz.save and ckpz.load: torch.save and torch.load, compressed, without their copies.

save pickles the object as torch.save does (_torchzip.pickle_state) and gives the
library the pickle and every storage's memory as the members of a zip source
(ckpz_zip_source): the library reads each tensor where it lies, compresses chunks of
many tensors in parallel and writes the file itself, while Python waits. Nothing is
serialized to a buffer first and no Python code runs per byte. With background=True the
storages are first copied (the snapshot, the only time the caller waits) and the rest
runs on a thread while training goes on.

load reads the container's index, decodes the small opaque parts of the archive (its
zip headers and the pickle), unpickles with the safe unpickler (_unpickle), allocating
each storage once at its final size, and then has the library decode every tensor's
chunks straight into its storage in parallel (ckpz_archive_read). Peak memory is the
state itself plus a few chunks per thread. map_location moves storages afterwards (one
copy per storage, only when it is not the CPU). A plain torch.save file takes the same
path, its storages read from the file straight into place.
"""

import bisect
import collections
import io
import os
import pickle
import stat
import threading
import time
import warnings

from . import _bases, _files, _lib, _torchzip, _unpickle
from ._lib import Error

__all__ = []  # private module

DEFAULT_PROTOCOL = 2  # torch.save's
_ZIP_MAGIC = b"PK\x03\x04"
_CACHE_ENTRY_MAX = 4 << 20  # opaque runs decoded up front (zip headers, the pickle) at most this long ...
_CACHE_TOTAL_MAX = 256 << 20  # ... and this much in all; the rest is read where needed


def torch_module():
    try:
        import torch
    except ImportError as e:
        raise ImportError("ckpz.save/ckpz.load need PyTorch (import torch failed: %s)" % e) from e
    return torch


# ---- save --------------------------------------------------------------------------------


def _members(pickled, prefix):
    """The ZipMember array for the library and the objects that keep its memory alive."""
    items = pickled.members(prefix)
    arr = (_lib.ZipMember * len(items))()
    keep = []
    for i, (name, data) in enumerate(items):
        nb = name.encode("utf-8")
        keep.append(nb)
        if isinstance(data, bytes):
            keep.append(data)
            ptr = _lib.ctypes.cast(_lib.ctypes.c_char_p(data), _lib.ctypes.c_void_p).value if data else None
            size = len(data)
        else:  # an untyped CPU storage
            ptr = data.data_ptr() or None
            size = data.nbytes()
        arr[i].name = nb
        arr[i].data = ptr
        arr[i].size = size
    return arr, keep


def _compress_members(pickled, dst, opts, call):
    """Writes the archive of `pickled` to dst through the library (runs on a helper
    thread); returns the ckpz_stats."""
    arr, keep = _members(pickled, _torchzip.archive_name(dst))
    params = call.params
    src = _lib.ctypes.c_void_p()
    call.check(_lib.zip_source_create(call.ctx, arr, len(arr), _lib.ctypes.byref(src)))
    try:
        size = _lib.zip_source_size(src)
        stats = _lib.Stats()
        with _bases.open_base(opts["base"], opts["threads"]) as b, _files.Sink(dst) as sink:
            if b is not None:
                b.apply(params, compress=True)
            wr, wr_opaque = sink.writer(call)
            err = _lib.compress_stream(call.ctx, _lib.ctypes.byref(params), _lib.ZIP_SOURCE_READ, src, size, wr,
                                       wr_opaque, _lib.ctypes.byref(stats))
            e = sink.os_error()
            if err and e is not None and not call.aborted:
                raise e
            call.check(err)
            if stats.original_bytes != size:
                raise Error(_lib.ERR_INTERNAL, "the archive has %d bytes, %d were compressed" % (size, stats.original_bytes), dst)
            sink.commit(stats.compressed_bytes)
        del keep
        return stats
    finally:
        _lib.zip_source_free(src)


def _check_save_args(pickle_module, pickle_protocol, use_zip):
    if isinstance(pickle_module, int) and not isinstance(pickle_module, bool):
        raise TypeError(
            "ckpz.save's third argument is torch.save's pickle_module; give ckpz's options by name "
            "(ckpz.save(obj, f, level=%d))" % pickle_module
        )
    if not hasattr(pickle_module, "Pickler"):
        raise TypeError("ckpz.save: pickle_module must provide a Pickler (like the pickle module), not %r" % (pickle_module,))
    if not use_zip:
        raise ValueError(
            "ckpz.save writes torch's zip format (torch >= 1.6); _use_new_zipfile_serialization=False asks "
            "for the older format, which only torch.save writes"
        )
    if not isinstance(pickle_protocol, int) or isinstance(pickle_protocol, bool) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError("ckpz.save: pickle_protocol must be 2..%d, not %r" % (pickle.HIGHEST_PROTOCOL, pickle_protocol))


def _options(level, threads, base, policy, max_mae, dst):
    params = _lib.make_params(level, threads)
    pol = _lib.policy_bytes(policy, max_mae)
    if pol is not None:
        params.policy = pol
        params.max_mae = float(max_mae or 0)
    _bases.check_not_own_base(dst, base)
    return params, {"base": base, "threads": threads, "policy": pol}


def save(obj, f, pickle_module, pickle_protocol, use_zip, level, threads, base, policy, max_mae, background, max_pending):
    torch = torch_module()
    _check_save_args(pickle_module, pickle_protocol, use_zip)
    params, opts = _options(level, threads, base, policy, max_mae, f)
    if background:
        return _background_save(torch, obj, f, pickle_module, pickle_protocol, params, opts, max_pending)
    pickled = _torchzip.pickle_state(torch, obj, pickle_module, pickle_protocol)
    with _lib.Call(params, f) as call:
        _files.run(lambda: _compress_members(pickled, f, opts, call), call)
    return None


# ---- background save ------------------------------------------------------------------------

_pending = collections.deque()  # SaveHandles in flight, oldest first
_pending_lock = threading.Lock()
_pool = {}  # nbytes -> [untyped storages]: the snapshot memory of the last finished save, for reuse
_pool_lock = threading.Lock()


class SaveHandle:
    """A save running in the background (ckpz.save(..., background=True)).

    wait(timeout=None) waits for it and returns None, or raises what the save raised
    (ckpz.Error, OSError, ...); done() says whether it has finished; exception() is the
    error or None. Attributes: path, snapshot_bytes (host memory holding the copy of the
    tensors), snapshot_seconds (how long taking it stalled the caller), stall_seconds
    (the whole time save() blocked, waiting for an earlier save included)."""

    def __init__(self, path, snapshot_bytes, snapshot_seconds):
        self.path = path
        self.snapshot_bytes = snapshot_bytes
        self.snapshot_seconds = snapshot_seconds
        self.stall_seconds = None
        self._done = threading.Event()
        self._error = None
        self._retrieved = False
        self._thread = None

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError("ckpz: the background save of %r is still running" % (self.path,))
        self._retrieved = True
        if self._error is not None:
            raise self._error

    def exception(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError("ckpz: the background save of %r is still running" % (self.path,))
        self._retrieved = True
        return self._error

    def __repr__(self):
        state = "running" if not self.done() else ("failed: %s" % self._error if self._error else "done")
        return "<ckpz.SaveHandle %r %s, snapshot %d bytes>" % (self.path, state, self.snapshot_bytes)

    def __del__(self):
        if self._done.is_set() and self._error is not None and not self._retrieved:
            warnings.warn("ckpz: background save of %r failed and nobody asked: %s" % (self.path, self._error),
                          RuntimeWarning)


def _snapshotter(torch):
    """A function copying an untyped CPU storage into host memory of its own, reusing the
    previous save's snapshot memory when a piece of the same size is free."""

    def snapshot(u):
        n = u.nbytes()
        with _pool_lock:
            free = _pool.get(n)
            dst = free.pop() if free else None
        if dst is None:
            dst = torch.UntypedStorage(n)
        if n:
            view = torch.empty(0, dtype=torch.uint8)
            view.set_(dst)
            src = torch.empty(0, dtype=torch.uint8)
            src.set_(u)
            view.copy_(src)
        return dst

    return snapshot


def _background_save(torch, obj, f, pickle_module, pickle_protocol, params, opts, max_pending):
    if not isinstance(max_pending, int) or max_pending < 1:
        raise ValueError("ckpz.save: max_pending must be an int >= 1, not %r" % (max_pending,))
    if not _files.is_path(f):
        raise TypeError("ckpz.save(background=True) writes to a path, not a file object")
    t0 = time.perf_counter()
    while True:  # at most max_pending saves in flight: wait for the oldest
        with _pending_lock:
            oldest = _pending[0] if len(_pending) >= max_pending else None
        if oldest is None:
            break
        oldest._done.wait()
    t1 = time.perf_counter()
    pickled = _torchzip.pickle_state(torch, obj, pickle_module, pickle_protocol, snapshot=_snapshotter(torch))
    with _pool_lock:
        _pool.clear()  # what this save did not reuse is freed
    t2 = time.perf_counter()
    handle = SaveHandle(f, pickled.nbytes, t2 - t1)
    call = _lib.Call(params, f)

    def work():
        try:
            _compress_members(pickled, f, opts, call)
        except BaseException as e:
            handle._error = e
        finally:
            call.close()
            with _pool_lock:
                for s in pickled.storages.values():
                    _pool.setdefault(s.nbytes(), []).append(s)
            with _pending_lock:
                try:
                    _pending.remove(handle)
                except ValueError:
                    pass
            handle._done.set()

    with _pending_lock:
        _pending.append(handle)
    # not a daemon: the interpreter waits for a save in flight before it exits
    handle._thread = threading.Thread(target=work, name="ckpz-save %s" % os.fspath(f))
    handle._thread.start()
    handle.stall_seconds = time.perf_counter() - t0
    return handle


def wait_saves():
    """Waits for every background save in flight; raises the first one's error."""
    with _pending_lock:
        handles = list(_pending)
    for h in handles:
        h.wait()


# ---- load --------------------------------------------------------------------------------------


class _ArchiveImage:
    """The original bytes of a .ckpz file, read through the library: the small opaque
    runs (zip headers, descriptors, the pickle, the central directory) decoded at once
    and kept, everything else decoded when asked for."""

    def __init__(self, call, handle, path):
        self.call = call
        self.handle = handle
        self.path = path
        info = _lib.ArchiveInfo()
        _lib.archive_get_info(handle, _lib.ctypes.byref(info))
        self.size = info.original_size
        e = _lib.EntryStruct()
        starts, runs = [], []
        total = 0
        for i in range(info.entries):
            call.check(_lib.archive_entry(handle, i, _lib.ctypes.byref(e)))
            if e.dtype == 0 and e.length <= _CACHE_ENTRY_MAX and total + e.length <= _CACHE_TOTAL_MAX:
                starts.append(e.offset)
                runs.append((e.offset, e.length))
                total += e.length
        self._starts, self._data = [], []
        data = self.read_many(runs)
        self._starts, self._data = starts, data

    def _decode(self, spans):
        """bytearrays with the original bytes of each (offset, length), in one library call."""
        bufs = [bytearray(n) for _, n in spans]
        arr = (_lib.Span * len(spans))()
        keep = []
        for i, ((off, n), b) in enumerate(zip(spans, bufs)):
            if n:
                c, addr = _lib.address(b)
                keep.append(c)
                arr[i].offset, arr[i].length, arr[i].dst = off, n, addr
        if spans:
            self.call.check(_lib.archive_read(self.call.ctx, self.handle, arr, len(spans)))
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


class _FileImage:
    """A plain torch.save file, read with pread (stopping when the call is aborted)."""

    def __init__(self, fd, size, path, call):
        self.fd = fd
        self.size = size
        self.path = path
        self.call = call

    def read(self, off, n):
        out = bytearray(n)
        self.read_into(off, memoryview(out))
        return bytes(out)

    def read_many(self, spans):
        return [self.read(o, n) for o, n in spans]

    def read_into(self, off, mv):
        got = 0
        n = len(mv)
        while got < n:
            if self.call.aborted:
                raise Error(_lib.ERR_ABORTED, "aborted", self.path)
            r = os.preadv(self.fd, [mv[got : got + (64 << 20)]], off + got)  # pieces: abort is seen
            if r <= 0:
                raise Error(_lib.ERR_TRUNCATED, "the file ended inside a tensor", self.path)
            got += r


def _typed(torch, untyped, dtype):
    try:
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)
    except TypeError:  # torch < 2.0 has no _internal
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype)


def _decode_ascii(x):
    return x.decode("ascii") if isinstance(x, bytes) else x


def _run_unpickler(data, unpickler_cls, args):
    u = unpickler_cls(io.BytesIO(data), **args)
    return u.load()


def _load_archive(torch, image, fill, map_location, pickle_module, trusted, safe_globals, threads, pickle_load_args):
    """Loads the torch.save archive whose original bytes `image` reads; fill(spans) puts
    each storage's bytes in place ([(offset, length, untyped storage)])."""
    path = image.path
    index = _torchzip.ZipIndex(image.read, image.size, path, read_many=image.read_many)
    prefix = index.prefix()
    pkl = index.get(prefix + "data.pkl")
    if pkl.size > (1 << 31):
        raise Error(_lib.ERR_LIMIT, "the pickle is %d bytes: more than 2 GiB" % pkl.size, path)
    if not _torchzip.byteorder_ok(index, prefix, image.read):
        raise Error(_lib.ERR_INPUT, "the archive's tensors are in the other byte order; load it with torch.load", path)
    data = image.read(pkl.data_offset, pkl.size)
    storages = {}  # key -> (untyped, dtype, location)
    spans = []

    def persistent_load(pid):
        if not isinstance(pid, tuple) or len(pid) != 5 or _decode_ascii(pid[0]) != "storage":
            raise pickle.UnpicklingError("unexpected persistent id in the pickle: %r" % (pid[:1] if isinstance(pid, tuple) else pid,))
        storage_type, key, location, numel = pid[1:]
        key, location = _decode_ascii(key), _decode_ascii(location)
        if not isinstance(storage_type, _unpickle._StorageType) or not isinstance(key, str) or not isinstance(numel, int):
            raise pickle.UnpicklingError("malformed storage reference %r" % (pid[1:3],))
        if key not in storages:
            m = index.get(prefix + "data/" + key)
            nbytes = numel * torch._utils._element_size(storage_type.dtype)
            if numel < 0 or nbytes != m.size:
                raise Error(_lib.ERR_CORRUPT, "storage %s: the pickle says %d elements of %s, the archive holds %d bytes"
                            % (key, numel, storage_type.dtype, m.size), path)
            u = torch.UntypedStorage(nbytes)
            storages[key] = (u, storage_type.dtype, location)
            if nbytes:
                spans.append((m.data_offset, nbytes, u))
        u, dtype, _ = storages[key]
        return _typed(torch, u, dtype)

    base_cls = pickle_module.Unpickler if pickle_module is not None else pickle.Unpickler
    cls = _unpickle.make_unpickler(torch, persistent_load, trusted, safe_globals, path, base_cls)
    result = _run_unpickler(data, cls, pickle_load_args)
    fill(spans)
    restore = torch.serialization._get_restore_location(map_location)
    moved = {}
    for key, (u, dtype, location) in storages.items():
        moved[key] = restore(u, location)
    if any(moved[k] is not storages[k][0] for k in storages):
        # Some storage goes elsewhere (a GPU): build the objects again around the moved
        # storages (the pickle is small; the tensors' bytes are not read again).
        def persistent_load_moved(pid):
            key = _decode_ascii(pid[2])
            return _typed(torch, moved[key], storages[key][1])

        cls = _unpickle.make_unpickler(torch, persistent_load_moved, trusted, safe_globals, path, base_cls)
        del result
        result = _run_unpickler(data, cls, pickle_load_args)
    validate = getattr(torch._utils, "_validate_loaded_sparse_tensors", None)
    if validate is not None:
        validate()
    return result


def _spans_array(spans):
    arr = (_lib.Span * len(spans))()
    for i, (off, n, u) in enumerate(spans):
        arr[i].offset, arr[i].length, arr[i].dst = off, n, u.data_ptr()
    return arr


def _check_load_args(torch, weights_only, trusted, pickle_module, mmap, safe_globals):
    if weights_only is not None:
        if weights_only and trusted:
            raise ValueError("ckpz.load: weights_only=True and trusted=True contradict each other")
        trusted = trusted or not weights_only
    if pickle_module is not None and pickle_module is not pickle and not trusted:
        raise ValueError("ckpz.load: a pickle_module of your own is only used with trusted=True (it cannot be checked)")
    if mmap:
        raise ValueError("ckpz.load: mmap=True is not supported (a .ckpz file is decoded into memory)")
    return trusted


def load(f, map_location, pickle_module, weights_only, mmap, trusted, safe_globals, threads, base, pickle_load_args):
    torch = torch_module()
    trusted = _check_load_args(torch, weights_only, trusted, pickle_module, mmap, safe_globals)
    params = _lib.make_params(threads=threads)
    args = (map_location, pickle_module, trusted, safe_globals, threads, pickle_load_args)
    # Everything runs on a helper thread (_files.run): library calls, with their
    # callbacks, never run on the thread where Ctrl-C lands.
    with _lib.Call(params, f if _files.is_path(f) else None) as call:
        if not _files.is_path(f):
            return _files.run(lambda: _load_fileobj(torch, f, call, base, args), call)
        return _files.run(lambda: _load_path(torch, f, call, base, args), call)


def _load_path(torch, path, call, base, args):
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return _load_fd(torch, fd, path, path, call, base, args)
    finally:
        os.close(fd)


def _load_fd(torch, fd, path, legacy, call, base, args):
    """A regular file open at fd (path: its name for messages and for finding a delta
    file's base, or None; legacy: what torch.load gets for a pre-1.6 file)."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, _lib.BASE_PROBE, 0)
    if head[:8] == _lib.MAGIC:
        if base is None and path is not None:
            base = _bases.located_base(path, head)
        return _load_ckpz(torch, call, _lib.FD_PREAD, _lib.Fd(fd, 0, 0), size, base, args)
    if head[:4] == _ZIP_MAGIC:
        image = _FileImage(fd, size, path, call)

        def fill(spans):
            for off, n, u in spans:
                image.read_into(off, _lib.view_at(u.data_ptr(), n, writable=True))

        return _load_archive(torch, image, fill, *args)
    return _load_legacy(torch, legacy, *args)


def _load_legacy(torch, f, map_location, pickle_module, trusted, safe_globals, threads, pickle_load_args):
    if not trusted:
        raise Error(_lib.ERR_INPUT, "neither a .ckpz file nor a torch.save zip archive; files in torch's format from "
                    "before 1.6 load only with trusted=True (through torch.load)", f if _files.is_path(f) else None)
    return torch.load(f, map_location=map_location, pickle_module=pickle_module or pickle, **pickle_load_args)


def _buffer_of(f):
    """A read-only byte view of f's content from its position when f exposes its memory
    (an mmap, or io.BytesIO), else None."""
    try:
        if isinstance(f, io.BytesIO):
            mv = f.getbuffer()
        else:
            mv = memoryview(f)
        mv = mv.cast("B")
    except (TypeError, ValueError, BufferError):
        return None
    try:
        pos = f.tell()
    except (AttributeError, OSError, ValueError):
        pos = 0
    return mv[pos:]


class _Pieces:
    """What a stream held, read into memory in pieces of memory faulted in at once
    (_files.alloc: one call, not a fault per page), read back at any offset. Pieces
    double from 1 MiB to 64 MiB, so a small stream takes little memory."""

    PIECE = 64 << 20

    def __init__(self, f, call):
        self.path = None
        self.pieces, self.ends = [], []
        total = 0
        while True:
            if call.aborted:
                raise Error(_lib.ERR_ABORTED, "aborted")
            buf = _files.alloc(min(self.PIECE, max(1 << 20, total)))  # pieces grow with the stream
            mv = memoryview(buf)
            n = 0
            while n < len(mv):
                r = f.readinto(mv[n:]) if hasattr(f, "readinto") else None
                if r is None:  # no readinto: read() what comes
                    piece = f.read(len(mv) - n)
                    r = len(piece)
                    mv[n : n + r] = piece
                if not r:
                    break
                n += r
            if n:
                self.pieces.append(mv[:n])
                total += n
                self.ends.append(total)
            if n < len(mv):
                break
        self.size = total

    def head(self, n):
        return bytes(self.pieces[0][:n]) if self.pieces else b""

    def copy_out(self, off, out):
        """Copies len(out) bytes at off into the memoryview out; False past the end."""
        n = len(out)
        if off > self.size or n > self.size - off:
            return False
        k = bisect.bisect_right(self.ends, off)
        done = 0
        while done < n:
            start = self.ends[k] - len(self.pieces[k])
            take = min(n - done, self.ends[k] - (off + done))
            at = off + done - start
            out[done : done + take] = self.pieces[k][at : at + take]
            done += take
            k += 1
        return True

    def read(self, off, n):
        out = bytearray(n)
        if not self.copy_out(off, memoryview(out)):
            raise Error(_lib.ERR_TRUNCATED, "the stream ended inside the archive")
        return bytes(out)

    def read_many(self, spans):
        return [self.read(o, n) for o, n in spans]


def _load_fileobj(torch, f, call, base, args):
    """A binary file object, read from its position: in place when it exposes its memory
    (an mmap, io.BytesIO), else read into memory first (a pipe, a socket)."""
    mv = _buffer_of(f)
    if mv is not None:
        with mv:  # released on return: the caller may close its mmap right after
            return _load_memory(torch, _MemImage(mv), call, base, args)
    else:
        try:
            fd, pos = f.fileno(), f.tell()
            regular = pos == 0 and stat.S_ISREG(os.fstat(fd).st_mode)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            regular = False
        if regular:  # an open regular file: read through its descriptor, as for a path
            return _load_fd(torch, fd, None, f, call, base, args)
        return _load_memory(torch, _Pieces(f, call), call, base, args)


def _load_memory(torch, mem, call, base, args):
    """An archive or .ckpz held in memory (a _MemImage or _Pieces)."""
    head = mem.head(8)
    if head[:8] == _lib.MAGIC:

        def pread(_o, buf, n, off):
            return 0 if mem.copy_out(off, _lib.view_at(buf, n, writable=True)) else -1

        return _load_ckpz(torch, call, pread, None, mem.size, base, args)
    if head[:4] == _ZIP_MAGIC:

        def fill(spans):
            for off, n, u in spans:
                if not mem.copy_out(off, _lib.view_at(u.data_ptr(), n, writable=True)):
                    raise Error(_lib.ERR_TRUNCATED, "the stream ended inside a tensor")

        return _load_archive(torch, mem, fill, *args)
    return _load_legacy(torch, io.BytesIO(mem.read(0, mem.size)), *args)


class _MemImage:
    """An archive held in memory (a memoryview)."""

    def __init__(self, data):
        self.data = data
        self.size = len(data)
        self.path = None

    def head(self, n):
        return bytes(self.data[:n])

    def copy_out(self, off, out):
        n = len(out)
        if off > self.size or n > self.size - off:
            return False
        out[:] = self.data[off : off + n]
        return True

    def read(self, off, n):
        if off > self.size or n > self.size - off:
            raise Error(_lib.ERR_TRUNCATED, "the archive ends early")
        return bytes(self.data[off : off + n])

    def read_many(self, spans):
        return [self.read(o, n) for o, n in spans]


def _load_ckpz(torch, call, pread, fdstruct, size, base, args):
    path = call.path
    threads = args[4]
    params = call.params
    with _bases.open_base(base, threads) as b:
        if b is not None:
            b.apply(params)
        if fdstruct is not None:
            pr, opaque = pread, _lib.ctypes.cast(_lib.ctypes.pointer(fdstruct), _lib.ctypes.c_void_p)
        else:
            pr, opaque = call.guard(_lib.PREAD_FN, pread, -1), None
        handle = _lib.ctypes.c_void_p()
        call.check(_lib.archive_open(call.ctx, _lib.ctypes.byref(params), pr, opaque, size, _lib.ctypes.byref(handle)))
        try:
            info = _lib.ArchiveInfo()
            _lib.archive_get_info(handle, _lib.ctypes.byref(info))
            if info.format != 4:  # CKPZ_INPUT_TORCH
                raise Error(_lib.ERR_INPUT, "holds a %s file, not a torch.save archive (use ckpz.decompress_file)"
                            % _lib.decode(_lib.input_format_name(info.format)), path)
            image = _ArchiveImage(call, handle, path)

            def fill(spans):
                if spans:
                    arr = _spans_array(spans)
                    call.check(_lib.archive_read(call.ctx, handle, arr, len(spans)))

            return _load_archive(torch, image, fill, *args)
        finally:
            _lib.archive_close(handle)
