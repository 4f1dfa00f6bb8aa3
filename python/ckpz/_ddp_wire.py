"""The exchanges of ckpz.ddp's hook: a quantised all-reduce of one bucket, and the plain
one it falls back to; each collective bounded in time, a failure raised as ckpz.Error.

Quantised all-reduce (method "quantize", reduce-scatter then all-gather, as a ring
all-reduce moves data): the bucket's n elements are cut into one shard per rank, on
block boundaries. Phase 1 (all_to_all): each rank packs every shard of its gradient,
error feedback through its residual, and sends shard j's packet to rank j. Rank j
checks and decodes the packets it got, averages them (FP32) and packs the mean of its
shard, error feedback through its second residual (the owner's: what re-quantising the
mean left out). Phase 2 (all_gather): every rank gets every shard's mean and decodes it
into the bucket's dtype. Each rank sends 2 (W - 1) / W of a packet of the bucket, against
2 (W - 1) / W of the bucket for a ring all-reduce. Both residuals are the state's
(ckpz.ddp.CompressionState), per bucket.

On the wire every packet is a slot: one flag byte, then the CKGQ packet
(doc/gradients.md) of the shard. Flags: 0 the packet; 1 no packet, the sender's values
were not finite (NaN or infinity: an overflow an AMP grad scaler must see); 2 no packet,
the owner refused one it got (phase 2 only). After phase 2 every rank knows the same
flags, so all take the same way on: any 2 raises ckpz.Error on every rank (the rank that
refused names the sender and what was wrong); any 1 makes every rank all-reduce the
bucket uncompressed, so the overflow reaches every rank's result. Phase 2's slots are
padded with zeros to the longest shard's; a padding byte not zero is refused.

A collective that fails (a rank died, or stopped answering within the timeout: the
state's, else the group's) raises ckpz.Error naming the bucket, the step and the ranks
that did not answer (_dist_comm's diagnosis through the store). Not public API.
"""

import datetime

from . import _dist_comm, _lib
from ._lib import Error

__all__ = []  # private module

OK, NOT_FINITE, REFUSED = 0, 1, 2


def shard_bounds(n, world, block):
    """[(lo, hi)] of each rank's shard of n elements: whole blocks, as even as they go
    (some empty when there are fewer blocks than ranks)."""
    blocks = -(-n // block)
    cuts = [min(n, block * (blocks * j // world)) for j in range(world + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def collective(state, what, start):
    """Runs start() (a torch.distributed call with async_op=True) and waits for it,
    within state.timeout seconds if set. A failure raises ckpz.Error (the ranks that did
    not answer named) on this rank."""
    state.exchanges += 1
    try:
        work = start()
        if state.timeout is not None:
            ok = work.wait(datetime.timedelta(seconds=state.timeout))
        else:
            ok = work.wait()
        if ok is False:
            raise RuntimeError("no answer within %g s" % state.timeout)
    except RuntimeError as e:
        if isinstance(e, Error):
            raise
        store = _dist_comm._store()
        prefix = "ckpz/ddp/%s/" % _dist_comm._group_name(state.group)
        raise _dist_comm._dead_rank_error(e, state.group, store, prefix, state.exchanges, what, None) from None


def allreduce(state, what, buf):
    """The mean of buf over the ranks, a new tensor: the sum of a copy of buf (kept past
    the collective, _dist_comm.hold: buf may be a tensor of the caller's that nothing
    else holds), divided by the world size."""
    dist = _dist_comm.dist_module()
    wire = buf.clone()
    collective(state, what, lambda: dist.all_reduce(wire, group=state.group, async_op=True))
    w = state.world
    state.bytes_sent += 2 * (w - 1) * buf.numel() * buf.element_size() // w
    mean = wire / w
    _dist_comm.hold([wire])
    return mean


def quantized_allreduce(state, index, layout, buf, what):
    """The mean over the ranks of buf (a contiguous FP32/BF16/FP16 tensor on its device),
    quantised as above (or sent as it is, see above): a new tensor like buf. layout:
    the bucket's, for its residuals (CompressionState._residuals)."""
    import torch

    dist = _dist_comm.dist_module()
    codec, w, me, n = state.codec, state.world, state.rank, buf.numel()
    host = buf if buf.device.type == "cpu" else buf.cpu()
    bounds = shard_bounds(n, w, codec.block)
    slots = [1 + codec.packet_size(hi - lo) for lo, hi in bounds]
    residual, owned = state._residuals(index, layout, n, bounds[me])
    seed = state._seed(index)

    # phase 1: my packet of every shard to its owner
    send = torch.zeros(sum(slots), dtype=torch.uint8)
    at, finite = 0, True
    for j, (lo, hi) in enumerate(bounds):
        s = send[at:at + slots[j]]
        finite = finite and codec.pack(host[lo:hi], residual[lo:hi], s[1:], seed + 2 * j)
        at += slots[j]
    if not finite:  # no packet from me this step: every slot says why
        for start in [sum(slots[:j]) for j in range(w)]:
            send[start] = NOT_FINITE
    mine = slots[me]
    wire_send = _on(send, buf.device)
    wire_recv = torch.empty(w * mine, dtype=torch.uint8, device=wire_send.device)
    collective(state, what, lambda: dist.all_to_all_single(wire_recv, wire_send, [mine] * w, slots, group=state.group,
                                                           async_op=True))
    recv = wire_recv.cpu() if wire_recv.device.type != "cpu" else wire_recv

    # my shard: the mean of what the ranks sent
    lo, hi = bounds[me]
    mean = torch.zeros(hi - lo, dtype=torch.float32)
    part = torch.empty(hi - lo, dtype=torch.float32)
    flag, refusal = OK, None
    for i in range(w):
        slot = recv[i * mine:(i + 1) * mine]
        got = int(slot[0])
        if got == NOT_FINITE:
            flag = max(flag, NOT_FINITE)
            continue
        try:
            if got != OK:
                raise Error(_lib.ERR_CORRUPT, "flag byte %d (0 or 1 expected)" % got)
            codec.unpack(slot[1:], part, "the packet of rank %d" % i)
        except Error as e:
            flag, refusal = REFUSED, e
            break
        mean += part
    width = max(slots)
    out = torch.zeros(width, dtype=torch.uint8)
    if flag == OK:
        mean.div_(w)
        if not codec.pack(mean, owned, out[1:mine], seed + 2 * me + 1):
            flag = NOT_FINITE
    out[0] = flag

    # phase 2: every shard's mean to every rank
    gathered = [torch.empty(width, dtype=torch.uint8, device=wire_send.device) for _ in range(w)]
    wire_out = _on(out, buf.device)
    collective(state, what, lambda: dist.all_gather(gathered, wire_out, group=state.group, async_op=True))
    outs = [o.cpu() for o in gathered]  # the same tensors on CPU
    state.bytes_sent += (sum(slots) - mine) + (w - 1) * width
    flags = [int(o[0]) for o in outs]
    if refusal is not None:
        raise Error(refusal.code, "%s: %s" % (what, refusal.message))
    bad = [j for j, f in enumerate(flags) if f not in (OK, NOT_FINITE)]
    if bad:
        raise Error(_lib.ERR_CORRUPT, "%s: rank%s %s refused a packet sent to %s (its error names the sender)"
                    % (what, "s" if len(bad) > 1 else "", ", ".join(map(str, bad)), "them" if len(bad) > 1 else "it"))
    if NOT_FINITE in flags:  # every rank sees it: the bucket goes uncompressed, overflow and all
        state.uncompressed_buckets += 1
        return allreduce(state, what, buf)
    result = torch.empty(n, dtype=buf.dtype)
    for j, (lo, hi) in enumerate(bounds):
        o = outs[j]
        if o[slots[j]:].any():
            raise Error(_lib.ERR_CORRUPT, "%s: the mean of rank %d has padding bytes that are not zero" % (what, j))
        codec.unpack(o[1:slots[j]], result[lo:hi], "%s: the mean of rank %d" % (what, j))
    _dist_comm.hold([wire_send, wire_recv, wire_out] + gathered)  # see _dist_comm.hold
    return result.to(buf.device) if buf.device.type != "cpu" else result


def _on(t, device):
    """t (a CPU tensor) where the collective takes it: the bucket's device (NCCL moves
    CUDA tensors only; only packets cross, the kernels run on the host)."""
    return t if device.type == "cpu" else t.to(device)
