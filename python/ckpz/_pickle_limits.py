"""What a pickle may cost the process that loads it, and the errors that say it may not.

Budget: every opcode is charged, before it runs, the bytes of the objects it can make on
CPython (COSTS; an opcode with a payload or a run of items is charged more as it runs,
and each checked call charges what it allocates), against max(BUDGET_FLOOR, the pickle's
size). A few bytes of pickle can otherwise ask for a lot: 1.5 million empty sets from 3
MB are 330 MB of objects.

Nesting: hashing a tuple recurses in C without a guard, so a tuple nested a million deep
used as a dict key crashes CPython; tuple_depth refuses tuples and slices (which hash
their members) beyond MAX_TUPLE_DEPTH as they are made. check_nesting refuses a result
whose containers nest beyond MAX_NESTING: what recursive code (ckpz's own walkers of a
state dict included) can take.
FAST_TUPLES: the machine's tuple opcodes, which measure each tuple as they make it.
"""

import itertools
import pickle

from ._lib import ERR_INPUT, ERR_LIMIT, Error

__all__ = []  # private module

BUDGET_FLOOR = 128 << 20  # bytes of objects any pickle may build
MAX_TUPLE_DEPTH = 100
MAX_NESTING = 200


class PickleRefused(Error, pickle.UnpicklingError):
    """What the safe unpickler raises: a ckpz.Error (naming the file) that is also a
    pickle.UnpicklingError, as an unpickler's errors are."""


class UnsafeGlobalError(PickleRefused):
    """A checkpoint names a global that ckpz.load does not build by default.

    A ckpz.Error (code ERR_INPUT) and a pickle.UnpicklingError. Attributes: ``name``
    ("module.qualname") and ``path`` (the file, or None)."""

    def __init__(self, name, path=None, called=False):
        what = "calls '%s', which ckpz.load does not call" % name if called else \
            "names the global '%s', which ckpz.load does not build" % name
        Error.__init__(
            self, ERR_INPUT,
            "the checkpoint %s unless told to (it could run code). If you trust this file: "
            "ckpz.load(..., trusted=True); to allow this name alone: ckpz.load(..., safe_globals=[%r])"
            % (what, name), path)
        self.name = name  # the global (ckpz.Error's name, the code's text, is not needed here)


def qualname(obj):
    if isinstance(obj, type) or callable(obj):
        return "%s.%s" % (getattr(obj, "__module__", "?"), getattr(obj, "__qualname__", type(obj).__name__))
    return "a %s object" % type(obj).__name__


# ---- the budget -------------------------------------------------------------------------

def _costs():
    """Bytes charged per opcode before it runs (an upper estimate of the objects it makes
    on CPython; ops with a payload or a run of items are charged more as they run)."""
    c = [64] * 256
    for name, n in (("STOP", 0), ("POP", 0), ("POP_MARK", 0), ("PROTO", 0), ("FRAME", 0), ("DUP", 8),
                    ("NONE", 8), ("NEWTRUE", 8), ("NEWFALSE", 8), ("BININT1", 8), ("BININT", 40),
                    ("BININT2", 40), ("BINFLOAT", 32), ("GET", 8), ("BINGET", 8), ("LONG_BINGET", 8),
                    ("PUT", 100), ("BINPUT", 100), ("LONG_BINPUT", 100), ("MEMOIZE", 100), ("APPEND", 16),
                    ("SETITEM", 100), ("EMPTY_SET", 220), ("EMPTY_DICT", 72), ("EMPTY_LIST", 64),
                    ("EMPTY_TUPLE", 8), ("TUPLE1", 56), ("TUPLE2", 64), ("TUPLE3", 72), ("FROZENSET", 220)):
        code = getattr(pickle, name, None)
        if code is not None:
            c[code[0]] = n
    return c


COSTS = _costs()
PER_ITEM = {"APPENDS": 16, "SETITEMS": 50, "ADDITEMS": 60, "LIST": 16, "DICT": 50, "TUPLE": 8, "FROZENSET": 60}
PAYLOAD = ("BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE", "BINBYTES", "SHORT_BINBYTES",
            "BINBYTES8", "BYTEARRAY8", "BINSTRING", "SHORT_BINSTRING", "STRING", "LONG", "LONG1", "LONG4", "INT",
            "FLOAT")
TUPLES = ("TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_TUPLE")


# ---- nesting ------------------------------------------------------------------------------

def tuple_depth(memo, x, path):
    """How deep tuples and slices nest in x (what hashing x recurses through);
    refused beyond MAX_TUPLE_DEPTH. Every tuple the machine makes is measured as it
    is made, so its nested tuples are already known (kept with their depth) or flat;
    anything else is measured by a walk (_walk_depth)."""
    d = 1
    for k in (x if isinstance(x, tuple) else (x.start, x.stop, x.step)):
        if isinstance(k, (tuple, slice)):
            got = memo.get(id(k))
            if got is not None and got[0] is k:
                e = got[1]
            elif not any(isinstance(j, (tuple, slice)) for j in
                         (k if isinstance(k, tuple) else (k.start, k.stop, k.step))):
                e = 1
            else:
                e = _walk_depth(memo, k, path)
            if e >= d:
                d = e + 1
    if d > 1:  # flat tuples (a tensor's sizes) are not kept
        if d > MAX_TUPLE_DEPTH:
            raise PickleRefused(ERR_LIMIT, "tuples nested more than %d deep: refused" % MAX_TUPLE_DEPTH, path)
        memo[id(x)] = (x, d)
    return d

def _walk_depth(memo, x, path):
    """_tuple_depth of a tuple or slice not measured before: iteratively, each
    nested one once (kept with its depth, which keeps its id from being reused)."""
    todo = [(x, False)]
    while todo:
        node, ready = todo.pop()
        kids = node if isinstance(node, tuple) else (node.start, node.stop, node.step)
        if ready:
            d = 1
            for k in kids:
                if isinstance(k, (tuple, slice)) and memo[id(k)][1] >= d:
                    d = memo[id(k)][1] + 1
            if d > MAX_TUPLE_DEPTH:
                raise PickleRefused(ERR_LIMIT, "tuples nested more than %d deep: refused" % MAX_TUPLE_DEPTH, path)
            memo[id(node)] = (node, d)
            continue
        seen = memo.get(id(node))
        if seen is not None and seen[0] is node:
            continue
        todo.append((node, True))
        for k in kids:
            if isinstance(k, (tuple, slice)):
                seen = memo.get(id(k))
                if seen is None or seen[0] is not k:
                    todo.append((k, False))
    return memo[id(x)][1]


_CONTAINERS = (dict, list, tuple, set, frozenset)


def check_nesting(obj, path=None, limit=MAX_NESTING):
    """Refuses obj when containers (dicts, lists, tuples, sets) nest in it more than limit
    levels deep along any path. Iterative; each container's height (the levels from it
    down) is measured once, so shared containers cost nothing more; a container met
    again on its own path (a cycle) ends that path."""
    if not isinstance(obj, _CONTAINERS):
        return
    height = {}  # id -> (container, height)
    frames = [[obj, _children(obj), 1]]  # [container, its children, height found so far]
    on_path = {id(obj)}
    while frames:
        top = frames[-1]
        pushed = False
        for child in top[1]:
            if not isinstance(child, _CONTAINERS) or id(child) in on_path:
                continue
            seen = height.get(id(child))
            if seen is not None and seen[0] is child:
                if len(frames) + seen[1] > limit:
                    _too_deep(limit, path)
                top[2] = max(top[2], seen[1] + 1)
                continue
            if len(frames) >= limit:
                _too_deep(limit, path)
            on_path.add(id(child))
            frames.append([child, _children(child), 1])
            pushed = True
            break
        if pushed:
            continue
        frames.pop()
        on_path.discard(id(top[0]))
        height[id(top[0])] = (top[0], top[2])
        if frames:
            frames[-1][2] = max(frames[-1][2], top[2] + 1)


def _too_deep(limit, path):
    raise PickleRefused(ERR_LIMIT, "objects nested more than %d deep: refused" % limit, path)


def _children(c):
    return itertools.chain(c.keys(), c.values()) if isinstance(c, dict) else iter(c)


# Tuples as the machine makes them, measured as _tuple_depth would: a flat tuple (a
# tensor's sizes) nests 1 deep and is not kept; one whose nested items are all flat
# tuples (a tensor's arguments) nests 2 deep and is kept; anything else is measured by
# _tuple_depth itself.
_NESTS = (tuple, slice)


def _measure(self, t):
    for x in t:
        if isinstance(x, tuple):
            for y in x:
                if isinstance(y, _NESTS):
                    return self._tuple_depth(t)
        elif isinstance(x, slice):
            return self._tuple_depth(t)
    self._depth[id(t)] = (t, 2)
    return 2


def _tuple(self):
    t = tuple(self.pop_mark())
    for x in t:
        if isinstance(x, _NESTS):
            _measure(self, t)
            break
    self.append(t)


def _tuple_n(n):  # TUPLE1, TUPLE2, TUPLE3
    def op(self):
        stack = self.stack
        if len(stack) < n:
            raise IndexError("TUPLE%d on a stack of %d items" % (n, len(stack)))
        t = tuple(stack[-n:])
        for x in t:
            if isinstance(x, _NESTS):
                _measure(self, t)
                break
        stack[-n:] = [t]

    return op


FAST_TUPLES = {"TUPLE": _tuple, "TUPLE1": _tuple_n(1), "TUPLE2": _tuple_n(2), "TUPLE3": _tuple_n(3),
                "EMPTY_TUPLE": pickle._Unpickler.load_empty_tuple}  # (): nothing to measure
