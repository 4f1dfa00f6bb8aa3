"""method="auto" of ckpz.ddp: which compression a step should use, from the link and the
step's compute time as measured during the warm-up steps.

What it measures (warm-up steps go uncompressed): the link, as the bytes a ring
all-reduce of the buckets moves per rank (2 (W - 1) / W of each) over the time those
all-reduces took, latency included; the compute time of a step, as the time between
two steps' last buckets less the time spent in the hook; and, on the last warm-up step,
each candidate's kernels on the real buckets (packing, unpacking; no residual changed):
its CPU time and its packets' bytes.

The rule is --target-bw's cost model (lib/predict/tune.c) with the hook's terms: a
candidate's step takes  max(compute, cpu + bytes / link + c * latency)  when the exchange
overlaps the backward pass (overlap=True; the tuner overlaps compression with writing
alike), and  compute + cpu + bytes / link + c * latency  when the hook runs it in-line
(nothing overlaps: the terms add); c: its collectives (collectives()), latency: one
collective's time, measured on the last warm-up step (probe); the warm-up runs in-line
either way, so that it measures each term alone. Of the candidates whose step is within
2 % of the fastest (the model is not finer than that), the least lossy wins
(none, then 8-bit, 4-bit, 1-bit, top-k), then the fastest. Candidates: none (DDP's
all-reduce), q8 and q4 with raw and entropy-coded codes, q1 (signs), top-k at the state's
density, each only up to the state's auto_max, the lossiest tier allowed. Its default is q4: the time model
knows nothing of the loss, and bench/ddp-hooks measured q8 and q4 (with error feedback)
at no hook's loss on every model while top-k at densities that pay (0.01-0.05) ended
5-28 % above it, and q1 2.7 % (GPT) to 39 % (the tests' MLP) above; so q1 and top-k
are chosen only when the user allows them (auto_max="q1", "topk"). Each
candidate's relative error on the measured buckets, ||decoded - g|| / ||g|| of one step
before error feedback, goes into the record beside the model (information: one step's
error does not tell the loss either; GPT gradients gave 0.008 for q8, 0.15 for q4, 0.18
for top-k 0.05). ckpz_tune
itself measures compression of a checkpoint file, not of a bucket, so the model is
applied here, not called. Rank 0 decides and broadcasts its choice (with the state's
timeout), so every rank takes the same. Not public API.
"""

import time

from . import _ddp_wire, _dist_comm, _grad

__all__ = []  # private module

TIE = 1.02  # within 2 % of the fastest: the model is not finer (tune.c)
TIERS = {"none": 0, "q8": 1, "q4": 2, "q1": 3, "topk": 4}  # auto_max's values: the lossiest tier allowed
# name -> (tier: lossier is higher, bits, entropy, top-k)
CANDIDATES = {"none": (0, None, False, False), "q8": (1, 8, False, False), "q8+rans": (1, 8, True, False),
              "q4": (2, 4, False, False), "q4+rans": (2, 4, True, False), "q1": (3, 1, False, False),
              "topk": (4, 8, False, True)}


def collectives(name):
    """Collectives per bucket of candidate name: DDP's all-reduce one; an exchange of
    raw codes (sizes known: _ddp_wire.exchange's fixed) two; of entropy-coded codes and
    top-k (sizes sent first) four and two."""
    tier, bits, entropy, topk = CANDIDATES[name]
    return 1 if name == "none" else 2 if topk else 4 if entropy and bits != 1 else 2


def wire_bytes(name, world, bucket_bytes, packet_bytes, buckets):
    """Bytes one rank sends per step with candidate name: an FP32/BF16/FP16 ring
    all-reduce moves 2 (W - 1) / W of each bucket; the quantised exchange the same share
    of its packets plus a flag byte per shard and, entropy-coded, the sizes (8 bytes per
    rank, twice); top-k its packet to every other rank, with a flag byte and the sizes."""
    w = world
    if name == "none":
        return 2 * (w - 1) * bucket_bytes / w
    if CANDIDATES[name][3]:
        return (w - 1) * (packet_bytes + buckets * (1 + 8))
    return 2 * (w - 1) * packet_bytes / w + buckets * 2 * (w - 1) * (1 + (8 if collectives(name) == 4 else 0))


def choose(table):
    """The choice from {name: step seconds}: the least lossy within TIE of the fastest,
    then the fastest."""
    best = min(table.values())
    ok = [n for n, t in table.items() if t <= best * TIE]
    return min(ok, key=lambda n: (CANDIDATES[n][0], table[n]))


class Planner:
    """The measurements of the warm-up steps and the choice they lead to. inject: a
    dict whose "link_bytes_per_s", "compute_s" and "latency_s" replace what is measured
    (tests; a user who knows the link), or None."""

    def __init__(self, density, block, inject=None, overlap=False, max_tier=TIERS["q4"]):
        self.density, self.block, self.inject, self.overlap = density, block, dict(inject or {}), overlap
        self.max_tier = max_tier
        self.choice = None
        self.link_time = self.link_bytes = 0.0
        self.computes = []  # compute seconds of each warm-up step after the first
        self.in_hook = 0.0  # seconds in the hook this step
        self.last_end = None  # when the previous step's last bucket was done
        self.costs = {n: [0.0, 0.0] for n in CANDIDATES}  # name -> [cpu seconds, packet bytes]
        self.errors = {n: [0.0, 0.0] for n in CANDIDATES}  # name -> [sum of squared errors, of squares]
        self.bucket_bytes = 0
        self.buckets = 0
        self.latencies = []  # seconds of each tiny collective timed (probe)
        self.allreduces = 0
        self.record = {}

    def allreduced(self, nbytes, seconds):
        """An uncompressed all-reduce of the warm-up: nbytes per rank in seconds."""
        self.link_bytes += nbytes
        self.link_time += seconds
        self.allreduces += 1

    def probe(self, state, what):
        """Times one collective of 8 bytes per rank (an all_to_all, as the exchanges'),
        right after an all-reduce (the ranks are in step): what each collective of a
        candidate costs beyond its bytes (latency, the calls' own CPU)."""
        import torch

        dist = _dist_comm.dist_module()
        dev = state._device
        send = torch.zeros(state.world, dtype=torch.int64)
        send = send if dev is None or dev.type == "cpu" else send.to(dev)
        recv = torch.empty_like(send)
        t0 = time.perf_counter()
        _ddp_wire.collective(state, what, lambda: dist.all_to_all_single(recv, send, group=state.group, async_op=True))
        self.latencies.append(time.perf_counter() - t0)

    def step_done(self, now):
        if self.last_end is not None:
            self.computes.append(max(0.0, now - self.last_end - self.in_hook))
        self.last_end, self.in_hook = now, 0.0

    def measure(self, host, world):
        """The candidates' kernels on one bucket (a CPU tensor), no residual: seconds of
        what one rank runs per step, bytes of the packets."""
        import torch

        n = host.numel()
        self.bucket_bytes += n * host.element_size()
        self.buckets += 1
        g = host.float()  # once: a BF16/FP16 bucket would be widened per candidate
        square = float(g.pow(2).sum())
        for name, (tier, bits, entropy, topk) in CANDIDATES.items():
            if name == "none" or tier > self.max_tier:
                continue
            codec = _grad.Codec(bits, self.block, entropy=entropy, density=self.density if topk else None)
            dst = torch.empty(codec.packet_size(n), dtype=torch.uint8)
            t0 = time.perf_counter()
            size = codec.pack(host, None, dst)
            t1 = time.perf_counter()
            if not size:
                continue
            acc = torch.zeros(n, dtype=torch.float32)
            codec.unpack_add(dst[:size], acc)
            t2 = time.perf_counter()
            pack_s, unpack_s = t1 - t0, t2 - t1
            self.errors[name][0] += float((acc - g).pow(2).sum())
            self.errors[name][1] += square
            if topk:  # my packet, then every rank's added
                cpu = pack_s + world * unpack_s
            else:  # every shard, the mean of mine; the packets of my shard, every mean
                cpu = pack_s * (1 + 1 / world) + 2 * unpack_s
                size += 28 * (world - 1)  # the other shards' headers and CRCs
            self.costs[name][0] += cpu
            self.costs[name][1] += size

    def table(self, world):
        """{name: modelled step seconds}, and the link and compute time used."""
        lats = sorted(self.latencies)
        latency = self.inject.get("latency_s", lats[len(lats) // 2] if lats else 0.0)
        # the all-reduces' time less their latency: the link's bytes per second
        moving = self.link_time - self.allreduces * latency
        measured = self.link_bytes / moving if moving > 0.1 * self.link_time else 1e12
        link = self.inject.get("link_bytes_per_s") or (measured if self.link_time else 1e12)
        comps = sorted(self.computes)
        compute = self.inject.get("compute_s", comps[len(comps) // 2] if comps else 0.0)
        out = {}
        for name, (tier, *_) in CANDIDATES.items():
            cpu, size = self.costs[name]
            if tier > self.max_tier or (name != "none" and not size):
                continue
            nbytes = wire_bytes(name, world, self.bucket_bytes, size, self.buckets)
            exchange = cpu + nbytes / link + self.buckets * collectives(name) * latency
            out[name] = max(compute, exchange) if self.overlap else compute + exchange
        return out, link, compute, latency

    def decide(self, state, what):
        """Rank 0's choice, broadcast (within the state's timeout): every rank's."""
        import torch

        table, link, compute, latency = self.table(state.world)
        names = list(CANDIDATES)
        mine = names.index(choose(table)) if table else 0
        dist = _dist_comm.dist_module()
        wire = torch.tensor([mine], dtype=torch.int64)
        dev = state._device
        wire = wire if dev is None or dev.type == "cpu" else wire.to(dev)
        _ddp_wire.collective(state, what, lambda: dist.broadcast(wire, src=_dist_comm.global_ranks(state.group)[0],
                                                                 group=state.group, async_op=True))
        got = int(wire.cpu()[0])
        if not 0 <= got < len(names):
            got = 0
        self.choice = names[got]
        self.record = {"choice": self.choice, "auto_max": next(n for n, t in TIERS.items() if t == self.max_tier),
                       "link_bytes_per_s": link, "compute_s": compute, "latency_s": latency,
                       "model_s": {n: round(t, 6) for n, t in table.items()},
                       "rel_error": {n: round((e / sq) ** 0.5, 6) for n, (e, sq) in self.errors.items() if sq}}
        return self.choice
