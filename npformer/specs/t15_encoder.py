"""The encoder-only backbone and sentence vectors (``t15_encoder.py``), as the engines know them.

L2 normalisation as a component, the gradient-check cases of pooling, normalisation, the
encoder and its pooler, exercise 15 and its claims (padding gets no gradient, an encoder reads
both ways). Mistakes: ``t15_encoder.json``.
"""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from ..t15_encoder import (Encoder, EncoderConfig, Pooler, l2_normalize_backward, l2_normalize_forward,
                           mean_pool_backward, mean_pool_forward)
from . import claims
from .case_inputs import normal, real_tokens, shape
from .registry import Spec
from .t06_activations import elementwise_inputs

spec = Spec("t15_encoder.py")
spec.component("l2_normalize", "L2 normalisation x / max(|x|, eps), as sentence embeddings are normalised",
               "l2_normalize_forward(x, eps=1e-12) -> (y, cache)",
               ("t15_encoder.l2_normalize_forward", "t15_encoder.l2_normalize_backward"), "d_x",
               ("t15_encoder.l2_normalize_forward", "t15_encoder.l2_normalize_backward"))(elementwise_inputs)


@spec.corners("l2_normalize")
def l2_corners(rng):
    from .draw import Example
    x = normal(rng, 2, 3, 4)
    x[0, 0] = x[0, 0] * (1e-13 / np.linalg.norm(x[0, 0]))   # shorter than eps = 1e-12: divided by eps
    return [Example(("x",), (x,))]


# -- gradient-check cases ---------------------------------------------------------------------------
@spec.case("mean_pool")
def mean_pool_case(rng, size):
    B, N, d, H = shape(size)
    key_mask = real_tokens(B, N)
    if size == 1:
        key_mask[-1] = False                    # a row of padding alone pools to zeros
    return (mean_pool_forward, mean_pool_backward), (normal(rng, B, N, d),), {"key_mask": key_mask}


@spec.case("l2_normalize")
def l2_normalize_case(rng, size):
    B, N, d, H = shape(size)
    # offset: were x a multiple of the upstream gradient (both radial), the true gradient
    # would be 0 and the check vacuous
    return (l2_normalize_forward, l2_normalize_backward), (0.5 + normal(rng, B, N, d),), {}


@spec.case("Encoder")
def encoder_case(rng, size):
    B, N, d, H = shape(size)
    config = [EncoderConfig.bert(d_model=d, n_heads=H, vocab_size=11),                  # Post-Norm
              EncoderConfig(d_model=d, n_heads=H, vocab_size=11, n_layers=2, prenorm=True,
                            type_vocab_size=3, embed_scale=2.0),                       # Pre-Norm
              EncoderConfig(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=11, n_layers=2,
                            positions="rope", norm="rmsnorm", ffn="swiglu", attn_bias=False,
                            type_vocab_size=0, embed_norm=False)][size]
    ids = rng.integers(0, 11, (B, N))
    options = {"key_mask": real_tokens(B, N)}
    if config.type_vocab_size:
        options["segments"] = rng.integers(0, config.type_vocab_size, (B, N))
    return Encoder(config, rng), (ids,), options


@spec.case("Pooler")
def pooler_case(rng, size):
    B, N, d, H = shape(size)
    return Pooler(d, rng), (normal(rng, B, N, d),), {}


class PooledEncoder(Module):
    """Check harness: an Encoder with its pooler, ``pooler_output`` [B, d] as the output, so
    one check runs through the pooler and every layer below it."""

    def __init__(self, encoder):
        self.encoder = encoder

    def forward(self, ids, key_mask=None, segments=None):
        """The encoder's pooler_output."""
        states, cache = self.encoder.forward(ids, key_mask, segments)
        pooled, pool_cache = self.encoder.pooler.forward(states)
        return pooled, (cache, pool_cache)

    def backward(self, d_pooled, caches):
        """The encoder's backward from the pooler_output's gradient."""
        cache, pool_cache = caches
        return self.encoder.backward(self.encoder.pooler.backward(d_pooled, pool_cache), cache)


@spec.case("Encoder (pooler, padding row)")
def pooled_encoder_case(rng, size):
    # [PAD] = 0 sits at the padded positions only: nothing real reads them, so the frozen
    # row's true gradient is zero and the check covers every parameter in full
    B, N, d, H = shape(size)
    config = EncoderConfig.bert(d_model=d, n_heads=H, vocab_size=11, n_layers=1 + size % 2,
                                pad_token_id=0, pooler=True)
    key_mask = real_tokens(B, N)
    ids = np.where(key_mask, rng.integers(1, 11, (B, N)), 0)
    return PooledEncoder(Encoder(config, rng)), (ids,), \
        {"key_mask": key_mask, "segments": rng.integers(0, 2, (B, N))}


spec.exercise(15, "encoder", "the encoder-only backbone and sentence vectors",
              "tutorial part 1, GQA and MoE (encoder-only reads both ways)",
              backward=("t15_encoder.py:mean_pool_backward", "t15_encoder.py:l2_normalize_backward",
                        "t15_encoder.py:Encoder.backward"),
              forward=("t15_encoder.py:mean_pool_forward", "t15_encoder.py:l2_normalize_forward"),
              checks=(("mean_pool", (0, 1)), ("l2_normalize", (0, 1)), ("Encoder", (0, 1))),
              components=("l2_normalize",))


@spec.claim("encoder", "mean pooling: padded positions receive exactly zero gradient")
def mean_pool_padding_gets_no_gradient(L, R):
    g = claims.rng()
    key_mask = np.array([[True, True, False], [True, True, True]])
    _, cache = L.t15_encoder.mean_pool_forward(g.standard_normal((2, 3, 4)), key_mask)
    claims.zero("the gradient of the padded position", L.t15_encoder.mean_pool_backward(
        g.standard_normal((2, 4)), cache)[0, 2])


@spec.claim("encoder", "L2 normalisation: the gradient has no component along the output (length changes nothing)")
def l2_gradient_has_no_radial_part(L, R):
    g = claims.rng()
    y, cache = L.t15_encoder.l2_normalize_forward(g.standard_normal((3, 5)))
    d_x = L.t15_encoder.l2_normalize_backward(g.standard_normal((3, 5)), cache)
    claims.close("d_x . y", np.sum(d_x * y, axis=-1), 0.0, 1e-12)


@spec.claim("encoder", "L2 normalisation: a vector shorter than eps is only divided by eps, so its "
                   "gradient is d_out / eps (no projection)")
def l2_short_vector_divided_by_eps(L, R):
    g = claims.rng()
    x = g.standard_normal((2, 4))
    x[0] = x[0] * (1e-13 / np.linalg.norm(x[0]))      # shorter than eps = 1e-12
    _, cache = L.t15_encoder.l2_normalize_forward(x)
    d_out = g.standard_normal((2, 4))
    d_x = L.t15_encoder.l2_normalize_backward(d_out, cache)
    claims.close("the gradient of the short vector", d_x[0], d_out[0] / 1e-12, 1e-9)


def position_gradient(L):
    """{"position_gradient": the position table's gradient after a backward from the state at
    position 0 alone}."""
    g = claims.rng()
    encoder = L.t15_encoder.Encoder(L.t15_encoder.EncoderConfig(vocab_size=11, max_len=6), g, np.float64)
    states, cache = encoder.forward(g.integers(0, 11, (1, 5)))
    encoder.backward(claims.upstream_at(states.shape, (0, 0), g), cache)
    return {"position_gradient": np.asarray(encoder.positions.weight.grad)}


def judge_position_gradient(computed):
    """The claim's verdict: each of the 5 positions' rows received some gradient."""
    grad = computed.get("position_gradient")
    if not isinstance(grad, np.ndarray) or grad.ndim != 2 or grad.shape[0] < 5:
        raise claims.ClaimFailed("the claim's run did not report the position table's gradient")
    rows = np.abs(grad[:5]).sum(axis=-1)
    if not (rows > 0).all():
        raise claims.ClaimFailed(f"position rows {np.flatnonzero(~(rows > 0)).tolist()} received no gradient")


@spec.claim("encoder", "an encoder reads both ways: the state at position 0 sends gradient to every "
                  "position's row of the position table")
def reads_both_ways(L, R):
    return judge_position_gradient(position_gradient(L))


reads_both_ways.compute, reads_both_ways.judge = position_gradient, judge_position_gradient
