"""ckpz.dcp's metadata file read as hostile input: found (or what is missing said),
unpickled by ckpz's safe unpickler with DCP's metadata classes only, and checked: each
item's location a plain file name in the directory, its CRC-32 an int or None, and an
item without a CRC only one its file says it coded lossily. A directory DCP's own
FileSystemWriter wrote is named as such."""

import enum
import io
import os

from . import _archive, _dcp_compat, _dist_manifest, _files, _lib, _unpickle
from ._lib import Error
from ._pickle_limits import UnsafeGlobalError

__all__ = []  # private module

_N = _dcp_compat.names()
checkpoint = _N["dcp"]
METADATA = ".metadata"


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


def _metadata_bytes(directory, name):
    """(the bytes of the metadata file, its path); CheckpointMissing saying what is missing."""
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        if not os.path.isdir(directory):
            raise _dist_manifest.missing(directory, name, None)
        if name != METADATA:
            what = "no metadata of this rank (a save with use_collectives=False writes %s)" % name
        elif any(f.startswith("__") and f.endswith(METADATA) for f in os.listdir(directory)):
            what = "no metadata of the whole: each rank saved alone (use_collectives=False: __RANK%s)" % METADATA
        elif any(f.startswith("rank-") and f.endswith(".ckpz") for f in os.listdir(directory)):
            what = "no metadata: a save that did not finish (the coordinator writes %s last)" % METADATA
        else:
            what = "not a ckpz.dcp checkpoint (no %s)" % METADATA
        raise _dist_manifest.CheckpointMissing("ckpz.dcp: " + what, path)
    with open(_files.open_regular(path), "rb") as f:  # a FIFO or a device: ckpz.Error naming it
        return f.read(), path


def _safe_metadata(torch, data, path):
    """DCP metadata unpickled by ckpz's safe unpickler, DCP's metadata classes allowed."""

    def no_persistent(pid):
        raise Error(_lib.ERR_CORRUPT, "a persistent id in DCP metadata", path)

    allowed = _metadata_classes()

    def enum_member(cls, name):  # Python >= 3.11 pickles an enum member as getattr(cls, name)
        if any(cls is c for c in allowed) and isinstance(cls, enum.EnumMeta) and isinstance(name, str):
            return cls[name]
        raise Error(_lib.ERR_INPUT, "refused: getattr on something else than a metadata enum", path)

    cls = _unpickle.make_unpickler(torch, no_persistent, False, allowed, path,
                                   overrides={("builtins", "getattr"): enum_member})
    try:
        return cls(io.BytesIO(data)).load()
    except UnsafeGlobalError as e:  # not advice for ckpz.load: say what this directory is
        if e.name.endswith(".filesystem._StorageInfo"):
            raise _plain_dcp(path) from None
        raise Error(_lib.ERR_INPUT, "not ckpz.dcp metadata for this torch release: it names the global '%s', which "
                    "ckpz.dcp.Reader does not build (another StorageWriter's metadata, or another torch release's: "
                    "if you trust this directory, Reader(..., trusted=True))" % e.name, path) from None


def _plain_dcp(path):
    return Error(_lib.ERR_INPUT, "not a ckpz.dcp checkpoint: DCP's own FileSystemWriter wrote this directory (its "
                 "metadata places the items in .distcp files); load it with %s.FileSystemReader"
                 % checkpoint.__name__, path)


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
        if type(info).__name__ == "_StorageInfo":  # trusted=True got this far
            raise _plain_dcp(path)
        if not (isinstance(info, tuple) and len(info) == 3 and isinstance(info[0], str) and isinstance(info[1], str)
                and (info[2] is None or (type(info[2]) is int and 0 <= info[2] < 1 << 32))
                and info[0] == os.path.basename(info[0]) and info[0] not in ("", ".", "..")):
            raise Error(_lib.ERR_CORRUPT, "the metadata's location of %r is malformed" % (getattr(index, "fqn", index),),
                        path)
    return md
