"""One ``conform_module`` run: npformer's float64 reference and the subject on the same drawn
weights and inputs, every tensor compared (``_Run.check``), the smallest failing example
(``shrink``), and the reference's results with some of its functions patched (a catalogued
mistake, ``_Run.expected``)."""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from ..t09_block import build_block, build_ffn
from ..t10_model import DecoderLM
from ..t11_loss import cross_entropy_backward, cross_entropy_forward
from .compare import data_scale
from .module_report import compare_tensors
from .module_subjects import WeightMapError, is_torch_module, run_numpy, run_torch
from .patching import patched
from .subject import describe_error
from .weightmap import compile_weight_map, gradients_to_ours, to_theirs


@dataclass(frozen=True)
class Tables:
    """What a block or model may need besides x, for an ``adapter``: NumPy arrays for N
    positions (convert them as your code needs). ``mask``: [N, N] "may read" (True on and
    below the diagonal); ``additive_mask``: the same as 0 / -inf; ``positions``: [N] ints;
    ``cos``, ``sin``: [N, D_rot/2] of RoPE's angles (npformer's ``Rotary.tables``; a layout
    that needs [N, D] repeats them: ``np.concatenate([cos, cos], -1)`` for half pairs,
    ``np.repeat(cos, 2, -1)`` for interleaved ones); None without RoPE."""

    positions: np.ndarray
    mask: np.ndarray
    additive_mask: np.ndarray
    cos: np.ndarray | None
    sin: np.ndarray | None


def tables(config, N):
    """The ``Tables`` of ``config`` for N positions."""
    positions = np.arange(N)
    mask = np.tril(np.ones((N, N), bool))
    cos = sin = None
    if config.positions == "rope":
        from ..t05_rope import Rotary
        head = config.d_model // config.n_heads
        cos, sin = Rotary(head, config.rope_theta, config.rope_layout, config.rope_fraction).tables(
            positions, np.float64)
    return Tables(positions, mask, np.where(mask, 0.0, -np.inf), cos, sin)


def reference(kind, config, rng):
    """npformer's float64 module of ``kind`` for ``config``."""
    if kind == "decoder":
        return DecoderLM(config, rng, np.float64)
    if kind.endswith("_mlp"):
        return build_ffn(config.block_config(), rng, np.float64)
    return build_block(config, rng, np.float64)


def draw_weights(module, rng):
    """Weights a check can see through: gains near (not at) 1, biases not 0, unit-scale weights."""
    for name, p in module.named_parameters():
        noise = rng.standard_normal(p.shape)
        if name.endswith("gamma"):
            p.data[...] = 1 + 0.3 * noise
        elif name.endswith(("beta", "bias")):
            p.data[...] = 0.3 * noise
        elif name in ("tokens.weight", "positions.weight"):
            p.data[...] = 0.5 * noise
        else:
            p.data[...] = noise / np.sqrt(p.shape[0])


def qkv_widths(config):
    """[H*D, H_kv*D, H_kv*D]: the widths of npformer's fused Q|K|V columns."""
    D = config.d_model // config.n_heads
    kv = config.n_kv_heads or config.n_heads
    return [config.n_heads * D, kv * D, kv * D]


def run_reference(kind, ref, inputs, outputs_only=False):
    """{tensor name: array}: outputs, the input's gradient and every parameter's gradient."""
    ref.zero_grad()
    if kind == "decoder":
        ids, targets = inputs
        logits, cache = ref.forward(ids)
        loss, loss_cache = cross_entropy_forward(logits, targets)
        out = {"logits": logits, "loss": np.asarray(loss)}
        if outputs_only:
            return out
        ref.backward(cross_entropy_backward(1.0, loss_cache)[0], cache)
    else:
        x, d_out = inputs
        y, cache = ref.forward(x)
        if outputs_only:
            return {"output": y}
        out = {"output": y, "d_input": ref.backward(d_out, cache)}
    out.update({f"grad {n}": p.grad.copy() for n, p in ref.named_parameters()})
    return out


class SubjectRaised(Exception):
    """The code under test raised: its error, said in one line (what, and where in their file)."""


class Run:
    """One kind, one subject, one config (and ``convention``, a ``module_conventions.Chosen``
    the reference follows): draw, run both sides, compare."""

    def __init__(self, kind, subject, weight_map, config, backward, targets_arg, adapter=None, convention=None):
        self.kind, self.config, self.adapter = kind, config, adapter
        self.made = (subject, weight_map, backward, targets_arg, adapter)
        self.convention = convention
        self.patches = dict(convention.patches) if convention else {}
        self.torch = is_torch_module(subject)
        self.rows = compile_weight_map(weight_map, kind, config, qkv_widths(config),
                                       gains_one_plus=bool(convention and convention.gains_one_plus))
        self.widths = qkv_widths(config)
        self.theirs_of = {f"grad {r.ours[0]}": r.theirs[0] for r in self.rows if len(r.theirs) == 1}
        self.parts = {f"grad {r.ours[0]}": r.theirs for r in self.rows if len(r.theirs) == 3}
        self.targets_arg = targets_arg
        if self.torch:
            self.subject = copy.deepcopy(subject).double().eval()
            self.backward = None
        elif hasattr(subject, "forward") and backward is None:
            self.subject, self.backward = subject.forward, getattr(subject, "backward", None)
        else:
            if not callable(subject):
                raise TypeError(f"subject: expected an nn.Module, a function or an object with "
                                f"forward, got {type(subject).__name__}")
            self.subject, self.backward = subject, backward

    def under(self, chosen):
        """The same subject and weight map, npformer's reference following ``chosen`` too."""
        from dataclasses import replace
        from .module_conventions import Chosen
        mine = self.convention or Chosen({})
        both = Chosen({**mine.said, **chosen.said}, {**mine.config, **chosen.config},
                      {**mine.patches, **chosen.patches}, mine.tweaks + chosen.tweaks,
                      mine.gains_one_plus or chosen.gains_one_plus)
        subject, weight_map, backward, targets_arg, adapter = self.made
        return Run(self.kind, subject, weight_map, replace(self.config, **chosen.config), backward, targets_arg,
                   adapter, both)

    @property
    def has_gradients(self):
        return self.torch or self.backward is not None

    def draw(self, seed, B, N):
        """(npformer's module with drawn weights, (input, upstream or targets))."""
        rng = np.random.default_rng(seed)
        ref = reference(self.kind, self.config, rng)
        draw_weights(ref, rng)
        if self.convention is not None:
            self.convention.tweak(ref, self.config)
        if self.kind == "decoder":
            V = self.config.vocab_size
            inputs = (rng.integers(0, V, (B, N)), rng.integers(0, V, (B, N)))
        else:
            d = self.config.d_model
            inputs = (rng.standard_normal((B, N, d)), rng.standard_normal((B, N, d)))
        return ref, inputs

    def expected(self, seed, B, N, patches=None, outputs_only=False):
        """npformer's results on the example, with ``patches`` in place."""
        ref, inputs = self.draw(seed, B, N)
        with patched({**self.patches, **(patches or {})}):
            return run_reference(self.kind, ref, inputs, outputs_only)

    def theirs(self, seed, B, N):
        """(the subject's results on the example, in npformer's names, the example's data scale)."""
        ref, inputs = self.draw(seed, B, N)
        ours = {n: p.data for n, p in ref.named_parameters()}
        mapped = {n for row in self.rows for n in row.ours}
        if set(ours) != mapped:
            raise ValueError(f"weight_map: npformer's parameters {sorted(set(ours) - mapped)} have "
                             f"no entry; entries name {sorted(mapped - set(ours))}, which a "
                             f"{self.kind!r} of this config does not have")
        theirs = to_theirs(self.rows, ours)
        extra = tables(self.config, N) if self.adapter is not None else None
        try:
            if self.torch:
                out, grads = run_torch(self.kind, self.subject, theirs, inputs, self.targets_arg, self.adapter, extra)
            else:
                out, grads = run_numpy(self.kind, self.subject, self.backward, theirs, inputs, self.adapter, extra)
        except WeightMapError:
            raise
        except Exception as error:           # noqa: BLE001 - the code under test raised
            raise SubjectRaised(describe_error(error)) from error
        if grads is not None:
            out.update({f"grad {k}": v for k, v in gradients_to_ours(self.rows, grads).items()})
        return out, data_scale(list(ours.values()) + [x for x in inputs if np.issubdtype(x.dtype, np.floating)])

    def check(self, seed, B, N):
        """[ComparedTensor] of one example."""
        out, scale = self.theirs(seed, B, N)
        return self.compare(out, self.expected(seed, B, N), scale)

    def compare(self, out, expected, scale):
        """[ComparedTensor] of the subject's results ``out`` against ``expected``."""
        checks = []
        for name, value in out.items():
            if name in self.parts:          # a fused Q|K|V of theirs: one check per part
                cuts = np.cumsum(self.widths)[:-1]
                for part, theirs_name, mine, ref_part in zip(
                        "qkv", self.parts[name], np.split(value, cuts, axis=-1),
                        np.split(expected[name], cuts, axis=-1)):
                    checks.append(compare_tensors(f"{name}[{part}]", "grad " + theirs_name, mine, ref_part,
                                                  scale))
                continue
            check = compare_tensors(name, name, value, expected[name], scale)
            if name in self.theirs_of:
                check.theirs = "grad " + self.theirs_of[name]
            checks.append(check)
        return checks


def worst(all_checks):
    """Per tensor, its worst check over the examples (first-seen order)."""
    found = {}
    for checks in all_checks:
        for c in checks:
            if c.name not in found or not c.error <= found[c.name].error:
                found[c.name] = c
    return list(found.values())


def passes(checks, tol):
    return all(c.error <= tol for c in checks)


def shrink(run, seeds, B, N, tol):
    """The smallest (N, then B) example of the first failing seed, and the tensor to look at:
    its first differing output, else its worst gradient."""
    for seed in seeds:
        if passes(run.check(seed, B, N), tol):
            continue
        for b in sorted({1, B}):
            for n in range(1, N + 1):
                checks = run.check(seed, b, n)
                if not passes(checks, tol):
                    failing = [c for c in checks if not c.error <= tol]
                    outputs = [c for c in failing if not c.name.startswith("grad")]
                    # an output that differs says more than the gradients it drags along
                    bad = outputs[0] if outputs else max(failing, key=lambda c: c.error)
                    return dict(seed=seed, B=b, N=n, tensor=bad.theirs, index=bad.index,
                                yours=bad.yours, expected=bad.expected, error=bad.error,
                                outputs=bool(outputs))
    return None
