"""Whole files through the library: compress_file, decompress_file, and the writing half
of every save.

One driver (`write`) serves them all: it opens the base (for a delta file), takes the
input (a file by descriptor, a file object by callback, or the zip source of a torch
save), lets the library stream it into a temporary file beside the destination, and
renames that into place only once the library returned success and every byte it
produced was counted out. It runs on the helper thread (_run), so Ctrl-C stops it
cleanly and nothing that creates a file can be interrupted between creating it and
taking charge of removing it.
"""

from . import _bases, _files, _lib, _run
from ._lib import Error

__all__ = []  # private module


def write(call, compress, open_source, dst, base, threads=0, size=None, check=None):
    """Compresses (or restores) what open_source() gives (a context manager yielding an
    object with reader(call), size() and os_error(), like _files.Source) into dst, a path
    or a binary file object, through the library call `call`; check(stats), when given,
    may refuse the result before it is committed. Returns the ckpz_stats. Runs where it
    is called: on the helper thread, from `stream` or a save."""
    params = call.params
    stats = _lib.Stats()
    with _bases.open_base(base, threads) as b, open_source() as source, _files.Sink(dst) as sink:
        if b is not None:
            b.apply(params, compress=compress)
        rd, rd_opaque = source.reader(call)
        wr, wr_opaque = sink.writer(call)
        if compress:
            n = source.size() if size is None else size
            err = _lib.compress_stream(call.ctx, _lib.ctypes.byref(params), rd, rd_opaque,
                                       _lib.SIZE_UNKNOWN if n is None else n, wr, wr_opaque,
                                       _lib.ctypes.byref(stats))
        else:
            err = _lib.decompress_stream(call.ctx, _lib.ctypes.byref(params), rd, rd_opaque, wr, wr_opaque,
                                         _lib.ctypes.byref(stats))
        e = source.os_error() or sink.os_error()
        if err and e is not None and not call.aborted:
            raise e
        call.check(err)
        if check is not None:
            check(stats)
        if call.aborted:  # interrupted after the library's last progress report: not committed
            raise Error(_lib.ERR_ABORTED, "aborted", dst if _files.is_path(dst) else None)
        sink.commit(stats.compressed_bytes if compress else stats.original_bytes)
    return stats


def stream(compress, src, dst, params, base, path, threads=0, size=None, what="the save"):
    """Compresses (or restores) src (a path or a binary file object) into dst on the
    helper thread (path names the file in messages; what names the operation in the
    KeyboardInterrupt of an interrupt that came once dst was written: _run.write).
    Returns the ckpz_stats."""
    return _run.write(lambda call: write(call, compress, lambda: _files.Source(src, call), dst, base, threads, size),
                      params, path, _run.wrote(dst, what))


def compress_file(src, dst, level, threads, base, policy, max_mae):
    _bases.check_not_own_base(dst, base)
    params = _lib.make_params(level, threads, policy, max_mae)
    return stream(True, src, dst, params, base, src, threads, what="compress_file").compressed_bytes


def decompress_file(src, dst, threads, base):
    if base is None and _files.is_path(src):
        head = _bases.read_head(src)  # None for a stream (a FIFO): its first bytes are its data
        base = _bases.located_base(src, head) if head is not None else None
    params = _lib.make_params(threads=threads)
    return stream(False, src, dst, params, base, src, threads, what="decompress_file").original_bytes

