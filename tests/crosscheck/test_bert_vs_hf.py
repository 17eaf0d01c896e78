"""npformer's Encoder against Hugging Face's BertModel (eager attention, eval mode).

A right-padded batch with two segments: every layer's hidden states at the real
tokens and ``pooler_output`` (1e-4 relative in float32, 1e-9 in float64: BERT has no
float32 islands), and, in float64, the gradient of a random linear function of the
final states (every position, padded ones too) and of ``pooler_output``, for every
parameter (1e-5 relative; it reaches rounding level). The [PAD] row of the word
embeddings stays at zero gradient on both sides (torch's ``padding_idx``), though the
batch reads it at positions whose states receive gradient.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from crosscheck_util import check  # noqa: E402
from hf_util import V, bert, build_hf, encoder_states  # noqa: E402

from npformer.interop import from_hf, hf_grads_as_ours  # noqa: E402

pytestmark = pytest.mark.crosscheck


def batch(rng, B=3, N=9):
    ids = rng.integers(1, V, (B, N))
    real = np.arange(N)[None, :] < np.array([N, 6, 3])[:, None]        # right padding
    segments = (np.arange(N)[None, :] >= np.array([5, 3, 1])[:, None]).astype(np.int64)
    ids[~real] = 0
    return ids, real, segments


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_bert_hidden_states(dtype, rng):
    model_class, config = bert()
    theirs = build_hf(model_class, config, dtype)
    ours = from_hf(theirs.state_dict(), config, dtype=dtype)
    ids, real, segments = batch(rng)
    with torch.no_grad():
        out = theirs(torch.tensor(ids), attention_mask=torch.tensor(real.astype(np.int64)),
                     token_type_ids=torch.tensor(segments), output_hidden_states=True)
    tol = 1e-4 if dtype == np.float32 else 1e-9
    key = f"model: BERT {np.dtype(dtype).name}"
    states = encoder_states(ours, ids, real, segments)
    assert len(states) == len(out.hidden_states)
    for i, (mine, theirs_i) in enumerate(zip(states, out.hidden_states)):
        check(key, f"hidden state {i}", mine[real], theirs_i.numpy()[real], tol)
    final, _ = ours.forward(ids, real, segments)
    check(key, "last_hidden_state", final[real], out.last_hidden_state.numpy()[real], tol)
    assert ours.config.pooler and ours.config.pad_token_id == config.pad_token_id == 0
    check(key + " pooler_output", "pooler_output", ours.pool(ids, real, segments),
          out.pooler_output, tol)


def test_bert_gradients_for_every_parameter(rng):
    model_class, config = bert()
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    ids, real, segments = batch(rng)
    ids[0, 4] = config.pad_token_id                 # [PAD] at a real position too
    d_states = rng.standard_normal((*ids.shape, config.hidden_size))   # padded positions too
    d_pooled = rng.standard_normal((ids.shape[0], config.hidden_size))
    out = theirs(torch.tensor(ids), attention_mask=torch.tensor(real.astype(np.int64)),
                 token_type_ids=torch.tensor(segments))
    ((out.last_hidden_state * torch.tensor(d_states)).sum()
     + (out.pooler_output * torch.tensor(d_pooled)).sum()).backward()
    states, cache = ours.forward(ids, real, segments)
    pooled, pool_cache = ours.pooler.forward(states)
    ours.backward(d_states + ours.pooler.backward(d_pooled, pool_cache), cache)
    their_grads = hf_grads_as_ours({n: p.grad for n, p in theirs.named_parameters()
                                    if p.grad is not None}, config)
    params = dict(ours.named_parameters())
    assert set(their_grads) == set(params) and {"pooler.weight", "pooler.bias"} <= set(params)
    for name, p in params.items():
        check("model: BERT float64 gradients", name, p.grad, their_grads[name], 1e-5)
    # the frozen [PAD] row: zero on both sides, though unfrozen it would learn
    pad = config.pad_token_id
    assert not their_grads["tokens.weight"][pad].any() and not params["tokens.weight"].grad[pad].any()
    ours.tokens.padding_idx = None
    ours.zero_grad()
    ours.backward(d_states + ours.pooler.backward(d_pooled, pool_cache), cache)
    assert np.abs(params["tokens.weight"].grad[pad]).max() > 1e-3
