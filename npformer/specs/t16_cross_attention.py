"""Cross-attention (``t16_cross_attention.py``), as the engines know it.

Its gradient-check case (a source longer than the target, padding in the source, a memory of
another width) and exercise 16. Mistakes: ``t16_cross_attention.json``.
"""
from __future__ import annotations

from ..t16_cross_attention import CrossAttention
from .case_inputs import normal, real_tokens, shape
from .registry import Spec

spec = Spec("t16_cross_attention.py")


@spec.case("CrossAttention")
def cross_attention_case(rng, size):
    B, N, d, H = shape(size)
    M = N + 2                                        # source longer than target
    H_kv, d_memory = [(H, d), (H, d + 2), (2, d)][size]
    mask = real_tokens(B, M)[:, None, None, :]
    return (CrossAttention(d, H, H_kv, d_memory, bias=size != 2, rng=rng),
            (normal(rng, B, N, d), normal(rng, B, M, d_memory)), {"mask": mask})


spec.exercise(16, "cross-attention", "cross-attention (the decoder reads the encoder)",
              "tutorial part 1, GQA and MoE (encoder-decoder, cross-attention)",
              backward=("t16_cross_attention.py:CrossAttention.backward",),
              forward=("t16_cross_attention.py:CrossAttention.forward",),
              checks=(("CrossAttention", (0, 1, 2)),))
