"""Fuzzes ckpz.load's unpickler: the input is the data.pkl of a torch.save archive
(built around it in memory, with storages "0" (6 float32), "1" (4 int64) and "2"
(2 float32) beside it) loaded by ckpz.load from a BytesIO with trusted=False.

Findings: an exception other than ckpz.Error / pickle.UnpicklingError, a value holding
a tensor outside its storage, with backward hooks, or over a storage larger than the
largest member (32 bytes: memory from nothing, a storage grown by set_), a code
payload's marker file, a process-wide change, a peak RSS 256 MB over the start
(_common.py). Seeds: corpus/unpickler (every pickle of the hostile
suite, and the pickles of real training states; make_corpus.py).

    python fuzz_unpickler.py -max_total_time=60 NEW_DIR corpus/unpickler    (atheris)
"""

import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_ARCHIVE = {}


def setup(instrument=None):
    _common.setup(instrument)
    if not _ARCHIVE:
        import craft

        _ARCHIVE["storages"] = {"0": craft.f32([0.5, 1.5, -2.0, 3.25, 4.0, -5.5]),
                                "1": craft.i64([1, -2, 3, 1 << 40]), "2": craft.f32([7.0, 8.0])}
        _ARCHIVE["craft"] = craft
        ckpz = _common._state["ckpz"]
        valid = craft.pkl(craft.sdict(w=craft.tensor("0", (2, 3))))
        _common.warm(lambda: ckpz.load(io.BytesIO(craft.torch_archive(valid, _ARCHIVE["storages"]))))


def TestOneInput(data):
    ckpz = _common._state["ckpz"]
    archive = _ARCHIVE["craft"].torch_archive(bytes(data), _ARCHIVE["storages"])
    _common.run(lambda: ckpz.load(io.BytesIO(archive), trusted=False), max_storage=32)


if __name__ == "__main__":
    _common.main(TestOneInput, setup)
