#!/usr/bin/env python3
"""Writes the hostile-file suite: crafted checkpoints that must be refused cleanly (or,
for the controls, loaded exactly), for run_suite.py to load one by one.

    make_suite.py OUTDIR [--marker-dir DIR]

OUTDIR gets one folder per category (code, tensor, pid, build, size, zip, files,
manifest, dcp, valid) and index.json: one entry per case saying how to load it
(ckpz.load of a path or of the bytes in memory, ckpz.distributed.load of a directory,
ckpz.dcp.Reader's read_metadata or a whole DCP load), what a correct outcome is
("refuse": a clean exception; "equal": loads to the given value; "refuse_or_equal";
"any": a clean refusal or a load without a bad tensor), and what the runner must set
up (FIFOs, made at run time only; copyreg extension codes). Every pickle case exists
as .pt (a stored zip laid out as torch.save writes it) and as .ckpz (that .pt through
ckpz.compress_file). Pickles are written opcode by opcode (craft.py): what an attacker
sends, not what pickle.dumps would write.

Code payloads try to create a marker file, MARKER_DIR/<case> (default OUTDIR/ran):
the runner fails a case whose marker appears. The output depends only on the
arguments and the torch release (DCP's class paths, the valid DCP and distributed
templates written through ckpz): no randomness, no timestamps, no network.
Needs torch and ckpz importable (the DCP template is written through ckpz.dcp.Writer).
"""

import argparse
import json
import os
import shutil
import struct
import sys
import zlib

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

from craft import (  # noqa: E402
    ADDITEMS, APPEND, APPENDS, BINPERSID, DUP, EMPTY_DICT, EMPTY_LIST, EMPTY_SET, EMPTY_TUPLE, EXT1, EXT2,
    EXT4, FRAME, INST, MARK, NEWFALSE, NEWTRUE, NONE, OBJ, PERSID, POP, SETITEM, STOP, TUPLE, TUPLE1, ZipMember,
    archive_members, b, build, call, ckpz_file, crc32_f32, dct, entry, f, f32, get, glob, i, i64, ints,
    json_bytes, leaf, lst, manifest, newobj, odict, pkl, proto, put, s, sdict, sglob, shard_name, shard_payload,
    storage, tensor, tensor_v2, torch_archive, tup, wrap, zip_bytes)

# Values the tensors of the suite hold (exact in float32).
W0 = [0.5, 1.5, -2.0, 3.25, 4.0, -5.5]
W1 = [6.0, -7.0, 8.5, 9.0, -10.0, 11.25]
R4 = [1.0, 2.0, 3.0, 4.0]
S4 = [0.25, 0.75, 1.25, 1.75]

# copyreg extension codes the runner registers for the "copyreg_ext" setup (as a library
# in the victim process might): each maps to a code-running global.
EXT_CODES = {240: ("posix", "system"), 31000: ("os", "system"), 2000000: ("subprocess", "getoutput")}


# ---- expected values (decoded by the runner's driver) ------------------------------------


def T(values, shape, dtype="float32"):
    return {"$t": [dtype, list(shape), list(values)]}


def P(values, shape, requires_grad=True):
    return {"$param": [T(values, shape), requires_grad]}


def SH(values, offset, rows):
    return {"$shard": [T(values, [len(values)]), offset, rows]}


# ---- the suite ---------------------------------------------------------------------------


class Suite:
    def __init__(self, out, marker_dir):
        self.out = os.path.abspath(out)
        self.marker_dir = os.path.abspath(marker_dir)
        self.cases = []

    def marker(self, cid):
        return os.path.join(self.marker_dir, cid.replace("/", "__"))

    def path(self, rel):
        p = os.path.join(self.out, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def write(self, rel, data):
        with open(self.path(rel), "wb") as fo:
            fo.write(data)

    def add(self, cid, category, load, rel, expect, value=None, note="", marker=None, oserror=False, fifo=(),
            setup=(), forbidden_modules=(), seeds=None):
        assert expect in ("refuse", "equal", "refuse_or_equal", "any"), expect
        assert not any(c["id"] == cid for c in self.cases), cid
        self.cases.append({
            "id": cid, "category": category, "load": load, "path": rel, "expect": expect, "value": value,
            "note": note, "marker": os.path.relpath(marker, self.out) if marker and marker.startswith(self.out + os.sep)
            else marker, "oserror": oserror, "fifo": list(fifo), "setup": list(setup),
            "forbidden_modules": list(forbidden_modules), "names": [self.name_of(rel, load)],
            "seeds": seeds or {}})

    @staticmethod
    def name_of(rel, load):
        """What a refusal's message must contain: the file's name, or for a directory its
        last two components (messages name a file inside it, or the directory)."""
        parts = rel.rstrip("/").split("/")
        return "/".join(parts[-2:]) if load.startswith(("dist", "dcp")) else parts[-1]

    def pickle_case(self, category, name, make, storages=None, expect="refuse", value=None, note="", mem=False,
                    **kw):
        """A case whose pickle is make(marker path): written as NAME.pt and NAME.ckpz (and
        loaded from memory too when mem), each with its own marker."""
        forms = [("pt", "load"), ("ckpz", "load")] + ([("pt", "load_mem")] if mem else [])
        for ext, load in forms:
            cid = "%s/%s.%s%s" % (category, name, ext, "@mem" if load == "load_mem" else "")
            marker = self.marker(cid)
            data = make(marker)
            rel = "%s/%s.%s" % (category, name, ext)
            seeds = {}
            if load == "load":
                if ext == "pt":
                    self.write(rel, torch_archive(data, storages))
                    self.write("%s/%s.pkl" % (category, name), data)
                    seeds = {"unpickler": "%s/%s.pkl" % (category, name)}
                    if os.path.getsize(self.path(rel)) <= 64 << 10:
                        seeds["torchzip"] = rel
                else:
                    ckpz_file(torch_archive(data, storages), self.path(rel))
            self.add(cid, category, load, rel, expect, value, note, marker=marker, seeds=seeds, **kw)

    def archive_case(self, category, name, pt, expect="refuse", value=None, note="", ckpz=True, **kw):
        """A case given as the archive's bytes: NAME.pt, and NAME.ckpz when ckpz."""
        rel = "%s/%s.pt" % (category, name)
        self.write(rel, pt)
        self.add("%s/%s.pt" % (category, name), category, "load", rel, expect, value, note,
                 seeds={"torchzip": rel} if len(pt) <= 64 << 10 else {}, **kw)
        if ckpz:
            relc = "%s/%s.ckpz" % (category, name)
            ckpz_file(pt, self.path(relc))
            self.add(relc, category, "load", relc, expect, value, note, **kw)

    def save_index(self):
        index = {"version": 1, "marker_dir": self.marker_dir, "ext_codes": {str(k): v for k, v in EXT_CODES.items()},
                 "cases": self.cases}
        with open(os.path.join(self.out, "index.json"), "w") as fo:
            json.dump(index, fo, indent=1, sort_keys=True)
            fo.write("\n")


def with_w(payload):
    """{"w": a valid 2x3 tensor, "x": payload}: the payload sits beside real state."""
    return pkl(sdict(w=tensor("0", (2, 3)), x=payload))


STORE0 = {"0": f32(W0)}


def sh(cmd_marker):
    return "touch '%s'" % cmd_marker


def py(cmd_marker):
    return "open(%r, 'w').close()" % cmd_marker


def evil_pickle(marker):
    """A plain pickle that runs os.system when unpickled."""
    return pkl(call(glob("os", "system"), s(sh(marker))))


def dag(levels, base=1000):
    """A list DAG through the memo: level k is [level k-1, level k-1] (2^levels leaves
    from a few bytes per level). Pushes the top level; memo slots base..base+levels."""
    out = EMPTY_LIST + put(base) + POP
    for k in range(1, levels + 1):
        out += EMPTY_LIST + MARK + get(base + k - 1) + get(base + k - 1) + APPENDS + put(base + k) + POP
    return out + get(base + levels)


def deep_tuple(n):
    return EMPTY_TUPLE + TUPLE1 * n


# ---- code payloads -----------------------------------------------------------------------


def code_cases(su):
    c = "code"
    add = su.pickle_case
    add(c, "os_system", lambda m: with_w(call(glob("os", "system"), s(sh(m)))), STORE0)
    add(c, "posix_system", lambda m: with_w(call(glob("posix", "system"), s(sh(m)))), STORE0)
    add(c, "subprocess_popen", lambda m: with_w(call(glob("subprocess", "Popen"), lst(s("touch"), s(m)))), STORE0)
    add(c, "subprocess_check_output",
        lambda m: with_w(call(glob("subprocess", "check_output"), lst(s("touch"), s(m)))), STORE0)
    add(c, "subprocess_getoutput", lambda m: with_w(call(glob("subprocess", "getoutput"), s(sh(m)))), STORE0)
    add(c, "builtins_eval", lambda m: with_w(call(glob("builtins", "eval"), s(py(m)))), STORE0)
    add(c, "builtins_exec", lambda m: with_w(call(glob("builtins", "exec"), s(py(m)))), STORE0)
    add(c, "py2_builtin_eval", lambda m: with_w(call(glob("__builtin__", "eval"), s(py(m)))), STORE0,
        note="Python 2's module name, which pickle maps to builtins")
    add(c, "compile_exec", lambda m: with_w(call(glob("builtins", "exec"), call(
        glob("builtins", "compile"), s(py(m)), s("<x>"), s("exec")))), STORE0)
    add(c, "import_getattr_chain", lambda m: with_w(call(call(glob("builtins", "getattr"), call(
        glob("builtins", "__import__"), s("os")), s("system")), s(sh(m)))), STORE0)
    add(c, "getattr_on_allowed_path", lambda m: with_w(call(call(glob("builtins", "getattr"), call(
        glob("pathlib", "Path"), s(m)), s("touch")))), STORE0, note="a method of an allowed class through getattr")
    add(c, "setattr_on_allowed_class", lambda m: with_w(call(glob("builtins", "setattr"), glob(
        "argparse", "Namespace"), s("__init__"), glob("builtins", "dict"))), STORE0)
    add(c, "stack_global_method", lambda m: pkl(sdict(w=tensor("0", (2, 3)), x=call(
        sglob("pathlib", "Path.touch"), call(sglob("pathlib", "Path"), s(m)))), 4), STORE0,
        note="protocol 4 STACK_GLOBAL with a dotted name: a method of an allowed class")
    add(c, "stack_global_module_attr", lambda m: pkl(sdict(w=tensor("0", (2, 3)), x=call(
        sglob("pathlib", "os.system"), s(sh(m)))), 4), STORE0, note="pathlib.os.system: os through an allowed module")
    add(c, "stack_global_argparse_os", lambda m: pkl(sdict(w=tensor("0", (2, 3)), x=call(
        sglob("argparse", "_os.system"), s(sh(m)))), 4), STORE0)
    add(c, "stack_global_torch_os", lambda m: pkl(sdict(w=tensor("0", (2, 3)), x=call(
        sglob("torch", "os.system"), s(sh(m)))), 4), STORE0)
    add(c, "stack_global_collections_sys", lambda m: pkl(sdict(w=tensor("0", (2, 3)), x=call(
        sglob("collections", "_sys.exit"), i(0))), 4), STORE0, note="collections._sys.exit: the process would exit")
    add(c, "operator_attrgetter", lambda m: with_w(call(call(call(glob("operator", "attrgetter"), s("touch")), call(
        glob("pathlib", "Path"), s(m))))), STORE0)
    add(c, "operator_methodcaller", lambda m: with_w(call(call(glob("operator", "methodcaller"), s("touch")), call(
        glob("pathlib", "Path"), s(m)))), STORE0)
    add(c, "functools_partial", lambda m: with_w(call(call(glob("functools", "partial"), glob("os", "system"),
                                                            s(sh(m))))), STORE0)
    add(c, "ext1_unregistered", lambda m: with_w(EXT1 + bytes([7]) + tup(s(sh(m))) + b"R"), STORE0,
        note="EXT1 of a code nobody registered")
    add(c, "ext1_registered", lambda m: with_w(EXT1 + bytes([240]) + tup(s(sh(m))) + b"R"), STORE0,
        setup=["copyreg_ext"], note="EXT1 240 registered (by the runner) as posix.system")
    add(c, "ext2_registered", lambda m: with_w(EXT2 + struct.pack("<H", 31000) + tup(s(sh(m))) + b"R"), STORE0,
        setup=["copyreg_ext"], note="EXT2 31000 registered (by the runner) as os.system")
    add(c, "ext4_registered", lambda m: with_w(EXT4 + struct.pack("<i", 2000000) + tup(s(sh(m))) + b"R"), STORE0,
        setup=["copyreg_ext"], note="EXT4 2000000 registered (by the runner) as subprocess.getoutput")
    add(c, "inst_opcode", lambda m: with_w(MARK + s(sh(m)) + INST + b"os\nsystem\n"), STORE0)
    add(c, "obj_opcode", lambda m: with_w(MARK + glob("os", "system") + s(sh(m)) + OBJ), STORE0)
    add(c, "protocol0_text", lambda m: ("cos\nsystem\n(S'%s'\ntR." % sh(m).replace("'", "\\'")).encode(),
        note="a whole protocol 0 pickle (text opcodes, no PROTO)")
    add(c, "protocol0_inst", lambda m: ("(S'%s'\nios\nsystem\n." % sh(m).replace("'", "\\'")).encode())
    add(c, "module_with_import_side_effect", lambda m: with_w(glob("this", "s")), STORE0,
        forbidden_modules=["this"], note="importing 'this' prints; the module must not be imported")
    add(c, "ctypes_cdll", lambda m: with_w(call(glob("ctypes", "CDLL"), s("libc.so.6"))), STORE0)
    add(c, "torch_set_grad_enabled", lambda m: with_w(call(glob("torch", "set_grad_enabled"), NEWFALSE)), STORE0,
        note="process-wide: autograd off")
    add(c, "torch_c_set_grad_enabled", lambda m: with_w(call(glob("torch._C", "_set_grad_enabled"), NEWFALSE)),
        STORE0)
    add(c, "torch_set_default_dtype", lambda m: with_w(call(glob("torch", "set_default_dtype"),
                                                            glob("torch", "float64"))), STORE0)
    add(c, "torch_manual_seed", lambda m: with_w(call(glob("torch", "manual_seed"), i(1234))), STORE0,
        note="process-wide: the RNG state")
    add(c, "pickle_loads", lambda m: with_w(call(glob("pickle", "loads"), b(evil_pickle(m)))), STORE0,
        note="pickle in pickle")
    add(c, "_pickle_loads", lambda m: with_w(call(glob("_pickle", "loads"), b(evil_pickle(m)))), STORE0)
    add(c, "codecs_rot13", lambda m: with_w(call(glob("_codecs", "encode"), s("abc"), s("rot13"))), STORE0)
    add(c, "codecs_zlib", lambda m: with_w(call(glob("_codecs", "encode"), b(b"x" * 100), s("zlib"))), STORE0)
    add(c, "codecs_not_str", lambda m: with_w(call(glob("_codecs", "encode"), i(42), s("latin1"))), STORE0,
        note="_codecs.encode is allowed for latin-1: a non-str argument must be a clean refusal")
    add(c, "codecs_decode", lambda m: with_w(call(glob("_codecs", "decode"), b(zlib.compress(b"\0" * 4096)),
                                                  s("zlib"))), STORE0)
    add(c, "str_with_codec", lambda m: with_w(call(glob("builtins", "str"), b(b"abc"), s("rot13"))), STORE0,
        note="str(bytes, encoding) of an allowed type with a non-text codec")
    add(c, "ckpz_internal_resolve", lambda m: with_w(call(call(glob("ckpz._unpickle", "_resolve"), s("os"),
                                                               s("system")), s(sh(m)))), STORE0)
    add(c, "types_functiontype", lambda m: with_w(call(glob("types", "FunctionType"), NONE, EMPTY_DICT)), STORE0)
    add(c, "get_layout_keyerror", lambda m: with_w(call(glob("torch.serialization", "_get_layout"), s("os.system"))),
        STORE0, note="an allowed function fed a name it does not know: a clean refusal, not KeyError")
    add(c, "reconstructor_os", lambda m: with_w(call(glob("copyreg", "_reconstructor"), glob("os", "system"),
                                                     glob("builtins", "object"), NONE)), STORE0)
    add(c, "defaultdict_factory", lambda m: with_w(call(glob("collections", "defaultdict"), glob("os", "system"))),
        STORE0)
    # loaders of other formats, each fed a file that runs code (one payload file per case,
    # which creates that case's marker)

    def payload_file(marker, ext):
        p = su.path("code/payloads/%s.%s" % (os.path.basename(marker), ext))
        with open(p, "wb") as fo:
            if ext == "pkl":
                fo.write(evil_pickle(marker))
            else:
                header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
                header += " " * ((-(10 + len(header) + 1)) % 64) + "\n"
                fo.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() +
                         pkl(lst(call(glob("os", "system"), s(sh(marker))))))
        return p

    add(c, "torch_load_inside", lambda m: with_w(call(glob("torch", "load"), s(payload_file(m, "pkl")))), STORE0,
        note="torch.load of a file that runs code")
    add(c, "torch_serialization_load", lambda m: with_w(call(glob("torch.serialization", "load"),
                                                             s(payload_file(m, "pkl")))), STORE0)
    add(c, "numpy_load_inside", lambda m: with_w(call(glob("numpy", "load"), s(payload_file(m, "npy")), NONE,
                                                      NEWTRUE)), STORE0,
        note="numpy.load(allow_pickle=True) of an object array that runs code")
    add(c, "legacy_file_direct", lambda m: evil_pickle(m), None,
        note="a bare pickle as data.pkl's only content")
    su.write("code/legacy_evil.pt", evil_pickle(su.marker("code/legacy_evil.pt")))
    su.add("code/legacy_evil.pt", c, "load", "code/legacy_evil.pt", "refuse", marker=su.marker("code/legacy_evil.pt"),
           note="not a zip: torch's format before 1.6, which only trusted=True may load")


# ---- tensor metadata ---------------------------------------------------------------------


def tensor_cases(su):
    c = "tensor"

    def add(name, t, store=None, expect="refuse", value=None, note=""):
        su.pickle_case(c, name, lambda m: pkl(sdict(w=t)), store if store is not None else STORE0, expect, value,
                       note, mem=True)

    st = storage("0", 6)
    add("v2_size_past_storage", tensor_v2(st, 0, (100,), (1,)))
    add("v2_size_huge", tensor_v2(st, 0, (10 ** 10,), (1,)), note="100x the file: memory from nothing if resized")
    add("v2_2d_past_storage", tensor_v2(st, 0, (3, 3), (3, 1)))
    add("v2_offset_past", tensor_v2(st, 6, (1,), (1,)))
    add("v2_offset_huge", tensor_v2(st, 1 << 40, (1,), (1,)))
    add("v2_stride_past", tensor_v2(st, 0, (6,), (10,)))
    add("v2_negative_offset", tensor_v2(st, -1, (6,), (1,)))
    add("v2_negative_size", tensor_v2(st, 0, (-1,), (1,)))
    add("v2_negative_stride", tensor_v2(st, 5, (6,), (-1,)))
    add("v2_overflow_numel", tensor_v2(st, 0, (1 << 31, 1 << 31, 1 << 31), (1, 1, 1)))
    add("v2_overflow_extent", tensor_v2(st, 0, (2,), (1 << 62,)))
    add("v2_size_int64_max", tensor_v2(st, 0, ((1 << 63) - 1,), (1,)))
    add("v2_size_past_int64", tensor_v2(st, 0, (1 << 64,), (1,)))
    add("v2_size_stride_mismatch", tensor_v2(st, 0, (2, 3), (1,)))
    add("v2_size_not_ints", call(glob("torch._utils", "_rebuild_tensor_v2"), st, i(0), tup(s("a")), ints((1,)),
                                 NEWFALSE, odict()))
    add("v2_storage_not_storage", call(glob("torch._utils", "_rebuild_tensor_v2"), b(b"abc"), i(0), ints((3,)),
                                       ints((1,)), NEWFALSE, odict()))
    add("v2_requires_grad_int", tensor_v2(storage("0", 3, "int64"), 0, (3,), (1,), requires_grad=True),
        note="requires_grad on an integer tensor (torch raises RuntimeError)")
    add("v2_backward_hooks", tensor_v2(st, 0, (2, 3), (3, 1), hooks=odict([(i(0), glob("collections",
                                                                                     "OrderedDict"))])),
        note="hooks are code run at backward time")
    add("v2_extra_metadata", call(glob("torch._utils", "_rebuild_tensor_v2"), st, i(0), ints((2, 3)), ints((3, 1)),
                                  NEWFALSE, odict(), sdict(foo=i(1))), expect="any",
        note="torch >= 2 passes a metadata dict; an unknown key")
    add("v1_size_past_storage", call(glob("torch._utils", "_rebuild_tensor"), st, i(0), ints((100,)), ints((1,))))
    add("v1_offset_huge", call(glob("torch._utils", "_rebuild_tensor"), st, i(1 << 40), ints((1,)), ints((1,))))
    add("parameter_over_oob_tensor", call(glob("torch._utils", "_rebuild_parameter"),
                                          tensor_v2(st, 0, (100,), (1,)), NEWTRUE, odict()))
    add("parameter_of_str", call(glob("torch._utils", "_rebuild_parameter"), s("x"), NEWTRUE, odict()))
    add("parameter_hooks", call(glob("torch._utils", "_rebuild_parameter"), tensor("0", (2, 3)), NEWTRUE,
                                odict([(i(0), glob("collections", "OrderedDict"))])))
    add("from_type_v2_param_oob", call(glob("torch._tensor", "_rebuild_from_type_v2"),
                                       glob("torch._utils", "_rebuild_tensor_v2"),
                                       glob("torch.nn.parameter", "Parameter"),
                                       tup(st, i(0), ints((100,)), ints((1,)), NEWFALSE, odict()), NONE))
    add("from_type_v2_tensor_oob", call(glob("torch._tensor", "_rebuild_from_type_v2"),
                                        glob("torch._utils", "_rebuild_tensor_v2"), glob("torch", "Tensor"),
                                        tup(st, i(0), ints((100,)), ints((1,)), NEWFALSE, odict()), NONE))
    qst = storage("0", 24, "qint8")
    qparams = tup(glob("torch", "per_tensor_affine"), f(0.1), i(0))
    add("qtensor_past_storage", call(glob("torch._utils", "_rebuild_qtensor"), qst, i(0), ints((1000,)), ints((1,)),
                                     qparams, NEWFALSE, odict()))
    add("qtensor_huge", call(glob("torch._utils", "_rebuild_qtensor"), qst, i(0), ints((10 ** 11,)), ints((1,)),
                             qparams, NEWFALSE, odict()), note="torch allocates the size before set_")
    add("qtensor_bad_scheme", call(glob("torch._utils", "_rebuild_qtensor"), qst, i(0), ints((24,)), ints((1,)),
                                   tup(glob("torch", "float32"), f(0.1), i(0)), NEWFALSE, odict()))
    idx_store = {"0": f32(W0), "1": i64([0, 100])}
    sparse_data = tup(tensor("1", (1, 2), "int64"), tensor("0", (2,), numel=6), call(glob("torch", "Size"),
                                                                                      lst(i(4))))
    add("sparse_coo_index_oob", call(glob("torch._utils", "_rebuild_sparse_tensor"), glob("torch", "sparse_coo"),
                                     sparse_data), idx_store)
    add("sparse_coo_nnz_mismatch", call(glob("torch._utils", "_rebuild_sparse_tensor"), glob("torch", "sparse_coo"),
                                        tup(tensor("1", (1, 2), "int64"), tensor("0", (6,)),
                                            call(glob("torch", "Size"), lst(i(200))))), idx_store)
    csr = tup(tensor("1", (2,), "int64"), tensor("2", (1,), "int64"), tensor("0", (1,), numel=6),
              call(glob("torch", "Size"), lst(i(1), i(2))))
    csr_store = {"0": f32(W0), "1": i64([0, 5]), "2": i64([9])}
    add("sparse_csr_lying_v113", call(glob("torch._utils", "_rebuild_sparse_csr_tensor"), glob("torch", "sparse_csr"),
                                      csr), csr_store, note="torch 1.13's name for it")
    add("sparse_csr_lying", call(glob("torch._utils", "_rebuild_sparse_tensor"), glob("torch", "sparse_csr"), csr),
        csr_store)
    nested_store = {"0": f32(W0), "1": i64([100]), "2": i64([1]), "3": i64([0])}
    add("nested_tensor_lying", call(glob("torch._utils", "_rebuild_nested_tensor"), tensor("0", (6,)),
                                    tensor("1", (1, 1), "int64"), tensor("2", (1, 1), "int64"),
                                    tensor("3", (1,), "int64")), nested_store,
        note="a nested tensor whose sizes claim 100 elements of a 6-element buffer")
    add("device_from_numpy_none", call(glob("torch._utils", "_rebuild_device_tensor_from_numpy"), NONE,
                                       glob("torch", "float32"), s("cuda:7"), NEWFALSE))
    add("meta_tensor_huge", call(glob("torch._utils", "_rebuild_meta_tensor_no_storage"), glob("torch", "float32"),
                                 ints((10 ** 12,)), ints((1,)), NEWFALSE), expect="any",
        note="a meta tensor holds no memory: loading or refusing are both fine")
    add("numpy_reconstruct_bad_state", build(call(glob("numpy.core.multiarray", "_reconstruct"),
                                                  glob("numpy", "ndarray"), tup(i(0)), b(b"b")),
                                             tup(i(1), tup(i(1000),), call(glob("numpy", "dtype"), s("f8"), NEWFALSE,
                                                                            NEWTRUE), NEWFALSE, b(b"\0" * 8))))


# ---- persistent ids ----------------------------------------------------------------------


def pid_cases(su):
    c = "pid"

    def with_pid(name, pid, store=None, expect="refuse", value=None, note="", size=(2, 3)):
        su.pickle_case(c, name, lambda m: pkl(sdict(w=tensor_v2(pid, 0, size, [3, 1] if len(size) == 2 else [1]))),
                       store if store is not None else STORE0, expect, value, note)

    fs = glob("torch", "FloatStorage")
    with_pid("arity4", tup(s("storage"), fs, s("0"), s("cpu")) + BINPERSID)
    with_pid("arity6", tup(s("storage"), fs, s("0"), s("cpu"), i(6), i(0)) + BINPERSID)
    with_pid("not_tuple_str", s("0") + BINPERSID)
    with_pid("not_tuple_list", lst(s("storage"), fs, s("0"), s("cpu"), i(6)) + BINPERSID)
    with_pid("typename_module", tup(s("module"), fs, s("0"), s("cpu"), i(6)) + BINPERSID,
             note="the typename of torch's legacy format")
    with_pid("key_int", tup(s("storage"), fs, i(0), s("cpu"), i(6)) + BINPERSID)
    with_pid("key_none", tup(s("storage"), fs, NONE, s("cpu"), i(6)) + BINPERSID)
    with_pid("key_bytes", tup(s("storage"), fs, b(b"0"), s("cpu"), i(6)) + BINPERSID, expect="refuse_or_equal",
             value={"w": T(W0, (2, 3))}, note="a bytes key (a Python 2 pickle's str): reading it as ASCII is fine")
    with_pid("typename_bytes", tup(b(b"storage"), fs, s("0"), s("cpu"), i(6)) + BINPERSID, expect="refuse_or_equal",
             value={"w": T(W0, (2, 3))})
    with_pid("numel_negative", storage("0", -1))
    with_pid("numel_more_than_stored", storage("0", 7))
    with_pid("numel_less_than_stored", storage("0", 5))
    with_pid("numel_zero", storage("0", 0))
    with_pid("numel_huge", storage("0", 1 << 62))
    with_pid("numel_float", tup(s("storage"), fs, s("0"), s("cpu"), f(6.0)) + BINPERSID)
    with_pid("numel_bool", tup(s("storage"), fs, s("0"), s("cpu"), NEWTRUE) + BINPERSID, size=(1,))
    with_pid("key_missing", storage("99", 6))
    with_pid("key_traversal", storage("../version", 6))
    with_pid("key_absolute", storage("/etc/passwd", 6))
    with_pid("key_empty", storage("", 6))
    with_pid("storage_type_int", tup(s("storage"), glob("builtins", "int"), s("0"), s("cpu"), i(6)) + BINPERSID)
    with_pid("storage_type_unknown", tup(s("storage"), glob("torch", "NoSuchStorage"), s("0"), s("cpu"),
                                         i(6)) + BINPERSID)
    with_pid("storage_type_os_system", tup(s("storage"), glob("os", "system"), s("0"), s("cpu"), i(6)) + BINPERSID)
    with_pid("location_cuda99", storage("0", 6, location="cuda:99"))
    with_pid("location_weird", storage("0", 6, location="file:/etc/passwd"))
    with_pid("location_not_str", tup(s("storage"), fs, s("0"), i(5), i(6)) + BINPERSID)
    with_pid("text_persid", PERSID + b"0\n")
    with_pid("untyped_storage", tup(s("storage"), glob("torch", "UntypedStorage"), s("0"), s("cpu"), i(24)) +
             BINPERSID, expect="any", size=(24,),
             note="an untyped storage under a tensor: bytes; refusing is fine too")
    su.pickle_case(c, "same_key_two_dtypes", lambda m: pkl(sdict(
        w=tensor("0", (2, 3)), v=tensor_v2(storage("0", 3, "int64"), 0, (3,), (1,)))), STORE0,
        note="one storage named with two dtypes (torch.save refuses to write that)")
    su.pickle_case(c, "same_key_two_numels", lambda m: pkl(sdict(
        w=tensor("0", (2, 3)), v=tensor_v2(storage("0", 100), 0, (100,), (1,)))), STORE0,
        note="the second reference claims 100 elements of the same 6-element storage")
    su.pickle_case(c, "pid_dag_repr", lambda m: pkl(sdict(w=tensor_v2(
        dag(60) + TUPLE1 + BINPERSID, 0, (2, 3), (3, 1)))), STORE0,
        note="a persistent id holding a 2^60 list DAG: an error message must not repr it")
    su.pickle_case(c, "pid_dag_repr_type", lambda m: pkl(sdict(w=tensor_v2(
        tup(s("storage"), dag(60), s("0"), s("cpu"), i(6)) + BINPERSID, 0, (2, 3), (3, 1)))), STORE0)


# ---- BUILD and slot state ----------------------------------------------------------------


def build_cases(su):
    c = "build"

    def add(name, payload, expect="refuse", value=None, note="", **kw):
        su.pickle_case(c, name, lambda m: with_w(payload), STORE0, expect, value, note, **kw)

    def slots(**kv):
        return tup(NONE, sdict(**kv))

    add("class_counter_slots", build(glob("collections", "Counter"), slots(most_common=glob("builtins", "list"))),
        note="setattr on the class: process-wide")
    add("class_counter_dict_state", build(glob("collections", "Counter"), sdict(most_common=glob("builtins", "list"))))
    add("class_path_exists", build(glob("pathlib", "Path"), slots(exists=glob("builtins", "bool"))))
    add("class_posixpath_exists", build(glob("pathlib", "PosixPath"), slots(exists=glob("builtins", "bool"))))
    add("class_purepath_fspath", build(glob("pathlib", "PurePath"), slots(__fspath__=glob("builtins", "str"))))
    add("class_namespace_init", build(glob("argparse", "Namespace"), slots(__init__=glob("builtins", "dict"))))
    add("class_namespace_getattribute", build(glob("argparse", "Namespace"),
                                              slots(__getattribute__=glob("builtins", "str"))))
    add("class_simplenamespace", build(glob("types", "SimpleNamespace"), slots(x=i(1))))
    add("class_tensor_add", build(glob("torch", "Tensor"), slots(__add__=glob("builtins", "str"))))
    add("class_tensor_setstate", build(glob("torch", "Tensor"), slots(__setstate__=glob("builtins", "list"))))
    add("class_parameter_repr", build(glob("torch.nn.parameter", "Parameter"),
                                      slots(__repr__=glob("builtins", "str"))))
    add("class_object", build(glob("builtins", "object"), slots(x=i(1))))
    add("class_ordereddict", build(glob("collections", "OrderedDict"), slots(x=i(1))))
    add("class_torch_size", build(glob("torch", "Size"), slots(x=i(1))))
    add("dtype_instance", build(glob("torch", "float32"), slots(is_floating_point=NEWFALSE)))
    add("func_reconstructor_defaults", build(glob("copyreg", "_reconstructor"), slots(__defaults__=tup(i(1)))))
    add("func_get_layout_cache", build(glob("torch.serialization", "_get_layout"), sdict(cache=sdict(
        **{"torch.strided": glob("torch", "sparse_coo")}))), note="replaces the function's cache: process-wide")
    add("func_rebuild_tensor_dict", build(glob("torch._utils", "_rebuild_tensor"), sdict(x=i(1))))
    add("func_rebuild_tensor_kwdefaults", build(glob("torch._utils", "_rebuild_tensor"),
                                                slots(__kwdefaults__=sdict(x=i(1)))))
    add("tensor_3tuple_hooks", build(call(glob("torch", "Tensor")), tup(NEWFALSE, NONE, odict(
        [(i(0), glob("collections", "OrderedDict"))]))), expect="refuse_or_equal",
        value={"w": T(W0, (2, 3)), "x": T([], (0,))}, note="Tensor.__setstate__'s 3-tuple sets _backward_hooks")
    add("tensor_3tuple_hooks_real", build(tensor("0", (2, 3)), tup(NEWFALSE, NONE, odict(
        [(i(0), glob("collections", "OrderedDict"))]))), expect="refuse_or_equal",
        value={"w": T(W0, (2, 3)), "x": T(W0, (2, 3))})
    add("tensor_4tuple_set_grow", build_4tuple(storage("0", 6), 0, (100,), (1,)),
        note="Tensor.__setstate__'s 4-tuple calls set_: a view past the storage")
    add("tensor_4tuple_set_huge", build_4tuple(storage("0", 6), 0, (10 ** 10,), (1,)))
    add("tensor_4tuple_set_negative", build_4tuple(storage("0", 6), -5, (6,), (1,)))
    add("tensor_5tuple_hooks", build(call(glob("torch", "Tensor")), MARK + tensor("0", (2, 3)) + NONE + odict(
        [(i(0), glob("collections", "OrderedDict"))]) + NEWFALSE + NONE + b"t"), expect="refuse_or_equal",
        value={"w": T(W0, (2, 3)), "x": T(W0, (2, 3))}, note="the legacy Variable 5-tuple: data and hooks")
    add("from_type_v2_hooks", call(glob("torch._tensor", "_rebuild_from_type_v2"),
                                   glob("torch._utils", "_rebuild_parameter"),
                                   glob("torch.nn.parameter", "Parameter"),
                                   tup(tensor("0", (2, 3)), NEWTRUE, odict()),
                                   sdict(_backward_hooks=odict([(i(0), glob("collections", "OrderedDict"))]))),
        expect="refuse_or_equal", value={"w": T(W0, (2, 3)), "x": P(W0, (2, 3))},
        note="_rebuild_from_type_v2's state sets attributes: _backward_hooks is a plain name")
    add("from_type_v2_class_attr", call(glob("torch._tensor", "_rebuild_from_type_v2"),
                                        glob("torch._utils", "_rebuild_parameter"),
                                        glob("torch.nn.parameter", "Parameter"),
                                        tup(tensor("0", (2, 3)), NEWTRUE, odict()),
                                        sdict(__class__=glob("torch", "Tensor"))))
    add("namespace_instance", build(newobj(glob("argparse", "Namespace")), sdict(a=i(1))), expect="refuse_or_equal",
        value={"w": T(W0, (2, 3)), "x": {"$ns": {"a": 1}}})
    add("namespace_instance_dunder", build(newobj(glob("argparse", "Namespace")), slots(__class__=glob(
        "types", "SimpleNamespace"))), expect="any")
    add("path_instance_slots", build(call(glob("pathlib", "PurePosixPath"), s("a")), slots(
        _str=s("/etc/passwd"), _parts=lst(s("/"), s("etc")))), expect="any")
    add("counter_instance_class", build(call(glob("collections", "Counter")), slots(__class__=glob(
        "collections", "OrderedDict"))), expect="any")
    add("ordereddict_instance", build(call(glob("collections", "OrderedDict")), sdict(x=i(1))), expect="any")
    add("reconstructor_path", call(glob("copyreg", "_reconstructor"), glob("pathlib", "PosixPath"),
                                   glob("builtins", "object"), NONE), expect="any",
        note="a Path built without its slots: loading it is harmless, refusing fine")
    add("generator_bad_state", build(call(glob("torch", "Generator")), b(b"\x01" * 16)))
    add("generator_device", call(glob("torch", "Generator"), s("cuda:5")))
    add("ndarray_bad_state", build(call(glob("numpy.core.multiarray", "_reconstruct"), glob("numpy", "ndarray"),
                                        tup(i(0)), b(b"b")), tup(i(1), tup(i(10)), call(
                                            glob("numpy", "dtype"), s("f8"), NEWFALSE, NEWTRUE), NEWFALSE, b(b"x"))))
    add("dtype_bad_state", build(call(glob("numpy", "dtype"), s("V8"), NEWFALSE, NEWTRUE),
                                 MARK + i(3) + s("|") + NONE + NONE + NONE + i(1 << 40) + i(1) + i(0) + b"t"),
        expect="any", note="a NumPy dtype whose state claims a 1 TB element")


def build_4tuple(stor, offset, size, stride):
    return build(call(glob("torch", "Tensor")), MARK + stor + i(offset) + ints(size) + ints(stride) + TUPLE)


# ---- sizes and nesting -------------------------------------------------------------------


def size_cases(su):
    c = "size"

    def add(name, payload, expect="refuse", value=None, note="", **kw):
        su.pickle_case(c, name, lambda m: with_w(payload), STORE0, expect, value, note, **kw)

    rng = glob("builtins", "range")
    add("bytearray_2g", call(glob("builtins", "bytearray"), i(1 << 31)), note="2 GiB of zeros from 8 bytes")
    add("bytes_1t", call(glob("builtins", "bytes"), i(1 << 40)))
    add("list_range_3e7", call(glob("builtins", "list"), call(rng, i(3 * 10 ** 7))))
    add("tuple_newobj_range", newobj(glob("builtins", "tuple"), call(rng, i(10 ** 9))))
    add("frozenset_newobj_range", newobj(glob("builtins", "frozenset"), call(rng, i(10 ** 8))))
    add("set_range", call(glob("builtins", "set"), call(rng, i(10 ** 8))))
    add("counter_range", call(glob("collections", "Counter"), call(rng, i(2 * 10 ** 7))))
    add("deque_range", call(glob("collections", "deque"), call(rng, i(10 ** 8))))
    add("torch_size_range", call(glob("torch", "Size"), call(rng, i(10 ** 8))))
    x_none = {"w": T(W0, (2, 3)), "x": None}
    add("long_binput_max", NONE + b"r" + struct.pack("<I", 0xFFFFFFFF), "refuse_or_equal", x_none,
        note="LONG_BINPUT 2^32-1: the C unpickler grows its memo table to the index; a memo that is a dict "
        "costs nothing, and loading is then fine")
    add("long_binput_1e8", NONE + b"r" + struct.pack("<I", 10 ** 8), "refuse_or_equal", x_none)
    add("reconstructor_bytearray", call(glob("copyreg", "_reconstructor"), glob("builtins", "bytearray"),
                                        glob("builtins", "bytearray"), i(1 << 31)))
    add("from_type_v2_bytearray", call(glob("torch._tensor", "_rebuild_from_type_v2"), glob("builtins", "bytearray"),
                                       glob("torch", "Tensor"), tup(i(1 << 31)), NONE))
    add("torch_tensor_1e9", call(glob("torch", "Tensor"), i(10 ** 9)), note="4 GB, uninitialised")
    add("torch_tensor_1e11", call(glob("torch", "Tensor"), i(10 ** 11)))
    add("numpy_reconstruct_huge", call(glob("numpy.core.multiarray", "_reconstruct"), glob("numpy", "ndarray"),
                                       tup(i(10 ** 11)), b(b"b")))
    add("numpy_core_reconstruct_huge", call(glob("numpy._core.multiarray", "_reconstruct"), glob("numpy", "ndarray"),
                                            tup(i(10 ** 11)), b(b"b")))
    add("numpy_setstate_huge", build(call(glob("numpy.core.multiarray", "_reconstruct"), glob("numpy", "ndarray"),
                                          tup(i(0)), b(b"b")), tup(i(1), tup(i(10 ** 5), i(10 ** 5)), call(
                                              glob("numpy", "dtype"), s("f8"), NEWFALSE, NEWTRUE), NEWFALSE, b(b""))))
    add("str_of_dag", call(glob("builtins", "str"), dag(60)), note="str() of a 2^60-leaf DAG from 600 bytes")
    add("bytes_of_dag", call(glob("builtins", "bytes"), dag(60)))
    add("dag_returned", dag(60), expect="any", note="the DAG itself is small; only walking it is exponential")
    add("deep_tuple_dict_key", dct([(deep_tuple(10 ** 6), NONE)]),
        note="hashing a 10^6-deep tuple overflows CPython's C stack (SIGSEGV): must be refused")
    add("deep_tuple_set", EMPTY_SET + MARK + deep_tuple(10 ** 6) + ADDITEMS)
    add("deep_tuple_frozenset", call(glob("builtins", "frozenset"), tup(deep_tuple(10 ** 6))))
    add("deep_tuple", deep_tuple(10 ** 6), note="nesting: refused at some depth (what limit is right is the loader's)")
    add("deep_list", EMPTY_LIST * (10 ** 6) + APPEND * (10 ** 6 - 1))
    add("deep_dict", (EMPTY_DICT + s("a")) * (10 ** 5) + EMPTY_DICT + SETITEM * (10 ** 5))
    add("deep_list_repr", call(glob("builtins", "str"), EMPTY_LIST * (10 ** 5) + APPEND * (10 ** 5 - 1)))
    add("long_text_digits", b"L" + b"9" * 200000 + b"L\n", note="a 200,000-digit protocol 0 LONG")
    add("frame_huge", FRAME + struct.pack("<Q", 1 << 62) + NONE, "refuse_or_equal", x_none,
        note="a FRAME announcing 2^62 bytes: refusing the lie or ignoring the hint are both fine, allocating is not")
    add("binunicode_truncated", b"X" + struct.pack("<I", 0x7FFFFFFF) + b"abc")
    add("binbytes8_huge", b"\x8e" + struct.pack("<Q", 1 << 62) + b"abc")
    add("bytearray8_1g", b"\x96" + struct.pack("<Q", 3 << 29) + b"abc", mem=True,
        note="BYTEARRAY8 stating 1.5 GB in a pickle of a few bytes: pickle zeroes a bytearray of that size first")
    add("dup_flood", NONE + DUP * 200000 + b"t",
        note="a 200,000-element tuple from as many bytes: linear, loads or is refused")


# ---- archives ----------------------------------------------------------------------------


def zip_cases(su):
    c = "zip"
    good_pkl = pkl(sdict(w=tensor("0", (2, 3))))
    good = {"w": T(W0, (2, 3))}

    def members():
        return archive_members(good_pkl, STORE0)

    def add(name, ms=None, raw=None, expect="refuse", value=None, note="", **kw):
        su.archive_case(c, name, raw if raw is not None else zip_bytes(ms), expect, value, note, **kw)

    add("control_valid", members(), expect="equal", value=good, note="the template the others damage")
    ms = members()
    ms[0].central_usize = ms[0].central_csize = len(ms[0].data) + 200
    add("pkl_overlaps_next_member", ms, note="data.pkl declared to run over data/0's header and bytes")
    # two storages sharing their bytes: data/1's local header hides in data/0's extra field
    pk = pkl(sdict(w=tensor("0", (2, 3)), v=tensor("1", (6,), "int32")))
    m0 = ZipMember("archive/data/0", f32(W0), align=0)
    m1 = ZipMember("archive/data/1", f32(W0), align=0)
    ms = [ZipMember("archive/data.pkl", pk, align=0), m0, m1, ZipMember("archive/version", b"3\n", align=0)]
    first = zip_bytes(ms[:1])
    off0 = first.index(b"PK\x01\x02")  # where data/0's local header goes
    hidden = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, m1.crc, 24, 24, len(m1.name), 0) + m1.name
    m0.local_extra = b"XX" + struct.pack("<H", len(hidden)) + hidden
    m1.central_offset = off0 + 30 + len(m0.name) + 4
    # data/1 itself is written as usual further on, but the central directory points into data/0's extra
    add("members_share_bytes", ms, note="data/1's central entry points at a local header hidden in data/0's extra "
        "field: both members are the same 24 bytes")
    add("overlap_amplification", raw=amplified_archive(1200, 1 << 18), ckpz=False,
        note="1200 members whose local headers nest in each other's extra fields so that all their data is one "
        "256 KB block: 300 MB of tensors from a 0.5 MB file")
    ms = members()
    ms[1].central_usize = ms[1].central_csize = 10 ** 6
    add("member_past_end", ms)
    ms = members()
    ms[1].central_offset = 1 << 31
    add("member_offset_past_end", ms)
    ms = members()
    ms[1].local_extra = b"XX" + struct.pack("<H", 65000)
    add("local_extra_past_end", ms)

    def z64(vals):
        return struct.pack("<HH", 1, 8 * len(vals)) + b"".join(struct.pack("<Q", v) for v in vals)

    ms = members()
    ms[0].central_usize = ms[0].central_csize = 0xFFFFFFFF
    ms[0].central_extra = z64([1 << 40, 1 << 40])
    add("zip64_pkl_huge", ms, note="a zip64 field declaring a 1 TB data.pkl")
    ms = members()
    ms[1].central_offset = 0xFFFFFFFF
    ms[1].central_extra = z64([1 << 63])
    add("zip64_offset_huge", ms)
    ms = members()
    ms[1].central_usize = ms[1].central_csize = 0xFFFFFFFF
    ms[1].central_extra = struct.pack("<HH", 1, 4) + b"\0\0\0\0"
    add("zip64_field_short", ms)

    def with_z64_end(count, cd_off_delta=0, loc_off=None):
        def patch(end, out):
            z_at = len(out)
            out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, end["cd_size"],
                               end["cd_offset"] + cd_off_delta)
            out += struct.pack("<IIQI", 0x07064B50, 0, z_at if loc_off is None else loc_off, 1)
        return patch

    add("zip64_end_count_huge", raw=zip_bytes(members(), eocd_patch=with_z64_end(1 << 40)))
    add("zip64_locator_past_end", raw=zip_bytes(members(), eocd_patch=with_z64_end(3, loc_off=1 << 50)))
    add("zip64_end_cd_elsewhere", raw=zip_bytes(members(), eocd_patch=with_z64_end(3, cd_off_delta=-7)))

    def end_patch(**kv):
        def patch(end, out):
            end.update(kv)
        return patch

    add("eocd_count_huge", raw=zip_bytes(members(), eocd_patch=end_patch(count=65535)))
    add("eocd_cd_offset_wrong", raw=zip_bytes(members(), eocd_patch=end_patch(cd_offset=5)))
    add("eocd_cd_size_huge", raw=zip_bytes(members(), eocd_patch=end_patch(cd_size=0xFFFFFFF0)))
    ms = members()
    ms[1].method = 8
    add("member_compressed", ms)
    ms = members()
    ms[1].flags = 1
    add("member_encrypted", ms)
    ms = members()
    ms[1].local_name = b"archive/data/X"
    add("local_name_differs", ms)
    add("no_data_pkl", archive_members(good_pkl, STORE0)[1:])
    ms = archive_members(good_pkl, STORE0, prefix="")
    for m in ms:
        m.name = m.name.lstrip(b"/")
    add("not_in_folder", ms)
    other = pkl(sdict(w=tensor("0", (3, 2))))
    ms = members()
    ms.append(ZipMember("archive/data.pkl", other))
    add("duplicate_data_pkl", ms, note="two members named data.pkl; they disagree on the shape: which one is the file?")
    ms = members()
    ms.append(ZipMember("archive/byteorder", b"big"))
    add("byteorder_big", ms)
    whole = zip_bytes(members())
    add("truncated_half", raw=whole[: len(whole) // 2])
    add("truncated_tail", raw=whole[:-5])
    add("empty", raw=b"", ckpz=False)
    add("garbage", raw=bytes((k * 131 + 7) & 0xFF for k in range(4096)))
    add("zip_magic_only", raw=b"PK\x03\x04" + b"\0" * 60)
    add("eocd_only", raw=struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0, 0, 0, 0, 0), ckpz=False)


def amplified_archive(n, block):
    """A zip whose n storage members all start at the same data block (each local header
    hides the following ones in its extra field), with a pickle of n tensors over them."""
    pk = pkl(sdict(**{"t%d" % k: tensor(str(k), (block // 4,)) for k in range(n)}))
    head = zip_bytes([ZipMember("archive/data.pkl", pk)])
    out = bytearray(head[: head.index(b"PK\x01\x02")])  # data.pkl's local header and bytes
    names = [("archive/data/%d" % k).encode() for k in range(n)]
    sizes = [30 + len(nm) for nm in names]
    offsets = []
    data = bytes((k * 7) & 0xFF for k in range(block))
    crc = zlib.crc32(data) & 0xFFFFFFFF
    for k, nm in enumerate(names):
        offsets.append(len(out))
        extra = sum(sizes[k + 1:])
        assert extra < 65536
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, block, block, len(nm), extra) + nm
    out += data
    ver_off = len(out)
    out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, zlib.crc32(b"3\n"), 2, 2, 15, 0)
    out += b"archive/version3\n"
    cd = len(out)
    entries = [(b"archive/data.pkl", zlib.crc32(pk), len(pk), 0)] + [(nm, crc, block, o) for nm, o in
                                                                       zip(names, offsets)] + \
        [(b"archive/version", zlib.crc32(b"3\n"), 2, ver_off)]
    for nm, c, size, off in entries:
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, c & 0xFFFFFFFF, size, size,
                           len(nm), 0, 0, 0, 0, 0, off) + nm
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(out) - cd, cd, 0)
    return bytes(out)


# ---- files that are not regular files ----------------------------------------------------


def file_cases(su):
    c = "files"
    # ckpz.load of a FIFO reads it as a stream (as torch.load of a pipe): a writer (the
    # driver's) feeds it a valid archive, or garbage. A FIFO nobody writes to blocks any
    # reader, as `cat` would: not a case. FIFOs inside checkpoint directories are (manifest, dcp).
    os.makedirs(su.path("files/x"), exist_ok=True)
    su.write("files/feed-valid.pt", torch_archive(pkl(sdict(w=tensor("0", (2, 3)))), STORE0))
    ckpz_file(torch_archive(pkl(sdict(w=tensor("0", (2, 3)))), STORE0), su.path("files/feed-valid.ckpz"))
    su.write("files/feed-garbage", bytes((k * 37 + 11) & 0xFF for k in range(3000)))
    for name, src, expect in (("fifo.pt", "feed-valid.pt", "equal"), ("fifo.ckpz", "feed-valid.ckpz", "equal"),
                              ("fifo_garbage.pt", "feed-garbage", "refuse")):
        rel = "files/" + name
        su.add(rel, c, "load", rel, expect, {"w": T(W0, (2, 3))} if expect == "equal" else None, oserror=True,
               fifo=[rel], note="a FIFO (made at run time) fed " + src)
        su.cases[-1]["fifo_feed"] = {rel: "files/" + src}
    os.makedirs(su.path("files/dir.pt/x"), exist_ok=True)
    su.add("files/dir.pt", c, "load", "files/dir.pt", "refuse", oserror=True)
    for name, target in (("devzero.pt", "/dev/zero"), ("devurandom.ckpz", "/dev/urandom"),
                         ("procself.pt", "/proc/self/status")):
        p = su.path("files/" + name)
        os.symlink(target, p)
        su.add("files/" + name, c, "load", "files/" + name, "refuse", oserror=True, note="a symlink to " + target)
    su.add("files/missing.pt", c, "load", "files/missing.pt", "refuse", oserror=True)
    su.write("files/empty.pt", b"")
    su.add("files/empty.pt", c, "load", "files/empty.pt", "refuse")


# ---- valid controls ----------------------------------------------------------------------


def valid_cases(su):
    c = "valid"
    add = su.pickle_case
    add(c, "tensor", lambda m: pkl(sdict(w=tensor("0", (2, 3)), step=i(7))), STORE0, "equal",
        {"w": T(W0, (2, 3)), "step": 7}, mem=True)
    add(c, "views_shared", lambda m: pkl(sdict(
        a=tensor("0", (2, 3)), b=tensor_v2(storage("0", 6), 1, (5,), (1,)),
        t=tensor_v2(storage("0", 6), 0, (3, 2), (1, 3)))), STORE0, "equal",
        {"a": T(W0, (2, 3)), "b": T(W0[1:], (5,)), "t": T([W0[0], W0[3], W0[1], W0[4], W0[2], W0[5]], (3, 2))},
        mem=True)
    add(c, "parameter", lambda m: pkl(sdict(p=call(glob("torch._utils", "_rebuild_parameter"), tensor("0", (2, 3)),
                                                   NEWTRUE, odict()))), STORE0, "equal", {"p": P(W0, (2, 3))})
    add(c, "containers", lambda m: pkl(sdict(
        od=odict([(s("a"), i(1)), (s("b"), lst(i(2), f(2.5)))]),
        counter=call(glob("collections", "Counter"), sdict(x=i(2), y=i(1))),
        ns=build(newobj(glob("argparse", "Namespace")), sdict(lr=f(0.001), name=s("run"))),
        tup=tup(i(1), s("two"), NONE, NEWTRUE), st=EMPTY_SET + MARK + i(3) + i(4) + ADDITEMS,
        fs=call(glob("builtins", "frozenset"), lst(i(5))), by=b(b"\x00\xff"), big=i(1 << 70), neg=i(-5))), None,
        "equal", {"od": {"$odict": [["a", 1], ["b", [2, 2.5]]]}, "counter": {"$counter": [["x", 2], ["y", 1]]},
                  "ns": {"$ns": {"lr": 0.001, "name": "run"}}, "tup": {"$tuple": [1, "two", None, True]},
                  "st": {"$set": [3, 4]}, "fs": {"$frozenset": [5]}, "by": {"$bytes": "00ff"}, "big": 1 << 70,
                  "neg": -5})
    add(c, "empty_tensors", lambda m: pkl(sdict(e=tensor("0", (0,)), e2=tensor_v2(storage("0", 0), 0, (2, 0),
                                                                                 (1, 1)))), {"0": b""}, "equal",
        {"e": T([], (0,)), "e2": T([], (2, 0))})
    add(c, "int64_tensor", lambda m: pkl(sdict(i=tensor("0", (3,), "int64"))), {"0": i64([1, -2, 1 << 40])}, "equal",
        {"i": T([1, -2, 1 << 40], (3,), "int64")})
    add(c, "protocol4", lambda m: framed(sdict(w=tensor("0", (2, 3)), g=sglob("collections", "OrderedDict") +
                                                EMPTY_TUPLE + b"R")), STORE0, "equal",
        {"w": T(W0, (2, 3)), "g": {"$odict": []}}, note="protocol 4 opcodes (FRAME, STACK_GLOBAL)")
    add(c, "protocol0_dict", lambda m: b"(dp0\nVa\np1\nI1\nsVb\np2\n(lp3\nI2\naI3\nas.", None, "equal",
        {"a": 1, "b": [2, 3]})
    add(c, "deep_nesting_100", lambda m: pkl(sdict(d=EMPTY_LIST * 100 + APPEND * 99)), None, "equal",
        {"d": nested_list(100)}, note="a hundred levels: what real state never exceeds, and must load")


def framed(body):
    """A protocol 4 pickle of body in one FRAME, as pickle.dumps writes it."""
    rest = body + STOP
    return proto(4) + FRAME + struct.pack("<Q", len(rest)) + rest


def nested_list(n):
    v = []
    for _ in range(n - 1):
        v = [v]
    return v


# ---- ckpz.distributed --------------------------------------------------------------------


def dist_template(world=2, tensors_override=None, skeleton_override=None):
    """{file: bytes} of a world-2 checkpoint: rank r's local "w", the replicated "r" (in
    shard 0), the sharded "s" (rows 0-1 in shard 0, 2-3 in shard 1), and "step"."""
    skel = sdict(w=leaf("w"), r=leaf("r"), s=leaf("s"), step=i(7))
    pk0 = pkl(shard_payload(0, world, skel, [("w", tensor("0", (2, 3))), ("r", tensor("1", (4,))),
                                             ("s", tensor("2", (2,)))]))
    pk1 = pkl(shard_payload(1, world, skel, [("w", tensor("0", (2, 3))), ("s", tensor("1", (2,)))]))
    st0 = {"0": f32(W0), "1": f32(R4), "2": f32(S4[:2])}
    st1 = {"0": f32(W1), "1": f32(S4[2:])}
    return [(pk0, st0), (pk1, st1)]


def dist_manifest(crc=True, lossy=False, base=None):
    loc = [{"w": entry(0, (W0, (2, 3)), crc=crc)}, {"w": entry(1, (W1, (2, 3)), crc=crc)}]
    rep = {"r": entry(0, (R4, (4,)), crc=crc)}
    shd = {"s": {"dtype": "float32", "shape": [4], "pieces": [
        {"shard": 0, "rows": [0, 2], "crc32": crc32_f32(S4[:2]) if crc else None},
        {"shard": 1, "rows": [2, 4], "crc32": crc32_f32(S4[2:]) if crc else None}]}}
    return manifest(2, rep, loc, shd, base=base, lossy=lossy)


DIST_VALUE = {"w": T(W0, (2, 3)), "r": T(R4, (4,)), "s": SH(S4, 0, 4), "step": 7}


def write_dist(su, rel, shards=None, man=None, man_bytes=None):
    shards = shards or dist_template()
    for r, (pk, st) in enumerate(shards):
        ckpz_file(torch_archive(pk, st), su.path("%s/%s" % (rel, shard_name(r, len(shards)))))
    if man_bytes is None:
        man_bytes = json_bytes(man if man is not None else dist_manifest())
    su.write(rel + "/manifest.json", man_bytes)
    return man_bytes


def manifest_cases(su):
    c = "manifest"

    def add(name, expect="refuse", value=None, note="", shards=None, man=None, man_bytes=None, **kw):
        rel = "%s/%s" % (c, name)
        mb = write_dist(su, rel, shards, man, man_bytes)
        seeds = {"manifest": rel + "/manifest.json"} if len(mb) <= 64 << 10 else {}
        if shards is not None:
            seeds["shard"] = rel + "/shard0.pkl"
            su.write(rel + "/shard0.pkl", shards[0][0])
        su.add(rel, c, "dist", rel, expect, value, note, seeds=seeds, **kw)
        return rel

    rel = add("control_valid", "equal", DIST_VALUE, note="the world-2 template the others change")
    su.write(rel + "/shard0.pkl", dist_template()[0][0])
    su.cases[-1]["seeds"]["shard"] = rel + "/shard0.pkl"
    add("base_dot", man=dist_manifest(base="."), note="the checkpoint is its own base: a cycle")
    add("base_absolute", man=dist_manifest(base=os.path.join(su.out, c, "control_valid")),
        note="an absolute base (here a valid checkpoint): the manifest may not point anywhere on the machine")
    add("base_escape", man=dist_manifest(base="../../../../../../../../../../../../etc"), oserror=True)
    add("base_not_str", man=dist_manifest(base=5))
    cyc = "%s/base_cycle" % c
    write_dist(su, cyc + "/a", man=dist_manifest(base="../b"))
    write_dist(su, cyc + "/b", man=dist_manifest(base="../a"))
    su.add(cyc + "/a", c, "dist", cyc + "/a", "refuse", note="a's base is b, b's base is a")
    deep = b'{"format": "ckpz.distributed", "version": 1, "world_size": 1, "pad": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    add("nested_1e5", man_bytes=deep, note="JSON nested 100,000 levels")
    add("huge_json", man_bytes=huge_manifest(), note="48 MB of manifest: limits, and memory <= 256 MB")
    add("crc_null_lossless", man=dist_manifest(crc=False), note="crc32 null while lossy is false")
    swapped = list(reversed(dist_template()))
    add("crc_null_swapped", shards=swapped, man=dist_manifest(crc=False),
        note="crc32 null, lossy false, the two shard files exchanged: nothing but the manifest can tell")
    add("swapped_shards", shards=swapped)
    m = dist_manifest()
    m["world_size"] = 10 ** 9
    add("world_size_huge", man=m)
    m = dist_manifest()
    m["local"][0]["w"]["shard"] = 5
    add("shard_index_out_of_range", man=m)
    m = dist_manifest()
    m["local"][0]["w"]["shape"] = [-2, 3]
    add("shape_negative", man=m)
    m = dist_manifest()
    m["local"][0]["w"]["dtype"] = "float64"
    add("dtype_lie", man=m)
    m = dist_manifest()
    m["local"][0]["w"]["shape"] = [3, 2]
    add("shape_lie", man=m)
    m = dist_manifest()
    m["local"][0]["w"]["crc32"] ^= 1
    add("crc_wrong", man=m)
    m = dist_manifest()
    m["sharded"]["s"]["pieces"][0]["rows"] = [0, 1]
    m["sharded"]["s"]["pieces"][0]["crc32"] = None
    add("sharded_gap", man=m, note="rows 1-2 covered by no piece")
    m = dist_manifest()
    m["sharded"]["s"]["pieces"][1]["rows"] = [1, 4]
    add("sharded_overlap", man=m)
    m = dist_manifest()
    m["sharded"]["s"]["shape"] = [10 ** 15]
    m["sharded"]["s"]["pieces"][1]["rows"] = [2, 10 ** 15]
    add("sharded_rows_huge", man=m)
    m = dist_manifest()
    m["local"][0]["w"] = entry(1, (W1, (2, 3)))
    add("local_in_other_shard", man=m, note="rank 0's own tensor placed in rank 1's file (with that file's CRC): "
        "a manifest that is consistent but not what the save writes")
    m = dist_manifest()
    del m["local"][0]["w"]
    add("tensor_not_in_manifest", man=m)
    add("manifest_not_json", man_bytes=b"{not json")
    add("manifest_list", man_bytes=b"[]")
    add("manifest_version_2", man=dict(dist_manifest(), version=2))
    # files in place of the manifest or a shard
    rel = add("manifest_fifo", oserror=True, note="manifest.json is a FIFO (made at run time)")
    os.unlink(su.path(rel + "/manifest.json"))
    su.cases[-1]["fifo"] = [rel + "/manifest.json"]
    rel = add("shard_fifo", oserror=True, note="shard 1 is a FIFO (made at run time)")
    os.unlink(su.path(rel + "/" + shard_name(1, 2)))
    su.cases[-1]["fifo"] = [rel + "/" + shard_name(1, 2)]
    rel = add("shard_is_dir", oserror=True)
    os.unlink(su.path(rel + "/" + shard_name(1, 2)))
    os.makedirs(su.path(rel + "/" + shard_name(1, 2) + "/x"))
    for name, target in (("shard_devzero", "/dev/zero"), ("shard_passwd", "/etc/passwd")):
        rel = add(name, oserror=True, note="shard 1 is a symlink to " + target)
        os.unlink(su.path(rel + "/" + shard_name(1, 2)))
        os.symlink(target, su.path(rel + "/" + shard_name(1, 2)))
    rel = add("shard_missing", oserror=True)
    os.unlink(su.path(rel + "/" + shard_name(1, 2)))
    # shards whose pickle lies
    skel = sdict(w=leaf("w"), r=leaf("r"), s=leaf("s"), step=i(7))
    t0 = dist_template()

    def shard0(tensors=None, skeleton=None, payload=None, store=None):
        pk = payload if payload is not None else pkl(shard_payload(0, 2, skeleton or skel, tensors or [
            ("w", tensor("0", (2, 3))), ("r", tensor("1", (4,))), ("s", tensor("2", (2,)))]))
        return [(pk, store or t0[0][1]), t0[1]]

    oob = tensor_v2(storage("0", 6), 0, (2, 3), (10, 1))
    add("shard_tensor_oob", shards=shard0([("w", oob), ("r", tensor("1", (4,))), ("s", tensor("2", (2,)))]),
        note="w's stride reaches past its 6-element storage (the manifest's shape matches)")
    add("shard_tensor_oob_crc_null", shards=shard0([("w", oob), ("r", tensor("1", (4,))), ("s", tensor("2", (2,)))]),
        man=dist_manifest(crc=False), note="the same, and no CRC to catch the garbage")
    huge = tensor_v2(storage("0", 6), 0, (10 ** 10,), (1,))
    m = dist_manifest(crc=False)
    m["local"][0]["w"]["shape"] = [10 ** 10]
    add("shard_tensor_huge", shards=shard0([("w", huge), ("r", tensor("1", (4,))), ("s", tensor("2", (2,)))]), man=m)
    add("shard_numel_negative", shards=shard0([("w", tensor_v2(storage("0", -1), 0, (2, 3), (3, 1))),
                                               ("r", tensor("1", (4,))), ("s", tensor("2", (2,)))]))
    add("shard_numel_mismatch", shards=shard0([("w", tensor_v2(storage("0", 7), 0, (2, 3), (3, 1))),
                                               ("r", tensor("1", (4,))), ("s", tensor("2", (2,)))]))
    add("shard_key_two_dtypes", shards=shard0([("w", tensor("0", (2, 3))), ("r", tensor_v2(
        storage("0", 3, "int64"), 0, (3,), (1,))), ("s", tensor("2", (2,)))]))
    add("shard_code", shards=shard0(skeleton=sdict(w=leaf("w"), r=leaf("r"), s=leaf("s"), step=call(
        glob("os", "system"), s(sh(su.marker("manifest/shard_code")))))),
        marker=su.marker("manifest/shard_code"))
    add("shard_build_class", shards=shard0(skeleton=sdict(w=leaf("w"), r=leaf("r"), s=leaf("s"), step=build(
        glob("collections", "Counter"), tup(NONE, sdict(most_common=glob("builtins", "list")))))))
    add("shard_deep_skeleton", shards=shard0(skeleton=sdict(w=leaf("w"), r=leaf("r"), s=leaf("s"), step=(
        EMPTY_DICT + s("a")) * 100000 + EMPTY_DICT + SETITEM * 100000)), note="a skeleton nested 100,000 dicts deep")
    add("shard_dag_skeleton", shards=shard0(skeleton=sdict(w=leaf("w"), r=leaf("r"), s=leaf("s"), step=dag(60))),
        note="a 2^60-leaf list DAG in the skeleton: walking it is exponential")
    add("shard_mark_unhashable", shards=shard0(skeleton=sdict(w=sdict(**{"__ckpz_tensor__": lst(i(1))}),
                                                              r=leaf("r"), s=leaf("s"), step=i(7))))
    add("shard_payload_list", shards=shard0(payload=pkl(lst(i(1)))))
    add("shard_tensors_not_dict", shards=shard0(payload=pkl(sdict(format=s("ckpz.distributed"), skeleton=skel,
                                                                  tensors=lst()))))


def huge_manifest():
    m = dist_manifest()
    head = json.dumps(m)[:-1].encode()
    item = b'{"a": 1}, '
    n = (48 << 20) // len(item)
    return head + b', "pad": [' + item * n + b'{"a": 1}]}'


# ---- ckpz.dcp ----------------------------------------------------------------------------


def dcp_template(su, rel):
    """A DCP checkpoint of {"w": 2x3, "b": [2]} written by ckpz.dcp.Writer in this process
    into OUTDIR/rel; returns its .metadata."""
    return write_dcp_template(os.path.join(su.out, rel))


def write_dcp_template(d):
    import warnings

    import torch
    import ckpz.dcp as cdcp

    dcp = cdcp.checkpoint
    sd = {"w": torch.tensor(W0).reshape(2, 3), "b": torch.tensor(R4[:2])}
    os.makedirs(d, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(dcp, "save") and cdcp._N["new_api"]:
            dcp.save(sd, storage_writer=cdcp.Writer(d, threads=1))
        else:
            dcp.save_state_dict(sd, storage_writer=cdcp.Writer(d, threads=1), no_dist=True)
    with open(os.path.join(d, ".metadata"), "rb") as fo:
        return fo.read()


def write_dist_template(d, shards=None, man=None):
    """The world-2 checkpoint of dist_template() (or the shards given) into directory d."""
    shards = shards or dist_template()
    os.makedirs(d, exist_ok=True)
    for r, (pk, st) in enumerate(shards):
        ckpz_file(torch_archive(pk, st), os.path.join(d, shard_name(r, len(shards))))
    with open(os.path.join(d, "manifest.json"), "wb") as fo:
        fo.write(json_bytes(man if man is not None else dist_manifest()))


DCP_VALUE = {"w": T(W0, (2, 3)), "b": T(R4[:2], (2,))}


def dcp_cases(su):
    import ckpz.dcp as cdcp

    c = "dcp"
    md = dcp_template(su, c + "/control_valid")
    shard = os.path.join(su.out, c, "control_valid", shard_name(0, 1))
    with open(shard, "rb") as fo:
        shard_bytes = fo.read()
    classes = {cls.__name__: cls for cls in getattr(sys.modules.get("ckpz"), "_dcp_metadata", cdcp)._metadata_classes()}

    def g(name):
        cls = classes[name]
        return glob(cls.__module__, cls.__qualname__)

    su.add(c + "/control_valid", c, "dcp_read", c + "/control_valid", "equal", DCP_VALUE,
           seeds={"dcp_metadata": c + "/control_valid/.metadata"})
    su.add(c + "/control_valid@metadata", c, "dcp_metadata", c + "/control_valid", "equal", {"$type": "Metadata"})

    def add(name, metadata=None, load="dcp_metadata", expect="refuse", shard_data=None, note="", **kw):
        rel = "%s/%s" % (c, name)
        os.makedirs(os.path.join(su.out, rel), exist_ok=True)
        su.write(rel + "/.metadata", md if metadata is None else metadata)
        su.write(rel + "/" + shard_name(0, 1), shard_bytes if shard_data is None else shard_data)
        value = DCP_VALUE if load == "dcp_read" else None
        seeds = {"dcp_metadata": rel + "/.metadata"} if metadata is not None and len(metadata) <= 64 << 10 else {}
        su.add(rel, c, load, rel, expect, value, note, seeds=seeds, **kw)
        return rel

    mk = su.marker(c + "/md_os_system")
    add("md_os_system", wrap(call(glob("os", "system"), s(sh(mk))), md), marker=mk)
    mk = su.marker(c + "/md_getattr_import")
    add("md_getattr_import", wrap(call(call(glob("builtins", "getattr"), call(glob("builtins", "__import__"),
                                                                             s("os")), s("system")), s(sh(mk))), md),
        marker=mk)
    add("md_getattr_class_method", wrap(call(glob("builtins", "getattr"), g("Metadata"), s("__init__")), md))
    enum_cls = [n for n in classes if n == "MEM_FORMAT_ENCODING"]
    if enum_cls:
        add("md_getattr_enum_dunder", wrap(call(glob("builtins", "getattr"), g("MEM_FORMAT_ENCODING"),
                                                s("__class__")), md))
        add("md_build_enum_class", wrap(build(g("MEM_FORMAT_ENCODING"), tup(NONE, sdict(x=i(1)))), md))
    add("md_build_metadata_class", wrap(build(g("Metadata"), tup(NONE, sdict(__repr__=glob("builtins", "str")))), md),
        note="setattr on DCP's Metadata class: process-wide")
    add("md_build_properties_class", wrap(build(g("TensorProperties"), tup(NONE, sdict(
        __eq__=glob("builtins", "object")))), md))
    add("md_not_metadata", pkl(sdict(a=i(1))), note="a dict where the Metadata should be")
    add("md_persistent_id", wrap(tup(s("storage")) + BINPERSID, md))
    add("md_bytearray_2g", wrap(call(glob("builtins", "bytearray"), i(1 << 31)), md))
    add("md_deep_tuple_key", wrap(dct([(deep_tuple(10 ** 6), NONE)]), md))
    add("md_dag_str", wrap(call(glob("builtins", "str"), dag(60)), md))
    add("md_truncated", md[: len(md) // 2])
    add("md_empty", b"")
    rel = add("md_fifo", oserror=True, note=".metadata is a FIFO (made at run time)")
    os.unlink(su.path(rel + "/.metadata"))
    su.cases[-1]["fifo"] = [rel + "/.metadata"]
    # whole loads through DCP with ckpz.dcp.Reader
    import pickle

    obj = pickle.loads(md)
    sd_items = list(obj.storage_data.items())
    evil = pickle.loads(md)
    evil.storage_data = {k: ("../../../../../../../../etc/passwd", v[1], v[2]) for k, v in sd_items}
    add("read_path_traversal", pickle.dumps(evil), load="dcp_read", oserror=True,
        note="storage_data names ../../etc/passwd")
    evil = pickle.loads(md)
    evil.storage_data = {k: (v[0], v[1]) for k, v in sd_items}
    add("read_storage_data_pair", pickle.dumps(evil), load="dcp_read")
    evil = pickle.loads(md)
    evil.storage_data = {k: (v[0], "99", v[2]) for k, v in sd_items}
    add("read_key_missing", pickle.dumps(evil), load="dcp_read")
    evil = pickle.loads(md)
    evil.storage_data = {k: (v[0], v[1], (v[2] or 0) ^ 1) for k, v in sd_items}
    add("read_crc_wrong", pickle.dumps(evil), load="dcp_read")
    # shards whose pickle lies (keys as the Writer numbers them: one per item)
    keys = sorted({v[1] for _, v in sd_items})
    by_key = {v[1]: k.fqn for k, v in sd_items}

    def dcp_shard(tensors):
        pk = pkl(sdict(format=s("ckpz.dcp"), tensors=dct([(s(k), t) for k, t in tensors]), bytes=EMPTY_DICT))
        return pk

    def tensors_for(bad_w):
        out, store = [], {}
        for n, k in enumerate(keys):
            if by_key[k] == "w":
                out.append((k, bad_w(str(n))))
                store[str(n)] = f32(W0)
            else:
                out.append((k, tensor(str(n), (2,))))
                store[str(n)] = f32(R4[:2])
        return out, store

    def shard_file(tensors, store):
        tmp = su.path(c + "/_tmp.ckpz")
        ckpz_file(torch_archive(dcp_shard(tensors), store), tmp)
        with open(tmp, "rb") as fo:
            data = fo.read()
        os.unlink(tmp)
        return data

    t, st = tensors_for(lambda key: tensor(key, (2, 3)))
    add("read_handmade_control", md, load="dcp_read", expect="equal", shard_data=shard_file(t, st),
        note="the shard written by hand here: the template of the next ones")
    t, st = tensors_for(lambda key: tensor_v2(storage(key, 6), 0, (2, 3), (10, 1)))
    add("read_shard_oob", md, load="dcp_read", shard_data=shard_file(t, st))
    t, st = tensors_for(lambda key: tensor_v2(storage(key, 6), 0, (10 ** 10,), (1,)))
    add("read_shard_huge", md, load="dcp_read", shard_data=shard_file(t, st))
    t, st = tensors_for(lambda key: tensor_v2(storage(key, 6), 0, (3, 2), (2, 1)))
    add("read_shard_wrong_shape", md, load="dcp_read", shard_data=shard_file(t, st))
    rel = add("read_shard_fifo", md, load="dcp_read", oserror=True, note="the shard is a FIFO (made at run time)")
    os.unlink(su.path(rel + "/" + shard_name(0, 1)))
    su.cases[-1]["fifo"] = [rel + "/" + shard_name(0, 1)]


# ---- main --------------------------------------------------------------------------------


def build_suite(out, marker_dir=None):
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    su = Suite(out, marker_dir or os.path.join(out, "ran"))
    os.makedirs(su.marker_dir, exist_ok=True)
    for part in (valid_cases, code_cases, tensor_cases, pid_cases, build_cases, size_cases, zip_cases, file_cases,
                 manifest_cases, dcp_cases):
        part(su)
    su.save_index()
    return su


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--marker-dir", help="where code payloads try to create their markers (default OUTDIR/ran)")
    a = ap.parse_args()
    su = build_suite(a.outdir, a.marker_dir)
    cats = {}
    for cs in su.cases:
        cats[cs["category"]] = cats.get(cs["category"], 0) + 1
    print("make_suite: %d cases in %s (%s)" % (len(su.cases), su.out,
                                             ", ".join("%s %d" % kv for kv in sorted(cats.items()))))


if __name__ == "__main__":
    main()
