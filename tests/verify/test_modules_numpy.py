"""conform_module on NumPy code written the way picoGPT-style repositories write it.

The implementations below are written for these tests in that style (functions over a
params dict, Conv1D weights [in, out] with biases, fused c_attn, always causal, tanh GELU,
tied head); each correct one must conform, each with one seeded bug must fail with the
tensor named and a smallest example.
"""
import numpy as np
import pytest

from npformer.testing.modules import conform_module
from npformer.testing.weightmap import compile_weight_map, flatten, nest, to_ours, to_theirs
from npformer.t10_model import DecoderConfig

H = 4


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(variance + eps) + b


def linear(x, w, b):
    return x @ w + b


def ffn(x, c_fc, c_proj):
    return linear(gelu(linear(x, **c_fc)), **c_proj)


def attention(q, k, v, mask):
    return softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):
    x = linear(x, **c_attn)
    qkv_heads = [np.split(part, n_head, axis=-1) for part in np.split(x, 3, axis=-1)]
    causal_mask = (1 - np.tri(x.shape[-2], dtype=x.dtype)) * -1e10
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]
    return linear(np.concatenate(out_heads, axis=-1), **c_proj)


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    return x + ffn(layer_norm(x, **ln_2), **mlp)


def block_no_second_residual(x, mlp, attn, ln_1, ln_2, n_head):     # the seeded bug
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    return ffn(layer_norm(x, **ln_2), **mlp)


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):
    x = wte[inputs] + wpe[np.arange(inputs.shape[-1])]
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    return layer_norm(x, **ln_f) @ wte.T


# a hand backward for the MLP, in the same style (a cache of what backward needs)
def ffn_forward(x, c_fc, c_proj):
    h = linear(x, **c_fc)
    a = gelu(h)
    return linear(a, **c_proj), (x, h, a, c_fc, c_proj)


def ffn_backward(d_out, cache, gelu_slope=None):
    x, h, a, c_fc, c_proj = cache
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (h + 0.044715 * h ** 3))
    slope = 0.5 * (1 + t) + 0.5 * h * (1 - t ** 2) * c * (1 + 3 * 0.044715 * h ** 2)
    if gelu_slope is not None:
        slope = gelu_slope(h)
    d_a = d_out @ c_proj["w"].T
    d_h = d_a * slope
    rows = lambda m: m.reshape(-1, m.shape[-1])          # noqa: E731
    grads = {"c_fc": {"w": rows(x).T @ rows(d_h), "b": rows(d_h).sum(0)},
             "c_proj": {"w": rows(a).T @ rows(d_out), "b": rows(d_out).sum(0)}}
    return d_h @ c_fc["w"].T, grads


PICO_MLP = {"c_fc.w": "up.weight", "c_fc.b": "up.bias", "c_proj.w": "down.weight",
            "c_proj.b": "down.bias"}
PICO_BLOCK = {"ln_1.g": "norm1.gamma", "ln_1.b": "norm1.beta",
              "attn.c_attn.w": "attn.qkv.weight", "attn.c_attn.b": "attn.qkv.bias",
              "attn.c_proj.w": "attn.out.weight", "attn.c_proj.b": "attn.out.bias",
              "ln_2.g": "norm2.gamma", "ln_2.b": "norm2.beta",
              **{"mlp." + k: "ffn." + v for k, v in PICO_MLP.items()}}
PICO_GPT = {"wte": "tokens.weight", "wpe": "positions.weight", "ln_f.g": "norm.gamma",
            "ln_f.b": "norm.beta",
            **{f"blocks.{{i}}.{k}": f"blocks.{{i}}.{v}" for k, v in PICO_BLOCK.items()}}


def test_picogpt_mlp_with_hand_backward_conforms():
    report = conform_module("gpt2_mlp", lambda p, x: ffn_forward(x, **p), PICO_MLP,
                            backward=ffn_backward)
    assert report.verdict == "conforms", report
    assert {t.name for t in report.tensors} >= {"output", "d_input", "grad up.weight", "grad down.bias"}


def test_picogpt_mlp_with_a_wrong_gelu_derivative_names_the_tensor():
    wrong = lambda h: 0.5 * (1 + np.tanh(h))              # noqa: E731 - not tanh GELU's slope
    report = conform_module("gpt2_mlp", lambda p, x: ffn_forward(x, **p), PICO_MLP,
                            backward=lambda d, c: ffn_backward(d, c, wrong))
    assert report.verdict == "does not conform"
    failing = {t.name for t in report.failing}
    assert "output" not in failing and "d_input" in failing and "grad up.weight" in failing
    assert report.smallest["N"] == 1 and report.smallest["B"] == 1


def test_picogpt_block_conforms_on_outputs_and_says_gradients_were_not_compared():
    report = conform_module("gpt2_block", lambda p, x: transformer_block(x, **p, n_head=H),
                            PICO_BLOCK)
    assert report.verdict == "conforms", report
    assert "gradients not compared" in report.checked


def test_picogpt_block_without_its_second_residual_fails_on_the_output():
    report = conform_module("gpt2_block", lambda p, x: block_no_second_residual(x, **p, n_head=H),
                            PICO_BLOCK)
    assert report.verdict == "does not conform"
    assert report.smallest["tensor"] == "output" and report.smallest["N"] == 1


def test_picogpt_whole_model_with_tied_head_conforms():
    config = DecoderConfig.gpt2(vocab_size=32, d_model=16, n_heads=H, n_layers=2, max_len=16)
    report = conform_module("decoder", lambda p, ids: gpt2(ids, **p, n_head=H), PICO_GPT, config)
    assert report.verdict == "conforms", report
    assert {t.name for t in report.tensors} == {"logits", "loss"}


def test_picogpt_whole_model_decodes_through_a_step_api():
    # picoGPT has no cache: its "step" recomputes the prefix, which must give the same logits
    def step(params, new_ids, state):
        seen = new_ids if state is None else np.concatenate([state, new_ids], axis=1)
        return gpt2(seen, **params, n_head=H)[:, -new_ids.shape[1]:], seen

    def off_by_one(params, new_ids, state):     # positions restart at 0 on every step
        return gpt2(new_ids, **params, n_head=H), None

    forward = lambda p, ids: gpt2(ids, **p, n_head=H)    # noqa: E731
    assert conform_module("decoder", forward, PICO_GPT, step=step).ok
    report = conform_module("decoder", forward, PICO_GPT, step=off_by_one)
    assert not report.ok and "position 2" in " ".join(report.notes)


def test_weight_map_names_what_is_missing():
    partial = {k: v for k, v in PICO_MLP.items() if k != "c_fc.b"}
    with pytest.raises(ValueError, match="up.bias"):
        conform_module("gpt2_mlp", lambda p, x: ffn_forward(x, **p), partial, backward=ffn_backward)
    with pytest.raises(ValueError, match="marks"):
        compile_weight_map({"w": ("up.weight", "X")}, "gpt2_mlp", DecoderConfig())


def test_fused_parts_and_transposes_round_trip_like_the_hugging_face_table():
    from npformer.interop.tables import llama_table
    config = DecoderConfig.llama(d_model=8, n_heads=2, n_kv_heads=1, n_layers=1)
    mine = compile_weight_map({"model.layers.{i}.self_attn.q_proj.weight": ("blocks.{i}.attn.qkv.weight", "T", "q"),
                               "model.layers.{i}.self_attn.k_proj.weight": ("blocks.{i}.attn.qkv.weight", "T", "k"),
                               "model.layers.{i}.self_attn.v_proj.weight": ("blocks.{i}.attn.qkv.weight", "T", "v")},
                              "decoder", config, [8, 4, 4])
    qkv = np.arange(8 * 16.0).reshape(8, 16)
    theirs = to_theirs(mine, {"blocks.0.attn.qkv.weight": qkv})
    hf = [row for row in llama_table(config) if row.ours == ("blocks.0.attn.qkv.weight",)][0]
    for name, array in zip(hf.theirs, hf.to_theirs([qkv])):
        np.testing.assert_array_equal(theirs[name], array)
    assert theirs["model.layers.0.self_attn.k_proj.weight"].shape == (4, 8)
    np.testing.assert_array_equal(to_ours(mine, theirs)["blocks.0.attn.qkv.weight"], qkv)


def test_nest_and_flatten_are_inverse():
    flat = {"blocks.0.attn.w": 1, "blocks.1.attn.w": 2, "wte": 3}
    nested = nest(flat)
    assert nested["blocks"][1]["attn"]["w"] == 2 and flatten(nested) == flat


def test_hugging_face_presets_reuse_the_interop_tables():
    def hf_mlp(p, x):      # GPT-2's Conv1D names, [in, out] like picoGPT
        return ffn(x, {"w": p["c_fc"]["weight"], "b": p["c_fc"]["bias"]},
                   {"w": p["c_proj"]["weight"], "b": p["c_proj"]["bias"]})
    assert conform_module("gpt2_mlp", hf_mlp, "hf_gpt2").verdict == "conforms"
    config = DecoderConfig.llama(d_model=16, n_heads=4, n_kv_heads=2, ffn_hidden=24)
    rows = compile_weight_map("hf_llama", "llama_block", config)
    theirs = {n for row in rows for n in row.theirs}
    assert {"self_attn.k_proj.weight", "input_layernorm.weight", "mlp.gate_proj.weight"} <= theirs
    assert {n for row in rows for n in row.ours} == {
        "norm1.gamma", "attn.qkv.weight", "attn.out.weight", "norm2.gamma",
        "ffn.gate.weight", "ffn.up.weight", "ffn.down.weight"}


def test_bad_arguments_name_themselves():
    forward = lambda p, x: ffn_forward(x, **p)           # noqa: E731
    with pytest.raises(ValueError, match="kind: expected one of"):
        conform_module("gpt3_block", forward, PICO_MLP)
    with pytest.raises(TypeError, match="config: expected a DecoderConfig"):
        conform_module("gpt2_mlp", forward, PICO_MLP, config=16)
    with pytest.raises(ValueError, match="weight_map: expected a dict or one of"):
        conform_module("gpt2_mlp", forward, "minGPT")
    with pytest.raises(ValueError, match="step: KV-cached decoding is checked for kind 'decoder'"):
        conform_module("gpt2_mlp", forward, PICO_MLP, backward=ffn_backward, step=lambda *a: a)


# -- a bug inside the block's MLP, traced to it ---------------------------------------------------
def ffn_relu(x, c_fc, c_proj):                     # the seeded bug: ReLU where GELU belongs
    return linear(np.maximum(linear(x, **c_fc), 0.0), **c_proj)


def block_with_relu_mlp(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    return x + ffn_relu(layer_norm(x, **ln_2), **mlp)


PICO_PARTS = {"ln_1": lambda p, x: layer_norm(x, **p), "ln_2": lambda p, x: layer_norm(x, **p),
              "attn": lambda p, x: mha(x, **p, n_head=H)}


def test_a_wrong_mlp_inside_a_block_is_traced_to_the_mlp():
    report = conform_module("gpt2_block", lambda p, x: block_with_relu_mlp(x, **p, n_head=H),
                            PICO_BLOCK, parts={**PICO_PARTS, "mlp": lambda p, x: ffn_relu(x, **p)})
    assert report.verdict == "does not conform"
    wrong = [c.ours for c in report.parts if c.differs]
    assert wrong == ["ffn"], str(report)
    assert "traced to a sub-module: the MLP (their mlp, npformer's ffn) differs on its own" in " ".join(str(report).split())


def test_a_block_whose_parts_all_agree_says_the_joining_is_wrong():
    report = conform_module("gpt2_block", lambda p, x: block_no_second_residual(x, **p, n_head=H),
                            PICO_BLOCK, parts={**PICO_PARTS, "mlp": lambda p, x: ffn(x, **p)})
    assert report.verdict == "does not conform"
    assert len(report.parts) == 4 and not any(c.differs for c in report.parts), str(report)
    assert "the difference is in how they are joined" in " ".join(str(report).split())


def test_a_part_not_checked_alone_is_said_so_not_blamed_on_the_joining():
    # the wrong MLP is not handed in parts=: the parts that were checked agree, and the report
    # must not conclude the joining is wrong
    report = conform_module("gpt2_block", lambda p, x: block_with_relu_mlp(x, **p, n_head=H),
                            PICO_BLOCK, parts=PICO_PARTS)
    text = " ".join(str(report).split())              # the report wraps its lines at 100 columns
    assert report.verdict == "does not conform" and "how they are joined" not in text, text
    assert "the MLP (their mlp, npformer's ffn): not checked alone (no function of yours" in text
