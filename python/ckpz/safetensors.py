"""ckpz.safetensors: safetensors files, compressed, with the API of safetensors.torch::

    import ckpz.safetensors
    ckpz.safetensors.save_file(model.state_dict(), "model.safetensors.ckpz", metadata={"format": "pt"})
    tensors = ckpz.safetensors.load_file("model.safetensors.ckpz")   # a plain .safetensors too
    tensors = ckpz.safetensors.load(ckpz.safetensors.save(tensors))  # bytes

A .safetensors.ckpz file is a safetensors file compressed by libckpz: ``ckpz -d`` restores
the bytes ``safetensors.torch.save_file`` writes for the same dict. The format is written
without that package, its header by the library's one writer (ckpz_safetensors_header):
8 bytes of header length, compact JSON padded with spaces to 8 bytes, the tensors sorted
as the package sorts them (by dtype in its order, then by name). It writes "__metadata__"
in a hash map's order, which changes from run to run; ckpz sorts the keys (the same
JSON, in another order, for two keys or more).

Saving streams the file to the library out of the tensors' memory (a read callback: no
uncompressed copy; a CUDA tensor copied to the host in its turn), the format named so that
each tensor is coded by its dtype: 256 MB of BF16 N(0, 0.02) in 0.48 s on one core (555 MB/s,
1.52x; safetensors.torch.save_file takes 1.5 s to write them uncompressed). Loading
decodes the header alone, checks it, allocates each tensor once and decodes all of them
into place in one library call (420 MB/s on one core); a plain file is read with pread.

Every byte is hostile: nothing is allocated before the header passed the package's
rules and limits (_layout; nesting measured before parsing, so that no recursion can
run away; doc/python.md lists the checks). Every refusal is a ckpz.Error naming the file
and the tensor at fault.
"""

import contextlib
import ctypes
import io
import json
import os
import re
import struct
import sys

from . import _archive, _bases, _files, _images, _lib, _run, _stream, _torchzip
from ._lib import LEVEL_DEFAULT, Error

__all__ = ["save_file", "load_file", "save", "load"]

HEADER_MAX = 100_000_000  # bytes of JSON, as the safetensors package
DEPTH_MAX = 64  # JSON nesting, as libckpz's reader (3 levels mean anything)
VALUES_MAX = 2_000_000  # commas outside strings: ~7 a tensor, so ~280k tensors (~100 B each parsed)
NDIM_MAX = 64
_META = "__metadata__"
_NOT_C_UTF8 = re.compile("[\0\ud800-\udfff]")  # what UTF-8 (surrogates) or a C string (NUL) cannot hold

# The safetensors dtypes torch holds, NAME:torch attribute:bytes, in the order the package
# writes tensors (then by name; checked against safetensors 0.8.0 by test_safetensors).
# "F4" (float4_e2m1fn_x2: two values a byte) is left out: the package cannot load it either.
_DTYPES = [tuple(d.split(":")) for d in (
    "U64:uint64:8 I64:int64:8 F64:float64:8 C64:complex64:8 F32:float32:4 U32:uint32:4 I32:int32:4 "
    "BF16:bfloat16:2 F16:float16:2 U16:uint16:2 I16:int16:2 F8_E5M2FNUZ:float8_e5m2fnuz:1 "
    "F8_E4M3FNUZ:float8_e4m3fnuz:1 F8_E8M0:float8_e8m0fnu:1 F8_E4M3:float8_e4m3fn:1 F8_E5M2:float8_e5m2:1 "
    "I8:int8:1 U8:uint8:1 BOOL:bool:1").split()]


def _dtypes(torch):
    """({torch dtype: (rank, name, size)}, {name: (torch dtype, size)}) for the running torch."""
    by_torch, by_name = {}, {}
    for rank, (name, attr, size) in enumerate(_DTYPES):
        dt = getattr(torch, attr, None)
        if isinstance(dt, torch.dtype):
            by_torch[dt], by_name[name] = (rank, name, int(size)), (dt, int(size))
    return by_torch, by_name


def _refuse(path, message, code=_lib.ERR_INPUT):
    return Error(code, message, path)


# ---- saving ------------------------------------------------------------------------------


def _entry(torch, by_torch, name, t, path):
    """(rank, name, dtype name, tensor, bytes) of one tensor to save, or a ckpz.Error."""
    if not isinstance(name, str):
        raise _refuse(path, "tensor names must be str, not %s (%r)" % (type(name).__name__, name))
    what = "tensor %r" % name
    if name == _META or _NOT_C_UTF8.search(name):
        raise _refuse(path, "%s: not a tensor name (the header's metadata, a NUL, or not UTF-8)" % what)
    if not isinstance(t, torch.Tensor):
        raise _refuse(path, "%s is a %s, not a torch.Tensor" % (what, type(t).__name__))
    if t.layout != torch.strided or t.device.type == "meta":
        raise _refuse(path, "%s is %s on %s: safetensors holds dense tensors' data" % (what, t.layout, t.device))
    if t.dtype not in by_torch:
        raise _refuse(path, "%s has dtype %s, which a safetensors file cannot hold" % (what, t.dtype))
    if not t.is_contiguous():
        raise _refuse(path, "%s is not contiguous: save t.contiguous() (safetensors.torch refuses it too)" % what)
    rank, code, size = by_torch[t.dtype]
    return rank, name, (code.encode("ascii"), size), t, t.numel() * size


def _check_disjoint(entries, path):
    """Refuses tensors whose bytes overlap, as the safetensors package does (disjoint views are fine)."""
    prev = None
    for dev, ptr, n, name in sorted((str(t.device), t.data_ptr(), n, name) for _, name, _, t, n in entries if n):
        if prev is not None and prev[0] == dev and ptr < prev[1]:
            raise _refuse(path, "tensors %r and %r share memory: a safetensors file holds each tensor's own "
                          "bytes (save one of them, or clones)" % (prev[2], name))
        if prev is None or prev[0] != dev or ptr + n > prev[1]:
            prev = (dev, ptr + n, name)


def _metadata(metadata, path):
    """[(key, value)] of metadata as UTF-8 bytes, sorted by key."""
    if not isinstance(metadata, dict):
        raise _refuse(path, "metadata must be a dict of str -> str, not %s" % type(metadata).__name__)
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str) or _NOT_C_UTF8.search(k + v):
            raise _refuse(path, "metadata must map str to str (UTF-8, no NUL): %r -> %r" % (k, v))
    return [(k.encode("utf-8"), v.encode("utf-8")) for k, v in sorted(metadata.items())]


class _Plan:
    """The safetensors file of a dict of tensors (checked), read front to back by the library
    through a READ_FN: the header, then each tensor's memory. An input for _stream.write."""

    def __init__(self, torch, tensors, metadata, path):
        if sys.byteorder != "little":
            raise _refuse(path, "safetensors files are little-endian; this machine is not")
        if not isinstance(tensors, dict):
            raise _refuse(path, "expected a dict of str -> torch.Tensor, not %s" % type(tensors).__name__)
        by_torch = _dtypes(torch)[0]
        entries = sorted(_entry(torch, by_torch, k, t, path) for k, t in tensors.items())
        _check_disjoint(entries, path)
        meta = None if metadata is None else _metadata(metadata, path)
        with _lib.Call(None, path) as call:  # the header from the library's one writer
            head = _lib.st_header(call, [(name.encode("utf-8"), dt, t.shape) for _, name, dt, t, _ in entries], meta)
        if len(head) - 8 > HEADER_MAX:
            raise _refuse(path, "a header of %d bytes, over safetensors' limit" % (len(head) - 8), _lib.ERR_LIMIT)
        self.parts = [(ctypes.create_string_buffer(head, len(head)), len(head))] + [(t, n) for _, _, _, t, n in entries]
        self.nbytes = sum(n for _, n in self.parts)
        self._i, self._at, self._addr, self._held = 0, 0, None, None

    def size(self):
        return self.nbytes

    def os_error(self):
        return None

    def reader(self, call):
        return call.guard(_lib.READ_FN, self._read, -1), None

    def _read(self, _opaque, buf, n):
        done = 0
        while done < n and self._i < len(self.parts):
            obj, length = self.parts[self._i]
            if self._addr is None:
                if isinstance(obj, ctypes.Array):
                    self._held, self._addr = obj, ctypes.addressof(obj)
                else:  # the values as they read: on the host, conjugate and negative views resolved
                    self._held = obj.detach().to("cpu").resolve_conj().resolve_neg()
                    self._addr = self._held.data_ptr()
            k = min(n - done, length - self._at)
            if k:
                ctypes.memmove(buf + done, self._addr + self._at, k)
            done, self._at = done + k, self._at + k
            if self._at == length:
                self._i, self._at, self._addr, self._held = self._i + 1, 0, None, None
        return done


def _write(tensors, metadata, dst, level, threads, base, policy, max_mae, what):
    torch = _torchzip.torch_module()
    path = dst if _files.is_path(dst) else None
    plan = _Plan(torch, tensors, metadata, path)
    _bases.check_not_own_base(dst, base)
    params = _lib.make_params(level, threads, policy, max_mae)
    params.format = _lib.INPUT_SAFETENSORS  # the layout: each tensor coded by its dtype

    def check(stats):
        if stats.original_bytes != plan.nbytes:
            raise Error(_lib.ERR_INTERNAL, "%d bytes to write, %d read" % (plan.nbytes, stats.original_bytes), path)

    def job(call):
        return _stream.write(call, True, lambda: contextlib.nullcontext(plan), dst, base, threads, plan.nbytes, check)

    _run.write(job, params, path, _run.wrote(dst, what))


def save_file(tensors, filename, metadata=None, *, level=LEVEL_DEFAULT, threads=0, base=None, policy=None,
              max_mae=None):
    """Saves a dict of str -> torch.Tensor as ``safetensors.torch.save_file`` does, compressed
    (``ckpz -d`` restores that file). filename: a path (a temporary file renamed into place
    when complete: after an error or Ctrl-C an existing file is as it was) or a binary file
    object; metadata: None or a dict of str -> str. Tensors must be dense, contiguous, not
    share memory, of a dtype safetensors names (bool, integers, float16/32/64, bfloat16,
    complex64, float8), else a ckpz.Error names the file and the tensor before anything is
    written. level, threads, base (a delta file), policy, max_mae: as ckpz.compress_file.
    """
    _write(tensors, metadata, filename, level, threads, base, policy, max_mae, "save_file")


def save(tensors, metadata=None, *, level=LEVEL_DEFAULT, threads=0, policy=None, max_mae=None):
    """What save_file writes, as bytes (like ``safetensors.torch.save``, compressed)."""
    out = io.BytesIO()
    _write(tensors, metadata, out, level, threads, None, policy, max_mae, "save")
    return out.getvalue()


# ---- loading -----------------------------------------------------------------------------

# A string once its escaped backslashes and quotes are gone, or the rest of the text after
# an unterminated one: every quote starts a match that succeeds (one that could fail would
# be retried at each later quote: quadratic).
_STRING = re.compile(rb'"[^"]*(?:"|\Z)')
_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def _unique(pairs):
    if len({k for k, _ in pairs}) != len(pairs):
        raise ValueError("a key comes twice in one object")
    return dict(pairs)


def _no_constant(name):  # NaN, Infinity: Python's json reads them, JSON has none
    raise ValueError("%s is not JSON" % name)


def _json(torch, text, path):
    """The header's JSON object; with strings taken out, its values counted and its
    nesting measured (brackets +1 / -1, the running sum's maximum 16 MiB at a time) first."""
    if text[:1] != b"{":
        raise _refuse(path, "not a safetensors file (nor a .ckpz of one): its header does not begin with '{'")
    bare = _STRING.sub(b"", text.replace(b"\\\\", b"").replace(b'\\"', b""))
    if bare.count(b",") > VALUES_MAX:  # what json would make of it, in Python objects, is bounded
        raise _refuse(path, "the safetensors header holds more than %d values" % VALUES_MAX, _lib.ERR_LIMIT)
    depth = deepest = 0
    for at in range(0, len(bare), 1 << 24):
        signs = bare[at:at + (1 << 24)].translate(_SIGNS, _NOT_BRACKET)
        if signs:
            run = torch.frombuffer(bytearray(signs), dtype=torch.int8).cumsum(0, dtype=torch.int32)
            deepest, depth = max(deepest, depth + int(run.max())), depth + int(run[-1])
    if deepest > DEPTH_MAX:
        raise _refuse(path, "the safetensors header nests deeper than %d levels" % DEPTH_MAX, _lib.ERR_LIMIT)
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=_unique, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _refuse(path, "the safetensors header is not valid JSON: %s" % e) from None


def _count(x):
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < (1 << 63)


def _tensor_entry(torch, by_name, name, e, path):
    """(begin, end, name, torch dtype, shape) of one entry of the header, checked."""
    what = "tensor %r" % name
    if not isinstance(e, dict):
        raise _refuse(path, "%s: its entry is not a JSON object" % what)
    dtype, shape, offs = e.get("dtype"), e.get("shape"), e.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in by_name:
        known = any(d[0] == dtype for d in _DTYPES)
        raise _refuse(path, "%s: dtype %.100r %s" % (what, dtype, "is not in torch " + torch.__version__
                                                      if known else "is not a safetensors dtype ckpz reads"))
    if not (isinstance(shape, list) and len(shape) <= NDIM_MAX and all(_count(d) for d in shape)):
        raise _refuse(path, "%s: shape %.200r is not a list of <= %d integers in 0..2**63-1" % (what, shape, NDIM_MAX))
    if not (isinstance(offs, list) and len(offs) == 2 and all(_count(o) for o in offs) and offs[0] <= offs[1]):
        raise _refuse(path, "%s: data_offsets %.200r are not [begin, end], 0 <= begin <= end" % (what, offs))
    dt, esize = by_name[dtype]
    count, extent = 1, 1
    for d in shape:
        count, extent = count * d, extent * max(d, 1)
    if extent >= (1 << 63):
        raise _refuse(path, "%s: shape %r is too large for torch" % (what, shape), _lib.ERR_LIMIT)
    if count * esize != offs[1] - offs[0]:
        raise _refuse(path, "%s: %d elements of %s take %d bytes, data_offsets [%d, %d] hold %d" % (
            what, count, dtype, count * esize, offs[0], offs[1], offs[1] - offs[0]), _lib.ERR_CORRUPT)
    return offs[0], offs[1], name, dt, shape


def _layout(torch, read, size, path):
    """[(name, dtype, shape, offset, nbytes)] in file order from the header of the file of
    size bytes that read(offset, n) reads, every check made."""
    if size < 8:
        raise _refuse(path, "not a safetensors file: %d bytes, fewer than its header length takes" % size)
    (n,) = struct.unpack("<Q", read(0, 8))
    if n > HEADER_MAX:
        raise _refuse(path, "not a safetensors file (nor a .ckpz of one): header length %d, over the limit of %d"
                      % (n, HEADER_MAX), _lib.ERR_LIMIT)
    if n > size - 8:
        raise _refuse(path, "safetensors header length %d runs past the end of the file (%d bytes)" % (n, size),
                      _lib.ERR_CORRUPT)
    header = _json(torch, read(8, n), path)
    meta = header.pop(_META, None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise _refuse(path, '"__metadata__" must map strings to strings')
    by_name = _dtypes(torch)[1]
    entries = sorted(_tensor_entry(torch, by_name, k, e, path) for k, e in header.items())
    at, data = 0, 8 + n
    for begin, end, name, _, _ in entries:
        if begin != at:
            raise _refuse(path, "tensor %r: data_offsets [%d, %d] %s the previous tensor's end (%d)" % (
                name, begin, end, "overlap" if begin < at else "leave a gap after", at), _lib.ERR_CORRUPT)
        at = end
    if data + at != size:
        raise _refuse(path, "the tensors' data ends at byte %d, the file at %d" % (data + at, size), _lib.ERR_CORRUPT)
    return [(name, dt, shape, data + begin, end - begin) for begin, end, name, dt, shape in entries]


def _build(torch, read, size, path, fill):
    """{name: tensor} of the file read(offset, n) reads (size bytes), in file order: each
    allocated at its size, then filled by fill([(offset, n, tensor)])."""
    tensors, spans = {}, []
    for name, dt, shape, off, n in _layout(torch, read, size, path):
        tensors[name] = torch.empty(shape, dtype=dt)
        spans += [(off, n, tensors[name])] if n else []
    fill(spans)
    return tensors


def _from_ckpz(torch, call, pread, opaque, size, base, threads):
    """The tensors of the .ckpz file of size bytes pread reads, decoded straight into place."""
    path, params = call.path, call.params
    with _bases.open_base(base, threads) as b:
        if b is not None:
            b.apply(params)
        with _archive.opened(call, params, pread, opaque, size) as handle:
            info = _archive.archive_info(handle)
            kind = _lib.decode(_lib.input_format_name(info.format))
            if info.format != _lib.INPUT_SAFETENSORS and kind != "raw":
                raise _refuse(path, "holds a %s file, not a safetensors file (ckpz.load or ckpz.decompress_file "
                              "read it)" % kind)
            _bases.check_original(info.original_size, size, info.chunk_size, path)
            image = _archive.ArchiveImage(call, handle, path)
            return _build(torch, image.read, info.original_size, path,
                          lambda spans: _archive.read_into(call, handle, [(o, n, t.data_ptr()) for o, n, t in spans]))


def _copy_fill(copy):
    """fill() for _build: copy(offset, memoryview) into each tensor (bounds checked before)."""
    return lambda spans: [copy(off, _lib.view_at(t.data_ptr(), n, writable=True)) for off, n, t in spans]


def _from_path(torch, filename, call, base, threads):
    fd = _files.open_regular(filename)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, _lib.BASE_PROBE, 0)
        if head[:8] == _lib.MAGIC:
            fds = _lib.Fd(fd, 0, 0)
            base = _bases.located_base(filename, head) if base is None else base
            return _from_ckpz(torch, call, _lib.FD_PREAD, ctypes.cast(ctypes.pointer(fds), ctypes.c_void_p), size,
                              base, threads)
        image = _images.FileImage(fd, size, filename, call)
        return _build(torch, image.read, size, filename, _copy_fill(image.read_into))
    finally:
        os.close(fd)


def _from_memory(torch, mv, call, threads):
    mem = _images.MemImage(mv)
    if mem.head(8) == _lib.MAGIC:
        def pread(_o, buf, n, off):
            return 0 if mem.copy_out(off, _lib.view_at(buf, n, writable=True)) else -1
        return _from_ckpz(torch, call, call.guard(_lib.PREAD_FN, pread, -1), None, mem.size, None, threads)
    return _build(torch, mem.read, mem.size, None, _copy_fill(mem.copy_out))


def _placed(torch, tensors, device):
    cuda = isinstance(device, int) and not isinstance(device, bool)
    dev = torch.device("cuda", device) if cuda else torch.device(device)
    return tensors if dev.type == "cpu" else {k: t.to(dev) for k, t in tensors.items()}


def load_file(filename, device="cpu", *, threads=0, base=None):
    """The dict of str -> torch.Tensor in a .safetensors.ckpz or a plain .safetensors file,
    like ``safetensors.torch.load_file``, in file order, on device ("cpu", "cuda:0", an int,
    a torch.device: moved after decoding). Chunks are verified before use, the header
    checked as hostile input: a ckpz.Error names the file and the tensor at fault; a .ckpz
    of another kind of file is refused. A delta file's base is found beside it, as ``ckpz
    -d`` finds it, or given as base=. threads: 0 = all cores.
    """
    torch = _torchzip.torch_module()
    _placed(torch, {}, device)  # a bad device is refused before the work
    filename = os.fsdecode(os.fspath(filename)) if _files.is_path(filename) else filename
    with _lib.Call(_lib.make_params(threads=threads), filename) as call:
        tensors = _run.run(lambda: _from_path(torch, filename, call, base, threads), call)
    return _placed(torch, tensors, device)


def load(data, *, threads=0):
    """The dict of str -> torch.Tensor in data (bytes-like: what save returns, or a plain
    safetensors file's bytes as ``safetensors.torch.save`` returns them) on the CPU, like
    ``safetensors.torch.load``; checked as load_file checks a file."""
    torch = _torchzip.torch_module()
    with memoryview(data) as raw, raw.cast("B") as mv, _lib.Call(_lib.make_params(threads=threads)) as call:
        return _run.run(lambda: _from_memory(torch, mv, call, threads), call)
