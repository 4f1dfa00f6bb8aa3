"""ckpz.save: torch.save, compressed, without its copies.

save pickles the object as torch.save does (_torchzip.pickle_state) and gives the
library the pickle and every storage's memory as the members of a zip source
(ckpz_zip_source), with the records and settings of the running torch's writer
(_torchzip.layout): the library reads each tensor where it lies, compresses chunks of
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


class _ZipSource:
    """The library's zip source over the members (ckpz_zip_source), read by the library
    itself: an input for _stream.write."""

    def __init__(self, call, members, opts):
        self.handle = _lib.ctypes.c_void_p()
        call.check(_lib.zip_source_create_opts(call.ctx, members, len(members), _lib.ctypes.byref(opts),
                                               _lib.ctypes.byref(self.handle)))
        self.nbytes = _lib.zip_source_size(self.handle)

    def reader(self, _call):
        return _lib.ZIP_SOURCE_READ, self.handle

    def size(self):
        return self.nbytes

    def os_error(self):
        return None

    def close(self):
        _lib.zip_source_free(self.handle)


def _write_archive(torch, pickled, layout, dst, base, threads, call):
    """Writes the archive of `pickled`, laid out as `layout` says, to dst through the
    library (runs on a helper thread); returns the ckpz_stats."""
    arr, opts, keep = _torchzip.zip_members(torch, pickled, _torchzip.archive_name(dst), layout)
    source = _ZipSource(call, arr, opts)
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
         target_bw=None, no_byteorder=False):
    torch = _torchzip.torch_module()
    _check_save_args(pickle_module, pickle_protocol, use_zip)
    params = _lib.make_params(level, threads, policy, max_mae)
    _bases.check_not_own_base(f, base)
    layout = _torchzip.layout(torch, no_byteorder)  # torch.save's records and settings now, as torch.save reads them
    names = None
    if target_bw is not None:
        _tune.check(target_bw)
        names = _tune.names(torch, obj)  # now: a background save's obj may change later

    def pickle_state(snapshot=None):
        return _torchzip.pickle_state(torch, obj, pickle_module, pickle_protocol, snapshot=snapshot)

    def write(pickled, call):
        if target_bw is not None:
            _tune.choose(torch, names, pickled, call.params, target_bw, call)
        return _write_archive(torch, pickled, layout, f, base, threads, call)

    if background:
        return _background.save(torch, f, params, max_pending, pickle_state, write)
    pickled = pickle_state()
    _run.write(lambda call: write(pickled, call), params, f, _run.wrote(f))
    return None
