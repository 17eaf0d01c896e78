"""Mixture of Experts: routing, the dense limit, the load-balancing loss, counts, gradients."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer import FFN, MoE, SwiGLU
from npformer import gradcheck
from npformer.testing.cases import CASES
from npformer.t03_softmax import softmax
from npformer.t14_moe import EXPERT_KINDS, active_parameters
from support.gradients import check_gradients, gradient_checks

seeds = st.integers(0, 2**32 - 1)


def make_moe(seed, d=4, E=4, k=2, expert="swiglu", bias=False, aux_weight=0.0, scale=0.5):
    """A float64 MoE with non-trivial random parameters (biases != 0)."""
    rng = np.random.default_rng(seed)
    moe = MoE(d, E, k, hidden=3, expert=expert, bias=bias, aux_weight=aux_weight, rng=rng,
              dtype=np.float64)
    for p in moe.parameters():
        p.data += scale * rng.standard_normal(p.shape)
    return moe, rng


def make_dense(expert, d, bias, rng):
    if expert == "swiglu":
        return SwiGLU(d, 3, bias, rng, np.float64)
    return FFN(d, 3, activation=expert, bias=bias, rng=rng, dtype=np.float64)


# -- routing -------------------------------------------------------------------------------
@given(seed=seeds, E=st.integers(1, 6), k_pick=st.integers(0, 5), n=st.integers(1, 7),
       expert=st.sampled_from(EXPERT_KINDS))
def test_routing_weights_are_a_distribution_over_the_top_k(seed, E, k_pick, n, expert):
    k = 1 + k_pick % E
    moe, rng = make_moe(seed, E=E, k=k, expert=expert)
    x = rng.standard_normal((2, n, 4))
    _, cache = moe.forward(x)
    weights, chosen = cache.weights, cache.chosen                       # [T, k]
    assert weights.shape == chosen.shape == (2 * n, k)
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=0, atol=1e-12)
    # independently: router probabilities by plain numpy, and each token's k largest
    logits = x.reshape(-1, 4) @ moe.router.weight.data
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    for t in range(2 * n):
        assert len(set(chosen[t])) == k                                 # k distinct experts
        kept = probs[t, chosen[t]]
        others = np.delete(probs[t], chosen[t])
        assert others.size == 0 or kept.min() >= others.max()
        np.testing.assert_allclose(weights[t], kept / kept.sum(), rtol=1e-12)


@given(seed=seeds, E=st.integers(1, 5), k_pick=st.integers(0, 4),
       expert=st.sampled_from(EXPERT_KINDS), bias=st.booleans())
def test_output_is_the_weighted_sum_of_each_tokens_experts(seed, E, k_pick, expert, bias):
    # reference: a Python loop over tokens, each expert called on one token at a time
    k = 1 + k_pick % E
    moe, rng = make_moe(seed, E=E, k=k, expert=expert, bias=bias)
    x = rng.standard_normal((3, 4))
    y, cache = moe.forward(x)
    for t in range(3):
        expected = sum(w * moe.experts[e](x[t:t + 1])[0]
                       for w, e in zip(cache.weights[t], cache.chosen[t]))
        np.testing.assert_allclose(y[t], expected, rtol=1e-12, atol=1e-14)


# -- the dense limit -------------------------------------------------------------------------
@given(seed=seeds, expert=st.sampled_from(EXPERT_KINDS), bias=st.booleans())
def test_one_expert_equals_the_dense_ffn(seed, expert, bias):
    rng = np.random.default_rng(seed)
    dense = make_dense(expert, 4, bias, rng)
    for p in dense.parameters():
        p.data += 0.5 * rng.standard_normal(p.shape)
    moe = MoE(4, 1, 1, hidden=3, expert=expert, bias=bias, aux_weight=0.0, rng=rng, dtype=np.float64)
    moe.experts[0].load_state_dict(dense.state_dict())
    x = rng.standard_normal((2, 5, 4))
    g = rng.standard_normal((2, 5, 4))
    y, cache = moe.forward(x)
    y_dense, cache_dense = dense.forward(x)
    np.testing.assert_allclose(y, y_dense, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(moe.backward(g, cache), dense.backward(g, cache_dense),
                               rtol=1e-12, atol=1e-14)
    for (name, p), (_, q) in zip(moe.experts[0].named_parameters(), dense.named_parameters()):
        np.testing.assert_allclose(p.grad, q.grad, rtol=1e-12, atol=1e-14, err_msg=name)
    assert cache.aux_loss == pytest.approx(1.0)          # E = k = 1: f = P = 1


@given(seed=seeds, E=st.integers(2, 5), k_pick=st.integers(0, 4), expert=st.sampled_from(EXPERT_KINDS))
def test_identical_experts_equal_the_dense_ffn(seed, E, k_pick, expert):
    # kept weights sum to 1, so k copies of the same FFN give that FFN whatever the routing
    k = 1 + k_pick % E
    moe, rng = make_moe(seed, E=E, k=k, expert=expert)
    dense = make_dense(expert, 4, False, rng)
    for p in dense.parameters():
        p.data += 0.5 * rng.standard_normal(p.shape)
    for expert_module in moe.experts:
        expert_module.load_state_dict(dense.state_dict())
    x = rng.standard_normal((2, 3, 4))
    g = rng.standard_normal((2, 3, 4))
    y, cache = moe.forward(x)
    y_dense, cache_dense = dense.forward(x)
    np.testing.assert_allclose(y, y_dense, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(moe.backward(g, cache), dense.backward(g, cache_dense),
                               rtol=1e-10, atol=1e-12)
    # the router cannot change the output, so (without aux) it gets no gradient,
    # and the experts' gradients add up to the dense one
    np.testing.assert_allclose(moe.router.weight.grad, 0, atol=1e-12)
    for name, q in dense.named_parameters():
        total = sum(dict(e.named_parameters())[name].grad for e in moe.experts)
        np.testing.assert_allclose(total, q.grad, rtol=1e-10, atol=1e-12, err_msg=name)


# -- the load-balancing loss -------------------------------------------------------------------
@given(E=st.integers(1, 8), k_pick=st.integers(0, 7), n=st.integers(1, 9))
def test_a_uniform_router_gives_aux_loss_k(E, k_pick, n):
    # Zero router weights: every probability is exactly 1/E and all E experts tie. Which k
    # the tie-break picks does not matter: with P_e = 1/E, aux = E * sum_e f_e / E = sum_e f_e,
    # and every token fills exactly k slots, so sum_e f_e = k.
    k = 1 + k_pick % E
    moe = MoE(3, E, k, rng=np.random.default_rng(0), dtype=np.float64)
    moe.router.weight.data[...] = 0
    _, cache = moe.forward(np.random.default_rng(1).standard_normal((n, 3)))
    np.testing.assert_allclose(cache.probs, 1 / E, rtol=1e-15)
    assert cache.aux_loss == pytest.approx(k, rel=1e-12)


@given(E=st.integers(2, 8), k_pick=st.integers(0, 7), sharpness=st.floats(0.1, 5.0),
       repeats=st.integers(1, 3))
def test_a_balanced_router_gives_aux_loss_k(E, k_pick, sharpness, repeats):
    # Not uniform per token, no ties: token t prefers experts t, t+1, ... (mod E) with
    # logits sharpness * (E - rank). The E tokens' probability rows are cyclic shifts of
    # one another, so the mean probability of each expert is exactly 1/E, and each
    # expert is among the k choices of exactly k tokens (f_e = k/E): aux = E*E*(k/E)(1/E) = k.
    k = 1 + k_pick % E
    moe = MoE(E, E, k, rng=np.random.default_rng(0), dtype=np.float64)
    moe.router.weight.data[...] = np.eye(E)
    ranks = (np.arange(E)[None, :] - np.arange(E)[:, None]) % E          # [token, expert]
    x = np.tile(sharpness * (E - ranks), (repeats, 1)).astype(np.float64)
    _, cache = moe.forward(x)
    np.testing.assert_allclose(cache.load, k / E, rtol=1e-15)
    assert cache.aux_loss == pytest.approx(k, rel=1e-12)


@given(seed=seeds, E=st.integers(1, 6), k_pick=st.integers(0, 5), n=st.integers(1, 9))
def test_aux_loss_matches_its_definition(seed, E, k_pick, n):
    k = 1 + k_pick % E
    moe, rng = make_moe(seed, E=E, k=k)
    x = rng.standard_normal((n, 4))
    _, cache = moe.forward(x)
    probs = softmax(x @ moe.router.weight.data)
    # f_e counted token by token: how many tokens have e among their k choices, over n
    f = np.array([sum(e in cache.chosen[t] for t in range(n)) for e in range(E)]) / n
    P = probs.mean(0)
    assert cache.aux_loss == pytest.approx(E * float(f @ P), rel=1e-12)
    assert f.sum() == pytest.approx(k)


def test_a_collapsed_router_is_penalised():
    # every token strongly prefers expert 0 (and then 1): f = [1, 1, 0, 0] for k = 2,
    # P close to [1, 0, 0, 0], so aux -> E * 1 * 1 = 4 > k
    moe = MoE(4, 4, 2, rng=np.random.default_rng(0), dtype=np.float64)
    moe.router.weight.data[...] = np.diag([30.0, 10.0, 0.0, 0.0])
    _, cache = moe.forward(np.ones((6, 4)))
    np.testing.assert_allclose(cache.load, [1, 1, 0, 0])
    assert cache.aux_loss == pytest.approx(4.0, rel=1e-6)


# -- gradients -----------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, 2])
def test_registered_gradient_check_covers_main_and_aux_paths(size):
    target, inputs, options = CASES["MoE"](np.random.default_rng(size), size)
    report = gradcheck(target, *inputs, **options)
    assert report.ok, str(report)
    names = {c.name for c in report.checks}
    assert "target.router.weight" in names and "input[0]" in names


@given(seed=seeds, expert=st.sampled_from(EXPERT_KINDS), k=st.integers(1, 3))
def test_default_backward_is_the_gradient_of_output_plus_weighted_aux(seed, expert, k):
    # backward(d_y) without d_aux must be the gradient of <y, d_y> + aux_weight * aux;
    # checked by finite differences with the aux entry's upstream fixed to aux_weight.
    from npformer.specs.t14_moe import WithAuxLoss

    class DefaultBackward(WithAuxLoss):
        def backward(self, d_out, cache):
            return self.target.backward(d_out[:-1].reshape(cache.shape), cache.inner)

    moe, rng = make_moe(seed, E=3, k=k, expert=expert, aux_weight=0.37)
    x = rng.standard_normal((2, 5, 4))   # 10 tokens: f_e is never uniform for k < 3 (else, with
    #                                      k = 1, the router's true gradient is exactly 0)
    _, cache = moe.forward(x)
    if cache.top_k_margin < 1e-3:
        return                                  # too close to a top-k tie for finite differences
    upstream = np.append(rng.standard_normal(x.size), 0.37)
    # with k = 1 the router reaches the loss through the aux term alone: its gradient is small
    # beside the loss, so a step of 1e-6 leaves rounding errors near the tolerance; 1e-5 does not
    report = gradcheck(DefaultBackward(moe), x, upstream=upstream, randomize=False, eps=1e-5)
    assert report.ok, str(report)


def test_float32_stays_float32():
    moe = MoE(8, 4, 2, rng=np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    y, cache = moe.forward(x)
    assert y.dtype == np.float32
    assert moe.backward(np.ones_like(y), cache).dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in moe.parameters())


def test_an_expert_without_tokens_does_no_work():
    moe = MoE(4, 4, 1, rng=np.random.default_rng(0), dtype=np.float64)
    moe.router.weight.data[...] = np.diag([30.0, 0, 0, 0])
    _, cache = moe.forward(np.ones((5, 4)))
    assert cache.calls[0] is not None and all(call is None for call in cache.calls[1:])
    moe.backward(np.ones((5, 4)), cache)
    assert all((p.grad == 0).all() for e in moe.experts[1:] for p in e.parameters())


# -- parameter counts -----------------------------------------------------------------------------
def test_counts_of_the_worked_example():
    # 8 experts of 10 million parameters (a GELU FFN 1000 -> 5000 -> 1000, no biases), top-2
    counts = MoE.counts(d=1000, n_experts=8, top_k=2, hidden=5000, expert="gelu")
    assert counts.per_expert == 10_000_000
    assert counts.experts_total == 80_000_000
    assert counts.experts_active == 20_000_000
    assert counts.router == 8_000
    assert (counts.total, counts.active) == (80_008_000, 20_008_000)


@pytest.mark.parametrize("expert", EXPERT_KINDS)
@pytest.mark.parametrize("bias", [False, True])
def test_counts_from_shapes_match_an_allocated_layer(expert, bias):
    moe = MoE(6, 5, 2, hidden=7, expert=expert, bias=bias, rng=np.random.default_rng(0))
    counts = MoE.counts(6, 5, 2, hidden=7, expert=expert, bias=bias)
    assert counts.per_expert == moe.experts[0].num_parameters()
    assert counts.total == moe.total_parameters() == moe.num_parameters()
    assert counts.active == moe.active_parameters()
    assert counts.active == moe.num_parameters() - 3 * moe.experts[0].num_parameters()
    assert active_parameters(moe) == counts.active


# -- bad input --------------------------------------------------------------------------------------
def test_bad_arguments_name_themselves():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"top_k: .*n_experts=4.*got 5"):
        MoE(8, 4, 5, rng=rng)
    with pytest.raises(ValueError, match="top_k"):
        MoE(8, 4, 0, rng=rng)
    with pytest.raises(ValueError, match="n_experts"):
        MoE(8, 0, 1, rng=rng)
    with pytest.raises(ValueError, match="expert: expected one of"):
        MoE(8, 4, 2, expert="tanh", rng=rng)
    with pytest.raises(TypeError, match="x: expected dtype float32"):
        MoE(8, 4, 2, rng=rng).forward(np.zeros((2, 8)))


@pytest.mark.parametrize("name, size, track", gradient_checks("t14_moe.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)


def test_the_whole_model_harness_refuses_an_aux_upstream_other_than_the_layers_weight():
    # a model's layers add aux_weight times the load-balancing gradient themselves, so the
    # harness's last upstream entry must be that weight, to 1e-15, or the check is meaningless
    from npformer.specs import CASES
    harness, inputs, options = CASES["DecoderLM (Mixtral)"](np.random.default_rng(100), 0)
    upstream = options.pop("upstream")
    options = {k: v for k, v in options.items() if k != "randomize"}
    weight = upstream[-1]
    _, cache = harness.forward(*inputs, **options)
    harness.backward(upstream.copy(), cache)                              # the weight itself: accepted
    for given in (weight + 1.5e-15, 1.5 * weight):
        wrong = upstream.copy()
        wrong[-1] = given
        with pytest.raises(ValueError) as refused:
            harness.backward(wrong, cache)
        said = str(refused.value)
        assert said.startswith("d_out: its last entry (the aux loss's upstream) must equal the layers' "
                               "aux_weight [") and said.endswith(f"], got {given}") and str(float(weight)) in said
