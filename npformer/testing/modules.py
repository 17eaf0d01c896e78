"""Check a whole module or model (yours, PyTorch or NumPy) against npformer, through a weight map.

    report = conform_module("gpt2_block", my_block, "nanogpt", config={"d_model": 16, "n_heads": 4})
    print(report)            # verdict, then every tensor's relative error and worst index

Kinds (``MODULE_KINDS``): ``"gpt2_mlp"`` (GELU-tanh MLP with biases), ``"gpt2_block"``
(pre-norm LayerNorm, fused c_attn, causal, GELU-tanh MLP), ``"llama_block"`` (RMSNorm, RoPE,
grouped-query attention, SwiGLU) and ``"decoder"`` (ids -> logits and the mean cross-entropy
loss; every parameter's gradient of that loss). ``config``: a ``DecoderConfig`` or a dict of
its fields over the kind's tiny default.

The subject:
- a PyTorch ``nn.Module``: a float64 copy is called through ``torch.func.functional_call``
  with npformer's weights in its parameter names; autograd gives its gradients. A block or
  MLP is called ``module(x)``, a decoder ``module(ids, targets)`` (or ``module(ids)`` when
  ``targets=False``), returning logits or (logits, loss);
- NumPy: a function ``forward(params, x)`` (a decoder's: ``forward(params, ids)``) taking
  their parameters as a nested dict (``weightmap.nest``), with an optional
  ``backward(d_out, cache) -> (d_x, grads)`` (then ``forward`` returns (out, cache)), or an
  object with such ``forward`` and ``backward`` methods. Without a backward only outputs are
  compared, and the report says so.

For each seed the engine draws weights (gains near 1, non-zero biases) and inputs, runs
npformer's float64 plain-track reference and the subject, and compares the output (and loss),
the input's gradient and every parameter's gradient (theirs mapped back to our names and
layouts). A failure is shrunk to the shortest sequence, then batch 1, that still fails.
Before reporting a mismatch the engine tries the kind's usual conventions (exact instead of
tanh GELU; interleaved instead of half RoPE pairs) and says "conforms under convention"
when one explains every tensor. ``step`` checks KV-cached decoding (decoder only).
"""
from __future__ import annotations

import copy
import time
from dataclasses import replace

import numpy as np

from ..t09_block import build_block, build_ffn
from ..t10_model import DecoderConfig, DecoderLM
from ..t11_loss import cross_entropy_backward, cross_entropy_forward
from . import module_parts
from .module_report import TOL_FLOAT32, TOL_FLOAT64, ModuleReport, compare_tensors
from .module_subjects import is_torch_module, run_numpy, run_torch
from .weightmap import compile_weight_map, nest, to_ours, to_theirs

MODULE_KINDS = ("gpt2_mlp", "gpt2_block", "llama_block", "decoder")

_DEFAULTS = {
    "gpt2_mlp": DecoderConfig.gpt2(d_model=16, n_heads=4),
    "gpt2_block": DecoderConfig.gpt2(d_model=16, n_heads=4),
    "llama_block": DecoderConfig.llama(d_model=16, n_heads=4, n_kv_heads=2, ffn_hidden=24),
    "decoder": DecoderConfig.gpt2(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=16),
}
# The conventions tried before a mismatch is reported: (config field, value, how to say it).
_CONVENTIONS = {"gelu_tanh": ("ffn", "gelu", "ffn='gelu' (exact erf GELU, not tanh)"),
                "gelu": ("ffn", "gelu_tanh", "ffn='gelu_tanh' (tanh GELU, not exact)")}


# -- the reference: npformer's plain track in float64 ---------------------------------------------
def _config(kind, config):
    if kind not in MODULE_KINDS:
        raise ValueError(f"kind: expected one of {MODULE_KINDS}, got {kind!r}")
    if config is None:
        return _DEFAULTS[kind]
    if isinstance(config, DecoderConfig):
        return config
    if isinstance(config, dict):
        return replace(_DEFAULTS[kind], **config)
    raise TypeError(f"config: expected a DecoderConfig or a dict of its fields, "
                    f"got {type(config).__name__}")


def _reference(kind, config, rng):
    if kind == "decoder":
        return DecoderLM(config, rng, np.float64)
    if kind.endswith("_mlp"):
        return build_ffn(config.block_config(), rng, np.float64)
    return build_block(config, rng, np.float64)


def _draw_weights(module, rng):
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


def _qkv_widths(config):
    D = config.d_model // config.n_heads
    kv = config.n_kv_heads or config.n_heads
    return [config.n_heads * D, kv * D, kv * D]


def _run_reference(kind, ref, inputs):
    """{tensor name: array}: outputs, the input's gradient and every parameter's gradient."""
    ref.zero_grad()
    if kind == "decoder":
        ids, targets = inputs
        logits, cache = ref.forward(ids)
        loss, loss_cache = cross_entropy_forward(logits, targets)
        ref.backward(cross_entropy_backward(1.0, loss_cache)[0], cache)
        out = {"logits": logits, "loss": np.asarray(loss)}
    else:
        x, d_out = inputs
        y, cache = ref.forward(x)
        out = {"output": y, "d_input": ref.backward(d_out, cache)}
    out.update({f"grad {n}": p.grad.copy() for n, p in ref.named_parameters()})
    return out


# -- comparing ---------------------------------------------------------------------------------------
class _Run:
    """One kind, one subject, one config: draw, run both sides, compare."""

    def __init__(self, kind, subject, weight_map, config, backward, targets_arg):
        self.kind, self.config = kind, config
        self.torch = is_torch_module(subject)
        self.rows = compile_weight_map(weight_map, kind, config, _qkv_widths(config))
        self.widths = _qkv_widths(config)
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

    @property
    def has_gradients(self):
        return self.torch or self.backward is not None

    def draw(self, seed, B, N):
        rng = np.random.default_rng(seed)
        ref = _reference(self.kind, self.config, rng)
        _draw_weights(ref, rng)
        if self.kind == "decoder":
            V = self.config.vocab_size
            inputs = (rng.integers(0, V, (B, N)), rng.integers(0, V, (B, N)))
        else:
            d = self.config.d_model
            inputs = (rng.standard_normal((B, N, d)), rng.standard_normal((B, N, d)))
        return ref, inputs

    def check(self, seed, B, N):
        """[TensorCheck] of one example."""
        ref, inputs = self.draw(seed, B, N)
        expected = _run_reference(self.kind, ref, inputs)
        ours = {n: p.data for n, p in ref.named_parameters()}
        mapped = {n for row in self.rows for n in row.ours}
        if set(ours) != mapped:
            raise ValueError(f"weight_map: npformer's parameters {sorted(set(ours) - mapped)} have "
                             f"no entry; entries name {sorted(mapped - set(ours))}, which a "
                             f"{self.kind!r} of this config does not have")
        theirs = to_theirs(self.rows, ours)
        if self.torch:
            out, grads = run_torch(self.kind, self.subject, theirs, inputs, self.targets_arg)
        else:
            out, grads = run_numpy(self.kind, self.subject, self.backward, theirs, inputs)
        if grads is not None:
            out.update({f"grad {k}": v for k, v in to_ours(self.rows, grads).items()})
        checks = []
        for name, value in out.items():
            if name in self.parts:          # a fused Q|K|V of theirs: one check per part
                cuts = np.cumsum(self.widths)[:-1]
                for part, theirs_name, mine, ref_part in zip(
                        "qkv", self.parts[name], np.split(value, cuts, axis=-1),
                        np.split(expected[name], cuts, axis=-1)):
                    checks.append(compare_tensors(f"{name}[{part}]", "grad " + theirs_name, mine, ref_part))
                continue
            check = compare_tensors(name, name, value, expected[name])
            if name in self.theirs_of:
                check.theirs = "grad " + self.theirs_of[name]
            checks.append(check)
        return checks


def _worst(all_checks):
    """Per tensor, its worst check over the examples (first-seen order)."""
    worst = {}
    for checks in all_checks:
        for c in checks:
            if c.name not in worst or not c.error <= worst[c.name].error:
                worst[c.name] = c
    return list(worst.values())


def _passes(checks, tol):
    return all(c.error <= tol for c in checks)


def _shrink(run, seeds, B, N, tol):
    """The smallest (N, then B) example of the first failing seed, and the tensor to look at:
    its first differing output, else its worst gradient."""
    for seed in seeds:
        if _passes(run.check(seed, B, N), tol):
            continue
        for b in sorted({1, B}):
            for n in range(1, N + 1):
                checks = run.check(seed, b, n)
                if not _passes(checks, tol):
                    failing = [c for c in checks if not c.error <= tol]
                    outputs = [c for c in failing if not c.name.startswith("grad")]
                    # an output that differs says more than the gradients it drags along
                    bad = outputs[0] if outputs else max(failing, key=lambda c: c.error)
                    return dict(seed=seed, B=b, N=n, tensor=bad.theirs, index=bad.index,
                                yours=bad.yours, expected=bad.expected, error=bad.error)
    return None


def conform_module(kind, subject, weight_map, config=None, *, backward=None, seeds=(0, 1, 2),
                   batch=2, length=5, conventions=True, step=None, targets=True, parts=None):
    """Check ``subject`` (an nn.Module, a NumPy function or object) as a whole ``kind`` module.

    ``weight_map``: {their name: our name or (our name, *marks)} or a preset ("nanogpt",
    "hf_gpt2", "hf_llama"); see ``npformer.testing.weightmap``. ``config``: a
    ``DecoderConfig`` or a dict of fields over the kind's default. ``backward``: a NumPy
    subject's backward (see the module docstring). ``step``: for a decoder, the subject's
    KV-cached decoding, ``step(model, new_ids, state) -> (logits of new_ids, state)`` with
    ``state`` None at first and ``model`` their float64 module with our weights (PyTorch) or
    their params dict (NumPy); its logits, one token at a time after a 2-token prompt, are
    compared with the full forward. ``targets=False``: a decoder is called without targets.
    ``parts``: for NumPy code, {their prefix: fn(params, x)} of its sub-modules ("mlp",
    "attn", "ln_1"; a PyTorch module's are found by name): when the whole does not conform,
    each sub-module the weight map reaches is checked alone and the report names the one
    that differs (``module_parts``).
    Returns a ``ModuleReport`` (``print`` it; ``.ok``; ``.assert_conforms()``).
    """
    started = time.perf_counter()
    config = _config(kind, config)
    seeds = tuple(seeds)
    run = _Run(kind, subject, weight_map, config, backward, targets)
    checks = _worst([run.check(s, batch, length) for s in seeds])
    c = config
    shape = (f"{len(seeds)} seeds x B={batch}, N={length}, d={c.d_model}, H={c.n_heads}"
             + (f", H_kv={c.n_kv_heads}" if c.n_kv_heads and kind == "llama_block" else "")
             + (f", V={c.vocab_size}, {c.n_layers} layers" if kind == "decoder" else ""))
    what = ("logits, loss and every parameter's gradient of the loss" if kind == "decoder"
            else "output, d_input and every parameter's gradient")
    if not run.has_gradients:
        what = ("logits and loss only (no backward given: gradients not compared)"
                if kind == "decoder" else "output only (no backward given: gradients not compared)")
    report = ModuleReport(kind, "", f"{shape}; {what}", checks)
    if _passes(checks, TOL_FLOAT64):
        report.verdict = "conforms"
    elif _passes(checks, TOL_FLOAT32):
        report.verdict = "conforms at float32 precision"
        _note_float32(report, checks)
    else:
        found = _try_conventions(kind, subject, weight_map, config, backward, targets, seeds,
                                 batch, length) if conventions else None
        if found:
            report.verdict = f"conforms under convention: {found[0]}"
            report.tensors = found[1]
            if not _passes(found[1], TOL_FLOAT64):
                _note_float32(report, found[1])
        else:
            report.verdict = "does not conform"
            bad = max((x for x in checks if not x.error <= TOL_FLOAT32), key=lambda x: x.error)
            report.notes.append(f"worst: {bad.theirs} (relative error {bad.error:.2e})")
            report.smallest = _shrink(run, seeds, batch, length, TOL_FLOAT32)
            report.parts = module_parts.trace(run, seeds[0], batch, length, parts)
            report.notes += module_parts.note(report.parts)
    if step is not None:
        _check_decoding(run, step, seeds[0], batch, length, report)
    report.seconds = time.perf_counter() - started
    return report


def _note_float32(report, checks):
    report.notes.append(f"agrees to float32 precision (worst relative error "
                        f"{max(x.error for x in checks):.1e}, tolerance {TOL_FLOAT32:g}): the "
                        f"code computes in float32 somewhere inside")


def _try_conventions(kind, subject, weight_map, config, backward, targets, seeds, batch, length):
    """(how to say it, checks) of the first usual convention under which everything agrees."""
    alternatives = []
    if config.ffn in _CONVENTIONS:
        alternatives.append(_CONVENTIONS[config.ffn])
    if config.positions == "rope" and kind != "gpt2_mlp":
        other = "interleaved" if config.rope_layout == "half" else "half"
        alternatives.append(("rope_layout", other, f"rope_layout={other!r}"))
    for name, value, say in alternatives:
        alt = replace(config, **{name: value})
        run = _Run(kind, subject, weight_map, alt, backward, targets)
        checks = _worst([run.check(s, batch, length) for s in seeds])
        if _passes(checks, TOL_FLOAT32):
            return say, checks
    return None


def _check_decoding(run, step, seed, B, N, report):
    """Their KV-cached steps against npformer's full forward: the logits of every position."""
    if run.kind != "decoder":
        raise ValueError(f"step: KV-cached decoding is checked for kind 'decoder', got {run.kind!r}")
    ref, (ids, _) = run.draw(seed, B, N)
    expected = ref.forward(ids)[0]
    theirs = to_theirs(run.rows, {n: p.data for n, p in ref.named_parameters()})
    if run.torch:
        import torch
        model = copy.deepcopy(run.subject)
        with torch.no_grad():
            model.load_state_dict({k: torch.tensor(v) for k, v in theirs.items()}, strict=False)
        wrap = lambda a: torch.tensor(a, dtype=torch.long)      # noqa: E731
        unwrap = lambda t: t.detach().numpy()                    # noqa: E731
    else:
        model, wrap, unwrap = nest(theirs), (lambda a: a), np.asarray
    state, pieces = None, []
    for start, stop in [(0, 2)] + [(i, i + 1) for i in range(2, N)]:
        logits, state = step(model, wrap(ids[:, start:stop]), state)
        pieces.append(np.asarray(unwrap(logits), np.float64))
    decoded = np.concatenate(pieces, axis=1)
    check = compare_tensors("kv_decode logits", "kv_decode logits", decoded, expected)
    report.tensors.append(check)
    report.checked += "; KV-cached decoding (a 2-token prompt, then 1 token a step) vs the full forward"
    if not check.error <= TOL_FLOAT32:
        report.verdict = "does not conform"
        if decoded.shape != expected.shape:
            report.notes.append(f"KV-cached decoding gives logits of shape {decoded.shape}, "
                                f"expected {expected.shape}")
            return
        scale = max(float(np.abs(expected).max()), 1e-12)
        per_position = np.abs(decoded - expected).max(axis=(0, 2)) / scale      # [N]
        first = int(np.argmax(~(per_position <= TOL_FLOAT32)))
        report.notes.append(f"KV-cached decoding differs from the full forward first at position "
                            f"{first} (relative error {per_position[first]:.2e}; positions "
                            f"0..1 are the prompt)")
