"""The types and constants of include/ckpz.h (and of ckpz_experimental.h, for the zip
source and the tuner), as ctypes declares them.

Each struct here has the header's exact layout (field names, types and order), and each
constant the header's value: the library reads and writes these structs in place, so a
field out of step would be read as garbage, not refused. tests/python/test_bindings.py
compares every struct's size and field offsets, and every constant and error code, with
what a C compiler makes of the header (tests/python/header_layout.c), so the two cannot
drift apart silently. Nothing here needs the library loaded; _lib declares its functions
over these types and makes every name here available as _lib.NAME. Not public API.
"""

import ctypes

MAGIC = b"\x89CKPZ\r\n\x1a"  # first 8 bytes of every .ckpz file (doc/format.md)
MIN_CHUNK_COST = 48  # bytes every chunk costs at least in a .ckpz file: frame header + seek record

LEVEL_MIN, LEVEL_MAX, LEVEL_DEFAULT = 1, 9, 3
LEVEL_STORE = 0  # every chunk stored as it is (CKPZ_LEVEL_STORE, the CLI's -0)
SIZE_UNKNOWN = (1 << 64) - 1

# ckpz_error codes (fixed numbers; new ones are only appended)
OK = 0
ERR_PARAM = 1
ERR_NOMEM = 2
ERR_READ = 3
ERR_WRITE = 4
ERR_NOT_CKPZ = 5
ERR_VERSION = 6
ERR_TRUNCATED = 7
ERR_CHECKSUM = 8
ERR_CORRUPT = 9
ERR_LIMIT = 10
ERR_NOT_FOUND = 11
ERR_INPUT = 12
ERR_ABORTED = 13
ERR_INTERNAL = 14
ERR_BASE = 15

DTYPE_NONE = 0  # CKPZ_DTYPE_NONE: opaque bytes
DTYPE_BF16 = 1  # CKPZ_DTYPE_BF16
DTYPE_F16 = 2  # CKPZ_DTYPE_F16
DTYPE_F32 = 3  # CKPZ_DTYPE_F32
DTYPE_U8 = 11  # CKPZ_DTYPE_U8
GRAD_DENSE = 0  # CKPZ_GRAD_DENSE: ckpz_grad_params.kind
GRAD_TOPK = 1  # CKPZ_GRAD_TOPK
INPUT_SAFETENSORS = 2  # CKPZ_INPUT_SAFETENSORS
INPUT_TORCH = 4  # CKPZ_INPUT_TORCH: a torch.save zip archive

PUBLISH_REPLACE = 1  # CKPZ_PUBLISH_*: ckpz_publish_open and _commit flags
PUBLISH_DIRECTORY = 2
PUBLISH_DURABLE = 4
PUBLISH_ANONYMOUS = 8

BASE_NAME_MAX = 4096  # CKPZ_BASE_NAME_MAX
BASE_PROBE = 32 + 12 + 20 + BASE_NAME_MAX  # CKPZ_BASE_PROBE: bytes ckpz_base_info_read may need

# ---- types ---------------------------------------------------------------------------

c_ptrdiff = ctypes.c_ssize_t
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
READ_FN = ctypes.CFUNCTYPE(c_ptrdiff, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
WRITE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
PREAD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64)


class Sized:
    """Mixed into the structs the library fills, which start with their size (ckpz.h):
    set to the size declared here, so that every instance carries it as a C caller's does.
    Not for arrays of them (ctypes makes their elements without __init__)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(self)


class Params(ctypes.Structure):
    """struct ckpz_params."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("level", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("chunk_size", ctypes.c_size_t),
        ("format", ctypes.c_int),  # ckpz_input_format
        ("raw_dtype", ctypes.c_int),  # ckpz_dtype
        ("mem_limit", ctypes.c_size_t),
        ("progress", PROGRESS_FN),
        ("progress_opaque", ctypes.c_void_p),
        ("base", ctypes.c_void_p),
        ("base_size", ctypes.c_size_t),
        ("base_name", ctypes.c_char_p),
        ("base_depth", ctypes.c_uint32),
        ("policy", ctypes.c_char_p),
        ("max_mae", ctypes.c_double),
        ("patch", ctypes.c_void_p),  # int (*)(void *, const void *, size_t, uint64_t); unused here
        ("patch_opaque", ctypes.c_void_p),
        ("raw_ndim", ctypes.c_uint32),
        ("raw_shape", ctypes.POINTER(ctypes.c_uint64)),  # raw input's shape; unused here
        ("codec", ctypes.c_int),  # ckpz_codec; 0 = auto
    ]


class Fd(ctypes.Structure):
    """struct ckpz_fd."""

    _fields_ = [("fd", ctypes.c_int), ("error", ctypes.c_int), ("bytes", ctypes.c_uint64)]


class Span(ctypes.Structure):
    """struct ckpz_span."""

    _fields_ = [("offset", ctypes.c_uint64), ("length", ctypes.c_uint64), ("dst", ctypes.c_void_p)]


class ZipMember(ctypes.Structure):
    """struct ckpz_zip_member."""

    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("size", ctypes.c_uint64)]


class ZipOptions(ctypes.Structure):
    """struct ckpz_zip_options."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("alignment", ctypes.c_uint32),
        ("crc32", ctypes.c_int),
        ("id_name", ctypes.c_char_p),
        ("id_names_hash", ctypes.c_uint64),
    ]


class Stats(Sized, ctypes.Structure):
    """struct ckpz_stats."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("original_bytes", ctypes.c_uint64),
        ("compressed_bytes", ctypes.c_uint64),
        ("tensor_bytes", ctypes.c_uint64),
        ("tensors", ctypes.c_uint64),
        ("chunks", ctypes.c_uint64),
        ("format", ctypes.c_int),
    ]


class EntryStruct(Sized, ctypes.Structure):
    """struct ckpz_entry."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
        ("offset", ctypes.c_uint64),
        ("length", ctypes.c_uint64),
        ("compressed", ctypes.c_uint64),
        ("chunks", ctypes.c_uint64),
        ("based", ctypes.c_int),
        ("base_offset", ctypes.c_uint64),
        ("lossy", ctypes.c_int),
        ("lossy_mode", ctypes.c_char_p),
        ("lossy_bound", ctypes.c_double),
        ("abs_bound", ctypes.c_double),
        ("mae", ctypes.c_double),
        ("max_error", ctypes.c_double),
        ("rmse", ctypes.c_double),
        ("psnr", ctypes.c_double),
        ("exceptions", ctypes.c_uint64),
        ("changed", ctypes.c_uint64),
        ("frozen", ctypes.c_uint64),
        ("role", ctypes.c_char_p),
        ("role_why", ctypes.c_char_p),
        ("beta2", ctypes.c_double),
        ("beta2_from", ctypes.c_char_p),
        ("lr", ctypes.c_double),
        ("lr_from", ctypes.c_char_p),
    ]


class ArchiveInfo(Sized, ctypes.Structure):
    """struct ckpz_archive_info."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("format_version", ctypes.c_uint),
        ("format", ctypes.c_int),
        ("original_size", ctypes.c_uint64),
        ("compressed_size", ctypes.c_uint64),
        ("chunk_size", ctypes.c_uint32),
        ("content_checksum", ctypes.c_uint32),
        ("entries", ctypes.c_uint64),
        ("chunks", ctypes.c_uint64),
        ("lossy", ctypes.c_int),
    ]


class BaseInfo(Sized, ctypes.Structure):
    """struct ckpz_base_info."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("needed", ctypes.c_int),
        ("size", ctypes.c_uint64),
        ("checksum", ctypes.c_uint32),
        ("depth", ctypes.c_uint32),
        ("name", ctypes.c_char * (BASE_NAME_MAX + 1)),
    ]


class Source(ctypes.Structure):
    """struct ckpz_source."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("read", READ_FN),
        ("pread", PREAD_FN),
        ("opaque", ctypes.c_void_p),
        ("size", ctypes.c_uint64),
        ("progress", PROGRESS_FN),
        ("progress_opaque", ctypes.c_void_p),
    ]


class TuneResult(Sized, ctypes.Structure):
    """struct ckpz_tune_result."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("level", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("policy", ctypes.c_char * 320),
        ("save_seconds", ctypes.c_double),
        ("uncompressed_seconds", ctypes.c_double),
        ("measure_seconds", ctypes.c_double),
    ]


class GradParams(Sized, ctypes.Structure):
    """struct ckpz_grad_params (ckpz_experimental.h)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("bits", ctypes.c_uint),
        ("block", ctypes.c_uint32),
        ("stochastic", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("kind", ctypes.c_uint),  # CKPZ_GRAD_DENSE, _TOPK, _THRESHOLD
        ("density", ctypes.c_double),
        ("threshold", ctypes.c_float),
        ("entropy", ctypes.c_uint),  # 1: entropy-code a dense packet's codes when smaller
    ]


class GradInfo(Sized, ctypes.Structure):
    """struct ckpz_grad_info (ckpz_experimental.h)."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("count", ctypes.c_uint64),
        ("dtype", ctypes.c_int),  # ckpz_dtype
        ("bits", ctypes.c_uint),
        ("block", ctypes.c_uint32),
        ("stochastic", ctypes.c_int),
        ("kind", ctypes.c_uint),
        ("nnz", ctypes.c_uint64),
    ]


class StTensor(ctypes.Structure):
    """struct ckpz_st_tensor (ckpz_safetensors_header)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),  # ckpz_dtype
        ("ndim", ctypes.c_uint32),
        ("shape", ctypes.c_void_p),  # const uint64_t *, set as an address
        ("dtype_name", ctypes.c_char_p),
        ("elem_size", ctypes.c_uint32),
    ]


class StMeta(ctypes.Structure):
    """struct ckpz_st_meta (ckpz_safetensors_header)."""

    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]
