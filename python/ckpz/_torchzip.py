"""torch.save's archive, taken apart and put together without torch.save.

Writing: `pickle_state` pickles an object exactly as torch.save does (same protocol,
same persistent ids for storages, storages numbered in first-use order) and returns the
archive's members: ARCHIVE/data.pkl, the records the running torch writes around the
storages, one ARCHIVE/data/KEY per storage (its memory, not a copy). The library's zip
source (ckpz_zip_source) lays them out as torch's zip writer does, so what `ckpz -d`
restores is the file torch.save of the running release would have written, byte for
byte.

Which records a release writes, in what order, is learnt from that release itself
(`layout`): once per process and configuration, torch.save writes a small probe (twelve
one-element storages, so that keys 10 and 11 show whether storages go in sorted key
order, as on 1.13, or in first-use order, as on 2.13) to memory, and again with thirteen
storages of other values. Records equal in both runs are copied as they are (torch
2.13: .format_version, .storage_alignment, byteorder before the storages; version after
them); a last record named .data/serialization_id (torch 2.13) is computed by the zip
source (ckpz_zip_options: a hash of the record names, which torch's own writer gives for
a list of names, and a fold of the records' CRC-32s); any other record that differs
makes the layout unknown. The layout is then checked by rebuilding both probes'
archives through the zip source: unless they are torch.save's byte for byte, saves fall
back to torch 1.13's layout (which every release reads), with a warning. The probe
costs a few milliseconds once.

Reading such an archive (any torch release's, or a hostile one): _zipindex.
"""

import io
import os
import pickle
import sys
import threading
import warnings

from . import _lib, _zipindex
from ._lib import Error

__all__ = []  # private module

VERSION_RECORD = b"3\n"  # torch's archive format version since 1.6
DEFAULT_PROTOCOL = 2  # torch.save's pickle protocol


def torch_module():
    """torch, imported when a save or load needs it (the rest of the package does not)."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("ckpz.save/ckpz.load need PyTorch (import torch failed: %s)" % e) from e
    return torch


def archive_name(dst):
    """The folder torch.save names its archive after: the file's name without directories
    and without its last extension, "archive" for a file object. For a .ckpz path it is
    the name of the file `ckpz -d` restores (the path without ".ckpz")."""
    if not isinstance(dst, (str, bytes, os.PathLike)):
        return "archive"
    name = os.fsdecode(os.fspath(dst))
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    if name.endswith(".ckpz"):
        name = name[: -len(".ckpz")]
    dot = name.rfind(".")
    if dot >= 0:
        name = name[:dot]
    return name or "archive"


def _storage_parts(torch, obj):
    """(untyped storage, dtype, storage class, element count) of a storage torch.save meets."""
    if isinstance(obj, torch.storage.TypedStorage):
        untyped = obj._untyped_storage if hasattr(obj, "_untyped_storage") else obj._storage
        type_name = obj._pickle_storage_type() if hasattr(obj, "_pickle_storage_type") else obj.pickle_storage_type()
        numel = obj._size() if hasattr(obj, "_size") else obj.size()
        return untyped, obj.dtype, getattr(torch, type_name), numel
    return obj, torch.uint8, torch.serialization.normalize_storage_type(type(obj)), obj.nbytes()


class Layout:
    """The records torch.save writes besides the pickle and the storages, and how: pre
    and post, [(name without the archive's folder, bytes)] before and after the
    storages; sort_keys, storages in sorted key order (1.13) rather than first-use order;
    id_name, the name of the serialization id record the zip source appends (None: no
    id); alignment and crc32, torch's writer settings. The default is torch 1.13's."""

    def __init__(self, pre=(), sort_keys=True, post=(("version", VERSION_RECORD),), id_name=None, alignment=64,
                 crc32=True):
        self.pre = tuple(pre)
        self.sort_keys = sort_keys
        self.post = tuple(post)
        self.id_name = id_name
        self.alignment = alignment
        self.crc32 = crc32
        self._hashes = {}  # (other records, number of storages) -> torch's hash of the record names

    def names_hash(self, torch, names):
        """torch's hash of the record names written before the id, as its writer computes
        it (a fold over a C++ hash table of std::hash values): asked of torch's writer
        itself, given the same names with no data (a millisecond per thousand storages;
        cached)."""
        key = (tuple(x for x in names if not x.startswith("data/")), sum(1 for x in names if x.startswith("data/")))
        h = self._hashes.get(key)
        if h is None:
            if len(self._hashes) >= 64:
                self._hashes.clear()
            h = self._hashes[key] = _writer_names_hash(torch, names)
        return h


TORCH_1_13 = Layout()


class _NullSink:
    """A file object for torch's writer that keeps nothing (the names' hash is all we
    want from it)."""

    def write(self, b):
        return len(b)

    def flush(self):
        pass


def _writer_names_hash(torch, names):
    w = torch._C.PyTorchFileWriter(_NullSink())
    for name in names:
        w.write_record(name, b"", 0)
    w.write_end_of_file()
    return int(w.serialization_id()[:20])


_PROBE_STORAGES = 12
_layouts = {}
_probing = threading.local()


def layout(torch, no_byteorder=False):
    """The Layout of torch.save on the running release and configuration (storage
    alignment, CRC-32 option, _disable_byteorder_record), learnt once from a probe (see
    the module's docstring)."""
    config = getattr(getattr(torch.utils, "serialization", None), "config", None)
    alignment = getattr(getattr(config, "save", None), "storage_alignment", 64)
    get_crc32 = getattr(torch.serialization, "get_crc32_options", None)
    crc32 = bool(get_crc32()) if get_crc32 is not None else True
    # torch 1.13's torch.save has no such argument (and writes no byteorder record)
    save_args = {"_disable_byteorder_record": True} if no_byteorder and _takes_no_byteorder(torch) else {}
    key = (torch.__version__, alignment, crc32, sys.byteorder, bool(save_args))
    found = _layouts.get(key)
    if found is None:
        try:
            if getattr(_probing, "on", False):  # torch.save is ckpz.save here (a swap done by assignment)
                raise ValueError("torch.serialization.save calls ckpz.save")
            _probing.on = True
            try:
                found = _probe(torch, alignment, crc32, save_args)
            finally:
                _probing.on = False
        except Exception as e:  # noqa: BLE001 - any surprise: the layout every release reads
            warnings.warn("ckpz.save: torch %s's torch.save archive has a layout ckpz does not know (%s); writing "
                          "torch 1.13's, which torch %s reads, but which `ckpz -d` restores as other bytes than "
                          "torch.save writes" % (torch.__version__, e, torch.__version__), RuntimeWarning, stacklevel=3)
            found = TORCH_1_13
        _layouts[key] = found
    return found


def _takes_no_byteorder(torch):
    import inspect

    try:
        return "_disable_byteorder_record" in inspect.signature(torch.serialization.save).parameters
    except (TypeError, ValueError):
        return False


def _records(data):
    """[(name without the folder, bytes)] of a torch.save archive in memory, in order."""
    index = _zipindex.ZipIndex(lambda off, n: data[off : off + n], len(data), None)
    return [(name.split("/", 1)[1], data[m.data_offset : m.data_offset + m.size]) for name, m in index.members.items()]


def _split(records, count):
    """(pre, storage keys in file order, post) of a probe's records; ValueError for a
    layout this module does not know."""
    names = [n for n, _ in records]
    at = [i for i, n in enumerate(names) if n.startswith("data/")]
    keys = [names[i][len("data/"):] for i in at]
    numeric = [str(k) for k in range(count)]
    if names[0] != "data.pkl" or not at or at != list(range(at[0], at[0] + len(at))) \
            or keys not in (numeric, sorted(numeric)):
        raise ValueError("records %s" % names)
    return records[1 : at[0]], keys != numeric, records[at[-1] + 1 :]


def _probe(torch, alignment, crc32, save_args):
    # Two saves of other sizes and values: a record that depends on either is the id,
    # or a record this module cannot write.
    runs = []
    for count, first in ((_PROBE_STORAGES, 1.0), (_PROBE_STORAGES + 1, 2.0)):
        obj = [torch.full((1,), first + k) for k in range(count)]
        buf = io.BytesIO()
        torch.serialization.save(obj, buf, **save_args)  # torch's own, should torch.save have been swapped
        runs.append((obj, buf.getvalue(), _split(_records(buf.getvalue()), count)))
    (pre, sort_keys, post), (pre_b, sort_b, post_b) = runs[0][2], runs[1][2]
    id_name = None
    if post and post[-1][0].rsplit("/", 1)[-1] == "serialization_id":
        id_name = post[-1][0]
        post, post_b = post[:-1], post_b[:-1]
    if (pre, sort_keys, post) != (pre_b, sort_b, post_b):
        raise ValueError("records that differ between two saves: %s" % sorted(
            {n for n, x in pre + post if (n, x) not in pre_b + post_b}))
    found = Layout(pre, sort_keys, post, id_name, alignment, crc32)
    # The proof: both probes' archives, rebuilt by the zip source, are torch.save's.
    for obj, ref, _ in runs:
        if archive_bytes(torch, pickle_state(torch, obj), "archive", found) != ref:
            raise ValueError("its archive differs from the one ckpz builds")
    return found


def archive_bytes(torch, pickled, prefix, lay):
    """The whole archive of `pickled` as the zip source lays it out (for small ones)."""
    members, opts, keep = zip_members(torch, pickled, prefix, lay)
    ctx = _lib.ctx_create()
    handle = _lib.ctypes.c_void_p()
    try:
        if _lib.zip_source_create_opts(ctx, members, len(members), _lib.ctypes.byref(opts), _lib.ctypes.byref(handle)):
            raise Error(_lib.ERR_INTERNAL, _lib.decode(_lib.ctx_message(ctx)))
        n = _lib.zip_source_size(handle)
        buf = _lib.ctypes.create_string_buffer(max(n, 1))
        got = _lib.ZIP_SOURCE_READ(handle, buf, n)
        return buf.raw[:got]
    finally:
        _lib.zip_source_free(handle)
        _lib.ctx_free(ctx)
        del keep


def zip_members(torch, pickled, prefix, lay):
    """(ZipMember array, ZipOptions, objects that keep their memory alive) for the zip
    source: the archive of `pickled` in folder `prefix` as torch.save of the release whose
    Layout is `lay` writes it."""
    items = pickled.members(lay)
    arr = (_lib.ZipMember * len(items))()
    keep = [items]
    for i, (name, data) in enumerate(items):
        nb = (prefix + "/" + name).encode("utf-8")
        keep.append(nb)
        if isinstance(data, bytes):
            ptr = _lib.ctypes.cast(_lib.ctypes.c_char_p(data), _lib.ctypes.c_void_p).value if data else None
            size = len(data)
        else:  # an untyped CPU storage
            ptr = data.data_ptr() or None
            size = data.nbytes()
        arr[i].name = nb
        arr[i].data = ptr
        arr[i].size = size
    opts = _lib.ZipOptions()
    _lib.zip_options_init(_lib.ctypes.byref(opts))
    opts.alignment = lay.alignment
    opts.crc32 = 1 if lay.crc32 else 0
    if lay.id_name is not None:
        id_name = (prefix + "/" + lay.id_name).encode("utf-8")
        keep.append(id_name)
        opts.id_name = id_name
        opts.id_names_hash = lay.names_hash(torch, [name for name, _ in items])
    return arr, opts, keep


class Pickled:
    """What pickle_state made: the pickle, the storages by key (CPU ones as given, others
    as CPU copies, in first-use order) and their total size."""

    def __init__(self, data, storages, origins=None):
        self.data = data
        self.storages = storages
        self.origins = origins or {}  # key: (dtype, the original storage's address)
        self.nbytes = sum(s.nbytes() for s in storages.values())

    def members(self, lay=TORCH_1_13):
        """[(name within the archive's folder, bytes-or-storage)] in the order torch.save
        of the release whose Layout is `lay` writes them (its serialization id apart)."""
        out = [("data.pkl", self.data)]
        out += lay.pre
        keys = sorted(self.storages) if lay.sort_keys else list(self.storages)  # first use: "0", "1", ...
        out += [("data/" + key, self.storages[key]) for key in keys]
        out += lay.post
        return out


def pickle_state(torch, obj, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL, snapshot=None):
    """Pickles obj as torch.save does. snapshot(untyped_storage) -> untyped storage, when
    given, replaces every storage by what it returns (a copy taken now, for saving in the
    background); non-CPU storages are always copied to the CPU."""
    storages = {}
    origins = {}
    id_map = {}
    dtypes = {}
    location_tag = torch.serialization.location_tag

    def persistent_id(o):
        if not (isinstance(o, torch.storage.TypedStorage) or torch.is_storage(o)):
            return None
        untyped, dtype, storage_type, numel = _storage_parts(torch, o)
        ptr = untyped.data_ptr()
        if ptr != 0:  # the same memory saved as two dtypes cannot be loaded: torch refuses too
            if dtypes.setdefault(ptr, dtype) != dtype:
                raise RuntimeError("Cannot save multiple tensors or storages that view the same data as different types")
        key = id_map.setdefault(untyped._cdata, str(len(id_map)))
        if key not in storages:
            kept = untyped
            if kept.device.type != "cpu":
                kept = kept.cpu()
            elif snapshot is not None:
                kept = snapshot(kept)
            storages[key] = kept
            origins[key] = (dtype, ptr)
        return ("storage", storage_type, key, location_tag(untyped), numel)

    buf = io.BytesIO()
    pickler = pickle_module.Pickler(buf, protocol=pickle_protocol)
    pickler.persistent_id = persistent_id
    pickler.dump(obj)
    return Pickled(buf.getvalue(), storages, origins)
