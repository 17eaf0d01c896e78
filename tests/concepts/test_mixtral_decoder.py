"""The Mixtral-style decoder: a DecoderLM whose FFNs are Mixtures of Experts."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer import DecoderConfig, DecoderLM, MoE, active_parameters, cross_entropy
from npformer import gradcheck
from npformer.testing.cases import CASES
from npformer.specs.t14_moe import WithAuxLoss
from npformer.t14_moe import MoECache

seeds = st.integers(0, 2**32 - 1)


def tiny(seed=0, **overrides):
    config = DecoderConfig.mixtral(**{**dict(vocab_size=13, d_model=8, n_heads=2, n_kv_heads=1,
                                             n_layers=2, max_len=12, n_experts=4, top_k=2,
                                             ffn_hidden=6), **overrides})
    rng = np.random.default_rng(seed)
    model = DecoderLM(config, rng, np.float64)
    for p in model.parameters():
        p.data += 0.5 * rng.standard_normal(p.shape)
    return model


def test_config_builds_moe_layers_and_reports_their_aux_loss():
    model = tiny()
    assert all(isinstance(block.ffn, MoE) for block in model.blocks)
    assert [b.ffn.n_experts for b in model.blocks] == [4, 4] and model.blocks[0].ffn.top_k == 2
    assert "blocks.1.ffn.router.weight" in dict(model.named_parameters())
    ids = np.random.default_rng(1).integers(0, 13, (2, 5))
    _, cache = model.forward(ids)
    per_layer = [block.ffn.aux_loss for block in cache.blocks]
    assert all(isinstance(block.ffn, MoECache) for block in cache.blocks)
    assert cache.aux_loss == pytest.approx(sum(per_layer))
    dense = DecoderLM(DecoderConfig(vocab_size=13))
    assert dense.forward(ids)[1].aux_loss == 0.0


def test_one_expert_model_equals_the_dense_model():
    dense = DecoderLM(DecoderConfig.llama(vocab_size=13, d_model=8, n_heads=2, n_layers=2),
                      np.random.default_rng(0), np.float64)
    moe = DecoderLM(DecoderConfig.llama(vocab_size=13, d_model=8, n_heads=2, n_layers=2,
                                        n_experts=1, top_k=1), np.random.default_rng(5), np.float64)
    renamed = {name.replace(".ffn.", ".ffn.experts.0."): a for name, a in dense.state_dict().items()}
    renamed.update({f"blocks.{i}.ffn.router.weight": np.ones((8, 1)) for i in range(2)})
    moe.load_state_dict(renamed)
    ids = np.random.default_rng(1).integers(0, 13, (2, 6))
    np.testing.assert_allclose(moe(ids), dense(ids), rtol=1e-12, atol=1e-12)


@given(seed=seeds, n=st.integers(1, 9), prompt=st.integers(1, 9), window=st.none() | st.integers(1, 4))
def test_kv_cache_decode_equals_the_full_forward(seed, n, prompt, window):
    model = tiny(seed, window=window)
    ids = np.random.default_rng(seed).integers(0, 13, (2, n))
    full, _ = model.forward(ids)
    cache = model.new_kv_cache(2)
    steps = [model.forward(ids[:, :min(prompt, n)], kv_cache=cache)[0]]
    for t in range(min(prompt, n), n):
        steps.append(model.forward(ids[:, t:t + 1], kv_cache=cache)[0])
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("size", [0, 1, 2])
def test_registered_full_model_gradient_check(size):
    target, inputs, options = CASES["DecoderLM (Mixtral)"](np.random.default_rng(size), size)
    report = gradcheck(target, *inputs, **options)
    assert report.ok, str(report)
    names = {c.name for c in report.checks}
    model = target.target
    assert names == {"target." + name for name, _ in model.named_parameters()}   # every parameter
    assert any(name.endswith("router.weight") for name in names)


def test_training_gradient_is_that_of_cross_entropy_plus_weighted_aux():
    # DecoderLM.backward(dCE/dlogits) must give d(CE + moe_aux_weight * aux)/d(params):
    # finite differences of that total, with the aux entry's upstream set to the weight.
    model = tiny(3, moe_aux_weight=0.25, n_layers=1)
    ids = np.random.default_rng(4).integers(0, 13, (1, 5))
    targets = np.random.default_rng(5).integers(0, 13, (1, 5))
    _, cache = model.forward(ids)
    assert min(b.ffn.top_k_margin for b in cache.blocks) > 1e-3

    class TrainingBackward(WithAuxLoss):
        def backward(self, d_out, cache):
            return self.target.backward(d_out[:-1].reshape(cache.shape), cache.inner)

    logits = model(ids)
    _, d_logits = cross_entropy(logits, targets)      # the upstream of the CE term at this point
    upstream = np.append(d_logits.ravel(), 0.25)
    # eps 1e-5: expert gradients here are small, so rounding noise matters more than truncation
    report = gradcheck(TrainingBackward(model), ids, upstream=upstream, randomize=False, eps=1e-5)
    assert report.ok, str(report)


def test_active_parameters_of_a_mixtral_model():
    model = tiny()
    expert = model.blocks[0].ffn.experts[0].num_parameters()
    # per layer, a token skips E - k = 2 experts
    assert active_parameters(model) == model.num_parameters() - 2 * 2 * expert
    assert active_parameters(DecoderLM(DecoderConfig())) == DecoderLM(DecoderConfig()).num_parameters()


def test_bad_moe_config_names_the_field():
    with pytest.raises(ValueError, match=r"top_k: expected an integer in \[1, n_experts=4\], got 5"):
        DecoderConfig(n_experts=4, top_k=5)
    with pytest.raises(ValueError, match="top_k"):
        DecoderConfig(n_experts=4, top_k=0)
    with pytest.raises(ValueError, match="n_experts: expected an integer >= 0"):
        DecoderConfig(n_experts=-1)
    DecoderConfig(n_experts=0, top_k=5)                 # dense: top_k unused


def _hf_pooled_aux(caches, E, real):
    """Hugging Face Mixtral's load_balancing_loss_func, rewritten from its definition: the
    routing of every layer and real token pooled, aux = E * sum_e f_e P_e."""
    probs = np.concatenate([c.probs[real] for c in caches])              # [L * T_real, E]
    chosen = np.concatenate([c.chosen[real] for c in caches])            # [L * T_real, k]
    one_hot = np.eye(E)[chosen]                                          # [L * T_real, k, E]
    tokens_per_expert = one_hot.mean(axis=0)                             # [k, E]
    return E * np.sum(tokens_per_expert * probs.mean(axis=0)[None, :])


@given(seed=seeds, layers=st.integers(1, 3), padded=st.booleans())
def test_pooled_objective_is_hugging_faces_formula(seed, layers, padded):
    model = tiny(seed, n_layers=layers, moe_aux_objective="pooled")
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 13, (2, 6))
    key_mask = np.ones((2, 6), bool)
    if padded:
        key_mask[1, :3] = False
    _, cache = model.forward(ids, key_mask=key_mask)
    moe = [block.ffn for block in cache.blocks]
    assert cache.aux_loss == pytest.approx(_hf_pooled_aux(moe, 4, key_mask.reshape(-1)), rel=1e-12)
    per_layer = tiny(seed, n_layers=layers).forward(ids, key_mask=key_mask)[1]
    if layers == 1:                                   # one layer: the two objectives agree
        assert per_layer.aux_loss == pytest.approx(cache.aux_loss, rel=1e-12)


@pytest.mark.parametrize("objective", ["per_layer", "pooled"])
def test_padded_positions_do_not_count_in_the_routing_statistics(objective):
    model = tiny(3, moe_aux_objective=objective)
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 13, (2, 7))
    key_mask = np.ones((2, 7), bool)
    key_mask[0, :3] = False                            # three left-padded positions
    other = ids.copy()
    other[0, :3] = (ids[0, :3] + 5) % 13               # different tokens where padded
    first = model.forward(ids, key_mask=key_mask)[1]
    second = model.forward(other, key_mask=key_mask)[1]
    assert first.aux_loss == second.aux_loss
    assert model.forward(other)[1].aux_loss != first.aux_loss      # without the mask they count


def test_unknown_aux_objective_is_a_clear_error():
    with pytest.raises(ValueError, match=r"moe_aux_objective: expected one of \('per_layer', 'pooled'\)"):
        DecoderConfig.mixtral(moe_aux_objective="mean")
