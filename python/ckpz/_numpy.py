"""save_arrays and load_arrays: NumPy arrays as a compressed .npz.

numpy.savez writes the archive into memory and the library compresses it like any .npz
file (each array through the tensor path); loading restores the whole file into an
anonymous mapping, numpy.load reads each array out of it, and the mapping is gone when
the dict is returned. NumPy is imported only when these are called: the rest of the
package does not need it.
"""

import io

from . import _bases, _files, _lib, _stream

__all__ = []  # private module


def _numpy():
    try:
        import numpy
    except ImportError as e:
        raise ImportError("ckpz.save_arrays/load_arrays need NumPy (import numpy failed: %s)" % e) from e
    return numpy


def save_arrays(path, args, level, threads, arrays):
    np = _numpy()
    buf = io.BytesIO()
    np.savez(buf, *args, **arrays)
    size = len(buf.getbuffer())
    buf.seek(0)
    _stream.stream(True, buf, path, _lib.make_params(level, threads), None, path, threads, size)


def load_arrays(path, allow_pickle, threads):
    np = _numpy()
    restored = _bases.decompress_whole(path, threads)
    if restored is None:
        with _files.open_input(path) as f:
            return _npz_dict(np.load(f, allow_pickle=allow_pickle), path)
    with restored, restored.reader() as r:
        return _npz_dict(np.load(r, allow_pickle=allow_pickle), path)


def _npz_dict(z, path):
    if not hasattr(z, "files"):
        raise ValueError("ckpz.load_arrays: %r holds a single array, not an .npz archive" % (path,))
    with z:
        return {k: z[k] for k in z.files}
