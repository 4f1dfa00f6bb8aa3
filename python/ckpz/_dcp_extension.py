"""ckpz as a stream extension of DCP's own FileSystemWriter (torch >= 2.7): each item's
stream coded by ckpz, read back by the stock FileSystemReader given extension_registry().
Public as ckpz.dcp.Extension and ckpz.dcp.extension_registry."""

import io

from . import _dcp_compat, _lib
from ._lib import LEVEL_DEFAULT

__all__ = ["Extension", "extension_registry"]

checkpoint = _dcp_compat.names()["dcp"]

_EXT = None
try:
    _EXT = __import__(checkpoint.__name__ + "._extension", fromlist=["x"])
except ImportError:
    pass


def _needs_extensions(what):
    import torch

    raise RuntimeError("ckpz.dcp.%s needs DCP's stream extensions (torch.distributed.checkpoint._extension, "
                       "torch 2.7 and later); this is torch %s" % (what, torch.__version__))


class _Buffered(io.RawIOBase):
    """What transform_to returns: it keeps what DCP writes (one item: a blob, or torch.save
    of one tensor) and codes it into the stream below when DCP closes it (close cascades,
    as DCP asks of a transform: the stream below ignores it)."""

    def __init__(self, output, opts):
        super().__init__()
        self.output = output
        self.opts = opts
        self.buf = io.BytesIO()

    def writable(self):
        return True

    def write(self, b):
        return self.buf.write(b)

    def close(self):
        if self.closed:
            return
        try:
            from . import compress_file

            level, threads = self.opts
            self.buf.seek(0)
            compress_file(self.buf, self.output, level=level, threads=threads)
            self.output.close()
        finally:
            self.buf = None
            super().close()


class Extension(_EXT.StreamTransformExtension if _EXT is not None else object):
    """A DCP stream extension (torch >= 2.7) that codes each item FileSystemWriter writes
    with ckpz (dtype-aware, a CRC-32C per chunk and of the whole item)::

        dcp.save(sd, storage_writer=dcp.FileSystemWriter(path, _extensions=[ckpz.dcp.Extension()]))
        dcp.load(sd, storage_reader=dcp.FileSystemReader(path, _extension_registry=ckpz.dcp.extension_registry()))

    The metadata names it "stream.ckpz/1". torch's FileSystemReader builds the extensions
    of an item from that name through the registry it is given; its default registry
    holds ZStandard only, so a reader must be given extension_registry() (or a registry
    it registered Extension in). Each item is kept in memory whole before it is coded (DCP
    hands the stream one item at a time), and read back whole."""

    def __init__(self, level=LEVEL_DEFAULT, threads=0):
        if _EXT is None:
            _needs_extensions("Extension")
        super().__init__()
        _lib.make_params(level, threads)  # checked now, not at the first item
        self.level, self.threads = level, threads

    @staticmethod
    def registry_name():
        return "stream.ckpz"

    @staticmethod
    def from_descriptor(version):
        if str(version).partition(".")[0] != "1":
            raise ValueError("ckpz.dcp.Extension: stream.ckpz version %r is not one this ckpz reads (1)" % (version,))
        return Extension()

    def get_descriptor(self):
        return self.registry_name() + "/1"

    def transform_to(self, output):
        return _Buffered(output, (self.level, self.threads))

    def transform_from(self, input):
        from . import decompress_file

        out = io.BytesIO()
        decompress_file(io.BytesIO(input.read(-1)), out, threads=self.threads)
        out.seek(0)
        return out


def extension_registry(registry=None):
    """A DCP ExtensionRegistry (torch >= 2.7) holding Extension, for the stock
    FileSystemReader's _extension_registry=: registry (one of yours) with it registered,
    or a new one (which holds torch's ZStandard too)."""
    if _EXT is None:
        _needs_extensions("extension_registry")
    registry = _EXT.ExtensionRegistry() if registry is None else registry
    registry.register(Extension)
    return registry
