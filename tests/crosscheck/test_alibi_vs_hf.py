"""ALiBi against Hugging Face: BLOOM's and MPT's bias tensors, and attention with BLOOM's bias
differentiated by PyTorch's autograd.

BLOOM writes the bias as + m_h j over the real keys (the cumulative count of the attention
mask, so a left-padded row starts again at 0); npformer writes - m_h (i - j). The two differ by
one number per query row, which no softmax sees: the weights, the output and every gradient
must agree. MPT writes - m_h (M - 1 - j), the last query's own bias, and for a head count that
is a power of 2 it draws the same slopes as the paper.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from crosscheck_util import check  # noqa: E402
from transformers.models.bloom.modeling_bloom import build_alibi_tensor  # noqa: E402
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor  # noqa: E402

from npformer import ALiBiAttention, alibi_forward, alibi_slopes  # noqa: E402

pytestmark = pytest.mark.crosscheck


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 6, 8, 12, 16, 20, 32])
def test_slopes_equal_blooms(heads):
    ones = torch.ones(1, 2, dtype=torch.int64)
    bias = build_alibi_tensor(ones, heads, torch.float64)        # [H, 1, 2]: m_h * (0, 1)
    check("ALiBi: slopes (BLOOM)", f"{heads} heads", alibi_slopes(heads), bias[:, 0, 1], 1e-7)


@pytest.mark.parametrize("heads", [1, 2, 4, 8, 16])
def test_the_last_querys_bias_equals_mpts(heads):
    M = 7
    theirs = build_mpt_alibi_tensor(heads, M).double()[:, 0, :]          # [H, M]
    ours, _ = alibi_forward(np.zeros((1, heads, 1, M)), alibi_slopes(heads))
    check("ALiBi: bias (MPT)", f"{heads} heads", ours[0, :, 0, :], theirs, 1e-7)


def _blooms_attention(q, k, v, real):
    """softmax(q k^T / sqrt(D) + BLOOM's bias, causal and padding masked) v, in torch float64."""
    B, H, N, D = q.shape
    bias = build_alibi_tensor(real.long(), H, torch.float64).view(B, H, 1, N)
    may = torch.tril(torch.ones(N, N, dtype=torch.bool)) & real[:, None, None, :]
    scores = q @ k.transpose(-1, -2) / D ** 0.5 + bias
    weights = torch.softmax(scores.masked_fill(~may, torch.finfo(torch.float64).min), dim=-1)
    return weights @ v, weights


@pytest.mark.parametrize("heads", [4, 6])
def test_attention_with_blooms_bias_forward_and_backward(heads, rng):
    B, N, D = 2, 7, 5
    q, k, v = (rng.normal(size=(B, heads, N, D)) for _ in range(3))
    real = np.ones((B, N), bool)
    real[1, :3] = False                                          # row 1 left-padded by 3
    G = rng.normal(size=(B, heads, N, D)) * real[:, None, :, None]   # padded queries carry nothing
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    out, weights = _blooms_attention(tq, tk, tv, torch.tensor(real))
    out.backward(torch.tensor(G))

    kernel = ALiBiAttention()
    ours, cache = kernel.forward(q, k, v, mask=real[:, None, None, :], causal=True)
    grads = kernel.backward(G, cache)
    rows = np.broadcast_to(real[:, None, :], (B, heads, N))            # real queries
    key = f"ALiBi: attention (BLOOM) {heads} heads"
    check(key, "weights", cache.weights[rows], weights.detach().numpy()[rows], 1e-12)
    check(key, "output", ours[rows], out.detach().numpy()[rows], 1e-12)
    for name, mine, theirs in zip("qkv", grads, (tq, tk, tv)):
        check(key, f"d_{name}", mine, theirs.grad, 1e-12)
