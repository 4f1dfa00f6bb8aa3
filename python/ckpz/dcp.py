"""ckpz.dcp: a storage plug-in for torch's distributed checkpoint (DCP), so that DCP's
planning and resharding write ckpz-coded, checksummed files::

    import ckpz.dcp
    dcp = ckpz.dcp.checkpoint            # torch.distributed.checkpoint, or 1.13's _shard.checkpoint
    dcp.save_state_dict(sd, storage_writer=ckpz.dcp.Writer("ckpt/step100"))
    dcp.load_state_dict(sd, storage_reader=ckpz.dcp.Reader("ckpt/step100"))

Each rank writes one file, rank-00003-of-00008.ckpz: a ckpz-coded torch.save archive of
the tensors and byte blobs DCP hands it (dtype-aware coding, a CRC-32C per chunk), plus
a CRC-32 of each item kept in DCP's metadata and checked when the item is read. The
metadata file (.metadata) is a pickle, as DCP's own; Reader unpickles it with ckpz's
safe unpickler, allowing DCP's metadata classes only. Importing this module imports DCP;
on torch 1.13 with Python >= 3.11 that needs the import shim of _dcp_compat (no file of
torch is changed). torch 1.13's default planner has the coordinator write every
replicated tensor (DDP state) alone; BalancedSavePlanner spreads them over the ranks by
bytes (torch >= 2.1's planner already does so).
"""

import dataclasses
import enum
import io
import os
import pickle

from . import _archive, _dcp_compat, _dist_load, _dist_save, _dist_state, _files, _lib, _save, _torchzip, _unpickle
from ._lib import LEVEL_DEFAULT, Error

__all__ = ["Writer", "Reader", "BalancedSavePlanner", "checkpoint"]

_N = _dcp_compat.names()
checkpoint = _N["dcp"]
FORMAT = "ckpz.dcp"
METADATA = ".metadata"


def _future(value):
    import torch.futures

    f = torch.futures.Future()
    f.set_result(value)
    return f


class _Directory:
    """What Writer and Reader share: a checkpoint directory, named again by torch >= 2's
    reset(checkpoint_id), and no storage-specific local planning."""

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, (str, os.PathLike))

    def prepare_local_plan(self, plan):
        return plan


class Writer(_Directory, _N["StorageWriter"]):
    """A DCP StorageWriter writing one ckpz file per rank into the directory path.

    level, threads, policy, max_mae: as ckpz.save. Files are written to a temporary name
    and renamed; the metadata last, by the coordinator, as DCP's FileSystemWriter does."""

    def __init__(self, path, *, level=LEVEL_DEFAULT, threads=0, policy=None, max_mae=None):
        super().__init__()
        self.path = os.fspath(path)
        self.opts = (level, threads, policy, max_mae)
        self.is_coordinator = False

    # torch 1.13 / torch >= 2 spellings
    def init(self, is_coordinator):
        self.is_coordinator = is_coordinator

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        self.is_coordinator = is_coordinator

    def storage_meta(self):
        return None

    def prepare_global_plan(self, plans):
        os.makedirs(self.path, exist_ok=True)
        n = len(plans)
        return [dataclasses.replace(p, storage_data=_dist_state.shard_name(i, n)) for i, p in enumerate(plans)]

    def write_data(self, plan, planner):
        torch = _torchzip.torch_module()
        tensors, blobs, results = {}, {}, []
        for i, item in enumerate(plan.items):
            key = str(i)
            data = planner.resolve_data(item)
            if item.type == _N["WriteItemType"].BYTE_IO:
                b = bytes(data.getbuffer()) if isinstance(data, io.BytesIO) else bytes(data)
                blobs[key] = b
                size, crc = len(b), _zlib_crc(b)
            else:
                t = _dist_state.host(torch, data)
                tensors[key] = t
                size, crc = t.numel() * t.element_size(), _dist_state.crc(t)
            results.append(_N["WriteResult"](index=item.index, size_in_bytes=size,
                                             storage_data=(plan.storage_data, key, crc)))
        level, threads, policy, max_mae = self.opts
        payload = {"format": FORMAT, "tensors": tensors, "bytes": blobs}
        path = os.path.join(self.path, plan.storage_data)
        _save.save(payload, path, pickle, _torchzip.DEFAULT_PROTOCOL, True, level, threads, None, policy, max_mae,
                   False, 1)
        if policy is not None:  # approximations: no CRC of the original to check against
            lossy = _dist_save._lossy_names(path, payload)
            results = [dataclasses.replace(r, storage_data=r.storage_data[:2] + (None,))
                       if r.storage_data[1] in lossy else r for r in results]
        return _future(results)

    def finish(self, metadata, results):
        metadata.storage_data = {r.index: r.storage_data for rs in results for r in rs}
        tmp = os.path.join(self.path, METADATA + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(metadata, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, METADATA))


def _zlib_crc(b):
    import zlib

    return zlib.crc32(b)


def _metadata_classes():
    dcp = checkpoint
    md = __import__(dcp.__name__ + ".metadata", fromlist=["x"])
    out = []
    for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                 "MetadataIndex", "TensorProperties", "MEM_FORMAT_ENCODING", "_MEM_FORMAT_ENCODING", "StorageMeta"):
        if hasattr(md, name):
            out.append(getattr(md, name))
    try:
        st = __import__("torch.distributed._shard.sharded_tensor.metadata", fromlist=["x"])
        out += [st.TensorProperties, st.MEM_FORMAT_ENCODING]
    except Exception:
        pass
    return out


class Reader(_Directory, _N["StorageReader"]):
    """A DCP StorageReader for what Writer wrote. Each rank opens only the files holding
    items it reads and decodes only those items (every chunk's checksum verified first,
    then each item's CRC-32). trusted=True unpickles the metadata with the plain
    unpickler (for metadata classes of a torch release this one does not know)."""

    def __init__(self, path, *, threads=0, trusted=False):
        super().__init__()
        self.path = os.fspath(path)
        self.threads = threads
        self.trusted = trusted
        self.storage_data = {}

    def read_metadata(self):
        torch = _torchzip.torch_module()
        path = os.path.join(self.path, METADATA)
        with open(_files.open_regular(path), "rb") as f:  # a FIFO or a device: ckpz.Error naming it
            data = f.read()
        if self.trusted:
            return pickle.loads(data)

        def no_persistent(pid):
            raise Error(_lib.ERR_CORRUPT, "a persistent id in DCP metadata", path)

        allowed = _metadata_classes()

        def enum_member(cls, name):  # Python >= 3.11 pickles an enum member as getattr(cls, name)
            if any(cls is c for c in allowed) and isinstance(cls, enum.EnumMeta) and isinstance(name, str):
                return cls[name]
            raise Error(_lib.ERR_INPUT, "refused: getattr on something else than a metadata enum", path)

        cls = _unpickle.make_unpickler(torch, no_persistent, False, allowed, path,
                                       overrides={("builtins", "getattr"): enum_member})
        md = cls(io.BytesIO(data)).load()
        return _checked_metadata(md, path)

    def init(self, metadata, is_coordinator):
        self.storage_data = metadata.storage_data

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self.storage_data = metadata.storage_data

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan, planner):
        per_file = {}
        for req in plan.items:
            info = self.storage_data.get(req.storage_index)
            if not isinstance(info, tuple) or len(info) != 3:
                raise Error(_lib.ERR_CORRUPT, "the metadata has no ckpz location for %s" % (req.storage_index,),
                            os.path.join(self.path, METADATA))
            per_file.setdefault(info[0], []).append((req, info))
        for fname, reqs in sorted(per_file.items()):
            path = os.path.join(self.path, os.path.basename(fname))
            _dist_load._open_and(path, None, self.threads, lambda sf, p=path, r=reqs: self._read(sf, p, r, planner))
        return _future(None)

    def _read(self, sf, path, reqs, planner):
        if sf.payload.get("format") != FORMAT:
            raise Error(_lib.ERR_INPUT, "not a ckpz.dcp file", path)
        keys = sorted({info[1] for req, info in reqs if req.type != _N["LoadItemType"].BYTE_IO})
        targets = {}  # an item read whole: decoded straight into the tensor it is loaded into
        for req, (_, key, crc) in reqs:
            if req.type != _N["LoadItemType"].BYTE_IO and key not in targets and not any(req.storage_offsets):
                target = planner.resolve_tensor(req).detach()
                if target.device.type == "cpu" and target.is_contiguous():
                    targets[key] = target
        blobs = sf.payload.get("bytes", {})
        if not isinstance(blobs, dict):
            raise Error(_lib.ERR_INPUT, "not a ckpz.dcp file", path)
        _check_unchecked(sf, path, reqs)
        tensors = sf.read(keys, targets)
        for req, (_, key, crc) in reqs:
            name = req.storage_index.fqn
            if req.type == _N["LoadItemType"].BYTE_IO:
                b = blobs.get(key)
                if not isinstance(b, bytes) or (crc is not None and _zlib_crc(b) != crc):
                    raise Error(_lib.ERR_CHECKSUM, "item %r differs from its CRC-32 in the metadata" % name, path)
                planner.load_bytes(req, io.BytesIO(b))
                continue
            t = tensors[key]
            if crc is not None and _dist_state.crc(t) != crc:
                raise Error(_lib.ERR_CHECKSUM, "tensor %r differs from its CRC-32 in the metadata" % name, path)
            for dim, (off, n) in enumerate(zip(req.storage_offsets, req.lengths)):
                t = t.narrow(dim, off, n)
            target = planner.resolve_tensor(req).detach()
            if target.size() != t.size():
                raise Error(_lib.ERR_CORRUPT, "tensor %r: %s in the file, %s asked for" % (name, tuple(t.size()),
                                                                                          tuple(target.size())), path)
            if not (t.data_ptr() == target.data_ptr() and t.stride() == target.stride()):
                target.copy_(t)
            planner.commit_tensor(req, target)


def _check_unchecked(sf, path, reqs):
    """An item without a CRC-32 in the metadata must be one the file itself says it coded
    lossily (a null CRC must not turn the check off for a swapped or damaged file). Byte
    blobs are never lossy; 0.4.0's Writer left them unchecked too in a lossy save, so
    they pass where the file holds lossy tensors."""
    unchecked = [(req, key) for req, (_, key, crc) in reqs if crc is None]
    if not unchecked:
        return
    lossy = _archive.lossy_names(sf.call, sf.handle)
    for req, key in unchecked:
        ok = bool(lossy) if req.type == _N["LoadItemType"].BYTE_IO else "tensors." + key in lossy
        if not ok:
            raise Error(_lib.ERR_CHECKSUM, "item %r has no CRC-32 in the metadata, and this file holds it losslessly: "
                        "only an item coded lossily goes unchecked" % (req.storage_index.fqn,), path)


def _checked_metadata(md, path):
    """md when it is DCP metadata whose storage_data this Reader can follow: each item's
    (file name, key, CRC-32 or None), the file a plain name in the directory."""
    if not isinstance(md, _N["Metadata"]) or not isinstance(getattr(md, "storage_data", None), dict):
        raise Error(_lib.ERR_INPUT, "not DCP metadata written by ckpz.dcp.Writer", path)
    for index, info in md.storage_data.items():
        if not (isinstance(info, tuple) and len(info) == 3 and isinstance(info[0], str) and isinstance(info[1], str)
                and (info[2] is None or (type(info[2]) is int and 0 <= info[2] < 1 << 32))
                and info[0] == os.path.basename(info[0]) and info[0] not in ("", ".", "..")):
            raise Error(_lib.ERR_CORRUPT, "the metadata's location of %r is malformed" % (getattr(index, "fqn", index),),
                        path)
    return md


def _planner_base():
    dp = __import__(checkpoint.__name__ + ".default_planner", fromlist=["x"])
    return dp.DefaultSavePlanner, dp.create_default_local_save_plan


_DefaultSavePlanner, _local_plan = _planner_base()


class BalancedSavePlanner(_DefaultSavePlanner):
    """torch 1.13's DefaultSavePlanner, except that a tensor every rank holds (not a
    ShardedTensor) is written by one rank chosen by bytes (largest first, to the rank
    with the fewest bytes so far) instead of always by the coordinator. Non-tensor
    objects stay with the coordinator."""

    def create_local_plan(self):
        self.plan = _local_plan(self.state_dict, True)
        return self.plan

    def create_global_plan(self, all_plans):
        torch = _torchzip.torch_module()
        wt = _N["WriteItemType"]
        load = [0] * len(all_plans)
        owners, size = {}, {}
        for r, p in enumerate(all_plans):
            for it in p.items:
                if it.type == wt.SHARD:
                    load[r] += _item_bytes(torch, it)
                else:
                    owners.setdefault(it.index.fqn, []).append(r)
                    size[it.index.fqn] = _item_bytes(torch, it) if it.type != wt.BYTE_IO else -1
        chosen = {}
        for fqn in sorted(owners, key=lambda f: (-size[f], f)):
            ranks = owners[fqn]
            r = ranks[0] if size[fqn] < 0 else min(ranks, key=lambda k: (load[k], k))
            chosen[fqn] = r
            load[r] += max(size[fqn], 0)
        plans = [dataclasses.replace(p, items=[it for it in p.items if it.type == wt.SHARD or chosen[it.index.fqn] == r])
                 for r, p in enumerate(all_plans)]
        return super().create_global_plan(plans)


def _item_bytes(torch, item):
    td = item.tensor_data
    n = 1
    for s in (td.chunk.sizes if item.type == _N["WriteItemType"].SHARD else td.size):
        n *= s
    return n * torch.empty(0, dtype=td.properties.dtype).element_size()
