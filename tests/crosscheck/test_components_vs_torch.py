"""Every component against PyTorch autograd, in float64, with the same weights.

For each: a random input, random non-trivial parameters, a random upstream
gradient g. npformer's forward and backward(g) must equal torch's forward and
the gradients autograd computes for  sum(out * g)  — the output, the input
gradient and every parameter gradient — to a relative error <= 1e-10.
Torch's side is written independently: its own modules (nn.LayerNorm,
nn.RMSNorm, nn.MultiheadAttention, F.scaled_dot_product_attention with
enable_gqa, F.cross_entropy, torch.optim.AdamW) or the formula spelled out
differently (RoPE through complex multiplication, as in Meta's Llama code).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from crosscheck_util import check  # noqa: E402

import npformer  # noqa: E402
from npformer.t04_attention import causal_mask, padding_mask  # noqa: E402

pytestmark = pytest.mark.crosscheck
TOL = 1e-10


def t(a, grad=True):
    """float64 torch leaf tensor sharing nothing with the numpy array."""
    return torch.tensor(np.array(a, dtype=np.float64), requires_grad=grad)


def randomise(module, rng):
    """Give every parameter of an npformer module random non-trivial values (gamma != 1, bias != 0)."""
    for _, p in module.named_parameters():
        p.data[...] = rng.standard_normal(p.shape) * (0.5 if p.data.ndim > 1 else 1.0) + \
            (1.0 if p.data.ndim == 1 else 0.0)
    return module


def backward_through(out, g):
    """Autograd's gradients of sum(out * g)."""
    (out * torch.tensor(g)).sum().backward()


# -- stateless functions ---------------------------------------------------------------------
ACTIVATIONS = {
    "gelu": (npformer.gelu_forward, npformer.gelu_backward, lambda x: F.gelu(x)),
    "gelu_tanh": (npformer.gelu_tanh_forward, npformer.gelu_tanh_backward,
                  lambda x: F.gelu(x, approximate="tanh")),
    "silu": (npformer.silu_forward, npformer.silu_backward, F.silu),
    "relu": (npformer.relu_forward, npformer.relu_backward, F.relu),
    "log_softmax": (npformer.log_softmax_forward, npformer.log_softmax_backward,
                    lambda x: F.log_softmax(x, dim=-1)),
    "tanh": (npformer.tanh_forward, npformer.tanh_backward, torch.tanh),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(name, rng):
    forward, backward, theirs = ACTIVATIONS[name]
    x = 3 * rng.standard_normal((2, 5, 7))
    g = rng.standard_normal(x.shape)
    y, cache = forward(x)
    dx = backward(g, cache)
    xt = t(x)
    yt = theirs(xt)
    backward_through(yt, g)
    check(f"component: {name}", "forward", y, yt, TOL)
    check(f"component: {name}", "d_x", dx, xt.grad, TOL)


def test_softmax_with_mask(rng):
    x = 4 * rng.standard_normal((2, 3, 4, 6))
    mask = rng.random(x.shape) < 0.6
    mask[..., 0] = True                               # torch gives NaN on a fully masked row
    g = rng.standard_normal(x.shape)
    y, cache = npformer.softmax_forward(x, mask=mask)
    dx = npformer.softmax_backward(g, cache)
    xt = t(x)
    yt = torch.softmax(xt.masked_fill(~torch.tensor(mask), float("-inf")), dim=-1)
    backward_through(yt, g)
    check("component: softmax (masked)", "forward", y, yt, TOL)
    check("component: softmax (masked)", "d_x", dx, xt.grad, TOL)


# -- attention ------------------------------------------------------------------------------
def test_masked_attention_against_sdpa(rng):
    """Causal & right padding, scaled dot-product attention (q, k, v gradients)."""
    B, H, N, D = 2, 3, 6, 4
    q, k, v = (rng.standard_normal((B, H, N, D)) for _ in range(3))
    mask = causal_mask(N)[None, None] & padding_mask(lengths=np.array([6, 4]), n=N)
    g = rng.standard_normal((B, H, N, D))
    out, cache = npformer.attention_forward(q, k, v, mask)
    dq, dk, dv = npformer.attention_backward(g, cache)
    qt, kt, vt = t(q), t(k), t(v)
    out_t = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=torch.tensor(mask))
    backward_through(out_t, g)
    key = "component: masked attention"
    check(key, "forward", out, out_t, TOL)
    for name, ours, theirs in (("dq", dq, qt.grad), ("dk", dk, kt.grad), ("dv", dv, vt.grad)):
        check(key, name, ours, theirs, TOL)


def test_multi_head_attention_against_nn_multiheadattention(rng):
    B, N, d, H = 2, 5, 12, 3
    mha = randomise(npformer.MultiHeadAttention(d, H, bias=True, rng=rng, dtype=np.float64), rng)
    x = rng.standard_normal((B, N, d))
    real = np.array([[True] * 5, [True] * 3 + [False] * 2])
    mask = causal_mask(N)[None, None] & padding_mask(key_mask=real)
    g = rng.standard_normal((B, N, d))
    y, cache = mha.forward(x, mask)
    dx = mha.backward(g, cache)

    theirs = torch.nn.MultiheadAttention(d, H, bias=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.tensor(mha.qkv.weight.data.T))   # [3d, d], rows [Q; K; V]
        theirs.in_proj_bias.copy_(torch.tensor(mha.qkv.bias.data))
        theirs.out_proj.weight.copy_(torch.tensor(mha.out.weight.data.T))
        theirs.out_proj.bias.copy_(torch.tensor(mha.out.bias.data))
    xt = t(x)
    future = torch.tensor(~causal_mask(N))                  # torch: True = may NOT read
    yt, _ = theirs(xt, xt, xt, attn_mask=future, key_padding_mask=torch.tensor(~real),
                   need_weights=False)
    backward_through(yt, g)
    key = "component: MultiHeadAttention"
    rows = real                                              # padded queries: not compared
    check(key, "forward", y[rows], yt[torch.tensor(rows)], TOL)
    check(key, "d_x", dx, xt.grad, TOL)
    check(key, "d qkv.weight", mha.qkv.weight.grad, theirs.in_proj_weight.grad.T, TOL)
    check(key, "d qkv.bias", mha.qkv.bias.grad, theirs.in_proj_bias.grad, TOL)
    check(key, "d out.weight", mha.out.weight.grad, theirs.out_proj.weight.grad.T, TOL)
    check(key, "d out.bias", mha.out.bias.grad, theirs.out_proj.bias.grad, TOL)


@pytest.mark.parametrize("rope", [False, True], ids=["plain", "rope"])
def test_grouped_query_attention_against_sdpa_enable_gqa(rope, rng):
    B, N, d, H, H_kv = 2, 6, 16, 4, 2
    D = d // H
    rotary = npformer.Rotary(D) if rope else None
    mha = randomise(npformer.MultiHeadAttention(d, H, H_kv, bias=False, rope=rotary, rng=rng,
                                                dtype=np.float64), rng)
    x = rng.standard_normal((B, N, d))
    mask = causal_mask(N)[None, None]
    g = rng.standard_normal((B, N, d))
    y, cache = mha.forward(x, mask)
    dx = mha.backward(g, cache)

    xt, w_qkv, w_out = t(x), t(mha.qkv.weight.data), t(mha.out.weight.data)
    q, k, v = torch.split(xt @ w_qkv, [H * D, H_kv * D, H_kv * D], dim=-1)
    q = q.reshape(B, N, H, D).transpose(1, 2)
    k = k.reshape(B, N, H_kv, D).transpose(1, 2)
    v = v.reshape(B, N, H_kv, D).transpose(1, 2)
    if rope:
        q, k = rope_half_torch(q, np.arange(N), D), rope_half_torch(k, np.arange(N), D)
    mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    yt = mixed.transpose(1, 2).reshape(B, N, d) @ w_out
    backward_through(yt, g)
    key = "component: GQA (SDPA enable_gqa)" + (" + RoPE" if rope else "")
    check(key, "forward", y, yt, TOL)
    check(key, "d_x", dx, xt.grad, TOL)
    check(key, "d qkv.weight", mha.qkv.weight.grad, w_qkv.grad, TOL)
    check(key, "d out.weight", mha.out.weight.grad, w_out.grad, TOL)


# -- RoPE --------------------------------------------------------------------------------
def _inv_freq(rotated, theta=10000.0):
    return 1.0 / theta ** (torch.arange(0, rotated, 2, dtype=torch.float64) / rotated)


def rope_half_torch(x, positions, head_dim, fraction=1.0, theta=10000.0):
    """Hugging Face's form: x * cos + rotate_half(x) * sin on the first R features."""
    rotated = int(head_dim * fraction) // 2 * 2
    freqs = torch.tensor(np.asarray(positions, np.float64))[..., None] * _inv_freq(rotated, theta)
    emb = torch.cat([freqs, freqs], dim=-1)                   # [..., N, R]
    if emb.dim() == 3:
        emb = emb[:, None]                                    # [B, 1, N, R]
    cos, sin = emb.cos(), emb.sin()
    x_rot, x_pass = x[..., :rotated], x[..., rotated:]
    half = rotated // 2
    rotate_half = torch.cat([-x_rot[..., half:], x_rot[..., :half]], dim=-1)
    return torch.cat([x_rot * cos + rotate_half * sin, x_pass], dim=-1)


def rope_interleaved_torch(x, positions, head_dim, theta=10000.0):
    """Meta's form: pairs (2i, 2i+1) as complex numbers times e^{i p w}."""
    freqs = torch.tensor(np.asarray(positions, np.float64))[:, None] * _inv_freq(head_dim, theta)
    phase = torch.polar(torch.ones_like(freqs), freqs)        # [N, D/2]
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], head_dim // 2, 2).contiguous())
    return torch.view_as_real(pairs * phase).flatten(-2)


@pytest.mark.parametrize("layout,fraction,batched", [("half", 1.0, False), ("half", 0.5, False),
                                                     ("half", 1.0, True), ("interleaved", 1.0, False)])
def test_rope(layout, fraction, batched, rng):
    B, H, N, D = 2, 3, 7, 8
    rope = npformer.Rotary(D, base=500.0, layout=layout, fraction=fraction)
    x = rng.standard_normal((B, H, N, D))
    positions = rng.integers(0, 40, (B, N)) if batched else np.arange(5, 5 + N)
    g = rng.standard_normal(x.shape)
    y, cache = rope.forward(x, positions)
    dx = rope.backward(g, cache)
    xt = t(x)
    if layout == "half":
        yt = rope_half_torch(xt, positions, D, fraction, theta=500.0)
    else:
        yt = rope_interleaved_torch(xt, positions, D, theta=500.0)
    backward_through(yt, g)
    key = f"component: RoPE {layout}" + (f" fraction {fraction}" if fraction != 1 else "")
    check(key, "forward", y, yt, TOL)
    check(key, "d_x", dx, xt.grad, TOL)


# -- norms, FFNs, linear, embedding ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_norm(kind, rng):
    d, eps = 10, 1e-5
    ours = randomise(npformer.LayerNorm(d, eps, np.float64) if kind == "layernorm"
                     else npformer.RMSNorm(d, eps, np.float64), rng)
    x = 2 * rng.standard_normal((3, 4, d)) + 0.7
    g = rng.standard_normal(x.shape)
    y, cache = ours.forward(x)
    dx = ours.backward(g, cache)
    if kind == "layernorm":
        theirs = torch.nn.LayerNorm(d, eps, dtype=torch.float64)
        with torch.no_grad():
            theirs.bias.copy_(torch.tensor(ours.beta.data))
    else:
        theirs = torch.nn.RMSNorm(d, eps, dtype=torch.float64)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.gamma.data))
    xt = t(x)
    yt = theirs(xt)
    backward_through(yt, g)
    key = f"component: {'LayerNorm' if kind == 'layernorm' else 'RMSNorm'}"
    check(key, "forward", y, yt, TOL)
    check(key, "d_x", dx, xt.grad, TOL)
    check(key, "d gamma", ours.gamma.grad, theirs.weight.grad, TOL)
    if kind == "layernorm":
        check(key, "d beta", ours.beta.grad, theirs.bias.grad, TOL)


def test_swiglu(rng):
    d, hidden = 6, 10
    ffn = randomise(npformer.SwiGLU(d, hidden, bias=True, rng=rng, dtype=np.float64), rng)
    x = rng.standard_normal((2, 5, d))
    g = rng.standard_normal(x.shape)
    y, cache = ffn.forward(x)
    dx = ffn.backward(g, cache)
    gate, up, down = (torch.nn.Linear(*shape, dtype=torch.float64) for shape in
                      ((d, hidden), (d, hidden), (hidden, d)))
    with torch.no_grad():
        for lin, ours in ((gate, ffn.gate), (up, ffn.up), (down, ffn.down)):
            lin.weight.copy_(torch.tensor(ours.weight.data.T))
            lin.bias.copy_(torch.tensor(ours.bias.data))
    xt = t(x)
    yt = down(F.silu(gate(xt)) * up(xt))
    backward_through(yt, g)
    key = "component: SwiGLU"
    check(key, "forward", y, yt, TOL)
    check(key, "d_x", dx, xt.grad, TOL)
    for name, lin, ours in (("gate", gate, ffn.gate), ("up", up, ffn.up), ("down", down, ffn.down)):
        check(key, f"d {name}.weight", ours.weight.grad, lin.weight.grad.T, TOL)
        check(key, f"d {name}.bias", ours.bias.grad, lin.bias.grad, TOL)


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "relu"])
def test_ffn(activation, rng):
    d, hidden = 6, 14
    ffn = randomise(npformer.FFN(d, hidden, activation=activation, rng=rng, dtype=np.float64), rng)
    x = rng.standard_normal((2, 5, d))
    g = rng.standard_normal(x.shape)
    y, cache = ffn.forward(x)
    dx = ffn.backward(g, cache)
    act = {"gelu": F.gelu, "gelu_tanh": lambda h: F.gelu(h, approximate="tanh"), "relu": F.relu}
    xt, w1, b1, w2, b2 = (t(a) for a in (x, ffn.up.weight.data, ffn.up.bias.data,
                                          ffn.down.weight.data, ffn.down.bias.data))
    yt = F.linear(act[activation](F.linear(xt, w1.T, b1)), w2.T, b2)
    backward_through(yt, g)
    key = f"component: FFN ({activation})"
    check(key, "forward", y, yt, TOL)
    check(key, "d_x", dx, xt.grad, TOL)
    for name, ours, theirs in (("up.weight", ffn.up.weight, w1), ("up.bias", ffn.up.bias, b1),
                               ("down.weight", ffn.down.weight, w2), ("down.bias", ffn.down.bias, b2)):
        check(key, f"d {name}", ours.grad, theirs.grad, TOL)


@pytest.mark.parametrize("padding_idx", [None, 1, 2], ids=["no padding row", "padding row 1",
                                                       "padding row 2"])
def test_embedding_with_repeated_ids(padding_idx, rng):
    """nn.Embedding(padding_idx=...): that row is read as any other, and never updated."""
    emb = randomise(npformer.Embedding(7, 5, rng, dtype=np.float64, padding_idx=padding_idx), rng)
    ids = np.array([[1, 3, 3, 0], [6, 1, 1, 1]])
    g = rng.standard_normal((2, 4, 5))
    y, cache = emb.forward(ids)
    emb.backward(g, cache)
    theirs = torch.nn.Embedding(7, 5, padding_idx=padding_idx, dtype=torch.float64)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(emb.weight.data))
    yt = theirs(torch.tensor(ids))
    backward_through(yt, g)
    key = "component: Embedding" + ("" if padding_idx is None else " (padding row)")
    check(key, "forward", y, yt, TOL)
    check(key, "d weight", emb.weight.grad, theirs.weight.grad, TOL)


def test_fresh_padding_row_is_zero_as_torch_initialises_it(rng):
    emb = npformer.Embedding(7, 5, rng, padding_idx=4)
    assert not emb.weight.data[4].any()
    assert not torch.nn.Embedding(7, 5, padding_idx=4).weight[4].any()


# -- loss ----------------------------------------------------------------------------------
def test_cross_entropy_with_ignore_index(rng):
    B, N, V = 3, 5, 11
    logits = 3 * rng.standard_normal((B, N, V))
    targets = rng.integers(0, V, (B, N))
    targets[0, :2] = targets[2, 4] = npformer.IGNORE_INDEX
    d_loss = 0.7
    loss, cache = npformer.cross_entropy_forward(logits, targets)
    d_logits, _ = npformer.cross_entropy_backward(d_loss, cache)
    lt = t(logits)
    loss_t = F.cross_entropy(lt.reshape(-1, V), torch.tensor(targets.reshape(-1)),
                             ignore_index=npformer.IGNORE_INDEX)
    (loss_t * d_loss).backward()
    check("component: cross-entropy (ignore index)", "loss", loss, loss_t, TOL)
    check("component: cross-entropy (ignore index)", "d_logits", d_logits, lt.grad, TOL)


# -- AdamW -----------------------------------------------------------------------------------
def test_adamw_steps_match_torch_optim_adamw(rng):
    """Five steps on random gradients; npformer decays only the matrices (its no_decay rule),
    so torch gets two parameter groups built from that same decision."""
    optim = pytest.importorskip("npformer.t19_optim")
    model = npformer.DecoderLM(npformer.DecoderConfig(vocab_size=11, d_model=8, n_heads=2),
                               rng, np.float64)
    randomise(model, rng)
    named = list(model.named_parameters())
    ours = optim.AdamW(named, lr=0.01, betas=(0.85, 0.99), eps=1e-6, weight_decay=0.1)
    leaves = {name: t(p.data) for name, p in named}
    groups = [{"params": [leaves[n] for n, _ in named if ours.decayed[n]], "weight_decay": 0.1},
              {"params": [leaves[n] for n, _ in named if not ours.decayed[n]], "weight_decay": 0.0}]
    assert groups[0]["params"] and groups[1]["params"]
    theirs = torch.optim.AdamW(groups, lr=0.01, betas=(0.85, 0.99), eps=1e-6)
    for _ in range(5):
        for name, p in named:
            grad = rng.standard_normal(p.shape) * rng.choice([1e-3, 1.0, 10.0])
            p.grad[...] = grad
            leaves[name].grad = torch.tensor(grad)
        ours.step()
        theirs.step()
        for name, p in named:
            check("component: AdamW (5 steps)", name, p.data, leaves[name], TOL)
