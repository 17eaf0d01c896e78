"""The strict float64 comparison: 1e-9 relative for logits, hidden states and every gradient.

Stock transformers computes a few pieces in float32 even after ``.double()``:
the cross-entropy (``logits.float()``), and for Llama and Mixtral also RMSNorm, the
attention softmax and the RoPE cos/sin tables; for Mixtral the router's softmax and
the load-balancing loss. Here those pieces are replaced,
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
from hf_util import build_hf, decoder_states, gpt2, llama, mixtral  # noqa: E402

from npformer.interop import from_hf, hf_grads_as_ours  # noqa: E402
from npformer.t11_loss import IGNORE_INDEX, cross_entropy_backward, cross_entropy_forward  # noqa: E402

pytestmark = pytest.mark.crosscheck
TOL = 1e-9


def float64_islands(monkeypatch, module, prefix):
    """Swap a Llama-family model's float32 islands (RMSNorm, RoPE tables, attention softmax)
    for float64 versions of the same maths; ``module`` is its modeling file."""

    def rms_norm(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    def rotary(self, x, position_ids):
        dim = self.inv_freq.shape[0] * 2
        theta = self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        freqs = position_ids[..., None].double() * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def attention(module_, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        key = module.repeat_kv(key, module_.num_key_value_groups)
        value = module.repeat_kv(value, module_.num_key_value_groups)
        scores = torch.matmul(query, key.transpose(2, 3)) * scaling
        if attention_mask is not None:
            scores = scores + attention_mask
        weights = torch.softmax(scores, dim=-1)                       # in the query's dtype
        return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights

    monkeypatch.setattr(getattr(module, prefix + "RMSNorm"), "forward", rms_norm)
    monkeypatch.setattr(getattr(module, prefix + "RotaryEmbedding"), "forward", rotary)
    monkeypatch.setattr(module, "eager_attention_forward", attention)


def float64_llama(monkeypatch):
    from transformers.models.llama import modeling_llama
    float64_islands(monkeypatch, modeling_llama, "Llama")


def float64_mixtral(monkeypatch):
    """Llama's islands, plus Mixtral's router softmax and its load-balancing loss (HF's
    load_balancing_loss_func, whose accumulators are float32, written again in float64)."""
    from transformers.models.mixtral import modeling_mixtral as mm
    float64_islands(monkeypatch, mm, "Mixtral")

    def router(self, hidden_states):
        logits = F.linear(hidden_states.reshape(-1, self.hidden_dim), self.weight)
        top, chosen = torch.topk(torch.softmax(logits, dim=-1), self.top_k, dim=-1)
        return logits, top / top.sum(dim=-1, keepdim=True), chosen

    def load_balancing(gate_logits, num_experts=None, top_k=2, attention_mask=None):
        # f_e and P_e averaged over every (layer, real token) row, then E * sum_e f_e P_e
        probs = torch.cat([torch.softmax(g, dim=-1) for g in gate_logits])          # [L*T, E]
        chosen = torch.topk(probs, top_k, dim=-1).indices                            # [L*T, k]
        real = (torch.ones(probs.shape[0], dtype=probs.dtype) if attention_mask is None else
                attention_mask.reshape(-1).to(probs.dtype).repeat(len(gate_logits)))
        slots = torch.zeros(num_experts, dtype=probs.dtype).scatter_add(
            0, chosen.reshape(-1), real.repeat_interleave(top_k))
        return num_experts * torch.sum(slots / real.sum() * (probs * real[:, None]).sum(0) / real.sum())

    monkeypatch.setattr(mm.MixtralTopKRouter, "forward", router)
    monkeypatch.setattr(mm, "load_balancing_loss_func", load_balancing)


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


@pytest.mark.parametrize("padded", [False, True], ids=["full", "padded"])
def test_mixtral_router_loss_float64_to_1e9(padded, monkeypatch, rng):
    """Mixtral with 2 layers: npformer's own objective (as from_hf chose it) against HF's
    total loss CE + router_aux_loss_coef * pooled aux, and every gradient, to 1e-9."""
    float64_mixtral(monkeypatch)
    model_class, config = mixtral(2)
    theirs = build_hf(model_class, config, np.float64)
    ours = from_hf(theirs.state_dict(), config, dtype=np.float64)
    ids = rng.integers(0, config.vocab_size, (2, 11))
    real = np.ones(ids.shape, bool)
    if padded:
        real[1, 7:] = False                             # right padding, left out of the routing
    labels = np.where(real, ids, IGNORE_INDEX)
    labels[0, 3] = IGNORE_INDEX

    out = theirs(torch.tensor(ids), attention_mask=torch.tensor(real.astype(np.int64)),
                 output_router_logits=True)
    V = out.logits.shape[-1]
    their_loss = F.cross_entropy(out.logits[:, :-1].reshape(-1, V), torch.tensor(
        labels[:, 1:].reshape(-1)), ignore_index=IGNORE_INDEX) + config.router_aux_loss_coef * out.aux_loss
    their_loss.backward()

    logits, cache = ours.forward(ids, key_mask=real)
    ce, ce_cache = cross_entropy_forward(logits[:, :-1], labels[:, 1:])
    d_logits = np.zeros_like(logits)
    d_logits[:, :-1] = cross_entropy_backward(1.0, ce_cache)[0]
    ours.backward(d_logits, cache)                      # adds moe_aux_weight * d aux

    key = "model: Mixtral (2 layers) float64, HF float32 pieces upcast"
    check(key, "aux loss", cache.aux_loss, out.aux_loss, TOL)
    check(key, "loss", ce + ours.config.moe_aux_weight * cache.aux_loss, their_loss, TOL)
    their_grads = hf_grads_as_ours({n: p.grad for n, p in theirs.named_parameters()}, config)
    for pname, p in ours.named_parameters():
        check(key, f"d {pname}", p.grad, their_grads[pname], TOL)
