"""conform_module on PyTorch modules written the way nanoGPT and Llama-style repositories
write them (written for these tests, in those styles): each correct one conforms, at float32
precision or under its named convention where that is what it does; each with one seeded
bug fails with the tensor named and its smallest example.
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

from npformer.t10_model import DecoderConfig  # noqa: E402
from npformer.testing.modules import conform_module  # noqa: E402

pytestmark = pytest.mark.crosscheck
D_MODEL, HEADS, KV_HEADS, MAX_LEN = 16, 4, 2, 16


# -- nanoGPT style ----------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bug=None):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug
        diagonal = 1 if bug == "mask" else 0
        self.register_buffer("bias", torch.tril(torch.ones(MAX_LEN, MAX_LEN), diagonal)
                             .view(1, 1, MAX_LEN, MAX_LEN))

    def forward(self, x, past=None):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        S = k.size(2)
        scale = 1.0 / math.sqrt(C if self.bug == "scale" else k.size(-1))
        att = (q @ k.transpose(-2, -1)) * scale
        att = att.masked_fill(self.bias[:, :, S - T:S, :S] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y), (k, v)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bug=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, bug)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x, past=None):
        attended, present = self.attn(self.ln_1(x), past)
        x = x + attended
        return x + self.mlp(self.ln_2(x)), present

    def __call__(self, x, past=None):           # a block alone returns its output
        out = super().__call__(x, past)
        return out if past is not None or getattr(self, "_with_present", False) else out[0]


class GPT(nn.Module):
    def __init__(self, vocab, n_embd, n_head, n_layer, bug=None):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(MAX_LEN, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, bug) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight        # tied head

    def forward(self, idx, targets=None, past=None):
        start = 0 if past is None else past[0][0].size(2)
        pos = torch.arange(start, start + idx.size(1))
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        presents = []
        for i, block in enumerate(self.transformer.h):
            block._with_present = True
            x, present = block(x, None if past is None else past[i])
            presents.append(present)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits, presents
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def gpt_step(model, new_ids, past):
    """The model's own decoding API: feed the new tokens with the cached keys and values."""
    logits, presents = model(new_ids, past=past)
    return logits, presents


GPT_CONFIG = DecoderConfig.gpt2(vocab_size=32, d_model=D_MODEL, n_heads=HEADS, n_layers=2,
                                max_len=MAX_LEN)


# -- Llama style (Meta's names; RMSNorm in float32 inside; RoPE from complex numbers) ---------
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_complex(x, theta=10000.0):
    """x [B, T, H, D]: pairs (2c, 2c+1) as complex numbers times e^{i p w_c}."""
    B, T, H, D = x.shape
    w = 1.0 / theta ** (torch.arange(0, D, 2, dtype=x.dtype) / D)
    angles = torch.outer(torch.arange(T, dtype=x.dtype), w)               # [T, D/2]
    turn = torch.polar(torch.ones_like(angles), angles)[None, :, None]
    pairs = torch.view_as_complex(x.reshape(B, T, H, D // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(B, T, H, D)


def repeat_kv(x, n_rep):
    B, T, H_kv, D = x.shape
    return x[:, :, :, None].expand(B, T, H_kv, n_rep, D).reshape(B, T, H_kv * n_rep, D)


class LlamaBlock(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, hidden, bug=None):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim, self.bug = n_heads, n_kv_heads, dim // n_heads, bug
        self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(B, T, self.n_heads, self.head_dim)
        if self.bug == "heads":     # features split as [D, H] instead of [H, D]
            k = self.wk(h).view(B, T, self.head_dim, self.n_kv_heads).transpose(2, 3)
        else:
            k = self.wk(h).view(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(h).view(B, T, self.n_kv_heads, self.head_dim)
        q, k = rope_complex(q), rope_complex(k)
        group = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, group), repeat_kv(v, group)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        scores = scores + torch.full((T, T), float("-inf"), dtype=x.dtype).triu(1)
        out = (F.softmax(scores.float(), dim=-1).type_as(q) @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.wo(out)
        return x + self.w2(F.silu(self.w1(self.ffn_norm(x))) * self.w3(self.ffn_norm(x)))


LLAMA_MAP = {"attention_norm.weight": "norm1.gamma", "ffn_norm.weight": "norm2.gamma",
             "wq.weight": ("attn.qkv.weight", "T", "q"), "wk.weight": ("attn.qkv.weight", "T", "k"),
             "wv.weight": ("attn.qkv.weight", "T", "v"), "wo.weight": ("attn.out.weight", "T"),
             "w1.weight": ("ffn.gate.weight", "T"), "w3.weight": ("ffn.up.weight", "T"),
             "w2.weight": ("ffn.down.weight", "T")}
LLAMA_CONFIG = {"d_model": D_MODEL, "n_heads": HEADS, "n_kv_heads": KV_HEADS, "ffn_hidden": 24}


def _torch_seeded(cls, *args, **kwargs):
    torch.manual_seed(0)
    return cls(*args, **kwargs)


def test_nanogpt_mlp_conforms_with_the_preset():
    report = conform_module("gpt2_mlp", _torch_seeded(MLP, D_MODEL), "nanogpt",
                            {"d_model": D_MODEL, "n_heads": HEADS})
    assert report.verdict == "conforms", report


def test_nanogpt_block_conforms_with_the_preset():
    report = conform_module("gpt2_block", _torch_seeded(Block, D_MODEL, HEADS), "nanogpt",
                            {"d_model": D_MODEL, "n_heads": HEADS})
    assert report.verdict == "conforms", report
    assert len([t for t in report.tensors if t.name.startswith("grad")]) == 12


def test_nanogpt_block_scaled_by_the_width_fails_in_attention():
    report = conform_module("gpt2_block", _torch_seeded(Block, D_MODEL, HEADS, bug="scale"),
                            "nanogpt", {"d_model": D_MODEL, "n_heads": HEADS})
    assert report.verdict == "does not conform"
    # one position attends only to itself: the scale cannot show before N = 2
    assert report.smallest["N"] == 2 and report.smallest["B"] == 1
    assert "grad attn.qkv.weight" in {t.name for t in report.failing}


def test_tiny_gpt_with_tied_head_conforms_and_decodes_through_its_cache():
    report = conform_module("decoder", _torch_seeded(GPT, 32, D_MODEL, HEADS, 2), "nanogpt",
                            GPT_CONFIG, step=gpt_step)
    assert report.verdict == "conforms", report
    names = {t.name for t in report.tensors}
    assert {"logits", "loss", "grad tokens.weight", "kv_decode logits"} <= names


def test_tiny_gpt_with_a_mask_off_by_one_fails_at_the_first_position():
    report = conform_module("decoder", _torch_seeded(GPT, 32, D_MODEL, HEADS, 2, bug="mask"),
                            "nanogpt", GPT_CONFIG)
    assert report.verdict == "does not conform"
    assert report.smallest["N"] == 2 and report.smallest["tensor"] in ("logits", "loss")


def test_llama_block_conforms_under_interleaved_rope():
    report = conform_module("llama_block", _torch_seeded(LlamaBlock, D_MODEL, HEADS, KV_HEADS, 24),
                            LLAMA_MAP, LLAMA_CONFIG)
    assert report.verdict == "conforms under convention: rope_layout='interleaved'", report
    assert any("float32" in n for n in report.notes)


def test_llama_block_with_a_wrong_head_split_names_the_key_projection():
    report = conform_module("llama_block",
                            _torch_seeded(LlamaBlock, D_MODEL, HEADS, KV_HEADS, 24, bug="heads"),
                            LLAMA_MAP, LLAMA_CONFIG)
    assert report.verdict == "does not conform"
    assert report.smallest["N"] == 2
    assert "grad wk.weight" in {t.theirs for t in report.failing}


# -- a bug in the block's MLP, traced to the MLP -----------------------------------------------
class ScaledHiddenMLP(MLP):
    """The seeded bug: the hidden layer scaled by 1.1 after the GELU."""

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)) * 1.1)


def test_a_wrong_mlp_inside_a_torch_block_is_traced_to_the_mlp():
    block = _torch_seeded(Block, D_MODEL, HEADS)
    block.mlp = _torch_seeded(ScaledHiddenMLP, D_MODEL)
    report = conform_module("gpt2_block", block, "nanogpt", {"d_model": D_MODEL, "n_heads": HEADS})
    assert report.verdict == "does not conform"
    assert [c.theirs for c in report.parts if c.differs] == ["mlp"], str(report)
    assert {c.theirs for c in report.parts} == {"ln_1", "attn", "ln_2", "mlp"}
    assert "traced to a sub-module: the MLP (their mlp, npformer's ffn) differs on its own" in " ".join(str(report).split())


def test_the_scaled_attention_is_traced_to_the_attention():
    report = conform_module("gpt2_block", _torch_seeded(Block, D_MODEL, HEADS, bug="scale"),
                            "nanogpt", {"d_model": D_MODEL, "n_heads": HEADS})
    assert [c.theirs for c in report.parts if c.differs] == ["attn"], str(report)
