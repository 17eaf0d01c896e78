"""The Hugging Face entry points: a checkpoint in (``from_hf``), a model out (``save_hf``,
``hf_state_dict``), and their gradients in our names (``hf_grads_as_ours``).

Each one puts the three parts together: the config translated (``configs``), every
tensor renamed and re-laid-out through the family's table (``tables``), the files
read or written (``files``).
"""
from __future__ import annotations

import os

import numpy as np

from ..t15_encoder import Encoder, EncoderConfig
from ..t10_model import DecoderConfig, DecoderLM
from ..t17_seq2seq import EncoderDecoder, Seq2SeqConfig
from ..checkpoints.budget import check_model_fits, minimum_parameters
from .configs import (decoder_config_from_hf, encoder_config_from_hf, family_of, hf_config_dict,
                      hf_config_from_decoder, seq2seq_config_from_hf)
from .files import read_hf_checkpoint, to_numpy, write_hf_checkpoint
from .tables import BUFFERS, canonical_name, table_for, unused_names

# The npformer config each family becomes, and the model that config builds.
CONFIG_FROM_HF = {"gpt2": decoder_config_from_hf, "llama": decoder_config_from_hf,
                  "mixtral": decoder_config_from_hf, "bert": encoder_config_from_hf,
                  "bart": seq2seq_config_from_hf}
MODEL_OF_CONFIG = {DecoderConfig: DecoderLM, EncoderConfig: Encoder, Seq2SeqConfig: EncoderDecoder}


def _shorten(names):
    """The first 8 names of a sorted list, and how many there are."""
    return f"{names[:8]}{' ...' if len(names) > 8 else ''} ({len(names)})"


def _check_tensor(family, name, array, shape):
    """ValueError / TypeError naming their tensor if its shape or dtype is not the expected one."""
    if tuple(array.shape) != tuple(shape):
        raise ValueError(f"{family} checkpoint: {name!r} expected shape {tuple(shape)}, "
                         f"got {tuple(array.shape)}")
    if not np.issubdtype(array.dtype, np.floating):
        raise TypeError(f"{family} checkpoint: {name!r} expected a float tensor, got {array.dtype}")


def convert_state_dict(state, table, family, expected_shapes, skip=(), strict=True):
    """{their name: tensor} -> {our name: ndarray} through ``table``; every problem names its key.

    ``expected_shapes`` {our name: shape}; ``skip`` their names allowed but not used;
    ``strict=False`` ignores unexpected keys (missing ones are always an error).
    """
    state = {canonical_name(family, k): v for k, v in state.items() if not BUFFERS.search(k)}
    wanted = {name for entry in table for name in entry.theirs}
    missing = sorted(wanted - set(state))
    unexpected = sorted(set(state) - wanted - set(skip)) if strict else []
    if missing or unexpected:
        raise ValueError(f"{family} checkpoint: missing keys {_shorten(missing)}, "
                         f"unexpected keys {_shorten(unexpected)}")
    ours = {}
    for entry in table:
        theirs = [to_numpy(state[name]) for name in entry.theirs]
        zeros = [np.zeros(expected_shapes[name], np.float32) for name in entry.ours]
        for name, array, expected in zip(entry.theirs, theirs, entry.to_theirs(zeros)):
            _check_tensor(family, name, array, expected.shape)
        ours.update(zip(entry.ours, entry.to_ours(theirs)))
    return ours


def _source(source, config):
    """(HF config dict, their state dict) from a directory, or a state dict plus its config."""
    if isinstance(source, (str, os.PathLike)):
        hf, state = read_hf_checkpoint(source)
        return (hf if config is None else hf_config_dict(config)), state
    if isinstance(source, dict):
        if config is None:
            raise ValueError("config: a state dict needs its config (dict, transformers config "
                             "or path to config.json), got None")
        return hf_config_dict(config), source
    raise TypeError(f"source: expected a checkpoint directory or a state dict, "
                    f"got {type(source).__name__}")


def _plan(hf, their_names=(), tensors=None):
    """(family, our config, table, their names to skip) for a Hugging Face config dict and the
    names of the tensors at hand (which tell Mixtral's expert layout and BERT's pooler).

    ``tensors``: (the config's name, the bytes of the tensors at hand); the config's sizes
    are then checked against them and the memory before anything per layer is made (2 bytes
    a number: the narrowest float a checkpoint may store, float16 or bfloat16)."""
    family = family_of(hf)
    if family == "bert":
        names = {canonical_name(family, k) for k in their_names}
        ours = encoder_config_from_hf(hf, pooler="pooler.dense.weight" in names)
    else:
        ours = CONFIG_FROM_HF[family](hf)
    if tensors is not None:
        where, data_bytes = tensors
        check_model_fits(where, ours, minimum_parameters(ours), 2, file_bytes=data_bytes,
                         files="the checkpoint's tensors", exact=False)
    experts = "per_expert" if any("block_sparse_moe." in k for k in their_names) else "fused"
    return family, ours, table_for(ours, experts), unused_names(ours)


def _nbytes(value):
    """The bytes of a tensor (ndarray or torch tensor) without converting it."""
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    if hasattr(value, "element_size") and hasattr(value, "numel"):
        return int(value.element_size() * value.numel())
    return int(np.asarray(value).nbytes)


def _build(config, dtype):
    """The npformer model a config describes (weights to be overwritten)."""
    return MODEL_OF_CONFIG[type(config)](config, np.random.default_rng(0), dtype)


def from_hf(source, config=None, dtype=np.float32, strict=True):
    """A Hugging Face checkpoint as an npformer model (weights copied, layouts converted).

    ``source``: a checkpoint directory (config.json + model.safetensors), or a
    state dict {name: torch tensor or ndarray} together with ``config`` (a dict,
    a transformers config or a path to config.json). GPT-2, Llama and Mixtral
    give a ``DecoderLM``; BERT gives an ``Encoder``; BART gives an ``EncoderDecoder``.
    ``strict=False`` ignores unexpected tensors (e.g. the masked-LM head of a
    BertForPreTraining checkpoint).

    Where a family's training differs from npformer's defaults, the returned model's
    config says what was chosen:
    - Mixtral: ``config.moe_aux_objective == "pooled"`` and ``config.moe_aux_weight ==
      router_aux_loss_coef``: the router loss transformers trains with
      ``output_router_logits=True`` (one load-balancing loss over all layers' routing,
      padded positions left out), which ``DecoderLM.backward`` adds;
    - BERT: ``config.pad_token_id`` (the [PAD] row, frozen as torch's ``padding_idx``)
      and ``config.pooler`` (True when the checkpoint holds ``pooler.dense.weight``;
      ``Encoder.pool`` then gives ``pooler_output``);
    - BART: ``config.pad_token_id``, the frozen row of the shared token table.
    """
    hf, state = _source(source, config)
    where = os.path.join(source, "config.json") if isinstance(source, (str, os.PathLike)) else "config"
    family, ours, table, skip = _plan(hf, state.keys(), (where, sum(_nbytes(v) for v in state.values())))
    model = _build(ours, dtype)
    shapes = {name: p.shape for name, p in model.named_parameters()}
    model.load_state_dict(convert_state_dict(state, table, family, shapes, skip, strict), cast=True)
    return model


def hf_grads_as_ours(grads, config):
    """Their gradients {their name: tensor} renamed and re-laid-out as ours {our name: ndarray}.

    The same mapping as ``from_hf``, for comparing backward passes parameter by parameter.
    """
    family, ours, table, skip = _plan(hf_config_dict(config), grads.keys())
    shapes = {name: p.shape for name, p in _build(ours, np.float32).named_parameters()}
    return convert_state_dict(grads, table, family, shapes, skip, strict=False)


def hf_state_dict(model, grads=False, experts="per_expert"):
    """{Hugging Face name: ndarray} of a ``DecoderLM``, ``Encoder`` (BERT) or ``EncoderDecoder``
    (BART); their ``.grad`` with ``grads=True``.

    MoE experts are written ``"per_expert"`` (block_sparse_moe.experts.{e}.w1/w2/w3,
    the hub's Mixtral files, which transformers 4 and 5 both load) or ``"fused"``
    (transformers 5's in-memory layout).
    """
    if not isinstance(model, tuple(MODEL_OF_CONFIG.values())):
        raise TypeError(f"model: expected a DecoderLM, Encoder or EncoderDecoder, "
                        f"got {type(model).__name__}")
    if experts not in ("per_expert", "fused"):
        raise ValueError(f"experts: expected 'per_expert' or 'fused', got {experts!r}")
    params = dict(model.named_parameters())
    out = {}
    for entry in table_for(model.config, experts):
        arrays = [params[name].grad if grads else params[name].data for name in entry.ours]
        for name, part in zip(entry.theirs, entry.to_theirs(arrays)):
            out[name] = np.ascontiguousarray(part)
    return out


def save_hf(model, directory):
    """Write a ``DecoderLM`` as a transformers checkpoint: config.json + model.safetensors.

    GPT-2 when positions are learned, Llama when they are RoPE, Mixtral when the
    FFN is a Mixture of Experts; ValueError naming the config field if none of
    them can express the model, before anything is written. Each file is written
    atomically (see ``write_hf_checkpoint``). Returns the directory as a Path.
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model: expected a DecoderLM, got {type(model).__name__}")
    hf = hf_config_from_decoder(model.config, model.dtype)
    return write_hf_checkpoint(directory, hf, hf_state_dict(model))
