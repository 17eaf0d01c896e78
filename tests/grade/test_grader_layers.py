"""The layers made of layers (MoE, the blocks, the decoder, the encoder-decoder) judged on drawn
inputs: npformer's own code passes, a seeded mistake fails on a small example whose rows a norm
reads are not constant, and a catalogued one is named."""
import numpy as np
import pytest
from hypothesis import given, settings

from npformer.exercises import catalog
from npformer.exercises.verdict import judge_component
from npformer.testing.computation import Patched
from npformer.testing import mistakes
from npformer.testing.components import LAYERS, component_named
from npformer.testing.conformance import Checker
from npformer.testing.patching import edited
from npformer.testing.subject import Subject
from npformer.specs.draw import weights_of
from npformer.specs.layered import all_parameters, weight_names
from npformer.specs.t09_block import build_prenorm


@pytest.fixture
def fewer_draws(monkeypatch):
    import npformer.exercises.verdict as verdict
    import npformer.testing.search as search
    monkeypatch.setattr(verdict, "EXAMPLES", 12)
    monkeypatch.setattr(search, "SHRINK_CALLS", 30)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_npformers_own_layers_pass_on_drawn_inputs(name):
    component = component_named(name)
    checks = Checker(Subject(component, *component.reference_pair(), name="yours")).run(12, 0)
    assert all(c.failure is None for c in checks), [c.failure.message for c in checks if c.failure]
    compared = [c for c in checks if c.kind in ("output", "gradient")]
    assert compared[0].name == "output" and len(compared) >= 5 and all(c.examples >= 1 for c in compared)


def test_the_four_exercises_list_their_layers():
    assert catalog.exercise_named("moe").components == ("moe",)
    assert catalog.exercise_named("block").components == ("prenorm_block", "postnorm_block")
    assert catalog.exercise_named("model").components == ("decoder_lm",)
    assert catalog.exercise_named("seq2seq").components == ("seq2seq_block", "seq2seq_decoder")


# -- what is drawn -----------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None, derandomize=True)
@given(component_named("prenorm_block").draw)
def test_a_drawn_block_input_has_no_constant_row(example):
    x = example.args[0]
    assert x.shape[-1] >= 3                        # LayerNorm of 2 features is constant in x
    assert np.all(np.ptp(x.reshape(-1, x.shape[-1]), axis=-1) > 0)
    assert dict(zip(example.names, example.args))["attn.qkv.weight"].shape[0] == x.shape[-1]


@settings(max_examples=15, deadline=None, derandomize=True)
@given(component_named("moe").draw)
def test_a_drawn_moe_input_has_no_routing_tie(example):
    x, router = example.args[0], example.args[1]
    k, E = example.options["top_k"], example.options["n_experts"]
    logits = x.reshape(-1, x.shape[-1]) @ router
    probs = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    ranked = -np.sort(-probs, axis=-1)
    assert k == E or np.min(ranked[:, k - 1] - ranked[:, k]) >= 1e-4
    assert len(example.args) == 2 + 3 * E            # x, the router, three SwiGLU matrices per expert


def test_the_simplest_weights_are_all_one_eighth_and_named_as_the_module_names_them():
    recipe = {"n_heads": 1, "ffn_hidden": 1, "norm": "rmsnorm", "ffn": "relu"}
    from hypothesis import strategies as st
    named = weight_names(build_prenorm, all_parameters, 3, recipe)
    names, weights = find_simplest(st.composite(lambda draw: weights_of(draw, named))())
    assert names == ("norm1.gamma", "attn.qkv.weight", "attn.out.weight", "norm2.gamma",
                     "ffn.up.weight", "ffn.up.bias", "ffn.down.weight", "ffn.down.bias")
    assert weights[1].shape == (3, 9)                     # [Wq | Wk | Wv], d = 3
    assert all(np.all(w == 0.125) for w in weights)


def find_simplest(strategy):
    from hypothesis import find
    return find(strategy, lambda _: True, settings=settings(database=None, derandomize=True))


# -- seeded mistakes ---------------------------------------------------------------------------------
def _judged(component, path, old, new, exercise):
    patches = {"npformer." + path: edited("npformer." + path, old, new)}
    candidates = mistakes.of_functions(catalog.exercise_named(exercise).paths(forward=True))
    checks = judge_component(component, Patched(patches), candidates)
    mistakes.agreeing_mistakes([c.failure for c in checks if c.failure is not None and c.kind != "property"])
    return {c.name: c.failure for c in checks if c.failure is not None}


def _no_constant_row(array):
    return np.all(np.ptp(array.reshape(-1, array.shape[-1]), axis=-1) > 0)


def test_a_block_that_forgets_the_residual_identity_is_named_on_a_small_example(fewer_draws):
    failed = _judged("prenorm_block", "t09_block.PreNormBlock.backward",
                     "return d_h + self.norm1.backward(d_a, cache.norm1)",
                     "return self.norm1.backward(d_a, cache.norm1)", "block")
    assert "gradient of x" in failed and "output" not in failed
    failure = failed["gradient of x"]
    assert failure.mistake is not None and failure.mistake.name == "prenorm-first-residual-dropped"
    x = failure.example.args[0]
    assert x.size <= 12 and _no_constant_row(x)


def test_moe_without_router_gradient_from_the_outputs_fails_on_a_small_example(fewer_draws):
    # not catalogued: d_weights stays 0, so the router learns only from the load-balancing loss
    failed = _judged("moe", "t14_moe.MoE.backward",
                     "d_weights[rows, slots] = np.sum(d_y[rows] * call.out, axis=-1)", "pass", "moe")
    assert "gradient of router.weight" in failed and "output" not in failed
    failure = failed["gradient of router.weight"]
    assert "relative error" in failure.message and failure.mistake is None
    assert failure.example.args[0].size <= 12 and failure.example.options["n_experts"] <= 4


def test_moe_whose_aux_gradient_reaches_padding_is_named(fewer_draws):
    failed = _judged("moe", "t14_moe.MoE.backward", "(cache.real[:, None] * d_mean_probs / n_real)",
                     "(d_mean_probs / n_real)", "moe")
    found = [f for f in failed.values() if f.mistake is not None]
    assert found and {f.mistake.name for f in found} == {"moe-aux-reaches-padding"}
    assert all(f.example.options["token_mask"] is not None for f in found)     # padding to leak into


def test_a_decoder_that_skips_its_final_norm_is_named(fewer_draws):
    failed = _judged("decoder_lm", "t10_model.DecoderLM.backward", "d_x = self.norm.backward(d_h, cache.norm)",
                     "d_x = d_h", "model")
    assert "gradient of tokens.weight" in failed
    assert {f.mistake.name for f in failed.values() if f.mistake} == {"decoder-final-norm-skipped"}


def test_an_encoder_decoder_layer_without_its_cross_residual_is_named(fewer_draws):
    failed = _judged("seq2seq_block", "t17_seq2seq.EncoderDecoderBlock.backward",
                     "d_h = d_g + self.cross_norm.backward(d_c, cache.cross_norm)",
                     "d_h = self.cross_norm.backward(d_c, cache.cross_norm)", "seq2seq")
    assert "gradient of x" in failed
    failure = failed["gradient of x"]
    assert failure.mistake is not None and failure.mistake.name == "decoder-block-cross-residual-dropped"
    assert _no_constant_row(failure.example.args[0])


def test_a_decoder_whose_memory_gradient_keeps_the_last_layer_only_fails(fewer_draws):
    failed = _judged("seq2seq_decoder", "t17_seq2seq.EncoderDecoder.decode_backward",
                     "d_memory = d_memory + d_read", "d_memory = d_read", "seq2seq")
    assert set(failed) == {"gradient of memory"}
    failure = failed["gradient of memory"]
    assert failure.example.options["n_decoder_layers"] == 2       # one layer reads it: no difference
    assert failure.mistake is not None and failure.mistake.name == "decoder-memory-last-layer-only"


# -- correct code written differently ------------------------------------------------------------------
def test_a_moe_forward_that_breaks_ties_its_own_way_is_right(fewer_draws):
    # argpartition picks the k best in no particular order (and breaks ties otherwise than a
    # stable sort): right wherever no two router probabilities tie at the k-th place
    failed = _judged("moe", "t14_moe.MoE.forward", 'chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :k]',
                     "chosen = np.argpartition(-probs, k - 1, axis=-1)[:, :k]", "moe")
    assert not failed, {name: f.message for name, f in failed.items()}


def test_a_block_backward_written_with_other_names_and_order_is_right(fewer_draws):
    failed = _judged("prenorm_block", "t09_block.PreNormBlock.backward",
                     "return d_h + self.norm1.backward(d_a, cache.norm1)",
                     "through_norm = self.norm1.backward(d_a, cache.norm1)\n    return through_norm + d_h",
                     "block")
    assert not failed, {name: f.message for name, f in failed.items()}
