"""Tests of bench/metrics.py, the one definition of ratio, savings, speed, MAE, max error
and PSNR that bench/run reports, against values computed by hand.

    /usr/bin/python3 tests/python/test_metrics.py -v

Needs NumPy (Debian python3-numpy); no ckpz build.
"""
import math
import os
import sys
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(_HERE, "..", "..", "bench")))

import numpy as np  # noqa: E402

import metrics  # noqa: E402


class SizeTest(unittest.TestCase):
    def test_ratio_and_savings(self):
        self.assertEqual(metrics.ratio(100, 40), 2.5)
        self.assertAlmostEqual(metrics.savings(100, 40), 0.6)
        self.assertEqual(metrics.ratio(100, 100), 1.0)
        self.assertEqual(metrics.savings(100, 100), 0.0)
        # expansion: ratio < 1, savings negative
        self.assertAlmostEqual(metrics.ratio(100, 125), 0.8)
        self.assertAlmostEqual(metrics.savings(100, 125), -0.25)
        # FP32 -> BF16 cast alone: half the bytes
        self.assertEqual(metrics.ratio(4 * 1000, 2 * 1000), 2.0)
        self.assertEqual(metrics.savings(4 * 1000, 2 * 1000), 0.5)

    def test_ratio_savings_agree(self):
        for o, c in ((1000, 1), (1000, 999), (7, 3)):
            self.assertAlmostEqual(metrics.savings(o, c), 1 - 1 / metrics.ratio(o, c))

    def test_aggregate_is_sum_not_mean(self):
        # per-file ratios 2 and 4 (mean 3); together 200 / 75
        self.assertAlmostEqual(metrics.aggregate_ratio([(100, 50), (100, 25)]), 200 / 75)

    def test_bad_sizes(self):
        with self.assertRaises(ValueError):
            metrics.ratio(100, 0)
        with self.assertRaises(ValueError):
            metrics.savings(0, 10)


class SpeedTest(unittest.TestCase):
    def test_mbps(self):
        self.assertEqual(metrics.mbps(2_000_000, 0.5), 4.0)
        with self.assertRaises(ValueError):
            metrics.mbps(1, 0)

    def test_spread(self):
        self.assertEqual(metrics.spread([3.0, 1.0, 2.0]), (2.0, 1.0, 3.0))
        self.assertEqual(metrics.spread([4, 1, 2, 3]), (2.5, 1, 4))
        with self.assertRaises(ValueError):
            metrics.spread([])


class ErrorTest(unittest.TestCase):
    def check(self, x, y, mae, max_abs, psnr):
        e = metrics.error_stats(np.array(x, dtype=np.float64), np.array(y, dtype=np.float64))
        for key, want in (("mae", mae), ("max_abs", max_abs), ("psnr", psnr)):
            got = e[key]
            if math.isinf(want):
                self.assertEqual(got, want, key)
            else:
                self.assertAlmostEqual(got, want, places=9, msg=key)
        return e

    def test_hand_computed(self):
        # d = [0, 0, 0, -2]: MAE 0.5, max 2, MSE 1, range 3 -> 10 log10(9 / 1)
        self.check([0, 1, 2, 3], [0, 1, 2, 5], 0.5, 2.0, 10 * math.log10(9.0))
        # d = [-.5, 0, .5, 0]: MAE .25, max .5, MSE .125, range 3 -> 10 log10(72)
        self.check([1, 2, 3, 4], [1.5, 2, 2.5, 4], 0.25, 0.5, 18.573324964312686)

    def test_psnr_uses_range_of_original(self):
        # range 10 - (-10) = 20, one error of 1 in 4: MSE 0.25 -> 10 log10(400 / .25)
        e = self.check([-10, 0, 5, 10], [-10, 0, 6, 10], 0.25, 1.0, 10 * math.log10(1600))
        self.assertAlmostEqual(e["psnr"], 32.04119982655925)

    def test_identical(self):
        e = self.check([0.5, -3, 7], [0.5, -3, 7], 0.0, 0.0, math.inf)
        self.assertEqual(e["mse"], 0.0)

    def test_constant(self):
        self.check([2, 2, 2], [2, 2, 2], 0.0, 0.0, math.inf)
        # range 0 and an error: PSNR -inf
        self.check([2, 2, 2], [2, 2, 3], 1 / 3, 1.0, -math.inf)

    def test_nan_policy(self):
        nan, inf = math.nan, math.inf
        # NaN where both are NaN counts as exact
        self.check([nan, 1, 2], [nan, 1, 2], 0.0, 0.0, math.inf)
        # NaN vs a number: infinite error
        self.check([nan, 1, 2], [0, 1, 2], inf, inf, -math.inf)
        self.check([0, 1, 2], [nan, 1, 2], inf, inf, -math.inf)
        # same infinity: exact; range over the finite values only (0..1)
        # d = [0, 0, -.5]: MAE 1/6, max .5, MSE 1/12 -> 10 log10(12)
        self.check([inf, 0, 1], [inf, 0, 1.5], 1 / 6, 0.5, 10 * math.log10(12))
        # +inf vs -inf, or inf vs a number: infinite error
        self.check([inf, 0, 1], [-inf, 0, 1], inf, inf, -math.inf)
        self.check([inf, 0, 1], [1e30, 0, 1], inf, inf, -math.inf)
        # metrics never come out NaN
        e = metrics.error_stats([nan, nan], [nan, nan])
        self.assertFalse(any(math.isnan(e[k]) for k in ("mae", "max_abs", "psnr")))

    def test_float32_and_int_inputs(self):
        x = np.array([1, 2, 3, 4], dtype=np.float32)
        y = np.array([1, 2, 3, 5], dtype=np.int32)
        e = metrics.error_stats(x, y)
        self.assertEqual(e["mae"], 0.25)
        self.assertEqual(e["max_abs"], 1.0)

    def test_bad_shapes(self):
        with self.assertRaises(ValueError):
            metrics.error_stats([1, 2], [1, 2, 3])
        with self.assertRaises(ValueError):
            metrics.error_stats([], [])

    def test_combine_equals_whole(self):
        rng = np.random.RandomState(7)
        x = rng.standard_normal(1000)
        y = x + rng.uniform(-1e-3, 1e-3, 1000)
        whole = metrics.error_stats(x, y)
        parts = [(metrics.error_stats(x[a:b], y[a:b]), x[a:b].min(), x[a:b].max())
                 for a, b in ((0, 100), (100, 650), (650, 1000))]
        comb = metrics.combine_errors(parts)
        for k in ("mae", "max_abs", "mse", "psnr"):
            self.assertAlmostEqual(comb[k], whole[k], places=9, msg=k)
        self.assertEqual(comb["n"], 1000)

    def test_psnr_from_edges(self):
        self.assertEqual(metrics.psnr_from(3.0, 0.0), math.inf)
        self.assertEqual(metrics.psnr_from(0.0, 1.0), -math.inf)
        self.assertEqual(metrics.psnr_from(3.0, math.inf), -math.inf)
        self.assertAlmostEqual(metrics.psnr_from(255.0, 1.0), 48.130803608679102)


class Bf16CastTest(unittest.TestCase):
    """The BF16 reference cast of bench/run (round to nearest, ties to even) and its error."""

    def setUp(self):
        import importlib.machinery
        import importlib.util
        path = os.path.normpath(os.path.join(_HERE, "..", "..", "bench", "run"))
        loader = importlib.machinery.SourceFileLoader("bench_run", path)
        spec = importlib.util.spec_from_loader("bench_run", loader)
        self.run = importlib.util.module_from_spec(spec)
        loader.exec_module(self.run)

    def test_round_to_nearest_even(self):
        u = 2.0 ** -7   # BF16 ulp at 1.0
        x = np.array([1.0, 1 + u / 2, 1 + 3 * u / 2, 1 + u / 2 + 2 ** -20, -2.5, 0.0,
                      math.inf], dtype=np.float32)
        y = self.run.bf16_bits_to_f32(self.run.f32_to_bf16_bits(x))
        want = np.array([1.0, 1.0, 1 + 2 * u, 1 + u, -2.5, 0.0, math.inf], dtype=np.float32)
        np.testing.assert_array_equal(y, want)
        nan = self.run.bf16_bits_to_f32(self.run.f32_to_bf16_bits(np.array([math.nan], np.float32)))
        self.assertTrue(np.isnan(nan[0]))
        # error of the cast: d = [0, u/2, -u/2, -(u/2 - 2^-20), 0, 0, same inf]
        e = metrics.error_stats(x, y)
        self.assertAlmostEqual(e["max_abs"], u / 2)
        self.assertAlmostEqual(e["mae"], (u / 2 + u / 2 + (u / 2 - 2 ** -20)) / 7)


if __name__ == "__main__":
    unittest.main()
