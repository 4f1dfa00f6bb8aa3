"""ckpz's sync strategies and a migration over an emulated link, in network namespaces
this test makes (bench/dist-net: one namespace per rank on a bridge, veths limited by
tc tbf to 1 Gbit/s, addresses 10.231.x.0/24 only inside them, removed afterwards).

Two gloo ranks, each in its namespace: raw torch.distributed.broadcast, then
ckpz.distributed.broadcast, DeltaSync against an earlier state and verify; every rank
checks what it received bit for bit (a rank that finds a difference fails the run). Then
one checkpoint file moved from rank 0's namespace to rank 1's through socat, raw, through
zstd and through ckpz -c | ckpz -d, each restored file compared with cmp.

Checked here: the run succeeds, every migration restores the file, ckpz's broadcast puts
fewer bytes on the wire than the raw tensors, delta sync fewer than a full broadcast, and
verify only checksums. Exit 77 (ctest: skipped) where the kernel or the user cannot make
network namespaces."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def make_states(d):
    """Two checkpoints of one small training run (model + AdamW), 3 steps apart."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    paths = []
    for step in range(1, 7):
        loss = model(torch.randn(64, 256)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in (3, 6):
            p = os.path.join(d, "step%d.pt" % step)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, p)
            paths.append(p)
    return paths


def main():
    if os.geteuid() != 0:
        print("test_dist_net: skipped: network namespaces need root")
        return 77
    missing = [t for t in ("ip", "tc", "socat", "zstd") if not shutil.which(t)]
    if missing:
        print("test_dist_net: missing %s: scripts/install-deps installs them" % ", ".join(missing))
        return 1
    tmp = tempfile.mkdtemp(prefix="ckpz-dist-net-test-")
    try:
        prev, state = make_states(tmp)
        out = os.path.join(tmp, "out.json")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "dist-net"), "--ranks", "2", "--rates",
                            "1gbit", "--state", state, "--prev", prev, "--timeout", "300", "--json", out],
                           capture_output=True, text=True, timeout=600)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode == 77:
            return 77
        assert r.returncode == 0, "bench/dist-net exited %d" % r.returncode
        with open(out) as f:
            res = json.load(f)
        (sync,) = res["sync"]
        raw, ck, delta, verify = (sync[k]["wire_bytes"] for k in ("raw", "ckpz", "delta", "verify"))
        state_bytes = sync["state_bytes"]
        # raw broadcast: the state crosses rank 0's link once, plus TCP/IP
        assert raw >= state_bytes, (raw, state_bytes)
        assert ck < raw, "ckpz.distributed.broadcast moved %d bytes, raw tensors %d" % (ck, raw)
        assert delta < ck, "DeltaSync moved %d bytes, a full broadcast %d" % (delta, ck)
        assert verify < state_bytes // 20, "verify moved %d bytes for a %d-byte state" % (verify, state_bytes)
        (mig,) = res["migrate"]
        bad = [k for k, v in mig["ways"].items() if not v["restored_ok"]]
        assert not bad, "migration restored a different file: %s" % bad
        assert {"raw", "zstd -1", "ckpz -3"} <= set(mig["ways"]), mig["ways"].keys()
        print("test_dist_net: state %d B; wire bytes raw %d, ckpz %d (%.3fx fewer), delta %d, verify %d; "
              "migration restored by %d ways" % (state_bytes, raw, ck, raw / ck, delta, verify, len(mig["ways"])))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
