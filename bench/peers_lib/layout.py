"""Where a checkpoint's tensors lie: segments (offset, end, dtype, name, shape) covering
the whole file, header and gaps included (dtype None: opaque bytes).

safetensors: from its JSON header. torch.save .pt (zip, stored entries): one segment per
data/N entry; the pickle is not read (no torch here), so an entry's dtype is --pt-dtype
(F32 for the corpus's .pt, whose tensors are all FP32 but one I64 step counter, whose 8
bytes go as F32 too: harmless, every codec round-trips bytes). Anything else: one opaque
segment (main_dtype then says F32 for the codecs that need an element type).
"""

import json
import struct
import zipfile

import numpy as np

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
FLOAT = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


class Segment:
    __slots__ = ("start", "end", "dtype", "name", "shape")

    def __init__(self, start, end, dtype=None, name="", shape=()):
        self.start, self.end, self.dtype, self.name, self.shape = start, end, dtype, name, tuple(shape)

    @property
    def size(self):
        return self.end - self.start


def _fill_gaps(segs, total):
    out, pos = [], 0
    for s in sorted(segs, key=lambda s: s.start):
        if s.start > pos:
            out.append(Segment(pos, s.start))
        if s.end > s.start:
            out.append(s)
        pos = max(pos, s.end)
    if pos < total:
        out.append(Segment(pos, total))
    return out


def safetensors_segments(data):
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(bytes(data[8:8 + n]))
    base = 8 + n
    segs = []
    for name, v in header.items():
        if name == "__metadata__":
            continue
        s, e = v["data_offsets"]
        dt = v["dtype"] if v["dtype"] in SIZES else None
        if dt and (e - s) % SIZES[dt]:
            dt = None
        segs.append(Segment(base + s, base + e, dt, name, v.get("shape", ())))
    return _fill_gaps(segs, len(data))


def pt_segments(path, data, dtype):
    segs = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if info.compress_type != zipfile.ZIP_STORED or "/data/" not in info.filename:
                continue
            # the data follow the local header: its name and extra field have their own lengths
            fn_len, ex_len = struct.unpack_from("<HH", data, info.header_offset + 26)
            start = info.header_offset + 30 + fn_len + ex_len
            size = info.file_size
            dt = dtype if size % SIZES[dtype] == 0 else None
            # named without the archive's top folder, which torch.save names after the file
            # (step300_full/data/0): siblings' tensors then share names
            name = info.filename.split("/", 1)[1]
            segs.append(Segment(start, start + size, dt, name, (size // SIZES[dtype],)))
    return _fill_gaps(segs, len(data))


def segments(path, data, pt_dtype="F32"):
    if path.endswith(".safetensors"):
        return safetensors_segments(data)
    if path.endswith((".pt", ".pth")) and zipfile.is_zipfile(path):
        return pt_segments(path, data, pt_dtype)
    return [Segment(0, len(data))]


def main_dtype(segs, fallback="F32"):
    """The dtype holding the most bytes (what whole-file codecs take as element type)."""
    by = {}
    for s in segs:
        if s.dtype:
            by[s.dtype] = by.get(s.dtype, 0) + s.size
    return max(by, key=by.get) if by else fallback


def kind_of(path):
    """The corpus's kind of a file: step300_weights_bf16.safetensors -> weights_bf16.safetensors."""
    base = path.rsplit("/", 1)[-1]
    head, _, rest = base.partition("_")
    return rest if head.startswith("step") and rest else base
