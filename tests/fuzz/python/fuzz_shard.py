"""Fuzzes the shard loader of ckpz.distributed.load: the input is the pickle of shard
0 (its data.pkl, the archive built around it with shard 0's storages and compressed by
ckpz.compress_file), beside the template's shard 1 and manifest (hostile suite, world 2).

Findings: _common's (unclean exceptions, tensors outside their storage, hooks, markers,
process-wide changes). Seeds: corpus/shard (the hostile suite's shard pickles: lying
tensor references, deep and exponential skeletons, code; make_corpus.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_T = {}


def setup(instrument=None):
    _common.setup(instrument)
    if not _T:
        import craft
        import make_suite

        d = _common.workdir("shard")
        make_suite.write_dist_template(os.path.join(d, "ckpt"))
        _T["dir"] = os.path.join(d, "ckpt")
        _common.warm(lambda: __import__("ckpz.distributed").distributed.load(_T["dir"]))
        _T["storages"] = make_suite.dist_template()[0][1]
        _T["craft"] = craft


def TestOneInput(data):
    import ckpz.distributed

    craft = _T["craft"]
    craft.ckpz_file(craft.torch_archive(bytes(data), _T["storages"]),
                    os.path.join(_T["dir"], craft.shard_name(0, 2)))
    _common.run(lambda: ckpz.distributed.load(_T["dir"]), max_storage=24)


if __name__ == "__main__":
    _common.main(TestOneInput, setup)
