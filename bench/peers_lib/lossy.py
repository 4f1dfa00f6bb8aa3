"""Error-bounded lossy coding at ckpz's --rel / --abs bounds, checked value by value here.

The tensors coded lossily are the ones ckpz codes so (float tensors of two or more
dimensions whose names hold none of "norm", "bias", "ln_", "exp_avg_sq"); every other byte
must come back exact. A bound "rel R" is R x (max - min) of the tensor, "abs E" is E.

  ckpz rel|abs B   libckpz in memory with the policy "* rel B" / "* abs B", level 3
  sz3 rel|abs B    pysz (SZ3): REL (value-range relative, as ckpz's --rel) or ABS mode, one
                   call per tensor of its shape; other bytes zstd -3
  zfp rel|abs B    zfpy fixed-accuracy mode, tolerance = the bound in absolute terms,
                   one call per tensor; other bytes zstd -3

check() decodes the restored bytes and reports the largest |restored - original| over
each lossy tensor's bound (<= 1 passes) and whether every other byte is exact.
"""


import numpy as np

from . import layout, lossless

SKIP = ("norm", "bias", "ln_", "exp_avg_sq")


def lossy_ok(s):
    return s.dtype in layout.FLOAT and len(s.shape) >= 2 and not any(k in s.name for k in SKIP)


def abs_bound(s, arr, mode, bound):
    if mode == "abs":
        return bound
    a = arr.astype(np.float64)
    return bound * float(a.max() - a.min()) if a.size else 0.0


def _arr(data, s):
    n = s.size // layout.SIZES[s.dtype]
    return np.frombuffer(data, layout.FLOAT[s.dtype], n, s.start).reshape(s.shape)


class CkpzLossy(lossless.Ckpz):
    """ckpz with a pointwise bound on every float tensor (policy=); lossless.Ckpz's calls otherwise."""

    def __init__(self, mode, bound):
        super().__init__(3)
        self.mode, self.bound = mode, bound
        self.name = "ckpz %s %g" % (mode, bound)
        self.policy = "* %s %r" % (mode, bound)


class PerTensor:
    """Lossy tensors by the codec, the other bytes by zstd -3; blob: list of frames."""
    threaded = False

    def __init__(self, mode, bound):
        import zstandard
        self.zc, self.zd = zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor()
        self.mode, self.bound = mode, bound

    def prepare(self, path, data, segs):
        self.segs = segs

    def compress(self, data, threads):
        out = []
        for s in self.segs:
            if lossy_ok(s):
                arr = _arr(data, s)
                out.append(self.encode(arr, abs_bound(s, arr, self.mode, self.bound)))
            else:
                out.append(self.zc.compress(data[s.start:s.end]))
        return out

    def decompress(self, blob, threads):
        parts = []
        for s, f in zip(self.segs, blob):
            if lossy_ok(s):
                parts.append(np.ascontiguousarray(self.decode(f, s), layout.FLOAT[s.dtype]).tobytes())
            else:
                parts.append(self.zd.decompress(f))
        return b"".join(parts)


class SZ3(PerTensor):
    def __init__(self, mode, bound):
        super().__init__(mode, bound)
        from pysz import sz, szConfig, szErrorBoundMode
        self.sz, self.cfg, self.modes = sz, szConfig, szErrorBoundMode
        self.name = "sz3 %s %g" % (mode, bound)

    def encode(self, arr, eb):
        cfg = self.cfg()
        if self.mode == "rel":
            cfg.errorBoundMode = self.modes.REL
            cfg.relErrorBound = self.bound
        else:
            cfg.errorBoundMode = self.modes.ABS
            cfg.absErrorBound = self.bound
        return self.sz.compress(np.ascontiguousarray(arr), cfg)[0].tobytes()

    def decode(self, frame, s):
        out, _ = self.sz.decompress(np.frombuffer(frame, np.uint8), layout.FLOAT[s.dtype], s.shape)
        return out


class Zfp(PerTensor):
    def __init__(self, mode, bound):
        super().__init__(mode, bound)
        import zfpy
        self.zfpy = zfpy
        self.name = "zfp %s %g" % (mode, bound)

    def encode(self, arr, eb):
        return self.zfpy.compress_numpy(np.ascontiguousarray(arr), tolerance=eb)

    def decode(self, frame, s):
        return self.zfpy.decompress_numpy(frame)


def check(data, restored, segs, mode, bound):
    """(worst error / bound over the lossy tensors, every other byte exact, values checked)."""
    if len(restored) != len(data):
        return float("inf"), False, 0
    worst, exact, n = 0.0, True, 0
    for s in segs:
        if lossy_ok(s):
            a = _arr(data, s)
            b = _arr(restored, s)
            eb = abs_bound(s, a, mode, bound)
            err = float(np.max(np.abs(b.astype(np.float64) - a.astype(np.float64)))) if a.size else 0.0
            if not np.isfinite(b).all() and np.isfinite(a).all():
                err = float("inf")
            worst = max(worst, err / eb if eb > 0 else (0.0 if err == 0 else float("inf")))
            n += a.size
        elif bytes(restored[s.start:s.end]) != bytes(data[s.start:s.end]):
            exact = False
    return worst, exact, n


BOUNDS = (1e-2, 1e-3, 1e-4)


def families():
    def of(cls):
        return [lambda m=m, b=b: cls(m, b) for m in ("rel", "abs") for b in BOUNDS]
    return {"ckpz-lossy": of(CkpzLossy), "sz3": of(SZ3), "zfp": of(Zfp)}
