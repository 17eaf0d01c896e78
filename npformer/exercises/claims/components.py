"""Claims of the components: softmax, activations, linear, embedding, attention, RoPE, FFN, norms."""
from __future__ import annotations

import math

import numpy as np

from .registry import ClaimFailed, claim, close, rng, upstream_at, zero


# -- softmax ------------------------------------------------------------------------
@claim("softmax", "weights are non-negative and each row sums to 1")
def _(L, R):
    w = L.t03_softmax.softmax(5 * rng().standard_normal((3, 7)))
    if (w < 0).any():
        raise ClaimFailed(f"a negative weight {w.min():.3g}")
    close("row sums", w.sum(axis=-1), 1.0)


@claim("softmax", "a masked score gets weight exactly 0; a fully masked row gives zeros, not NaN")
def _(L, R):
    mask = np.array([[True, False, True, True], [False] * 4])
    w = L.t03_softmax.softmax(rng().standard_normal((2, 4)), mask=mask)
    zero("weights where masked", np.where(mask, 0, w))
    close("row sums", w.sum(axis=-1), [1.0, 0.0])


@claim("softmax", "huge scores do not overflow: [1e300, 5e299, -1e300, 0] gives [1, 0, 0, 0]")
def _(L, R):
    close("weights", L.t03_softmax.softmax(np.array([1e300, 5e299, -1e300, 0.0])), [1, 0, 0, 0])


@claim("softmax", "the tutorial's scores [0.707, 0] give weights [0.670, 0.330]")
def _(L, R):
    close("weights", L.t03_softmax.softmax(np.array([1 / math.sqrt(2), 0.0])), [0.670, 0.330], 5e-4)


@claim("softmax", "each row of the gradient sums to 0: adding a constant to a row changes nothing")
def _(L, R):
    g = rng()
    y, cache = L.t03_softmax.softmax_forward(g.standard_normal((4, 6)))
    d = L.t03_softmax.softmax_backward(g.standard_normal((4, 6)), cache)
    close("row sums of the gradient", np.sum(d, axis=-1), 0.0, 1e-12)


@claim("softmax", "masked scores get exactly zero gradient; a fully masked row zeros, not NaN")
def _(L, R):
    g = rng()
    mask = np.array([[True, False, True, True], [False] * 4])
    y, cache = L.t03_softmax.softmax_forward(g.standard_normal((2, 4)), mask=mask)
    zero("the gradient where masked", np.where(mask, 0, L.t03_softmax.softmax_backward(
        g.standard_normal((2, 4)), cache)))


# -- activations ------------------------------------------------------------------
@claim("activations", "ReLU passes the gradient where x > 0 and stops it where x < 0")
def _(L, R):
    x = np.array([-2.0, -0.5, 0.5, 3.0])
    _, cache = L.t06_activations.relu_forward(x)
    close("ReLU gradient", L.t06_activations.relu_backward(np.array([1.0, 2.0, 3.0, 4.0]), cache), [0, 0, 3, 4])


def _slopes(L, x):
    slopes = {}
    for name in ("gelu", "gelu_tanh", "silu"):
        forward, backward = L.FUNCTION_PAIRS[name]
        _, cache = forward(np.asarray(x, dtype=np.float64))
        slopes[name] = backward(np.ones(np.shape(x)), cache)
    return slopes


@claim("activations", "at x = 0 the slope of GELU, tanh-GELU and SiLU is exactly 1/2")
def _(L, R):
    for name, slope in _slopes(L, [0.0]).items():
        close(f"{name} slope at 0", slope, [0.5], 1e-12)


@claim("activations", "far from 0 the slope is about 1 at x = 10 and about 0 at x = -10")
def _(L, R):
    for name, slope in _slopes(L, [10.0, -10.0]).items():
        close(f"{name} slopes at 10 and -10", slope, [1.0, 0.0], 1e-3)


@claim("activations", "GELU(1) = Phi(1) = 0.841345 and SiLU(1) = sigmoid(1) = 0.731059")
def _(L, R):
    close("GELU(1)", L.t06_activations.gelu_forward(np.array([1.0]))[0], [0.8413447460685429], 1e-12)
    close("SiLU(1)", L.t06_activations.silu_forward(np.array([1.0]))[0], [1 / (1 + math.exp(-1))], 1e-12)


# -- linear -------------------------------------------------------------------------
@claim("linear", "d_bias is d_out summed over every position")
def _(L, R):
    g = rng()
    _, cache = L.t02_linear.linear_forward(g.standard_normal((2, 3, 4)), g.standard_normal((4, 5)),
                                       g.standard_normal(5))
    d_out = g.standard_normal((2, 3, 5))
    close("d_bias", L.t02_linear.linear_backward(d_out, cache)[2], d_out.sum(axis=(0, 1)))


@claim("linear", "a batch's weight gradient is the sum of its examples' (each position adds x^T dy)")
def _(L, R):
    g = rng()
    x, weight, d_out = g.standard_normal((2, 3, 4)), g.standard_normal((4, 5)), g.standard_normal((2, 3, 5))
    whole = L.t02_linear.linear_backward(d_out, L.t02_linear.linear_forward(x, weight)[1])[1]
    parts = [L.t02_linear.linear_backward(d_out[b:b + 1], L.t02_linear.linear_forward(x[b:b + 1], weight)[1])[1]
             for b in range(2)]
    close("d_weight of the batch", whole, parts[0] + parts[1])


@claim("linear", "without a bias, the bias gradient is None")
def _(L, R):
    g = rng()
    _, cache = L.t02_linear.linear_forward(g.standard_normal((2, 4)), g.standard_normal((4, 3)))
    if L.t02_linear.linear_backward(g.standard_normal((2, 3)), cache)[2] is not None:
        raise ClaimFailed("linear_backward returned a bias gradient for a layer without a bias")


# -- embedding ----------------------------------------------------------------------
@claim("embedding", "an id read twice receives both gradients; ids never read receive none")
def _(L, R):
    g = rng()
    table = L.t01_embedding.Embedding(5, 3, g, dtype=np.float64)
    ids = np.array([[3, 3, 1]])
    _, cache = table.forward(ids)
    d_out = g.standard_normal((1, 3, 3))
    if table.backward(d_out, cache) is not None:
        raise ClaimFailed("Embedding.backward must return None: integer ids have no gradient")
    close("gradient of row 3 (read twice: np.add.at adds both, grad[ids] += keeps one)",
          table.weight.grad[3], d_out[0, 0] + d_out[0, 1])
    close("gradient of row 1", table.weight.grad[1], d_out[0, 2])
    zero("the gradient of rows never read", table.weight.grad[[0, 2, 4]])


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


# -- attention ------------------------------------------------------------------------
def _qkv(g, B=2, H=2, H_kv=2, N=5, D=4):
    return (g.standard_normal((B, H, N, D)), g.standard_normal((B, H_kv, N, D)),
            g.standard_normal((B, H_kv, N, D)))


@claim("attention", "the tutorial's q = [1, 0] over keys [1, 0], [0, 1] and values [2, 0], [0, 4] "
                    "gives [1.340, 1.321]")
def _(L, R):
    q, k, v = np.array([[[[1.0, 0.0]]]]), np.array([[[[1.0, 0.0], [0.0, 1.0]]]]), \
        np.array([[[[2.0, 0.0], [0.0, 4.0]]]])
    close("output", L.t04_attention.attention_forward(q, k, v)[0][0, 0, 0], [1.340, 1.321], 1e-3)


@claim("attention", "keys no query may read (padding) get exactly zero gradient in d_k and d_v")
def _(L, R):
    g = rng()
    q, k, v = _qkv(g)
    mask = np.ones((2, 1, 1, 5), bool)
    mask[:, :, :, -1] = False
    out, cache = L.t04_attention.attention_forward(q, k, v, mask)
    _, d_k, d_v = L.t04_attention.attention_backward(g.standard_normal(out.shape), cache)
    zero("d_k of the padded key", d_k[:, :, -1])
    zero("d_v of the padded key", d_v[:, :, -1])


@claim("attention", "causal: the output at position 1 sends no gradient to keys and values after it")
def _(L, R):
    g = rng()
    q, k, v = _qkv(g)
    out, cache = L.t04_attention.attention_forward(q, k, v, causal=True)
    _, d_k, d_v = L.t04_attention.attention_backward(upstream_at(out.shape, (slice(None), slice(None), 1), g),
                                                 cache)
    zero("d_k of the keys after position 1", d_k[:, :, 2:])
    zero("d_v of the values after position 1", d_v[:, :, 2:])


@claim("attention", "a key/value head shared by a group of query heads (GQA) receives the sum of "
                    "their gradients")
def _(L, R):
    g = rng()
    q, k, v = _qkv(g, H=4, H_kv=2)
    out, cache = L.t04_attention.grouped_attention_forward(q, k, v)
    G = g.standard_normal(out.shape)
    _, d_k, d_v = L.t04_attention.grouped_attention_backward(G, cache)
    _, wide = L.t04_attention.attention_forward(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))
    _, d_k_wide, d_v_wide = L.t04_attention.attention_backward(G, wide)
    close("d_k of the shared heads", d_k, d_k_wide.reshape(2, 2, 2, 5, 4).sum(axis=2))
    close("d_v of the shared heads", d_v, d_v_wide.reshape(2, 2, 2, 5, 4).sum(axis=2))


# -- multi-head attention ---------------------------------------------------------------
def _mha(L, g, **options):
    return L.t04_attention.MultiHeadAttention(8, 2, rng=g, dtype=np.float64, **options)


@claim("multi-head", "causal: the gradient of the output at position 2 reaches no input after it")
def _(L, R):
    g = rng()
    mha = _mha(L, g, causal=True)
    out, cache = mha.forward(g.standard_normal((2, 5, 8)))
    zero("d_x after position 2", mha.backward(upstream_at(out.shape, (slice(None), 2), g), cache)[:, 3:])


@claim("multi-head", "without positions or masks attention is permutation-equivariant: permuting "
                     "the positions permutes the input gradient")
def _(L, R):
    g = rng()
    mha = _mha(L, g)
    x, G, order = g.standard_normal((1, 5, 8)), g.standard_normal((1, 5, 8)), g.permutation(5)
    d_x = mha.backward(G, mha.forward(x)[1])
    d_x_permuted = mha.backward(G[:, order], mha.forward(x[:, order])[1])
    close("the gradient of the permuted input", d_x_permuted, d_x[:, order])


# -- RoPE ---------------------------------------------------------------------------------
@claim("rope", "backward undoes forward: rotating back by the same angle gives the input (R^T = R^-1)")
def _(L, R):
    g = rng()
    for layout in ("half", "interleaved"):
        rope = L.t05_rope.Rotary(8, layout=layout)
        x = g.standard_normal((1, 2, 5, 8))
        y, cache = rope.forward(x, positions=np.arange(3, 8))
        close(f"backward(forward(x)) ({layout})", rope.backward(y, cache), x)


@claim("rope", "features past the rotated width get the upstream gradient unchanged")
def _(L, R):
    g = rng()
    rope = L.t05_rope.Rotary(8, fraction=0.5)
    _, cache = rope.forward(g.standard_normal((1, 2, 5, 8)), positions=np.arange(5))
    G = g.standard_normal((1, 2, 5, 8))
    close("the gradient of the unrotated features", rope.backward(G, cache)[..., 4:], G[..., 4:])


@claim("rope", "scores depend only on the offset: shifting both positions by 5 changes nothing")
def _(L, R):
    g = rng()
    rope = L.t05_rope.Rotary(8)
    q, k = g.standard_normal((1, 1, 1, 8)), g.standard_normal((1, 1, 1, 8))
    scores = [float(np.sum(rope.forward(q, [i])[0] * rope.forward(k, [j])[0])) for i, j in ((2, 6), (7, 11))]
    close("the score after the shift", scores[1], scores[0])


# -- FFN ----------------------------------------------------------------------------------
@claim("ffn", "position-wise: the input gradient is non-zero only where d_out is")
def _(L, R):
    g = rng()
    for ffn in (L.t07_ffn.FFN(8, rng=g, dtype=np.float64), L.t07_ffn.SwiGLU(8, rng=g, dtype=np.float64)):
        out, cache = ffn.forward(g.standard_normal((2, 4, 8)))
        d_x = ffn.backward(upstream_at(out.shape, (0, 1), g), cache)
        d_x[0, 1] = 0
        zero(f"{type(ffn).__name__}: d_x away from position (0, 1)", d_x)


# -- norms ---------------------------------------------------------------------------------
@claim("norm", "LayerNorm gives each position zero mean and unit variance; RMSNorm unit root mean square")
def _(L, R):
    x = 3 + 2 * rng().standard_normal((3, 16))
    y, _ = L.t08_norm.layernorm_forward(x, np.ones(16), np.zeros(16), 0.0)
    close("LayerNorm means", y.mean(axis=-1), 0.0, 1e-12)
    close("LayerNorm variances", y.var(axis=-1), 1.0, 1e-12)
    y, _ = L.t08_norm.rmsnorm_forward(x, np.ones(16), 0.0)
    close("RMSNorm root mean squares", np.sqrt((y ** 2).mean(axis=-1)), 1.0, 1e-12)


@claim("norm", "LayerNorm ignores x -> a x + b: its input gradient sums to 0 and is orthogonal to x - mean")
def _(L, R):
    g = rng()
    x = g.standard_normal((3, 6))
    _, cache = L.t08_norm.layernorm_forward(x, 1 + g.standard_normal(6), g.standard_normal(6), 0.0)
    d_x = L.t08_norm.layernorm_backward(g.standard_normal((3, 6)), cache)[0]
    close("sums of d_x", d_x.sum(axis=-1), 0.0)
    close("d_x . (x - mean)", np.sum(d_x * (x - x.mean(axis=-1, keepdims=True)), axis=-1), 0.0)


@claim("norm", "RMSNorm ignores x -> a x: its input gradient is orthogonal to x")
def _(L, R):
    g = rng()
    x = g.standard_normal((3, 6))
    _, cache = L.t08_norm.rmsnorm_forward(x, 1 + g.standard_normal(6), 0.0)
    d_x = L.t08_norm.rmsnorm_backward(g.standard_normal((3, 6)), cache)[0]
    close("d_x . x", np.sum(d_x * x, axis=-1), 0.0)
