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
checkpoint (ckpz.save, ckpz.distributed.save: each rank's own). Residuals follow the
parameters when DDP lays its buckets out anew (after its first step, and in a resumed
run): found by name with model= given, else by dtype and shape where those are unique.
The first warmup_steps steps go uncompressed. A bucket holding a NaN or an infinity on any rank goes
uncompressed on every rank (an AMP grad scaler sees the overflow and skips the step).

Every collective is bounded by timeout (seconds; None: the process group's): a rank that
died or stopped answering makes every other rank's backward fail with ckpz.Error naming
it, never hang; so does a packet that fails its checks. torch >= 2 raises that
ckpz.Error from backward() as it is; torch 1.13's autograd engine turns it into a
RuntimeError carrying its text ("Error: ..."): state.error holds the ckpz.Error itself.

Methods: "q8" (method="quantize", bits=8: the default), "q4" (bits=4), "q1" (bits=1:
each element's sign, the block's mean magnitude as its scale; ~30x at block 512), their codes
entropy-coded where that is smaller (q8, q4; signs stay raw) (entropy=True, the default; lossless: only the
bytes change); "topk" (density=, 0.01 by default: the largest magnitudes plus error
feedback, 8-bit values, every rank's packet to every rank); "none" (DDP's all-reduce);
"lowrank" ("lowrank:R", rank R, 8 by default: each gradient matrix as two thin factors at
8 bits (bits=4: 4; "lowrank:R:p8": P at 8, the rest at 4) with error feedback, _ddp_lowrank;
"lowrank:auto[=T]": the rank adapting toward a relative error T, doc/gradients.md);
"auto": one of these but "lowrank", chosen after the warm-up steps from the measured link
speed and compute time (_ddp_auto: the rule), the same on every rank and kept in state_dict; no
lossier than auto_max ("q4" by default, the lossiest method measured at no hook's loss;
"topk" lets it choose top-k).
"""

import time
import zlib

from . import _ddp_auto, _ddp_lowrank, _ddp_wire, _dist_comm, _grad
from ._lib import Error

__all__ = ["CompressionState", "hook"]

# method -> bits it sets (None: bits=, or none needed)
METHODS = {"quantize": None, "q8": 8, "q4": 4, "q1": 1, "topk": 8, "none": None, "auto": None,
           "lowrank": None}
STATE_FORMAT = "ckpz.ddp/1"


class CompressionState:
    """What ckpz.ddp.hook needs between steps, and its settings.

    process_group: the group DDP reduces over (None: the default group). method: "q8",
    "q4", "q1", or "quantize" with bits= 8 (default), 4 or 1; "topk" with density= (0.01); "none";
    "lowrank" or "lowrank:R" (matrix rank R, 1..1024; 8 by default: matrix_rank; bits= 8 or 4;
    "lowrank:R:p8" with bits=4: P's exchange at 8 bits); raw codes (entropy=False) go through rank 0;
    "lowrank:auto" or "lowrank:auto=T": from rank 8, the rank adapts between steps toward
    a relative error T of the factored matrices (0.8 by default: lowrank_target);
    "auto" (chooses among them after warm-up, which must be 2 steps or more; density= is
    its top-k's; auto_max: the lossiest method it may choose, "none", "q8", "q4" (the
    default), "q1" or "topk"; auto_inject: a dict whose "link_bytes_per_s", "compute_s"
    and "latency_s" replace what is measured). entropy: rANS-code the quantised codes where that is smaller
    (True). overlap: the exchange runs on a thread of the state's, the hook returning at
    once (DDP overlaps it with the rest of the backward pass; buckets in order, each
    collective still bounded by the timeout), False: in the hook. block: elements per
    scale (1..65536; 256: about 1.6 % more bytes than the codes alone at 8-bit).
    stochastic: round codes stochastically (unbiased; a new seed per step, bucket and
    rank) instead of to nearest; with error feedback, to nearest is enough. error_feedback: keep residuals (True).
    warmup_steps: the first steps go uncompressed (the step counts backward passes: a
    step is over when DDP's last bucket was reduced). timeout: seconds each collective
    may take (None: the process group's timeout). model: the module whose parameters
    DDP reduces (the DDP model or the one it wraps, the same kind when resuming): its
    parameter names key the saved residuals; without it, parameters are told apart by
    dtype and shape, and residuals of parameters that share both restart from zero when
    DDP's buckets change.

    After a step: step, bytes_sent (what this rank's collectives carried for the
    buckets: packets, flags and sizes),
    bytes_allreduce (what a ring all-reduce of the same buckets would have sent),
    uncompressed_buckets (buckets sent as they are for a NaN or infinity), error (the
    last ckpz.Error the hook raised, or None); lowrank: rank_in_force (the next step's
    matrix rank) and rank_error (lowrank:auto: the last step's relative error, else None).
    """

    def __init__(self, process_group=None, method="q8", bits=None, block=256, stochastic=False, error_feedback=True,
                 warmup_steps=0, timeout=None, density=None, model=None, entropy=True, auto_inject=None,
                 overlap=False, auto_max=None):
        requested = method
        method, self.matrix_rank, self.lowrank_target = _ddp_lowrank.parse(method)
        if method not in METHODS:
            raise ValueError("ckpz.ddp: method must be one of %s, not %r" % (", ".join(map(repr, METHODS)), method))
        if method == "lowrank" and bits not in (None, 8, 4):
            raise ValueError("ckpz.ddp: method \"lowrank\" takes bits= 8 (the default) or 4, not %r" % (bits,))
        if METHODS[method] is not None and bits not in (None, METHODS[method]):
            raise ValueError("ckpz.ddp: method %r is %d bits, not bits=%r" % (method, METHODS[method], bits))
        if density is not None and method not in ("topk", "auto"):
            raise ValueError("ckpz.ddp: density= is for method \"topk\" (and \"auto\"'s top-k)")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError("ckpz.ddp: warmup_steps must be an int >= 0, not %r" % (warmup_steps,))
        if auto_max is not None and (method != "auto" or auto_max not in _ddp_auto.TIERS):
            raise ValueError("ckpz.ddp: auto_max= is for method \"auto\": one of %s, not %r"
                             % (", ".join(map(repr, _ddp_auto.TIERS)), auto_max))
        if method == "auto" and warmup_steps < 2:
            raise ValueError("ckpz.ddp: method \"auto\" measures during warm-up: warmup_steps >= 2")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError("ckpz.ddp: timeout must be a number of seconds > 0, or None")
        self.requested = requested
        self._lowrank = _ddp_lowrank.Factors(self.matrix_rank, self.lowrank_target, _ddp_lowrank.p_bits(requested),
                                             bits or 8) if self.matrix_rank else None
        self.density = (0.01 if density is None else density) if method in ("topk", "auto") else None
        self.entropy = bool(entropy)
        self.stochastic = bool(stochastic)
        self.block = block
        tier = _ddp_auto.TIERS[auto_max or "q4"]
        self._auto = _ddp_auto.Planner(self.density, block, auto_inject, overlap, tier) if method == "auto" else None
        self._device = None
        self.overlap = bool(overlap)
        self._worker = _ddp_wire.Worker(self) if overlap else None
        self._set_method({"q8": "quantize", "q4": "quantize", "q1": "quantize", "auto": "none"}.get(method, method),
                         METHODS[method] or bits or 8, self.entropy)
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
        # bucket index -> (its layout, FP32 residual of the bucket, of my shard of its mean)
        self._buckets = {}
        self._seen = set()  # indexes of the buckets of this step
        self._old = []  # residuals of this step's buckets before they changed layout
        self._names = {}  # parameter -> its name (model=)
        if model is not None:
            self._names = {p: name for name, p in model.named_parameters()}
        self._rank_world = None

    def _set_method(self, method, bits, entropy):
        """The exchange in use: "quantize" (bits), "topk" (self.density) or "none"."""
        self.method, self.entropy = method, entropy
        self.codec = _grad.Codec(bits, self.block, self.stochastic, entropy=entropy,
                                 density=self.density if method == "topk" else None)
        self.bits = self.codec.bits

    def _choose(self, name):
        """Takes auto's choice (a _ddp_auto.CANDIDATES name)."""
        tier, bits, entropy, topk = _ddp_auto.CANDIDATES[name]
        self._set_method("topk" if topk else "none" if name == "none" else "quantize", bits or 8, entropy)

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

    def _residuals(self, index, layout, n, shard):
        """(residual of bucket index: n elements, residual of my shard [lo, hi) of its
        mean), (None, None) without error feedback.

        A bucket's residuals are kept with its layout: each parameter's key (its name,
        with model= given; else its dtype and shape) and element count. A bucket whose
        layout is not the one kept (DDP rebuilds its buckets once, after the first step:
        a run resumed from a checkpoint starts with other buckets than those saved) gets
        each parameter's part of the residuals where it was, found by its key, when the
        key is unique among the buckets kept (zeros otherwise)."""
        if not self.error_feedback:
            return None, None
        have = self._buckets.pop(index, None)
        self._seen.add(index)
        if have is not None and have[0] == layout and have[1].numel() == n and have[2].numel() == shard[1] - shard[0]:
            self._buckets[index] = have
            return have[1], have[2]
        if have is not None:
            self._old.append(have)
        new = _moved(layout, n, shard, self._old + list(self._buckets.values()), self.world, self.rank, self.block,
                     self.method == "lowrank" and _ddp_lowrank.star_mode(self))
        self._buckets[index] = new
        return new[1], new[2]

    def _step_done(self):
        """Counts the step; drops the residuals of buckets this step did not have (DDP's
        initial ones, after it rebuilt its buckets; restored ones not used)."""
        self.step += 1
        if self._lowrank is not None:
            self._lowrank.new_step()
        for i in [i for i in self._buckets if i not in self._seen]:
            del self._buckets[i]
        self._seen, self._old = set(), []

    def _seed(self, index):
        """The stochastic rounding's seed for this step, bucket and rank (even: each use
        adds its own small offset)."""
        return (zlib.crc32(b"%d/%d/%d" % (self.step, index, self.rank)) << 20) & ~1

    @property
    def rank_in_force(self):
        return self._lowrank.rank if self._lowrank is not None else None

    @property
    def rank_error(self):
        return self._lowrank.error if self._lowrank is not None else None

    # ---- checkpoints -----------------------------------------------------------------

    def state_dict(self):
        """What a resumed run needs: the step counter and the residuals (this rank's own:
        save it per rank, ckpz.distributed.save does), with the settings they depend on.
        Tensors are the state's own (CPU FP32): save before the next step changes them."""
        auto = dict(self._auto.record) if self._auto is not None and self._auto.choice else None
        return {"format": STATE_FORMAT, "method": self.method, "bits": self.bits, "block": self.block,
                "world": self.world, "rank": self.rank, "step": self.step, "requested": self.requested,
                "density": self.density, "entropy": self.entropy, "auto": auto, "matrix_rank": self.matrix_rank,
                "factors": dict(self._lowrank.qs) if self._lowrank is not None else {},
                "lowrank_target": self.lowrank_target, "rank_in_force": self.rank_in_force,
                "layouts": {str(i): b[0] for i, b in sorted(self._buckets.items())},
                "residuals": {str(i): b[1] for i, b in sorted(self._buckets.items())},
                "owned_residuals": {str(i): b[2] for i, b in sorted(self._buckets.items())}}

    def load_state_dict(self, sd):
        """Restores state_dict()'s step and residuals (copies). ValueError when sd is not
        one, or was saved with another bits, block or world size (the residuals would not
        fit); the rank must be the same for the residuals to be this rank's."""
        if not isinstance(sd, dict) or sd.get("format") != STATE_FORMAT:
            raise ValueError("ckpz.ddp: not a CompressionState.state_dict() (no format %r)" % STATE_FORMAT)
        auto = sd.get("auto")
        if self._auto is not None and sd.get("requested") == "auto" and isinstance(auto, dict):
            if auto.get("choice") not in _ddp_auto.CANDIDATES:
                raise ValueError("ckpz.ddp: the state's auto choice is %r" % (auto.get("choice"),))
            self._choose(auto["choice"])  # what the saved run chose, without measuring again
            self._auto.choice, self._auto.record = auto["choice"], dict(auto)
        for key in ("method", "bits", "block", "world", "rank", "matrix_rank", "lowrank_target"):
            if sd.get(key) != getattr(self, key):
                raise ValueError("ckpz.ddp: the state was saved with %s=%r, this one has %r"
                                 % (key, sd.get(key), getattr(self, key)))
        step = sd.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError("ckpz.ddp: the state's step is %r, not an int >= 0" % (step,))
        tables = [_table(sd, key, f) for key, f in (("layouts", _is_layout), ("residuals", _is_vector),
                                                     ("owned_residuals", _is_vector))]
        if not set(tables[0]) == set(tables[1]) == set(tables[2]):
            raise ValueError("ckpz.ddp: the state's layouts, residuals and owned_residuals name other buckets")
        if self._lowrank is not None:
            self._lowrank.load(sd.get("factors", {}), sd.get("rank_in_force"))
        self.step = step
        self._buckets = {i: (tables[0][i], tables[1][i].detach().to("cpu", copy=True).contiguous(),
                             tables[2][i].detach().to("cpu", copy=True).contiguous()) for i in tables[0]}
        self._seen, self._old = set(), []


def _is_layout(v):
    return isinstance(v, str)


def _is_vector(v):
    import torch

    return isinstance(v, torch.Tensor) and v.dim() == 1 and v.dtype == torch.float32


def _table(sd, key, check):
    """sd[key], a dict {"INDEX": value}, as {INDEX: value}, each value check()ed."""
    table = sd.get(key)
    if not isinstance(table, dict):
        raise ValueError("ckpz.ddp: the state's %s is not a dict" % key)
    for name, v in table.items():
        if not (isinstance(name, str) and name.isdigit() and check(v)):
            raise ValueError("ckpz.ddp: the state's %s[%r] is not what a bucket has there" % (key, name))
    return {int(name): v for name, v in table.items()}


def _layout(state, bucket):
    """The bucket's parameters as text, "KEY:ELEMENTS" a line: what its residual fits."""
    return "\n".join("%s:%d" % (state._names.get(p) or "%s%s" % (str(p.dtype)[6:], tuple(p.shape)), p.numel())
                     for p in bucket.parameters())


def _parts(layout):
    """{key: offset} of the parameters of layout whose key appears once, and the keys."""
    at, where, keys = 0, {}, []
    for line in layout.split("\n") if layout else []:
        key, _, count = line.rpartition(":")
        where[key] = None if key in where else at
        keys.append((key, at, int(count)))
        at += int(count)
    return where, keys


def _moved(layout, n, shard, sources, world, rank, block, star=False):
    """(layout, residual, owned residual) of a bucket of n elements laid out as layout,
    my shard of it [lo, hi): each parameter's parts copied from the one source (layout,
    residual, owned residual: of a bucket of this world, rank and block; owned as
    _ddp_wire.owners(star) cuts it, else left out) that holds its key, zeros where none
    or several do."""
    import torch

    res, full = torch.zeros(n, dtype=torch.float32), torch.zeros(n, dtype=torch.float32)
    count, parts = {}, []
    for src in sources:
        where, keys = _parts(src[0])
        total = sum(k for _, _, k in keys)
        if total != src[1].numel():
            continue
        src_lo, src_hi = _ddp_wire.owners(total, world, block, star)[rank]
        src_full = torch.zeros(total, dtype=torch.float32)
        if src[2].numel() and src[2].numel() == src_hi - src_lo:  # none: top-k keeps no shard
            src_full[src_lo:src_hi] = src[2]
        parts.append((where, src[1], src_full))
        for key in where:
            count[key] = count.get(key, 0) + 1
    for key, at, k in _parts(layout)[1]:
        for where, src_res, src_full in parts:
            off = where.get(key)
            if off is not None and count[key] == 1 and src_res[off:off + k].numel() == k:
                res[at:at + k] = src_res[off:off + k]
                full[at:at + k] = src_full[off:off + k]
    return layout, res, full[shard[0]:shard[1]].clone()


def hook(state, bucket):
    """DDP's communication hook (model.register_comm_hook(state, ckpz.ddp.hook)): the
    bucket's mean over the ranks, as a torch.futures.Future: completed (overlap=False),
    or completed by the state's exchange thread (overlap=True), so that DDP goes on with
    the backward pass meanwhile."""
    import torch

    buf = bucket.buffer()
    shapes = [tuple(p.shape) for p in bucket.parameters()] if state.method == "lowrank" else None
    job = (buf, bucket.index(), _layout(state, bucket), bucket.is_last(), shapes)
    if state.overlap and (state._auto is None or state._auto.choice is not None):  # auto measures in-line
        return state._worker.submit(lambda: _reduce(state, *job))
    fut = torch.futures.Future()
    fut.set_result(_reduce(state, *job))
    return fut


def _reduce(state, buf, index, layout, last, shapes):
    """The bucket's mean over the ranks (one bucket's turn of the hook, on the calling
    thread or the exchange thread: in bucket order either way, the same on every rank)."""
    import torch

    t0 = time.perf_counter()
    what = "ckpz.ddp.hook (step %d, bucket %d)" % (state.step, index)
    w = state.world
    auto = state._auto
    state._device = buf.device
    try:
        plain = not buf.is_floating_point() or buf.dtype == torch.float64
        if w > 1:
            state.bytes_allreduce += 2 * (w - 1) * buf.numel() * buf.element_size() // w
        if auto is not None and auto.choice is None and state.step >= state.warmup_steps and w > 1:
            state._choose(auto.decide(state, what))
        if w == 1:
            result = buf
        elif state.step < state.warmup_steps or plain or state.method == "none":
            t1 = time.perf_counter()
            if auto is not None and auto.choice is None and not plain and state.step == state.warmup_steps - 1:
                auto.measure(buf.detach().contiguous().cpu(), w)
                t1 = time.perf_counter()
            result = _ddp_wire.allreduce(state, what, buf)
            if auto is not None and auto.choice is None and not plain:
                auto.allreduced(2 * (w - 1) * buf.numel() * buf.element_size() / w, time.perf_counter() - t1)
                if state.step == state.warmup_steps - 1:
                    auto.probe(state, what)
        elif state.method == "lowrank":
            result = _ddp_lowrank.allreduce(state, index, layout, shapes, buf.contiguous(), what)
        elif state.method == "topk":
            result = _ddp_wire.topk_allreduce(state, index, layout, buf.contiguous(), what)
        else:
            result = _ddp_wire.quantized_allreduce(state, index, layout, buf.contiguous(), what)
    except Error as e:
        state.error = e
        raise
    if auto is not None and auto.choice is None:
        auto.in_hook += time.perf_counter() - t0
        if last:
            auto.step_done(time.perf_counter())
    if last:
        state._step_done()
    return result
