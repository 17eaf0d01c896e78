"""Sizes known before anything is allocated: how many numbers a config describes, whether
the memory and the files can hold them, how much disk a checkpoint takes.

A loader reads the config first and asks here, so that a config claiming ten million
layers or a billion-token vocabulary is refused in a moment, naming the file and the
fields, instead of building layers for a minute and ending in a MemoryError.
"""
from __future__ import annotations

import os
import shutil


# -- how many numbers a config describes: each part as its constructor builds it ------------
def _linear(d_in, d_out, bias):
    """A ``Linear``: the weight [d_in, d_out], and the bias [d_out] when it has one."""
    return d_in * d_out + (d_out if bias else 0)


def _norm(block):
    """A norm of width d: LayerNorm holds gamma and beta, RMSNorm gamma only."""
    return (2 if block.norm == "layernorm" else 1) * block.d_model


def _attention(block):
    """Self-attention: the fused Q/K/V projection (H + 2 H_kv heads of width D) and Wo."""
    d, D = block.d_model, block.head_dim
    kv = block.n_kv_heads or block.n_heads
    return _linear(d, (block.n_heads + 2 * kv) * D, block.attn_bias) + \
        _linear(block.n_heads * D, d, block.attn_bias)


def _ffn(block):
    """The position-wise network: FFN (up, down), SwiGLU (gate, up, down), or a MoE of E of
    them behind a router (a Linear d -> E without a bias)."""
    d = block.d_model
    hidden = block.ffn_hidden or 4 * d
    matrices = 3 if block.ffn == "swiglu" else 2
    one = (matrices - 1) * _linear(d, hidden, block.ffn_bias) + _linear(hidden, d, block.ffn_bias)
    if block.n_experts:
        return _linear(d, block.n_experts, False) + block.n_experts * one
    return one


def block_parameters(block):
    """One block of a ``BlockConfig``: attention, FFN and their two norms."""
    return _attention(block) + _ffn(block) + 2 * _norm(block)


def _positions(config):
    """A learned position table holds max_len x d numbers; sinusoids and RoPE hold none."""
    return config.max_len * config.d_model if config.positions == "learned" else 0


def decoder_parameters(config):
    """How many numbers the ``DecoderLM`` of ``config`` holds (counted, not allocated)."""
    block = config.block_config()
    tokens = config.vocab_size * config.d_model
    head = 0 if config.tie_embeddings else tokens          # a tied head is the token table
    return tokens + _positions(config) + config.n_layers * block_parameters(block) + \
        _norm(block) + head


def encoder_parameters(config):
    """How many numbers the ``Encoder`` of an ``EncoderConfig`` holds."""
    block, d = config.block_config(), config.d_model
    embed_norm = _norm(block) if config.embed_norm else 0
    final_norm = _norm(block) if config.use_final_norm else 0
    pooler = _linear(d, d, True) if config.pooler else 0
    return config.vocab_size * d + _positions(config) + config.type_vocab_size * d + \
        embed_norm + config.n_layers * block_parameters(block) + final_norm + pooler


def seq2seq_parameters(config):
    """How many numbers the ``EncoderDecoder`` of a ``Seq2SeqConfig`` holds: its encoder, then
    a decoder whose layers add a cross-attention (Q, K/V, Wo) and its norm."""
    block, d = config.block_config(), config.d_model
    kv = config.n_kv_heads or config.n_heads
    cross = _linear(d, d, config.attn_bias) + \
        _linear(d, 2 * kv * block.head_dim, config.attn_bias) + _linear(d, d, config.attn_bias)
    tokens = config.vocab_size * d
    return (encoder_parameters(config.encoder_config())
            + (0 if config.share_embeddings else tokens) + _positions(config)
            + (_norm(block) if config.embed_norm else 0)
            + config.n_decoder_layers * (block_parameters(block) + cross + _norm(block))
            + (_norm(block) if config.use_final_norm else 0)
            + (0 if config.tie_head else tokens) + (config.vocab_size if config.logits_bias else 0))


def parameter_count(config):
    """How many numbers the model of ``config`` holds: a ``DecoderConfig``, an
    ``EncoderConfig`` or a ``Seq2SeqConfig``, told apart by the fields only each has."""
    if hasattr(config, "n_decoder_layers"):
        return seq2seq_parameters(config)
    if hasattr(config, "type_vocab_size"):
        return encoder_parameters(config)
    return decoder_parameters(config)


def minimum_parameters(config):
    """A lower bound on the numbers any npformer model of ``config`` holds (decoder, encoder
    or encoder-decoder): per layer the query and output projections (2 d^2) and the FFN's two
    matrices (2 d * hidden), plus the token table (V d)."""
    d = config.d_model
    layers = getattr(config, "n_layers", None) or \
        getattr(config, "n_encoder_layers", 0) + getattr(config, "n_decoder_layers", 0)
    hidden = getattr(config, "ffn_hidden", None) or 4 * d
    experts = max(getattr(config, "n_experts", 0) or 0, 1)
    return layers * (2 * d * d + experts * 2 * d * hidden) + config.vocab_size * d


def size_fields(config):
    """The fields that set a model's size, as ``name=value`` text for an error message."""
    names = ("vocab_size", "d_model", "n_layers", "n_encoder_layers", "n_decoder_layers",
             "ffn_hidden", "n_experts")
    return ", ".join(f"{name}={getattr(config, name)}" for name in names
                     if getattr(config, name, None))


def available_memory():
    """Memory this process can still take (MemAvailable, or a container's limit), or None."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                         "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit) as a, open(used) as b:
                found.append(int(a.read().strip()) - int(b.read().strip()))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def human(n):
    """Bytes in words: 12 KiB, 3.4 MiB, 1.2 GiB, 29.8 TiB."""
    for unit, power in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 2 ** power:
            return f"{n / 2 ** power:,.1f} {unit}"
    return f"{n} bytes"


def check_model_fits(where, config, numbers, itemsize, file_bytes=None, files="the weight files",
                     available=None, error=ValueError, exact=True, doing="to load"):
    """``error`` naming ``where`` (the config file) and the size fields when a model of
    ``numbers`` parameters cannot be justified: more bytes than the weight files hold
    (``file_bytes``, with ``itemsize`` the smallest width they may store), or more memory
    than there is (twice the model: the weights read plus the model built, or, ``doing`` "to
    build", its weights and their gradients). ``exact``: ``numbers`` is the model's count,
    not a lower bound (the message says "at least")."""
    need = numbers * itemsize
    bound = "" if exact else "at least "
    if file_bytes is not None and need > file_bytes:
        raise error(f"{where}: {size_fields(config)} describe {bound}{numbers:,} parameters "
                    f"({human(need)}), but {files} hold{'s' * (not files.startswith('the '))} "
                    f"{human(file_bytes)} of arrays (truncated or foreign weights, or an edited "
                    f"config)")
    available = available_memory() if available is None else available
    if available is not None and 2 * need > available:
        raise error(f"{where}: {size_fields(config)} describe a model of {bound}{numbers:,} "
                    f"parameters needing about {human(2 * need)} of memory {doing}, but "
                    f"{human(available)} are free")


# -- disk ---------------------------------------------------------------------------------------
def checkpoint_bytes(numbers, itemsize, steps, optimizer_buffers=2):
    """About how many bytes one checkpoint takes: the weights, the optimizer's buffers
    (AdamW: m and v), and the loss history (three numbers a step as JSON)."""
    return numbers * itemsize * (1 + optimizer_buffers) + 64 * steps + 64 * 1024


def free_disk(directory):
    """Free bytes on the file system that holds (or will hold) ``directory``."""
    path = os.path.abspath(directory)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def check_disk(directory, need, error):
    """``error`` when ``directory``'s file system cannot take two checkpoints of ``need`` bytes
    (a save writes the new one in full before the old one is removed)."""
    free = free_disk(directory)
    if 2 * need > free:
        raise error(f"not enough free disk space for checkpoints in {directory}: a checkpoint "
                    f"of this run takes about {human(need)} and a save needs room for two "
                    f"({human(2 * need)}), but {human(free)} are free")
    return free
