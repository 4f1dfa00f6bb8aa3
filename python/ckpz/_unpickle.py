"""The unpickler ckpz.load and every loader use: by default it builds plain training state
only, so a checkpoint from an untrusted source can neither run code nor hurt the process
that loads it.

A pickle is a program for a stack machine. Python's own unpickler runs it with every
opcode's full power: it calls whatever it names (GLOBAL + REDUCE, NEWOBJ, INST, OBJ),
sets attributes on whatever object is on the stack (BUILD: on a class, it changes the
class for the whole process; on a tensor, Tensor.__setstate__ sets hooks or calls set_),
takes sizes from the file (a memo index of 2**30 is an allocation of that size) and
hashes tuples of any depth (a million nested tuples as a dict key crash CPython). So
ckpz runs pickles on a machine of its own, in four parts:

- _pickle_machine: the standard library's pure-Python unpickler with the opcodes that
  call, set state or allocate replaced;
- _safe_calls: the allow-list of names, each callable one mapped to a checked
  implementation (_safe_data for plain data and NumPy, _safe_tensors for tensors, which
  are rebuilt only inside their storage, without hooks);
- _pickle_limits: the memory budget per opcode and call, the nesting limits, and the
  errors (PickleRefused: a ckpz.Error naming the file that is also a
  pickle.UnpicklingError; UnsafeGlobalError, which names the global and how to opt in:
  safe_globals=[...] for that name alone, or trusted=True);
- here: make_unpickler, which the loaders call.

trusted=True (only for files you trust) uses the C unpickler with any global, as
torch.load does; even then tensors are rebuilt only inside their storages.
"""

import pickle

from . import _pickle_machine, _safe_calls
from ._lib import ERR_CORRUPT
from ._pickle_limits import PickleRefused, UnsafeGlobalError, qualname

__all__ = []  # private module

StorageType = _safe_calls.StorageType  # what a storage class named in a pickle stands for


def _trusted_class(torch, base, path):
    """trusted=True: any global, as torch.load resolves it, except that tensors are still
    rebuilt only inside their storages (torch's own rebuild would grow a storage the
    decoder has already placed)."""

    class Context:
        trusted = True
        extra_classes = ()
        newable = _safe_calls.NEWABLE

        def __init__(self):
            self.torch = torch

        def refuse(self, why):
            raise PickleRefused(ERR_CORRUPT, "the pickle asks for %s, which ckpz.load refuses" % why, path)

        def refuse_name(self, obj, called=False):
            raise UnsafeGlobalError(qualname(obj), path, called)

        def charge(self, _n):
            pass

        def fresh(self, obj, must_build=False):
            return obj

        def call(self, func, args, kwargs):
            return func(*args, **kwargs)

    ctx = Context()

    class Trusted(base):
        def find_class(self, module, name):
            module, name = _safe_calls.py3_name(module, name)
            st = _safe_calls.storage_type(torch, module, name)
            if st is not None:
                return st
            if module == "torch._utils":
                got = _safe_calls.allowed(torch, module, name)
                if got is not None:
                    impl = got[1]
                    return lambda *a, **k: impl(ctx, *a, **k)
            return super().find_class(module, name)

    return Trusted


def _torch_safe_globals(torch):
    """What users added to torch's allow-list. torch registers some of its own internals
    there too (nested tensors' rebuild, distributed types); those are left out: torch's
    objects go through ckpz's own checked table, or the caller's safe_globals."""
    get = getattr(getattr(torch, "serialization", None), "get_safe_globals", None)
    out = []
    for g in get() if get is not None else ():
        obj = g[0] if isinstance(g, tuple) else g
        mod = getattr(obj, "__module__", None) or ""
        if mod != "torch" and not mod.startswith("torch."):
            out.append(g)
    return out


def make_unpickler(torch, persistent_load, trusted=False, safe_globals=(), path=None, base=pickle.Unpickler,
                   overrides=None):
    """An Unpickler class for torch checkpoints. trusted: any global, as torch.load does
    (base: the pickle module's Unpickler to use); else the restricted machine, with the
    allow-list plus safe_globals ("module.name" strings or the objects) and what torch's
    own allow-list holds (torch.serialization.add_safe_globals / safe_globals(...), torch
    >= 2.4: what a user allows torch.load, ckpz.load allows too). overrides:
    {(module, name): function} the pickle may name and call as they are."""
    extra = {}  # "module.name" -> the object it stands for, or None: imported by name
    for g in list(safe_globals or ()) + list(_torch_safe_globals(torch)):
        if isinstance(g, str):
            if "." not in g:
                raise ValueError("ckpz: safe_globals names look like 'module.name', not %r" % (g,))
            extra.setdefault(g, None)
        elif isinstance(g, tuple) and len(g) == 2 and isinstance(g[1], str):  # torch's (object, "module.name")
            extra[g[1]] = g[0]
        else:
            mod, qual = getattr(g, "__module__", None), getattr(g, "__qualname__", None)
            if not mod or not qual:
                raise TypeError("ckpz: safe_globals takes classes, functions or 'module.name' strings, not %r" % (g,))
            extra["%s.%s" % (mod, qual)] = g
    if trusted:
        cls = _trusted_class(torch, base, path)

        class Unpickler(cls):
            def persistent_load(self, pid):
                return persistent_load(pid)

        return Unpickler
    attrs = {"torch": torch, "path": path, "persistent": staticmethod(persistent_load), "extra": extra,
             "overrides": dict(overrides or {})}
    return type("Unpickler", (_pickle_machine.SafeUnpickler,), attrs)
