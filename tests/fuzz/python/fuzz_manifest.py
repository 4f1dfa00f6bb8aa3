"""Fuzzes ckpz.distributed.load through its manifest: the input is manifest.json of a
checkpoint directory whose two shard files are fixed (the world-2 template of the
hostile suite: rank 0's and rank 1's "w", the replicated "r", the sharded "s", "step").
No process group: the load runs as rank 0 of a world of one (ckpz.distributed acts for
a world of one without torch.distributed initialised).

Findings: _common's, and a load that returns anything but what the shards hold for
rank 0 (the manifest cannot change the shards, so any other value is a silent wrong
tensor or a lying structure). Seeds: corpus/manifest (make_corpus.py).
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

        d = _common.workdir("manifest")
        make_suite.write_dist_template(os.path.join(d, "ckpt"))
        _T["dir"] = os.path.join(d, "ckpt")
        _common.warm(lambda: __import__("ckpz.distributed").distributed.load(_T["dir"]))
        _T["want"] = _common._state["driver"].decode(make_suite.DIST_VALUE)


def _check(value):
    why = _common._state["driver"].same(value, _T["want"])
    return "loaded something else than the shards hold: " + why if why else None


def TestOneInput(data):
    import ckpz.distributed

    with open(os.path.join(_T["dir"], "manifest.json"), "wb") as fo:
        fo.write(bytes(data))
    _common.run(lambda: ckpz.distributed.load(_T["dir"]), _check, max_storage=24)


if __name__ == "__main__":
    _common.main(TestOneInput, setup)
