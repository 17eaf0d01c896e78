"""Mixture of Experts (``t14_moe.py``), as the engines know it.

A MoE layer as a layer whose weights are arguments (routing ties left out of the drawn inputs),
the gradient-check cases of the layer and of Mixtral-like models, exercise 14 and its claims.
Mistakes: ``t14_moe.json``.

A MoE layer's backward differentiates <y, d_y> + aux_weight * aux, where aux is its
load-balancing loss. To check both paths with one upstream gradient, the cases wrap the layer
(or model) in ``WithAuxLoss``: its output is the layer's output with the aux loss appended.
The case draws the aux weight first, builds the layer with it, and hands gradcheck an
upstream gradient whose last entry is that weight. The routing (which k experts a token uses)
is piecewise constant: a finite difference that crosses a top-k tie is meaningless. The cases
therefore draw their own random parameters (``randomize=False``) and redraw until every
token's k-th and (k+1)-th router probabilities differ by at least ``MIN_MARGIN``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.module import Cache, Module
from ..t10_model import DecoderConfig, DecoderLM
from ..t14_moe import MoE, MoECache
from . import claims
from .draw import Example, arrays, key_mask, sampled, size, st, weights_of
from .layered import all_parameters, grads, loaded, rng, weight_names
from .case_inputs import left_padded, normal, shape
from .registry import Spec, lookup
from .t09_block import WEIGHTS

spec = Spec("t14_moe.py")


def build_moe(d, recipe, dtype):
    """npformer's MoE layer of width ``d`` (SwiGLU experts, no biases) as ``recipe`` describes it."""
    return lookup("t14_moe.MoE")(d, recipe["n_experts"], recipe["top_k"], recipe["hidden"], "swiglu",
                                 False, recipe["aux_weight"], rng(), dtype)


def moe_forward(x, *weights, n_experts=2, top_k=1, hidden=2, aux_weight=0.01, token_mask=None):
    """x [..., d] -> (MoE(x) [..., d], cache); SwiGLU experts, no biases; backward adds
    aux_weight times the load-balancing loss's gradient."""
    recipe = {"n_experts": n_experts, "top_k": top_k, "hidden": hidden, "aux_weight": aux_weight}
    layer, params = loaded(build_moe, all_parameters, x.shape[-1], recipe, weights, x.dtype)
    out, cache = layer.forward(x, token_mask)
    return out, (layer, params, cache)


def moe_backward(d_out, cache):
    """-> (d_x, d_router, d_experts...)."""
    layer, params, inner = cache
    return (layer.backward(d_out, inner),) + grads(params)


@spec.layer("moe", "a Mixture-of-Experts layer (SwiGLU experts, top-k routing, load-balancing loss)",
            f"moe_forward(x, *weights, n_experts, top_k, hidden, aux_weight, token_mask=None) -> (y, cache); "
            f"{WEIGHTS}", (moe_forward, moe_backward), "(d_x, d_router, d_experts...)",
            ("t14_moe.MoE.forward", "t14_moe.MoE.backward"))
def moe_inputs(draw):
    """x [B, N, d], the router [d, E] and E SwiGLU experts' weights; top_k of E, the aux loss's
    weight, a token mask or none. Routing ties are left out (the chosen experts must not
    depend on how a sort breaks them): every token's k-th and (k+1)-th router probability
    differ by at least 1e-4."""
    from hypothesis import assume
    B, N, d = draw(size(1, 2)), draw(size(1, 3)), draw(size(1, 3))
    E = draw(sampled([3, 2]))
    recipe = {"n_experts": E, "top_k": draw(st().integers(1, min(E, 2))), "hidden": draw(size(1, 3)),
              "aux_weight": draw(sampled([0.5, 0.01]))}
    x = draw(arrays((B, N, d)))
    names, weights = weights_of(draw, weight_names(build_moe, all_parameters, d, recipe))
    logits = x.reshape(-1, d) @ weights[0]
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    ranked = -np.sort(-probs / probs.sum(axis=-1, keepdims=True), axis=-1)
    k = recipe["top_k"]
    assume(k == E or float(np.min(ranked[:, k - 1] - ranked[:, k])) >= 1e-4)
    return Example(("x",) + names, (x,) + weights, {**recipe, "token_mask": key_mask(draw, B, N)})


# -- gradient-check cases ---------------------------------------------------------------------------
MIN_MARGIN = 1e-3


@dataclass(frozen=True)
class WithAuxCache(Cache):
    """The wrapped target's cache and its output's shape."""

    inner: Cache
    shape: tuple


def aux_weights(target):
    """The aux-loss weight of every MoE layer in ``target`` (a MoE or a model)."""
    return [m.aux_weight for m in target.modules() if isinstance(m, MoE)]


class WithAuxLoss(Module):
    """Check harness: ``forward`` -> [output.ravel(), aux loss]; ``backward`` is the target's
    own, which adds aux_weight times the aux loss's gradient: the last upstream entry must
    be that weight."""

    def __init__(self, target):
        self.target = target

    def forward(self, *inputs, **options):
        """The target's output, flattened, with its aux loss appended."""
        out, cache = self.target.forward(*inputs, **options)
        return np.append(out.ravel(), cache.aux_loss), WithAuxCache(cache, out.shape)

    def backward(self, d_out, cache):
        """The target's backward; the last upstream entry is the aux loss's: a MoE layer takes it
        as its ``d_aux``, a model's layers must have it as their aux weight."""
        if isinstance(self.target, MoE):
            return self.target.backward(d_out[:-1].reshape(cache.shape), cache.inner, d_aux=d_out[-1])
        if any(not np.isclose(w, d_out[-1], rtol=0, atol=1e-15) for w in aux_weights(self.target)):
            raise ValueError(f"d_out: its last entry (the aux loss's upstream) must equal the layers' "
                             f"aux_weight {aux_weights(self.target)}, got {d_out[-1]}")
        return self.target.backward(d_out[:-1].reshape(cache.shape), cache.inner)


def randomize(module, rng, scale=0.5):
    """Non-trivial float64 parameters: gamma != 1, biases != 0."""
    for p in module.parameters():
        p.data += scale * rng.standard_normal(p.shape)


def margins(cache):
    """Top-k margins of every MoE layer in a MoE or DecoderLM cache."""
    if isinstance(cache, MoECache):
        return [cache.top_k_margin]
    return [block.ffn.top_k_margin for block in cache.blocks if isinstance(block.ffn, MoECache)]


def away_from_ties(build, rng, tries=200):
    """Call ``build(rng, aux_weight) -> (target, inputs, options)`` until every routing margin
    is at least MIN_MARGIN; returns the ``WithAuxLoss`` case with its upstream gradient."""
    for _ in range(tries):
        aux_weight = float(rng.standard_normal())
        target, inputs, options = build(rng, aux_weight)
        out, cache = target.forward(*inputs, **options)
        if min(margins(cache)) >= MIN_MARGIN:
            upstream = np.append(rng.standard_normal(out.size), aux_weight)
            return WithAuxLoss(target), inputs, {**options, "randomize": False, "upstream": upstream}
    raise RuntimeError("no draw with routing margins >= MIN_MARGIN")  # pragma: no cover


@spec.case("MoE")
def moe_case(rng, size):
    B, N, d, H = shape(size)
    E, k, expert = [(2, 1, "gelu"), (4, 2, "swiglu"), (3, 2, "gelu_tanh")][size]

    def build(rng, aux_weight):
        moe = MoE(d, E, k, hidden=2 * d, expert=expert, bias=size != 1, aux_weight=aux_weight,
                  rng=rng, dtype=np.float64)
        randomize(moe, rng)
        padded = {"token_mask": left_padded(B, N)} if size == 2 else {}   # padding out of the statistics
        return moe, (normal(rng, B, N, d),), padded
    return away_from_ties(build, rng)


@spec.case("DecoderLM (Mixtral)")
def mixtral_case(rng, size):
    return _mixtral(rng, size, "per_layer")


@spec.case("DecoderLM (Mixtral, pooled)")
def mixtral_pooled_case(rng, size):
    return _mixtral(rng, size, "pooled")


def _mixtral(rng, size, objective):
    B, N, d, H = shape(size)
    recipe = [dict(n_kv_heads=1, n_experts=2, top_k=1),
              dict(n_layers=2, n_experts=4, top_k=2),
              dict(n_kv_heads=2, n_layers=2, n_experts=3, top_k=2, window=3)][size]

    def build(rng, aux_weight):
        make = DecoderConfig if size == 1 else DecoderConfig.mixtral
        extra = {"ffn": "gelu"} if size == 1 else {}
        config = make(d_model=d, n_heads=H, vocab_size=11, ffn_hidden=d, moe_aux_weight=aux_weight,
                      moe_aux_objective=objective, **recipe, **extra)
        model = DecoderLM(config, rng, np.float64)
        randomize(model, rng)
        return model, (rng.integers(0, 11, (B, N)),), {"key_mask": left_padded(B, N)}
    return away_from_ties(build, rng)


spec.exercise(14, "moe", "Mixture of Experts (routing, load balancing)", "tutorial part 1, GQA and MoE",
              backward=("t14_moe.py:MoE.backward",), forward=("t14_moe.py:MoE.forward",),
              checks=(("MoE", (0, 1, 2)), ("DecoderLM (Mixtral, pooled)", (0,))), components=("moe",))


@spec.claim("moe", "an expert no token chose receives no gradient")
def unchosen_expert_gets_no_gradient(L, R):
    g = claims.rng()
    moe = L.t14_moe.MoE(8, 6, top_k=1, expert="gelu", rng=g, dtype=np.float64)
    out, cache = moe.forward(g.standard_normal((1, 2, 8)))
    moe.backward(g.standard_normal(out.shape), cache)
    for e, call in enumerate(cache.calls):
        if call is None:
            for name, p in moe.experts[e].named_parameters():
                claims.zero(f"experts.{e}.{name}.grad", p.grad)


@spec.claim("moe", "k = E identical experts act as one FFN: its input gradient; the router gets none (aux aside)")
def identical_experts_act_as_one(L, R):
    g = claims.rng()
    moe = L.t14_moe.MoE(8, 3, top_k=3, expert="gelu", bias=True, rng=g, dtype=np.float64)
    for expert in moe.experts[1:]:
        expert.load_state_dict(moe.experts[0].state_dict())
    x, G = g.standard_normal((2, 3, 8)), g.standard_normal((2, 3, 8))
    out, cache = moe.forward(x)
    d_x = moe.backward(G, cache, d_aux=0.0)
    single = moe.experts[0].astype(np.float64)
    claims.close("d_x", d_x, single.backward(G, single.forward(x)[1]))
    claims.close("router.weight.grad", moe.router.weight.grad, 0.0)


@spec.case_diagnosis
def moe_case_diagnoses(target, options, upstream, theirs, ours):
    """What a MoE layer's gradient misses, found by sending back the outputs' gradient and the
    aux loss's apart: the router learns from the outputs too (the weights of the chosen experts
    are its softmax), and the aux gradient reaches the real tokens only."""
    inner = getattr(target, "target", None)
    if inner is None or not isinstance(inner, lookup("t14_moe.MoE")) or np.ndim(upstream) != 1:
        return []
    found = []
    outputs_only = np.array(upstream)
    outputs_only[-1] = 0.0                                   # d_aux = 0: the outputs' gradient alone
    mine, right = theirs(outputs_only), ours(outputs_only)
    router = [n for n in right.grads if "router" in n and right.grads[n] is not None]
    if mine.error is None and router and all(
            not np.abs(mine.grads.get(n, 0)).max(initial=0) > 1e-12 * np.abs(right.grads[n]).max(initial=0)
            for n in router) and any(np.abs(right.grads[n]).max(initial=0) > 0 for n in router):
        found.append("no gradient reaches the router from the outputs: y = sum over the chosen experts of "
                     "weight * expert(x), and the weights are the router's renormalised softmax "
                     "(d_weights -> d_kept -> d_probs -> d_logits)")
    mask = options.get("token_mask")
    if mask is not None and not np.all(mask):
        aux_only = np.zeros_like(np.asarray(upstream, np.float64))
        aux_only[-1] = upstream[-1]                          # the aux loss's gradient alone
        mine, right = theirs(aux_only), ours(aux_only)
        name = next(iter(right.grads), None)
        found_grad = None if mine.error is not None or name is None else mine.grads.get(name)
        if found_grad is not None and np.shape(found_grad) == np.shape(right.grads[name]):
            padded = ~np.asarray(mask, bool)
            if np.abs(np.asarray(right.grads[name])[padded]).max(initial=0) == 0 and \
                    np.abs(np.asarray(found_grad)[padded]).max(initial=0) > 0:
                found.append("padding leaks into the aux gradient: P_e averages the router's probabilities "
                             "over the real tokens only, so a padded position gets no load-balancing "
                             "gradient (multiply by cache.real)")
    return found
