"""The unpickler ckpz.load uses: by default it only builds objects of an allow-list, so a
checkpoint from an untrusted source can never run code when it is loaded.

A pickle runs code by naming a global (module and name) and calling it: every such name
goes through Unpickler.find_class (the GLOBAL, STACK_GLOBAL, INST, OBJ and EXT opcodes
all end there), so refusing names there refuses the code. The list holds what training
state is made of: containers, numbers, strings, tensors and storages and how torch
rebuilds them, dtypes, devices, torch.Size, and what optimizer, LR-scheduler, AMP and RNG
state dicts contain (collections.Counter for MultiStepLR, NumPy arrays and scalars for
NumPy's RNG state, argparse.Namespace for saved command lines). The few allowed callables
that take arbitrary arguments are wrapped so they cannot be turned into something else:
tensors are rebuilt without backward hooks, and _codecs.encode (protocol 2's bytes)
only re-encodes latin-1 text. torch 1.13's own weights_only=True unpickler refuses
AdamW's state (it has no floats), which is why ckpz has one of its own.

A name outside the list raises UnsafeGlobalError, which names it and says how to opt
in: safe_globals=[...] for that name alone, or trusted=True for the full unpickler
torch.load uses (only for files you trust).
"""

import _compat_pickle
import collections
import importlib
import pickle

__all__ = []  # private module


class UnsafeGlobalError(pickle.UnpicklingError):
    """A checkpoint names a global that ckpz.load does not build by default.

    Attributes: ``name`` ("module.qualname") and ``path`` (the file, or None)."""

    def __init__(self, name, path=None):
        self.name = name
        self.path = path
        where = "%s: " % path if path is not None else ""
        super().__init__(
            "%sthe checkpoint names the global '%s', which ckpz.load does not build unless told to "
            "(it could run code). If you trust this file: ckpz.load(..., trusted=True); to allow this "
            "name alone: ckpz.load(..., safe_globals=[%r])" % (where, name, name)
        )


# Plain data types and containers (constructing them runs no user code).
_BUILTINS = {
    "builtins": ("set", "frozenset", "list", "dict", "tuple", "int", "float", "complex", "bool", "str", "bytes",
                 "bytearray", "slice", "range", "object"),
    "collections": ("OrderedDict", "Counter", "defaultdict", "deque"),
    "datetime": ("datetime", "date", "time", "timedelta", "timezone"),
    "argparse": ("Namespace",),
    "types": ("SimpleNamespace",),
    "pathlib": ("Path", "PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath", "PurePath"),
    "copyreg": ("_reconstructor",),
    "torch": ("Size", "device", "Tensor", "Generator"),
    "torch.nn.parameter": ("Parameter",),
    "torch._utils": ("_rebuild_tensor", "_rebuild_meta_tensor_no_storage", "_rebuild_sparse_tensor",
                     "_rebuild_sparse_csr_tensor", "_rebuild_sparse_compressed_tensor",
                     "_rebuild_nested_tensor", "_rebuild_device_tensor_from_numpy"),
    "torch.serialization": ("_get_layout",),
    # Schedulers' state dicts are plain data, except OneCycleLR's on torch < 2.2: its
    # annealing function is a bound method, which pickles the scheduler object with its
    # optimizer (classes and getattr): refused, it needs trusted=True.
    "numpy": ("ndarray", "dtype"),
    "numpy.core.multiarray": ("_reconstruct", "scalar"),
    "numpy._core.multiarray": ("_reconstruct", "scalar"),
    "numpy.random._pickle": ("__randomstate_ctor", "__generator_ctor", "__bit_generator_ctor"),
    "numpy.random.mtrand": ("RandomState",),
    "numpy.random._generator": ("Generator",),
    "numpy.random._mt19937": ("MT19937",),
    "numpy.random._pcg64": ("PCG64", "PCG64DXSM"),
    "numpy.random._philox": ("Philox",),
    "numpy.random._sfc64": ("SFC64",),
}

# NumPy's dtype classes (numpy.dtypes.Float32DType, ... in NumPy >= 1.25 pickles).
_NUMPY_DTYPE_MODULES = ("numpy.dtypes",)


def _plain(module, name):
    return name in _BUILTINS.get(module, ())


def _resolve(module, name):
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _no_hooks(backward_hooks, what):
    if backward_hooks:
        raise pickle.UnpicklingError("%s with backward hooks: refused (hooks are code)" % what)


def _wrapped_torch(torch, name):
    """The checked stand-ins for torch's rebuild functions that take hooks or state."""
    u = torch._utils

    if name == "_rebuild_tensor_v2":

        def rebuild_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, *metadata):
            _no_hooks(backward_hooks, "a tensor")
            return u._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
                                        collections.OrderedDict(), *metadata)

        return rebuild_v2
    if name == "_rebuild_tensor_v3" and hasattr(u, "_rebuild_tensor_v3"):

        def rebuild_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, *rest):
            _no_hooks(backward_hooks, "a tensor")
            return u._rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad,
                                        collections.OrderedDict(), *rest)

        return rebuild_v3
    if name == "_rebuild_qtensor":

        def rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params, requires_grad, backward_hooks):
            _no_hooks(backward_hooks, "a quantized tensor")
            return u._rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params, requires_grad,
                                      collections.OrderedDict())

        return rebuild_qtensor
    if name == "_rebuild_parameter":

        def rebuild_parameter(data, requires_grad, backward_hooks):
            _no_hooks(backward_hooks, "a parameter")
            return u._rebuild_parameter(data, requires_grad, collections.OrderedDict())

        return rebuild_parameter
    if name == "_rebuild_parameter_with_state" and hasattr(u, "_rebuild_parameter_with_state"):

        def rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
            _no_hooks(backward_hooks, "a parameter")
            _check_state(state)
            return u._rebuild_parameter_with_state(data, requires_grad, collections.OrderedDict(), state)

        return rebuild_parameter_with_state
    return None


def _check_state(state):
    """Attribute state set on a rebuilt tensor: plain names only (no dunders such as
    __class__), as a dict or a (dict, slots) pair."""
    parts = state if isinstance(state, tuple) else (state,)
    for part in parts:
        if part is None:
            continue
        if not isinstance(part, dict) or any(not isinstance(k, str) or k.startswith("__") for k in part):
            raise pickle.UnpicklingError("tensor state with unusual attributes: refused")


def _rebuild_from_type_v2(torch):
    original = torch._tensor._rebuild_from_type_v2
    allowed_types = (torch.Tensor, torch.nn.Parameter)

    def rebuild(func, new_type, args, state):
        if new_type not in allowed_types:
            raise UnsafeGlobalError("%s.%s" % (getattr(new_type, "__module__", "?"), getattr(new_type, "__qualname__", "?")))
        _check_state(state)
        return original(func, new_type, args, state)

    return rebuild


def _latin1_encode(obj, encoding="utf-8", errors="strict"):
    import _codecs

    if encoding not in ("latin1", "latin-1", "iso-8859-1") or errors != "strict":
        raise pickle.UnpicklingError("_codecs.encode with encoding %r: refused" % (encoding,))
    return _codecs.encode(obj, encoding)


class _StorageType:
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


def make_unpickler(torch, persistent_load, trusted=False, safe_globals=(), path=None, base=pickle.Unpickler):
    """An Unpickler class for torch checkpoints. trusted: any global, as torch.load does;
    else the allow-list plus safe_globals ("module.name" strings or the objects)."""
    extra = set()
    for g in safe_globals or ():
        if isinstance(g, str):
            if "." not in g:
                raise ValueError("ckpz: safe_globals names look like 'module.name', not %r" % (g,))
            extra.add(g)
        else:
            mod, qual = getattr(g, "__module__", None), getattr(g, "__qualname__", None)
            if not mod or not qual:
                raise TypeError("ckpz: safe_globals takes classes, functions or 'module.name' strings, not %r" % (g,))
            extra.add("%s.%s" % (mod, qual))
    module_mapping = {"torch.tensor": "torch._tensor"}

    class Unpickler(base):
        def find_class(self, module, name):
            # Pickles of protocol < 3 spell some names as Python 2 did (__builtin__.set,
            # copy_reg._reconstructor): undo that first, as pickle's own find_class does.
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
            module = module_mapping.get(module, module)
            if module == "torch" and isinstance(name, str) and name.endswith("Storage"):
                dtype = storage_dtype(torch, name)
                if dtype is not None:
                    return _StorageType(dtype, untyped=name in ("UntypedStorage", "_UntypedStorage"))
            if trusted:
                return super().find_class(module, name)
            full = "%s.%s" % (module, name)
            if full in extra:
                return super().find_class(module, name)
            if module == "torch._utils":
                w = _wrapped_torch(torch, name)
                if w is not None:
                    return w
            if module == "torch._tensor" and name == "_rebuild_from_type_v2":
                return _rebuild_from_type_v2(torch)
            if module == "_codecs" and name == "encode":
                return _latin1_encode
            if _plain(module, name):
                return _resolve(module, name)
            if module == "torch" and "." not in name:
                obj = getattr(torch, name, None)
                # dtypes (torch.float32), layouts, memory formats and quantization schemes
                kinds = tuple(k for k in (getattr(torch, "dtype", None), getattr(torch, "layout", None),
                                          getattr(torch, "memory_format", None), getattr(torch, "qscheme", None))
                              if isinstance(k, type))
                if isinstance(obj, kinds):
                    return obj
            if module in _NUMPY_DTYPE_MODULES and name.endswith("DType"):
                return _resolve(module, name)
            raise UnsafeGlobalError(full, path)

        def persistent_load(self, pid):
            return persistent_load(pid)

    return Unpickler
