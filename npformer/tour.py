"""``npformer tour``: the tutorial's tiny decoder, one stage at a time.

Vocabulary 50, width 8, 2 heads, max length 16, ids 3 8 12 5 17 42 23 6:
embeddings -> Q/K/V -> heads -> causal attention -> merge and Wo -> residual
-> FFN -> final norm -> logits -> next-token probabilities.
"""
from __future__ import annotations

import numpy as np

from .functional import softmax
from .model import DecoderConfig, DecoderLM

TUTORIAL_IDS = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])


def _fmt(row):
    return "[" + " ".join(f"{v:.3f}" for v in row) + "]"


def tour(n_heads=2, causal=True, seed=7, out=print):
    """Run the tiny decoder on the tutorial's ids, printing each stage; returns (logits, cache)."""
    config = DecoderConfig(n_heads=n_heads, causal=causal)
    model = DecoderLM(config, np.random.default_rng(seed))
    ids = TUTORIAL_IDS
    B, N = ids.shape
    H, D = config.n_heads, config.head_dim
    out(f"tiny decoder: vocabulary {config.vocab_size}, width d={config.d_model}, {H} heads "
        f"of width D={D}, {config.n_layers} block, {model.num_parameters()} parameters")
    out(f"ids {ids.tolist()}  -> shape [B, N] = {list(ids.shape)}")
    logits, cache = model.forward(ids)
    bc = cache.blocks[0]
    stages = [
        ("token vectors + learned positions", "[B, N, d]", (B, N, config.d_model)),
        ("Q, K, V after one fused projection", "[B, N, 3d]", bc.attn.qkv.x.shape[:2] + (3 * config.d_model,)),
        ("Q split into heads", "[B, H, N, D]", bc.attn.attn.q.shape),
        ("attention weights, one N x N table per head", "[B, H, N, N]", bc.attn.weights.shape),
        ("heads merged, then output projection Wo", "[B, N, d]", bc.attn.out.x.shape),
        ("FFN hidden layer (4d) after GELU", "[B, N, 4d]", bc.ffn.down.x.shape),
        ("block output (residuals added)", "[B, N, d]", bc.norm2.xhat.shape),
        ("logits over the vocabulary", "[B, N, V]", logits.shape),
    ]
    for text, names, shape in stages:
        out(f"  {text:46} {names:14} = {list(shape)}")
    mask = "causal mask on" if causal else "no mask"
    for h in range(H):
        weights = cache.attention(0)[0, h]
        out(f"head {h} ({mask}): first row {_fmt(weights[0])}")
        out(f"        last row  {_fmt(weights[-1])}")
    if causal:
        out("the first row can read only position 0; the last row reads all eight positions")
    probs = softmax(logits[0, -1])
    top = np.argsort(probs)[::-1][:3]
    out("next-token candidates of the last position (random weights, no meaning yet): " +
        ", ".join(f"id {i} p={probs[i]:.4f}" for i in top))
    return logits, cache
