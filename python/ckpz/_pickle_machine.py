"""The machine ckpz's safe unpickler runs pickles on (see _unpickle for why): a subclass
of the standard library's pure-Python unpickler with the opcodes that call, set state or
allocate by the file's word replaced.

- names resolve only through the allow-list (_safe_calls.allowed; the caller's
  safe_globals add names it trusts); REDUCE, NEWOBJ, INST and OBJ call only the checked
  implementation registered for what was resolved, never an object the pickle made;
- BUILD sets state only on instances this load made of the plain classes that pickle
  their state that way (OrderedDict's _metadata, a Namespace's fields), or through the
  own __setstate__ of NumPy arrays, dtypes and random generators, once
  per object this load made; never on a class, a tensor or anything else;
- every opcode and call is charged (_pickle_limits), tuples are measured as they are
  made, and the result's nesting is checked;
- anything malformed is a PickleRefused naming the file, never a Python exception from
  inside the machine.

The pure-Python machine costs about 0.5 us per opcode, twice the C unpickler's time (11 ms
against 5 for the 11,500 opcodes and 358 tensors of a 366 MB GPT + AdamW state on torch
2.13), what torch >= 2.6 pays for torch.load's weights_only default too.
"""

import io
import pickle
import sys

from . import _pickle_limits, _safe_calls
from ._lib import ERR_CORRUPT, ERR_INPUT, ERR_LIMIT, Error
from ._pickle_limits import PickleRefused, UnsafeGlobalError, qualname

__all__ = []  # private module


def _length(file):
    try:
        pos = file.tell()
        end = file.seek(0, io.SEEK_END)
        file.seek(pos)
        return end - pos
    except (AttributeError, OSError, ValueError):
        return 0


class SafeUnpickler(pickle._Unpickler):
    """The restricted machine (see the module's docstring). make_unpickler sets the class
    attributes: torch, path, persistent (the persistent_load function), extra (names the
    caller allowed: "module.name" -> the object, or None to import it), overrides ({(module, name): function} called as is)."""

    torch = None
    path = None
    persistent = None
    extra = {}
    overrides = {}
    trusted = False
    newable = _safe_calls.NEWABLE

    def __init__(self, file, **kwargs):
        super().__init__(file, **kwargs)
        self._file = file
        self.size = _length(file)
        self.budget = max(_pickle_limits.BUDGET_FLOOR, self.size)
        self.cost = 0
        self.extra_classes = set()
        self._calls = {}  # id(object resolved) -> (object, implementation)
        self._fresh = {}  # id -> object this load made whose state BUILD may set once
        self._unbuilt = {}  # id -> NumPy array made uninitialized, waiting for its BUILD
        self._depth = {}  # id -> (tuple or slice, nesting depth)
        self._setstate_types = _safe_calls.setstate_types(self.torch)

    # ---- the context the checked calls see -------------------------------------------

    def refuse(self, why):
        raise PickleRefused(ERR_INPUT, "the pickle asks for %s, which ckpz.load refuses" % why, self.path)

    def refuse_name(self, obj, called=False):
        raise UnsafeGlobalError(qualname(obj), self.path, called)

    def charge(self, nbytes):
        self.cost += nbytes
        if self.cost > self.budget:
            raise PickleRefused(ERR_LIMIT, "the pickle builds more than %d MiB of objects (it is a pickle of %d bytes): "
                        "refused; if you trust the file, load it with trusted=True"
                        % (self.budget >> 20, self.size), self.path)

    def fresh(self, obj, must_build=False):
        self._fresh[id(obj)] = obj
        if must_build:
            self._unbuilt[id(obj)] = obj
        return obj

    def call(self, func, args, kwargs):
        entry = self._calls.get(id(func))
        if entry is None or entry[0] is not func:
            self.refuse_name(func, called=True)
        out = entry[1](self, *args, **kwargs)
        if isinstance(out, (tuple, slice)):
            self._tuple_depth(out)
        return out

    # ---- names -----------------------------------------------------------------------

    def find_class(self, module, name):
        if not isinstance(module, str) or not isinstance(name, str):
            self.refuse("a global named by a %s" % type(name).__name__)
        module, name = _safe_calls.py3_name(module, name)
        st = _safe_calls.storage_type(self.torch, module, name)
        if st is not None:
            return st
        fn = self.overrides.get((module, name))
        if fn is not None:
            self._calls[id(fn)] = (fn, lambda _ctx, *a, **k: fn(*a, **k))
            return fn
        full = "%s.%s" % (module, name)
        if full in self.extra:
            obj = self.extra[full]
            if obj is None:
                obj = _safe_calls._resolve(module, name)
            self._calls[id(obj)] = (obj, lambda _ctx, *a, **k: obj(*a, **k))
            if isinstance(obj, type):
                self.extra_classes.add(obj)
            return obj
        try:
            got = _safe_calls.allowed(self.torch, module, name)
        except (ImportError, AttributeError):
            got = None
        if got is None:
            raise UnsafeGlobalError("%s.%s" % (module, name), self.path)
        obj, impl = got
        if impl is not None:
            self._calls[id(obj)] = (obj, impl)
        return obj

    def persistent_load(self, pid):
        return self.persistent(pid)

    # ---- the opcodes replaced --------------------------------------------------------

    def load_reduce(self):
        stack = self.stack
        args = stack.pop()
        if type(args) is not tuple:
            self.refuse("a call with arguments that are a %s" % type(args).__name__)
        stack[-1] = self.call(stack[-1], args, {})

    def _new(self, cls, args, kwargs):
        if any(cls is c for c in self.extra_classes):
            obj = cls.__new__(cls, *args, **kwargs)
        elif any(cls is c for c in self.newable) and not args and not kwargs:
            obj = cls.__new__(cls)
        else:
            self.refuse_name(cls, called=True)
        if isinstance(obj, (tuple, slice)):
            self._tuple_depth(obj)
        return obj

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        if type(args) is not tuple:
            self.refuse("NEWOBJ with arguments that are a %s" % type(args).__name__)
        self.append(self._new(cls, args, {}))

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        if type(args) is not tuple or type(kwargs) is not dict:
            self.refuse("NEWOBJ_EX with arguments that are a %s and a %s" % (type(args).__name__,
                                                                              type(kwargs).__name__))
        self.append(self._new(cls, args, kwargs))

    def _instantiate(self, klass, args):  # INST and OBJ
        self.append(self.call(klass, tuple(args), {}) if args else self._new(klass, (), {}))

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        t = type(inst)
        if any(t is c for c in self.extra_classes):
            self._build_as_pickle(inst, state)
        elif any(t is c for c in _safe_calls.DICT_STATE):
            if isinstance(state, tuple) and len(state) == 2 and state[1] is None:
                state = state[0]
            if state is None:
                return
            if not isinstance(state, dict) or any(type(k) is not str for k in state):
                self.refuse("state for a %s that is not a dict of names" % t.__name__)
            self.charge(100 * len(state))
            inst.__dict__.update(state)  # instance attributes only: no setter, no class runs
        elif isinstance(inst, self._setstate_types):
            if self._fresh.pop(id(inst), None) is not inst:
                self.refuse("state set twice on a %s, or on one this load did not make" % t.__name__)
            self._unbuilt.pop(id(inst), None)
            self._check_array_state(inst, state)
            inst.__setstate__(state)
        else:
            self.refuse("setting the state of %s (BUILD), which ckpz.load does not do" % (
                "the class " + qualname(inst) if isinstance(inst, type) else "a %s" % t.__name__))

    def _build_as_pickle(self, inst, state):
        """BUILD on an instance of a class the caller allowed: what pickle does."""
        setstate = getattr(inst, "__setstate__", None)
        if setstate is not None and getattr(type(inst), "__setstate__", None) is not getattr(object, "__setstate__",
                                                                                              None):
            setstate(state)
            return
        slots = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slots = state
        if state:
            inst.__dict__.update(state)
        if slots:
            for k, v in slots.items():
                setattr(inst, k, v)

    def _check_array_state(self, inst, state):
        import numpy

        if not isinstance(inst, numpy.ndarray):
            return
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            self.refuse("an array whose state is a %s" % type(state).__name__)
        shape, dtype, data = state[-4], state[-3], state[-1]
        if not isinstance(shape, tuple) or not all(isinstance(x, int) and x >= 0 for x in shape) \
                or not isinstance(dtype, numpy.dtype):
            self.refuse("an array of shape %r and dtype %r" % (shape, dtype))
        n = 1
        for x in shape:
            n *= x
        if dtype.hasobject != isinstance(data, list):
            self.refuse("an array of dtype %s from a %s" % (dtype, type(data).__name__))
        self.charge(8 * n if dtype.hasobject else n * dtype.itemsize)

    # ---- nesting ---------------------------------------------------------------------

    def _tuple_depth(self, x):
        return _pickle_limits.tuple_depth(self._depth, x, self.path)

    # ---- the machine -----------------------------------------------------------------

    def _reader(self):
        """read, readinto, readline: an io.BytesIO's own (C, no Python call per opcode;
        a frame only groups the bytes that follow: load_frame checks its size), else
        pickle's _Unframer."""
        f = self._file
        if isinstance(f, io.BytesIO):
            self.read, self.readinto, self.readline, self._tell = f.read, f.readinto, f.readline, f.tell
            self._unframer = None
            self._end = self._tell() + self.size
        else:
            u = self._unframer = pickle._Unframer(self._file_read, self._file_readline)
            self.read, self.readinto, self.readline = u.read, u.readinto, u.readline

    def load_frame(self):
        if self._unframer is not None:
            return pickle._Unpickler.load_frame(self)
        data = self.read(8)
        if len(data) != 8:
            raise EOFError("the pickle ends inside a FRAME")
        n = int.from_bytes(data, "little")
        if n > self._end - self._tell():
            self.refuse("a frame of %d bytes where %d are left" % (n, self._end - self._tell()))
        return None

    def load_bytearray8(self):
        """BYTEARRAY8 without pickle's bytearray of the length the file states, zeroed
        before a byte is read: the length is charged and checked against the bytes left."""
        n = int.from_bytes(self.read(8), "little")
        left = self._end - self._tell() if self._unframer is None else self.size or n  # size 0: unknown
        if n > left:
            self.refuse("a bytearray of %d bytes where %d are left" % (n, left))
        self.charge(n + 64)
        data = self.read(n)
        if len(data) != n:
            raise EOFError("the pickle ends inside a BYTEARRAY8")
        self.append(bytearray(data))

    def load(self):
        self._reader()
        self.metastack = []
        self.stack = []
        self.append = self.stack.append
        self.proto = 0
        read = self.read
        dispatch = self.dispatch
        costs = _pickle_limits.COSTS
        try:
            try:
                while True:
                    key = read(1)
                    if not key:
                        raise EOFError("the pickle ends before its STOP")
                    op = key[0]
                    self.cost += costs[op]
                    if self.cost > self.budget:
                        self.charge(0)
                    dispatch[op](self)
            except pickle._Stop as stop:
                result = stop.value
            if self._unbuilt:
                self.refuse("a NumPy array whose data never came (uninitialized memory)")
            _pickle_limits.check_nesting(result, self.path)
            return result
        except Error:
            raise
        except (RecursionError, MemoryError) as e:
            raise PickleRefused(ERR_LIMIT, "the pickle is too deep or too large to load (%s)" % type(e).__name__,
                        self.path) from None
        except Exception as e:
            raise PickleRefused(ERR_CORRUPT, "the pickle is malformed (%s: %s)" % (type(e).__name__, str(e)[:200]),
                        self.path) from None
        finally:
            self.stack = self.metastack = None
            self._fresh = self._unbuilt = self._depth = None


def _charged_per_item(op, per):
    def handler(self):
        self.charge(per * len(self.stack))  # the items since the mark
        op(self)

    return handler


def _charged_payload(op):
    def handler(self):
        op(self)
        self.charge(sys.getsizeof(self.stack[-1]))

    return handler


def _depth_checked(op):
    def handler(self):
        op(self)
        self._tuple_depth(self.stack[-1])

    return handler


def _dispatch():
    d = dict(pickle._Unpickler.dispatch)
    by_name = {}
    for name in _pickle_limits.PAYLOAD + _pickle_limits.TUPLES + tuple(_pickle_limits.PER_ITEM):
        code = getattr(pickle, name, None)
        if code is not None:
            by_name[name] = code[0]
    for name in _pickle_limits.TUPLES:  # measured as they are made
        if name in by_name:
            d[by_name[name]] = _pickle_limits.FAST_TUPLES.get(name) or _depth_checked(d[by_name[name]])
    for name in _pickle_limits.PAYLOAD:
        if name in by_name:
            d[by_name[name]] = _charged_payload(d[by_name[name]])
    for name, per in _pickle_limits.PER_ITEM.items():
        if name in by_name:
            d[by_name[name]] = _charged_per_item(d[by_name[name]], per)
    for name, fn in (("REDUCE", SafeUnpickler.load_reduce), ("NEWOBJ", SafeUnpickler.load_newobj),
                     ("NEWOBJ_EX", SafeUnpickler.load_newobj_ex), ("BUILD", SafeUnpickler.load_build),
                     ("FRAME", SafeUnpickler.load_frame), ("BYTEARRAY8", SafeUnpickler.load_bytearray8)):
        code = getattr(pickle, name, None)
        if code is not None:
            d[code[0]] = fn
    return d


SafeUnpickler.dispatch = _dispatch()
