"""What the safe unpickler calls to build plain data: containers, numbers, strings,
bytes, paths, dates, NumPy arrays, dtypes and random generators, each from the pickle's
arguments, checked.

Each implementation refuses arguments that would make something other than plain data
(str() of a container prints it: a list shared at every level of a DAG prints
exponentially long) and charges what it allocates before allocating it (ctx.charge), so
a few bytes of pickle cannot ask for gigabytes: `bytearray(2**31)`, `list(range(3 *
10**7))`, a NumPy array of an 8 GiB shape. Objects whose state a later BUILD may set
(NumPy arrays, dtypes, random generators) are registered with
ctx.fresh: BUILD sets state once, on objects this load made; numpy.dtype is always made
as a copy (BUILD on the shared float64 descriptor would change it for the process).

Implementations are called as impl(ctx, *args, **kwargs) by the unpickler (see _safe_calls).
"""

import _codecs
import collections
import datetime
import math

from ._safe_tensors import MAX_DIMS, is_int

__all__ = []  # private module


def _sized(ctx, it, per_item, what):
    """len(it), charged at per_item bytes each; it must be a sized container or range."""
    if isinstance(it, (str, bytes, bytearray)):
        n = len(it)
    elif isinstance(it, (list, tuple, dict, set, frozenset, range, collections.deque)):
        try:
            n = len(it)
        except OverflowError:
            ctx.refuse("%s of a range too long to count" % what)
    else:
        ctx.refuse("%s of a %s" % (what, type(it).__name__))
    ctx.charge(n * per_item)
    return n


def container(ctor, per_item, what):
    def impl(ctx, *args, **kwargs):
        if kwargs or len(args) > 1:
            ctx.refuse("%s with more than one argument" % what)
        if args:
            # a range makes new int objects too; containers made from others share them
            _sized(ctx, args[0], per_item + (32 if isinstance(args[0], range) else 0), what)
        return ctor(*args)

    return impl


def bytes_like(ctor, what):
    def impl(ctx, source=b"", *rest):
        if len(rest) > 2:
            ctx.refuse("%s with %d arguments" % (what, 1 + len(rest)))
        if isinstance(source, int) and not isinstance(source, bool):
            if source < 0:
                ctx.refuse("%s of a negative size" % what)
            ctx.charge(source)
        elif isinstance(source, (str, bytes, bytearray)):
            ctx.charge(4 * len(source))
        elif isinstance(source, (list, tuple, range)):
            _sized(ctx, source, 1, what)
        else:
            ctx.refuse("%s of a %s" % (what, type(source).__name__))
        return ctor(source, *rest)

    return impl


_SCALARS = (int, float, complex, bool, str, bytes, bytearray, type(None))


def scalars_only(ctor, what):
    def impl(ctx, *args, **kwargs):
        for a in list(args) + list(kwargs.values()):
            if not isinstance(a, _SCALARS):
                ctx.refuse("%s of a %s" % (what, type(a).__name__))
        return ctor(*args, **kwargs)

    return impl


def str_of(ctx, obj="", *rest):
    # str() of a container would print it: a DAG of shared lists prints exponentially
    if not isinstance(obj, _SCALARS) or len(rest) > 2:
        ctx.refuse("str() of a %s" % type(obj).__name__)
    if isinstance(obj, (bytes, bytearray)):
        ctx.charge(4 * len(obj))
    return str(obj, *rest)


def dict_of(ctx, *args, **kwargs):
    if len(args) > 1:
        ctx.refuse("dict() with %d arguments" % len(args))
    if args:
        _sized(ctx, args[0], 100, "dict()")
    ctx.charge(100 * len(kwargs))
    return dict(*args, **kwargs)


def mapping(cls):
    def impl(ctx, *args, **kwargs):
        return cls(dict_of(ctx, *args, **kwargs)) if (args or kwargs) else cls()

    return impl


_FACTORIES = (None, list, dict, set, frozenset, tuple, int, float, str, bytes, collections.OrderedDict,
              collections.Counter, collections.deque)


def defaultdict_of(ctx, factory=None, *args):
    if factory not in _FACTORIES:
        ctx.refuse("a defaultdict whose default factory is %r" % (factory,))
    d = collections.defaultdict(factory)
    if args:
        d.update(dict_of(ctx, *args))
    return d


def deque_of(ctx, iterable=(), maxlen=None):
    _sized(ctx, iterable, 8, "deque()")
    if maxlen is not None and (not isinstance(maxlen, int) or isinstance(maxlen, bool)):
        ctx.refuse("deque() with maxlen %r" % (maxlen,))
    return collections.deque(iterable, maxlen)


def path_of(cls):
    def impl(ctx, *parts):
        if not all(isinstance(p, str) for p in parts):
            ctx.refuse("a path made of something other than strings")
        ctx.charge(sum(len(p) for p in parts))
        return cls(*parts)

    return impl


def latin1_encode(ctx, obj, encoding="utf-8", errors="strict"):
    # protocol 2 pickles bytes as _codecs.encode(text, "latin1"): only that
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "iso-8859-1") or errors != "strict":
        ctx.refuse("_codecs.encode with encoding %r" % (encoding,))
    ctx.charge(len(obj))
    return _codecs.encode(obj, encoding)


def reconstructor(ctx, cls, base, state):
    """copyreg._reconstructor (protocols 0 and 1): an instance of an allowed plain class."""
    if base is object and state is None and cls in ctx.newable:
        return object.__new__(cls)
    if base in (dict, list) and isinstance(cls, type) and issubclass(cls, base) and cls in ctx.newable:
        _sized(ctx, state, 100, "a %s" % cls.__name__)
        obj = base.__new__(cls, state)
        base.__init__(obj, state)
        return obj
    ctx.refuse("copyreg._reconstructor(%s, %s, ...)" % (getattr(cls, "__name__", "?"), getattr(base, "__name__", "?")))


def random_ctor(real):
    """NumPy's random generators and their pickle constructors: arguments are names,
    seeds, bit generator classes or objects, or NumPy's own bit generator constructor."""

    def impl(ctx, *args):
        import numpy.random

        bg = numpy.random.BitGenerator
        make_bg = getattr(numpy.random._pickle, "__bit_generator_ctor", None)
        for a in args:
            if not (isinstance(a, (str, int)) or isinstance(a, bg) or a is make_bg
                    or (isinstance(a, type) and issubclass(a, bg))):
                ctx.refuse("%s of a %s" % (getattr(real, "__name__", "?"), type(a).__name__))
        return ctx.fresh(real(*args))

    return impl


def timezone_of(ctx, offset, *name):
    if not isinstance(offset, datetime.timedelta) or not all(isinstance(n, str) for n in name):
        ctx.refuse("datetime.timezone of a %s" % type(offset).__name__)
    return datetime.timezone(offset, *name)


# ---- NumPy ------------------------------------------------------------------------------


def np_dtype(ctx, obj, align=False, copy=False):
    import numpy

    if not isinstance(obj, str) or not isinstance(align, bool):
        ctx.refuse("numpy.dtype of a %s" % type(obj).__name__)
    # always a copy: BUILD on the shared dtype object would change it for everyone
    return ctx.fresh(numpy.dtype(obj, align, True))


def np_reconstruct(real):
    def impl(ctx, subtype, shape, dtype):
        import numpy

        if subtype is not numpy.ndarray or not isinstance(shape, tuple) or len(shape) > MAX_DIMS \
                or not all(is_int(x) and x >= 0 for x in shape):
            ctx.refuse("numpy _reconstruct of %r with shape %r" % (subtype, shape))
        if not isinstance(dtype, (bytes, str)) or len(dtype) > 8:
            ctx.refuse("numpy _reconstruct with dtype %r" % (dtype,))
        ctx.charge(math.prod(shape) * numpy.dtype(dtype).itemsize)
        # uninitialized memory until its BUILD: an array never built is refused
        return ctx.fresh(real(subtype, shape, dtype), must_build=True)

    return impl


def np_scalar(real):
    def impl(ctx, dtype, data=None):
        import numpy

        if not isinstance(dtype, numpy.dtype) or dtype.hasobject or not isinstance(data, bytes) \
                or len(data) != dtype.itemsize:
            ctx.refuse("a NumPy scalar of %r from a %s" % (dtype, type(data).__name__))
        return real(dtype, data)

    return impl
