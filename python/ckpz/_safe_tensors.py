"""How the safe unpickler rebuilds tensors: torch's rebuild functions, checked.

A tensor in a pickle is a storage of the file plus an offset, sizes and strides. torch's
own rebuild calls Tensor.set_, which silently grows the storage when they reach past it
(one crafted file asks for 4 GiB; a loader that decodes into the storage's old address
then writes into freed memory). So every rebuild here first checks the extent against
the storage's bytes (check_extent: non-negative integers, no overflow, at most MAX_DIMS
dimensions), refuses backward hooks (code) unless the load is trusted, and sets only
attributes that are not already attributes of the tensor's class (`data`, `grad`,
`_backward_hooks` would replace what the file stored). Sparse tensors' indices and
nested tensors' offsets are checked before the tensor exists.

Implementations are called as impl(ctx, *args) by the unpickler (see _safe_calls).
"""

import collections

__all__ = []  # private module

MAX_DIMS = 64  # dimensions of a tensor built from a pickle (torch's own limit is 64 too)


def is_int(x):
    return type(x) is int or (isinstance(x, int) and not isinstance(x, bool))


def check_extent(nbytes, itemsize, offset, size, stride, refuse, what="a tensor"):
    """Refuses (refuse(why) raises) a tensor of these offset, sizes and strides (in
    elements of itemsize bytes) that does not lie inside a storage of nbytes bytes:
    negative or non-integer values, more than MAX_DIMS dimensions, or an extent past
    the end. Returns (size, stride) as tuples of ints."""
    if type(size) is not tuple or type(stride) is not tuple:
        if not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)):
            refuse("%s whose sizes or strides are not sequences" % what)
        size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride) or len(size) > MAX_DIMS:
        refuse("%s with %d sizes and %d strides" % (what, len(size), len(stride)))
    numel, end = 1, offset
    ok = is_int(offset) and offset >= 0
    for n, s in zip(size, stride):
        if not (is_int(n) and is_int(s) and n >= 0 and s >= 0):
            ok = False
            break
        numel *= n
        end += (n - 1) * s
    if not ok:
        refuse("%s with a negative or non-integer offset, size or stride (offset %r, sizes %r, strides %r)"
               % (what, offset, size, stride))
    if numel >= 1 << 62:
        refuse("%s of %d elements" % (what, numel))
    end = offset if numel == 0 else end + 1
    if end * itemsize > nbytes:
        refuse("%s of sizes %s, strides %s at offset %d reaches byte %d of a storage of %d bytes"
               % (what, list(size), list(stride), offset, end * itemsize, nbytes))
    return size, stride


def untyped(storage):
    """The untyped storage under a TypedStorage (torch 1.13 and torch >= 2)."""
    return storage._untyped_storage if hasattr(storage, "_untyped_storage") else storage._storage


def _storage_checked(ctx, storage, offset, size, stride, itemsize=None):
    torch = ctx.torch
    if not isinstance(storage, torch.storage.TypedStorage):
        ctx.refuse("a tensor whose storage is a %s, not one of the file's storages" % type(storage).__name__)
    if itemsize is None:
        itemsize = torch._utils._element_size(storage.dtype)
    return check_extent(untyped(storage).nbytes(), itemsize, offset, size, stride, ctx.refuse)


def _hooks(ctx, hooks, what):
    """Backward hooks are code: refused unless trusted; an empty dict is what torch writes."""
    if ctx.trusted:
        return hooks
    if hooks is not None and not (isinstance(hooks, dict) and not hooks):
        ctx.refuse("%s with backward hooks (hooks are code)" % what)
    return collections.OrderedDict()


def _bool(ctx, x, what):
    if not isinstance(x, bool):
        ctx.refuse("%s: requires_grad is a %s, not a bool" % (what, type(x).__name__))


def _metadata(ctx, metadata):
    if metadata is None or ctx.trusted:
        return metadata
    if not isinstance(metadata, dict) or any(k not in ("conj", "neg") or not isinstance(v, bool)
                                             for k, v in metadata.items()):
        ctx.refuse("tensor metadata %r" % (metadata,))
    return metadata


def _plain(ctx):
    """Whether a tensor without metadata or hooks may be rebuilt here (_rebuilt) rather
    than by torch's _rebuild_tensor_v2, which does the same plus, on torch 2.x, a look for
    a fake-tensor mode (two thirds of its cost): yes unless one is active, which is asked
    once per load."""
    ok = getattr(ctx, "_plain_rebuild", None)
    if ok is None:
        detect = getattr(getattr(ctx.torch, "_guards", None), "detect_fake_mode", None)
        try:
            ok = detect is None or detect(None) is None
        except Exception:  # noqa: BLE001 - torch's own rebuild then, as always
            ok = False
        ctx._plain_rebuild = ok
    return ok


def _rebuilt(torch, storage, offset, size, stride, requires_grad, hooks):
    """torch._utils._rebuild_tensor_v2 without metadata: a tensor of storage's dtype and
    device set to view it (extent already checked), its requires_grad and hooks set."""
    u = untyped(storage)
    t = torch.empty((0,), dtype=storage.dtype, device=u.device)
    t.set_(u, offset, size, stride)
    t.requires_grad = requires_grad
    t._backward_hooks = hooks
    return t


def tensor_v2(real):
    def impl(ctx, storage, offset, size, stride, requires_grad, hooks, *meta):
        size, stride = _storage_checked(ctx, storage, offset, size, stride)
        _bool(ctx, requires_grad, "a tensor")
        if len(meta) > 1:
            ctx.refuse("a tensor rebuilt with %d extra arguments" % len(meta))
        meta = tuple(_metadata(ctx, m) for m in meta)
        hooks = _hooks(ctx, hooks, "a tensor")
        if not hooks and not (meta and meta[0]) and _plain(ctx):
            return _rebuilt(ctx.torch, storage, offset, size, stride, requires_grad, hooks)
        return real(storage, offset, size, stride, requires_grad, hooks, *meta)

    return impl


def tensor_v3(real):
    def impl(ctx, storage, offset, size, stride, requires_grad, hooks, dtype, *meta):
        if not isinstance(dtype, ctx.torch.dtype):
            ctx.refuse("a tensor whose dtype is a %s" % type(dtype).__name__)
        size, stride = _storage_checked(ctx, storage, offset, size, stride, ctx.torch._utils._element_size(dtype))
        _bool(ctx, requires_grad, "a tensor")
        if len(meta) > 1:
            ctx.refuse("a tensor rebuilt with %d extra arguments" % len(meta))
        meta = tuple(_metadata(ctx, m) for m in meta)
        return real(storage, offset, size, stride, requires_grad, _hooks(ctx, hooks, "a tensor"), dtype, *meta)

    return impl


def tensor_v1(real):
    def impl(ctx, storage, offset, size, stride):
        size, stride = _storage_checked(ctx, storage, offset, size, stride)
        return real(storage, offset, size, stride)

    return impl


def qtensor(real):
    def impl(ctx, storage, offset, size, stride, qparams, requires_grad, hooks):
        torch = ctx.torch
        size, stride = _storage_checked(ctx, storage, offset, size, stride)
        _bool(ctx, requires_grad, "a quantized tensor")
        if not isinstance(qparams, tuple) or not qparams or not isinstance(qparams[0], torch.qscheme):
            ctx.refuse("a quantized tensor without its quantization scheme")
        if len(qparams) == 4:  # per channel: (scheme, scales, zero points, axis)
            _, scales, zeros, axis = qparams
            if not is_int(axis) or not 0 <= axis < len(size):
                ctx.refuse("a quantized tensor quantized along axis %r of %d" % (axis, len(size)))
            for v in (scales, zeros):
                if not isinstance(v, (list, torch.Tensor)) or len(v) != size[axis]:
                    ctx.refuse("a quantized tensor with %r scales or zero points for %d channels"
                               % (type(v).__name__, size[axis]))
        elif len(qparams) != 3:
            ctx.refuse("a quantized tensor with %d quantization parameters" % len(qparams))
        return real(storage, offset, size, stride, qparams, requires_grad, _hooks(ctx, hooks, "a quantized tensor"))

    return impl


def _check_state(ctx, cls, state, what):
    """Attribute state for a rebuilt tensor or parameter: a dict (or a (dict, slots) pair)
    of plain names that are not already attributes of the class (no `data`, `grad`,
    `_backward_hooks`: those would replace what the file stored or add code)."""
    parts = state if isinstance(state, tuple) else (state,)
    if len(parts) > 2:
        ctx.refuse("%s with a state of %d parts" % (what, len(parts)))
    items = []
    for part in parts:
        if part is None:
            continue
        if not isinstance(part, dict):
            ctx.refuse("%s whose state is a %s" % (what, type(part).__name__))
        for k, v in part.items():
            if not isinstance(k, str) or k.startswith("__") or (not ctx.trusted and hasattr(cls, k)):
                ctx.refuse("%s whose state sets the attribute %r" % (what, k))
            items.append((k, v))
    return items


def parameter(ctx, data=None, requires_grad=True):
    torch = ctx.torch
    if not isinstance(data, torch.Tensor):
        ctx.refuse("a parameter of a %s" % type(data).__name__)
    _bool(ctx, requires_grad, "a parameter")
    return torch.nn.Parameter(data, requires_grad)


def rebuild_parameter(ctx, data, requires_grad, hooks, state=None):
    p = parameter(ctx, data, requires_grad)
    hooks = _hooks(ctx, hooks, "a parameter")
    if hooks:
        p._backward_hooks = hooks
    for k, v in _check_state(ctx, type(p), state, "a parameter"):
        setattr(p, k, v)
    return p


def from_type_v2(ctx, func, new_type, args, state):
    """torch._tensor._rebuild_from_type_v2: func(*args) through the same checks as any
    call, as new_type (Tensor or Parameter) with checked attributes."""
    torch = ctx.torch
    if new_type not in (torch.Tensor, torch.nn.Parameter) and new_type not in ctx.extra_classes:
        ctx.refuse_name(new_type)
    if not isinstance(args, tuple):
        ctx.refuse("a tensor rebuilt from arguments that are a %s" % type(args).__name__)
    items = _check_state(ctx, new_type, state, "a tensor")
    ret = ctx.call(func, args, {})
    if not isinstance(ret, torch.Tensor):
        ctx.refuse("a tensor rebuilt as a %s" % type(ret).__name__)
    if type(ret) is not new_type:
        ret = ret.as_subclass(new_type)
    for k, v in items:
        setattr(ret, k, v)
    return ret


def meta_tensor(real):
    def impl(ctx, dtype, size, stride, requires_grad):
        if not isinstance(dtype, ctx.torch.dtype):
            ctx.refuse("a meta tensor whose dtype is a %s" % type(dtype).__name__)
        size, stride = check_extent(1 << 62, 1, 0, size, stride, ctx.refuse, "a meta tensor")  # no memory
        _bool(ctx, requires_grad, "a meta tensor")
        return real(dtype, size, stride, requires_grad)

    return impl


def _tensors(ctx, what, *ts):
    for t in ts:
        if not isinstance(t, ctx.torch.Tensor):
            ctx.refuse("%s made of a %s" % (what, type(t).__name__))


def sparse(real):
    """Sparse tensors: made of tensors, with a size of non-negative ints. Their indices
    are checked against the size once the storages hold the file's bytes (_load:
    torch's own check, switched on), not here: the storages are still empty."""

    def impl(ctx, layout, data):
        torch = ctx.torch
        if not isinstance(data, tuple):
            ctx.refuse("a sparse tensor made of a %s" % type(data).__name__)
        if layout == torch.sparse_coo and len(data) in (3, 4):
            indices, values, size = data[:3]
            _tensors(ctx, "a sparse tensor", indices, values)
            check_extent(1 << 62, 1, 0, size, size, ctx.refuse, "a sparse tensor")
        elif len(data) == 4 and layout in tuple(getattr(torch, n, None) for n in
                                                ("sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")):
            ci, pi, values, size = data
            _tensors(ctx, "a sparse tensor", ci, pi, values)
            check_extent(1 << 62, 1, 0, size, size, ctx.refuse, "a sparse tensor")
        else:
            ctx.refuse("a sparse tensor of layout %r" % (layout,))
        return real(layout, data)

    return impl


def nested(real):
    """Nested tensors view their buffer at the offsets, sizes and strides held in three
    other tensors, whose storages are still empty while the pickle runs: nothing here can
    check them, and torch does not, so they load only with trusted=True (a file you trust;
    they are rare in checkpoints)."""

    def impl(ctx, buffer, sizes, strides, offsets):
        if not ctx.trusted:
            ctx.refuse("a nested tensor, whose layout cannot be checked before its storages are read "
                       "(a file you trust loads with trusted=True)")
        return real(buffer, sizes, strides, offsets)

    return impl


def from_numpy(real):
    def impl(ctx, data, dtype, device, requires_grad):
        import numpy

        if not isinstance(data, numpy.ndarray) or data.dtype.hasobject or not isinstance(dtype, ctx.torch.dtype):
            ctx.refuse("a tensor made from a %s" % type(data).__name__)
        _bool(ctx, requires_grad, "a tensor")
        return real(data, dtype, device, requires_grad)

    return impl


def size_of(ctx, seq=()):
    if not isinstance(seq, (tuple, list)) or not all(is_int(x) for x in seq) or len(seq) > MAX_DIMS:
        ctx.refuse("torch.Size of %r" % (type(seq).__name__,))
    return ctx.torch.Size(seq)
