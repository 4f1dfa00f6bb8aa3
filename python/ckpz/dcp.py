"""ckpz.dcp: a storage plug-in for torch's distributed checkpoint (DCP), so that DCP's
planning and resharding write ckpz-coded, checksummed files::

    import torch.distributed.checkpoint as dcp
    import ckpz.dcp
    dcp.save(sd, storage_writer=ckpz.dcp.Writer("ckpt/step100"))          # torch >= 2
    dcp.load(sd, storage_reader=ckpz.dcp.Reader("ckpt/step100"))
    f = dcp.async_save(sd, storage_writer=ckpz.dcp.Writer("ckpt/step200"))
    # torch 1.13: ckpz.dcp.checkpoint.save_state_dict / load_state_dict, same arguments

Each rank writes one file, rank-00003-of-00008.ckpz: a ckpz-coded torch.save archive of
the tensors and byte blobs DCP hands it, each under its own name (the item's fqn, and
the offsets of a shard), so the library's messages and a lossy policy's patterns name
tensors as the state dict does; dtype-aware coding, a CRC-32C per chunk, plus a CRC-32
of each item kept in DCP's metadata and checked when the item is read. The metadata
file (.metadata) is a pickle, as DCP's own; Reader unpickles it with ckpz's safe
unpickler, allowing DCP's metadata classes only. Importing this module imports DCP; on
torch 1.13 with Python >= 3.11 that needs the import shim of _dcp_compat (no file of
torch is changed). torch 1.13's default planner has the coordinator write every
replicated tensor (DDP state) alone; BalancedSavePlanner spreads them over the ranks by
bytes (torch >= 2.1's planner spreads them too, in the order it meets them).

Extension (torch >= 2.7, whose FileSystemWriter takes stream extensions) is the other
route: DCP's own files, each item's stream coded by ckpz, read back by the stock
FileSystemReader given extension_registry() (torch's reader knows only ZStandard
unless it is handed a registry): _dcp_extension. The metadata file as hostile input:
_dcp_metadata.
"""

import dataclasses
import io
import os
import pickle
import uuid

from . import _dcp_compat, _dist_load, _dist_save, _dist_state, _files, _lib, _save, _torchzip
from ._dcp_extension import Extension, extension_registry
from ._dcp_metadata import METADATA, _check_unchecked, _checked_metadata, _metadata_bytes, _safe_metadata
from ._lib import LEVEL_DEFAULT, Error

__all__ = ["Writer", "Reader", "BalancedSavePlanner", "Extension", "extension_registry", "checkpoint"]

_N = _dcp_compat.names()
checkpoint = _N["dcp"]
FORMAT = "ckpz.dcp"


def _future(value):
    import torch.futures

    f = torch.futures.Future()
    f.set_result(value)
    return f


class _Directory:
    """What Writer and Reader share: a checkpoint directory, which torch >= 2 may name
    again (checkpoint_id= of save/load: reset(checkpoint_id)), and torch >= 2's
    use_collectives=False (each rank plans and commits alone: its own metadata,
    __RANK.metadata, as FileSystemWriter writes it)."""

    path = None
    rank = None
    use_collectives = True

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)

    @property
    def checkpoint_id(self):
        return self.path

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, (str, os.PathLike))

    def prepare_local_plan(self, plan):
        return plan

    def _where(self):
        if self.path is None:
            raise ValueError("ckpz.dcp: no checkpoint directory: give it to %s(path) or to DCP "
                             "(checkpoint_id=path)" % type(self).__name__)
        return self.path

    def _metadata_name(self, rank=None):
        return METADATA if rank is None else "__%d%s" % (rank, METADATA)


class Writer(_Directory, _N["StorageWriter"]):
    """A DCP StorageWriter writing one ckpz file per rank into the directory path (None:
    the checkpoint_id DCP is given).

    level, threads, policy, max_mae: as ckpz.save (policy patterns match "tensors.FQN",
    e.g. "*.exp_avg_sq rel 1e-3"). Files are written to a temporary name and renamed; the
    metadata last, by the coordinator, as DCP's FileSystemWriter does. async_save stages
    the state with DCP's default stager (a host copy) and then calls this writer on its
    thread or its process (the writer is pickled to it)."""

    def __init__(self, path=None, *, level=LEVEL_DEFAULT, threads=0, policy=None, max_mae=None):
        super().__init__()
        self.path = None if path is None else os.fspath(path)
        self.opts = (level, threads, policy, max_mae)
        self.is_coordinator = False
        self.save_id = uuid.uuid4().hex

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        self.save_id = uuid.uuid4().hex

    # torch 1.13 / torch >= 2 spellings
    def init(self, is_coordinator):
        self.is_coordinator = is_coordinator

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank")
        self.use_collectives = kwargs.get("use_collectives", True)

    def storage_meta(self):
        sm = getattr(_N["metadata"], "StorageMeta", None)  # torch >= 2.4
        return None if sm is None or self.path is None else sm(checkpoint_id=self.path, save_id=self.save_id)

    def prepare_local_plan(self, plan):
        if self.use_collectives or self.rank is None:
            return plan
        os.makedirs(self._where(), exist_ok=True)  # alone: no coordinator makes it first
        return dataclasses.replace(plan, storage_data="rank-%05d-alone.ckpz" % self.rank)

    def prepare_global_plan(self, plans):
        os.makedirs(self._where(), exist_ok=True)
        n = len(plans)
        return [p if isinstance(p.storage_data, str)  # a rank's own name (use_collectives=False)
                else dataclasses.replace(p, storage_data=_dist_state.shard_name(i, n)) for i, p in enumerate(plans)]

    def write_data(self, plan, planner):
        torch = _torchzip.torch_module()
        level, threads, policy, max_mae = self.opts
        tensors, blobs, items, used = {}, {}, [], set()
        for item in plan.items:
            key = _item_key(item, used)
            data = planner.resolve_data(item)
            if item.type == _N["WriteItemType"].BYTE_IO:
                blobs[key] = bytes(data.getbuffer()) if isinstance(data, io.BytesIO) else bytes(data)
            else:
                tensors[key] = _dist_state.host(torch, data)
            items.append((item, key))
        # the items' CRC-32s on several threads (zlib drops the GIL): one pass over the state
        crcs = dict(zip(tensors, _dist_state.crcs(list(tensors.values()), threads)))
        results = []
        for item, key in items:
            if key in blobs:
                size, crc = len(blobs[key]), _zlib_crc(blobs[key])
            else:
                t = tensors[key]
                size, crc = t.numel() * t.element_size(), crcs[key]
            results.append(_N["WriteResult"](index=item.index, size_in_bytes=size,
                                             storage_data=(plan.storage_data, key, crc)))
        payload = {"format": FORMAT, "tensors": tensors, "bytes": blobs}
        path = os.path.join(self._where(), plan.storage_data)
        _save.save(payload, path, pickle, _torchzip.DEFAULT_PROTOCOL, True, level, threads, None, policy, max_mae,
                   False, 1)
        if policy is not None:  # approximations: no CRC of the original to check against
            lossy = _dist_save._lossy_names(path, payload)
            results = [dataclasses.replace(r, storage_data=r.storage_data[:2] + (None,))
                       if r.storage_data[1] in lossy else r for r in results]
        return _future(results)

    def finish(self, metadata, results):
        metadata.storage_data = {r.index: r.storage_data for rs in results for r in rs}
        if hasattr(metadata, "storage_meta"):
            metadata.storage_meta = self.storage_meta()
        alone = not self.use_collectives and self.rank is not None
        name = self._metadata_name(self.rank if alone else None)
        _files.write_file(os.path.join(self._where(), name), pickle.dumps(metadata))


def _item_key(item, used):
    """The item's name in the rank's file: its fqn, and for a shard its offsets
    ("layers.0.w@128,0"); unique in the file."""
    index = item.index
    key = index.fqn
    if item.type == _N["WriteItemType"].SHARD and index.offset is not None:
        key += "@" + ",".join(str(int(o)) for o in index.offset)
    base, n = key, 1
    while key in used:
        key, n = "%s#%d" % (base, n), n + 1
    used.add(key)
    return key


def _zlib_crc(b):
    import zlib

    return zlib.crc32(b)


class Reader(_Directory, _N["StorageReader"]):
    """A DCP StorageReader for what Writer wrote (path None: the checkpoint_id DCP is
    given). Each rank opens only the files holding items it reads and decodes only those
    items (every chunk's checksum verified first, then each item's CRC-32). trusted=True
    unpickles the metadata with the plain unpickler (for metadata classes of a torch
    release this one does not know). A directory DCP's FileSystemWriter wrote is refused
    as such: read it with DCP's FileSystemReader."""

    def __init__(self, path=None, *, threads=0, trusted=False):
        super().__init__()
        self.path = None if path is None else os.fspath(path)
        self.threads = threads
        self.trusted = trusted
        self.storage_data = {}

    def read_metadata(self, *args, **kwargs):
        # rank=R (torch >= 2, when .metadata cannot be read): the rank's own metadata of a
        # save with use_collectives=False
        torch = _torchzip.torch_module()
        data, path = _metadata_bytes(self._where(), self._metadata_name(kwargs.get("rank")))
        if self.trusted:
            md = pickle.loads(data)
        else:
            md = _safe_metadata(torch, data, path)
        md = _checked_metadata(md, path)
        if getattr(md, "storage_meta", None) is not None:
            md.storage_meta.load_id = uuid.uuid4().hex
        return md

    def init(self, metadata, is_coordinator):
        self.storage_data = metadata.storage_data

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self.storage_data = metadata.storage_data
        self.rank = kwargs.get("rank")
        self.use_collectives = kwargs.get("use_collectives", True)

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan, planner):
        per_file = {}
        for req in plan.items:
            info = self.storage_data.get(req.storage_index)
            if not isinstance(info, tuple) or len(info) != 3:
                raise Error(_lib.ERR_CORRUPT, "the metadata has no ckpz location for %s" % (req.storage_index,),
                            os.path.join(self._where(), METADATA))
            per_file.setdefault(info[0], []).append((req, info))
        for fname, reqs in sorted(per_file.items()):
            path = os.path.join(self._where(), os.path.basename(fname))
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
        with_crc = {k for req, (_, k, crc) in reqs if crc is not None and req.type != _N["LoadItemType"].BYTE_IO}
        checked = [key for key in keys if key in with_crc]
        crcs = dict(zip(checked, _dist_state.crcs([tensors[key] for key in checked], self.threads)))
        for req, (_, key, crc) in reqs:
            name = req.storage_index.fqn
            if req.type == _N["LoadItemType"].BYTE_IO:
                b = blobs.get(key)
                if not isinstance(b, bytes) or (crc is not None and _zlib_crc(b) != crc):
                    raise Error(_lib.ERR_CHECKSUM, "item %r differs from its CRC-32 in the metadata" % name, path)
                planner.load_bytes(req, io.BytesIO(b))
                continue
            t = tensors[key]
            if crc is not None and crcs[key] != crc:
                raise Error(_lib.ERR_CHECKSUM, "tensor %r differs from its CRC-32 in the metadata" % name, path)
            if len(req.storage_offsets) != t.dim() or any(off < 0 or n < 0 or off + n > size for off, n, size in
                                                        zip(req.storage_offsets, req.lengths, t.shape)):
                raise Error(_lib.ERR_CORRUPT, "tensor %r: %s in the file, the metadata asks for %s at %s"
                            % (name, tuple(t.shape), tuple(req.lengths), tuple(req.storage_offsets)), path)
            for dim, (off, n) in enumerate(zip(req.storage_offsets, req.lengths)):
                t = t.narrow(dim, off, n)
            target = planner.resolve_tensor(req).detach()
            if target.size() != t.size():
                raise Error(_lib.ERR_CORRUPT, "tensor %r: %s in the file, %s asked for" % (name, tuple(t.size()),
                                                                                          tuple(target.size())), path)
            if not (t.data_ptr() == target.data_ptr() and t.stride() == target.stride()):
                target.copy_(t)
            planner.commit_tensor(req, target)


def _planner_base():
    dp = __import__(checkpoint.__name__ + ".default_planner", fromlist=["x"])
    return dp.DefaultSavePlanner, dp.create_default_local_save_plan


_DefaultSavePlanner, _local_plan = _planner_base()


class BalancedSavePlanner(_DefaultSavePlanner):
    """DCP's DefaultSavePlanner, except that a tensor every rank holds (not a shard) is
    written by one rank chosen by bytes (largest first, to the rank with the fewest bytes
    so far): torch 1.13's leaves them all to the coordinator, torch >= 2.1's spreads them
    in the order it meets them. Non-tensor objects stay with the coordinator."""

    def create_local_plan(self):
        if _N["new_api"]:  # every rank plans every value already, and the mappings of the flattening
            return super().create_local_plan()
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
