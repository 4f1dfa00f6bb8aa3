"""target_bw=: the library's ckpz_tune (the CLI's --target-bw) on what a save is about to
compress.

ckpz_tune samples its input by offset, and the zip archive a save streams has no
offsets to read at before it is written (its CRCs are taken on the way). What the tuner
needs is the tensors' bytes, dtypes and names (the names say which are Adam's moments),
cut into chunks as the compression cuts them: so it is given a safetensors file that
exists only as a read callback over the same storages, one tensor per storage, named
by the first path in the saved object that reaches it ("optim.state.0.exp_avg_sq").
Reading samples copies a few MB; nothing else is touched.
"""

import bisect
import ctypes

from . import _lib

__all__ = []  # private module


def _st_dtype(dtype, nbytes):
    """The ckpz_dtype of a storage of torch dtype (the library's names: torch.float32 is
    "float32"), and its element size; U8 (opaque bytes) where safetensors has no name for
    the library's type, or the bytes are not whole elements of it."""
    name = str(dtype).replace("torch.", "").encode("ascii", "replace")
    dt = _lib.dtype_from_name(name)
    if dt == _lib.DTYPE_NONE or not _lib.dtype_format_name(dt, _lib.INPUT_SAFETENSORS):
        return _lib.DTYPE_U8, 1
    size = _lib.dtype_size(dt)
    return (dt, size) if nbytes % size == 0 else (_lib.DTYPE_U8, 1)


def names(torch, obj):
    """{storage address: dotted path of the first tensor of obj on that storage}."""
    out = {}

    def walk(x, path):
        if isinstance(x, torch.Tensor):
            out.setdefault(x.storage().data_ptr(), ".".join(path) or "tensor")
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, path + [str(k)])
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, path + [str(i)])

    walk(obj, [])
    return out


class _Layout:
    """A safetensors file over the storages, readable at any offset (a PREAD_FN)."""

    def __init__(self, names, pickled, call):
        tensors, self.parts, at = [], [], 0
        for key in sorted(pickled.storages, key=lambda k: int(k) if k.isdigit() else k):
            st = pickled.storages[key]
            n = st.nbytes()
            if not n:
                continue
            dtype, ptr = pickled.origins.get(key, (None, 0))
            dt, size = _st_dtype(dtype, n)
            name = "%s#%s" % (names.get(ptr, "storage"), key)  # unique, and the path for the roles
            tensors.append((name.encode("utf-8", "replace"), dt, (n // size,)))
            self.parts.append((at, n, st.data_ptr()))
            at += n
        self.head = _lib.st_header(call, tensors)  # the library's one writer
        self.size = len(self.head) + at
        self.starts = [p[0] for p in self.parts]

    def _pread(self, _opaque, buf, n, off):
        """A PREAD_FN's body (handed to the library through Call.guard)."""
        if off + n > self.size:
            return -1
        done = 0
        while done < n:
            o = off + done
            if o < len(self.head):
                k = min(n - done, len(self.head) - o)
                ctypes.memmove(buf + done, self.head[o:o + k], k)
            else:
                d = o - len(self.head)
                i = bisect.bisect_right(self.starts, d) - 1
                start, length, addr = self.parts[i]
                k = min(n - done, start + length - d)
                ctypes.memmove(buf + done, addr + (d - start), k)
            done += k
        return 0


def check(target_bw):
    if isinstance(target_bw, bool) or not isinstance(target_bw, (int, float)) or not target_bw > 0:
        raise ValueError("ckpz: target_bw must be a link rate in MB/s > 0, not %r" % (target_bw,))


def choose(torch, names, pickled, params, target_bw, call):
    """Sets params' level, threads and policy (a user's policy is kept) for a link of
    target_bw MB/s, from ckpz_tune on pickled's storages (names: from names()); returns
    the ckpz_tune_result. target_bw was check()ed by the caller."""
    layout = _Layout(names, pickled, call)
    src = _lib.Source()
    _lib.source_init(ctypes.byref(src))
    src.pread = call.guard(_lib.PREAD_FN, layout._pread, -1)
    src.size = layout.size
    tparams = _lib.make_params(params.level, params.threads)
    ctypes.memmove(ctypes.byref(tparams), ctypes.byref(params), ctypes.sizeof(_lib.Params))
    tparams.format = _lib.INPUT_SAFETENSORS
    result = _lib.TuneResult()
    call.check(_lib.tune(call.ctx, ctypes.byref(tparams), ctypes.byref(src), float(target_bw), 0,
                         ctypes.byref(result), _lib.WRITE_FN(), None))
    params.level = result.level
    params.threads = result.threads
    if result.policy and not params.policy:
        params.policy = result.policy
    return result
