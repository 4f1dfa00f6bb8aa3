"""Adam's beta2 and learning rate for lossy="auto", read from the optimizer state dicts of
the object saved.

auto rounds exp_avg_sq to nearest where v is renewed fast (beta2 <= 0.99) and without
bias otherwise. The library reads each group's beta2 from a torch.save file's pickle
(lib/formats/pickle.c) when its betas are floats; ckpz.save, which holds the object,
states them as policy rules "PREFIX.state.N.* auto K beta2 B" (doc/lossy.md "auto"),
which also covers betas held as tensors (their values are not in the pickle): both read
the groups alike (tests/python/test_auto_beta2.py). Optimizers are found as torch's
state_dict() writes them: a dict with "state" and "param_groups", each group with
"betas" and "params" (the state keys: ints >= 0; others are passed over, as the library
does).

The learning rate: where every such group states one lr (a float or int > 0 and < 1e30,
or a tensor holding one), auto codes a weight without a base (a chain's first file)
within one step of it. The library reads a float lr from a torch.save file's pickle (a
ckpz.distributed.save shard's too); the catch-all rule states it as "* auto K lr L"
(lr_option), which also covers an lr held as a tensor (tests/python/test_auto_lr.py).
"""
_MAX_DEPTH = 4


def _optimizers(obj, path, depth, out):
    if isinstance(obj, dict):
        groups = obj.get("param_groups")
        if "state" in obj and isinstance(groups, (list, tuple)):
            out.append((path, groups))
            return
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return
    if depth < _MAX_DEPTH:
        for k, v in items:
            if isinstance(k, (str, int)) and not isinstance(k, bool):
                _optimizers(v, path + [str(k)], depth + 1, out)


def _number(x):
    """x, or the one number a tensor (or numpy scalar) x holds; None where it holds other
    than one element or its item() fails (an object of the user's, not a tensor)."""
    if isinstance(x, (int, float)) or not hasattr(x, "item"):
        return x
    try:
        numel = x.numel() if hasattr(x, "numel") else getattr(x, "size", 1)
        return x.item() if numel == 1 else None
    except Exception:  # noqa: BLE001 - whatever a foreign object's item() raises: no number
        return None


def _beta2(group):
    betas = group.get("betas") if isinstance(group, dict) else None
    if isinstance(betas, (list, tuple)) and len(betas) == 2:
        b = _number(betas[1])
        if isinstance(b, float) and 0 < b < 1:
            return b
    return None


def beta2_rules(obj, knob):
    """Policy rules (text, "" when none) stating each Adam optimizer's beta2 in obj for
    the auto rule of knob (a word or "")."""
    found = []
    _optimizers(obj, [], 0, found)
    auto = "auto" + (" " + knob if knob else "")
    rules = []
    for path, groups in found:
        prefix = ".".join(path + ["state"])
        if any(c in prefix for c in "*?[]\\ \t\n#"):
            continue  # not a name a pattern can spell plainly
        by_beta = {}
        for g in groups:
            b = _beta2(g)
            params = g.get("params") if isinstance(g, dict) else None
            if b is not None and isinstance(params, (list, tuple)):
                by_beta.setdefault(repr(b), []).extend(
                    p for p in params if isinstance(p, int) and not isinstance(p, bool) and p >= 0)
        if len(by_beta) == 1:
            rules.append("%s.* %s beta2 %s" % (prefix, auto, next(iter(by_beta))))
        else:
            for b, params in by_beta.items():
                rules += ["%s.%d.* %s beta2 %s" % (prefix, p, auto, b) for p in params]
    return "".join(r + "\n" for r in rules)


def _lr(group):
    lr = _number(group.get("lr")) if isinstance(group, dict) else None
    if isinstance(lr, (int, float)) and not isinstance(lr, bool) and 0 < lr < 1e30:
        return float(lr)
    return None


def lr_option(obj):
    """" lr L" for the catch-all auto rule where every Adam group (betas and params) of
    every optimizer in obj states the one learning rate L; else ""."""
    found = []
    _optimizers(obj, [], 0, found)
    lrs = set()
    for _, groups in found:
        for g in groups:
            if _beta2(g) is None or not isinstance(g.get("params"), (list, tuple)):
                continue
            lrs.add(_lr(g))
    if len(lrs) != 1 or None in lrs:
        return ""
    return " lr %r" % next(iter(lrs))
