"""The strict float64 comparison: 1e-9 relative for logits, hidden states and every gradient.

Stock transformers computes a few pieces in float32 even after ``.double()``:
the cross-entropy (``logits.float()``), and for Llama also RMSNorm, the
attention softmax and the RoPE cos/sin tables. Here those pieces are replaced,
for the duration of one test, by float64 versions of the same formulas (the loss
is computed from HF's float64 logits with F.cross_entropy); everything else is
stock HF code. Agreement then reaches rounding level, which a layout or
formula slip could never produce.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
F = torch.nn.functional

from crosscheck_util import check  # noqa: E402
from hf_util import build_hf, decoder_states, gpt2, llama  # noqa: E402

from npformer.interop import from_hf, hf_grads_as_ours  # noqa: E402
from npformer.loss import IGNORE_INDEX, cross_entropy_backward, cross_entropy_forward  # noqa: E402

pytestmark = pytest.mark.crosscheck
TOL = 1e-9


def float64_llama(monkeypatch):
    """Swap Llama's float32 islands for float64 versions of the same maths."""
    from transformers.models.llama import modeling_llama as ml

    def rms_norm(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    def rotary(self, x, position_ids):
        dim = self.inv_freq.shape[0] * 2
        theta = self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        freqs = position_ids[..., None].double() * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        key = ml.repeat_kv(key, module.num_key_value_groups)
        value = ml.repeat_kv(value, module.num_key_value_groups)
        scores = torch.matmul(query, key.transpose(2, 3)) * scaling
        if attention_mask is not None:
            scores = scores + attention_mask
        weights = torch.softmax(scores, dim=-1)                       # in the query's dtype
        return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights

    monkeypatch.setattr(ml.LlamaRMSNorm, "forward", rms_norm)
    monkeypatch.setattr(ml.LlamaRotaryEmbedding, "forward", rotary)
    monkeypatch.setattr(ml, "eager_attention_forward", attention)


@pytest.mark.parametrize("name", ["GPT-2", "Llama (GQA)"])
def test_float64_to_1e9(name, monkeypatch, rng):
    if name.startswith("Llama"):
        float64_llama(monkeypatch)
    model_class, config = (gpt2 if name == "GPT-2" else llama)()
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    ids = rng.integers(0, config.vocab_size, (2, 11))
    labels = ids.copy()
    labels[0, 3] = IGNORE_INDEX

    out = theirs(torch.tensor(ids), output_hidden_states=True)
    V = out.logits.shape[-1]
    their_loss = F.cross_entropy(out.logits[:, :-1].reshape(-1, V),
                                 torch.tensor(labels[:, 1:].reshape(-1)), ignore_index=IGNORE_INDEX)
    their_loss.backward()

    logits, cache = ours.forward(ids)
    loss, ce_cache = cross_entropy_forward(logits[:, :-1], labels[:, 1:])
    d_logits = np.zeros_like(logits)
    d_logits[:, :-1] = cross_entropy_backward(1.0, ce_cache)[0]
    ours.backward(d_logits, cache)

    key = f"model: {name} float64, HF float32 pieces upcast"
    check(key, "logits", logits, out.logits, TOL)
    states = decoder_states(ours, ids)
    L = len(ours.blocks)
    for i in range(L):
        check(key, f"hidden state {i}", states[i], out.hidden_states[i], TOL)
    check(key, "final hidden state", states[-1], out.hidden_states[L], TOL)
    check(key, "loss", loss, their_loss, TOL)
    their_grads = hf_grads_as_ours({n: p.grad for n, p in theirs.named_parameters()}, config)
    for pname, p in ours.named_parameters():
        check(key, f"d {pname}", p.grad, their_grads[pname], TOL)
