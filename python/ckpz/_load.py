"""ckpz.load: torch.load, for .ckpz files and plain torch.save files, without its copies.

load reads the container's index, decodes the small opaque parts of the archive (its
zip headers and the pickle), unpickles with the safe unpickler (_unpickle), allocating
each storage once at its final size, and then has the library decode every tensor's
chunks straight into its storage in parallel (ckpz_archive_read). Peak memory is the
state itself plus a few chunks per thread. map_location moves storages afterwards (one
copy per storage, only when it is not the CPU). A plain torch.save file takes the same
path, its storages read from the file straight into place, or with mmap=True (as
torch.load's) viewed in a map of the file (torch.UntypedStorage.from_file), read by the
kernel as the tensors are touched.

The arguments are torch.load's of torch 2.13 (weights_only, mmap, map_location,
pickle_module, **pickle_load_args, with its environment switch
TORCH_FORCE_WEIGHTS_ONLY_LOAD and its mmap default from torch.utils.serialization.config),
except that ckpz stays safe by default on every release: weights_only=None is
weights_only=True, a pickle_module of one's own needs weights_only=False (torch infers it),
and TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD does not lift the default.
"""

import contextlib
import io
import os
import pickle
import stat

from . import _archive, _bases, _files, _images, _lib, _run, _torchzip, _unpickle, _zipindex
from ._lib import Error

__all__ = []  # private module

_ZIP_MAGIC = b"PK\x03\x04"


def _typed(torch, untyped, dtype):
    try:
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)
    except TypeError:  # torch < 2.0 has no _internal
        return torch.storage.TypedStorage(wrap_storage=untyped, dtype=dtype)


def _decode_ascii(x):
    return x.decode("ascii") if isinstance(x, bytes) else x


def _run_unpickler(data, unpickler_cls, args, path):
    """unpickler_cls's load of data; what goes wrong in a pickle is a ckpz.Error naming
    the file (the safe machine reports its own; the trusted one's are wrapped)."""
    try:
        return unpickler_cls(io.BytesIO(data), **args).load()
    except Error:
        raise
    except Exception as e:
        raise Error(_lib.ERR_CORRUPT, "the pickle failed to load (%s: %s)" % (type(e).__name__, str(e)[:200]),
                    path) from e


def _load_archive(torch, image, fill, map_location, pickle_module, trusted, safe_globals, threads, pickle_load_args,
                  view=None):
    """Loads the torch.save archive whose original bytes `image` reads; fill(spans) puts
    each storage's bytes in place ([(offset, length, untyped storage)]). view(offset,
    length), when given, may return a storage over the image's own memory instead (no
    allocation, no copy), or None."""
    path = image.path
    index = _zipindex.ZipIndex(image.read, image.size, path, read_many=image.read_many)
    prefix = index.prefix()
    pkl = index.get(prefix + "data.pkl")
    if pkl.size > (1 << 31):
        raise Error(_lib.ERR_LIMIT, "the pickle is %d bytes: more than 2 GiB" % pkl.size, path)
    if not _zipindex.byteorder_ok(index, prefix, image.read):
        raise Error(_lib.ERR_INPUT, "the archive's tensors are in the other byte order; load it with torch.load", path)
    data = image.read(pkl.data_offset, pkl.size)
    storages = {}  # key -> (untyped, dtype, location, bytes)
    spans = []

    def persistent_load(pid):
        if not isinstance(pid, tuple) or len(pid) != 5 or _decode_ascii(pid[0]) != "storage":
            raise Error(_lib.ERR_CORRUPT, "unexpected persistent id in the pickle (a %s)" % type(pid).__name__, path)
        storage_type, key, location, numel = pid[1:]
        key, location = _decode_ascii(key), _decode_ascii(location)
        if not isinstance(storage_type, _unpickle.StorageType) or not isinstance(key, str) \
                or not isinstance(location, str) or type(numel) is not int or numel < 0:
            raise Error(_lib.ERR_CORRUPT, "malformed storage reference in the pickle", path)
        nbytes = numel * torch._utils._element_size(storage_type.dtype)
        if key not in storages:
            m = index.get(prefix + "data/" + key)
            if nbytes != m.size:
                raise Error(_lib.ERR_CORRUPT, "storage %s: the pickle says %d elements of %s, the archive holds %d bytes"
                            % (key, numel, storage_type.dtype, m.size), path)
            u = view(m.data_offset, nbytes) if view is not None else None
            if u is None:
                u = torch.UntypedStorage(nbytes)
                if nbytes:
                    spans.append((m.data_offset, nbytes, u))
            storages[key] = (u, storage_type.dtype, location, nbytes)
        u, dtype, _, size = storages[key]
        if dtype != storage_type.dtype or size != nbytes:
            raise Error(_lib.ERR_CORRUPT, "storage %s is named as %d elements of %s and as %d elements of %s"
                        % (key, size // torch._utils._element_size(dtype), dtype, numel, storage_type.dtype), path)
        return _typed(torch, u, dtype)

    base_cls = pickle_module.Unpickler if pickle_module is not None else pickle.Unpickler
    cls = _unpickle.make_unpickler(torch, persistent_load, trusted, safe_globals, path, base_cls)
    try:
        result = _run_unpickler(data, cls, pickle_load_args, path)
        # Tensors are rebuilt only inside their storages; this holds whatever ran (a trusted
        # pickle's own code too): the decoder writes only into storages of the size it read.
        for key, (u, _, _, nbytes) in storages.items():
            if u.nbytes() != nbytes:
                raise Error(_lib.ERR_CORRUPT, "storage %s was resized from %d to %d bytes while unpickling"
                            % (key, nbytes, u.nbytes()), path)
        fill(spans)
        restore = torch.serialization._get_restore_location(map_location)
        moved = {}
        for key, (u, dtype, location, _) in storages.items():
            try:
                moved[key] = restore(u, location)
            except Exception as e:  # a device this machine lacks, a location torch cannot parse
                raise Error(_lib.ERR_INPUT, "storage %s was saved on %r, where it cannot be placed here (%s); "
                            "map_location= says where to load it" % (key, location, str(e)[:200]), path) from None
        if any(moved[k] is not storages[k][0] for k in storages):
            # Some storage goes elsewhere (a GPU): build the objects again around the moved
            # storages (the pickle is small; the tensors' bytes are not read again).
            def persistent_load_moved(pid):
                key = _decode_ascii(pid[2])
                return _typed(torch, moved[key], storages[key][1])

            cls = _unpickle.make_unpickler(torch, persistent_load_moved, trusted, safe_globals, path, base_cls)
            del result
            result = _run_unpickler(data, cls, pickle_load_args, path)
        _validate_sparse(torch, path)
    finally:
        _clear_sparse(torch)  # checked or not (a load that failed), the list is left empty
    return result


def _validate_sparse(torch, path):
    """Sparse tensors' indices against their sizes, once their storages hold the file's
    bytes (torch >= 2 checks them only where sparse invariant checks are switched on:
    switched on here). torch keeps the tensors to check in a list of its own, which the
    caller empties after this, whether the load succeeded or not."""
    validate = getattr(torch._utils, "_validate_loaded_sparse_tensors", None)
    if validate is None:
        return
    checking = getattr(getattr(torch, "sparse", None), "check_sparse_tensor_invariants", None)
    try:
        with checking() if checking is not None else contextlib.nullcontext():
            validate()
    except RuntimeError as e:
        raise Error(_lib.ERR_CORRUPT, "a sparse tensor does not hold together: %s" % str(e)[:200], path) from None


def _clear_sparse(torch):
    """Empties torch's list of sparse tensors to check (process-wide state: a load must
    leave it as it found it, whether it succeeded or not)."""
    del getattr(torch._utils, "_sparse_tensors_to_validate", [])[:]


_TRUE = ("1", "y", "yes", "true")  # what torch.load takes for "set" in its switches


def _check_load_args(torch, weights_only, trusted, pickle_module, mmap, safe_globals):
    """(trusted, mmap) for the load: mmap is "asked" (mmap=True), "default" (mmap=None
    and torch's config.load.mmap set: used where it applies, ignored elsewhere) or None."""
    if os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in _TRUE:
        weights_only, trusted = True, False  # torch's switch: safe loads only, whatever the call says
    if weights_only is not None:
        if weights_only and trusted:
            raise ValueError("ckpz.load: weights_only=True and trusted=True contradict each other")
        trusted = trusted or not weights_only
    if pickle_module is not None and pickle_module is not pickle and not trusted:
        raise ValueError("ckpz.load: a pickle_module of your own is only used with weights_only=False (or "
                         "trusted=True): it cannot be checked (torch.load infers weights_only=False from it; "
                         "ckpz asks you to say so)")
    if mmap is None:
        config = getattr(getattr(torch.utils, "serialization", None), "config", None)
        return trusted, "default" if getattr(getattr(config, "load", None), "mmap", False) else None
    return trusted, "asked" if mmap else None


def load(f, map_location, pickle_module, weights_only, mmap, trusted, safe_globals, threads, base, pickle_load_args):
    torch = _torchzip.torch_module()
    trusted, mmap = _check_load_args(torch, weights_only, trusted, pickle_module, mmap, safe_globals)
    if mmap == "asked" and not _files.is_path(f):
        raise ValueError("ckpz.load: f must be a file path in order to use the mmap argument (as for torch.load)")
    pickle_load_args.setdefault("encoding", "utf-8")  # torch.load's default (Python 2 pickles' strings)
    params = _lib.make_params(threads=threads)
    args = (map_location, pickle_module, trusted, safe_globals, threads, pickle_load_args)
    # Everything runs on a helper thread (_run.run): library calls, with their
    # callbacks, never run on the thread where Ctrl-C lands.
    with _lib.Call(params, f if _files.is_path(f) else None) as call:
        if not _files.is_path(f):
            return _run.run(lambda: _load_fileobj(torch, f, call, base, args), call)
        return _run.run(lambda: _load_path(torch, f, call, base, args, mmap), call)


def _mapped_view(torch, path, size):
    """view(offset, length) for _load_archive: storages over a map of the file at path,
    as torch.load(mmap=True) makes them (private unless torch's default mmap options say
    MAP_SHARED)."""
    import mmap as mmap_module

    get_flags = getattr(torch.serialization, "get_default_mmap_options", None)
    shared = get_flags is not None and get_flags() == getattr(mmap_module, "MAP_SHARED", None)
    whole = torch.UntypedStorage.from_file(os.fsdecode(os.fspath(path)), shared, size)
    return lambda off, n: whole[off : off + n]


def _refuse_mmap(path, what):
    raise ValueError("ckpz.load: mmap=True maps a plain torch.save file; %s is %s, whose tensors are compressed or "
                     "not stored as torch.save stores them: it is decoded into memory (leave mmap unset)"
                     % (os.fspath(path), what))


def _load_path(torch, path, call, base, args, mmap=None):
    """A regular file, read through its descriptor; or a FIFO, read whole into memory
    first as a pipe given as a file object is (its writer awaited without blocking an
    abort), a delta file's base found beside it by its recorded name. Anything else
    (a device, a socket): ckpz.Error naming it."""
    fd = _files.open_regular(path, fifo=True)
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            if mmap == "asked":
                _refuse_mmap(path, "a FIFO")
            mem = _images.Pieces(_images.FifoReader(fd, call, path), call)
            mem.path = path  # named in what the archive's parser reports
            if base is None:
                base = _bases.located_base(path, mem.head(_lib.BASE_PROBE))
            return _load_memory(torch, mem, call, base, args)
        return _load_fd(torch, fd, path, path, call, base, args, mmap)
    finally:
        os.close(fd)


def _load_fd(torch, fd, path, legacy, call, base, args, mmap=None):
    """A regular file open at fd (path: its name for messages and for finding a delta
    file's base, or None; legacy: what torch.load gets for a pre-1.6 file). mmap (a
    path only): a plain torch.save file's storages view a map of it."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, _lib.BASE_PROBE, 0)
    if head[:8] == _lib.MAGIC:
        if mmap == "asked":
            _refuse_mmap(path, "a .ckpz file")
        if base is None and path is not None:
            base = _bases.located_base(path, head)
        return _load_ckpz(torch, call, _lib.FD_PREAD, _lib.Fd(fd, 0, 0), size, base, args)
    if head[:4] == _ZIP_MAGIC:
        image = _images.FileImage(fd, size, path, call)

        def fill(spans):
            for off, n, u in spans:
                image.read_into(off, _lib.view_at(u.data_ptr(), n, writable=True))

        view = _mapped_view(torch, path, size) if mmap and path is not None else None
        return _load_archive(torch, image, fill, *args, view=view)
    if mmap == "asked":  # torch.load says the same of its older format
        _refuse_mmap(path, "not a zip archive (torch's format from before 1.6, or not a checkpoint)")
    return _load_legacy(torch, legacy, *args)


def _load_legacy(torch, f, map_location, pickle_module, trusted, safe_globals, threads, pickle_load_args, name=None):
    """A file in torch's format from before 1.6 (f: what torch.load gets; name: the file
    for messages when f is not a path)."""
    if not trusted:
        raise Error(_lib.ERR_INPUT, "neither a .ckpz file nor a torch.save zip archive; files in torch's format from "
                    "before 1.6 load only with trusted=True (through torch.load)",
                    f if _files.is_path(f) else name)
    return torch.load(f, map_location=map_location, pickle_module=pickle_module or pickle, **pickle_load_args)


def _load_fileobj(torch, f, call, base, args):
    """A binary file object, read from its position: in place when it exposes its memory
    (an mmap, io.BytesIO), else read into memory first (a pipe, a socket)."""
    mv = _images.buffer_of(f)
    if mv is not None:
        with mv:  # released on return: the caller may close its mmap right after
            return _load_memory(torch, _images.MemImage(mv), call, base, args)
    else:
        try:
            fd, pos = f.fileno(), f.tell()
            regular = pos == 0 and stat.S_ISREG(os.fstat(fd).st_mode)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            regular = False
        if regular:  # an open regular file: read through its descriptor, as for a path
            return _load_fd(torch, fd, None, f, call, base, args)
        return _load_memory(torch, _images.Pieces(f, call), call, base, args)


def _load_memory(torch, mem, call, base, args):
    """An archive or .ckpz held in memory (an _images.MemImage or Pieces)."""
    head = mem.head(8)
    if head[:8] == _lib.MAGIC:

        def pread(_o, buf, n, off):
            return 0 if mem.copy_out(off, _lib.view_at(buf, n, writable=True)) else -1

        return _load_ckpz(torch, call, pread, None, mem.size, base, args)
    if head[:4] == _ZIP_MAGIC:
        return _load_archive(torch, mem, _copy_fill(mem), *args)
    return _load_legacy(torch, io.BytesIO(mem.read(0, mem.size)), *args, name=getattr(mem, "path", None))


def _copy_fill(mem):
    """fill(spans) for _load_archive: each storage's bytes copied out of the image mem."""

    def fill(spans):
        for off, n, u in spans:
            if not mem.copy_out(off, _lib.view_at(u.data_ptr(), n, writable=True)):
                raise Error(_lib.ERR_TRUNCATED, "the stream ended inside a tensor")

    return fill


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
        with _archive.opened(call, params, pr, opaque, size) as handle:
            info = _archive.archive_info(handle)
            if info.format != _lib.INPUT_TORCH:
                raise Error(_lib.ERR_INPUT, "holds a %s file, not a torch.save archive (use ckpz.decompress_file)"
                            % _lib.decode(_lib.input_format_name(info.format)), path)
            image = _archive.ArchiveImage(call, handle, path)

            def fill(spans):
                _archive.read_into(call, handle, [(off, n, u.data_ptr()) for off, n, u in spans])

            return _load_archive(torch, image, fill, *args)


def load_decoded(image, threads):
    """The object a decoded stream holds: image is an _images.Pieces filled by a streaming
    restore (a plain torch.save archive, already verified chunk by chunk), loaded with the
    safe unpickler; its storages view the pieces where each lies within one (no second
    copy of the state), and are copied where one crosses pieces."""
    torch = _torchzip.torch_module()
    params = _lib.make_params(threads=threads)
    with _lib.Call(params, None) as call:

        def go():
            if image.head(4) != _ZIP_MAGIC:
                raise Error(_lib.ERR_INPUT, "the stream did not restore to a torch.save archive")
            return _load_archive(torch, image, _copy_fill(image), None, None, False, None, threads, {},
                                 view=lambda off, n: image.view(torch, off, n))

        return _run.run(go, call)

