"""Each optimizer update against its formula, written out again here in plain NumPy (float64)."""
import math

import numpy as np
import pytest

from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.core.module import Parameter
from npformer.t19_optim import SGD, AdamW, clip_grad_norm, default_no_decay, warmup_cosine


def _params(rng, dtype=np.float64):
    """A 2-D weight, a bias and a norm gain, with their names."""
    return [("layer.weight", Parameter(rng.standard_normal((3, 4)).astype(dtype))),
            ("layer.bias", Parameter(rng.standard_normal(4).astype(dtype))),
            ("norm.gamma", Parameter(rng.standard_normal(4).astype(dtype)))]


def _grads(rng, named, steps):
    return [[rng.standard_normal(p.shape) for _, p in named] for _ in range(steps)]


def test_sgd_momentum_matches_formula(rng):
    named = _params(rng)
    start = [p.data.copy() for _, p in named]
    grads = _grads(rng, named, 4)
    opt = SGD(named, lr=0.05, momentum=0.9)
    for gs in grads:
        for (_, p), g in zip(named, gs):
            p.grad[...] = g
        opt.step()
    for i, (_, p) in enumerate(named):
        w, buf = start[i].copy(), np.zeros_like(start[i])
        for gs in grads:
            buf = 0.9 * buf + gs[i]
            w = w - 0.05 * buf
        np.testing.assert_allclose(p.data, w, rtol=1e-12, atol=1e-12)


def test_sgd_without_momentum_is_plain_gradient_step(rng):
    named = _params(rng)
    before = named[0][1].data.copy()
    g = rng.standard_normal(before.shape)
    named[0][1].grad[...] = g
    SGD(named, lr=0.3).step()
    np.testing.assert_allclose(named[0][1].data, before - 0.3 * g, rtol=1e-12)


def test_adamw_matches_formula(rng):
    named = _params(rng)
    start = [p.data.copy() for _, p in named]
    grads = _grads(rng, named, 5)
    lr, b1, b2, eps, wd = 0.01, 0.8, 0.95, 1e-6, 0.1
    opt = AdamW(named, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    for gs in grads:
        for (_, p), g in zip(named, gs):
            p.grad[...] = g
        opt.step()
    for i, (name, p) in enumerate(named):
        decay = wd if name == "layer.weight" else 0.0      # bias and gamma are not decayed
        w, m, v = start[i].copy(), 0.0, 0.0
        for t, gs in enumerate(grads, start=1):
            g = gs[i]
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g ** 2
            m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
            w = w - lr * (m_hat / (np.sqrt(v_hat) + eps) + decay * w)
        np.testing.assert_allclose(p.data, w, rtol=1e-10, atol=1e-12)


def test_adamw_first_step_moves_each_weight_by_about_lr(rng):
    # with bias correction, step 1 is lr * g / (|g| + eps): every coordinate moves by ~lr
    named = [("w", Parameter(np.zeros((5, 5))))]
    named[0][1].grad[...] = rng.choice([-1.0, 1.0], (5, 5)) * rng.uniform(1e-3, 1e-2, (5, 5))
    AdamW(named, lr=0.1, weight_decay=0.0).step()
    np.testing.assert_allclose(np.abs(named[0][1].data), 0.1, rtol=1e-4)  # |g| >> eps


def test_adamw_float32_stays_float32_and_in_place(rng):
    named = _params(rng, np.float32)
    arrays = [p.data for _, p in named]
    for _, p in named:
        p.grad[...] = 1.0
    opt = AdamW(named)
    opt.step()
    for (_, p), a in zip(named, arrays):
        assert p.data is a and p.data.dtype == np.float32
    assert all(m.dtype == np.float32 for m in opt.exp_avg.values())


def test_default_no_decay_on_model_names():
    model = DecoderLM(DecoderConfig.gpt2(vocab_size=10, d_model=8, n_heads=2, tie_embeddings=False),
                      np.random.default_rng(0))
    skipped = {name for name, p in model.named_parameters() if default_no_decay(name, p)}
    assert "tokens.weight" in skipped and "positions.weight" in skipped
    assert "blocks.0.norm1.gamma" in skipped and "blocks.0.attn.qkv.bias" in skipped
    assert "blocks.0.attn.qkv.weight" not in skipped and "head.weight" not in skipped


def test_no_decay_as_name_set_and_weight_decay_alone(rng):
    w = Parameter(np.full((2, 2), 3.0))
    opt = AdamW([("w", w)], lr=0.1, weight_decay=0.5, no_decay=())
    opt.step()                                 # zero gradient: only the decay acts
    np.testing.assert_allclose(w.data, 3.0 * (1 - 0.1 * 0.5))
    with pytest.raises(ValueError, match="no_decay"):
        AdamW([("w", w)], no_decay={"nope"})


def test_state_dict_resume_equals_uninterrupted(rng):
    named_a, named_b = _params(rng), None
    named_b = [(n, Parameter(p.data.copy())) for n, p in named_a]
    grads = _grads(rng, named_a, 6)
    opt_a = AdamW(named_a, lr=0.02)
    opt_b = AdamW(named_b, lr=0.02)
    for k, gs in enumerate(grads):
        for (_, p), g in zip(named_a, gs):
            p.grad[...] = g
        opt_a.step()
        if k < 3:
            for (_, p), g in zip(named_b, gs):
                p.grad[...] = g
            opt_b.step()
    state = opt_b.state_dict()
    resumed = AdamW(named_b, lr=0.5).load_state_dict(state)
    assert resumed.steps == 3 and resumed.lr == 0.02
    for gs in grads[3:]:
        for (_, p), g in zip(named_b, gs):
            p.grad[...] = g
        resumed.step()
    for (_, a), (_, b) in zip(named_a, named_b):
        np.testing.assert_array_equal(a.data, b.data)
    with pytest.raises(ValueError, match="optimizer state"):
        SGD(named_b).load_state_dict(state)


def test_clip_grad_norm(rng):
    named = _params(rng)
    for _, p in named:
        p.grad[...] = rng.standard_normal(p.shape)
    grads = [p.grad.copy() for _, p in named]
    expected = math.sqrt(sum((g ** 2).sum() for g in grads))
    total = clip_grad_norm(named, max_norm=0.5)
    assert total == pytest.approx(expected, rel=1e-12)
    after = math.sqrt(sum((p.grad ** 2).sum() for _, p in named))
    assert after == pytest.approx(0.5, rel=1e-5)
    for (_, p), g in zip(named, grads):            # direction unchanged
        np.testing.assert_allclose(p.grad * expected, g * after, rtol=1e-10)
    before = [p.grad.copy() for _, p in named]
    clip_grad_norm(named, max_norm=10.0)           # under the limit: untouched
    for (_, p), g in zip(named, before):
        np.testing.assert_array_equal(p.grad, g)


def test_warmup_cosine_schedule():
    peak, low = 1e-3, 1e-5
    lrs = [warmup_cosine(s, 100, 10, peak, low) for s in range(100)]
    assert lrs[0] == pytest.approx(peak / 10) and lrs[9] == pytest.approx(peak)
    assert np.all(np.diff(lrs[:10]) > 0) and np.all(np.diff(lrs[10:]) <= 0)
    mid = 10 + 45                                  # half way through the decay: the mean
    assert lrs[mid] == pytest.approx((peak + low) / 2)
    assert warmup_cosine(100, 100, 10, peak, low) == pytest.approx(low)
    assert warmup_cosine(500, 100, 10, peak, low) == pytest.approx(low)


def test_bad_arguments_name_themselves():
    p = [("w", Parameter(np.zeros(2)))]
    with pytest.raises(ValueError, match="lr"):
        AdamW(p, lr=-1)
    with pytest.raises(ValueError, match="betas"):
        AdamW(p, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="momentum"):
        SGD(p, momentum=1.5)
    with pytest.raises(ValueError, match="empty"):
        AdamW([])


@pytest.mark.crosscheck
def test_adamw_and_sgd_match_torch(rng):
    torch = pytest.importorskip("torch")
    start = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) for _ in range(5)]
    for make_ours, make_theirs in [
        (lambda n: AdamW(n, lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1, no_decay=()),
         lambda t: torch.optim.AdamW([t], lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)),
        (lambda n: SGD(n, lr=0.05, momentum=0.9),
         lambda t: torch.optim.SGD([t], lr=0.05, momentum=0.9)),
    ]:
        ours = Parameter(start.copy())
        theirs = torch.tensor(start.copy(), requires_grad=True)
        opt, ref = make_ours([("w", ours)]), make_theirs(theirs)
        for g in grads:
            ours.grad[...] = g
            theirs.grad = torch.tensor(g)
            opt.step()
            ref.step()
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12, atol=1e-14)
