"""Fuzzes the torch-archive reader: the input is a whole torch.save archive (a stored
zip). First ckpz._zipindex.ZipIndex over it, with a read(offset, n) that treats any
read outside the input as a finding (the reader must check every offset and length
against the size before reading) and then checks that every member it returns lies in
the input; then ckpz.load of the input from a BytesIO, under _common's policy.

Seeds: corpus/torchzip (the hostile suite's archives: overlapping members, members
outside the file, zip64 fields that lie, ...; valid archives; make_corpus.py).
"""

import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def setup(instrument=None):
    _common.setup(instrument)
    import craft

    valid = craft.torch_archive(craft.pkl(craft.sdict(w=craft.tensor("0", (2,)))), {"0": craft.f32([1.0, 2.0])})
    _common.warm(lambda: TestOneInput(valid))


def _index(data):
    """ZipIndex over data (ckpz._zipindex; ckpz._torchzip in copies before 0.4.0's
    split), or None where this ckpz has none."""
    pkg = _common._state["ckpz"]
    cls = getattr(getattr(pkg, "_zipindex", None), "ZipIndex", None) or \
        getattr(getattr(pkg, "_torchzip", None), "ZipIndex", None)
    if cls is None:
        return None
    size = len(data)

    def read(off, n):
        if off < 0 or n < 0 or off + n > size:
            raise _common.Finding("ZipIndex read %d bytes at %d of a %d-byte archive" % (n, off, size))
        return data[off:off + n]

    def read_many(spans):
        return [read(o, n) for o, n in spans]

    def build():
        try:
            return cls(read, size, "fuzz.pt", read_many=read_many)
        except TypeError:
            return cls(read, size, "fuzz.pt")

    def members_inside(ix):
        for name, m in getattr(ix, "members", {}).items():
            off = getattr(m, "data_offset", None)
            if off is None or off < 0 or m.size < 0 or off + m.size > size:
                return "member %r: %s bytes at %s, in a %d-byte archive" % (name, m.size, off, size)
        return None

    return _common.run(build, members_inside)


def TestOneInput(data):
    data = bytes(data)
    ckpz = _common._state["ckpz"]
    _index(data)
    _common.run(lambda: ckpz.load(io.BytesIO(data), trusted=False), max_storage=len(data))


if __name__ == "__main__":
    _common.main(TestOneInput, setup)
