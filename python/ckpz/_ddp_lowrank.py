"""method "lowrank" of ckpz.ddp: each gradient matrix of a bucket sent as two thin factors.

Per bucket, each parameter's gradient is viewed as a matrix, rows the parameter's first
dimension, columns the rest (a convolution's out x in*kh*kw; (out*kh) x (in*kw) where
rows + cols, its cost a rank, is less: plan). A matrix of rows x cols at
rank r is compressed when its factors take at most half of it, 2 r (rows + cols) <=
rows * cols; the others (biases, norms' weights, matrices too small or too thin) travel
in Q's packet (step 3) through the quantised exchange (_ddp_wire.quantized_allreduce
with the state's codec, entropy= applying), with error feedback of their own. On
tests/python/test_ddp_methods.py's MLP at rank 4 that and P and Q at 8 bits (below) took
the bytes from 22x to 85x fewer than the FP32 all-reduce at the same loss; at rank 8 (the
default) 52x there, 32x on the GPT (doc/gradients.md). With the state's bits=4 both
exchanges go at 4 bits (the state's codec), error feedback the same; "lowrank:R:p8"
sends P's at 8 bits (P has no error feedback: its error tilts the subspace), the rest
at 4. With raw codes (entropy=False) each exchange goes through rank 0 (gather, then
broadcast: _ddp_wire.star_allreduce): the same bytes in 2 (W - 1) messages, not 2 W (W -
1). With M the rank's gradient plus its residual (error feedback) and Q (cols x r) the
same on every rank:

  1. P = M Q; the mean of every P of the bucket and a flag per rank (its M held a NaN or
     an infinity: a NaN in the flag's place) through one exchange without error feedback
     (P's error only tilts the subspace M is projected on, and the residual below is of
     the P used: the feedback stays exact);
  2. P orthonormalised (reduced QR of the mean: every rank the same, from the same mean);
  3. Q_mine = M^T P; the mean of every Q_mine of the bucket through one exchange, each
     laid out transposed (a block holds one column: one component's scale), after the
     parts not factored (_exchange: their residuals are kept as bucket REST + index), its
     two roundings handed back: rank i's share S_i is Q_mine less what they left out,
     so that mean(S_i) is exactly the mean Q received;
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
exchanges a bucket (four collectives each with coded codes, two with raw ones; a bucket
with nothing to factor, one: the rest and the flag), each bounded by the state's timeout
(_ddp_wire.collective: a rank that died or stalled is every rank's ckpz.Error; a damaged
packet is refused as in the 8-bit exchange). Not public API.
"""

import zlib

from . import _ddp_wire, _grad

__all__ = []  # private module

REST = 1 << 20  # the key of a bucket's uncompressed parts' residuals: REST + its index
QKEY = 2 << 20  # the key (seeds of the rounding) of a bucket's Qs' exchange: QKEY + its index
DEFAULT_RANK = 8  # see doc/gradients.md: the MLP sweep and the GPT
MAX_RANK = 1024
DEFAULT_TARGET = 0.8  # lowrank:auto's relative error: rank 8's on the GPT at 4 ranks (doc/gradients.md)
SKETCH = 2  # lowrank:auto: columns of P that sketch the mean's energy


def parse(method):
    """(method, matrix rank, target error) of a method string (":p8" at the end: p_bits):
    "lowrank" -> ("lowrank",
    DEFAULT_RANK, None), "lowrank:R" -> ("lowrank", R, None), "lowrank:auto" -> ("lowrank",
    DEFAULT_RANK, DEFAULT_TARGET), "lowrank:auto=T" -> (..., T): the rank adapts (Factors.decide);
    any other method (method, None, None). ValueError for an R that is not an int in
    1..MAX_RANK or a T not in (0, 1)."""
    if not isinstance(method, str) or not method.startswith("lowrank"):
        return method, None, None
    method = method[:-3] if method.endswith(":p8") else method  # p_bits
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


def p_bits(method):
    """8 where method ends in ":p8" (P's exchange at 8 bits, the rest at the state's 4),
    else None."""
    return 8 if isinstance(method, str) and method.startswith("lowrank") and method.endswith(":p8") else None


def plan(shapes, rank):
    """[(offset, elements, matrix or None: sent as it is)] of a bucket's parameters: matrix
    (rows, cols), or (rows, cols, (out, in, kh, kw)) for a convolution viewed as (out kh) x
    (in kw) (_matrix) where that costs less a rank than out x (in kh kw)."""
    out, at = [], 0
    for shape in shapes:
        k = 1
        for d in shape:
            k *= d
        rows = shape[0] if len(shape) >= 2 else 0
        cols = k // rows if rows else 0
        mat = (rows, cols) if rows and 2 * rank * (rows + cols) <= rows * cols else None
        if mat and len(shape) == 4 and shape[0] * shape[2] + shape[1] * shape[3] < rows + cols:
            mat = (shape[0] * shape[2], shape[1] * shape[3], tuple(shape))  # factors too: fewer bytes a rank
        out.append((at, k, mat))
        at += k
    return out


def _matrix(flat, mat):
    """A parameter's elements (flat, its own layout) as plan's matrix mat (a copy for a
    convolution's (out kh) x (in kw): its rows an output channel's kernel row)."""
    if len(mat) == 2:
        return flat.view(mat)
    o, i, kh, kw = mat[2]
    return flat.view(o, i, kh, kw).permute(0, 2, 1, 3).reshape(o * kh, i * kw)


def _flat(matrix, mat):
    """_matrix's inverse: the matrix's elements in the parameter's layout (flat)."""
    if len(mat) == 2:
        return matrix.flatten()
    o, i, kh, kw = mat[2]
    return matrix.reshape(o, kh, i, kw).permute(0, 2, 1, 3).flatten()


class Factors:
    """The Qs of a state, by the parameter's key (#occurrence in the step), and the rank
    in force. With a target error (lowrank:auto) the rank adapts between steps (decide)."""

    def __init__(self, rank, target=None, p_bits=None, bits=8):
        if p_bits is not None and bits != 4:
            raise ValueError("ckpz.ddp: method \"lowrank:R:p8\" (P at 8 bits) is for bits=4")
        self.rank, self.target, self.qs, self.seen = rank, target, {}, {}
        self.p_bits, self._codec = p_bits, None
        self.error = None  # the last step's measured relative error (adaptive only)
        self._energy = []  # this step's [(|mean M - P P^T mean M|^2, [|mean(M)^T p_j|^2], cap) per matrix]

    def codec(self, state):
        """P's exchange's codec: the state's, or at p_bits (block, rounding and entropy the
        state's)."""
        if self.p_bits is None:
            return state.codec
        if self._codec is None:
            self._codec = _grad.Codec(self.p_bits, state.block, state.stochastic, entropy=state.entropy)
        return self._codec

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
        ps.append((_matrix(m[at:at + k], mat) @ q).flatten())
    flag = torch.zeros(1) if bool(torch.isfinite(m).all()) else torch.full((1,), float("nan"))
    state._seen.add(REST + index)  # the rest's residuals stay through a step sent uncompressed
    had = state.uncompressed_buckets
    lines = layout.split("\n") if named else None
    width = _width(lr)
    if mats:  # step 1: every P and the flag (P's codec, no feedback)
        got = _exchange(state, index, index, what, None, [], [], torch.cat(ps + [flag]), [], lr.codec(state),
                        buf.device)
    else:  # nothing to factor: the parts not factored and the flag, one exchange
        got = _exchange(state, index, index, what, lines, parts, rest, flag, ["lowrank/flag:1"], state.codec,
                        buf.device)
    if not got[2] or not bool(torch.isfinite(got[0][-1])):  # a NaN or an infinity on some rank (or a P that
        state.uncompressed_buckets = had + 1  # overflowed): every rank sees it, every rank sends it as it is
        return _ddp_wire.allreduce(state, what, buf)
    wire = got[0]
    out = torch.zeros(n, dtype=torch.float32)
    hats, mine, sketched = [], [], []
    pos = got[1]
    for at, k, mat, name, key in mats:
        rows = mat[0]
        block = wire[pos:pos + rows * width].view(rows, width)
        pos += rows * width
        p = torch.linalg.qr(block[:, :lr.rank])[0]
        sk = block[:, lr.rank:]  # mean(M) G: what of it P leaves out is the error's sketch
        sketched.append(float((sk - p @ (p.t() @ sk)).double().pow(2).sum()) / SKETCH)
        hats.append(p)
        mine.append(_matrix(m[at:at + k], mat).t() @ p)
    if mats:  # step 3: the parts not factored (their feedback) and every Q_mine, transposed
        tail = torch.cat([q.t().flatten() for q in mine])
        sub = ["Q/%s:%d" % (x[4], x[2][1] * lr.rank) for x in mats]
        got = _exchange(state, index, QKEY + index, what, lines, parts, rest, tail, sub, state.codec, buf.device)
        wire = got[0]  # uncompressed (a Q that overflowed): the exact mean, each share its Q_mine
    at_rest = 0
    for at, k, mat in parts:
        if mat is None:
            out[at:at + k] = wire[at_rest:at_rest + k]
            at_rest += k
    pos = got[1]
    for (at, k, mat, name, key), p, energy in zip(mats, hats, sketched):
        rows, cols = mat[:2]
        qmean, sent = wire[pos:pos + cols * lr.rank], got[3][pos - got[1]:pos - got[1] + cols * lr.rank]
        qmean, sent = qmean.view(lr.rank, cols).t(), sent.view(lr.rank, cols).t()
        pos += cols * lr.rank
        out[at:at + k] = _flat(p @ qmean.t(), mat)
        lr.qs[name] = qmean.contiguous()
        if lr.target is not None:  # what P leaves out of the mean (sketched) and its components (Q's columns)
            lr._energy.append((energy, qmean.double().pow(2).sum(0).tolist(),
                               min(MAX_RANK, rows * cols // (2 * (rows + cols)))))
        if residual is not None:
            m[at:at + k] -= _flat(p @ sent.t(), mat)
    if residual is not None:
        for at, k, mat in parts:
            if mat is None:
                m[at:at + k] = 0
        residual.copy_(m)
    result = out.to(buf.dtype)
    return result.to(buf.device) if buf.device.type != "cpu" else result


def _exchange(state, index, key, what, lines, parts, rest, tail, sub, codec, device):
    """One quantised exchange of the parts not factored (rest: from element 0, with error
    feedback) and tail (every P and the flag; every Q_mine, from a block boundary so that
    no block mixes them with the rest; or the flag alone), seeds by key, through rank 0
    where the codes are raw (star_mode). Returns (the mean received; tail's offset in it;
    whether it went compressed (not: nothing kept); the tail less what the two roundings
    left of it: phase 1's of this rank's values, W times phase 2's of the part of the
    mean this rank re-quantised, whose mean over the ranks is exactly what came back).

    The parts not factored keep their residuals under REST + index, of the whole packet
    (its layout: "rest/" + the parameter's line, "lowrank/pad", then sub, the tail's
    lines; so that they follow the parameters when DDP lays its buckets out anew, and a
    state saved when these parts rode in P's packet finds them by key); zero past them.
    The exchange works on copies, kept only when it went compressed."""
    import torch

    nrest, w, star = sum(r.numel() for r in rest), state.world, star_mode(state)
    pad = -nrest % codec.block if nrest and sub != ["lowrank/flag:1"] else 0
    vec = torch.cat(rest + [torch.zeros(pad), tail])
    n, t0 = vec.numel(), nrest + pad
    lo, hi = _ddp_wire.owners(n, w, codec.block, star)[state.rank]
    left, owned, kept = torch.zeros(n), torch.zeros(hi - lo), None
    mine = max(0, min(hi, nrest) - lo)  # my part of the mean's elements of the rest
    if nrest and state.error_feedback:
        lines = ["rest/" + line for line, (_, _, mat) in zip(lines, parts) if mat is None] if lines else []
        layout = "\n".join(lines + ["lowrank/pad:%d" % pad] * bool(pad) + sub) if lines else ""
        kept = state._residuals(REST + index, layout, n, (lo, hi))
        left[:nrest], owned[:mine] = kept[0][:nrest], kept[1][:mine]
    had = state.uncompressed_buckets
    wire = _ddp_wire.quantized_allreduce(state, key, "", _ddp_wire._on(vec, device), what, feedback=False,
                                         scratch=(left, owned), codec=codec, star=star).cpu().float()
    if state.uncompressed_buckets != had:
        return wire, t0, False, tail
    if kept is not None:
        kept[0].zero_()
        kept[1].zero_()
        kept[0][:nrest], kept[1][:mine] = left[:nrest], owned[:mine]
    a = max(lo, t0)
    if hi > a:
        left[a:hi] += w * owned[a - lo:]
    return wire, t0, True, tail - left[t0:]


def star_mode(state):
    """Method "lowrank"'s exchanges go through rank 0 where every packet is raw (fixed
    sizes): _ddp_wire.star_allreduce."""
    return not state.codec.entropy


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
