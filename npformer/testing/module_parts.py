"""Which sub-module of a block or model is wrong: each one the weight map reaches, on its own.

When a whole module does not conform, the weight map says where its parts are: their names
under one prefix ("mlp.") map to one of npformer's sub-modules ("ffn."). Each such part of
theirs (a PyTorch sub-module found by that prefix; for NumPy code, a function handed in as
``parts={"mlp": fn}``, called ``fn(params, x)``) is run alone on a random input with the
same weights, and compared with npformer's sub-module: the output, and for PyTorch the
input's and every parameter's gradient. The report then names the part that differs, or
says every part agrees, so the difference is in how the whole joins them (a residual, the
order of the parts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compare import data_scale
from .module_report import TOL_FLOAT32, compare_tensors
from ..specs.facts import differing
from .patching import patched
from .weightmap import gradients_to_ours, nest, to_theirs

LABELS = {"norm1": "the first norm", "attn": "the attention", "norm2": "the second norm",
          "ffn": "the MLP", "norm": "the final norm"}
BLOCK_PARTS = ("norm1", "attn", "norm2", "ffn")


@dataclass
class PartCheck:
    """One sub-module checked alone: our path, their prefix, and its worst tensor."""

    ours: str                  # "ffn", "blocks.1.attn"
    theirs: str                # "mlp", "transformer.h.1.attn"
    worst: object = None       # the ComparedTensor with the largest error, None if not run
    error: str = ""            # why it could not be run alone

    @property
    def differs(self):
        return self.worst is not None and not self.worst.error <= TOL_FLOAT32

    def describe(self):
        label = LABELS.get(self.ours.rsplit(".", 1)[-1], self.ours)
        where = f"{label} ({'layer ' + self.ours.split('.')[1] + ', ' if self.ours.startswith('blocks.') else ''}" \
                + (f"their {self.theirs}, " if self.theirs else "") + f"npformer's {self.ours})"
        if self.error:
            return f"{where}: not checked alone ({self.error})"
        w = self.worst
        said = "differs" if self.differs else "agrees"
        return (f"{where} {said} on its own: worst {w.theirs} (relative error {w.error:.2e}"
                + (", yours {}, expected {})".format(*differing(w.yours, w.expected)) if self.differs else ")"))


def our_parts(kind, config):
    """npformer's sub-module paths worth checking alone in a ``kind``."""
    if kind == "decoder":
        return [f"blocks.{i}.{p}" for i in range(config.n_layers) for p in BLOCK_PARTS] + ["norm"]
    if kind.endswith("_block"):
        return list(BLOCK_PARTS)
    return []


def _prefix(names):
    """The dotted prefix every name shares ("mlp." of "mlp.c_fc.w", "mlp.c_proj.b"), or ""."""
    split = [n.split(".")[:-1] for n in names]
    common = []
    for keys in zip(*split):
        if len(set(keys)) != 1:
            break
        common.append(keys[0])
    return ".".join(common) + "." if common else ""


def _stripped(rows, ours_prefix, theirs_prefix):
    from ..interop.tables import ParamMap
    return [ParamMap(tuple(n[len(ours_prefix):] for n in r.ours), tuple(n[len(theirs_prefix):] for n in r.theirs),
                     r.to_ours, r.to_theirs) for r in rows]


def _module_at(root, path):
    node = root
    for key in path.split("."):
        node = node[int(key)] if key.isdigit() and isinstance(node, (list, tuple)) else getattr(node, key)
    return node


def trace(run, seed, B, N, parts=None):
    """[PartCheck] of every sub-module the weight map reaches; ``run``: conform_module's _Run."""
    ref, _ = run.draw(seed, B, N)
    rng = np.random.default_rng(seed + 1000)
    x = rng.standard_normal((B, N, run.config.d_model))
    d_out = rng.standard_normal((B, N, run.config.d_model))
    found = []
    for path in our_parts(run.kind, run.config):
        rows = [r for r in run.rows if all(n.startswith(path + ".") for n in r.ours)]
        prefix = _prefix([n for r in rows for n in r.theirs])
        if not rows:
            continue
        if not prefix:                      # their weights for it sit in no sub-module of their own
            theirs = sorted({n.split(".")[0] for r in rows for n in r.theirs})
            found.append(PartCheck(path, "", error=f"its weights ({', '.join(theirs)}) are not one "
                                                   f"sub-module of yours"))
            continue
        check = PartCheck(path, prefix[:-1])
        try:
            theirs_part = _their_part(run, prefix[:-1], parts)
            if theirs_part is None:
                check.error = UNREACHED
                found.append(check)
                continue
            check.worst = _compare(run, _module_at(ref, path), theirs_part,
                                   _stripped(rows, path + ".", prefix), x, d_out)
        except Exception as error:          # noqa: BLE001 - a part that cannot run alone is said so
            check.error = f"{type(error).__name__}: {error}"[:120]
        found.append(check)
    return found


UNREACHED = "no function of yours for it alone; hand one in parts= to check it"


def _their_part(run, name, parts):
    if run.torch:
        return run.subject.get_submodule(name)
    given = parts or {}
    for key in (name, name.split(".")[-1]):                 # "blocks.0.mlp", or "mlp" for every layer
        if key in given:
            return given[key]
    owner = getattr(run.subject, "__self__", None)            # a bound forward of a NumPy object
    part = getattr(owner, name.split(".")[-1], None) if owner is not None else None
    return part if callable(part) else None


def _compare(run, ours, theirs_part, rows, x, d_out):
    """The worst ComparedTensor of their part against our sub-module on ``x``."""
    ours.zero_grad()
    with patched(run.patches):                 # the conventions the whole is judged under
        y, cache = ours.forward(x)
    expected = {"output": y}
    weights = {n: p.data for n, p in ours.named_parameters()}
    theirs = to_theirs(rows, weights)
    if run.torch:
        out, grads = _run_torch_part(theirs_part, theirs, x, d_out)
        with patched(run.patches):
            expected["d_input"] = ours.backward(d_out, cache)
        expected.update({f"grad {n}": p.grad.copy() for n, p in ours.named_parameters()})
        out.update({f"grad {k}": v for k, v in gradients_to_ours(rows, grads).items()})
    else:
        result = theirs_part(nest(theirs), x)
        out = {"output": np.asarray(result[0] if isinstance(result, tuple) else result, np.float64)}
    scale = data_scale([x, d_out] + list(weights.values()))
    checks = [compare_tensors(name, name, value, expected[name], scale) for name, value in out.items()]
    return max(checks, key=lambda c: c.error)


def _run_torch_part(module, theirs, x, d_out):
    import torch
    from torch.func import functional_call

    params = {k: torch.tensor(theirs[k], dtype=torch.float64, requires_grad=True)
              for k, _ in module.named_parameters()}
    inp = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = functional_call(module, params, (inp,))
    y = y[0] if isinstance(y, (tuple, list)) else y          # an attention that returns (out, cache)
    leaves = [inp] + list(params.values())
    grads = torch.autograd.grad((y * torch.tensor(d_out)).sum(), leaves, allow_unused=True)
    as_np = [np.zeros(tuple(l.shape)) if g is None else g.detach().numpy() for g, l in zip(grads, leaves)]
    return {"output": y.detach().numpy(), "d_input": as_np[0]}, dict(zip(params, as_np[1:]))


JOIN_GAIN = 1e4      # how far rounding in parts that agree may grow through the whole, at most


def note(checks, whole_error=None):
    """The report's lines: each part that differs, then the ones that agree (or that all do).
    The joining is blamed only when every part agrees and the whole differs by more than
    ``JOIN_GAIN`` times the parts' own worst error (what their rounding can grow to)."""
    if all(c.error == UNREACHED for c in checks):          # nothing was checked alone
        return []
    wrong = [c for c in checks if c.differs]
    lines = [f"traced to a sub-module: {c.describe()}" for c in wrong]
    if not wrong and not any(c.error for c in checks):
        parts = max(c.worst.error for c in checks)
        if whole_error is None or whole_error > JOIN_GAIN * max(parts, 1e-16):
            lines.append(f"every sub-module the weight map reaches agrees on its own ({len(checks)} checked): "
                         f"the difference is in how they are joined (a residual, the order of the parts)")
        else:
            lines.append(f"every sub-module the weight map reaches agrees on its own ({len(checks)} checked, "
                         f"worst {parts:.1e}), and the whole differs by {whole_error:.1e}, no more than their "
                         f"rounding can grow to: no evidence against how they are joined")
    agree = [c for c in checks if not c.differs and not c.error]
    if agree:
        lines.append("agree on their own: " + "; ".join(
            f"{LABELS.get(c.ours.rsplit('.', 1)[-1], c.ours)} (their {c.theirs}, relative error "
            f"{c.worst.error:.1e})" for c in agree))
    lines += [c.describe() for c in checks if c.error]
    return lines
