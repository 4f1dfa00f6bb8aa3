"""libckpz's gradient kernels (ckpz_grad_*, doc/gradients.md) over CPU torch tensors.

Codec holds one setting (bits, block, rounding, entropy coding of the codes; or top-k
with a density) and packs a contiguous FP32, BF16 or FP16 tensor into a packet (CKGQ
dense, CKGS sparse) written into a uint8 tensor, with error feedback through an FP32
residual tensor; unpack checks a packet (every byte: it came off the wire) and decodes
it into a tensor of the same element count, unpack_add adds it into an FP32 one.
Addresses go to C as they are (no copies); the caller keeps the tensors alive across a
call. Not public API.
"""

import ctypes

from . import _lib
from ._lib import Error

__all__ = []  # private module

BITS = (8, 4, 1)
BLOCK_MAX = 65536


def _dtypes():
    import torch

    return {torch.float32: _lib.DTYPE_F32, torch.bfloat16: _lib.DTYPE_BF16, torch.float16: _lib.DTYPE_F16}


def dtype_code(dtype):
    """The ckpz_dtype of a torch dtype the kernels take, else ValueError."""
    code = _dtypes().get(dtype)
    if code is None:
        raise ValueError("ckpz.ddp: gradients of %s cannot be quantised (FP32, BF16 or FP16 only)" % (dtype,))
    return code


def _cpu_contiguous(t, what):
    if t.device.type != "cpu" or not t.is_contiguous():
        raise ValueError("ckpz: %s must be a contiguous CPU tensor" % what)


class Codec:
    """Packs and unpacks gradients with one setting: bits (8, 4 or 1: signs), block (elements per
    scale), stochastic rounding (with a seed given per call), entropy (rANS-code the
    codes when smaller); density set: top-k of that density with 8-bit values."""

    def __init__(self, bits=8, block=256, stochastic=False, entropy=False, density=None):
        if bits not in BITS or (density is not None and bits != 8):
            raise ValueError("ckpz.ddp: bits must be 8, 4 or 1 (top-k: 8), not %r" % (bits,))
        if density is not None and (isinstance(density, bool) or not isinstance(density, (int, float))
                                    or not 0 < density <= 1):
            raise ValueError("ckpz.ddp: density must be a number in (0, 1], not %r" % (density,))
        if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= BLOCK_MAX:
            raise ValueError("ckpz.ddp: block must be an int in 1..%d, not %r" % (BLOCK_MAX, block))
        self.params = _lib.GradParams()
        _lib.grad_params_init(ctypes.byref(self.params))
        self.params.struct_size = ctypes.sizeof(_lib.GradParams)
        self.params.bits = bits
        self.params.block = block
        self.params.stochastic = 1 if stochastic else 0
        self.params.entropy = 1 if entropy else 0
        if density is not None:
            self.params.kind = _lib.GRAD_TOPK
            self.params.density = float(density)
        self.bits, self.block, self.stochastic = bits, block, bool(stochastic)
        self.entropy, self.density = bool(entropy), density
        self._sizes = {}

    def packet_size(self, n):
        """Bytes of the packet of n elements: the most a packet takes (exact for dense
        packets of raw codes)."""
        size = self._sizes.get(n)
        if size is None:
            out = ctypes.c_size_t()
            with _lib.Call() as call:
                call.check(_lib.grad_packet_size(call.ctx, ctypes.byref(self.params), n, ctypes.byref(out)))
            size = self._sizes[n] = out.value
        return size

    def pack(self, grad, residual, dst, seed=0):
        """Packs grad (a contiguous CPU FP32/BF16/FP16 tensor) into dst (a uint8 tensor of
        packet_size(grad.numel()) bytes, or more), residual (FP32, same count, or None)
        updated in place. Returns the packet's size (its bytes are dst[:size]), or 0 when
        grad (+ residual) holds a NaN or an infinity (then residual is as it was and dst
        holds nothing useful)."""
        n = grad.numel()
        _cpu_contiguous(grad, "a gradient")
        _cpu_contiguous(dst, "a packet buffer")
        if dst.numel() < self.packet_size(n):
            raise ValueError("ckpz: the packet buffer has %d bytes, not %d" % (dst.numel(), self.packet_size(n)))
        res = None
        if residual is not None:
            _cpu_contiguous(residual, "a residual")
            if residual.numel() != n or residual.element_size() != 4 or not residual.is_floating_point():
                raise ValueError("ckpz: the residual must be FP32 with the gradient's %d elements" % n)
            res = residual.data_ptr()
        self.params.seed = seed & 0xFFFFFFFFFFFFFFFF
        written = ctypes.c_size_t()
        with _lib.Call() as call:
            err = _lib.grad_pack(call.ctx, ctypes.byref(self.params), dtype_code(grad.dtype), grad.data_ptr() or None,
                                 n, res, dst.data_ptr(), dst.numel(), ctypes.byref(written))
            if err == _lib.ERR_INPUT:
                return 0
            call.check(err)
        return written.value

    def unpack(self, packet, out, what="a packet"):
        """Checks the packet (a contiguous CPU uint8 tensor, any bytes) and decodes it into
        out (FP32/BF16/FP16, its element count the packet's). A packet that is not exactly
        what pack makes (damaged, truncated, another count, bits or block than this
        codec's) raises Error naming what."""
        _cpu_contiguous(packet, what)
        _cpu_contiguous(out, "an output")
        count, bits, block, kind = self._header(packet, what, (out.numel(), self.bits, self.block,
                                                                 self.params.kind))
        if count != out.numel() or bits != self.bits or block != self.block or kind != self.params.kind:
            raise Error(_lib.ERR_CORRUPT, "%s holds %d elements at %d bits, block %d: %d at %d bits, block %d expected"
                        % (what, count, bits, block, out.numel(), self.bits, self.block))
        with _lib.Call() as call:
            err = _lib.grad_unpack(call.ctx, packet.data_ptr(), packet.numel(), dtype_code(out.dtype),
                                   out.data_ptr() or None, out.numel())
            if err:
                raise Error(err, "%s: %s" % (what, call.message()))

    def _header(self, packet, what, want):
        """(count, bits, block, kind) of the packet, read from its first 24 bytes alone,
        when they are want's (a tuple like it, None for a field not compared): decoding
        then checks every byte (CRC and all, as info does: not twice over). Otherwise
        info()'s, the whole packet checked first (its error naming what)."""
        head = bytes(packet[:24].tolist())
        if len(head) == 24 and head[:4] in (b"CKGQ", b"CKGS"):
            kind = _lib.GRAD_DENSE if head[:4] == b"CKGQ" else head[21]  # selection 1, 2: top-k, threshold
            got = (int.from_bytes(head[12:20], "little"), head[5], int.from_bytes(head[8:12], "little"), kind)
            if all(w is None or g == w for g, w in zip(got, want)):
                return got
        info = self.info(packet, what)
        return info.count, info.bits, info.block, info.kind

    def info(self, packet, what="a packet"):
        """The packet's ckpz_grad_info (the whole packet checked), or Error naming what."""
        info = _lib.GradInfo()
        with _lib.Call() as call:
            err = _lib.grad_info_read(call.ctx, packet.data_ptr() or None, packet.numel(), ctypes.byref(info))
            if err:
                raise Error(err, "%s: %s" % (what, call.message()))
        return info

    def unpack_add(self, packet, acc, what="a packet"):
        """Checks the packet as unpack does and adds what it decodes to into acc (a
        contiguous CPU FP32 tensor of its element count)."""
        _cpu_contiguous(packet, what)
        _cpu_contiguous(acc, "an accumulator")
        count, bits, _, kind = self._header(packet, what, (acc.numel(), self.bits, None, self.params.kind))
        if count != acc.numel() or bits != self.bits or kind != self.params.kind:
            raise Error(_lib.ERR_CORRUPT, "%s holds %d elements at %d bits (kind %d): %d at %d bits (kind %d) expected"
                        % (what, count, bits, kind, acc.numel(), self.bits, self.params.kind))
        if acc.dtype != _float32():
            raise ValueError("ckpz: unpack_add adds into FP32")
        with _lib.Call() as call:
            err = _lib.grad_unpack_add(call.ctx, packet.data_ptr(), packet.numel(), acc.data_ptr() or None,
                                       acc.numel())
            if err:
                raise Error(err, "%s: %s" % (what, call.message()))


def _float32():
    import torch

    return torch.float32
