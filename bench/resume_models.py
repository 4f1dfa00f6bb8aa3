"""The model families bench/resume-test trains: what each builds, trains on and is
judged by. Each family is a class with the same calls (make_data, build, batch, loss,
evaluate, describe) and a table of presets; the harness knows nothing else of them.

  gpt   the GPT of bench/make-corpus (nanoGPT layout) on its seeded grammar text,
        AdamW betas (0.9, 0.95), weight decay 0.1: the harness's original model
  cnn   a small convolutional net with BatchNorm on a seeded, class-conditional image
        task (10 classes of 3x16x16 images: a class's smooth pattern, shifted, scaled,
        mixed with another class's and noised), AdamW betas (0.9, 0.999)
  lstm  a one-layer LSTM language model on the same grammar text as gpt (a smaller
        vocabulary), AdamW betas (0.9, 0.999)

Schedules (cfg["schedule"]): both warm up linearly over cfg["warmup"] steps; "cosine"
then decays to cfg["min_lr_frac"] of the peak (make-corpus's lr_at), "const" stays at
the peak. Every random choice comes from cfg["seed"] (model init, text or image pool)
or from the data seed the harness passes to batch() (the order of the batches).
"""
import importlib.machinery
import importlib.util
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def load_script(name, path):
    # bench/make-corpus has no .py suffix, so the default import machinery will not
    # find it; load it by path. Its main() is behind `if __name__ == "__main__"`, and
    # the module name here is not "__main__", so importing only defines things.
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


mc = load_script("make_corpus", os.path.join(HERE, "make-corpus"))
SCHEDULES = ("const", "cosine")


def lr_at(step, cfg):
    if cfg["schedule"] == "const" and step > cfg["warmup"]:
        return cfg["lr"]
    return mc.lr_at(step, cfg)


def adamw(model, cfg):
    """AdamW with weight decay on the matrices and kernels only (make-corpus's split)."""
    params = list(model.named_parameters())
    decay = [p for n, p in params if p.dim() >= 2]
    no_decay = [p for n, p in params if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"], betas=cfg["betas"], eps=cfg["eps"])


# ------------------------------------------------------------------------------ gpt
class GPTFamily:
    name = "gpt"
    # The model comes from make-corpus; "default" is smaller than its "full" preset
    # (10M params, ~265 s per 300 steps on 2 cores) so that three runs plus six
    # compress/restore round trips fit in ~12 minutes even on a 2-core machine that is
    # also busy with other work (d_model 256 took 10-11 min quiet, 22 min under a
    # parallel build). The LR schedule (warmup, cosine to 10%) and optimizer are
    # make-corpus's.
    PRESETS = {
        "default": dict(mc.PRESETS["full"], vocab=2048, d_model=192, n_layer=4, n_head=4,
                        seq=128, batch=8, steps=300, warmup=30, schedule="cosine",
                        first=60, every=40, eval_every=25, eval_batches=16),
        "quick": dict(mc.PRESETS["quick"], steps=80, warmup=10, schedule="cosine",
                      first=20, every=10, eval_every=10, eval_batches=8),
        # Another model and schedule: a deeper, narrower GPT (6 layers of 128, 4096
        # words, untied embeddings) trained at a constant 3e-4 after a short warmup,
        # restored every 50 of 300 steps. A constant LR keeps the updates large to the
        # end, where the cosine schedule's shrink; that is where a tolerance relative to
        # the update hurts most.
        "deep-constlr": dict(mc.PRESETS["full"], vocab=4096, d_model=128, n_layer=6,
                             n_head=4, seq=128, batch=8, steps=300, warmup=10, lr=3e-4,
                             min_lr_frac=1.0, schedule="const",
                             first=50, every=50, eval_every=25, eval_batches=16),
    }
    COMMON = mc.COMMON

    @staticmethod
    def make_data(cfg):
        g = mc.Grammar(cfg["vocab"], cfg["seed"])    # the same text make-corpus trains on
        n_train = max(200_000, cfg["steps"] * cfg["batch"] * cfg["seq"] * 2)
        return torch.from_numpy(g.stream(n_train)), torch.from_numpy(g.stream(50_000))

    @staticmethod
    def build(cfg):
        model, _, opt = mc.build(cfg)
        return model, opt

    @staticmethod
    def batch(data, cfg, gen):
        return mc.batches(data, cfg, gen)

    @staticmethod
    def loss(model, x, y, cfg):
        return F.cross_entropy(model(x).view(-1, cfg["vocab"]), y.view(-1))

    @staticmethod
    def evaluate(model, data, cfg):
        return mc.evaluate(model, data, cfg, n_batches=cfg["eval_batches"])

    @staticmethod
    def describe(cfg):
        return (f"GPT d_model={cfg['d_model']} n_layer={cfg['n_layer']} vocab={cfg['vocab']} "
                f"seq={cfg['seq']} batch={cfg['batch']}")


# ------------------------------------------------------------------------------ cnn
class ImageTask:
    """Seeded class-conditional images: each class has a smooth pattern (a sum of a few
    oriented waves per channel); a sample is its class's pattern, shifted by up to 2
    pixels, scaled, mixed at 40-70% with another class's pattern, plus Gaussian noise.
    Learnable, but not to zero loss (the mixing and noise make classes overlap)."""

    def __init__(self, cfg):
        g = torch.Generator().manual_seed(cfg["seed"])
        C, S, K = 3, cfg["size"], cfg["classes"]
        yy, xx = torch.meshgrid(torch.arange(S, dtype=torch.float32),
                                torch.arange(S, dtype=torch.float32), indexing="ij")
        pats = torch.zeros(K, C, S, S)
        for k in range(K):
            for c in range(C):
                for _ in range(3):
                    fx, fy = (torch.rand(2, generator=g) * 2 - 1) * (2 * math.pi / S) * 3
                    ph = torch.rand(1, generator=g) * 2 * math.pi
                    pats[k, c] += torch.cos(fx * xx + fy * yy + ph)
        self.pats = pats / pats.flatten(1).std(dim=1).view(K, 1, 1, 1)
        self.train = self.sample(cfg["n_train"], cfg, g)
        self.val = self.sample(cfg["n_val"], cfg, g)

    def sample(self, n, cfg, g):
        K = cfg["classes"]
        y = torch.randint(0, K, (n,), generator=g)
        other = (y + torch.randint(1, K, (n,), generator=g)) % K
        mix = 0.4 + 0.3 * torch.rand(n, 1, 1, 1, generator=g)
        x = self.pats[y] * (0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=g)) + mix * self.pats[other]
        sh = torch.randint(-2, 3, (n, 2), generator=g)
        for i in range(n):
            x[i] = torch.roll(x[i], shifts=(int(sh[i, 0]), int(sh[i, 1])), dims=(1, 2))
        x += cfg["noise"] * torch.randn(x.shape, generator=g)
        return x, y


class ConvNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        layers, c_in = [], 3
        for i, w in enumerate(cfg["widths"]):
            layers += [nn.Conv2d(c_in, w, 3, stride=1 if i == 0 else 2, padding=1, bias=False),
                       nn.BatchNorm2d(w), nn.ReLU()]
            c_in = w
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, cfg["classes"])

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


class CNNFamily:
    name = "cnn"
    PRESETS = {
        "default": dict(widths=(32, 64, 128), size=16, classes=10, noise=3.0, n_train=8192,
                        n_val=2048, batch=64, lr=1e-3, warmup=30, steps=300,
                        schedule="cosine", first=60, every=40, eval_every=25),
        "quick": dict(widths=(16, 32), size=12, classes=10, noise=1.0, n_train=2048,
                      n_val=512, batch=32, lr=3e-3, warmup=10, steps=80,
                      schedule="cosine", first=20, every=10, eval_every=10),
    }
    COMMON = dict(weight_decay=5e-4, betas=(0.9, 0.999), eps=1e-8, grad_clip=1.0,
                  min_lr_frac=0.1, seed=1234, threads=1)

    @staticmethod
    def make_data(cfg):
        t = ImageTask(cfg)
        return t.train, t.val

    @staticmethod
    def build(cfg):
        torch.manual_seed(cfg["seed"])
        model = ConvNet(cfg)
        return model, adamw(model, cfg)

    @staticmethod
    def batch(data, cfg, gen):
        ix = torch.randint(0, len(data[1]), (cfg["batch"],), generator=gen)
        return data[0][ix], data[1][ix]

    @staticmethod
    def loss(model, x, y, cfg):
        return F.cross_entropy(model(x), y)

    @staticmethod
    @torch.no_grad()
    def evaluate(model, data, cfg):
        model.eval()          # BatchNorm on its running statistics: restored state
        loss = F.cross_entropy(model(data[0]), data[1]).item()
        model.train()
        return loss

    @staticmethod
    def describe(cfg):
        return (f"CNN widths={list(cfg['widths'])} (BatchNorm) on {cfg['classes']} classes "
                f"of 3x{cfg['size']}x{cfg['size']} images, noise {cfg['noise']}, "
                f"batch={cfg['batch']}")


# ----------------------------------------------------------------------------- lstm
class LSTMLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.emb = nn.Embedding(cfg["vocab"], cfg["d_emb"])
        self.rnn = nn.LSTM(cfg["d_emb"], cfg["hidden"], num_layers=cfg["layers"],
                           batch_first=True)
        self.head = nn.Linear(cfg["hidden"], cfg["vocab"])

    def forward(self, idx):
        return self.head(self.rnn(self.emb(idx))[0])


class LSTMFamily:
    name = "lstm"
    PRESETS = {
        "default": dict(vocab=1024, d_emb=64, hidden=128, layers=1, seq=64, batch=16,
                        lr=3e-3, warmup=30, steps=300, schedule="cosine",
                        first=60, every=40, eval_every=25, eval_batches=16),
        "quick": dict(vocab=256, d_emb=32, hidden=64, layers=1, seq=32, batch=8,
                      lr=5e-3, warmup=10, steps=80, schedule="cosine",
                      first=20, every=10, eval_every=10, eval_batches=8),
    }
    COMMON = dict(weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8, grad_clip=1.0,
                  min_lr_frac=0.1, seed=1234, threads=1)

    @staticmethod
    def make_data(cfg):
        g = mc.Grammar(cfg["vocab"], cfg["seed"])
        n_train = max(100_000, cfg["steps"] * cfg["batch"] * cfg["seq"] * 2)
        return torch.from_numpy(g.stream(n_train)), torch.from_numpy(g.stream(30_000))

    @staticmethod
    def build(cfg):
        torch.manual_seed(cfg["seed"])
        model = LSTMLM(cfg)
        return model, adamw(model, cfg)

    @staticmethod
    def batch(data, cfg, gen):
        return mc.batches(data, cfg, gen)

    @staticmethod
    def loss(model, x, y, cfg):
        return F.cross_entropy(model(x).reshape(-1, cfg["vocab"]), y.reshape(-1))

    @staticmethod
    @torch.no_grad()
    def evaluate(model, data, cfg):
        gen = torch.Generator().manual_seed(999)
        model.eval()
        tot = 0.0
        for _ in range(cfg["eval_batches"]):
            x, y = mc.batches(data, cfg, gen)
            tot += LSTMFamily.loss(model, x, y, cfg).item()
        model.train()
        return tot / cfg["eval_batches"]

    @staticmethod
    def describe(cfg):
        return (f"LSTM {cfg['layers']}x{cfg['hidden']} (embedding {cfg['d_emb']}) "
                f"vocab={cfg['vocab']} seq={cfg['seq']} batch={cfg['batch']}")


FAMILIES = {f.name: f for f in (GPTFamily, CNNFamily, LSTMFamily)}


def config(family, preset):
    """The full configuration of FAMILY's PRESET (optimizer settings and seeds included)."""
    fam = FAMILIES[family]
    if preset not in fam.PRESETS:
        raise KeyError(f"family {family} has no preset {preset!r} "
                       f"(it has: {', '.join(sorted(fam.PRESETS))})")
    return dict(fam.COMMON, **fam.PRESETS[preset], family=family)
