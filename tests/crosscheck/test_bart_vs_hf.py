"""npformer's EncoderDecoder against Hugging Face's BartForConditionalGeneration.

BART is Post-Norm with an embedding LayerNorm on both sides, exact GELU, biases
everywhere, one token table shared by encoder, decoder and LM head, learned
positions offset by 2 rows, and a ``final_logits_bias``. A padded source batch:
logits, every encoder and decoder hidden state (1e-4 in float32, 1e-9 in
float64), the loss gradient of every parameter (1e-5, float64; the [PAD] row of the
shared table frozen in the lookups, as torch's padding_idx, but not in the tied head), and greedy
decoding (HF: generate() with its KV cache; npformer's EncoderDecoder has no KV
cache, so it re-runs the decoder on the growing prefix: same tokens and logits).
T5 is not used: its relative-position buckets cannot be expressed (see test_interop).
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from crosscheck_util import check  # noqa: E402
from hf_util import V, bart, build_hf  # noqa: E402

from npformer.t04_attention import causal_mask, padding_mask  # noqa: E402
from npformer.interop import from_hf, hf_grads_as_ours  # noqa: E402
from npformer.t11_loss import cross_entropy_backward, cross_entropy_forward  # noqa: E402

pytestmark = pytest.mark.crosscheck
START = 2          # BART's decoder_start_token_id


def batch(rng):
    src = rng.integers(3, V, (2, 9))
    src_real = np.arange(9)[None] < np.array([[9], [6]])
    src[~src_real] = 1                                         # BART's pad id
    tgt = np.concatenate([np.full((2, 1), START), rng.integers(3, V, (2, 6))], axis=1)
    return src, src_real, tgt


def our_states(model, src, src_real, tgt):
    """([encoder embeddings, after each encoder layer], [decoder embeddings, after each layer])."""
    enc, dec = model.encoder, model
    x = enc.tokens(src) * enc.config.embed_scale + enc.positions(np.arange(src.shape[1]))
    x = enc.embed_norm(x)
    mask = padding_mask(key_mask=src_real)
    enc_states = [x]
    for block in enc.blocks:
        x = block(x, mask)
        enc_states.append(x)
    memory = x
    y = dec.tokens(tgt) * model.config.embed_scale + dec.positions(np.arange(tgt.shape[1]))
    y = dec.embed_norm(y)
    self_mask = causal_mask(tgt.shape[1])[None, None]
    dec_states = [y]
    for block in dec.blocks:
        y = block(y, memory, self_mask, mask)
        dec_states.append(y)
    return enc_states, dec_states


@pytest.mark.parametrize("dtype,scale", [(np.float32, False), (np.float64, False), (np.float64, True)],
                         ids=["float32", "float64", "float64-scaled-embeddings"])
def test_bart_logits_and_hidden_states(dtype, scale, rng):
    model_class, config = bart(scale)
    theirs = build_hf(model_class, config, dtype)
    ours = from_hf(theirs.state_dict(), config, dtype=dtype)
    assert math.isclose(ours.config.embed_scale, math.sqrt(32) if scale else 1.0)
    src, src_real, tgt = batch(rng)
    with torch.no_grad():
        out = theirs(input_ids=torch.tensor(src), attention_mask=torch.tensor(src_real.astype(np.int64)),
                     decoder_input_ids=torch.tensor(tgt), output_hidden_states=True)
    tol = 1e-4 if dtype == np.float32 else 1e-9
    key = f"model: BART {np.dtype(dtype).name}"
    check(key, "logits", ours(src, tgt, src_real), out.logits, tol)
    enc_states, dec_states = our_states(ours, src, src_real, tgt)
    for i, (mine, ref) in enumerate(zip(enc_states, out.encoder_hidden_states, strict=True)):
        check(key, f"encoder hidden state {i}", mine[src_real], ref.numpy()[src_real], tol)
    for i, (mine, ref) in enumerate(zip(dec_states, out.decoder_hidden_states, strict=True)):
        check(key, f"decoder hidden state {i}", mine, ref, tol)


def test_bart_loss_gradients_for_every_parameter(rng):
    model_class, config = bart()
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    src, src_real, tgt = batch(rng)
    assert ours.config.pad_token_id == config.pad_token_id == 1
    src[0, 2] = tgt[1, 3] = 1            # the pad id read at real positions: a frozen row
    labels = np.concatenate([tgt[:, 1:], rng.integers(3, V, (2, 1))], axis=1)
    labels[1, 2] = -100
    out = theirs(input_ids=torch.tensor(src), attention_mask=torch.tensor(src_real.astype(np.int64)),
                 decoder_input_ids=torch.tensor(tgt), labels=torch.tensor(labels),
                 output_hidden_states=True)
    out.logits.retain_grad()
    out.loss.backward()

    logits, cache = ours.forward(src, tgt, src_real)
    loss, ce_cache = cross_entropy_forward(logits, labels)
    ours.backward(cross_entropy_backward(1.0, ce_cache)[0], cache)

    key = "model: BART float64 loss gradients"
    check(key, "loss", loss, out.loss, 1e-9)
    grads = {n: p.grad for n, p in theirs.named_parameters() if p.grad is not None}
    # final_logits_bias is a buffer in HF (no gradient): its gradient is the logits' summed
    grads["final_logits_bias"] = out.logits.grad.sum(dim=(0, 1))[None]
    their_grads = hf_grads_as_ours(grads, config)
    params = dict(ours.named_parameters())
    assert set(their_grads) == set(params)
    for name, p in params.items():
        check(key, name, p.grad, their_grads[name], 1e-5)
    # row 1 ([PAD]) learns only through the tied head (torch's padding_idx freezes the
    # lookups): its gradient is sum over positions of d_logits[..., 1] * decoder output
    head_only = torch.einsum("bn,bnd->d", out.logits.grad[..., 1], out.decoder_hidden_states[-1])
    check(key, "[PAD] row: the head's gradient only", params["encoder.tokens.weight"].grad[1],
          head_only, 1e-9)


def test_bart_greedy_decoding(rng):
    model_class, config = bart()
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    src, src_real, _ = batch(rng)
    steps = 7
    gen = theirs.generation_config
    gen.eos_token_id = gen.forced_eos_token_id = gen.forced_bos_token_id = None
    gen.decoder_start_token_id, gen.pad_token_id = START, 1
    with torch.no_grad():
        out = theirs.generate(torch.tensor(src), attention_mask=torch.tensor(src_real.astype(np.int64)),
                              do_sample=False, num_beams=1, max_new_tokens=steps, min_new_tokens=steps,
                              output_logits=True, return_dict_in_generate=True, use_cache=True)
    their_tokens = out.sequences[:, 1:].numpy()
    their_logits = np.stack([x.double().numpy() for x in out.logits])

    memory = ours.encode(src, src_real)                         # the source is encoded once
    tgt = np.full((2, 1), START)
    step_logits = []
    for _ in range(steps):
        last = ours.decode_forward(memory, tgt, src_real)[0][:, -1]
        step_logits.append(last)
        tgt = np.concatenate([tgt, last.argmax(-1)[:, None]], axis=1)
    np.testing.assert_array_equal(tgt[:, 1:], their_tokens)
    check("model: BART greedy decoding", "step logits", np.stack(step_logits), their_logits, 1e-6)
