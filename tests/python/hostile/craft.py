"""Building hostile checkpoints byte by byte: a pickle assembler, a stored-zip writer laid
out like torch.save's, and the shapes of ckpz.distributed shards and ckpz.dcp metadata.

The hostile suite (make_suite.py) and the Python fuzzers (tests/fuzz/python) write what
an attacker sends, so nothing here goes through pickle.dumps or torch.save: a pickle is
concatenated opcodes (the helpers below return bytes and compose by +), an archive is
written member by member with every field in reach for patching. Everything is
deterministic (no timestamps, no randomness), and needs neither torch nor ckpz; only
ckpz_file() (compressing a .pt into a .ckpz) imports ckpz.
"""

import json
import os
import struct
import tempfile
import zlib

# ---- pickle opcodes ---------------------------------------------------------------------

MARK, STOP, POP, POP_MARK, DUP = b"(", b".", b"0", b"1", b"2"
NONE, NEWTRUE, NEWFALSE = b"N", b"\x88", b"\x89"
TUPLE, EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3 = b"t", b")", b"\x85", b"\x86", b"\x87"
EMPTY_LIST, APPEND, APPENDS, LIST = b"]", b"a", b"e", b"l"
EMPTY_DICT, SETITEM, SETITEMS, DICT = b"}", b"s", b"u", b"d"
EMPTY_SET, ADDITEMS, FROZENSET = b"\x8f", b"\x90", b"\x91"
REDUCE, BUILD, NEWOBJ, NEWOBJ_EX, INST, OBJ = b"R", b"b", b"\x81", b"\x92", b"i", b"o"
STACK_GLOBAL, MEMOIZE, FRAME = b"\x93", b"\x94", b"\x95"
BINPERSID, PERSID = b"Q", b"P"
EXT1, EXT2, EXT4 = b"\x82", b"\x83", b"\x84"


def proto(n=2):
    return b"\x80" + bytes([n])


def pkl(body, protocol=2):
    """A whole pickle: PROTO, body, STOP."""
    return proto(protocol) + body + STOP


def i(n):
    """An int with the smallest opcode that holds it (BININT1/2, BININT, LONG1)."""
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if 0 <= n < 65536:
        return b"M" + struct.pack("<H", n)
    if -(1 << 31) <= n < (1 << 31):
        return b"J" + struct.pack("<i", n)
    nb = (n.bit_length() + 8) // 8
    return b"\x8a" + bytes([nb]) + n.to_bytes(nb, "little", signed=True)


def f(x):
    return b"G" + struct.pack(">d", x)


def s(text):
    """A str (BINUNICODE)."""
    raw = text.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


def b(data):
    """A bytes object (SHORT_BINBYTES / BINBYTES: protocol 3's opcodes, which every
    unpickler accepts whatever the PROTO says)."""
    if len(data) < 256:
        return b"C" + bytes([len(data)]) + data
    return b"B" + struct.pack("<I", len(data)) + data


def boolean(v):
    return NEWTRUE if v else NEWFALSE


def glob(module, name):
    """GLOBAL (protocol 0..3 spelling: text lines)."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def sglob(module, name):
    """STACK_GLOBAL (protocol 4: two strings on the stack; the name may hold dots)."""
    return s(module) + s(name) + STACK_GLOBAL


def tup(*items):
    if not items:
        return EMPTY_TUPLE
    if len(items) <= 3:
        return b"".join(items) + (TUPLE1, TUPLE2, TUPLE3)[len(items) - 1]
    return MARK + b"".join(items) + TUPLE


def lst(*items):
    return EMPTY_LIST + (MARK + b"".join(items) + APPENDS if items else b"")


def dct(pairs):
    """A dict from [(key bytes, value bytes)]."""
    return EMPTY_DICT + (MARK + b"".join(k + v for k, v in pairs) + SETITEMS if pairs else b"")


def sdict(**kv):
    """A dict with str keys, in the order given."""
    return dct([(s(k), v) for k, v in kv.items()])


def call(fn, *args):
    """fn(*args) with REDUCE; fn is the bytes that push the callable."""
    return fn + tup(*args) + REDUCE


def newobj(cls, *args):
    return cls + tup(*args) + NEWOBJ


def build(obj, state):
    return obj + state + BUILD


def put(n):
    return b"q" + bytes([n]) if n < 256 else b"r" + struct.pack("<I", n)


def get(n):
    return b"h" + bytes([n]) if n < 256 else b"j" + struct.pack("<I", n)


def odict(pairs=()):
    """collections.OrderedDict() (filled by SETITEMS, as pickle writes it)."""
    o = call(glob("collections", "OrderedDict"))
    return o + (MARK + b"".join(k + v for k, v in pairs) + SETITEMS if pairs else b"")


def wrap(prefix, body_pickle):
    """A pickle that first evaluates prefix (an expression, then POP) and then the whole
    pickle body_pickle (PROTO and STOP stripped): the hostile part runs before a valid
    object is returned. The prefix must not use memo slots the body uses."""
    body = body_pickle
    if body[:1] == b"\x80":
        body = body[2:]
    assert body.endswith(STOP)
    return proto(2) + prefix + POP + body[:-1] + STOP


# ---- torch's pieces ---------------------------------------------------------------------

STORAGE_TYPES = {"float32": ("FloatStorage", 4), "float64": ("DoubleStorage", 8), "int64": ("LongStorage", 8),
                 "int32": ("IntStorage", 4), "uint8": ("ByteStorage", 1), "int8": ("CharStorage", 1),
                 "float16": ("HalfStorage", 2), "bfloat16": ("BFloat16Storage", 2), "bool": ("BoolStorage", 1),
                 "qint8": ("QInt8Storage", 1)}


def storage(key, numel, dtype="float32", location="cpu", stype=None):
    """The persistent id torch.save writes for a storage: ('storage', TYPE, key, location, numel)."""
    stype = stype or STORAGE_TYPES[dtype][0]
    return tup(s("storage"), glob("torch", stype), s(key), s(location), i(numel)) + BINPERSID


def ints(values):
    return tup(*[i(v) for v in values])


def tensor_v2(stor, offset, size, stride, requires_grad=False, hooks=None):
    """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)."""
    return call(glob("torch._utils", "_rebuild_tensor_v2"), stor, i(offset), ints(size), ints(stride),
                boolean(requires_grad), hooks if hooks is not None else odict())


def contiguous_stride(size):
    stride, acc = [], 1
    for d in reversed(size):
        stride.append(acc)
        acc *= max(d, 1)
    return list(reversed(stride))


def tensor(key, size, dtype="float32", offset=0, stride=None, numel=None):
    """A plain tensor over storage `key` (numel: the storage's element count, default the
    tensor's)."""
    n = 1
    for d in size:
        n *= d
    return tensor_v2(storage(key, n if numel is None else numel, dtype), offset, size,
                     contiguous_stride(size) if stride is None else stride)


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def i64(values):
    return struct.pack("<%dq" % len(values), *values)


# ---- zip archives -----------------------------------------------------------------------


class ZipMember:
    """One member as written: fields that the writer puts in the headers (patchable
    before zip_bytes() is called)."""

    def __init__(self, name, data, align=64):
        self.name = name.encode("utf-8") if isinstance(name, str) else name
        self.data = data
        self.align = align
        self.method = 0
        self.flags = 0
        self.crc = zlib.crc32(data) & 0xFFFFFFFF
        self.csize = self.usize = len(data)
        self.central_csize = self.central_usize = None  # None: the real sizes
        self.central_offset = None  # None: where the local header really is
        self.local_extra = None  # None: padding to the alignment (torch's "FB" field)
        self.central_extra = b""
        self.local_name = None  # None: the same name


def zip_bytes(members, comment=b"", eocd_patch=None, prepend=b""):
    """A stored zip of ZipMember objects, torch's layout: each member's data aligned to
    its .align bytes through an extra field, no data descriptors, then the central
    directory and the end record. eocd_patch(dict) may change the end record's fields
    (count, cd_size, cd_offset) before it is written."""
    out = bytearray(prepend)
    offsets = []
    for m in members:
        offsets.append(len(out))
        name = m.local_name if m.local_name is not None else m.name
        extra = m.local_extra
        if extra is None:
            extra = b""
            if m.align:
                start = len(out) + 30 + len(name)
                pad = (-(start + 4)) % m.align
                extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, m.flags, m.method, 0, 0x21, m.crc, m.csize, m.usize,
                           len(name), len(extra))
        out += name + extra + m.data
    cd_start = len(out)
    for m, off in zip(members, offsets):
        cs = m.csize if m.central_csize is None else m.central_csize
        us = m.usize if m.central_usize is None else m.central_usize
        ho = off if m.central_offset is None else m.central_offset
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, m.flags, m.method, 0, 0x21, m.crc, cs, us,
                           len(m.name), len(m.central_extra), 0, 0, 0, 0, ho)
        out += m.name + m.central_extra
    end = {"count": len(members), "cd_size": len(out) - cd_start, "cd_offset": cd_start}
    if eocd_patch:
        eocd_patch(end, out)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, end["count"] & 0xFFFF, end["count"] & 0xFFFF,
                       end["cd_size"] & 0xFFFFFFFF, end["cd_offset"] & 0xFFFFFFFF, len(comment)) + comment
    return bytes(out)


def archive_members(pickle_bytes, storages=None, prefix="archive", extra=()):
    """The members of torch.save's archive: data.pkl, data/KEY (sorted keys), version."""
    ms = [ZipMember(prefix + "/data.pkl", pickle_bytes)]
    for key in sorted(storages or {}, key=lambda k: (len(k), k)):
        ms.append(ZipMember(prefix + "/data/" + key, storages[key]))
    ms.append(ZipMember(prefix + "/version", b"3\n"))
    ms.extend(extra)
    return ms


def torch_archive(pickle_bytes, storages=None, prefix="archive"):
    """torch.save's zip archive holding this pickle and these storages ({key: bytes})."""
    return zip_bytes(archive_members(pickle_bytes, storages, prefix))


def ckpz_file(pt_bytes, dst):
    """Compresses the archive bytes into the .ckpz file dst (ckpz.compress_file, one
    thread, level 3: deterministic)."""
    import ckpz

    fd, tmp = tempfile.mkstemp(suffix=".pt", dir=os.path.dirname(os.path.abspath(dst)))
    try:
        with os.fdopen(fd, "wb") as fo:
            fo.write(pt_bytes)
        ckpz.compress_file(tmp, dst, level=3, threads=1)
    finally:
        os.unlink(tmp)


# ---- ckpz.distributed and ckpz.dcp shapes -----------------------------------------------

MARK_KEY = "__ckpz_tensor__"  # what a skeleton leaf names a tensor with (_dist_state.MARK)


def shard_name(rank, world):
    return "rank-%05d-of-%05d.ckpz" % (rank, world)


def leaf(name):
    """A skeleton leaf standing for the tensor `name`."""
    return sdict(**{MARK_KEY: s(name)})


def shard_payload(rank, world, skeleton, tensors, fmt="ckpz.distributed"):
    """The pickle body of a ckpz.distributed shard: {format, rank, world_size, skeleton,
    tensors}, each argument already pickle bytes (tensors: [(name, tensor bytes)])."""
    return sdict(format=s(fmt), rank=i(rank), world_size=i(world), skeleton=skeleton,
                 tensors=dct([(s(n), t) for n, t in tensors]))


def crc32_f32(values):
    return zlib.crc32(f32(values)) & 0xFFFFFFFF


def manifest(world, replicated=None, local=None, sharded=None, base=None, lossy=False, shard_bytes=None):
    """A manifest dict as ckpz.distributed writes it."""
    return {"format": "ckpz.distributed", "version": 1, "world_size": world,
            "shards": [{"file": shard_name(r, world), "bytes": (shard_bytes or [0] * world)[r]} for r in range(world)],
            "base": base, "lossy": lossy, "replicated": replicated or {},
            "local": local if local is not None else [{} for _ in range(world)], "sharded": sharded or {}}


def entry(shard, values_or_shape, dtype="float32", crc=True):
    """A manifest entry for a float32 tensor given by its values (a flat list and shape)."""
    values, shape = values_or_shape
    return {"shard": shard, "dtype": dtype, "shape": list(shape), "crc32": crc32_f32(values) if crc else None}


def json_bytes(obj):
    return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()
