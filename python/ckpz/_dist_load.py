"""ckpz.distributed.load: each rank reads from the shard files only the tensors it needs.

A shard file is a ckpz-coded torch.save archive of {"skeleton", "tensors", ...}. Its pickle
is unpickled with the safe unpickler, except that tensors come out as references
(storage key, offset, shape, stride) instead of being allocated: the rank then
allocates and decodes only the storages it wants, straight into place, in one library
call per shard (every chunk's CRC-32C verified first), and checks each tensor against
the manifest's CRC-32. A failure is reported by every rank (all_gather of the errors),
naming the rank, the shard file and the tensor, so no rank returns a state that another
rank could not load.
"""

import io
import os

from . import _archive, _bases, _dist_comm, _dist_manifest, _dist_save, _dist_state, _files, _lib, _run, \
    _safe_tensors, _torchzip, _unpickle, _zipindex
from ._dist_state import Shard
from ._lib import Error

__all__ = []  # private module


class _StorageRef:
    def __init__(self, key, dtype, numel):
        self.key, self.dtype, self.numel = key, dtype, numel


class _TensorRef:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)


def _lazy_unpickler(torch, path):
    """The safe unpickler, with tensors coming out as _TensorRefs: checked against their
    storage's size (from its persistent id, which the archive's member must match) as
    ckpz.load checks them, before anything is allocated."""
    named = {}  # storage key -> its _StorageRef: one key, one dtype and size

    def persistent_load(pid):
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage":
            raise Error(_lib.ERR_CORRUPT, "unexpected persistent id in the shard's pickle", path)
        storage_type, key, _location, numel = pid[1:]
        if not isinstance(storage_type, _unpickle.StorageType) or not isinstance(key, str) \
                or type(numel) is not int or numel < 0:
            raise Error(_lib.ERR_CORRUPT, "malformed storage reference in the shard's pickle", path)
        ref = named.setdefault(key, _StorageRef(key, storage_type.dtype, numel))
        if (ref.dtype, ref.numel) != (storage_type.dtype, numel):
            raise Error(_lib.ERR_CORRUPT, "storage %s is named with two types or sizes in the shard's pickle" % key,
                        path)
        return ref

    def refuse(why):
        raise Error(_lib.ERR_CORRUPT, "the shard's pickle asks for %s, which ckpz refuses" % why, path)

    def rebuild(storage, offset, size, stride, requires_grad, hooks, *meta):
        if not isinstance(storage, _StorageRef):
            refuse("a tensor without a storage of the shard")
        if hooks:
            refuse("a tensor with backward hooks (hooks are code)")
        itemsize = torch._utils._element_size(storage.dtype)
        size, stride = _safe_tensors.check_extent(storage.numel * itemsize, itemsize, offset, size, stride, refuse)
        return _TensorRef(storage, offset, size, stride)

    return _unpickle.make_unpickler(torch, persistent_load, False, (), path,
                                    overrides={("torch._utils", "_rebuild_tensor_v2"): rebuild})


class _ShardFile:
    """One shard file opened for reading: its payload with tensor references, and read()."""

    def __init__(self, torch, call, handle, path):
        self.torch, self.call, self.handle, self.path = torch, call, handle, path
        image = _archive.ArchiveImage(call, handle, path)
        self.index = _zipindex.ZipIndex(image.read, image.size, path, read_many=image.read_many)
        self.prefix = self.index.prefix()
        pkl = self.index.get(self.prefix + "data.pkl")
        self.payload = _lazy_unpickler(torch, path)(io.BytesIO(image.read(pkl.data_offset, pkl.size))).load()
        if not isinstance(self.payload, dict) or not isinstance(self.payload.get("tensors"), dict):
            raise Error(_lib.ERR_INPUT, "not a ckpz.distributed shard", path)

    def read(self, names, targets=None, check=None):
        """{name: tensor} for the names, decoded and checked against the archive, then
        check(name, tensor) on the host tensor. A tensor of targets ({name: tensor}) with
        the same dtype and shape is filled in place and is what is returned for its name:
        its own memory is decoded into when it is a contiguous CPU tensor and the shard
        stores the tensor alone in its storage; otherwise it gets copy_ of the checked
        host tensor."""
        torch = self.torch
        refs = self.payload["tensors"]
        targets = targets or {}
        users = {}
        for name in names:
            ref = refs.get(name)
            if not isinstance(ref, _TensorRef):
                raise Error(_lib.ERR_CORRUPT, "the manifest places tensor %r in this shard, which does not hold it"
                            % name, self.path)
            users[ref.storage.key] = users.get(ref.storage.key, 0) + 1
        storages, spans, out, copies = {}, [], {}, []
        for name in names:
            ref = refs[name]
            s = ref.storage
            target = _fits(torch, targets.get(name), s.dtype, ref.size)
            if s.key not in storages:
                m = self.index.get(self.prefix + "data/" + s.key)
                nbytes = s.numel * torch._utils._element_size(s.dtype)
                if m.size != nbytes:
                    raise Error(_lib.ERR_CORRUPT, "tensor %r: storage of %d bytes, the pickle says %d"
                                % (name, m.size, nbytes), self.path)
                if (target is not None and target.device.type == "cpu" and target.is_contiguous()
                        and users[s.key] == 1 and ref.offset == 0 and target.numel() == s.numel
                        and tuple(target.stride()) == ref.stride):
                    storages[s.key] = target  # decoded straight into the caller's tensor
                    out[name] = target
                    if nbytes:
                        spans.append((m.data_offset, nbytes, s.key, name))
                    continue
                storages[s.key] = torch.empty(s.numel, dtype=s.dtype)
                if nbytes:
                    spans.append((m.data_offset, nbytes, s.key, name))
            t = torch.empty(0, dtype=s.dtype)
            # inside the storage: checked when unpickled
            t.set_(_dist_state.storage_of(storages[s.key]), ref.offset, ref.size, ref.stride)
            out[name] = t
            if target is not None:
                copies.append((name, target))
        # the addresses decoded into, taken once every view exists
        spans = [(off, n, storages[key].data_ptr(), name) for off, n, key, name in spans]
        try:
            _archive.read_into(self.call, self.handle, [sp[:3] for sp in spans])
        except Error:
            for sp in spans:  # which tensors: one at a time
                try:
                    _archive.read_into(self.call, self.handle, [sp[:3]])
                except Error as e:
                    raise Error(e.code, "tensor %r: %s" % (sp[3], e.message), self.path) from None
            raise
        if check is not None:
            for name, t in out.items():
                check(name, t)
        with torch.no_grad():
            for name, target in copies:
                target.copy_(out[name])
                out[name] = target
        return out


def _fits(torch, target, dtype, size):
    """target when it is a tensor of that dtype and size (to be filled in place), else None."""
    if isinstance(target, torch.Tensor) and target.dtype == dtype and tuple(target.shape) == tuple(size):
        return target
    return None


def _open_and(path, base, threads, fn):
    """fn(_ShardFile) for the shard at path, on the helper thread (Ctrl-C safe)."""
    torch = _torchzip.torch_module()
    params = _lib.make_params(threads=threads)
    with _lib.Call(params, path) as call:

        def go():
            fd = _files.open_regular(path)  # a FIFO or a device: ckpz.Error naming it, never a hang
            try:
                size = os.fstat(fd).st_size
                if os.pread(fd, 8, 0) != _lib.MAGIC:
                    raise Error(_lib.ERR_NOT_CKPZ, "not a .ckpz file", path)
                with _bases.open_base(base, threads) as b:
                    if b is not None:
                        b.apply(params)
                    fds = _lib.Fd(fd, 0, 0)
                    opaque = _lib.ctypes.cast(_lib.ctypes.pointer(fds), _lib.ctypes.c_void_p)
                    with _archive.opened(call, params, _lib.FD_PREAD, opaque, size) as handle:
                        return fn(_ShardFile(torch, call, handle, path))
            finally:
                os.close(fd)

        return _run.run(go, call)


def _where(m, src, name, mpath=None):
    if name in m["replicated"]:
        return "replicated", m["replicated"][name]
    if src < len(m["local"]) and name in m["local"][src]:
        return "local", m["local"][src][name]
    if name in m["sharded"]:
        return "sharded", m["sharded"][name]
    raise Error(_lib.ERR_CORRUPT, "tensor %r of rank %d's state is not in the manifest" % (name, src), mpath)


def _check(t, entry, name, path):
    """t against its manifest entry: dtype and shape always, CRC-32 unless coded lossily."""
    if _dist_state.dtype_name(t.dtype) != entry["dtype"] or list(t.shape) != list(entry["shape"]):
        raise Error(_lib.ERR_CORRUPT, "tensor %r: %s %s in the shard, the manifest says %s %s"
                    % (name, _dist_state.dtype_name(t.dtype), list(t.shape), entry["dtype"], entry["shape"]), path)
    want = entry.get("crc32")
    if want is not None and _dist_state.crc(t.contiguous()) != want:
        raise Error(_lib.ERR_CHECKSUM, "tensor %r differs from the manifest's CRC-32 %08x" % (name, want), path)


def _wanted(m, skeleton, src, rank, world, mpath):
    """({shard: {name: manifest entry}} this rank reads, {name: (lo, hi, entry)} of its Shards)."""
    wanted, pieces = {}, {}
    for name in _dist_state.names_in(skeleton):
        kind, e = _where(m, src, name, mpath)
        if kind != "sharded":
            wanted.setdefault(e["shard"], {})[name] = e
            continue
        lo, hi = _dist_state.even_rows(e["shape"][0], rank, world)
        pieces[name] = (lo, hi, e)
        for p in e["pieces"]:
            if p["rows"][0] < hi and p["rows"][1] > lo:
                shape = [p["rows"][1] - p["rows"][0]] + e["shape"][1:]
                wanted.setdefault(p["shard"], {})[name] = dict(p, shape=shape, dtype=e["dtype"])
    return wanted, pieces


def _assemble(torch, name, lo, hi, e, got):
    """This rank's rows of the dim-0 split tensor `name`, from the pieces read."""
    parts = []
    for p in e["pieces"]:
        a, b = max(lo, p["rows"][0]), min(hi, p["rows"][1])
        if a < b:
            parts.append(got[(p["shard"], name)][a - p["rows"][0]:b - p["rows"][0]])
    if parts:
        t = torch.cat(parts) if len(parts) > 1 else parts[0].clone()
    else:
        dtype = getattr(torch, e["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise Error(_lib.ERR_CORRUPT, "tensor %r: unknown dtype %r in the manifest" % (name, e["dtype"]))
        t = torch.empty([0] + e["shape"][1:], dtype=dtype)
    return Shard(t, lo, e["shape"][0])


def _load_here(directory, rank, world, threads, into):
    torch = _torchzip.torch_module()
    targets = _dist_state.flatten(torch, into)[1] if into is not None else {}
    chain = _dist_manifest.manifest_chain(directory)  # this checkpoint's manifest, then its bases'
    m = chain[0][1]
    n = m["world_size"]
    src = rank if rank < n else 0  # whose skeleton and own tensors this rank takes

    def shard_path(r):
        return os.path.join(directory, _dist_state.shard_name(r, n))

    def base_of(r):
        return _dist_save.base_spec(None, r, n, threads, chain[1:]) if len(chain) > 1 else None

    got = {}  # (shard, name) -> tensor
    plan = {}

    def read(sf, r):
        want = plan["wanted"].get(r, {})
        unchecked = sorted(name for name, e in want.items() if e.get("crc32") is None)
        if unchecked:  # the manifest allows it for lossy tensors only: the shard must say it coded them so
            lossy = _archive.lossy_names(sf.call, sf.handle)
            for name in unchecked:
                if "tensors." + name not in lossy:
                    raise Error(_lib.ERR_CHECKSUM, "tensor %r has no CRC-32 in the manifest, and this shard holds it "
                                "losslessly: only a tensor coded lossily goes unchecked" % name, sf.path)
        mine = {name: targets[name] for name in want if name not in plan["pieces"] and name in targets}
        got.update(((r, name), t) for name, t in sf.read(
            sorted(want), mine, lambda name, t: _check(t, want[name], name, sf.path)).items())

    def own(sf):  # the skeleton, then what this rank needs from the same file
        if sf.payload.get("format") != _dist_manifest.FORMAT or not isinstance(sf.payload.get("skeleton"), dict):
            raise Error(_lib.ERR_INPUT, "not a ckpz.distributed shard", sf.path)
        _dist_state.check_skeleton(sf.payload["skeleton"], sf.path)
        plan["skeleton"] = sf.payload["skeleton"]
        plan["wanted"], plan["pieces"] = _wanted(m, plan["skeleton"], src, rank, world,
                                                 os.path.join(directory, _dist_manifest.MANIFEST))
        read(sf, src)

    if not os.path.exists(shard_path(src)):
        raise FileNotFoundError("%s: shard missing (it holds rank %d's state)" % (shard_path(src), src))
    _open_and(shard_path(src), base_of(src), threads, own)
    for r in sorted(plan["wanted"]):
        if r == src:
            continue
        path = shard_path(r)
        if not os.path.exists(path):
            raise FileNotFoundError("%s: shard missing (it holds %s)"
                                    % (path, ", ".join(repr(x) for x in sorted(plan["wanted"][r]))))
        _open_and(path, base_of(r), threads, lambda sf, r=r: read(sf, r))
    tensors = {}
    for name in _dist_state.names_in(plan["skeleton"]):
        if name in plan["pieces"]:
            tensors[name] = _into_shard(torch, _assemble(torch, name, *plan["pieces"][name], got), targets.get(name))
        else:
            tensors[name] = got[(_where(m, src, name)[1]["shard"], name)]
    return _dist_state.unflatten(plan["skeleton"], tensors)


def _into_shard(torch, got, target):
    """got (a Shard), copied into target when target is a Shard of the same rows and shape."""
    if (isinstance(target, Shard) and (target.offset, target.rows) == (got.offset, got.rows)
            and _fits(torch, target.tensor, got.tensor.dtype, got.tensor.shape) is not None):
        with torch.no_grad():
            target.tensor.copy_(got.tensor)
        return target
    return got


def load(directory, group, threads, into=None):
    rank, world = _dist_comm.rank_world(group)
    directory = os.fspath(directory)
    error, state = None, None
    try:
        state = _load_here(directory, rank, world, threads, into)
    except Exception as e:
        error = e
    msgs = _dist_comm.gather(None if error is None else str(error), group, "ckpz.distributed.load", directory)
    failed = [(r, msg) for r, msg in enumerate(msgs) if msg is not None]
    if failed:
        text = "; ".join("rank %d: %s" % f for f in failed)
        if error is not None:
            if len(failed) == 1 or (isinstance(error, _dist_manifest.CheckpointMissing) and len(failed) == world
                                    and all(msg == str(error) for _, msg in failed)):
                raise error  # only here, or the same missing checkpoint everywhere
            raise Error(getattr(error, "code", _lib.ERR_READ), "loading %s failed: %s" % (directory, text)) from error
        raise Error(_lib.ERR_READ, "loading %s failed on another rank: %s" % (directory, text))
    return state
