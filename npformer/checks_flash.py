"""Gradient-check case of blockwise (flash) attention; see checks.py.

The lead imports this module at the end of checks.py (beside checks_variants).
"""
import numpy as np

from .checks import _float, _shape, case


@case("flash_attention")
def _(rng, size):
    from .attention import padding_mask
    from .flash_attention import flash_attention_backward, flash_attention_forward
    B, N, d, H = _shape(size)
    D, H_kv = d // H, max(1, H // 2)
    options = [dict(causal=True, block_size=2),                       # several blocks, diagonal tiles
               dict(causal=True, window=2, block_size=3,              # window + left padding
                    mask=padding_mask(np.full(B, N - 1), N, side="left")),
               dict(causal=False, block_size=3)][size]
    return ((flash_attention_forward, flash_attention_backward),
            (_float(rng, B, H, N, D), _float(rng, B, H_kv, N, D), _float(rng, B, H_kv, N, D)),
            options)


@case("DecoderLM (flash)")
def _(rng, size):
    from .model import DecoderConfig, DecoderLM
    B, N, d, H = _shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13, attention="flash"),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, n_layers=2, window=2,
                                 attention="flash"),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13, n_layers=2,
                                  attention="flash")][size]
    ids = rng.integers(0, 13, (B, N))
    key_mask = np.ones((B, N), bool)
    key_mask[0, 0] = False                   # one left-padded position
    return DecoderLM(config, rng), (ids,), {"key_mask": key_mask}
