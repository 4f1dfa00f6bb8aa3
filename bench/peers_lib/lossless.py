"""The lossless codecs, one adapter each, used as their documentation says is best for
tensors. An adapter: name; threaded (False: one thread only); prepare(path, data, segs)
once per file (element type, a sibling-trained choice); compress(data, threads) ->
blob (data: a copy made for the call, bench/peers_lib/worker.py); decompress(blob,
threads) -> bytes-like; size(blob) -> bytes it takes.

  ckpz -L          the package's in-memory calls ckpz.compress / ckpz.decompress (one
                   library call each way on a context the package keeps), each into a
                   new output buffer, as every adapter here (`ckpz -b` reuses its buffers):
                   compression's is the library's own (not copied), decompression's comes
                   from the package's allocator (what ckpz.load restores into)
  zstd -L          zstandard (python-zstandard), threads= for more than one thread
  blosc2 F+C L     python-blosc2's compress2: typesize = the file's main element size,
                   shuffle or bitshuffle, zstd or lz4 (the Blosc2 docs' advice for
                   floating point: typesize and a shuffle filter), nthreads=
  h5 bitshuffle+C  hdf5plugin's Bitshuffle filter (lz4 or zstd) through h5py, each tensor a
                   chunked dataset of its element type, in an in-memory HDF5 file
  zipnn            ZipNN(input_format="byte", bytearray_dtype=the file's main dtype,
                   method AUTO, threads=): how its file tools compress a checkpoint
  openzl           OpenZL 0.3 per tensor with the graph of its safetensors profile
                   (bf16/f32: interpret as numbers, float deconstruct, sign+fraction
                   stored, exponent FSE; f16: bytes split, FSE each), header and gaps zstd
  openzl le-uN     OpenZL's numeric profile of the file's main element width (zli's
                   le-u16 / le-u32: interpret as little-endian numbers, FieldLZ)
  openzl trained   per tensor, the best of a set of OpenZL graphs chosen on the same
                   tensor of a sibling checkpoint (--train-step), never on the measured
                   file: OpenZL's trainer (zli train) is not in its PyPI package, so the
                   benchmark does the choosing; unknown names take their dtype's most
                   chosen graph
"""

import numpy as np

from . import layout


class Ckpz:
    threaded = True
    policy = None  # CkpzLossy's

    def __init__(self, level):
        import ckpz
        self.ckpz, self.level = ckpz, level
        self.name = "ckpz -%d" % level

    def prepare(self, path, data, segs):
        pass

    def compress(self, data, threads):
        return self.ckpz.compress(data, level=self.level, threads=threads, policy=self.policy)

    def decompress(self, blob, threads):
        return self.ckpz.decompress(blob, threads=threads)


class Zstd:
    threaded = True

    def __init__(self, level):
        import zstandard
        self.z, self.level, self.name = zstandard, level, "zstd -%d" % level

    def prepare(self, path, data, segs):
        pass

    def compress(self, data, threads):
        return self.z.ZstdCompressor(level=self.level, threads=threads if threads > 1 else 0).compress(data)

    def decompress(self, blob, threads):
        return self.z.ZstdDecompressor().decompress(blob)


class Blosc2:
    threaded = True

    def __init__(self, filt, codec, level):
        import blosc2
        self.b = blosc2
        self.filt = {"shuffle": blosc2.Filter.SHUFFLE, "bitshuffle": blosc2.Filter.BITSHUFFLE}[filt]
        self.codec = {"zstd": blosc2.Codec.ZSTD, "lz4": blosc2.Codec.LZ4}[codec]
        self.level = level
        self.name = "blosc2 %s+%s %d" % (filt, codec, level)

    def prepare(self, path, data, segs):
        self.typesize = layout.SIZES[layout.main_dtype(segs)]

    def compress(self, data, threads):
        return self.b.compress2(data, typesize=self.typesize, clevel=self.level, filters=[self.filt],
                                codec=self.codec, nthreads=threads)

    def decompress(self, blob, threads):
        return self.b.decompress2(blob, nthreads=threads)


class H5Bitshuffle:
    threaded = False

    def __init__(self, codec):
        import h5py
        import hdf5plugin
        self.h5py, self.filt = h5py, hdf5plugin.Bitshuffle(cname=codec)
        self.name = "h5 bitshuffle+%s" % codec

    def prepare(self, path, data, segs):
        self.segs = segs

    def compress(self, data, threads):
        import io
        bio = io.BytesIO()
        with self.h5py.File(bio, "w") as f:
            for i, s in enumerate(self.segs):
                width = layout.SIZES[s.dtype] if s.dtype else 1
                arr = np.frombuffer(data, layout.UINT[width], s.size // width, s.start)
                chunks = (min(len(arr), (1 << 20) // width),) if len(arr) else None
                f.create_dataset(str(i), data=arr, chunks=chunks, **(self.filt if len(arr) else {}))
        return bio.getvalue()

    def decompress(self, blob, threads):
        import io
        parts = []
        with self.h5py.File(io.BytesIO(blob), "r") as f:
            for i in range(len(f)):
                parts.append(f[str(i)][()].tobytes())
        return b"".join(parts)


class ZipNN:
    threaded = True
    # zipnn 0.5.4's compress reorders the bits of its input in place, even of a bytes
    # object: the worker hands every compress a copy made outside the timed region
    DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}

    def __init__(self):
        from zipnn import ZipNN as Z
        self.Z, self.name = Z, "zipnn"

    def prepare(self, path, data, segs):
        self.dtype = self.DTYPES.get(layout.main_dtype(segs), "float32")

    def _z(self, threads):
        return self.Z(input_format="byte", bytearray_dtype=self.dtype, threads=threads)

    def compress(self, data, threads):
        return self._z(threads).compress(data)

    def decompress(self, blob, threads):
        return self._z(threads).decompress(blob)


def _zl():
    import openzl.ext as zl
    from openzl.ext import graphs, nodes
    return zl, graphs, nodes


# OpenZL graphs by name: (input type, builder). The first of each dtype is the default of
# OpenZL's safetensors profile; the others are the trained choice's candidates.
def _graphs():
    zl, G, N = _zl()
    def deco(node, a, b):
        return lambda c: node()(c, a(c), b(c))
    def tsplit(g):
        return lambda c: N.TransposeSplit()(c, g(c))
    store, fse, huf, comp = (lambda c: G.Store()(c)), (lambda c: G.Fse()(c)), (lambda c: G.Huffman()(c)), (lambda c: G.Compress()(c))
    num, struc = zl.Type.Numeric, zl.Type.Struct
    fieldlz = lambda c: G.FieldLz()(c)  # noqa: E731 - what the le-uN profiles end in
    return {
        "BF16": [("store+fse", num, deco(N.BFloat16Deconstruct, store, fse)),
                 ("fse+fse", num, deco(N.BFloat16Deconstruct, fse, fse)),
                 ("huf+huf", num, deco(N.BFloat16Deconstruct, huf, huf)),
                 ("comp+fse", num, deco(N.BFloat16Deconstruct, comp, fse)),
                 ("bytes-fse", struc, tsplit(fse)),
                 ("fieldlz", num, fieldlz)],
        "F16": [("bytes-fse", struc, tsplit(fse)),
                ("bytes-huf", struc, tsplit(huf)),
                ("store+fse", num, deco(N.Float16Deconstruct, store, fse)),
                ("fse+fse", num, deco(N.Float16Deconstruct, fse, fse)),
                ("comp", struc, tsplit(comp)),
                ("fieldlz", num, fieldlz)],
        "F32": [("store+fse", num, deco(N.Float32Deconstruct, store, fse)),
                ("fieldlz", num, fieldlz),
                ("fse+fse", num, deco(N.Float32Deconstruct, fse, fse)),
                ("bytes+fse", num, deco(N.Float32Deconstruct, tsplit(fse), fse)),
                ("bytes+huf", num, deco(N.Float32Deconstruct, tsplit(huf), huf)),
                ("comp+huf", num, deco(N.Float32Deconstruct, comp, huf)),
                ("bytes-fse", struc, tsplit(fse))],
        None: [("zstd", zl.Type.Serial, lambda c: G.Zstd()(c))],
    }


class OpenZL:
    threaded = False

    def __init__(self, trained_on=None):
        self.zl = _zl()[0]
        self.graphs = _graphs()
        self.ctxs = {}
        self.trained_on = trained_on  # path pattern: the sibling checkpoint, or None
        self.name = "openzl trained" if trained_on else "openzl"
        self.dctx = self.zl.DCtx()

    def _cctx(self, dtype, gname):
        key = (dtype, gname)
        if key not in self.ctxs:
            zl = self.zl
            typ, build = next((t, b) for n, t, b in self.graphs[dtype] if n == gname)
            c = zl.Compressor()
            c.select_starting_graph(build(c))
            cc = zl.CCtx()
            cc.set_parameter(zl.CParam.StickyParameters, 1)  # kept from one call to the next
            cc.ref_compressor(c)
            cc.set_parameter(zl.CParam.FormatVersion, zl.MAX_FORMAT_VERSION)
            self.ctxs[key] = (c, cc, typ)
        return self.ctxs[key]

    def _input(self, data, s, typ):
        zl = self.zl
        width = layout.SIZES[s.dtype] if s.dtype else 1
        if typ == zl.Type.Numeric:
            return zl.Input(typ, np.frombuffer(data, layout.UINT[width], s.size // width, s.start))
        if typ == zl.Type.Struct:
            # the binding takes a 2-D array's first dimension as the struct's width (and the
            # memory as it lies): (width, n) over the same bytes, n structs of width bytes
            return zl.Input(typ, np.frombuffer(data, np.uint8, s.size, s.start).reshape(width, -1))
        return zl.Input(typ, np.frombuffer(data, np.uint8, s.size, s.start))

    def _one(self, data, s, gname):
        dtype = s.dtype if s.dtype in self.graphs and s.size else None
        if dtype is None:
            gname = "zstd"
        _, cc, typ = self._cctx(dtype, gname)
        return cc.compress([self._input(data, s, typ)])

    def prepare(self, path, data, segs):
        self.segs = segs
        self.choice = {}
        if not self.trained_on:
            return
        import os
        tpath = os.path.join(os.path.dirname(path), self.trained_on(os.path.basename(path)))
        tdata = open(tpath, "rb").read()
        votes = {}
        for s in layout.segments(tpath, tdata):
            if s.dtype not in self.graphs or not s.dtype or not s.size:
                continue
            sizes = {}
            for gname, _, _ in self.graphs[s.dtype]:
                try:
                    sizes[gname] = len(self._one(tdata, s, gname))
                except RuntimeError:
                    pass
            best = min(sizes, key=sizes.get)
            self.choice[s.name] = best
            votes.setdefault(s.dtype, {}).setdefault(best, 0)
            votes[s.dtype][best] += s.size
        self.fallback = {dt: max(v, key=v.get) for dt, v in votes.items()}

    def compress(self, data, threads):
        out = []
        for s in self.segs:
            default = self.graphs[s.dtype][0][0] if s.dtype in self.graphs and s.dtype else "zstd"
            gname = self.choice.get(s.name) or getattr(self, "fallback", {}).get(s.dtype) or default
            out.append(self._one(data, s, gname))
        return out

    def decompress(self, blob, threads):
        return b"".join(self.dctx.decompress(f)[0].content.as_bytes() for f in blob)


class OpenZLNumeric:
    """OpenZL's numeric profile for the file's main element width (zli's le-u16 / le-u32:
    the whole file as little-endian numbers, FieldLZ), untrained."""
    threaded = False
    name = "openzl le-uN"

    def __init__(self):
        self.zl, self.graphs, self.nodes = _zl()
        self.ctxs = {}
        self.dctx = self.zl.DCtx()

    def prepare(self, path, data, segs):
        width = layout.SIZES[layout.main_dtype(segs)]
        if width not in self.ctxs:
            zl = self.zl
            c = zl.Compressor()
            c.select_starting_graph(self.nodes.ConvertSerialToNumLE(width)(c, self.graphs.FieldLz()(c)))
            cc = zl.CCtx()
            cc.set_parameter(zl.CParam.StickyParameters, 1)
            cc.ref_compressor(c)
            cc.set_parameter(zl.CParam.FormatVersion, zl.MAX_FORMAT_VERSION)
            self.ctxs[width] = (c, cc)
        self.cctx, self.width = self.ctxs[width][1], width

    def compress(self, data, threads):
        n = len(data) // self.width * self.width  # a tail of fewer bytes than a number: zstd
        head = self.cctx.compress([self.zl.Input(self.zl.Type.Serial, np.frombuffer(data, np.uint8, n))])
        import zstandard
        return [head, zstandard.ZstdCompressor(level=3).compress(data[n:])]

    def decompress(self, blob, threads):
        import zstandard
        return self.dctx.decompress(blob[0])[0].content.as_bytes() + zstandard.ZstdDecompressor().decompress(blob[1])


def size(blob):
    """Bytes a compressed result takes (per-tensor frames: theirs plus a 4-byte length each)."""
    if isinstance(blob, list):
        return sum(len(b) + 4 for b in blob)
    return len(blob)


def sibling(train_step, step):
    """Maps a measured file's name to its training sibling's: step300_x -> step280_x."""
    return lambda base: base.replace("step%d_" % step, "step%d_" % train_step, 1)


def applies(tool, path, train_step, step):
    """Whether the setting named tool runs on path: a trained OpenZL needs a sibling to train
    on that is not the measured file itself (the corpus's extra_* files have none)."""
    if tool != "openzl trained":
        return True
    import os
    base = os.path.basename(path)
    other = sibling(train_step, step)(base)
    return other != base and os.path.exists(os.path.join(os.path.dirname(path), other))


def families(train_step=None, step=None):
    """Each family's settings (constructors), in the table's order; one worker process
    per family, so that no library shares a process with another's."""
    fam = {
        "ckpz": [lambda: Ckpz(1), lambda: Ckpz(3)],
        "zstd": [lambda: Zstd(1), lambda: Zstd(3), lambda: Zstd(19)],
        "blosc2": [lambda: Blosc2("shuffle", "zstd", 1), lambda: Blosc2("bitshuffle", "zstd", 5),
                   lambda: Blosc2("shuffle", "lz4", 5)],
        "h5": [lambda: H5Bitshuffle("zstd"), lambda: H5Bitshuffle("lz4")],
        "zipnn": [lambda: ZipNN()],
        "openzl": [lambda: OpenZL(), lambda: OpenZLNumeric()],
    }
    if train_step is not None:
        fam["openzl"].append(lambda: OpenZL(sibling(train_step, step)))
    return fam


SLOW = {"zstd -19"}  # timed on a sample (the ratio is the whole file's)
