"""metrics: the one definition of every figure bench/run reports.

Used by bench/run and checked by tests/python/test_metrics.py against hand-computed
values. Pure Python + NumPy (Debian's python3-numpy).

Size
  ratio(original, compressed)    = original / compressed                  (> 1 is smaller)
  savings(original, compressed)  = 1 - compressed / original              (0.25 = 25% saved)
  "original" is the number of bytes of the uncompressed input as stored: every tensor's
  element bytes (numel x dtype size) plus the container (safetensors header, torch.save
  zip/pickle), which is < 0.03% of the corpus files. For a lossy row it is the original
  file, not the cast one: casting FP32 to BF16 alone is ratio 2, savings 0.5. Several
  files together: sum of originals over sum of compressed (aggregate_ratio), never the
  mean of per-file ratios.

Speed
  mbps(nbytes, seconds) = nbytes / seconds / 1e6, always the ORIGINAL bytes, for
  compression and decompression alike; seconds are CPU seconds (user + sys) of one
  thread, so the figure is MB/s per core. spread(values) -> (median, min, max).

Error (lossy rows), x = original, y = restored, both compared in float64
  MAE      = mean |x - y|
  max err  = max |x - y|
  PSNR     = 10 log10(R^2 / MSE) dB with R = max(x) - min(x) over the finite values of x
             (the value range, as zfp and SZ report it) and MSE = mean (x - y)^2.
             MSE = 0 -> +inf (identical). R = 0 (constant x) and MSE > 0 -> -inf.
  Non-finite policy: an element where x and y are both NaN, or both the same infinity,
  counts as exact (error 0). Any other element where x or y is non-finite (NaN vs a
  number, inf vs a number, +inf vs -inf) has an infinite error: MAE = max err = inf and
  PSNR = -inf. NaN never propagates into a metric; empty arrays are an error.
"""
import math
import statistics

import numpy as np


def ratio(original, compressed):
    if original < 0 or compressed <= 0:
        raise ValueError("ratio needs original >= 0 and compressed > 0 bytes")
    return original / compressed


def savings(original, compressed):
    if original <= 0 or compressed < 0:
        raise ValueError("savings needs original > 0 and compressed >= 0 bytes")
    return 1.0 - compressed / original


def aggregate_ratio(pairs):
    """pairs: iterable of (original, compressed) bytes -> sum(original) / sum(compressed)."""
    pairs = list(pairs)
    return ratio(sum(p[0] for p in pairs), sum(p[1] for p in pairs))


def mbps(nbytes, seconds):
    if seconds <= 0:
        raise ValueError("mbps needs a positive time")
    return nbytes / seconds / 1e6


def spread(values):
    """(median, min, max) of a list of at least one number."""
    values = list(values)
    if not values:
        raise ValueError("spread of no values")
    return statistics.median(values), min(values), max(values)


def error_stats(original, restored):
    """dict(mae, max_abs, mse, psnr, n) for two arrays of the same shape (any float or
    int dtype); see the module docstring for the definitions and the NaN/inf policy."""
    x = np.asarray(original, dtype=np.float64).ravel()
    y = np.asarray(restored, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError("error_stats: shapes differ: %s vs %s" % (x.shape, y.shape))
    if x.size == 0:
        raise ValueError("error_stats: empty arrays")
    fx, fy = np.isfinite(x), np.isfinite(y)
    both = fx & fy
    nonfinite = ~both
    # exact non-finite pairs: both NaN, or the same infinity
    same = (np.isnan(x) & np.isnan(y)) | ((x == y) & np.isinf(x))
    bad = bool(np.any(nonfinite & ~same))
    finite_x = x[fx]
    rng = float(finite_x.max() - finite_x.min()) if finite_x.size else 0.0
    if bad:
        return dict(mae=math.inf, max_abs=math.inf, mse=math.inf, psnr=-math.inf, n=x.size)
    d = np.zeros(x.size, dtype=np.float64)
    d[both] = x[both] - y[both]
    ad = np.abs(d)
    mae = float(ad.mean())
    max_abs = float(ad.max())
    mse = float((d * d).mean())
    return dict(mae=mae, max_abs=max_abs, mse=mse, psnr=psnr_from(rng, mse), n=x.size)


def psnr_from(value_range, mse):
    """10 log10(R^2 / MSE) with the edge cases of the module docstring."""
    if mse == 0:
        return math.inf
    if math.isinf(mse):
        return -math.inf
    if value_range == 0:
        return -math.inf
    return 10.0 * math.log10(value_range * value_range / mse)


def psnr(original, restored):
    return error_stats(original, restored)["psnr"]


def combine_errors(parts):
    """Merge error_stats of several arrays as if they were one (n-weighted MAE and MSE,
    max of max errors); parts are (stats, min_x, max_x) with the finite range of each."""
    parts = list(parts)
    n = sum(p[0]["n"] for p in parts)
    if any(math.isinf(p[0]["mae"]) for p in parts):
        return dict(mae=math.inf, max_abs=math.inf, mse=math.inf, psnr=-math.inf, n=n)
    mae = sum(p[0]["mae"] * p[0]["n"] for p in parts) / n
    mse = sum(p[0]["mse"] * p[0]["n"] for p in parts) / n
    max_abs = max(p[0]["max_abs"] for p in parts)
    lo = min(p[1] for p in parts)
    hi = max(p[2] for p in parts)
    return dict(mae=mae, max_abs=max_abs, mse=mse, psnr=psnr_from(hi - lo, mse), n=n)
