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
when one explains every tensor, unless the weight map is the preset of a model whose
weights need the other one (``weightmap.PRESET_CONVENTIONS``: GPT-2's tanh GELU, the half
RoPE pairs of Hugging Face's Llama checkpoints): then that is a defect, named. A whole that
does not conform is compared with the catalogued mistakes of npformer's functions it runs:
one that computes what the subject computes is named. ``step`` checks KV-cached decoding
(decoder only); ``adapter`` calls a subject that takes more than x (a mask, RoPE tables).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace

import numpy as np

from ..t10_model import DecoderConfig
from . import module_conventions, module_parts
from .mistakes.registry import CATALOGUE, applicable
from .module_report import TOL_FLOAT32, TOL_FLOAT64, ModuleReport, compare_tensors
from .module_run import Run, SubjectRaised, passes, shrink, worst
from .weightmap import PRESET_CONVENTIONS, nest, to_theirs

MODULE_KINDS = ("gpt2_mlp", "gpt2_block", "llama_block", "decoder")

_DEFAULTS = {
    "gpt2_mlp": DecoderConfig.gpt2(d_model=16, n_heads=4),
    "gpt2_block": DecoderConfig.gpt2(d_model=16, n_heads=4),
    "llama_block": DecoderConfig.llama(d_model=16, n_heads=4, n_kv_heads=2, ffn_hidden=24),
    "decoder": DecoderConfig.gpt2(vocab_size=32, d_model=16, n_heads=4, n_layers=2, max_len=16),
}
CONVENTIONS = module_conventions.CONFIG      # the config fields that are conventions
# The concept files whose catalogued mistakes a kind's module can make (its forward and backward run them).
_FILES = {"gpt2_mlp": ("t02_linear", "t06_activations", "t07_ffn")}
_FILES["gpt2_block"] = _FILES["gpt2_mlp"] + ("t03_softmax", "t04_attention", "t08_norm", "t09_block")
_FILES["llama_block"] = _FILES["gpt2_block"] + ("t05_rope",)
_FILES["decoder"] = _FILES["llama_block"] + ("t01_embedding", "t10_model", "t11_loss")


@dataclass(frozen=True)
class Defect:
    """A convention the subject follows that the weights of its preset's model rule out."""

    name: str
    says: str
    recheck: str = ""


# -- the reference's config ---------------------------------------------------------------------------
def _config(kind, config, convention):
    """(npformer's config of ``kind``, the ``Chosen`` of a convention given up front or None)."""
    if kind not in MODULE_KINDS:
        raise ValueError(f"kind: expected one of {MODULE_KINDS}, got {kind!r}")
    if config is None:
        config = _DEFAULTS[kind]
    elif isinstance(config, dict):
        config = replace(_DEFAULTS[kind], **config)
    elif not isinstance(config, DecoderConfig):
        raise TypeError(f"config: expected a DecoderConfig or a dict of its fields, "
                        f"got {type(config).__name__}")
    if not convention:
        return config, None
    if not isinstance(convention, dict):
        raise ValueError(f"convention: expected a dict such as {{'ffn': 'gelu'}}; got {convention!r}")
    given = module_conventions.stated(kind, config, convention)
    return replace(config, **given.config), given


def _pinned(weight_map, convention):
    """{field: (value, why)} the preset's model fixes, less what ``convention`` states."""
    pinned = PRESET_CONVENTIONS.get(weight_map, {}) if isinstance(weight_map, str) else {}
    return {k: v for k, v in pinned.items() if k not in (convention or {})}


def conform_module(kind, subject, weight_map, config=None, *, backward=None, seeds=(0, 1, 2),
                   batch=2, length=5, conventions=True, step=None, targets=True, parts=None,
                   convention=None, adapter=None):
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
    ``convention``: the convention the subject follows, stated ({"ffn": "gelu"},
    {"rope_layout": "interleaved"}); by default the usual ones are tried (``conventions``),
    except those a preset's model rules out. ``adapter``: ``adapter(call, x, tables) -> out``
    for a subject that takes more than x: ``call(*args, **kwargs)`` runs the subject with
    npformer's weights, ``tables`` (``module_run.Tables``) holds the causal mask, positions
    and RoPE's cos and sin for the example's length.
    Returns a ``ModuleReport`` (``print`` it; ``.ok``; ``.assert_conforms()``).
    """
    started = time.perf_counter()
    (config, given), seeds = _config(kind, config, convention), tuple(seeds)
    run = Run(kind, subject, weight_map, config, backward, targets, adapter, given)
    try:
        checks = worst([run.check(s, batch, length) for s in seeds])
    except SubjectRaised as raised:                # their code's error is a verdict, not ours to raise
        return ModuleReport(kind, "does not conform", _checked(kind, config, seeds, batch, length, run),
                            notes=[f"your module raised {raised}"], seconds=time.perf_counter() - started)
    report = ModuleReport(kind, "", _checked(kind, config, seeds, batch, length, run), checks)
    said = f" under convention: {given.describe()}" if given else ""
    if passes(checks, TOL_FLOAT64):
        report.verdict = "conforms" + said
    elif passes(checks, TOL_FLOAT32) and not (mistake := _exact_mistake(run, seeds, batch, length)):
        report.verdict = ("conforms" + said + " at float32 precision") if said else "conforms at float32 precision"
        _note_float32(report, checks)
    elif passes(checks, TOL_FLOAT32):            # a catalogued mistake computes it exactly: no rounding
        report.verdict, report.mistake = "does not conform", mistake
        report.smallest = shrink(run, seeds, batch, length, TOL_FLOAT64)
        report.notes.append("within float32's tolerance, but not float32 rounding: a catalogued mistake "
                            "computes exactly what your module computes")
    else:
        found = _try_conventions(run, seeds, batch, length, _pinned(weight_map, convention)) \
            if conventions and not convention else None
        if found and found[2] is None:
            report.verdict = f"conforms under convention: {found[0]}"
            report.tensors = found[1]
            if not passes(found[1], TOL_FLOAT64):
                _note_float32(report, found[1])
        else:
            _does_not_conform(report, run, checks, found, seeds, batch, length, parts)
    if step is not None:
        _check_decoding(run, step, seeds[0], batch, length, report)
    report.seconds = time.perf_counter() - started
    return report


def _does_not_conform(report, run, checks, found, seeds, batch, length, parts):
    """The verdict, the worst tensor, the smallest example, the mistake named, the parts traced."""
    report.verdict = "does not conform"
    bad = max((x for x in checks if not x.error <= TOL_FLOAT32), key=lambda x: x.error)
    report.notes.append(f"worst: {bad.theirs} (relative error {bad.error:.2e})")
    report.smallest = shrink(run, seeds, batch, length, TOL_FLOAT32)
    report.mistake = found[2] if found else _named(run, report.smallest, seeds[0], batch, length)
    report.parts = module_parts.trace(run, seeds[0], batch, length, parts)
    followed = _followed(run, report.parts, seeds[0], batch, length, parts) if not report.mistake else None
    if followed is not None:                   # parts of it follow a convention: what differs is not one
        alternative, run, report.parts = followed
        report.tensors = checks = worst([run.check(s, batch, length) for s in seeds])
        bad = max((x for x in checks if not x.error <= TOL_FLOAT32), key=lambda x: x.error)
        report.notes = [f"convention: {alternative.describe()} (the parts that follow it agree under it; "
                        f"what still differs is not a convention)", f"worst: {bad.theirs} (relative error "
                                                                    f"{bad.error:.2e})"]
        report.smallest = shrink(run, seeds, batch, length, TOL_FLOAT32)
        report.mistake = _named(run, report.smallest, seeds[0], batch, length)
    said = module_parts.note(report.parts, bad.error)       # a named mistake needs no "not checked"
    report.notes += [n for n in said if not (report.mistake and "not checked alone" in n)]


def _followed(run, parts_found, seed, batch, length, parts):
    """(convention, the run under it, its parts) of the first convention under which some of
    the sub-modules that differ agree and none that agreed differs, or None."""
    differing = {p.ours for p in parts_found if p.differs}
    if not differing:
        return None
    for alternative in module_conventions.alone(run.kind, run.config):
        alt = run.under(alternative)
        try:
            traced = module_parts.trace(alt, seed, batch, length, parts)
        except SubjectRaised:
            return None
        now = {p.ours for p in traced if p.differs}
        if now < differing:
            return alternative, alt, traced
    return None


def _checked(kind, c, seeds, batch, length, run):
    shape = (f"{len(seeds)} seeds x B={batch}, N={length}, d={c.d_model}, H={c.n_heads}"
             + (f", H_kv={c.n_kv_heads}" if c.n_kv_heads and kind == "llama_block" else "")
             + (f", V={c.vocab_size}, {c.n_layers} layers" if kind == "decoder" else ""))
    what = ("logits, loss and every parameter's gradient of the loss" if kind == "decoder"
            else "output, d_input and every parameter's gradient")
    if not run.has_gradients:
        what = ("logits and loss only (no backward given: gradients not compared)"
                if kind == "decoder" else "output only (no backward given: gradients not compared)")
    return f"{shape}; {what}"


def _note_float32(report, checks):
    report.notes.append(f"agrees to float32 precision (worst relative error "
                        f"{max(x.error for x in checks):.1e}, tolerance {TOL_FLOAT32:g}): the "
                        f"code computes in float32 somewhere inside")


def _try_conventions(run, seeds, batch, length, pinned):
    """(how to say it, checks, defect or None) of the first usual convention, or two at once,
    under which everything agrees; the defect says why the preset's model rules it out."""
    for alternative in module_conventions.alone(run.kind, run.config) + \
            module_conventions.together(run.kind, run.config):
        alt = run.under(alternative)
        try:
            if not passes(alt.check(seeds[0], batch, length), TOL_FLOAT32):   # a cheap look first
                continue
            checks = worst([alt.check(s, batch, length) for s in seeds])
        except SubjectRaised:
            return None
        if passes(checks, TOL_FLOAT32):
            return alternative.describe(), checks, _defect(alternative, pinned)
    return None


def _defect(alternative, pinned):
    """The Defect of a convention the preset's model rules out, or None."""
    for name, value in alternative.config.items():
        if name in pinned:
            right, why = pinned[name]
            return Defect(f"{name}={value!r} where the preset's model needs {name}={right!r}",
                          f"your module computes {CONVENTIONS[name][value]}, and everything "
                          f"agrees under it; but {why}", f"use {CONVENTIONS[name][right]}")
    return None


def _exact_mistake(run, seeds, batch, length):
    """The catalogued mistake that computes, to float64's tolerance, what a module within
    float32's tolerance computes (eps after the root is 1e-6 off: not rounding), or None."""
    smallest = shrink(run, seeds, batch, length, TOL_FLOAT64)
    return _named(run, smallest, seeds[0], batch, length, TOL_FLOAT64)


def _named(run, smallest, seed, batch, length, tol=TOL_FLOAT32):
    """The catalogued mistake that computes what the subject computes on the smallest example
    and on a whole one (its outputs when an output differs: a forward's mistake, whatever
    backward autograd or the subject's own gives), or None. Mistakes that agree on this
    config (1/D and 1/sqrt(H D) when H = D) are named together."""
    if smallest is None:
        return None
    only = smallest.get("outputs", False) or not run.has_gradients
    examples = [(smallest["seed"], smallest["B"], smallest["N"]), (seed, batch, length)]
    theirs, right = [], []
    for example in examples:
        values, scale = run.theirs(*example)
        if only:
            values = {k: v for k, v in values.items() if not k.startswith(("grad", "d_input"))}
        theirs.append((values, scale))
        right.append(run.expected(*example, outputs_only=only))
    files = tuple(f"{f}." for f in _FILES[run.kind])
    found = []
    for mistake, patches in applicable([m for m in CATALOGUE if m.function.startswith(files)])[0]:
        try:
            wrong = [run.expected(*example, patches, outputs_only=only) for example in examples]
        except Exception:                # noqa: BLE001 - a mistake that raises here is not what they computed
            continue
        if any(not np.array_equal(w[k], r[k]) for w, r in zip(wrong, right) for k in w) and \
                all(passes(run.compare(v, w, s), tol) for (v, s), w in zip(theirs, wrong)):
            found.append(mistake)
    if len(found) > 1:
        first = found[0]
        return Defect(first.name, f"{first.says} (on this config it computes exactly what "
                      f"{', '.join(repr(m.name) for m in found[1:])} does too)", first.recheck)
    return found[0] if found else None


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
