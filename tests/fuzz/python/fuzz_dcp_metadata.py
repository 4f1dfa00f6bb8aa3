"""Fuzzes ckpz.dcp.Reader.read_metadata: the input is the .metadata file (a pickle) of
a DCP checkpoint directory written by ckpz.dcp.Writer (the hostile suite's template).

Findings: _common's, and a read_metadata that returns anything but DCP's Metadata.
Seeds: corpus/dcp_metadata (valid metadata and the hostile suite's: disallowed globals,
getattr tricks, BUILD on DCP's classes; make_corpus.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_T = {}


def setup(instrument=None):
    _common.setup(instrument)
    if not _T:
        import make_suite

        d = _common.workdir("dcp")
        make_suite.write_dcp_template(os.path.join(d, "ckpt"))
        _T["dir"] = os.path.join(d, "ckpt")
        _common.warm(lambda: __import__("ckpz.dcp").dcp.Reader(_T["dir"]).read_metadata())


def _check(value):
    return None if type(value).__name__ == "Metadata" else "read_metadata returned a %s" % type(value).__name__


def TestOneInput(data):
    import ckpz.dcp

    with open(os.path.join(_T["dir"], ".metadata"), "wb") as fo:
        fo.write(bytes(data))
    _common.run(lambda: ckpz.dcp.Reader(_T["dir"]).read_metadata(), _check)


if __name__ == "__main__":
    _common.main(TestOneInput, setup)
