"""Sizes known before anything is allocated: how many numbers a config describes, whether
the memory and the files can hold them, how much disk a checkpoint takes.

A loader reads the config first and asks here, so that a config claiming ten million
layers or a billion-token vocabulary is refused in a moment, naming the file and the
fields, instead of building layers for a minute and ending in a MemoryError.
"""
from __future__ import annotations

import os
import shutil


def decoder_parameters(config):
    """How many numbers the ``DecoderLM`` of ``config`` holds (counted, not allocated)."""
    d, H, D = config.d_model, config.n_heads, config.head_dim
    kv = config.n_kv_heads or H
    hidden = config.ffn_hidden or 4 * d
    ffn = (3 if config.ffn == "swiglu" else 2) * d * hidden
    if config.n_experts:
        ffn = config.n_experts * (ffn + d)
    per_layer = d * (H + 2 * kv) * D + H * D * d + ffn + 4 * d
    positions = config.max_len * d if config.positions == "learned" else 0
    head = 0 if config.tie_embeddings else config.vocab_size * d
    return config.n_layers * per_layer + config.vocab_size * d + positions + head + 2 * d


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
                     available=None, error=ValueError):
    """``error`` naming ``where`` (the config file) and the size fields when a model of
    ``numbers`` parameters cannot be justified: more bytes than the weight files hold
    (``file_bytes``, with ``itemsize`` the smallest width they may store), or more memory
    than there is (the weights read plus the model built: twice the model)."""
    need = numbers * itemsize
    if file_bytes is not None and need > file_bytes:
        raise error(f"{where}: {size_fields(config)} describe at least {numbers:,} parameters "
                    f"({human(need)}), but {files} hold{'s' * (not files.startswith('the '))} "
                    f"{human(file_bytes)} of arrays (truncated or foreign weights, or an edited "
                    f"config)")
    available = available_memory() if available is None else available
    if available is not None and 2 * need > available:
        raise error(f"{where}: {size_fields(config)} describe a model of at least {numbers:,} "
                    f"parameters needing about {human(2 * need)} of memory to load, but "
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
