"""Moving state between ranks, compressed: broadcast, delta sync, verify, send/recv.

The sender runs ckpz.save into a file object whose writes go out as messages of at
most 4 MiB (a length, then the bytes) while the library is still compressing: the
transfer overlaps compression. The stream ends with a message of length 0 carrying the
CRC-32 of everything sent, or -1 when the sender failed (the receivers then raise,
rather than wait for bytes that will never come). Receivers read the messages into
ckpz.load, which verifies every chunk's checksum before decoding it and the content
checksum at the end. broadcast sends each message with torch.distributed.broadcast,
send/recv with send/recv; NCCL groups carry the bytes in CUDA tensors. verify compares
CRC-32s of every tensor across ranks with one all_gather. A delta sync codes the state
against the original bytes of the last state every rank holds (base=, bytes-like).
"""

import collections
import io
import pickle
import queue
import threading
import zlib

from . import _dist_comm, _dist_state, _images, _lib, _load, _save, _stream, _torchzip
from ._lib import Error

__all__ = []  # private module

PIECE = 4 << 20

Disagreement = collections.namedtuple("Disagreement", "name checksums odd", module="ckpz.distributed")
Disagreement.__doc__ = """A tensor whose copies differ between ranks (ckpz.distributed.verify):
its name, checksums {rank: CRC-32, or None where the rank lacks it or its dtype or
shape differ}, and odd, the ranks outside the largest group of equal copies."""


class _Link:
    """One way of moving a message: broadcast from src, or point to point."""

    def __init__(self, group, peer, mode):
        torch = _torchzip.torch_module()
        self.torch, self.group, self.peer, self.mode = torch, group, peer, mode
        self.dist = _dist_comm.dist_module()
        cuda = self.dist.get_backend(group) == "nccl"
        self.device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        self.moved = 0

    def _xfer(self, t, sending, hold=True):
        d = self.dist
        if self.mode == "broadcast":
            d.broadcast(t, src=_dist_comm.global_rank(self.group, self.peer), group=self.group)
        elif sending:
            d.send(t, _dist_comm.global_rank(self.group, self.peer), group=self.group)
        else:
            d.recv(t, _dist_comm.global_rank(self.group, self.peer), group=self.group)
        if hold and self.device.type == "cpu":
            _dist_comm.hold([t])  # gloo's reference is never the last (_dist_comm): t is emptied

    def put(self, head, data=b""):
        """Sends head (two int64) and then data (bytes-like, at most PIECE bytes; its
        memory may be reused once put returns: the transfer has completed by then)."""
        torch = self.torch
        self._xfer(torch.tensor(head, dtype=torch.int64, device=self.device), True)
        n = len(data)
        if n:
            t = torch.frombuffer(data, dtype=torch.uint8)
            self._xfer(t.to(self.device) if self.device.type != "cpu" else t, True)
        self.moved += 16 + n

    def get(self, host):
        """(n, crc, data): data a memoryview of the n bytes received into host (a CPU
        uint8 tensor of PIECE bytes), valid until host is reused."""
        torch = self.torch
        head = torch.zeros(2, dtype=torch.int64, device=self.device)
        self._xfer(head, False, False)
        n, crc = (int(x) for x in head.cpu())
        if self.device.type == "cpu":
            _dist_comm.hold([head])
        data = memoryview(b"")
        if n > 0:
            if n > PIECE:
                raise Error(_lib.ERR_CORRUPT, "a message of %d bytes announced, at most %d are sent" % (n, PIECE))
            if self.device.type == "cpu":
                self._xfer(host[:n], False)
            else:
                t = torch.empty(n, dtype=torch.uint8, device=self.device)
                self._xfer(t, False)
                host[:n].copy_(t)
            data = memoryview(host.numpy())[:n]
        self.moved += 16 + n
        return n, crc, data


class _Pipe:
    """A _Link's messages moved by a thread of their own, DEPTH ahead of the caller. gloo's
    send and broadcast complete only when the peer takes the bytes: on the calling
    thread the sender's compression would wait for the link and the link for the
    receiver's restore. Here the sender compresses the next messages while one crosses,
    and a receiver restores one while the next arrive. Buffers are DEPTH + 1 of PIECE
    bytes on each side, reused. A failure of the thread is raised to the caller at its
    next call; the thread never leaves the caller waiting (it keeps taking messages, or
    ends the received ones, after a failure)."""

    DEPTH = 2

    def __init__(self, link, sending):
        torch = link.torch
        self.link, self.sending, self.error, self.held = link, sending, None, None
        self.free = queue.Queue()
        for _ in range(self.DEPTH + 1):
            self.free.put(bytearray(PIECE) if sending else torch.empty(PIECE, dtype=torch.uint8))
        self.work = queue.Queue(maxsize=self.DEPTH)
        self.thread = threading.Thread(target=self._send_loop if sending else self._recv_loop, name="ckpz-link",
                                       daemon=True)
        self.thread.start()

    def _device(self):
        if self.link.device.type == "cuda":  # a new thread starts on device 0
            self.link.torch.cuda.set_device(self.link.device)

    def _send_loop(self):
        try:
            self._device()
        except BaseException as e:  # nothing will be sent; the caller hears at its next put
            self.error = e
        while True:
            head, buf, n = self.work.get()
            if head is None:
                return
            if self.error is None:
                try:
                    self.link.put(head, memoryview(buf)[:n] if n else b"")
                except BaseException as e:  # raised to the caller at its next put
                    self.error = e
                    try:  # the receivers raise rather than wait for what will not come
                        self.link.put([-1, 0])
                    except BaseException:
                        pass
            if buf is not None:
                self.free.put(buf)

    def put(self, head, data=b""):
        if self.error is not None:
            raise self.error
        n = len(data)
        buf = None
        if n:
            buf = self.free.get()
            memoryview(buf)[:n] = data
        self.work.put((head, buf, n))

    def _recv_loop(self):
        try:
            self._device()
        except BaseException as e:
            self.work.put((None, e))
            return
        while True:
            host = self.free.get()
            try:
                n, crc, data = self.link.get(host)
            except BaseException as e:
                self.work.put((None, e))
                return
            self.work.put(((n, crc, data), host))
            if n <= 0:
                return

    def get(self):
        if self.held is not None:  # the caller is done with the previous message's bytes
            self.free.put(self.held)
            self.held = None
        item, extra = self.work.get()
        if item is None:
            raise extra
        self.held = extra
        return item

    def close(self):
        """Waits for the thread: after the last message (sending, the end marker put
        first), or after the receiver has taken the last one."""
        if self.sending:
            self.work.put((None, None, 0))
        self.thread.join()
        if self.sending and self.error is not None:
            raise self.error


class _Out(io.RawIOBase):
    """A writable file object sending what is written as messages over a _Link, from one
    buffer of PIECE bytes filled in place (growing and cutting a bytearray instead cost
    0.6 s per 100 MB here: fresh memory at every turn)."""

    def __init__(self, link, keep=False):
        self.link, self.buf, self.fill, self.crc, self.total = link, bytearray(PIECE), 0, 0, 0
        self.view = memoryview(self.buf)
        self.kept = io.BytesIO() if keep else None

    def writable(self):
        return True

    def write(self, b):
        mv = memoryview(b).cast("B")
        n, done = len(mv), 0
        while done < n:
            k = min(PIECE - self.fill, n - done)
            self.view[self.fill:self.fill + k] = mv[done:done + k]
            self.fill += k
            done += k
            if self.fill == PIECE:
                self._send()
        return n

    def _send(self):
        data = self.view[:self.fill]
        if self.kept is not None:
            self.kept.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.total += self.fill
        self.link.put([self.fill, 0], data)
        self.fill = 0

    def finish(self, ok):
        if ok:
            if self.fill:
                self._send()
            self.link.put([0, self.crc])
        else:
            self.link.put([-1, 0])


class _In(io.RawIOBase):
    """A readable file object receiving messages over a _Link until the last one."""

    def __init__(self, link, who):
        self.link, self.who, self.data, self.pos, self.crc, self.done = link, who, memoryview(b""), 0, 0, False
        self.total = 0

    def readable(self):
        return True

    def readinto(self, out):
        while self.pos == len(self.data) and not self.done:
            try:
                n, crc, data = self.link.get()
            except BaseException:
                self.done = True  # the link itself failed: nothing more to drain
                raise
            if n < 0:
                self.done = True
                raise Error(_lib.ERR_READ, "%s failed while sending; nothing was received" % self.who)
            if n == 0:
                self.done = True
                if crc != self.crc:
                    raise Error(_lib.ERR_CHECKSUM, "the bytes received from %s do not match the CRC-32 it sent"
                                % self.who)
                break
            self.crc = zlib.crc32(data, self.crc)
            self.total += n
            self.data, self.pos = data, 0
        n = min(len(out), len(self.data) - self.pos)
        memoryview(out).cast("B")[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n

    def drain(self):
        while not self.done:
            self.readinto(bytearray(PIECE))


def _send_state(link, state, opts, base=None, keep=False):
    """Sends state; (compressed bytes sent, and with keep the original archive bytes the
    receivers restore)."""
    pipe = _Pipe(link, True)
    out = _Out(pipe, keep)
    ok = False
    try:
        _save.save(state, out, pickle, _torchzip.DEFAULT_PROTOCOL, True, opts["level"], opts["threads"], base,
                   opts.get("policy"), None, False, 1, opts.get("target_bw"))
        ok = True
    finally:
        try:
            out.finish(ok)
        finally:
            pipe.close()
    raw = None
    if keep:
        orig = io.BytesIO()
        _stream.decompress_file(io.BytesIO(out.kept.getvalue()), orig, opts["threads"], base)
        raw = orig.getvalue()
    return out.total, raw


def _recv_state(link, who, opts, base=None, keep=False):
    """The state received over link; with keep, also its original archive bytes."""
    pipe = _Pipe(link, False)
    src = _In(pipe, who)
    try:
        if keep:
            orig = io.BytesIO()
            _stream.decompress_file(src, orig, opts["threads"], base)
            raw = orig.getvalue()
            return _load_plain(raw, opts), raw, src.total
        # restored while it arrives (each chunk checked on arrival), then loaded in
        # place: the tensors view the restored archive
        image = _images.Pieces(None, None)
        params = _lib.make_params(threads=opts["threads"])
        _stream.stream(False, src, image, params, base, "the stream from %s" % who, opts["threads"])
        return _load.load_decoded(image, opts["threads"]), None, src.total
    finally:
        try:
            src.drain()
        finally:
            pipe.close()


def _load_plain(raw, opts):
    return _load.load(io.BytesIO(raw), None, None, None, None, False, None, opts["threads"], None, {})


def _agree(group, error, op):
    """Raises on every rank if any rank failed."""
    msgs = _dist_comm.gather(None if error is None else "%s: %s" % (type(error).__name__, error), group, op)
    failed = [(r, m) for r, m in enumerate(msgs) if m is not None]
    if failed:
        if error is not None and len(failed) == 1:
            raise error
        raise Error(_lib.ERR_READ, "; ".join("rank %d: %s" % f for f in failed))


def broadcast(state, src, group, opts, base=None, keep=False):
    """(state, original bytes or None, compressed bytes moved) on every rank."""
    rank, _ = _dist_comm.rank_world(group)
    link = _Link(group, src, "broadcast")
    error, result = None, (state, None, 0)
    try:
        if rank == src:
            n, raw = _send_state(link, state, opts, base, keep)
            result = (state, raw, n)
        else:
            result = _recv_state(link, "rank %d" % src, opts, base, keep)
    except Exception as e:
        error = e
    _agree(group, error, "ckpz.distributed.broadcast")
    return result


class DeltaSync:
    """Broadcasts of a state that changes a little between calls: each call after the
    first sends only what changed since the last state every rank holds (ckpz's delta
    coding against that state's bytes, which every rank keeps: memory of one
    uncompressed copy of the state). Call broadcast(state) on every rank of group; the
    root's state is returned on all. bytes_sent: compressed bytes of the last call."""

    def __init__(self, src=0, group=None, *, level=_lib.LEVEL_DEFAULT, threads=0):
        self.src, self.group = src, group
        self.opts = {"level": level, "threads": threads}
        self.last = None
        self.bytes_sent = 0

    def broadcast(self, state=None):
        out, raw, n = broadcast(state, self.src, self.group, self.opts, base=self.last, keep=True)
        self.last, self.bytes_sent = raw, n
        return out

    def reset(self):
        """Forgets the shared state (the next call sends everything); on every rank."""
        self.last = None


def send(state, dst, group, opts):
    link = _Link(group, dst, "p2p")
    return _dist_comm.peer_call(lambda: _send_state(link, state, opts)[0], "ckpz.distributed.send", dst)


def recv(src, group, opts):
    link = _Link(group, src, "p2p")
    return _dist_comm.peer_call(lambda: _recv_state(link, "rank %d" % src, opts)[0], "ckpz.distributed.recv", src)


def verify(state, group, threads):
    """[Disagreement] for the tensors of state whose copies are not the same on every rank."""
    torch = _torchzip.torch_module()
    _, tensors = _dist_state.flatten(torch, state)
    names = sorted(tensors)
    host = [_dist_state.host(torch, x.tensor if isinstance(x, _dist_state.Shard) else x) for x in (tensors[n] for n in names)]
    sums = _dist_state.crcs(host, threads)
    mine = {n: (_dist_state.dtype_name(t.dtype), list(t.shape), c) for n, t, c in zip(names, host, sums)}
    everyone = _dist_comm.gather(mine, group, "ckpz.distributed.verify")
    out = []
    for name in sorted(set().union(*everyone)):
        seen = [e.get(name) for e in everyone]
        kinds = collections.Counter(s for s in map(lambda x: None if x is None else (x[0], tuple(x[1]), x[2]), seen))
        if len(kinds) == 1 and None not in kinds:
            continue
        common = max((k for k in kinds if k is not None), key=lambda k: kinds[k])
        ref = (common[0], list(common[1]))
        checksums = {r: (s[2] if s is not None and [s[0], s[1]] == list(ref) else None) for r, s in enumerate(seen)}
        odd = [r for r, s in enumerate(seen) if s is None or (s[0], tuple(s[1]), s[2]) != common]
        out.append(Disagreement(name, checksums, odd))
    return out
