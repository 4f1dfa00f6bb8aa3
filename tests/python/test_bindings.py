"""The Python bindings' declarations against include/ckpz.h: they cannot drift apart.

python/ckpz/_abi.py declares the header's structs and constants again for ctypes, and
python/ckpz/_lib.py every function the package calls, by hand. A field out of step is
not refused by anyone: the library reads garbage where it expects a pointer, or writes
past a struct. So this test compares them with what a C compiler makes of the header
(tests/python/header_layout.c, built by CMake, path in CKPZ_HEADER_LAYOUT): every
mirrored struct's size and each field's name, offset and size, every mirrored constant,
every ckpz_error code in both directions, the size of the enums the bindings declare as
int. It reads the header's text too, to check that the C program lists every field the
header declares and that each declared function and callback type has the header's
argument count, pointer-ness, size and signedness of every argument and result.

Run by ctest as `python_bindings`; by hand from the repository, after `make`:

    CKPZ_HEADER_LAYOUT=build/tests/ckpz_header_layout PYTHONPATH=python \\
        /usr/bin/python3 tests/python/test_bindings.py -v
"""

import ctypes
import os
import re
import subprocess
import sys
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", ".."))
import package_under_test  # noqa: E402  (this folder: the checkout's python/, or the installed copy)
package_under_test.use_package()

from ckpz import _abi, _lib  # noqa: E402

# The stable header and the experimental one (the zip source and the tuner the package
# calls are there).
HEADERS = [os.path.join(_REPO, "include", h) for h in ("ckpz.h", "ckpz_experimental.h")]

# The struct each ctypes Structure of _abi mirrors.
STRUCTS = {
    "ckpz_params": _abi.Params,
    "ckpz_fd": _abi.Fd,
    "ckpz_stats": _abi.Stats,
    "ckpz_base_info": _abi.BaseInfo,
    "ckpz_entry": _abi.EntryStruct,
    "ckpz_archive_info": _abi.ArchiveInfo,
    "ckpz_span": _abi.Span,
    "ckpz_zip_member": _abi.ZipMember,
    "ckpz_zip_options": _abi.ZipOptions,
    "ckpz_source": _abi.Source,
    "ckpz_tune_result": _abi.TuneResult,
    "ckpz_st_tensor": _abi.StTensor,
    "ckpz_st_meta": _abi.StMeta,
    "ckpz_grad_params": _abi.GradParams,
    "ckpz_grad_info": _abi.GradInfo,
}
# The callback type each ctypes prototype of _abi mirrors.
CALLBACKS = {
    "ckpz_progress_fn": _abi.PROGRESS_FN,
    "ckpz_read_fn": _abi.READ_FN,
    "ckpz_write_fn": _abi.WRITE_FN,
    "ckpz_pread_fn": _abi.PREAD_FN,
}
# Integer constants of _abi that are the container format's (doc/format.md), not the header's.
NOT_IN_HEADER = {"MIN_CHUNK_COST"}
# The enums the bindings pass as int.
ENUMS = ("ckpz_error", "ckpz_dtype", "ckpz_input_format", "ckpz_codec")
# C scalar types in the header's prototypes, as ctypes declares them.
SCALARS = {
    "int": ctypes.c_int,
    "unsigned": ctypes.c_uint,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "ptrdiff_t": ctypes.c_ssize_t,
    "double": ctypes.c_double,
}
for _e in ENUMS:
    SCALARS[_e] = ctypes.c_int


def layout():
    """What header_layout prints, as {"struct": {name: size}, "field": {name: [(field,
    offset, size)]}, "enum": {...}, "const": {...}, "error": {...}}."""
    exe = os.environ.get("CKPZ_HEADER_LAYOUT") or os.path.join(_REPO, "build", "tests", "ckpz_header_layout")
    if not os.path.exists(exe):
        raise FileNotFoundError(
            "tests/python/test_bindings.py needs the header_layout program CMake builds: "
            "set CKPZ_HEADER_LAYOUT to its path (no such file: %s)" % exe
        )
    out = {"struct": {}, "field": {}, "enum": {}, "const": {}, "error": {}}
    for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines():
        kind, name, *nums = line.split()
        if kind == "field":
            struct, field = name.split(".")
            out["field"].setdefault(struct, []).append((field, int(nums[0]), int(nums[1])))
        else:
            out[kind][name] = int(nums[0])
    return out


def header_text():
    text = ""
    for h in HEADERS:
        with open(h) as f:
            text += f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"CKPZ_DEPRECATED\(\"[^\"]*\"\)", " ", text)  # the attribute, not part of the type
    return re.sub(r"//[^\n]*", " ", text)


def split_top(s):
    """s split at the commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def header_fields():
    """{struct typedef name: [field names in order]} from the header's text."""
    out = {}
    for m in re.finditer(r"typedef\s+struct\s+\w+\s*\{(.*?)\}\s*(\w+)\s*;", header_text(), re.S):
        fields = []
        for decl in m.group(1).split(";"):
            if not decl.strip():
                continue
            fp = re.match(r"[^(]*\(\s*\*\s*(\w+)\s*\)\s*\(", decl, re.S)
            if fp:  # a function pointer: int (*patch)(...)
                fields.append(fp.group(1))
                continue
            first, *more = split_top(decl)  # "double mae, max_error, rmse"
            fields.append(re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", first).group(1))
            fields += [re.match(r"[\s*]*(\w+)", d).group(1) for d in more]
        out[m.group(2)] = fields
    return out


def c_type(decl, named):
    """("pointer", None) or ("scalar", ctypes type) or ("void", None) for a C type in a
    prototype (named: decl ends with a parameter name)."""
    decl = decl.strip()
    tokens = re.findall(r"\w+|\*", decl)
    if "*" in tokens or (tokens and tokens[0].endswith("_fn")):
        return "pointer", None
    tokens = [t for t in tokens if t != "const"]
    if named and len(tokens) > 1:
        tokens = tokens[:-1]
    name = " ".join(tokens)
    if name == "void":
        return "void", None
    if name not in SCALARS:
        raise AssertionError("the header's type %r is not known to this test: add it to SCALARS" % name)
    return "scalar", SCALARS[name]


def header_signatures():
    """{name: (result, [arguments])} of the header's functions and callback typedefs,
    each type as c_type gives it."""
    text = header_text()
    out = {}
    for m in re.finditer(r"CKPZ_API\s+([^;(]*?)\b(ckpz_\w+)\s*\(([^;]*?)\)\s*;", text, re.S):
        out[m.group(2)] = (m.group(1), m.group(3))
    for m in re.finditer(r"typedef\s+([^;(]*?)\(\s*\*\s*(ckpz_\w+)\s*\)\s*\(([^;]*?)\)\s*;", text, re.S):
        out[m.group(2)] = (m.group(1), m.group(3))
    sigs = {}
    for name, (ret, args) in out.items():
        args = [a for a in split_top(args) if a.strip() and a.strip() != "void"]
        sigs[name] = (c_type(ret, False), [c_type(a, True) for a in args])
    return sigs


def ctypes_kind(t):
    """The c_type-style description of a ctypes argument or result type."""
    if t is None:
        return "void", None
    if t in (ctypes.c_void_p, ctypes.c_char_p) or issubclass(t, (ctypes._Pointer, ctypes._CFuncPtr)):
        return "pointer", None
    return "scalar", t


def same_scalar(a, b):
    """Same size and signedness (c_size_t is c_ulong or c_ulonglong depending on the platform)."""
    if ctypes.sizeof(a) != ctypes.sizeof(b):
        return False
    if a is ctypes.c_double or b is ctypes.c_double:
        return a is b
    return (a(-1).value < 0) == (b(-1).value < 0)


class TestBindingsMatchHeader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = layout()

    def test_every_struct_and_callback_is_checked(self):
        declared = {v for v in vars(_abi).values() if isinstance(v, type) and issubclass(v, ctypes.Structure)}
        self.assertEqual(declared, set(STRUCTS.values()), "a struct of _abi.py this test does not compare")
        self.assertEqual(set(self.c["struct"]), set(STRUCTS), "header_layout.c and STRUCTS list other structs")
        protos = {v for k, v in vars(_abi).items() if k.endswith("_FN")}
        self.assertEqual(protos, set(CALLBACKS.values()), "a callback type of _abi.py this test does not compare")

    def test_struct_layouts(self):
        bad = []
        for cname, cls in STRUCTS.items():
            if self.c["struct"][cname] != ctypes.sizeof(cls):
                bad.append("%s: %d bytes in C, %d in ctypes" % (cname, self.c["struct"][cname], ctypes.sizeof(cls)))
            c_fields = self.c["field"][cname]
            py_fields = [f[0] for f in cls._fields_]
            if [f[0] for f in c_fields] != py_fields:
                bad.append("%s: fields %s in C, %s in ctypes" % (cname, [f[0] for f in c_fields], py_fields))
                continue
            for name, off, size in c_fields:
                d = getattr(cls, name)
                if (d.offset, d.size) != (off, size):
                    bad.append("%s.%s: offset %d size %d in C, offset %d size %d in ctypes"
                               % (cname, name, off, size, d.offset, d.size))
        self.assertEqual(bad, [], "\n".join(bad))

    def test_header_layout_lists_every_field(self):
        fields = header_fields()
        for cname in STRUCTS:
            self.assertEqual([f[0] for f in self.c["field"][cname]], fields[cname],
                             "%s: header_layout.c must list every field include/ckpz.h declares" % cname)

    def test_error_codes(self):
        py = {"CKPZ_" + k: v for k, v in vars(_abi).items() if k == "OK" or k.startswith("ERR_")}
        self.assertEqual(py, self.c["error"], "_abi.py's error codes and include/ckpz.h's CKPZ_ERROR_LIST differ")
        for name, code in self.c["error"].items():  # the library knows each one by name
            self.assertNotIn(b"unknown", (_lib.error_name(code) or b"unknown").lower(), name)

    def test_constants(self):
        py = {k: v for k, v in vars(_abi).items()
              if k.isupper() and isinstance(v, int) and not isinstance(v, bool)
              and k != "OK" and not k.startswith("ERR_") and k not in NOT_IN_HEADER}
        self.assertEqual({"CKPZ_" + k: v for k, v in py.items()}, self.c["const"],
                         "_abi.py's constants and include/ckpz.h's (as header_layout.c prints them) differ")

    def test_enums_are_ints(self):
        for e in ENUMS:
            self.assertEqual(self.c["enum"][e], ctypes.sizeof(ctypes.c_int), e)

    def test_function_signatures(self):
        sigs = header_signatures()
        funcs = {f.__name__: f for f in vars(_lib).values() if isinstance(f, _lib.lib._FuncPtr) and f.__name__}
        self.assertIn("ckpz_archive_read", funcs)  # the scan finds the declarations
        checked = [(name, f.restype, f.argtypes) for name, f in funcs.items()]
        checked += [(name, p._restype_, p._argtypes_) for name, p in CALLBACKS.items()]
        # the library's own callbacks, cast to the callback types the package hands them as
        for name, f in (("ckpz_fd_read", _lib.FD_READ), ("ckpz_fd_write", _lib.FD_WRITE),
                        ("ckpz_fd_pread", _lib.FD_PREAD), ("ckpz_zip_source_read", _lib.ZIP_SOURCE_READ)):
            checked.append((name, type(f)._restype_, type(f)._argtypes_))
        bad = []
        for name, restype, argtypes in checked:
            if name not in sigs:
                bad.append("%s: not in include/ckpz.h" % name)
                continue
            want_ret, want_args = sigs[name]
            have = [ctypes_kind(restype)] + [ctypes_kind(a) for a in argtypes]
            want = [want_ret] + want_args
            if len(have) != len(want):
                bad.append("%s: %d arguments in the header, %d declared" % (name, len(want) - 1, len(have) - 1))
                continue
            for k, ((hk, ht), (wk, wt)) in enumerate(zip(have, want)):
                what = "result" if k == 0 else "argument %d" % k
                if hk != wk or (hk == "scalar" and not same_scalar(ht, wt)):
                    bad.append("%s %s: %s %s in the header, %s %s declared" % (name, what, wk, wt, hk, ht))
        self.assertEqual(bad, [], "\n".join(bad))


if __name__ == "__main__":
    unittest.main()
