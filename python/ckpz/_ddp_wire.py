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
bucket uncompressed, so the overflow reaches every rank's result. Entropy-coded packets differ in
size, so each phase sends the slots' sizes first and then exactly the slots (exchange):
no padding travels, four collectives a bucket. Raw codes (and 1-bit signs) make packets
of exactly codec.packet_size bytes: no sizes travel, two collectives a bucket (fixed).
Through rank 0 (star_allreduce, method "lowrank"'s raw exchanges of a few kB): a gather
of every rank's packet of the whole bucket, then a broadcast of the mean's: the same
bytes in 2 (W - 1) messages instead of 2 W (W - 1), where each message's framing weighs.

Top-k (method "topk", topk_allreduce): every rank's sparse packet (CKGS) to every rank,
each adding all of them: the same mean on every rank.

A collective that fails (a rank died, or stopped answering within the timeout: the
state's, else the group's) raises ckpz.Error naming the bucket, the step and the ranks
that did not answer (_dist_comm's diagnosis through the store). Not public API.
"""

import datetime
import queue
import threading

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
        _dist_comm.hold([], [work])  # freed by Python, never last by gloo's thread
    except RuntimeError as e:
        if isinstance(e, Error):
            raise
        store = _dist_comm._store()
        prefix = "ckpz/ddp/%s/" % _dist_comm._group_name(state.group)
        raise _dist_comm._dead_rank_error(e, state.group, store, prefix, state.exchanges, what, None) from None


class Worker:
    """The exchange thread of a state with overlap=True: buckets' jobs one at a time in
    the order the hook got them (DDP calls the hook in bucket order on every rank, so
    the collectives stay in the same order everywhere), each completing its future.
    After a job fails, the later ones fail at once with the same error (a rank that
    died would otherwise cost each bucket the whole timeout)."""

    def __init__(self, state):
        self.state, self.jobs, self.thread = state, queue.Queue(), None

    def submit(self, fn):
        import torch

        fut = torch.futures.Future()
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="ckpz.ddp exchange", daemon=True)
            self.thread.start()
        self.jobs.put((fn, fut))
        return fut

    def _run(self):
        while True:
            fn, fut = self.jobs.get()
            if self.state.error is not None:
                fut.set_exception(self.state.error)
                continue
            try:
                result = fn()
            except BaseException as e:  # any failure reaches backward() through the future
                if self.state.error is None:
                    self.state.error = e if isinstance(e, Error) else Error(_lib.ERR_INTERNAL, str(e))
                fut.set_exception(e)
                continue
            fut.set_result(result)


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


def exchange(state, what, send, sizes, limits, device, fixed=False):
    """Slots between the ranks: send (a CPU uint8 tensor) is cut into len(sizes) pieces,
    piece j for rank j. Variable sizes (the packets' sizes differ: entropy-coded codes,
    top-k): the sizes go first (an all_to_all of one int64 per rank), then the bytes
    (all_to_all with those splits): what travels is exactly the slots, no padding; a
    size out of [1, limits[i]] from rank i (no packet of that shard takes more) raises
    ckpz.Error here (the other ranks then time out in the next collective, naming this
    one). fixed=True: every slot from rank i is limits[i] bytes (raw codes: packet_size
    is exact), so no sizes travel: one collective instead of two. Returns the pieces
    got, one per rank (CPU)."""
    import torch

    dist = _dist_comm.dist_module()
    w = state.world
    held = []
    if fixed:
        got = list(limits)
    else:
        wire_s = _on(torch.tensor(sizes, dtype=torch.int64), device)
        wire_r = torch.empty(w, dtype=torch.int64, device=wire_s.device)
        collective(state, what, lambda: dist.all_to_all_single(wire_r, wire_s, group=state.group, async_op=True))
        got = wire_r.tolist()
        bad = [i for i, g in enumerate(got) if not 1 <= g <= limits[i]]
        if bad:
            raise Error(_lib.ERR_CORRUPT, "%s: rank %d announced a slot of %d bytes (1..%d)"
                        % (what, bad[0], got[bad[0]], limits[bad[0]]))
        state.bytes_sent += 8 * (w - 1)
        held = [wire_s, wire_r]
    wire_send = _on(send, device)
    wire_recv = torch.empty(sum(got), dtype=torch.uint8, device=wire_send.device)
    collective(state, what, lambda: dist.all_to_all_single(wire_recv, wire_send, got, list(sizes), group=state.group,
                                                           async_op=True))
    recv = wire_recv.cpu() if wire_recv.device.type != "cpu" else wire_recv.clone()  # hold empties it
    state.bytes_sent += sum(sizes) - sizes[state.rank]
    _dist_comm.hold(held + [wire_send, wire_recv])  # see _dist_comm.hold
    return list(torch.split(recv, got))


def to_all(state, what, slot, limits, device, fixed=False):
    """slot (CPU uint8) to every rank, every rank's slot back (exchange: exact sizes;
    fixed: rank i's slot is limits[i] bytes)."""
    w = state.world
    return exchange(state, what, slot.repeat(w), [slot.numel()] * w, limits, device, fixed)


STAR_MAX = 1 << 17  # elements: the most an exchange through rank 0 takes (star_allreduce)
STAR_ROOT_MAX = 1 << 19  # elements rank 0 gets in one such exchange, (W - 1) packets


def through_root(n, world, star):
    """Whether n elements go through rank 0 (star_allreduce): star asked, n <= STAR_MAX and
    rank 0's W - 1 packets at most STAR_ROOT_MAX elements (256 KiB of 4-bit codes), so its
    link's share stays near a ring's with many ranks (at 64, up to 8,322 elements)."""
    return star and n <= STAR_MAX and n * (world - 1) <= STAR_ROOT_MAX


def owners(n, world, block, star=False):
    """[(lo, hi)] of the part of n elements each rank averages: shard_bounds, or through
    rank 0 (through_root: gather to rank 0, broadcast back) all of them rank 0's, the
    others' empty."""
    return [(0, n)] + [(n, n)] * (world - 1) if through_root(n, world, star) else shard_bounds(n, world, block)


def gather(state, what, slot, device):
    """Every rank's slot (CPU uint8, the same size on every rank) to rank 0 of the group:
    there the list of them (CPU), elsewhere None."""
    import torch

    dist = _dist_comm.dist_module()
    wire = _on(slot, device)
    outs = [torch.empty_like(wire) for _ in range(state.world)] if state.rank == 0 else None
    root = _dist_comm.global_rank(state.group, 0)
    collective(state, what, lambda: dist.gather(wire, outs, dst=root, group=state.group, async_op=True))
    got = [o.cpu() if o.device.type != "cpu" else o.clone() for o in outs] if outs is not None else None
    state.bytes_sent += slot.numel() if state.rank else 0
    _dist_comm.hold([wire] + (outs or []))
    return got


def broadcast(state, what, slot, device):
    """Rank 0's slot (CPU uint8; elsewhere a buffer of its size) to every rank, CPU. gloo
    sends it down a binomial tree (rank r < 2^i sends to r + 2^i in round i): the bytes
    counted are this rank's copies in it."""
    dist = _dist_comm.dist_module()
    wire = _on(slot.clone(), device)
    root = _dist_comm.global_rank(state.group, 0)
    collective(state, what, lambda: dist.broadcast(wire, src=root, group=state.group, async_op=True))
    got = wire.cpu() if wire.device.type != "cpu" else wire.clone()
    w, r = state.world, state.rank
    state.bytes_sent += slot.numel() * sum(1 for i in range(w.bit_length()) if r < (1 << i) and r + (1 << i) < w)
    _dist_comm.hold([wire])
    return got


def quantized_allreduce(state, index, layout, buf, what, feedback=True, scratch=None, codec=None, star=False):
    """The mean over the ranks of buf (a contiguous FP32/BF16/FP16 tensor on its device),
    quantised as above (or sent as it is, see above): a new tensor like buf. layout:
    the bucket's, for its residuals (CompressionState._residuals); feedback=False: none
    (method "lowrank"'s factors P, orthonormalised after); scratch: (n zeros, zeros of my
    part of the mean, owners()) as the residuals instead of the state's: what the two
    roundings left out, for the caller (method "lowrank"'s factors Q); codec: another than
    the state's (same block); star: through rank 0 where through_root allows
    (star_allreduce; raw codes only)."""
    import torch

    codec = codec or state.codec
    w, me, n = state.world, state.rank, buf.numel()
    host = buf if buf.device.type == "cpu" else buf.cpu()
    bounds = owners(n, w, codec.block, star)
    limits = [1 + codec.packet_size(hi - lo) for lo, hi in bounds]
    residual, owned = state._residuals(index, layout, n, bounds[me]) if feedback else (None, None)
    if scratch is not None:
        residual, owned = scratch
    seed = state._seed(index)
    fixed = not codec.entropy or codec.bits == 1  # signs are always raw
    if through_root(n, w, star):
        if not fixed:
            raise Error(_lib.ERR_INTERNAL, "%s: an exchange through rank 0 takes raw codes" % what)
        return star_allreduce(state, what, codec, buf, host, residual, owned, limits[0], seed)

    # phase 1: my packet of every shard to its owner (raw codes: each slot exactly its
    # limit, every size known, none sent: fixed)
    send = torch.empty(sum(limits), dtype=torch.uint8)
    at, sizes, finite = 0, [], True
    for j, (lo, hi) in enumerate(bounds):
        s = send[at:at + limits[j]]
        s[0] = OK
        size = 0  # after a NaN, no more packing: no residual changes
        if finite:
            size = codec.pack(host[lo:hi], residual[lo:hi] if residual is not None else None, s[1:], seed + 2 * j)
        finite = finite and size > 0
        sizes.append(1 + size)
        at += limits[j]
    if finite and fixed and sizes != limits:
        raise Error(_lib.ERR_INTERNAL, "%s: raw packets of %s bytes, %s expected" % (what, sizes, limits))
    if not finite:  # no packet from me this step: every slot says why (fixed: padded to its limit)
        sizes = limits if fixed else [1] * w
        send = torch.zeros(sum(sizes), dtype=torch.uint8)
        send[[sum(sizes[:j]) for j in range(w)]] = NOT_FINITE
    elif not fixed:
        send = torch.cat([send[sum(limits[:j]):sum(limits[:j]) + sizes[j]] for j in range(w)])
    got = exchange(state, what, send, sizes, [limits[me]] * w, buf.device, fixed)

    # my shard: the mean of what the ranks sent; phase 2: every shard's mean to every rank
    lo, hi = bounds[me]
    out, size, refusal = _mean_slot(codec, got, hi - lo, owned, w, seed + 2 * me + 1, limits[me], fixed)
    outs = to_all(state, what, out if fixed else out[:1 + size], limits, buf.device, fixed)
    return _settle(state, what, codec, buf, outs, bounds, refusal)


def star_allreduce(state, what, codec, buf, host, residual, owned, limit, seed):
    """quantized_allreduce through rank 0, for small buffers of raw codes (method
    "lowrank"'s factors): every rank's slot of the whole buffer (limit bytes) gathered on
    rank 0, which checks and averages them and packs the mean (error feedback through
    owned: its residual of the whole mean; the others' is empty), then broadcasts that
    slot. The same bytes in all as the reduce-scatter and all-gather (2 (W - 1) packets of
    the buffer, 2 (W - 1) / W a rank on average, more on rank 0) in 2 (W - 1) messages
    instead of 2 W (W - 1), and one packet header a rank instead of W: where packets are
    a few kB, what the messages cost (gloo's framing, TCP segments and their ACKs) is
    much of the bytes. Flags as above: rank 0's slot tells every rank the same. Rank 0's
    link carries W - 1 packets each way where a ring's carries 2 (W - 1) / W of one: only
    exchanges through_root allows go this way."""
    import torch

    slot = torch.zeros(limit, dtype=torch.uint8)
    size = codec.pack(host, residual, slot[1:], seed)
    if not size:  # no packet from me this step: my slot says why
        slot.zero_()
        slot[0] = NOT_FINITE
    elif 1 + size != limit:
        raise Error(_lib.ERR_INTERNAL, "%s: a raw packet of %d bytes, %d expected" % (what, 1 + size, limit))
    got = gather(state, what, slot, buf.device)
    out, refusal = torch.zeros(limit, dtype=torch.uint8), None
    if got is not None:
        out, _, refusal = _mean_slot(codec, got, host.numel(), owned, state.world, seed + 1, limit, True)
    out = broadcast(state, what, out, buf.device)
    return _settle(state, what, codec, buf, [out], [(0, host.numel())], refusal)


def _mean_slot(codec, got, count, owned, w, seed, limit, fixed):
    """(slot, packet size, refusal): the mean of the packets in got (one a rank: flag, then
    count elements) packed into a slot of limit bytes (error feedback through owned), its
    flag first: OK; NOT_FINITE (some rank sent none, or the mean overflowed); REFUSED (a
    packet failed its checks: refusal, the ckpz.Error naming its sender)."""
    import torch

    mean = torch.zeros(count, dtype=torch.float32)
    flag, refusal = OK, None
    for i, slot in enumerate(got):
        f = int(slot[0])
        if f == NOT_FINITE and (slot.numel() == 1 or fixed):
            flag = max(flag, NOT_FINITE)
            continue
        try:
            if f != OK:
                raise Error(_lib.ERR_CORRUPT, "flag byte %d (0 or 1 expected)" % f)
            codec.unpack_add(slot[1:], mean, "the packet of rank %d" % i)
        except Error as e:
            flag, refusal = REFUSED, e
            break
    out = torch.empty(limit, dtype=torch.uint8)
    size = 0
    if flag == OK:
        mean.div_(w)
        size = codec.pack(mean, owned, out[1:], seed)
        if not size:
            flag = NOT_FINITE
    if flag != OK:
        out.zero_()
    out[0] = flag
    return out, size, refusal


def _settle(state, what, codec, buf, outs, bounds, refusal):
    """The result from every owner's slot (outs, the owners' parts bounds), the same way
    on every rank: a refusal raised (on the refusing rank with what it found, elsewhere
    naming that rank); a NOT_FINITE: the bucket all-reduced uncompressed; else the means
    decoded into a new tensor like buf."""
    import torch

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
    result = torch.empty(buf.numel(), dtype=buf.dtype)
    for j, (lo, hi) in enumerate(bounds):
        codec.unpack(outs[j][1:], result[lo:hi], "%s: the mean of rank %d" % (what, j))
    return result.to(buf.device) if buf.device.type != "cpu" else result


def topk_allreduce(state, index, layout, buf, what):
    """The mean over the ranks of buf, top-k sparsified (method "topk"): each rank packs
    the density's largest magnitudes of its gradient plus its residual (error feedback:
    the rest stays in the residual) as a CKGS packet with 8-bit values; every packet
    goes to every rank (exact sizes); each rank adds all of them and divides by W, so
    every rank computes the same mean. A NaN or an infinity on any rank: the bucket goes
    uncompressed on every rank; a packet refused is refused by every rank alike (each
    checks every packet), every rank raising ckpz.Error naming the sender."""
    import torch

    codec, w, n = state.codec, state.world, buf.numel()
    host = buf if buf.device.type == "cpu" else buf.cpu()
    residual, _ = state._residuals(index, layout, n, (0, 0))
    limit = 1 + codec.packet_size(n)
    slot = torch.zeros(limit, dtype=torch.uint8)
    size = codec.pack(host, residual, slot[1:], state._seed(index))
    if not size:
        slot[0] = NOT_FINITE
    got = to_all(state, what, slot[:1 + size], [limit] * w, buf.device)
    if any(int(g[0]) == NOT_FINITE and g.numel() == 1 for g in got):
        state.uncompressed_buckets += 1
        return allreduce(state, what, buf)
    acc = torch.zeros(n, dtype=torch.float32)
    for i, g in enumerate(got):
        if int(g[0]) != OK:
            raise Error(_lib.ERR_CORRUPT, "%s: the packet of rank %d: flag byte %d" % (what, i, int(g[0])))
        codec.unpack_add(g[1:], acc, "%s: the packet of rank %d" % (what, i))
    acc.div_(w)
    result = acc.to(buf.dtype)
    return result.to(buf.device) if buf.device.type != "cpu" else result


def _on(t, device):
    """t (a CPU tensor) where the collective takes it: the bucket's device (NCCL moves
    CUDA tensors only; only packets cross, the kernels run on the host)."""
    return t if device.type == "cpu" else t.to(device)
