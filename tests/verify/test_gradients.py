"""Every public component passes a float64 finite-difference check, inputs and parameters.

The checks themselves run in each concept's own test file (``tests/support/gradients.py``);
this file checks that every case has one, the sample of whole models, and gradcheck itself.
"""
import os

import numpy as np
import pytest

import npformer
from npformer.cli.gradcheck import missing_cases, public_components
from npformer.specs import CASES, SPECS
from npformer.specs.t14_moe import aux_weights
from npformer.testing.gradcheck import GradcheckError, assert_gradcheck, gradcheck
from npformer.t02_linear import Linear
from support.gradients import SIZES, TRACKS, WHOLE_MODELS, gradient_checks, own_test_file

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))        # tests/


@pytest.mark.parametrize("spec", [s for s in SPECS if s.cases], ids=lambda s: s.concept)
def test_every_concept_s_own_test_file_checks_its_cases(spec):
    path = os.path.join(HERE, own_test_file(spec.concept))
    assert os.path.exists(path), f"{spec.concept} declares gradient cases but has no {own_test_file(spec.concept)}"
    with open(path, encoding="utf-8") as f:
        assert f'gradient_checks("{spec.concept}")' in f.read()


def test_every_case_belongs_to_one_spec():
    owned = [case for spec in SPECS for case in spec.cases]
    assert sorted(owned) == sorted(CASES)


def test_the_sample_covers_every_whole_model_size_and_track():
    every = [p for spec in SPECS for p in gradient_checks(spec.concept)]
    chosen = [p.values for p in every if p.values[0] in WHOLE_MODELS and not p.marks]
    assert sorted(name for name, _, _ in chosen) == WHOLE_MODELS          # each model once
    assert {size for _, size, _ in chosen} == set(SIZES) and {t for _, _, t in chosen} == set(TRACKS)
    assert {"DecoderLM", "DecoderLM (Mixtral)", "Encoder", "EncoderDecoder"} <= set(WHOLE_MODELS)
    assert len(every) == len(CASES) * len(SIZES) * len(TRACKS)


def test_every_public_component_has_a_check():
    assert missing_cases() == []
    assert {"softmax", "attention", "MultiHeadAttention", "LayerNorm", "DecoderLM"} <= set(
        public_components())


class _WrongLinear(Linear):
    """A deliberately broken backward: forgets the bias gradient of the last feature."""

    def backward(self, d_y, cache):
        d_x = super().backward(d_y, cache)
        self.bias.grad[-1] -= d_y[..., -1].sum()
        return d_x


def test_gradcheck_catches_a_wrong_backward_and_reports_it():
    rng = np.random.default_rng(0)
    with pytest.raises(GradcheckError, match=r"bias relative error .* at exact \(4,\), tolerance 1e-06"):
        assert_gradcheck(_WrongLinear(3, 5, rng=rng), rng.standard_normal((2, 3)))


def test_gradcheck_catches_a_wrong_input_gradient_in_projected_mode():
    from npformer.t06_activations import silu_backward, silu_forward
    rng = np.random.default_rng(0)
    wrong = (silu_forward, lambda dy, cache: 1.01 * silu_backward(dy, cache))
    report = gradcheck(wrong, rng.standard_normal((4, 50)), exact_limit=10)
    assert report.checks[0].mode == "projected" and not report.ok


def test_gradcheck_does_not_use_an_all_ones_upstream_gradient():
    # softmax's gradient against an all-ones upstream is identically zero: a check with
    # ones would pass a backward returning zeros. The random upstream catches it.
    from npformer.t03_softmax import softmax_forward
    zero_backward = (softmax_forward, lambda dy, cache: np.zeros_like(dy))
    assert not gradcheck(zero_backward, np.random.default_rng(1).standard_normal((2, 5))).ok


def test_gradcheck_randomises_parameters_away_from_defaults():
    from npformer.t08_norm import LayerNorm
    seen = []
    original = LayerNorm.forward

    def spy(self, x):
        seen.append(self.gamma.data.copy())
        return original(self, x)

    LayerNorm.forward = spy
    try:
        gradcheck(LayerNorm(4), np.random.default_rng(0).standard_normal((2, 4)))
    finally:
        LayerNorm.forward = original
    assert not np.allclose(seen[0], 1.0)


@pytest.mark.parametrize("size", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(CASES))
def test_two_backward_passes_accumulate_exactly_twice_the_gradient(name, size):
    # The protocol: backward ADDS into .grad. Two identical forward + backward passes without
    # zero_grad give 2x one pass for every parameter (exactly, but for the rounding of a sum
    # taken in another order where a parameter gets several contributions: repeated ids, a
    # tied head); a backward that assigns instead of adding gives 1x.
    target, inputs, options = CASES[name](np.random.default_rng(100 + size), size)
    if not isinstance(target, npformer.Module):
        return                                          # function pairs return, never accumulate
    options = {k: v for k, v in options.items() if k not in ("randomize", "upstream")}
    target = target.astype(np.float64)
    inputs = [np.asarray(x, np.float64) if np.issubdtype(np.asarray(x).dtype, np.floating) else x
              for x in inputs]
    out, cache = target.forward(*inputs, **options)
    upstream = np.random.default_rng(7).standard_normal(np.shape(out))
    if hasattr(target, "target"):                       # the MoE harness: its aux upstream entry
        upstream[-1] = aux_weights(target.target)[0]
    target.zero_grad()
    target.backward(upstream, cache)
    once = {n: p.grad.copy() for n, p in target.named_parameters()}
    assert any(np.abs(g).max() > 0 for g in once.values()) or not once
    out, cache = target.forward(*inputs, **options)
    target.backward(upstream, cache)
    for n, p in target.named_parameters():
        np.testing.assert_allclose(p.grad, 2 * once[n], rtol=1e-12, atol=1e-12 * np.abs(once[n]).max(),
                                   err_msg=n)
