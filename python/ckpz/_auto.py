"""Adam's beta2 for lossy="auto", read from the optimizer state dicts of the object saved.

auto rounds exp_avg_sq to nearest where v is renewed fast (beta2 <= 0.99) and without
bias otherwise. The library reads each group's beta2 from a torch.save file's pickle
(lib/formats/pickle.c) when its betas are floats; ckpz.save, which holds the object,
states them as policy rules "PREFIX.state.N.* auto K beta2 B" (doc/lossy.md "auto"),
which also covers betas held as tensors (their values are not in the pickle): both read
the groups alike (tests/python/test_auto_beta2.py). Optimizers are found as torch's
state_dict() writes them: a dict with "state" and "param_groups", each group with
"betas" and "params" (the state keys: ints >= 0; others are passed over, as the library
does).
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


def _beta2(group):
    betas = group.get("betas") if isinstance(group, dict) else None
    if isinstance(betas, (list, tuple)) and len(betas) == 2:
        b = betas[1]
        b = b.item() if hasattr(b, "item") else b
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
