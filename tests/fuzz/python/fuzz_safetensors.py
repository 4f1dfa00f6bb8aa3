"""Fuzzes ckpz.safetensors.load: the input is a plain .safetensors file's bytes or a
.safetensors.ckpz (what ckpz.safetensors.save returns). The header is JSON a hostile
writer controls: counts, shapes, dtypes, offsets that overlap, leave gaps or run past the
data, numbers JSON has no spelling for, names repeated.

Findings: _common's; a tensor whose storage holds more bytes than the input; a load that
returns anything but a dict of str -> torch.Tensor.
Seeds: corpus/safetensors (valid files of several dtypes and shapes, empty tensors, their
.ckpz, and headers with overlaps, gaps, huge shapes, duplicate names; make_corpus.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def setup(instrument=None):
    _common.setup(instrument)
    import make_corpus

    valid = make_corpus.safetensors_seeds()["valid-f32.safetensors"]
    _common.warm(lambda: TestOneInput(valid))


def _check(value):
    import torch

    if not isinstance(value, dict):
        return "load returned a %s" % type(value).__name__
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, torch.Tensor):
            return "load returned %s -> %s" % (type(k).__name__, type(v).__name__)
    return None


def TestOneInput(data):
    import ckpz.safetensors

    data = bytes(data)
    _common.run(lambda: ckpz.safetensors.load(data), _check, max_storage=len(data))


if __name__ == "__main__":
    _common.main(TestOneInput, setup)
