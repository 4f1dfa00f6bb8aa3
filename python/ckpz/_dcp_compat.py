"""Finding torch's distributed checkpoint (DCP) package, whatever the torch release.

torch >= 2.0 has it as torch.distributed.checkpoint; torch 1.13 as
torch.distributed._shard.checkpoint, whose import fails on Python >= 3.11: a dataclass
(ShardedTensorMetadata) takes an instance of another dataclass (TensorProperties) as a
field default, and Python 3.11 refuses unhashable defaults ("mutable default ... use
default_factory"; torch 2.0 fixed its source). The shim here changes no file of torch's:
for the duration of that one import it hands torch's modules a dataclass decorator that
makes TensorProperties hashable (unsafe_hash=True: its fields are dtypes, layouts and
flags, all hashable), which is all Python 3.11 asks; the decorator is put back at once.
"""

import dataclasses
import importlib
import sys
import threading

__all__ = []  # private module

_lock = threading.Lock()
_SHARD = "torch.distributed._shard"


def _with_hashable_properties():
    real = dataclasses.dataclass

    def dataclass(cls=None, /, **kw):
        def wrap(c):
            if c.__name__ == "TensorProperties" and c.__module__.startswith(_SHARD) and "unsafe_hash" not in kw:
                return real(c, **dict(kw, unsafe_hash=True))
            return real(c, **kw)

        return wrap if cls is None else wrap(cls)

    return real, dataclass


def checkpoint_module():
    """(module, new_api): torch's DCP package, and whether it has torch >= 2's names."""
    try:
        return importlib.import_module("torch.distributed.checkpoint"), True
    except ImportError:
        pass
    try:
        return importlib.import_module(_SHARD + ".checkpoint"), False
    except ValueError as e:
        if "mutable default" not in str(e):
            raise
    with _lock:
        for name in [m for m in sys.modules if m == _SHARD or m.startswith(_SHARD + ".")]:
            del sys.modules[name]  # half-imported by the failed attempt
        real, patched = _with_hashable_properties()
        dataclasses.dataclass = patched
        try:
            mod = importlib.import_module(_SHARD + ".checkpoint")
        finally:
            dataclasses.dataclass = real
    return mod, False


def names():
    """The classes and enums a storage plug-in needs, from whichever package there is."""
    dcp, new = checkpoint_module()
    planner = importlib.import_module(dcp.__name__ + ".planner")
    storage = importlib.import_module(dcp.__name__ + ".storage")
    metadata = importlib.import_module(dcp.__name__ + ".metadata")
    return {
        "dcp": dcp,
        "new_api": new,
        "StorageWriter": storage.StorageWriter,
        "StorageReader": storage.StorageReader,
        "WriteResult": storage.WriteResult,
        "WriteItemType": planner.WriteItemType,
        "LoadItemType": planner.LoadItemType,
        "Metadata": metadata.Metadata,
        "metadata": metadata,
    }
