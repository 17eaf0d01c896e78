"""What is measured: the model configs, the scaling sweeps and the FLOP count.

Plain data and arithmetic only (no numpy, no torch): the parent process imports this
without loading a BLAS, so it never has BLAS threads of its own competing with a worker.
"""
from __future__ import annotations

# The four configs of the comparison. "llama" is small's shapes with RoPE, RMSNorm,
# SwiGLU and grouped-query attention (4 query heads, 2 key/value heads).
CONFIGS = {
    "tiny": dict(vocab=256, d=64, layers=2, heads=2, seq=32, batch=8),
    "small": dict(vocab=512, d=256, layers=4, heads=4, seq=128, batch=8),
    "medium": dict(vocab=4096, d=512, layers=6, heads=8, seq=256, batch=4),
    "llama": dict(vocab=512, d=256, layers=4, heads=4, kv_heads=2, seq=128, batch=8, llama=True),
}

# The workloads timed on every config: name -> what one call does.
WORKLOADS = {
    "train": "training step: forward + cross-entropy + backward + AdamW",
    "train_no_opt": "training step without the optimizer: forward + cross-entropy + backward",
    "forward": "forward alone (inference: no cache kept for backward)",
}

# How cost grows: the GPT-2 recipe with one size varied at a time.
SEQ_SWEEP_BASE = dict(vocab=512, d=256, layers=2, heads=4, batch=1)
SEQ_SWEEP = (128, 256, 512, 1024, 2048)
WIDTH_SWEEP_BASE = dict(vocab=512, layers=2, seq=128, batch=4)
WIDTH_SWEEP = (64, 128, 256, 512, 1024)
HEAD_WIDTH = 64                     # the width sweep keeps heads of width 64: H = d / 64
DECODE_CONFIG = "small"
DECODE_CONTEXTS = (128, 256, 512, 1024, 2048)

# --quick: the smallest shapes that still produce every table (seconds, for the test).
QUICK_SEQ_SWEEP_BASE = dict(vocab=64, d=32, layers=1, heads=2, batch=1)
QUICK_SEQ_SWEEP = (8, 16, 32)
QUICK_WIDTH_SWEEP_BASE = dict(vocab=64, layers=1, seq=8, batch=2)
QUICK_WIDTH_SWEEP = (16, 32, 64)
QUICK_DECODE_CONFIG = "tiny"
QUICK_DECODE_CONTEXTS = (8, 16)


def seq_sweep_config(n, quick=False):
    """The config of the sequence-length sweep at length ``n`` (batch 1)."""
    return {**(QUICK_SEQ_SWEEP_BASE if quick else SEQ_SWEEP_BASE), "seq": n}


def width_sweep_config(d, quick=False):
    """The config of the width sweep at width ``d`` (heads of width 64, at least one)."""
    return {**(QUICK_WIDTH_SWEEP_BASE if quick else WIDTH_SWEEP_BASE), "d": d,
            "heads": max(1, d // HEAD_WIDTH)}


def forward_flops(cfg):
    """Matmul FLOPs of one forward: a matmul [m, k] x [k, n] is 2 m k n FLOPs.

    forward = 2 * tokens * (weights of every Linear and of the LM head)
            + 4 * B * N^2 * d * layers   (Q K^T and weights @ V over the full N x N table).
    A training step is counted as 3 forwards (backward: two matmuls per forward one).
    Embedding lookups, norms, activations and the optimizer are not counted.
    """
    d, layers, heads = cfg["d"], cfg["layers"], cfg["heads"]
    kv_heads = cfg.get("kv_heads", heads)
    head_dim = d // heads
    batch, n = cfg["batch"], cfg["seq"]
    ffn_matrices = 3 if cfg.get("llama") else 2
    per_layer = d * (heads + 2 * kv_heads) * head_dim + d * d + ffn_matrices * d * 4 * d
    weights = layers * per_layer + d * cfg["vocab"]
    return 2 * batch * n * weights + 4 * batch * n * n * d * layers
