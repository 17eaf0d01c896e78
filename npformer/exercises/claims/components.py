"""Claims about the layers that the components' properties (npformer.testing.properties) do
not already make: a missing bias, positions shared by a batch, multi-head attention inside
its module, RoPE on part of a head, the FFN's locality."""
from __future__ import annotations

import numpy as np

from .registry import ClaimFailed, claim, close, expects, raised, rng, upstream_at, zero


def _mha(L, g, **options):
    return L.t04_attention.MultiHeadAttention(8, 2, rng=g, dtype=np.float64, **options)


def bias_gradient(L):
    """{"bias_gradient": what linear_backward returned for the bias of a layer without one}:
    the half of the claim that runs the learner's code."""
    g = rng()
    _, cache = L.t02_linear.linear_forward(g.standard_normal((2, 4)), g.standard_normal((4, 3)))
    found = L.t02_linear.linear_backward(g.standard_normal((2, 3)), cache)[2]
    return {"bias_gradient": None if found is None else np.asarray(found)}


def judge_bias_gradient(computed):
    """The claim's verdict on ``bias_gradient``'s facts: the gradient must be None."""
    if "bias_gradient" not in computed:
        raise ClaimFailed("the claim's run did not report the bias gradient")
    if computed["bias_gradient"] is not None:
        raise ClaimFailed("linear_backward returned a bias gradient for a layer without a bias")


@claim("linear", "without a bias, the bias gradient is None")
def no_bias_gradient(L, R):
    return judge_bias_gradient(bias_gradient(L))


# graded, the two halves run apart: the learner's process reports, the judge decides
no_bias_gradient.compute, no_bias_gradient.judge = bias_gradient, judge_bias_gradient


# -- embedding ----------------------------------------------------------------------
@claim("embedding", "positions shared by the whole batch receive the sum over the batch")
def _(L, R):
    g = rng()
    tokens = L.t01_embedding.Embedding(7, 4, g, dtype=np.float64)
    positions = L.t01_embedding.LearnedPositions(6, 4, g, dtype=np.float64)
    embed = L.t01_embedding.Embeddings(tokens, positions)
    _, cache = embed.forward(g.integers(0, 7, (3, 5)))
    d_out = g.standard_normal((3, 5, 4))
    embed.backward(d_out, cache)
    close("position table gradient", positions.weight.grad[:5], d_out.sum(axis=0))


def backward_after_a_step(L):
    """{"raised": what the backward through a KV-cached decoding step raised, or None}."""
    g = rng()
    mha = _mha(L, g)
    cache = L.t13_kv_cache.KVCache(1, 1, 2, 4, 4, np.float64)
    out, step = mha.forward(g.standard_normal((1, 1, 8)), kv=cache.layers[0])
    return {"raised": raised(lambda: mha.backward(g.standard_normal(out.shape), step))}


def judge_backward_after_a_step(computed):
    """The claim's verdict: the backward raised NotImplementedError (or a subclass of it)."""
    expects("NotImplementedError", computed.get("raised", ...),
            "backward ran through a KV-cached decoding step", "backward through a KV-cached decoding step")


@claim("attention", "backward after a KV-cached decoding step is refused: the cache is for inference")
def no_backward_after_a_step(L, R):
    return judge_backward_after_a_step(backward_after_a_step(L))


no_backward_after_a_step.compute = backward_after_a_step
no_backward_after_a_step.judge = judge_backward_after_a_step


@claim("attention", "causal: the gradient of the output at position 2 reaches no input after it")
def _(L, R):
    g = rng()
    mha = _mha(L, g, causal=True)
    out, cache = mha.forward(g.standard_normal((2, 5, 8)))
    zero("d_x after position 2", mha.backward(upstream_at(out.shape, (slice(None), 2), g), cache)[:, 3:])


@claim("attention", "without positions or masks attention is permutation-equivariant: permuting "
                     "the positions permutes the input gradient")
def _(L, R):
    g = rng()
    mha = _mha(L, g)
    x, G, order = g.standard_normal((1, 5, 8)), g.standard_normal((1, 5, 8)), g.permutation(5)
    d_x = mha.backward(G, mha.forward(x)[1])
    d_x_permuted = mha.backward(G[:, order], mha.forward(x[:, order])[1])
    close("the gradient of the permuted input", d_x_permuted, d_x[:, order])


# -- RoPE ---------------------------------------------------------------------------------
@claim("rope", "features past the rotated width get the upstream gradient unchanged")
def _(L, R):
    g = rng()
    rope = L.t05_rope.Rotary(8, fraction=0.5)
    _, cache = rope.forward(g.standard_normal((1, 2, 5, 8)), positions=np.arange(5))
    G = g.standard_normal((1, 2, 5, 8))
    close("the gradient of the unrotated features", rope.backward(G, cache)[..., 4:], G[..., 4:])


@claim("ffn", "position-wise: the input gradient is non-zero only where d_out is")
def _(L, R):
    g = rng()
    for ffn in (L.t07_ffn.FFN(8, rng=g, dtype=np.float64), L.t07_ffn.SwiGLU(8, rng=g, dtype=np.float64)):
        out, cache = ffn.forward(g.standard_normal((2, 4, 8)))
        d_x = ffn.backward(upstream_at(out.shape, (0, 1), g), cache)
        d_x[0, 1] = 0
        zero(f"{type(ffn).__name__}: d_x away from position (0, 1)", d_x)


# -- norms ---------------------------------------------------------------------------------
