"""What ckpz's safe unpickler resolves and calls: the allow-list of globals, and a checked
implementation for each one a pickle may call.

A pickle builds objects by calling what it names. Naming is limited by this table
(`allowed`); calling is limited further: every callable name maps to an implementation
that takes the pickle's arguments, refuses the ones that would make something other
than plain data, and charges what it allocates to the load's budget (_safe_data for
plain data and NumPy, _safe_tensors for tensors). Names that are only values (dtypes,
`numpy.ndarray` as an argument, `torch.Tensor` as a type) resolve but cannot be called.
Storage classes (`torch.FloatStorage`) resolve to a StorageType, which only the
loaders' persistent_load functions turn into storages of the file. Pickles of protocol
< 3 spell names as Python 2 did; py3_name undoes that first.

Every implementation is called as impl(ctx, *args, **kwargs); ctx (the unpickler, or
a small context for trusted loads) offers torch, trusted, charge(nbytes), fresh(obj),
call(func, args) and refuse(why).
"""

import _compat_pickle
import argparse
import collections
import datetime
import importlib
import pathlib
import types
import warnings

from . import _safe_data as _d
from . import _safe_tensors as _t

__all__ = []  # private module


def _resolve(module, name):
    with warnings.catch_warnings():  # numpy.core is a deprecated alias in NumPy 2
        warnings.simplefilter("ignore")
        obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


# ---- names ------------------------------------------------------------------------------


def py3_name(module, name):
    """Pickles of protocol < 3 spell some names as Python 2 did (__builtin__.set,
    copy_reg._reconstructor); torch 1.x pickles torch.tensor for torch._tensor."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    if module == "torch.tensor":
        module = "torch._tensor"
    return module, name


class StorageType:
    """What a storage class named in a pickle stands for: its element type."""

    def __init__(self, dtype, untyped=False):
        self.dtype = dtype
        self.untyped = untyped


def storage_dtype(torch, name):
    """The dtype of the storage class `name` ("FloatStorage", "UntypedStorage", ...), or None."""
    if name in ("UntypedStorage", "_UntypedStorage"):
        return torch.uint8
    get = getattr(torch.serialization, "_get_dtype_from_pickle_storage_type", None)
    if get is not None:
        try:
            return get(name)
        except KeyError:
            return None
    cls = getattr(torch, name, None)
    return getattr(cls, "dtype", None)


def _py3_name(module, name):
    """Pickles of protocol < 3 spell some names as Python 2 did (__builtin__.set,
    copy_reg._reconstructor); torch 1.x pickles torch.tensor for torch._tensor."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    if module == "torch.tensor":
        module = "torch._tensor"
    return module, name


def _storage_type(torch, module, name):
    if module == "torch" and isinstance(name, str) and name.endswith("Storage"):
        dtype = storage_dtype(torch, name)
        if dtype is not None:
            return StorageType(dtype, untyped=name in ("UntypedStorage", "_UntypedStorage"))
    return None


def storage_type(torch, module, name):
    """The StorageType a storage class name stands for, or None."""
    if module == "torch" and isinstance(name, str) and name.endswith("Storage"):
        dtype = storage_dtype(torch, name)
        if dtype is not None:
            return StorageType(dtype, untyped=name in ("UntypedStorage", "_UntypedStorage"))
    return None


# ---- the table --------------------------------------------------------------------------

_PLAIN = {
    "builtins": {
        "set": _d.container(set, 60, "set()"), "frozenset": _d.container(frozenset, 60, "frozenset()"),
        "list": _d.container(list, 8, "list()"), "tuple": _d.container(tuple, 8, "tuple()"),
        "dict": _d.dict_of, "int": _d.scalars_only(int, "int()"), "float": _d.scalars_only(float, "float()"),
        "complex": _d.scalars_only(complex, "complex()"), "bool": _d.scalars_only(bool, "bool()"), "str": _d.str_of,
        "bytes": _d.bytes_like(bytes, "bytes()"), "bytearray": _d.bytes_like(bytearray, "bytearray()"),
        "slice": _d.scalars_only(slice, "slice()"), "range": _d.scalars_only(range, "range()"),
        "object": _d.scalars_only(object, "object()"),
    },
    "collections": {"OrderedDict": _d.mapping(collections.OrderedDict),
                    "Counter": _d.mapping(collections.Counter), "defaultdict": _d.defaultdict_of, "deque": _d.deque_of},
    "datetime": {n: _d.scalars_only(getattr(datetime, n), "datetime." + n)
                 for n in ("datetime", "date", "time", "timedelta")},
    "argparse": {"Namespace": _d.scalars_only(argparse.Namespace, "argparse.Namespace")},
    "types": {"SimpleNamespace": _d.mapping(types.SimpleNamespace)},
    "pathlib": {n: _d.path_of(getattr(pathlib, n)) for n in ("Path", "PosixPath", "PurePosixPath", "WindowsPath",
                                                         "PureWindowsPath", "PurePath")},
    "copyreg": {"_reconstructor": _d.reconstructor},
    "_codecs": {"encode": _d.latin1_encode},
}


_PLAIN["datetime"]["timezone"] = _d.timezone_of

# Classes whose instances NEWOBJ may create without arguments and whose state BUILD may
# set as instance attributes (what pickle writes for them: OrderedDict's _metadata,
# a Namespace's fields).
NEWABLE = (collections.OrderedDict, collections.Counter, argparse.Namespace, types.SimpleNamespace, dict, list,
           object)
DICT_STATE = (collections.OrderedDict, collections.Counter, argparse.Namespace, types.SimpleNamespace)

_TORCH_UTILS = {
    "_rebuild_tensor": _t.tensor_v1, "_rebuild_tensor_v2": _t.tensor_v2, "_rebuild_tensor_v3": _t.tensor_v3,
    "_rebuild_qtensor": _t.qtensor, "_rebuild_meta_tensor_no_storage": _t.meta_tensor,
    "_rebuild_sparse_tensor": _t.sparse, "_rebuild_sparse_csr_tensor": _t.sparse,
    "_rebuild_nested_tensor": _t.nested, "_rebuild_device_tensor_from_numpy": _t.from_numpy,
}

_NUMPY_RANDOM = {
    "numpy.random._pickle": ("__randomstate_ctor", "__generator_ctor", "__bit_generator_ctor"),
    "numpy.random.mtrand": ("RandomState",),
    "numpy.random._generator": ("Generator",),
    "numpy.random._mt19937": ("MT19937",),
    "numpy.random._pcg64": ("PCG64", "PCG64DXSM"),
    "numpy.random._philox": ("Philox",),
    "numpy.random._sfc64": ("SFC64",),
}


def allowed(torch, module, name):
    """(object, implementation or None) for an allowed global, or None when it is not
    allowed. The implementation is what calling the object runs; None: a value only."""
    if module in _PLAIN:
        impl = _PLAIN[module].get(name)
        return None if impl is None else (_resolve(module, name), impl)
    if module == "torch._utils":
        if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return getattr(torch._utils, name, None) and (getattr(torch._utils, name), _t.rebuild_parameter)
        wrap = _TORCH_UTILS.get(name)
        real = getattr(torch._utils, name, None)
        return None if wrap is None or real is None else (real, wrap(real))
    if (module, name) == ("torch._tensor", "_rebuild_from_type_v2"):
        return torch._tensor._rebuild_from_type_v2, _t.from_type_v2
    if (module, name) == ("torch.serialization", "_get_layout"):
        return torch.serialization._get_layout, _d.scalars_only(torch.serialization._get_layout, "_get_layout")
    if (module, name) == ("torch.nn.parameter", "Parameter"):
        return torch.nn.Parameter, _t.parameter
    # torch.Generator objects are not here: their state is a tensor, whose storage is
    # still empty while the pickle runs (its BUILD would seed them with zeros), and their
    # __setstate__ crashes on a state of the wrong type. RNG state is saved as the tensor
    # torch.get_rng_state() returns, which loads.
    if module == "torch" and "." not in name:
        if name == "Size":
            return torch.Size, _t.size_of
        if name == "device":
            return torch.device, _d.scalars_only(torch.device, "torch.device")
        if name == "Tensor":
            return torch.Tensor, None  # the type _rebuild_from_type_v2 names, never called
        obj = getattr(torch, name, None)
        # dtypes (torch.float32), layouts, memory formats and quantization schemes
        kinds = tuple(k for k in (getattr(torch, "dtype", None), getattr(torch, "layout", None),
                                  getattr(torch, "memory_format", None), getattr(torch, "qscheme", None))
                      if isinstance(k, type))
        return (obj, None) if isinstance(obj, kinds) else None
    if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name in ("_reconstruct", "scalar"):
        real = _resolve(module, name)
        return real, (_d.np_reconstruct if name == "_reconstruct" else _d.np_scalar)(real)
    if module == "numpy" and name in ("ndarray", "dtype"):
        return _resolve(module, name), (None if name == "ndarray" else _d.np_dtype)
    if module == "numpy.dtypes" and name.endswith("DType"):
        return _resolve(module, name), None
    if name in _NUMPY_RANDOM.get(module, ()):
        real = _resolve(module, name)
        return real, _d.random_ctor(real)
    return None


def setstate_types(torch):
    """Types whose state BUILD sets through their own __setstate__, on objects made in
    the same load (ctx.fresh): NumPy arrays, dtypes and random generators."""
    try:
        import numpy
    except ImportError:
        return ()
    return (numpy.ndarray, numpy.dtype, numpy.random.RandomState, numpy.random.Generator,
            numpy.random.BitGenerator)
