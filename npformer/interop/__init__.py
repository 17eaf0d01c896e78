"""Hugging Face interop: open a real checkpoint in npformer, and save npformer models for transformers.

A Hugging Face checkpoint is a directory with ``config.json`` (the shape of the
model) and ``model.safetensors`` (named tensors). Importing means three things,
one module each:

1. ``configs``: translate the config into ours (``decoder_config_from_hf`` ...),
   refusing any setting our model cannot express, with the config key in the message;
2. ``tables``: map every tensor name to our parameter name, one table per family;
3. ``tables`` again: fix the layouts. PyTorch's nn.Linear stores W as
   [d_out, d_in], ours is [d_in, d_out] (GPT-2's Conv1D is already [in, out]); our
   attention fuses Q, K and V into one ``qkv`` Linear with columns [H*D | H_kv*D | H_kv*D].

``files`` reads and writes the ``.safetensors`` files and checkpoint directories
(atomically, through ``npformer.core.fileio``); ``convert`` holds the entry points.

Families: GPT-2, Llama and Mixtral -> ``DecoderLM``; BERT -> ``Encoder``;
BART -> ``EncoderDecoder``. Llama-family RoPE rotates feature i with feature
i + D/2 (``rope_layout="half"``). BF16 tensors (NumPy has no such type) are
widened to float32 bit-exactly. T5 is refused: its relative-position buckets
have no counterpart in npformer's attention.

    model = from_hf("path/to/checkpoint")     # or from_hf(state_dict, config)
    save_hf(model, "out/")                    # transformers.AutoModelForCausalLM loads it
    hf_state_dict(model)                      # {their name: array}; grads=True for gradients
    read_hf_checkpoint("path/to/checkpoint")  # (config dict, {their name: array}), unconverted

Training conventions follow the checkpoint's family, and the imported model's config
says which were chosen:

- Mixtral's router loss. Hugging Face computes ONE load-balancing loss from the routing
  of all layers pooled (f and P averaged over every layer's tokens, padded positions left
  out when an attention_mask is given); ``from_hf`` therefore sets
  ``config.moe_aux_objective = "pooled"`` and ``config.moe_aux_weight =
  router_aux_loss_coef`` (npformer's own default, "per_layer", sums one loss per layer:
  the same for one layer, a different objective for more). Note that transformers adds
  ``router_aux_loss_coef * aux_loss`` to its ``loss`` only when the model runs with
  ``output_router_logits=True`` (hub configs say False: plain fine-tuning then trains
  cross-entropy alone); npformer's ``DecoderLM.backward`` always adds it, so set
  ``model.config.moe_aux_weight = 0`` to train what such a run trains. Export
  (``save_hf``) writes the weight as ``router_aux_loss_coef`` with
  ``output_router_logits`` True when it is not zero, and refuses a "per_layer"
  objective over several layers (set "pooled", or a zero weight, first).
- BERT's and BART's [PAD] row. torch freezes it (``nn.Embedding(padding_idx=...)``):
  ``from_hf`` sets ``config.pad_token_id`` (BERT's default 0, BART's 1), and the token
  table's lookups never update that row (BART's tied head still does, as in torch).
  Llama and Mixtral freeze ``pad_token_id`` too when their config.json sets one (hub
  checkpoints usually leave it null); npformer's DecoderConfig has no such field, so
  a DecoderLM updates every row.
- BERT's pooler (``pooler.dense``, then tanh, on the first position): imported when the
  checkpoint holds ``pooler.dense.weight`` (``config.pooler``); ``Encoder.pool(ids,
  key_mask)`` gives transformers' ``pooler_output``, ``Encoder.pooler`` its
  forward/backward. ``hf_state_dict`` writes it back.

``read_hf_checkpoint`` reads Hugging Face's files; npformer's own training
checkpoints are read by ``npformer.checkpoints.checkpoint.load_checkpoint``. Reading and
writing ``.safetensors`` needs safetensors (``pip install safetensors``, npformer's ``hf`` extra);
nothing optional is imported until a file is touched.
"""
from __future__ import annotations

from .configs import (FAMILIES, decoder_config_from_hf, encoder_config_from_hf, family_of,
                      hf_config_dict, hf_config_from_decoder, seq2seq_config_from_hf)
from .convert import convert_state_dict, from_hf, hf_grads_as_ours, hf_state_dict, save_hf
from .files import (bf16_to_float32, read_hf_checkpoint, read_safetensors, to_numpy,
                    write_hf_checkpoint, write_safetensors)
from .tables import ParamMap, table_for

__all__ = ["FAMILIES", "ParamMap", "bf16_to_float32", "convert_state_dict",
           "decoder_config_from_hf", "encoder_config_from_hf", "family_of", "from_hf", "hf_config_dict",
           "hf_config_from_decoder", "hf_grads_as_ours", "hf_state_dict",
           "read_hf_checkpoint", "read_safetensors", "save_hf", "seq2seq_config_from_hf",
           "table_for", "to_numpy", "write_hf_checkpoint", "write_safetensors"]

