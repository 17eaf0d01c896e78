"""Blocks: residual paths and the Pre-Norm / Post-Norm formulas."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer.t04_attention import causal_mask
from npformer.t10_model import DecoderConfig
from npformer.t09_block import build_block
from support.gradients import check_gradients, gradient_checks


def _zero_sublayer_outputs(block):
    for layer in (block.attn.out, block.ffn.down):
        layer.weight.data[:] = 0
        if layer.bias is not None:
            layer.bias.data[:] = 0


@given(st.integers(0, 10 ** 6), st.sampled_from(["gelu", "swiglu", "relu"]))
def test_residual_carries_x_unchanged_when_sublayers_output_zero(seed, ffn):
    rng = np.random.default_rng(seed)
    block = build_block(DecoderConfig(ffn=ffn), rng, np.float64)
    _zero_sublayer_outputs(block)
    x = rng.standard_normal((2, 5, 8))
    np.testing.assert_array_equal(block(x, causal_mask(5)), x)


def test_residual_example_from_the_tutorial():
    x, sublayer = np.array([2.0, 1.0]), np.array([0.1, -0.2])
    np.testing.assert_allclose(x + sublayer, [2.1, 0.8])


def test_prenorm_block_is_the_two_formulas():
    rng = np.random.default_rng(0)
    block = build_block(DecoderConfig(), rng, np.float64)
    x, mask = rng.standard_normal((1, 4, 8)), causal_mask(4)
    h = x + block.attn(block.norm1(x), mask)
    np.testing.assert_allclose(block(x, mask), h + block.ffn(block.norm2(h)), rtol=1e-12)


def test_postnorm_block_is_the_two_formulas():
    rng = np.random.default_rng(0)
    block = build_block(DecoderConfig(prenorm=False), rng, np.float64)
    x, mask = rng.standard_normal((1, 4, 8)), causal_mask(4)
    h = block.norm1(x + block.attn(x, mask))
    np.testing.assert_allclose(block(x, mask), block.norm2(h + block.ffn(h)), rtol=1e-12)


@pytest.mark.parametrize("name, size, track", gradient_checks("t09_block.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
