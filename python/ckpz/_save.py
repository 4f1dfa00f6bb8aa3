"""ckpz.save: torch.save, compressed, without its copies.

save pickles the object as torch.save does (_torchzip.pickle_state) and gives the
library the pickle and every storage's memory as the members of a zip source
(ckpz_zip_source): the library reads each tensor where it lies, compresses chunks of
many tensors in parallel and writes the file itself (_stream.write), while Python
waits. Nothing is serialized to a buffer first and no Python code runs per byte. With
background=True the storages are first copied (the snapshot, the only time the caller
waits) and the rest runs on a thread while training goes on (_background).
"""

import contextlib
import pickle

from . import _background, _bases, _lib, _run, _stream, _torchzip, _tune
from ._lib import Error

__all__ = []  # private module


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


class _ZipSource:
    """The library's zip source over the members (ckpz_zip_source), read by the library
    itself: an input for _stream.write."""

    def __init__(self, call, members):
        self.handle = _lib.ctypes.c_void_p()
        call.check(_lib.zip_source_create(call.ctx, members, len(members), _lib.ctypes.byref(self.handle)))
        self.nbytes = _lib.zip_source_size(self.handle)

    def reader(self, _call):
        return _lib.ZIP_SOURCE_READ, self.handle

    def size(self):
        return self.nbytes

    def os_error(self):
        return None

    def close(self):
        _lib.zip_source_free(self.handle)


def _write_archive(pickled, dst, base, threads, call):
    """Writes the archive of `pickled` to dst through the library (runs on a helper
    thread); returns the ckpz_stats."""
    arr, keep = _members(pickled, _torchzip.archive_name(dst))
    source = _ZipSource(call, arr)
    try:

        def check(stats):
            if stats.original_bytes != source.nbytes:
                raise Error(_lib.ERR_INTERNAL, "the archive has %d bytes, %d were compressed"
                            % (source.nbytes, stats.original_bytes), dst)

        return _stream.write(call, True, lambda: contextlib.nullcontext(source), dst, base, threads, source.nbytes,
                             check)
    finally:
        source.close()
        del keep


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


def save(obj, f, pickle_module, pickle_protocol, use_zip, level, threads, base, policy, max_mae, background, max_pending,
         target_bw=None):
    torch = _torchzip.torch_module()
    _check_save_args(pickle_module, pickle_protocol, use_zip)
    params = _lib.make_params(level, threads, policy, max_mae)
    _bases.check_not_own_base(f, base)
    names = None
    if target_bw is not None:
        _tune.check(target_bw)
        names = _tune.names(torch, obj)  # now: a background save's obj may change later

    def pickle_state(snapshot=None):
        return _torchzip.pickle_state(torch, obj, pickle_module, pickle_protocol, snapshot=snapshot)

    def write(pickled, call):
        if target_bw is not None:
            _tune.choose(torch, names, pickled, call.params, target_bw, call)
        return _write_archive(pickled, f, base, threads, call)

    if background:
        return _background.save(torch, f, params, max_pending, pickle_state, write)
    pickled = pickle_state()
    _run.write(lambda call: write(pickled, call), params, f, _run.wrote(f))
    return None
