"""bench/peers' BENCHMARKS.md section (bench/peers_lib/report.py: markdown, splice)
against records made by hand: no peer, no torch, no ckpz."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from peers_lib import report  # noqa: E402

META = [("command", "bench/peers --test"), ("date", "2026-12-04 00:00 UTC"), ("machine", "test"),
        ("load average at start", "0 0 0"), ("load average at end", "1 1 1"), ("versions", "x 1")]


def row(f, tool, ratio, dec=100.0, comp=50.0, threads=1, checked=True, err=None):
    return {"file": f, "tool": tool, "ratio": ratio, "decomp_mbs_core": dec, "comp_mbs_core": comp,
            "threads": threads, "checked": checked, "worst_err_over_bound": err}


class PeersReportTest(unittest.TestCase):
    def test_lossless_row(self):
        f = "step300_weights_bf16.safetensors"
        rows = [row(f, "ckpz -3", 1.50, dec=900, comp=700), row(f, "zipnn", 1.48, dec=2000, comp=400),
                row(f, "openzl", 1.40, dec=300, comp=600), row(f, "openzl trained", 1.52, dec=450, comp=450),
                row(f, "zipnn", 1.60, threads=2)]  # all cores: not in the one-thread table
        md = report.markdown(rows, [], META)
        line = [ln for ln in md.splitlines() if ln.startswith("| weights_bf16")][0]
        cells = [c.strip() for c in line.strip("|").split("|")]
        self.assertEqual(cells[1:4], ["1.5000x", "openzl trained (1.5200x)", "-1.32%"])
        self.assertEqual(cells[4:], ["900", "2000", "450", "700", "400", "600"])  # openzl: its fastest setting

    def test_lossy_row_counts_a_peer_over_its_bound(self):
        f = "step300_grads_f32.safetensors"
        lrows = [row(f, "ckpz rel 0.001", 7.0, err=1.0), row(f, "sz3 rel 0.001", 6.0, checked=False, err=1.00001),
                 row(f, "zfp rel 0.001", 3.5, err=0.4)]
        md = report.markdown([row(f, "ckpz -3", 1.3), row(f, "zipnn", 1.2)], lrows, META)
        line = [ln for ln in md.splitlines() if ln.startswith("| grads_f32 | rel 0.001")][0]
        self.assertIn("| 7.00x | 6.00x | 3.50x | 1.17x |", line)
        self.assertIn("1.000 (over)", line)

    def test_against_table(self):
        f = "step300_weights_bf16.safetensors"
        rows = [row(f, "ckpz -3", 1.50, dec=1300, comp=1000), row(f, "ckpz -1", 1.49, dec=1400, comp=1300),
                row(f, "zipnn", 1.48, dec=1000, comp=400), row(f, "openzl", 1.40, dec=300, comp=600),
                row(f, "openzl trained", 1.52, dec=450, comp=450),
                row(f, "ckpz -3", 1.50, dec=1200, comp=900, threads=2), row(f, "zipnn", 1.48, dec=1000, comp=500,
                                                                             threads=2)]
        md = report.markdown(rows, [], META)
        lines = [ln for ln in md.splitlines() if ln.startswith("| weights_bf16.safetensors | ")]
        one = [c.strip() for c in lines[1].strip("|").split("|")]  # lines[0]: the table above
        # decompression over ZipNN's and OpenZL's fastest decoder; compression over ZipNN's;
        # OpenZL's fastest compressor with its ratio; ckpz -1 over it and over ZipNN
        self.assertEqual(one[1:], ["1", "1.30x", "2.89x", "2.50x", "600 (1.4000x)", "**1.67x**", "1.4900x",
                                   "2.17x", "3.25x"])
        two = [c.strip() for c in lines[2].strip("|").split("|")]
        self.assertEqual(two[1:6], ["2", "**1.20x**", "–", "**1.80x**", "–"])

    def test_csv_round_trip(self):
        f = "step300_weights_bf16.safetensors"
        rows = [dict(row(f, "ckpz -3", 1.5, dec=1300.5, comp=1000.25), comp_mbs_wall=1.0, decomp_mbs_wall=2.0,
                     peak_rss_mb=3.0, added_rss_mb=4.0, bytes=100, compressed=66, runs=5, comp_spread=0.1,
                     sampled=False, lossy_values=0, kind="lossless")]
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "peers.csv")
            report.write_csv(p, rows, META + [("partial", "the files so far")])
            back, meta = report.read_csv(p)
        self.assertEqual(meta, META)  # a finished run's meta: "partial" dropped
        self.assertEqual((back[0]["ratio"], back[0]["decomp_mbs_core"], back[0]["threads"], back[0]["checked"],
                          back[0]["sampled"], back[0]["bytes"]), (1.5, 1300.5, 1, True, False, 100))
        self.assertEqual(report.markdown(back, [], meta), report.markdown(rows, [], META))

    def test_splice(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "B.md")
            with open(p, "w") as fh:
                fh.write("head\n%s\nold\n%s\ntail\n" % (report.BEGIN, report.END))
            report.splice(p, "new")
            self.assertEqual(open(p).read(), "head\n%s\nnew\n%s\ntail\n" % (report.BEGIN, report.END))
            with open(p, "w") as fh:
                fh.write("no markers\n")
            self.assertRaises(SystemExit, report.splice, p, "new")


if __name__ == "__main__":
    unittest.main()
