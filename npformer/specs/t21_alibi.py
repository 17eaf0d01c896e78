"""ALiBi (``t21_alibi.py``), as the engines know it.

The bias as a component (scores and slopes in, the biased scores and the slopes' gradient
out), the facts the article's relative-position argument predicts (no bias on the diagonal,
m_h per step back; moving every position changes nothing), BLOOM's form of the bias as a
convention, the gradient-check cases (the pair, attention with ALiBi, a decoder), exercise 21
and its claim. Mistakes: ``t21_alibi.json``.
"""
from __future__ import annotations

import numpy as np

from ..t04_attention import MultiHeadAttention
from ..t10_model import DecoderConfig, DecoderLM
from ..t21_alibi import ALiBiAttention, alibi_backward, alibi_forward, alibi_slopes
from . import claims
from .draw import Example, arrays, size, st
from .facts import close, upstream
from .case_inputs import left_padded, normal, shape
from .registry import Spec
from .t10_model import decoder

spec = Spec("t21_alibi.py")


@spec.component("alibi", "ALiBi: each head's scores lose m_h per position a key is back",
                "alibi_forward(scores, slopes) -> (scores - m_h (i - j), cache); the queries are the last N of M "
                "positions", ("t21_alibi.alibi_forward", "t21_alibi.alibi_backward"), "(d_scores, d_slopes)",
                ("t21_alibi.alibi_forward", "t21_alibi.alibi_backward"))
def alibi_inputs(draw):
    """scores [B, H, N, M] (M >= N: queries after cached keys) and H positive slopes."""
    B, H, N = draw(size(1, 2)), draw(size(1, 4)), draw(size(1, 4))
    M = N + draw(st().integers(0, 2))
    slopes = np.abs(draw(arrays((H,))))
    return Example(("scores", "slopes"), (draw(arrays((B, H, N, M))), slopes))


@spec.corners("alibi")
def alibi_corners(rng):
    return [Example(("scores", "slopes"), (normal(rng, 2, 8, 3, 5), alibi_slopes(8))),
            Example(("scores", "slopes"), (normal(rng, 1, 6, 4, 4), alibi_slopes(6)))]


@spec.prop("alibi", "no bias on the diagonal; each step back costs m_h: zero scores become -m_h (i - j)",
           drawn=False)
def alibi_costs_m_per_step_back(subject, example):
    out = subject.output((np.zeros((1, 2, 3, 3)), np.array([0.5, 0.25])), {})
    steps_back = np.array([[0, -1, -2], [1, 0, -1], [2, 1, 0]])
    close("the biased zero scores", out, -np.array([0.5, 0.25])[:, None, None] * steps_back)


@spec.prop("alibi", "the bias depends only on the offset: one more key before the others (every "
                    "position one later) leaves each query-key pair's bias as it was")
def alibi_depends_only_on_the_offset(subject, example):
    scores, slopes = example.args
    out = subject.output(example.args, example.options)
    earlier = np.concatenate([np.zeros(scores.shape[:-1] + (1,)), scores], axis=-1)
    close("the biased scores after every position moved one later",
          subject.output((earlier, slopes), example.options)[..., 1:], out)


@spec.prop("alibi", "the bias is added: the scores' gradient is the upstream gradient itself", needs_backward=True)
def alibi_passes_the_gradient(subject, example):
    G = upstream(example.args[0].shape)
    close("d_scores", subject.gradients(example.args, example.options, G)[0], G)


def key_positions():
    """BLOOM's form: + m_h j, the key's own position, in place of - m_h (i - j) (the same softmax:
    each row differs by m_h i)."""
    def forward(scores, slopes):
        M = scores.shape[-1]
        return scores + slopes[:, None, None] * np.arange(M), M

    def backward(d_out, M):
        return d_out, (d_out * np.arange(M)).sum(axis=(0, 2, 3))
    return forward, backward


spec.convention("alibi", {"bias": "+ m j (the key's position)"}, key_positions)


@spec.case("alibi")
def alibi_case(rng, size):
    B, N, d, H = shape(size)
    M = N + size                                     # queries after cached keys at sizes 1 and 2
    return (alibi_forward, alibi_backward), (normal(rng, B, H, N, M), alibi_slopes(H) + 0.1 * rng.random(H)), {}


@spec.case("MultiHeadAttention (alibi)")
def alibi_attention_case(rng, size):
    B, N, d, H = shape(size)
    H_kv = (H, 1, 2)[size]
    return (MultiHeadAttention(d, H, H_kv, rng=rng, kernel=ALiBiAttention(), causal=size != 2),
            (normal(rng, B, N, d),), {"mask": left_padded(B, N)[:, None, None, :]})


@spec.case("DecoderLM (alibi)")
def alibi_decoder_case(rng, size):
    B, N, d, H = shape(size)
    config = DecoderConfig(d_model=d, n_heads=H, n_kv_heads=(H, 1, 2)[size], vocab_size=13, positions="alibi",
                           n_layers=1 + size % 2)
    return DecoderLM(config, rng), (rng.integers(0, 13, (B, N)),), {"key_mask": left_padded(B, N)}


spec.exercise(21, "alibi", "attention with linear biases (ALiBi)",
              "beyond the tutorial: positions without a position embedding (beside RoPE: tutorial part 1, how "
              "positions enter the matching)",
              backward=("t21_alibi.py:alibi_backward", "t21_alibi.py:ALiBiAttention.backward"),
              forward=("t21_alibi.py:alibi_slopes", "t21_alibi.py:alibi_forward", "t21_alibi.py:ALiBiAttention.forward"),
              checks=(("alibi", (0, 1, 2)), ("MultiHeadAttention (alibi)", (0, 1, 2)), ("DecoderLM (alibi)", (1,))),
              components=("alibi",))


@spec.claim("alibi", "decoding one token at a time through the KV cache gives the full forward's logits "
                     "(the bias of a new query reaches back over every cached key)")
def cached_alibi_logits(L, R):
    g = claims.rng()
    model = decoder(L, g, n_layers=2, n_kv_heads=1, positions="alibi")
    ids = g.integers(0, 13, (2, 6))
    full = model.forward(ids)[0]
    cache = model.new_kv_cache(2)
    steps = [model.forward(ids[:, t:t + 1], kv_cache=cache)[0] for t in range(6)]
    claims.close("cached logits", np.concatenate(steps, axis=1), full, 1e-10)
