"""npformer.testing.conform on PyTorch's own functions, through from_torch.

PyTorch is an implementation written by other people: its functions must conform to the
components they compute (output, every gradient from autograd, every property), and a
PyTorch function with a known mistake in it must fail with that mistake named.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from npformer.testing import conform, from_torch  # noqa: E402

pytestmark = pytest.mark.crosscheck
EXAMPLES = 40


def sdpa(q, k, v, mask=None, scale=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def sdpa_gqa(q, k, v, mask=None, scale=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)


def layer_norm(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


def rms_norm(x, gamma, eps=1e-6):
    return F.rms_norm(x, x.shape[-1:], gamma, eps)


def cross_entropy(logits, targets, ignore_index=-100):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=ignore_index)


def softmax(x, axis=-1):
    return torch.softmax(x, dim=axis)


def gelu(x):
    return F.gelu(x)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def silu(x):
    return F.silu(x)


@pytest.mark.parametrize("component, fn", [
    ("attention", sdpa), ("grouped_attention", sdpa_gqa), ("layernorm", layer_norm),
    ("rmsnorm", rms_norm), ("softmax", softmax),
    ("gelu", gelu), ("gelu_tanh", gelu_tanh), ("silu", silu)])
def test_pytorch_conforms(component, fn):
    report = conform(component, from_torch(fn), examples=EXAMPLES)
    assert report.ok, str(report)
    assert all(c.examples >= EXAMPLES for c in report.checks if c.kind != "property")


def test_pytorch_cross_entropy_conforms_but_where_every_target_is_ignored():
    # PyTorch averages over zero counted targets and returns NaN; npformer's loss is then 0
    report = conform("cross_entropy", from_torch(cross_entropy), examples=EXAMPLES)
    failed = [c for c in report.checks if c.failure is not None]
    assert [c.name for c in failed] == ["output"], str(report)
    logits, targets = failed[0].failure.example.args
    assert (targets == -100).all()
    assert np.isnan(cross_entropy(torch.tensor(logits), torch.tensor(targets)).item())


def test_pytorch_attention_without_its_scale_is_t5s_convention_named():
    def unscaled(q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
    report = conform("attention", from_torch(unscaled), examples=EXAMPLES)
    assert report.verdict == "conforms under convention" and report.convention == {"scale": "none"}, str(report)


def test_pytorch_attention_scaled_by_d_fails_with_the_mistake_named():
    def by_d(q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / q.shape[-1])
    report = conform("attention", from_torch(by_d), examples=EXAMPLES)
    assert not report.ok
    failure = next(c.failure for c in report.checks if c.name == "output")
    assert failure.mistake is not None and failure.mistake.name == "attention-forward-scale-by-D", str(report)


def test_pytorch_layer_norm_over_the_wrong_axis_fails():
    def over_positions(x, gamma, beta, eps=1e-5):
        moved = x.transpose(-1, -2)
        normed = (moved - moved.mean(-1, keepdim=True)) / torch.sqrt(moved.var(-1, unbiased=False,
                                                                              keepdim=True) + eps)
        return normed.transpose(-1, -2) * gamma + beta
    report = conform("layernorm", from_torch(over_positions), examples=EXAMPLES)
    assert not report.ok
    failed = {c.name for c in report.checks if c.failure is not None}
    assert any(name.startswith("with gamma = 1 and beta = 0 each position gets mean 0") for name in failed), \
        str(report)
