"""method "lowrank" of ckpz.ddp: each gradient matrix of a bucket sent as two thin factors.

Per bucket, each parameter's gradient is viewed as a matrix, rows the parameter's first
dimension, columns the rest (a convolution's out x in*kh*kw). A matrix of rows x cols at
rank r is compressed when its factors take at most half of it, 2 r (rows + cols) <=
rows * cols; the others (biases, norms' weights, matrices too small or too thin) travel
in P's packet (step 1) through the 8-bit quantised exchange (_ddp_wire.quantized_allreduce
with the state's codec, entropy= applying), with error feedback of their own. On
tests/python/test_ddp_methods.py's MLP at rank 4 that and P and Q at 8 bits (below) took
the bytes from 22x to 85x fewer than the FP32 all-reduce at the same loss; at rank 8 (the
default: the lowest at no hook's loss on bench/ddp-hooks' GPT too) 52x there, 32x on the
GPT (doc/gradients.md). With the state's bits=4 both exchanges below go at 4 bits (the
state's codec), error feedback the same: rank 20 at 4 bits is 31x on the GPT at 4 ranks
within 1 % of no hook's loss, where rank 8 at 8 bits ends 1.6 % above (doc/gradients.md).
With M the rank's gradient plus its residual (error feedback) and Q (cols x r) the same
on every rank:

  1. P = M Q; the mean of every P of the bucket and a flag per rank (its M held a NaN or
     an infinity: a NaN in the flag's place) through the 8-bit exchange without error
     feedback (P's error only tilts the subspace M is projected on, and the residual
     below is of the P used: the feedback stays exact); the parts not factored ride in
     the same packet, ahead of P (one exchange, _first: their residuals are kept as
     bucket REST + index);
  2. P orthonormalised (reduced QR of the mean: every rank the same, from the same mean);
  3. Q_mine = M^T P; the mean of every Q_mine of the bucket through the 8-bit exchange,
     each laid out transposed (a block holds one column: one component's scale), its two
     roundings handed back (_factors_q): rank i's share S_i is Q_mine less what they
     left out, so that mean(S_i) is exactly the mean Q received;
  4. the mean's approximation P Q^T (= P P^T mean(M) but for the rounding); Q is the
     next step's (warm start).

Error feedback: the residual of rank i is M_i - P S_i^T, what the projection and Q's
rounding left out of its own matrix (zero where the parameter went uncompressed). Its
mean over the ranks is mean(M) - the approximation, as if the mean itself were fed back,
and it holds no more than M_i but Q's rounding (torch's PowerSGD keeps M_i minus the
mean's approximation, whose deviations from the mean add up from step to step). So the
sum of the results over the steps equals the sum of the mean gradients less the mean of
the last residuals (with the 8-bit exchange's residuals of the parts not factored).

Adaptive rank ("lowrank:auto[=T]", Factors.target): the rank in force changes between
steps toward a relative error T of the mean's approximation over the factored matrices,
|mean M - P P^T mean M| / |mean M|. What P keeps, |P^T mean M|^2, is Q's (the mean
received; per component, its columns); what it leaves out is sketched: SKETCH more
columns of Q, normal draws seeded by the parameter and the step, whose columns of P after
step 1 are S = mean(M) G, and E |(I - P P^T) S g|^2 = |(I - P P^T) mean M|^2 per column
(the sketch of the rest only: what P keeps adds nothing to its variance). Rows bytes a
column, no collective of its own, and every rank decodes the same packets, so every rank
decides the same (decide). The sketch's columns are left out of the QR and of Q.

Q starts from a normal draw seeded by the parameter's key (its name with model=, else
dtype and shape, and its occurrence in the step), so every rank starts from the same;
the Qs are the state's (state_dict()["factors"]). A flag on any rank sends the bucket
uncompressed on every rank (every rank sees the flag), residuals and Qs unchanged. Two
8-bit exchanges (four collectives each: 8 per bucket; 12 when the parts not factored had
an exchange of their own) per bucket, each bounded by the
state's timeout (_ddp_wire.collective: a rank that died or stalled is every rank's
ckpz.Error; a damaged packet is refused as in the 8-bit exchange). Not public API.
"""

import zlib

from . import _ddp_wire

__all__ = []  # private module

REST = 1 << 20  # the key of a bucket's uncompressed parts' residuals: REST + its index
QKEY = 2 << 20  # the key (seeds of the rounding) of a bucket's Qs' exchange: QKEY + its index
DEFAULT_RANK = 8  # see doc/gradients.md: the MLP sweep and the GPT
MAX_RANK = 1024
DEFAULT_TARGET = 0.8  # lowrank:auto's relative error: rank 8's on the GPT at 4 ranks (doc/gradients.md)
SKETCH = 2  # lowrank:auto: columns of P that sketch the mean's energy


def parse(method):
    """(method, matrix rank, target error) of a method string: "lowrank" -> ("lowrank",
    DEFAULT_RANK, None), "lowrank:R" -> ("lowrank", R, None), "lowrank:auto" -> ("lowrank",
    DEFAULT_RANK, DEFAULT_TARGET), "lowrank:auto=T" -> (..., T): the rank adapts (Factors.decide);
    any other method (method, None, None). ValueError for an R that is not an int in
    1..MAX_RANK or a T not in (0, 1)."""
    if not isinstance(method, str) or not method.startswith("lowrank"):
        return method, None, None
    if method == "lowrank":
        return method, DEFAULT_RANK, None
    head, colon, r = method.partition(":")
    if head == "lowrank" and (r == "auto" or r.startswith("auto=")):
        try:
            t = float(r[5:]) if r != "auto" else DEFAULT_TARGET
        except ValueError:
            t = 0.0
        if not 0 < t < 1:
            raise ValueError("ckpz.ddp: method \"lowrank:auto=T\" takes a target error T in (0, 1), not %r" % method)
        return head, DEFAULT_RANK, t
    if head != "lowrank" or not colon or not r.isdigit() or not 1 <= int(r) <= MAX_RANK:
        raise ValueError("ckpz.ddp: method \"lowrank:R\" takes a rank R of 1..%d, not %r" % (MAX_RANK, method))
    return head, int(r), None


def plan(shapes, rank):
    """[(offset, elements, (rows, cols) or None: sent as it is)] of a bucket's parameters."""
    out, at = [], 0
    for shape in shapes:
        k = 1
        for d in shape:
            k *= d
        rows = shape[0] if len(shape) >= 2 else 0
        cols = k // rows if rows else 0
        mat = (rows, cols) if rows and 2 * rank * (rows + cols) <= rows * cols else None
        out.append((at, k, mat))
        at += k
    return out


class Factors:
    """The Qs of a state, by the parameter's key (#occurrence in the step), and the rank
    in force. With a target error (lowrank:auto) the rank adapts between steps (decide)."""

    def __init__(self, rank, target=None):
        self.rank, self.target, self.qs, self.seen = rank, target, {}, {}
        self.error = None  # the last step's measured relative error (adaptive only)
        self._energy = []  # this step's [(|mean M - P P^T mean M|^2, [|mean(M)^T p_j|^2], cap) per matrix]

    def new_step(self):
        self.seen = {}
        if self.target is not None and self._energy:
            self.rank, self.error = decide(self._energy, self.rank, self.target)
        self._energy = []

    def take(self, key, cols):
        """The Q of the next parameter of this key (cols x rank): the one kept, else a
        normal draw seeded by the key (the same on every rank). A kept Q of another rank
        (the rank adapted) keeps its columns of most energy, or gains seeded normal ones."""
        import torch

        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        name = "%s#%d" % (key, n)
        q = self.qs.get(name)
        if q is not None and q.shape[0] == cols and q.shape[1] != self.rank:
            if q.shape[1] > self.rank:
                keep = torch.sort(torch.argsort(q.norm(dim=0), descending=True)[:self.rank]).values
                q = q[:, keep].contiguous()
            else:
                g = torch.Generator().manual_seed(zlib.crc32(("%s/%d" % (name, self.rank)).encode()))
                q = torch.cat([q, torch.randn(cols, self.rank - q.shape[1], generator=g)], 1)
        if q is None or tuple(q.shape) != (cols, self.rank):
            g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            q = torch.randn(cols, self.rank, generator=g)
        return name, q

    def load(self, table, rank=None):
        """Restores state_dict's factors (copies) and, adaptive, the rank in force;
        ValueError for one that is not a Q."""
        import torch

        if self.target is not None:
            if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_RANK:
                raise ValueError("ckpz.ddp: the state's rank in force is %r, not an int in 1..%d" % (rank, MAX_RANK))
        elif rank is not None and rank != self.rank:
            raise ValueError("ckpz.ddp: the state's rank in force is %r, this one's %d" % (rank, self.rank))
        if not isinstance(table, dict):
            raise ValueError("ckpz.ddp: the state's factors are not a dict")
        for name, q in table.items():  # adaptive: Qs of the last step's rank (take resizes them)
            if not (isinstance(name, str) and isinstance(q, torch.Tensor) and q.dim() == 2
                    and q.dtype == torch.float32 and (q.shape[1] == self.rank if self.target is None
                                                      else 1 <= q.shape[1] <= MAX_RANK)):
                raise ValueError("ckpz.ddp: the state's factors[%r] is not a Q of rank %d" % (name, self.rank))
        self.rank = rank if self.target is not None else self.rank
        self.qs = {k: q.detach().to("cpu", copy=True).contiguous() for k, q in table.items()}


def decide(energy, rank, target):
    """(the next step's rank, this step's relative error) from the energies of the step's
    factored matrices [(|mean M - P P^T mean M|^2, [|mean(M)^T p_j|^2 per component], the
    largest rank that factors it)]: the error sqrt(sum of what P leaves out / sum |mean
    M|^2), |mean M|^2 being what it leaves out plus its components' (P orthonormal).
    Above the target: a quarter more (at least 1); below: the lowest rank whose components
    of most energy, per matrix, would still have kept the error within the target (at
    most a quarter less). It grows no further than the matrices factor (a rank at which
    none would, plan, would leave nothing to measure). The same inputs on every rank give
    the same rank."""
    lost = sum(a for a, _, _ in energy)
    kept = [sorted(e, reverse=True) for _, e, _ in energy]
    total = lost + sum(sum(e) for e in kept)
    if not total > 0:
        return rank, None
    step = max(1, rank // 4)

    def err(r):
        return (max(0.0, total - sum(sum(e[:r]) for e in kept)) / total) ** 0.5

    now = (max(0.0, lost) / total) ** 0.5
    if now > target:
        return max(rank, min(rank + step, max(c for _, _, c in energy))), now
    r = rank
    while r > max(1, rank - step) and err(r - 1) <= target:
        r -= 1
    return r, now


def _keys(layout):
    return [line.rpartition(":")[0] for line in layout.split("\n")] if layout else []


def allreduce(state, index, layout, shapes, buf, what):
    """The bucket's mean over the ranks as above: a new tensor like buf (contiguous)."""
    import torch

    n, lr = buf.numel(), state._lowrank
    host = buf if buf.device.type == "cpu" else buf.cpu()
    residual, _ = state._residuals(index, layout, n, (0, 0))
    m = host.float() + residual if residual is not None else host.float().clone()
    parts = plan(shapes, lr.rank)
    if sum(k for _, k, _ in parts) != n:  # not laid out as its parameters: all sent as it is
        parts = [(0, n, None)]
    keys = _keys(layout)
    named = len(keys) == len(parts)
    if not named:
        keys = ["bucket%d.%d" % (index, i) for i in range(len(parts))]
    mats, ps, rest = [], [], []
    for (at, k, mat), key in zip(parts, keys):
        if mat is None:
            rest.append(m[at:at + k])
            continue
        name, q = lr.take(key, mat[1])
        if lr.target is not None:  # the sketch's columns ride with P (_sketch)
            q = torch.cat([q, _sketch(name, mat[1], state.step)], 1)
        mats.append((at, k, mat, name, key))
        ps.append((m[at:at + k].view(mat) @ q).flatten())
    flag = torch.zeros(1) if bool(torch.isfinite(m).all()) else torch.full((1,), float("nan"))
    had = state.uncompressed_buckets
    got = _first(state, index, what, layout.split("\n") if named else None, parts, mats, rest, ps, flag, buf.device)
    if got is None:  # a NaN or an infinity on some rank: every rank sees it
        state.uncompressed_buckets = had + 1
        return _ddp_wire.allreduce(state, what, buf)
    rest, pos, wire = got
    out = torch.zeros(n, dtype=torch.float32)
    hats, mine, sketched = [], [], []
    width = _width(lr)
    for at, k, (rows, cols), name, key in mats:
        block = wire[pos:pos + rows * width].view(rows, width)
        pos += rows * width
        p = torch.linalg.qr(block[:, :lr.rank])[0]
        sk = block[:, lr.rank:]  # mean(M) G: what of it P leaves out is the error's sketch
        sketched.append(float((sk - p @ (p.t() @ sk)).double().pow(2).sum()) / SKETCH)
        hats.append(p)
        mine.append(m[at:at + k].view(rows, cols).t() @ p)
    at_rest = 0
    for at, k, mat in parts:
        if mat is None:
            out[at:at + k] = rest[at_rest:at_rest + k]
            at_rest += k
    qs = _factors_q(state, index, what, mine, buf.device)
    pos = 0
    for (at, k, (rows, cols), name, key), p, energy in zip(mats, hats, sketched):
        qmean, sent = qs[0][pos:pos + cols * lr.rank], qs[1][pos:pos + cols * lr.rank]
        qmean, sent = qmean.view(lr.rank, cols).t(), sent.view(lr.rank, cols).t()
        pos += cols * lr.rank
        out[at:at + k] = (p @ qmean.t()).flatten()
        lr.qs[name] = qmean.contiguous()
        if lr.target is not None:  # what P leaves out of the mean (sketched) and its components (Q's columns)
            lr._energy.append((energy, qmean.double().pow(2).sum(0).tolist(),
                               min(MAX_RANK, rows * cols // (2 * (rows + cols)))))
        if residual is not None:
            m[at:at + k] -= (p @ sent.t()).flatten()
    if residual is not None:
        for at, k, mat in parts:
            if mat is None:
                m[at:at + k] = 0
        residual.copy_(m)
    result = out.to(buf.dtype)
    return result.to(buf.device) if buf.device.type != "cpu" else result


def _first(state, index, what, lines, parts, mats, rest, ps, flag, device):
    """Step 1's one 8-bit exchange: the parts not factored (from element 0, zeros up to a
    block boundary so that no block mixes them with P's values), every P, the flag.
    (the mean of the parts not factored, the offset of P's in wire, wire), or None when
    some rank's flag says a value was not finite, or the exchange went uncompressed (a
    P that overflowed) (nothing changed then).

    Error feedback of the parts not factored: the state's residuals under REST + index,
    of the whole packet (its layout: "rest/" + the parameter's line, "lowrank/pad", "P/"
    + the key of each factored one, "lowrank/flag"; so that they follow the parameters
    when DDP lays its buckets out anew, and a state saved when these parts had an
    exchange of their own finds its residuals by key); zero past the parts not factored
    (P goes without feedback). The exchange works on copies, kept only when it went
    compressed."""
    import torch

    nrest = sum(r.numel() for r in rest)
    pad = -nrest % state.block if ps else 0
    vec = torch.cat(rest + [torch.zeros(pad)] + ps + [flag])
    scratch = kept = None
    if nrest and state.error_feedback:
        sub = [] if lines is None else (
            ["rest/" + line for line, (_, _, mat) in zip(lines, parts) if mat is None]
            + ["lowrank/pad:%d" % pad] * bool(pad) + ["P/%s:%d" % (x[4], x[2][0] * _width(state._lowrank)) for x in mats]
            + ["lowrank/flag:1"])
        lo, hi = _ddp_wire.shard_bounds(vec.numel(), state.world, state.block)[state.rank]
        kept = state._residuals(REST + index, "\n".join(sub), vec.numel(), (lo, hi))
        scratch = (kept[0].clone(), kept[1].clone())
        _past(scratch, nrest, lo)
    had = state.uncompressed_buckets
    wire = _ddp_wire.quantized_allreduce(state, index, "", _ddp_wire._on(vec, device), what, feedback=False,
                                         scratch=scratch).cpu()
    if state.uncompressed_buckets != had or not bool(torch.isfinite(wire[-1])):
        return None
    if kept is not None:
        _past(scratch, nrest, lo)
        kept[0].copy_(scratch[0])
        kept[1].copy_(scratch[1])
    return wire[:nrest], nrest + pad, wire


def _past(residuals, start, lo):
    """Zeros the residuals (all of the packet, my shard [lo, ...) of its mean) from
    element start on."""
    residuals[0][start:] = 0
    residuals[1][max(0, start - lo):] = 0


def _factors_q(state, index, what, mine, device):
    """(the mean of every rank's Qs, this rank's share of it) through the 8-bit exchange,
    each Q laid out transposed (a block holds one column's values: one component's
    scale). The share is Q_mine less what the two roundings left out: phase 1's of
    Q_mine, and W times phase 2's of the shard of the mean this rank re-quantised; the
    shares' mean is the mean received, so a residual M_i - P share^T keeps the error
    feedback exact. A bucket sent uncompressed (a value not finite): share Q_mine."""
    import torch

    if not mine:
        return torch.zeros(0), torch.zeros(0)
    vec = torch.cat([q.t().flatten() for q in mine])
    n, w = vec.numel(), state.world
    lo, hi = _ddp_wire.shard_bounds(n, w, state.codec.block)[state.rank]
    left, owned = torch.zeros(n), torch.zeros(hi - lo)
    had = state.uncompressed_buckets
    mean = _ddp_wire.quantized_allreduce(state, QKEY + index, "", _ddp_wire._on(vec, device), what,
                                         feedback=False, scratch=(left, owned)).cpu().float()
    if state.uncompressed_buckets != had:
        return mean, vec
    left[lo:hi] += w * owned
    return mean, vec - left


def _width(lr):
    """Columns of each P in the exchange: the rank, and lowrank:auto's sketch."""
    return lr.rank + (SKETCH if lr.target is not None else 0)


def _sketch(name, cols, step):
    """lowrank:auto's SKETCH columns of Q for this parameter and step: normal draws seeded
    by both (the same on every rank). Their columns of P, mean(M) G after the exchange,
    sketch what P leaves out of the mean (the module's docstring)."""
    import torch

    g = torch.Generator().manual_seed(zlib.crc32(("%s/sketch/%d" % (name, step)).encode()))
    return torch.randn(cols, SKETCH, generator=g)
