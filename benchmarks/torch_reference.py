"""The PyTorch reference models, written in plain torch eager, independently of npformer.

Two recipes, the same shapes as the npformer configs they are compared with:

- GPT-2 style: token + learned position embeddings, Pre-Norm blocks with LayerNorm,
  a fused Q/K/V projection with biases, causal attention, a tanh-GELU MLP of width 4d,
  a final LayerNorm and an LM head tied to the token embedding;
- Llama style: no position table, RoPE on Q and K ("half" layout), RMSNorm,
  grouped-query attention, a SwiGLU MLP of width 4d, no biases, an untied LM head.

Attention uses ``torch.nn.functional.scaled_dot_product_attention`` with
``is_causal=True``, the way idiomatic PyTorch code (nanoGPT) writes it.
Everything is float32. Nothing here imports npformer.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNormT(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(n, head_dim, theta=10000.0):
    """cos, sin [n, head_dim / 2] for positions 0..n-1."""
    freqs = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * freqs
    return torch.cos(angles).float(), torch.sin(angles).float()


def apply_rope(x, cos, sin):
    """Rotate feature i with feature i + D/2 (the "half" layout) at each position."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class AttentionT(nn.Module):
    def __init__(self, d, n_heads, n_kv_heads, bias, rope):
        super().__init__()
        self.h, self.h_kv, self.hd = n_heads, n_kv_heads, d // n_heads
        self.qkv = nn.Linear(d, (n_heads + 2 * n_kv_heads) * self.hd, bias=bias)
        self.proj = nn.Linear(d, d, bias=bias)
        self.rope = rope

    def forward(self, x, cos=None, sin=None):
        b, n, d = x.shape
        q, k, v = self.qkv(x).split([self.h * self.hd, self.h_kv * self.hd, self.h_kv * self.hd], -1)
        q = q.view(b, n, self.h, self.hd).transpose(1, 2)
        k = k.view(b, n, self.h_kv, self.hd).transpose(1, 2)
        v = v.view(b, n, self.h_kv, self.hd).transpose(1, 2)
        if self.rope:
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.h_kv != self.h:
            k = k.repeat_interleave(self.h // self.h_kv, dim=1)
            v = v.repeat_interleave(self.h // self.h_kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class MLPT(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class SwiGLUT(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class BlockT(nn.Module):
    def __init__(self, d, n_heads, n_kv_heads, llama):
        super().__init__()
        norm = (lambda: RMSNormT(d)) if llama else (lambda: nn.LayerNorm(d))
        self.norm1, self.norm2 = norm(), norm()
        self.attn = AttentionT(d, n_heads, n_kv_heads, bias=not llama, rope=llama)
        self.mlp = SwiGLUT(d, 4 * d) if llama else MLPT(d, 4 * d)

    def forward(self, x, cos=None, sin=None):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class TorchLM(nn.Module):
    """A decoder-only LM: ``llama=False`` is the GPT-2 recipe, ``llama=True`` the Llama one."""

    def __init__(self, vocab, d, n_layers, n_heads, max_len, n_kv_heads=None, llama=False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.llama = llama
        self.tokens = nn.Embedding(vocab, d)
        self.positions = None if llama else nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(BlockT(d, n_heads, n_kv_heads, llama) for _ in range(n_layers))
        self.norm = RMSNormT(d) if llama else nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        if not llama:
            self.head.weight = self.tokens.weight            # tied, as in GPT-2
        else:
            cos, sin = rope_tables(max_len, d // n_heads)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        n = ids.shape[1]
        x = self.tokens(ids)
        cos = sin = None
        if self.llama:
            cos, sin = self.cos[:n], self.sin[:n]
        else:
            x = x + self.positions(torch.arange(n))
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))


def build(cfg):
    """A TorchLM from a benchmark config dict (see benchmarks.specs.CONFIGS)."""
    torch.manual_seed(0)
    return TorchLM(cfg["vocab"], cfg["d"], cfg["layers"], cfg["heads"], cfg["seq"],
                   cfg.get("kv_heads"), cfg.get("llama", False))


class TorchRunner:
    """A model, its AdamW and one batch: the three timed workloads of a config."""

    def __init__(self, cfg, threads=None):
        if threads is not None:
            torch.set_num_threads(threads)
        self.model = build(cfg)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.01)
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=g)
        self.targets = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=g)
        self.vocab = cfg["vocab"]

    def train_no_opt(self):
        """Zero the gradients, forward, cross-entropy, backward."""
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(self.ids)
        loss = F.cross_entropy(logits.view(-1, self.vocab), self.targets.view(-1))
        loss.backward()
        return loss.item()

    def train(self):
        """The training step: train_no_opt, then one AdamW update."""
        loss = self.train_no_opt()
        self.optimizer.step()
        return loss

    def forward(self):
        """Inference: the logits under ``torch.no_grad()`` (no graph kept)."""
        with torch.no_grad():
            return self.model(self.ids)


def make_workload(spec):
    """(call, before_round, facts) for a workload spec: train, train_no_opt or forward."""
    kind = spec["kind"]
    if kind not in ("train", "train_no_opt", "forward"):
        raise ValueError(f"kind: the PyTorch reference runs train, train_no_opt or forward, got {kind!r}")
    runner = TorchRunner(spec["cfg"])
    return getattr(runner, kind), None, lambda: {"params": num_parameters(runner.model)}


def random_square_pair(n):
    """Two float32 [n, n] tensors for the GEMM peak (``benchmarks.worker.gemm_peak``)."""
    g = torch.Generator().manual_seed(n)
    return torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)


def num_parameters(model):
    """Parameters counted once each (a tied weight once)."""
    return sum(p.numel() for p in model.parameters())
