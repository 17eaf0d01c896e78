"""Mixture of Experts (MoE): E expert FFNs, each token sent to the k its router prefers.

A variant of the block's FFN (``t07_ffn``): in the article's example a router picks 2 of 8
experts for every token and mixes their outputs by its weights. Here, with T tokens:

    probs   = softmax(x W_router)                        [T, E]  (T = all tokens)
    chosen  = the k experts with the highest probs       [T, k]
    weights = probs[chosen] / sum(probs[chosen])         [T, k]  (kept weights sum to 1)
    y       = sum_s weights[:, s] * Expert_{chosen[:, s]}(x)

Each expert runs once on the tokens routed to it (a gather), never on all of them,
so a token costs k expert FFNs however many experts exist: the *active*
parameters per token are the router plus k experts, the *total* all E experts.

Load balancing. A router that sends everything to one expert wastes the rest, so
training adds an auxiliary loss (Switch Transformer, Mixtral):

    aux = E * sum_e f_e * P_e,   f_e = (routing slots sent to e) / T,   P_e = mean_t probs[t, e]

(T counts the real tokens: with a ``token_mask`` padded positions are left out of f and P.)

f_e is the fraction of tokens that have e among their k choices (sum_e f_e = k),
so a perfectly balanced router (f_e = k/E, P_e = 1/E) gives aux = k, and so does
any router whose mean probabilities are uniform. f_e is a count, so the gradient
of aux flows through P_e only.

Two objectives over a stack of MoE layers (``AUX_OBJECTIVES``):
- "per_layer": one aux loss per layer, summed (the Switch Transformer's way);
- "pooled": Hugging Face's Mixtral, one aux loss from f and P averaged over every
  layer's routing, E * sum_e mean_l(f_e) * mean_l(P_e) (``pooled_aux_loss``).
They agree for one layer and differ for more.

Protocol: ``forward(x, token_mask=None) -> (y, cache)`` with ``cache.aux_loss`` (this
layer's aux, a float). ``backward(d_y, cache)`` returns d_x and adds into every
parameter's grad the gradient of  <y, d_y> + aux_weight * aux : the layer adds its own
weighted auxiliary gradient, so a model trained on  CE + aux_weight * (sum of aux losses)
needs nothing beyond its usual backward. ``backward(d_y, cache, d_aux=g)`` uses g instead
of ``aux_weight``; ``backward(d_y, cache, d_mean_probs=g)`` takes the gradient of the
training objective with respect to this layer's P [E] directly (the pooled objective).

Inside a decoder (``t10_model``) the blocks know nothing of routing: they hand their FFN
whatever keywords they receive. ``router_inputs`` gives a MoE layer the key mask,
``router_loss`` sums (or pools) the layers' aux losses after the forward, and
``router_grads`` gives each layer's backward its share of the pooled loss's gradient.

No fast twins: everything here runs as written on either track (a ``print`` in it shows);
the experts' projections call the twins named in ``t02_linear.py`` and ``t07_ffn.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .t07_ffn import FFN, SwiGLU
from .t06_activations import ACTIVATIONS
from .t03_softmax import SoftmaxCache, softmax_backward, softmax_forward
from .t02_linear import Linear
from .core.module import Cache, Module
from .core.validate import check_positive, check_rng

EXPERT_KINDS = ("swiglu",) + tuple(ACTIVATIONS)   # SwiGLU, or an FFN with this activation
AUX_OBJECTIVES = ("per_layer", "pooled")


class MoECounts(NamedTuple):
    """Parameter counts of one MoE layer (see ``MoE.counts``)."""

    per_expert: int
    router: int
    experts_total: int    # all E experts
    experts_active: int   # the k experts one token runs through
    total: int            # router + all experts: what must be stored
    active: int           # router + k experts: what one token computes with


@dataclass(frozen=True)
class ExpertCall(Cache):
    """One expert's share of a forward: which (token, slot) pairs it served."""

    rows: np.ndarray      # [T_e] token indices routed to this expert
    slots: np.ndarray     # [T_e] which of the token's k choices it is
    out: np.ndarray       # [T_e, d] the expert's output (needed for d_weights)
    expert: Cache


@dataclass(frozen=True)
class MoECache(Cache):
    """What the MoE backward needs: routing, kept weights, each expert's call, statistics."""

    router: Cache
    softmax: SoftmaxCache          # .y = probs [T, E]
    chosen: np.ndarray             # [T, k] expert indices, best first
    weights: np.ndarray            # [T, k] renormalised kept weights
    kept_total: np.ndarray         # [T, 1] sum of the kept probs before renormalising
    calls: tuple                   # one ExpertCall (or None if it got no token) per expert
    real: np.ndarray               # [T] bool: the tokens counted in f and P (not padding)
    load: np.ndarray               # [E] f_e
    mean_probs: np.ndarray         # [E] P_e
    aux_loss: float
    shape: tuple                   # the input's shape [..., d]

    @property
    def probs(self):
        """Router probabilities [T, E] (T = all tokens, flattened)."""
        return self.softmax.y

    @property
    def top_k_margin(self):
        """Smallest gap between a token's k-th and (k+1)-th probability (inf if k = E).

        A gradient check must stay well away from 0: there the chosen set changes.
        """
        k, E = self.chosen.shape[1], self.probs.shape[1]
        if k == E:
            return np.inf
        ranked = -np.sort(-self.probs, axis=-1)
        return float(np.min(ranked[:, k - 1] - ranked[:, k]))


def _expert_size(d, hidden, expert, bias):
    """Parameters of one expert from its shapes (mirrors FFN and SwiGLU)."""
    if expert == "swiglu":
        return 3 * d * hidden + (2 * hidden + d if bias else 0)      # gate, up, down
    return 2 * d * hidden + (hidden + d if bias else 0)              # up, down


class MoE(Module):
    """x [..., d] -> [..., d]: a router and ``n_experts`` expert FFNs, ``top_k`` per token.

    ``expert``: "swiglu" (Mixtral) or an FFN activation ("gelu", "gelu_tanh", "relu").
    ``hidden``: each expert's hidden width (default 4 d). ``aux_weight``: the weight of
    the load-balancing loss whose gradient ``backward`` adds (see the module docstring).
    Parameter names: ``router.weight``, ``experts.{e}.up.weight`` ... ``rng``: the
    Generator the weights are drawn from (None: ``np.random.default_rng(0)``).
    """

    def __init__(self, d, n_experts, top_k=2, hidden=None, expert="swiglu", bias=False,
                 aux_weight=0.01, rng=None, dtype=np.float32, out_std=None):
        check_positive("d", d)
        check_positive("n_experts", n_experts)
        if not isinstance(top_k, (int, np.integer)) or not 1 <= top_k <= n_experts:
            raise ValueError(f"top_k: expected an integer in [1, n_experts={n_experts}], got {top_k!r}")
        if expert not in EXPERT_KINDS:
            raise ValueError(f"expert: expected one of {EXPERT_KINDS}, got {expert!r}")
        self.n_experts, self.top_k, self.expert_kind = n_experts, top_k, expert
        self.aux_weight, rng = aux_weight, check_rng(rng)
        self.router = Linear(d, n_experts, bias=False, rng=rng, dtype=dtype)
        if expert == "swiglu":
            self.experts = [SwiGLU(d, hidden, bias, rng, dtype, out_std) for _ in range(n_experts)]
        else:
            self.experts = [FFN(d, hidden, 4, expert, bias, rng, dtype, out_std)
                            for _ in range(n_experts)]

    def forward(self, x, token_mask=None):
        """x [..., d] -> y [..., d]; ``token_mask`` [...] bool (True at real tokens) keeps
        padded positions out of the routing statistics f and P."""
        E, k = self.n_experts, self.top_k
        d = x.shape[-1]
        flat = x.reshape(-1, d)                                       # [T, d]
        logits, router = self.router.forward(flat)                    # [T, E]
        probs, softmax = softmax_forward(logits)                      # [T, E]
        # top-k per token; a stable sort sends ties to the lower expert index
        chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :k]    # [T, k]
        kept = np.take_along_axis(probs, chosen, axis=-1)             # [T, k]
        kept_total = kept.sum(axis=-1, keepdims=True)                 # [T, 1]
        weights = kept / kept_total                                   # [T, k]

        y = np.zeros_like(flat)                                       # [T, d]
        calls = []
        for e, expert in enumerate(self.experts):                     # gather each expert's tokens
            rows, slots = np.nonzero(chosen == e)                     # [T_e], [T_e]
            if len(rows) == 0:
                calls.append(None)
                continue
            out, expert_cache = expert.forward(flat[rows])            # [T_e, d]
            y[rows] += weights[rows, slots, None] * out               # a token meets e at most once
            calls.append(ExpertCall(rows, slots, out, expert_cache))

        real = self._real_tokens(token_mask, x.shape[:-1])            # [T]
        n_real = max(int(real.sum()), 1)
        load = np.bincount(chosen[real].ravel(), minlength=E) / n_real   # f_e [E], sums to k
        mean_probs = probs[real].sum(axis=0) / n_real                 # P_e [E]
        aux_loss = float(E * np.dot(load, mean_probs))
        return y.reshape(x.shape), MoECache(router, softmax, chosen, weights, kept_total,
                                            tuple(calls), real, load, mean_probs, aux_loss, x.shape)

    @staticmethod
    def _real_tokens(token_mask, shape):
        if token_mask is None:
            return np.ones(int(np.prod(shape)), bool)
        token_mask = np.asarray(token_mask)
        if token_mask.dtype != bool or token_mask.shape != tuple(shape):
            raise ValueError(f"token_mask: expected a boolean array of shape {tuple(shape)} (True at "
                             f"real tokens), got {token_mask.dtype} of shape {token_mask.shape}")
        return token_mask.reshape(-1)

    def backward(self, d_out, cache, d_aux=None, d_mean_probs=None):
        """d_x; parameters get the gradient of <y, d_out> + d_aux * aux (d_aux: aux_weight),
        or of <y, d_out> + <P, d_mean_probs> when ``d_mean_probs`` [E] is given."""
        if d_mean_probs is None:
            d_aux = self.aux_weight if d_aux is None else d_aux
            d_mean_probs = d_aux * self.n_experts * cache.load       # aux = E sum_e f_e P_e
        d = cache.shape[-1]
        d_y = d_out.reshape(-1, d)                                    # [T, d]
        weights = cache.weights
        d_flat = np.zeros_like(d_y)                                   # [T, d]
        d_weights = np.zeros_like(weights)                            # [T, k]
        for expert, call in zip(self.experts, cache.calls):
            if call is None:
                continue
            rows, slots = call.rows, call.slots
            d_weights[rows, slots] = np.sum(d_y[rows] * call.out, axis=-1)
            d_flat[rows] += expert.backward(weights[rows, slots, None] * d_y[rows], call.expert)
        # weights = kept / sum(kept):  d_kept = (d_weights - sum_s d_weights_s weights_s) / sum(kept)
        d_kept = (d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)) / cache.kept_total
        d_probs = np.zeros_like(cache.probs)                          # [T, E]
        np.put_along_axis(d_probs, cache.chosen, d_kept, axis=-1)     # the k chosen are distinct
        # forward: P_e = mean over the real tokens t of probs[t, e]
        n_real = max(int(cache.real.sum()), 1)
        d_probs += (cache.real[:, None] * d_mean_probs / n_real).astype(d_probs.dtype)
        d_logits = softmax_backward(d_probs, cache.softmax)
        d_flat += self.router.backward(d_logits, cache.router)
        return d_flat.reshape(cache.shape)

    # -- parameter counts -----------------------------------------------------------
    @staticmethod
    def counts(d, n_experts, top_k=2, hidden=None, expert="swiglu", bias=False):
        """``MoECounts`` from the shapes alone, nothing allocated.

        E.g. 8 experts of 10 million parameters with top-2 routing: 80 million expert
        parameters stored, 20 million used per token (plus the d x E router).
        """
        hidden = 4 * d if hidden is None else hidden
        per_expert = _expert_size(d, hidden, expert, bias)
        router = d * n_experts
        experts_total, experts_active = n_experts * per_expert, top_k * per_expert
        return MoECounts(per_expert, router, experts_total, experts_active,
                         router + experts_total, router + experts_active)

    def total_parameters(self):
        """Every parameter: the router and all E experts."""
        return self.num_parameters()

    def active_parameters(self):
        """Parameters one token computes with: the router and k experts."""
        return self.router.num_parameters() + self.top_k * self.experts[0].num_parameters()


def pooled_aux_loss(caches):
    """Hugging Face Mixtral's router loss over a stack of MoE layers (their ``MoECache``s):
    aux = E * sum_e mean_l(f_e) * mean_l(P_e). Returns (aux, d aux / d P_l), the gradient
    being the same [E] vector for every layer, E * mean_l(f) / L."""
    caches = list(caches)
    E, L = len(caches[0].load), len(caches)
    load = np.mean([c.load for c in caches], axis=0)              # f pooled over layers [E]
    mean_probs = np.mean([c.mean_probs for c in caches], axis=0)  # P pooled over layers [E]
    return float(E * np.dot(load, mean_probs)), E * load / L


def active_parameters(model):
    """Parameters one token computes with in ``model``: all of them, minus the
    E - k experts each MoE layer skips for that token."""
    skipped = sum((m.n_experts - m.top_k) * m.experts[0].num_parameters()
                  for m in model.modules() if isinstance(m, MoE))
    return model.num_parameters() - skipped


# -- the MoE variant inside a decoder: the router's extra input and the model's router loss ------
def router_inputs(ffn, key_mask):
    """What a block hands its FFN besides x: ``{"token_mask": key_mask}`` for a MoE layer (the
    padding stays out of f and P), ``{}`` for a dense FFN, which needs nothing more."""
    return {"token_mask": key_mask} if isinstance(ffn, MoE) else {}


@dataclass(frozen=True)
class RouterLoss:
    """A decoder's load-balancing loss and, per block, the gradient its router receives from
    it (None where the layer adds its own: the "per_layer" objective, or a dense FFN)."""

    value: float
    d_mean_probs: tuple       # per block: d aux / d P [E], or None


def router_loss(block_caches, objective):
    """The ``RouterLoss`` of one forward through a stack of blocks, None when no FFN is a MoE.

    "per_layer": the sum of every MoE layer's own aux loss. "pooled": Hugging Face Mixtral's
    one loss over all layers' routing (``pooled_aux_loss``). Training loss = CE +
    config.moe_aux_weight * aux; ``DecoderLM.backward`` includes the second term's gradient.
    """
    moe = [c.ffn for c in block_caches if isinstance(c.ffn, MoECache)]
    if not moe:
        return None
    if objective == "per_layer":
        return RouterLoss(float(sum(c.aux_loss for c in moe)), (None,) * len(block_caches))
    aux, d_mean_probs = pooled_aux_loss(moe)
    return RouterLoss(aux, tuple(d_mean_probs if isinstance(c.ffn, MoECache) else None
                                 for c in block_caches))


def router_grads(router, n_blocks, weight):
    """Per block, the keywords its backward hands the FFN: ``{"d_mean_probs": weight * g}``
    where the pooled loss sends the router g, ``{}`` elsewhere (and for a dense model)."""
    if router is None:
        return ({},) * n_blocks
    return tuple({} if g is None else {"d_mean_probs": weight * g} for g in router.d_mean_probs)
