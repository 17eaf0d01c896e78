"""Helpers for the model tier: tiny Hugging Face models with random weights, npformer's
per-layer states, and greedy KV-cache decoding on both sides."""
from __future__ import annotations

import numpy as np
import torch
import transformers

from npformer.t04_attention import padding_mask

DTYPES = {np.float32: torch.float32, np.float64: torch.float64}
V = 64   # vocabulary of every tiny decoder


# -- tiny configs (no download: random weights) ---------------------------------------------
def gpt2():
    return transformers.GPT2LMHeadModel, transformers.GPT2Config(
        n_embd=32, n_layer=2, n_head=4, vocab_size=V, n_positions=32, layer_norm_epsilon=1e-5,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager")


def llama():
    return transformers.LlamaForCausalLM, transformers.LlamaConfig(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
        num_hidden_layers=2, vocab_size=V, max_position_embeddings=64, rms_norm_eps=1e-6,
        rope_theta=500.0, attn_implementation="eager")


def mixtral(layers=2):
    return transformers.MixtralForCausalLM, transformers.MixtralConfig(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=24,
        num_hidden_layers=layers, vocab_size=V, max_position_embeddings=64, num_local_experts=4,
        num_experts_per_tok=2, router_aux_loss_coef=0.02, rope_theta=1000.0,
        attn_implementation="eager", experts_implementation="eager")


def bert():
    return transformers.BertModel, transformers.BertConfig(
        hidden_size=32, num_attention_heads=4, intermediate_size=48, num_hidden_layers=2,
        vocab_size=V, max_position_embeddings=40, type_vocab_size=2, layer_norm_eps=1e-12,
        attn_implementation="eager")


def bart(scale_embedding=False):
    return transformers.BartForConditionalGeneration, transformers.BartConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, vocab_size=V,
        max_position_embeddings=40, scale_embedding=scale_embedding, attn_implementation="eager")


def randomise_hf(model, seed=0):
    """Non-trivial random weights: norm gains 1 + 0.2 n, other vectors 0.1 n, matrices 0.15 n.

    HF's own init (std 0.02, gains exactly 1) makes a nearly constant model, where
    a wrong layout could still pass.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype)
            is_gain = p.dim() == 1 and ("norm" in name.lower() or "ln_" in name) and name.endswith("weight")
            if is_gain:
                p.copy_(1 + 0.2 * noise)
            elif p.dim() == 1:
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.15 * noise)
    return model


def build_hf(model_class, config, dtype, seed=0):
    """An HF model in eval mode (no dropout), random weights, in ``dtype`` (np.float32 / np.float64)."""
    torch.manual_seed(seed)
    model = model_class(config).eval()
    randomise_hf(model, seed)
    return model.to(DTYPES[dtype])


def decoder_states(model, ids, key_mask=None):
    """npformer DecoderLM: [embeddings, after block 1, ..., after block L, after final norm]."""
    B, N = ids.shape
    positions = np.arange(N)
    x = model.tokens(ids)
    if model.positions is not None:
        x = x + model.positions(positions)
    mask = None if key_mask is None else padding_mask(key_mask=key_mask)   # the blocks are causal
    states = [x]
    for block in model.blocks:
        x = block(x, mask, positions)
        states.append(x)
    states.append(model.norm(x))
    return states


def encoder_states(encoder, ids, key_mask, segments):
    """npformer Encoder: [embeddings after their LayerNorm, after block 1, ..., after block L]."""
    N = ids.shape[1]
    x = encoder.tokens(ids) + encoder.segments(segments) + encoder.positions(np.arange(N))
    x = encoder.embed_norm(x)
    mask = padding_mask(key_mask=key_mask)
    states = [x]
    for block in encoder.blocks:
        x = block(x, mask)
        states.append(x)
    return states


def greedy_ours(model, prompt, steps):
    """Greedy decoding with npformer's KV cache: (new tokens [B, steps], step logits [steps, B, V])."""
    cache = model.new_kv_cache(prompt.shape[0], prompt.shape[1] + steps)
    logits = model.forward(prompt, kv_cache=cache)[0][:, -1]
    tokens, step_logits = [], []
    for _ in range(steps):
        step_logits.append(logits)
        nxt = logits.argmax(-1)
        tokens.append(nxt)
        logits = model.forward(nxt[:, None], kv_cache=cache)[0][:, -1]
    return np.stack(tokens, 1), np.stack(step_logits)


def greedy_hf(model, prompt, steps):
    """transformers' generate(): greedy, its own KV cache, raw per-step logits."""
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(torch.tensor(prompt), do_sample=False, max_new_tokens=steps,
                             min_new_tokens=steps, use_cache=True, output_logits=True,
                             return_dict_in_generate=True)
    tokens = out.sequences[:, prompt.shape[1]:].numpy()
    return tokens, np.stack([x.double().numpy() for x in out.logits])
