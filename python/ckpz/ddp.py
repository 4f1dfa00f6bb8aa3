"""ckpz.ddp: gradients of DistributedDataParallel training quantised on the wire.

::

    state = ckpz.ddp.CompressionState(method="q8", warmup_steps=10)
    model.register_comm_hook(state, ckpz.ddp.hook)
    ...
    ckpz.save({"model": model.state_dict(), "ddp_hook": state.state_dict()}, path)
    state.load_state_dict(ckpz.load(path)["ddp_hook"])          # on resuming

The hook replaces DDP's all-reduce of each gradient bucket by a quantised one
(libckpz's ckpz_grad_* kernels, doc/gradients.md): blockwise 8-bit or 4-bit codes with
one FP32 scale per block, a reduce-scatter then an all-gather of checksummed packets, so
each rank sends about a quarter (8-bit) or an eighth (4-bit) of what an FP32 all-reduce
sends, for any number of ranks. Error feedback keeps what quantisation left out (one
residual per bucket, and one per shard a rank averages) and sends it at later steps;
the residuals and the step counter are the state's state_dict, saved with the
checkpoint (ckpz.save, ckpz.distributed.save: each rank's own). The first warmup_steps
steps go uncompressed. A bucket holding a NaN or an infinity on any rank goes
uncompressed on every rank (an AMP grad scaler sees the overflow and skips the step).

Every collective is bounded by timeout (seconds; None: the process group's): a rank that
died or stopped answering makes every other rank's backward fail with ckpz.Error naming
it, never hang; so does a packet that fails its checks. torch >= 2 raises that
ckpz.Error from backward() as it is; torch 1.13's autograd engine turns it into a
RuntimeError carrying its text ("Error: ..."): state.error holds the ckpz.Error itself.

Methods: "q8" (method="quantize", bits=8: the default), "q4" (bits=4). Sparsifying
methods (top-k, an all-gather scheme) are planned, with density=.
"""

import zlib

from . import _ddp_wire, _dist_comm, _grad
from ._lib import Error

__all__ = ["CompressionState", "hook"]

METHODS = {"quantize": None, "q8": 8, "q4": 4}  # method -> bits it sets (None: bits=)
STATE_FORMAT = "ckpz.ddp/1"


class CompressionState:
    """What ckpz.ddp.hook needs between steps, and its settings.

    process_group: the group DDP reduces over (None: the default group). method: "q8",
    "q4", or "quantize" with bits= 8 or 4. block: elements per scale (1..65536; 256:
    about 1.6 % more bytes than the codes alone at 8-bit). stochastic: round codes
    stochastically (unbiased; a new seed per step, bucket and rank) instead of to nearest;
    with error feedback, to nearest is enough. error_feedback: keep residuals (True).
    warmup_steps: the first steps go uncompressed (the step counts backward passes: a
    step is over when DDP's last bucket was reduced). timeout: seconds each collective
    may take (None: the process group's timeout).

    After a step: step, bytes_sent (what this rank sent for the buckets, payload only),
    bytes_allreduce (what a ring all-reduce of the same buckets would have sent),
    uncompressed_buckets (buckets sent as they are for a NaN or infinity), error (the
    last ckpz.Error the hook raised, or None).
    """

    def __init__(self, process_group=None, method="q8", bits=8, block=256, stochastic=False, error_feedback=True,
                 warmup_steps=0, timeout=None, density=None):
        if method not in METHODS:
            raise ValueError("ckpz.ddp: method must be one of %s, not %r" % (", ".join(map(repr, METHODS)), method))
        if density is not None:
            raise ValueError("ckpz.ddp: density= is for the sparsifying methods (not in this release)")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError("ckpz.ddp: warmup_steps must be an int >= 0, not %r" % (warmup_steps,))
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError("ckpz.ddp: timeout must be a number of seconds > 0, or None")
        self.method = "quantize"
        self.codec = _grad.Codec(METHODS[method] or bits, block, stochastic)
        self.bits, self.block, self.stochastic = self.codec.bits, block, bool(stochastic)
        self.error_feedback = bool(error_feedback)
        self.warmup_steps = warmup_steps
        self.timeout = timeout
        self.group = process_group
        self.step = 0
        self.exchanges = 0  # collectives entered: the same count on every rank
        self.bytes_sent = 0
        self.bytes_allreduce = 0
        self.uncompressed_buckets = 0
        self.error = None
        self._res = {}  # bucket index -> FP32 residual of the bucket
        self._owned = {}  # bucket index -> FP32 residual of this rank's shard of its mean
        self._rank_world = None

    # ---- the ranks -------------------------------------------------------------------

    @property
    def rank(self):
        return self._ranks()[0]

    @property
    def world(self):
        return self._ranks()[1]

    def _ranks(self):
        if self._rank_world is None:
            self._rank_world = _dist_comm.rank_world(self.group)
        return self._rank_world

    # ---- per bucket ------------------------------------------------------------------

    def _residuals(self, index, n, m):
        """(residual of bucket index: n elements, residual of my shard of its mean: m),
        zeros when new or when the bucket changed size (DDP rebuilds its buckets once,
        after the first step); (None, None) without error feedback."""
        import torch

        if not self.error_feedback:
            return None, None
        r, o = self._res.get(index), self._owned.get(index)
        if r is None or r.numel() != n:
            r = self._res[index] = torch.zeros(n, dtype=torch.float32)
        if o is None or o.numel() != m:
            o = self._owned[index] = torch.zeros(m, dtype=torch.float32)
        return r, o

    def _seed(self, index):
        """The stochastic rounding's seed for this step, bucket and rank (even: each use
        adds its own small offset)."""
        return (zlib.crc32(b"%d/%d/%d" % (self.step, index, self.rank)) << 20) & ~1

    # ---- checkpoints -----------------------------------------------------------------

    def state_dict(self):
        """What a resumed run needs: the step counter and the residuals (this rank's own:
        save it per rank, ckpz.distributed.save does), with the settings they depend on.
        Tensors are the state's own (CPU FP32): save before the next step changes them."""
        return {"format": STATE_FORMAT, "method": self.method, "bits": self.bits, "block": self.block,
                "world": self.world, "rank": self.rank, "step": self.step,
                "residuals": {str(i): t for i, t in sorted(self._res.items())},
                "owned_residuals": {str(i): t for i, t in sorted(self._owned.items())}}

    def load_state_dict(self, sd):
        """Restores state_dict()'s step and residuals (copies). ValueError when sd is not
        one, or was saved with another bits, block or world size (the residuals would not
        fit); the rank must be the same for the residuals to be this rank's."""
        import torch

        if not isinstance(sd, dict) or sd.get("format") != STATE_FORMAT:
            raise ValueError("ckpz.ddp: not a CompressionState.state_dict() (no format %r)" % STATE_FORMAT)
        for key in ("method", "bits", "block", "world", "rank"):
            if sd.get(key) != getattr(self, key):
                raise ValueError("ckpz.ddp: the state was saved with %s=%r, this one has %r"
                                 % (key, sd.get(key), getattr(self, key)))
        step = sd.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError("ckpz.ddp: the state's step is %r, not an int >= 0" % (step,))
        tables = []
        for key in ("residuals", "owned_residuals"):
            table = sd.get(key)
            if not isinstance(table, dict):
                raise ValueError("ckpz.ddp: the state's %s is not a dict" % key)
            out = {}
            for name, t in table.items():
                if not (isinstance(name, str) and name.isdigit() and isinstance(t, torch.Tensor) and t.dim() == 1
                        and t.dtype == torch.float32):
                    raise ValueError("ckpz.ddp: the state's %s[%r] is not a 1-D FP32 tensor of a bucket" % (key, name))
                out[int(name)] = t.detach().to("cpu", copy=True).contiguous()
            tables.append(out)
        self.step = step
        self._res, self._owned = tables


def hook(state, bucket):
    """DDP's communication hook (model.register_comm_hook(state, ckpz.ddp.hook)): the
    bucket's mean over the ranks, as a completed torch.futures.Future."""
    import torch

    buf = bucket.buffer()
    index = bucket.index()
    what = "ckpz.ddp.hook (step %d, bucket %d)" % (state.step, index)
    w = state.world
    try:
        if w == 1:
            result = buf
        elif state.step < state.warmup_steps or not buf.is_floating_point() or buf.dtype == torch.float64:
            state.bytes_allreduce += 2 * (w - 1) * buf.numel() * buf.element_size() // w
            result = _ddp_wire.allreduce(state, what, buf)
        else:
            state.bytes_allreduce += 2 * (w - 1) * buf.numel() * buf.element_size() // w
            result = _ddp_wire.quantized_allreduce(state, index, buf.contiguous(), what)
    except Error as e:
        state.error = e
        raise
    if bucket.is_last():
        state.step += 1
    fut = torch.futures.Future()
    fut.set_result(result)
    return fut
