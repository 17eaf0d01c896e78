"""Whole decoders against Hugging Face: GPT2LMHeadModel, LlamaForCausalLM (GQA), MixtralForCausalLM.

Each HF model is built offline from a tiny config with random weights (eager
attention, eval mode), imported with ``npformer.interop.from_hf``, and compared:
- logits and every layer's hidden states: 1e-4 relative in float32, and in
  float64 1e-9 where HF computes everything in float64 (GPT-2), 1e-6 where stock
  HF drops to float32 inside (Llama / Mixtral: RMSNorm, attention softmax, the
  RoPE tables, the router);
- the next-token loss and its gradient for every parameter, float64, 1e-5 relative,
  with and without padding; for Mixtral (2 layers) the loss includes the router's
  load-balancing loss, npformer's own objective as ``from_hf`` chose it (Hugging Face's,
  pooled over the layers) against HF's ``output_router_logits=True`` loss;
- greedy decoding with the KV cache: the same tokens, and the same logits at
  every step (generate() hands back float32 logits, hence 1e-6 in float64).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from crosscheck_util import check  # noqa: E402
from hf_util import V, build_hf, decoder_states, gpt2, greedy_hf, greedy_ours, llama, mixtral  # noqa: E402,E501

from npformer.interop import from_hf, hf_grads_as_ours, save_hf  # noqa: E402
from npformer.t11_loss import IGNORE_INDEX, cross_entropy_backward, cross_entropy_forward  # noqa: E402

pytestmark = pytest.mark.crosscheck


MODELS = {"GPT-2": gpt2, "Llama (GQA)": llama, "Mixtral (top-2 of 4)": mixtral}
FLOAT64_TOL = {"GPT-2": 1e-9, "Llama (GQA)": 1e-6, "Mixtral (top-2 of 4)": 1e-6}


def ids_for(rng, B=2, N=11):
    return rng.integers(0, V, (B, N))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(MODELS))
def test_logits_and_hidden_states(name, dtype, rng):
    model_class, config = MODELS[name]()
    theirs = build_hf(model_class, config, dtype)
    ours = from_hf(theirs.state_dict(), config, dtype=dtype)
    assert ours.dtype == dtype
    ids = ids_for(rng)
    with torch.no_grad():
        out = theirs(torch.tensor(ids), output_hidden_states=True)
    tol = 1e-4 if dtype == np.float32 else FLOAT64_TOL[name]
    key = f"model: {name} {np.dtype(dtype).name}"
    check(key, "logits", ours(ids), out.logits, tol)
    states = decoder_states(ours, ids)
    # HF: [embeddings, after layer 1, ..., after layer L-1, after the final norm]
    L = len(ours.blocks)
    assert len(out.hidden_states) == L + 1
    for i in range(L):
        check(key, f"hidden state {i}", states[i], out.hidden_states[i], tol)
    check(key, "final hidden state (after norm)", states[-1], out.hidden_states[L], tol)


def test_right_padded_batch_matches_at_real_positions(rng):
    """A padding mask on both sides: logits at real tokens agree (Llama, float64)."""
    model_class, config = llama()
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    ids = ids_for(rng)
    real = np.ones(ids.shape, bool)
    real[1, 7:] = False
    with torch.no_grad():
        ref = theirs(torch.tensor(ids), attention_mask=torch.tensor(real.astype(np.int64))).logits
    check("model: Llama (GQA) float64", "padded logits", ours(ids, key_mask=real)[real],
          ref.numpy()[real], 1e-6)


def _batch(rng, padded):
    """ids [2, 11], the key mask (row 1 right-padded after 7 tokens when ``padded``) and labels:
    the ids, with some targets ignored and every padded one ignored."""
    ids = ids_for(rng)
    real = np.ones(ids.shape, bool)
    if padded:
        real[1, 7:] = False
    labels = ids.copy()
    labels[0, 3] = labels[1, 5] = IGNORE_INDEX           # some ignored targets
    labels[~real] = IGNORE_INDEX                         # HF's CE must not count padding
    return ids, real, labels


def _our_total_loss(ours, ids, real, labels):
    """npformer's training loss CE + moe_aux_weight * aux (its own objective, from the config)
    and, through DecoderLM.backward, every parameter's gradient of it."""
    key_mask = None if real.all() else real
    logits, cache = ours.forward(ids, key_mask=key_mask)
    ce, ce_cache = cross_entropy_forward(logits[:, :-1], labels[:, 1:])   # next-token targets
    d_logits = np.zeros_like(logits)
    d_logits[:, :-1] = cross_entropy_backward(1.0, ce_cache)[0]
    ours.zero_grad()
    ours.backward(d_logits, cache)                        # MoE layers add the aux gradient
    return ce + ours.config.moe_aux_weight * cache.aux_loss, cache


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
@pytest.mark.parametrize("name", list(MODELS))
def test_loss_gradients_for_every_parameter(name, padded, rng):
    """The training loss and every gradient; Mixtral's router loss is npformer's own (the
    objective from_hf chose, "pooled" over both layers) against HF's ``loss`` with
    ``output_router_logits=True`` (CE + router_aux_loss_coef * aux)."""
    model_class, config = MODELS[name]()
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    if "Mixtral" in name:              # where pooled and per-layer objectives differ
        assert ours.config.n_layers >= 2 and ours.config.moe_aux_objective == "pooled"
    ids, real, labels = _batch(rng, padded)
    extra = {"output_router_logits": True} if "Mixtral" in name else {}
    out = theirs(torch.tensor(ids), attention_mask=torch.tensor(real.astype(np.int64)),
                 labels=torch.tensor(labels), **extra)
    out.loss.backward()
    loss, _ = _our_total_loss(ours, ids, real, labels)

    key = f"model: {name} float64 loss gradients"
    check(key, "loss", loss, out.loss, 1e-6)
    their_grads = hf_grads_as_ours({n: p.grad for n, p in theirs.named_parameters()
                                    if p.grad is not None}, config)
    params = dict(ours.named_parameters())
    assert set(their_grads) == set(params)
    for pname, p in params.items():
        check(key, pname, p.grad, their_grads[pname], 1e-5)


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_mixtral_router_loss_is_hugging_faces(padded, rng):
    """from_hf selects HF's objective (pooled over every layer, padded positions left out)
    with HF's coefficient; its value is HF's aux_loss. HF computes that loss in float32
    even in a float64 model, hence 1e-6."""
    model_class, config = mixtral(3)
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    assert ours.config.moe_aux_objective == "pooled"
    assert ours.config.moe_aux_weight == config.router_aux_loss_coef
    ids, real, _ = _batch(rng, padded)
    with torch.no_grad():
        out = theirs(torch.tensor(ids), attention_mask=torch.tensor(real.astype(np.int64)),
                     output_router_logits=True)
    _, cache = ours.forward(ids, key_mask=real)
    key = "model: Mixtral (3 layers) float64 router loss"
    check(key, "aux loss", cache.aux_loss, out.aux_loss, 1e-6)
    for layer, block in enumerate(cache.blocks):
        check(key, f"router probs layer {layer}", block.ffn.probs,
              torch.softmax(out.router_logits[layer].double(), -1), 1e-6)


def test_exported_mixtral_trains_the_same_loss_in_transformers(tmp_path, rng):
    """save_hf writes HF's objective: transformers, loading the directory, computes the same
    total loss (CE + coef * pooled aux) and the same gradients as npformer."""
    ours = from_hf(build_hf(*mixtral(2), np.float64).state_dict(), mixtral(2)[1], dtype=np.float64)
    save_hf(ours, tmp_path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager", experts_implementation="eager", dtype=torch.float64)
    assert theirs.config.output_router_logits and theirs.config.router_aux_loss_coef == 0.02
    ids, real, labels = _batch(rng, padded=True)
    out = theirs(torch.tensor(ids), attention_mask=torch.tensor(real.astype(np.int64)),
                 labels=torch.tensor(labels))
    out.loss.backward()
    loss, _ = _our_total_loss(ours, ids, real, labels)
    key = "model: Mixtral exported float64 loss gradients"
    check(key, "loss", loss, out.loss, 1e-6)
    their_grads = hf_grads_as_ours({n: p.grad for n, p in theirs.named_parameters()}, theirs.config)
    for pname, p in ours.named_parameters():
        check(key, pname, p.grad, their_grads[pname], 1e-5)


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_kv_cache_decoding(name, rng):
    model_class, config = MODELS[name]()
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    prompt = ids_for(rng, 2, 5)
    tokens, logits = greedy_ours(ours, prompt, 8)
    their_tokens, their_logits = greedy_hf(theirs, prompt, 8)
    np.testing.assert_array_equal(tokens, their_tokens)
    check(f"model: {name} greedy KV-cache decoding", "step logits", logits, their_logits, 1e-6)
