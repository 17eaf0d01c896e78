"""Blockwise (flash) attention (``t18_flash_attention.py``), as the engines know it.

Flash attention as a component (block_size keys at a time, from a log-sum-exp; a block size of
1 to 3 drawn so that several blocks and a last partial one are read), its corners, its
gradient-check cases (the function pair, and a decoder that attends blockwise), exercise 18 and
its claims. Mistakes: ``t18_flash_attention.json``.
"""
from __future__ import annotations

import numpy as np

from ..t04_attention import padding_mask
from ..t10_model import DecoderConfig, DecoderLM
from ..t18_flash_attention import flash_attention_backward, flash_attention_forward
from . import claims
from .draw import Example, st
from .case_inputs import left_padded, normal, shape
from .registry import CAPABILITIES, Spec
from .t04_attention import attention_corners, attention_inputs

spec = Spec("t18_flash_attention.py")


@spec.component("flash_attention", "blockwise (flash) attention: block_size keys at a time, from a log-sum-exp",
                "flash_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None, block_size=128) "
                "-> (out, cache)",
                ("t18_flash_attention.flash_attention_forward", "t18_flash_attention.flash_attention_backward"),
                "(d_q, d_k, d_v)",
                ("t18_flash_attention.flash_attention_forward", "t18_flash_attention.flash_attention_backward",
                 "t04_attention.may_read"))
def flash_inputs(draw):
    """Grouped attention's inputs (queries after cached keys, causal and windowed) and a
    ``block_size`` of 1 to 3 keys, so that several blocks and a last partial one are read."""
    example = attention_inputs(draw, grouped=True)
    return Example(example.names, example.args, {**example.options, "block_size": draw(st().integers(1, 3))})


@spec.corners("flash_attention")
def flash_corners(rng):
    return [Example(e.names, e.args, {**e.options, "block_size": 2}) for e in attention_corners(rng, True)]


for _word in ("no_gqa", "even_head_width", "no_cached_keys", "no_fully_masked"):     # read as attention reads
    spec.capability("flash_attention", _word)(CAPABILITIES[("grouped_attention", _word)])


@spec.case("flash_attention")
def flash_attention_case(rng, size):
    B, N, d, H = shape(size)
    D, H_kv = d // H, max(1, H // 2)
    options = [dict(causal=True, block_size=2),                       # several blocks, diagonal tiles
               dict(causal=True, window=2, block_size=3,              # window + left padding
                    mask=padding_mask(np.full(B, N - 1), N, side="left")),
               dict(causal=False, block_size=3)][size]
    return ((flash_attention_forward, flash_attention_backward),
            (normal(rng, B, H, N, D), normal(rng, B, H_kv, N, D), normal(rng, B, H_kv, N, D)), options)


@spec.case("DecoderLM (flash)")
def flash_decoder_case(rng, size):
    B, N, d, H = shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13, attention="flash"),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, n_layers=2, window=2,
                                 attention="flash"),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13, n_layers=2,
                                  attention="flash")][size]
    return DecoderLM(config, rng), (rng.integers(0, 13, (B, N)),), {"key_mask": left_padded(B, N)}


spec.exercise(18, "flash", "blockwise (flash) attention",
              "beyond the tutorial: blockwise attention (part 2 §16 says why long contexts cost more)",
              backward=("t18_flash_attention.py:flash_attention_backward",),
              forward=("t18_flash_attention.py:flash_attention_forward",),
              checks=(("flash_attention", (0, 1, 2)),), components=("flash_attention",))


@spec.claim("flash", "blockwise backward equals the whole-table backward for blocks of 1, 2 and all 6 keys")
def blockwise_backward_equals_the_whole(L, R):
    g = claims.rng()
    q, k, v = g.standard_normal((2, 4, 6, 3)), g.standard_normal((2, 2, 6, 3)), g.standard_normal((2, 2, 6, 3))
    G = g.standard_normal((2, 4, 6, 3))
    expected = R.t04_attention.grouped_attention_backward(
        G, R.t04_attention.grouped_attention_forward(q, k, v, causal=True)[1])
    for block_size in (1, 2, 6):
        _, cache = L.t18_flash_attention.flash_attention_forward(q, k, v, causal=True, block_size=block_size)
        for name, mine, right in zip(("d_q", "d_k", "d_v"),
                                     L.t18_flash_attention.flash_attention_backward(G, cache), expected):
            claims.close(f"{name} with blocks of {block_size}", mine, right, 1e-10)


@spec.claim("flash", "a query that can read nothing gets zero gradient, not NaN")
def nothing_to_read_gives_zero_gradient(L, R):
    g = claims.rng()
    q, k, v = g.standard_normal((1, 1, 3, 2)), g.standard_normal((1, 1, 3, 2)), g.standard_normal((1, 1, 3, 2))
    mask = np.ones((1, 1, 3, 3), bool)
    mask[..., 0, :] = False
    _, cache = L.t18_flash_attention.flash_attention_forward(q, k, v, mask, block_size=2)
    claims.zero("d_q of the query with nothing to read",
         L.t18_flash_attention.flash_attention_backward(g.standard_normal((1, 1, 3, 2)), cache)[0][..., 0, :])
