"""The npformer side of the benchmark: what one timed call does in an npformer worker.

Only npformer's public API is used (DecoderConfig, DecoderLM, cross-entropy, AdamW, the
KV cache, the attention functions). The worker process imports this module; the parent
never does, so only the workers ever load a BLAS.
"""
from __future__ import annotations

import time
import tracemalloc

import numpy as np


def npformer_model(cfg, max_len=None):
    """A DecoderLM with the shapes of a benchmark config (GPT-2 or Llama recipe)."""
    from npformer import DecoderConfig, DecoderLM
    common = dict(vocab_size=cfg["vocab"], d_model=cfg["d"], n_layers=cfg["layers"],
                  n_heads=cfg["heads"], max_len=max_len or cfg["seq"])
    if cfg.get("llama"):
        config = DecoderConfig.llama(n_kv_heads=cfg.get("kv_heads"), **common)
    else:
        config = DecoderConfig.gpt2(**common)
    return DecoderLM(config, np.random.default_rng(0))


class NpformerSteps:
    """A model, its AdamW and one batch: the three timed workloads of a config."""

    def __init__(self, cfg):
        from npformer import AdamW
        self.model = npformer_model(cfg)
        self.optimizer = AdamW(self.model.named_parameters(), lr=1e-4, weight_decay=0.01)
        rng = np.random.default_rng(1)
        self.ids = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
        self.targets = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
        self.cache_bytes = 0

    def train_no_opt(self):
        """Zero the gradients, forward, cross-entropy, backward."""
        from npformer import cross_entropy_backward, cross_entropy_forward
        self.optimizer.zero_grad()          # as PyTorch's reference does: the optimizer's list
        logits, cache = self.model.forward(self.ids)
        loss, loss_cache = cross_entropy_forward(logits, self.targets)
        if not self.cache_bytes:        # walking the caches is not part of a step: the first only
            self.cache_bytes = cache.nbytes + loss_cache.nbytes
        d_logits, _ = cross_entropy_backward(1.0, loss_cache)
        del logits, loss_cache          # free the [B, N, V] tables before the backward
        self.model.backward(d_logits, cache)
        return float(loss)

    def train(self):
        """The training step: train_no_opt, then one AdamW update."""
        loss = self.train_no_opt()
        self.optimizer.step()
        return loss

    def forward(self):
        """Inference: ``model(ids)`` returns the logits and drops the cache."""
        return self.model(self.ids)


class NpformerDecode:
    """KV-cached decoding: each call feeds one token to a cache holding ``context`` positions.

    ``before_round`` (untimed) refills a fresh cache with the prompt, so every token of a
    round is decoded at context ``context`` to ``context + tokens_per_round - 1``.
    """

    def __init__(self, cfg, context, tokens_per_round=16):
        self.capacity = context + tokens_per_round
        self.model = npformer_model(cfg, max_len=self.capacity)
        rng = np.random.default_rng(2)
        self.ids = rng.integers(0, cfg["vocab"], (1, self.capacity))
        self.context = context
        self.cache = None
        self.position = context

    def before_round(self):
        self.cache = self.model.new_kv_cache(1, self.capacity)
        self.model(self.ids[:, :self.context], kv_cache=self.cache)
        self.position = self.context

    def call(self):
        if self.position >= self.capacity:
            self.before_round()
        token = self.ids[:, self.position:self.position + 1]
        self.position += 1
        return self.model(token, kv_cache=self.cache)


def make_workload(spec):
    """(call, before_round or None, facts) for a workload spec sent by the parent.

    ``facts`` is a function returning what the workload learned about itself (parameter
    count, bytes kept for backward), read after the timing.
    """
    kind, cfg = spec["kind"], spec["cfg"]
    if kind == "decode":
        decode = NpformerDecode(cfg, spec["context"])
        return decode.call, decode.before_round, lambda: {}
    if kind not in ("train", "train_no_opt", "forward"):
        raise ValueError(f"kind: expected train, train_no_opt, forward or decode, got {kind!r}")
    steps = NpformerSteps(cfg)
    return getattr(steps, kind), None, lambda: {"params": steps.model.num_parameters(),
                                                "cache_bytes": steps.cache_bytes}


def random_square_pair(n):
    """Two float32 [n, n] arrays for the GEMM peak (``benchmarks.worker.gemm_peak``)."""
    rng = np.random.default_rng(n)
    return (rng.standard_normal((n, n), dtype=np.float32),
            rng.standard_normal((n, n), dtype=np.float32))


def attention_alone(lengths, heads=4, head_dim=64):
    """Causal attention forward + backward, batch 1: the full score table vs blockwise.

    Time of one call after one untimed call (two for the shorter lengths) and the
    tracemalloc peak of the numpy allocations of a second call (inputs excluded).
    """
    from npformer import (attention_backward, attention_forward, causal_mask,
                          flash_attention_backward, flash_attention_forward)
    rng = np.random.default_rng(3)
    rows = []
    for n in lengths:
        q, k, v, d_out = (rng.standard_normal((1, heads, n, head_dim), dtype=np.float32)
                          for _ in range(4))

        def full(n=n, q=q, k=k, v=v, d_out=d_out):
            _, cache = attention_forward(q, k, v, causal_mask(n)[None, None])
            return attention_backward(d_out, cache)

        def blockwise(q=q, k=k, v=v, d_out=d_out):
            _, cache = flash_attention_forward(q, k, v, causal=True)
            return flash_attention_backward(d_out, cache)

        row = {"length": n}
        for label, fn in (("full", full), ("blockwise", blockwise)):
            fn()
            start = time.perf_counter()
            fn()
            row[label + "_time"] = time.perf_counter() - start
            tracemalloc.start()
            fn()
            row[label + "_bytes"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        rows.append(row)
    return rows
