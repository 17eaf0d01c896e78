"""``npformer tour``: the tutorial's tiny decoder, one stage at a time.

Vocabulary 50, width 8, 2 heads, max length 16, ids 3 8 12 5 17 42 23 6:
embeddings -> Q/K/V -> heads -> causal attention -> merge and Wo -> residual
-> FFN -> residual -> final norm -> logits -> next-token probabilities.

Every stage is computed here step by step with the model's own modules, in the
order of the tutorial's ``TinyDecoder.forward``, and each shape printed is the
shape of the array that step produced. The stage-by-stage logits are then
compared with ``DecoderLM.forward``: the walk is the model, not a retelling.
"""
from __future__ import annotations

import math

import numpy as np

from ..t04_attention import causal_mask
from ..t06_activations import gelu_forward
from ..t03_softmax import softmax
from ..t10_model import DecoderConfig, DecoderLM
from .common import UsageError, check_plot_dir, positive_int, seed

TUTORIAL_IDS = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])

WHY_THE_NUMBERS_DIFFER = (
    "The architecture is the tutorial's TinyDecoder; its random numbers are not. The tutorial's\n"
    "program draws its weights from PyTorch's generator (torch.manual_seed(7)) with PyTorch's\n"
    "initialisation (embeddings N(0, 1), linear layers uniform in +-1/sqrt(fan_in)); npformer\n"
    "draws from NumPy's np.random.default_rng(seed) with its own initialisation (normal\n"
    "distributions). The shapes and the causal pattern below match the tutorial's; the weights,\n"
    "the attention rows and the top-3 ids do not (and with random weights mean nothing).")


def _fmt(row):
    return "[" + " ".join(f"{v:.3f}" for v in row) + "]"


def _attention_stages(block, a, causal, stage):
    """Norm1's output ``a`` [B, N, d] through the attention sub-layer, recording each stage."""
    attn = block.attn
    B, N, _ = a.shape
    H, D = attn.n_heads, attn.head_dim
    qkv = attn.qkv(a)
    stage("Q | K | V from one fused projection", "[B, N, 3d]", qkv)
    q, k, v = np.split(qkv, 3, axis=-1)                        # H_kv = H here: three [B, N, d]
    stage("Q, one third of it", "[B, N, d]", q)
    q_rows, k_rows, v_rows = (t.reshape(B, N, H, D) for t in (q, k, v))
    stage("Q cut into heads", "[B, N, H, D]", q_rows)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q_rows, k_rows, v_rows))
    stage("Q with the heads in front", "[B, H, N, D]", q)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(D)         # a Python float keeps float32
    stage("scores Q K^T / sqrt(D)", "[B, H, N, N]", scores)
    weights = softmax(scores, mask=causal_mask(N) if causal else None)
    stage("weights softmax(scores + mask), per head", "[B, H, N, N]", weights)
    mixed = weights @ v
    stage("weights @ V, per head", "[B, H, N, D]", mixed)
    merged = mixed.transpose(0, 2, 1, 3)
    stage("heads back behind the positions", "[B, N, H, D]", merged)
    merged = merged.reshape(B, N, H * D)
    stage("heads side by side again", "[B, N, d]", merged)
    attended = attn.out(merged)
    stage("output projection Wo", "[B, N, d]", attended)
    return attended, weights


def _ffn_stages(block, h, stage):
    """The residual stream ``h`` [B, N, d] through Norm2 and the GELU FFN, recording each stage."""
    f = block.norm2(h)
    stage("Norm2 of it", "[B, N, d]", f)
    hidden = block.ffn.up(f)
    stage("FFN first layer (d -> 4d)", "[B, N, 4d]", hidden)
    activated, _ = gelu_forward(hidden)
    stage("GELU", "[B, N, 4d]", activated)
    fed = block.ffn.down(activated)
    stage("FFN second layer (4d -> d)", "[B, N, d]", fed)
    return fed


def walk(model, ids, causal, stage):
    """The tiny decoder's forward, stage by stage: ``stage(text, names, array)`` sees each
    intermediate array. Written for the tour's model (one Pre-Norm block, learned positions,
    as many K/V heads as query heads, a GELU FFN). Returns (logits [B, N, V], weights [B, H, N, N])."""
    x = model.tokens(ids)
    stage("token vectors E[ids]", "[B, N, d]", x)
    x = x + model.positions(np.arange(ids.shape[1]))
    stage("+ learned positions", "[B, N, d]", x)
    block = model.blocks[0]
    a = block.norm1(x)
    stage("Norm1", "[B, N, d]", a)
    attended, weights = _attention_stages(block, a, causal, stage)
    h = x + attended
    stage("residual 1: x + attention", "[B, N, d]", h)
    y = h + _ffn_stages(block, h, stage)
    stage("residual 2: block output h + FFN", "[B, N, d]", y)
    final = model.norm(y)
    stage("final norm", "[B, N, d]", final)
    logits = model.head(final)
    stage("logits over the vocabulary", "[B, N, V]", logits)
    return logits, weights


def tour(n_heads=2, causal=True, seed=7, out=print):
    """Run the tiny decoder on the tutorial's ids, printing each stage; returns (logits, cache)
    of ``DecoderLM.forward`` (``cache.attention(0)`` holds the weights printed)."""
    config = DecoderConfig(n_heads=n_heads, causal=causal)
    model = DecoderLM(config, np.random.default_rng(seed))
    ids = TUTORIAL_IDS
    out(f"tiny decoder: vocabulary {config.vocab_size}, width d={config.d_model}, "
        f"{config.n_heads} heads of width D={config.head_dim}, {config.n_layers} block, "
        f"{model.num_parameters()} parameters, random weights (seed {seed})")
    out(WHY_THE_NUMBERS_DIFFER)
    out(f"ids {ids.tolist()}  -> shape [B, N] = {list(ids.shape)}")

    def stage(text, names, array):
        out(f"  {text:42} {names:14} = {list(array.shape)}")

    walked, weights = walk(model, ids, causal, stage)
    logits, cache = model.forward(ids)
    out(f"the stages above vs DecoderLM.forward: largest logit difference "
        f"{float(np.abs(walked - logits).max()):.1e}")
    mask = "causal mask on" if causal else "no mask"
    for h in range(n_heads):
        out(f"head {h} ({mask}): first row {_fmt(weights[0, h, 0])}")
        out(f"        last row  {_fmt(weights[0, h, -1])}")
    if causal:
        out("the first row can read only position 0; the last row reads all eight positions")
    probs = softmax(logits[0, -1])
    top = np.argsort(probs)[::-1][:3]
    out("next-token candidates of the last position (random weights, no meaning yet): " +
        ", ".join(f"id {i} p={probs[i]:.4f}" for i in top))
    return logits, cache

WIDTH = 8                   # the tutorial's d


def add_arguments(parser):
    """Options of ``npformer tour``."""
    parser.add_argument("--heads", type=positive_int, default=2,
                        help=f"attention heads, a divisor of the width {WIDTH} (default 2)")
    parser.add_argument("--no-mask", action="store_true", help="remove the causal mask")
    parser.add_argument("--seed", type=seed, default=7, help="seed of the weights, >= 0 (default 7)")
    parser.add_argument("--plot", metavar="DIR", default=None,
                        help="also write the per-head attention maps and the next-token "
                             "probabilities (PNG) into DIR (needs matplotlib)")


def run(args):
    """Run ``npformer tour``; exit code."""
    if WIDTH % args.heads:
        raise UsageError(f"--heads: width {WIDTH} must be divisible by the number of heads, "
                         f"got {args.heads}")
    if args.plot is not None:
        check_plot_dir(args.plot)              # a missing matplotlib: one line, before any work
        from .. import pictures                # only here: matplotlib stays optional
    tour(args.heads, not args.no_mask, args.seed)
    if args.plot is not None:
        for path in pictures.draw_tour(args.plot, args.heads, not args.no_mask, args.seed):
            print(f"picture: {path}")
    return 0
