"""Hypothesis strategies for the layers made of layers (``layers``: MoE, the blocks, the decoder,
seq2seq): a recipe drawn, the inputs, one array per weight. Rows a norm reads never constant
and routing without ties, so a smallest failing example says something."""
from __future__ import annotations

from .needs import require_hypothesis

require_hypothesis("npformer.testing.layer_strategies")

import numpy as np                                         # noqa: E402
from hypothesis import assume                              # noqa: E402
from hypothesis import strategies as st                    # noqa: E402
from hypothesis.extra import numpy as hnp                  # noqa: E402

from .example import Example                               # noqa: E402
from .strategies import arrays, lengths, size                # noqa: E402


def alternating(x):
    """``x`` with every other feature's sign flipped: a row of one value becomes +v, -v, +v ...
    Rows that a norm reads are never constant then, even after shrinking (a constant row's
    numbers, all at eps's limit, would explain nothing)."""
    return x * (-1.0) ** np.arange(x.shape[-1])


def _varied(rows):
    """True when no row of ``rows`` [..., d] is constant."""
    return bool(np.all(np.ptp(rows.reshape(-1, rows.shape[-1]), axis=-1) > 0))


@st.composite
def weights_of(draw, component, d, recipe):
    """(names, arrays) of the weights of npformer's ``component`` built from ``recipe``: from a
    drawn seed, odd multiples of 1/8 in [-7/8, 7/8] (a few hundred numbers drawn one by one
    would make each example slow), and at seed 0, where shrinking goes first, every weight
    1/8. Token and position tables alternate their signs (``alternating``) so that the rows
    the first norm reads vary."""
    from .layers import weight_names
    named = weight_names(component, d, recipe)
    sizes = [int(np.prod(shape)) for _, shape in named]
    seed = draw(st.integers(0, 2 ** 20))
    flat = np.full(sum(sizes), 1 / 8) if seed == 0 else \
        (2 * np.random.default_rng(seed).integers(-4, 4, sum(sizes)) + 1) / 8
    arrays_, start = [], 0
    for (name, shape), count in zip(named, sizes):
        value = flat[start:start + count].reshape(shape)
        start += count
        if name.endswith(("tokens.weight", "positions.weight")):
            value = alternating(value)
        arrays_.append(value)
    return tuple(name for name, _ in named), tuple(arrays_)


def _width(draw, positions):
    """d of 3 or 4 (a LayerNorm of 2 features is constant, of 1 undefined); 4 with RoPE."""
    return 4 if positions == "rope" else draw(st.sampled_from([3, 4]))


def _heads(draw, d, positions=None):
    """(H, H_kv) dividing d (RoPE turns pairs: its heads are 2 or 4 wide)."""
    widths = (1, 2) if positions == "rope" else (1, 2, 3)
    H = draw(st.sampled_from([h for h in widths if d % h == 0]))
    H_kv = draw(st.sampled_from([h for h in range(1, H + 1) if H % h == 0]))
    return H, H_kv


def _key_mask(draw, B, N):
    """A [B, N] mask of real tokens (right or left padding, a row may be all padding), or None."""
    if not draw(st.booleans()):
        return None
    real, keys = draw(lengths(B, N)), np.arange(N)[None, :]
    return keys >= N - real[:, None] if draw(st.booleans()) else keys < real[:, None]


@st.composite
def moe_inputs(draw):
    """x [B, N, d], the router [d, E] and E SwiGLU experts' weights; top_k of E, the aux loss's
    weight, a token mask or none. Routing ties are left out (the chosen experts must not
    depend on how a sort breaks them): every token's k-th and (k+1)-th router probability
    differ by at least 1e-4."""
    B, N, d = draw(size(1, 2)), draw(size(1, 3)), draw(size(1, 3))
    E = draw(st.sampled_from([3, 2]))
    recipe = {"n_experts": E, "top_k": draw(st.integers(1, min(E, 2))), "hidden": draw(size(1, 3)),
              "aux_weight": draw(st.sampled_from([0.5, 0.01]))}
    x = draw(arrays((B, N, d)))
    names, weights = draw(weights_of("moe", d, recipe))
    logits = x.reshape(-1, d) @ weights[0]
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    ranked = -np.sort(-probs / probs.sum(axis=-1, keepdims=True), axis=-1)
    k = recipe["top_k"]
    assume(k == E or float(np.min(ranked[:, k - 1] - ranked[:, k])) >= 1e-4)
    mask = _key_mask(draw, B, N)
    return Example(("x",) + names, (x,) + weights, {**recipe, "token_mask": mask})


# Each choice below shrinks towards the layer with the most parameters (LayerNorm, biases, two
# layers, learned positions, an untied head): a failing gradient then has its weight in the
# example shrunk first, and the other failing gradients need no search of their own.
def _block_recipe(draw, d, positions=None):
    H, H_kv = _heads(draw, d, positions)
    return {"n_heads": H, "n_kv_heads": H_kv, "norm": draw(st.sampled_from(["layernorm", "rmsnorm"])),
            "ffn": draw(st.sampled_from(["gelu", "relu"])), "ffn_hidden": draw(size(1, 3)),
            "ffn_bias": draw(st.sampled_from([True, False])), "attn_bias": draw(st.sampled_from([True, False]))}


@st.composite
def block_inputs(draw, prenorm=True):
    """x [B, N, d] (d of 3 or 4: a LayerNorm of 2 features is constant, of 1 undefined, and
    each row alternates its signs, so no row is constant) and the weights of a block:
    LayerNorm or RMSNorm, a GELU or ReLU FFN, heads and key/value heads (GQA),
    biases or none; causal or not, a key padding mask or none."""
    B, N, d = draw(size(1, 2)), draw(size(1, 3)), draw(st.sampled_from([3, 4]))
    recipe = {**_block_recipe(draw, d), "causal": draw(st.booleans())}
    x = alternating(draw(arrays((B, N, d))))
    assume_varied(x)
    names, weights = draw(weights_of("prenorm_block" if prenorm else "postnorm_block", d, recipe))
    mask = _key_mask(draw, B, N)
    recipe["mask"] = None if mask is None else mask[:, None, None, :]
    return Example(("x",) + names, (x,) + weights, recipe)


def assume_varied(rows):
    """Leave out an example with a constant row (a norm's eps limit)."""
    assume(_varied(rows))


@st.composite
def decoder_lm_inputs(draw):
    """Token ids [B, N] of a vocabulary of 3 to 5 (ids repeat) and the weights of a DecoderLM of
    one or two Pre- or Post-Norm layers: learned positions, RoPE or none, a tied head or its
    own, the block kinds of ``block_inputs``; a key mask or none."""
    positions = draw(st.sampled_from(["learned", "rope", "none"]))
    B, N, d, V = draw(size(1, 2)), draw(size(1, 3)), _width(draw, positions), draw(st.integers(3, 5))
    recipe = {**_block_recipe(draw, d, positions), "vocab_size": V, "max_len": N, "n_layers": draw(st.sampled_from([2, 1])),
              "positions": positions, "prenorm": draw(st.booleans()),
              "tie_embeddings": draw(st.sampled_from([False, True]))}
    ids = draw(hnp.arrays(np.int64, (B, N), elements=st.integers(0, V - 1)))
    names, weights = draw(weights_of("decoder_lm", d, recipe))
    embedded = weights[0][ids] + (weights[1][:N] if recipe["positions"] == "learned" else 0)
    assume_varied(embedded)
    return Example(("ids",) + names, (ids,) + weights, {**recipe, "key_mask": _key_mask(draw, B, N)})


@st.composite
def seq2seq_block_inputs(draw):
    """x [B, N, d] (rows alternating their signs, d of 3 or 4), the memory [B, M, d] it reads
    (M from N - 1 to N + 2), and the weights of an encoder-decoder layer (Pre- or Post-Norm);
    target and source padding masks or none."""
    B, N, d = draw(size(1, 2)), draw(size(1, 3)), draw(st.sampled_from([3, 4]))
    M = max(1, N + draw(st.integers(-1, 2)))
    recipe = {**_block_recipe(draw, d), "prenorm": draw(st.booleans())}
    x = alternating(draw(arrays((B, N, d))))
    assume_varied(x)
    memory = draw(arrays((B, M, d)))
    names, weights = draw(weights_of("seq2seq_block", d, recipe))
    tgt, src = _key_mask(draw, B, N), _key_mask(draw, B, M)
    recipe["mask"] = None if tgt is None else tgt[:, None, None, :]
    recipe["memory_mask"] = None if src is None else src[:, None, None, :]
    return Example(("x", "memory") + names, (x, memory) + weights, recipe)


@st.composite
def seq2seq_decoder_inputs(draw):
    """The memory [B, M, d], target ids [B, N] and the weights of an encoder-decoder's decoder
    (one or two layers, learned positions, RoPE or none, a tied head or its own, a logits
    bias or none); source and target masks or none."""
    positions = draw(st.sampled_from(["learned", "rope", "none"]))
    B, N, d, V = draw(size(1, 2)), draw(size(1, 3)), _width(draw, positions), draw(st.integers(3, 5))
    M = max(1, N + draw(st.integers(-1, 2)))
    recipe = {**_block_recipe(draw, d, positions), "vocab_size": V, "max_len": max(N, M),
              "n_decoder_layers": draw(st.sampled_from([2, 1])), "positions": positions,
              "prenorm": draw(st.booleans()), "tie_head": draw(st.sampled_from([False, True])),
              "logits_bias": draw(st.sampled_from([True, False]))}
    memory = draw(arrays((B, M, d)))
    ids = draw(hnp.arrays(np.int64, (B, N), elements=st.integers(0, V - 1)))
    names, weights = draw(weights_of("seq2seq_decoder", d, recipe))
    embedded = weights[0][ids] + (weights[1][:N] if recipe["positions"] == "learned" else 0)
    assume_varied(embedded)
    return Example(("memory", "tgt_ids") + names, (memory, ids) + weights,
                   {**recipe, "src_mask": _key_mask(draw, B, M), "tgt_mask": _key_mask(draw, B, N)})


# -- corner examples: the inputs every check starts with, whatever hypothesis draws --------------
