"""The options of ``demo`` and ``train`` that shape the model and the run, the model
config they give, and a memory estimate made before anything is allocated."""
from __future__ import annotations

import numpy as np

from ..checkpoints.budget import available_memory, decoder_parameters
from ..t10_model import POSITIONS, DecoderConfig
from .common import MAX_STEPS, UsageError, non_negative_int, positive_int, positive_number, seed, steps

# name -> the value used when neither the user nor a resumed checkpoint gives one
MODEL_DEFAULTS = {"arch": "gpt2", "d_model": 64, "layers": 2, "heads": 4, "vocab_size": None,
                  "max_len": None, "positions": None}       # positions None: the arch's own


def saved_model_flags(config):
    """The value each model flag had in a saved run (its ``DecoderConfig``)."""
    return {"arch": "llama" if config.norm == "rmsnorm" else "gpt2",    # the demo's is GPT-2 with RoPE
            "d_model": config.d_model, "layers": config.n_layers, "heads": config.n_heads,
            "vocab_size": config.vocab_size, "max_len": config.max_len, "positions": config.positions}


def add_model_arguments(parser):
    """--arch, --positions, --d-model, --layers, --heads, --vocab-size, --max-len (defaults
    filled in later: a resumed run takes the checkpoint's)."""
    group = parser.add_argument_group("model (a resumed run keeps its own)")
    group.add_argument("--arch", choices=("gpt2", "llama"), default=None,
                       help="gpt2: learned positions, LayerNorm, GELU, tied head; "
                            "llama: RoPE, RMSNorm, SwiGLU (default gpt2)")
    group.add_argument("--positions", choices=POSITIONS, default=None,
                       help="how order enters the model (default: the arch's, learned for gpt2 and "
                            "rope for llama)")
    group.add_argument("--d-model", type=positive_int, default=None, help="width d (default 64)")
    group.add_argument("--layers", type=positive_int, default=None, help="blocks (default 2)")
    group.add_argument("--heads", type=positive_int, default=None, help="attention heads (default 4)")
    group.add_argument("--vocab-size", type=positive_int, default=None,
                       help="model vocabulary (default: exactly the tokenizer's)")
    group.add_argument("--max-len", type=positive_int, default=None,
                       help="position table length (default: the longest training sequence)")


def add_run_arguments(parser, default_steps, lr, batch_size, resumable):
    """--steps, --lr, --batch-size, --seed, --threads, --track, --plot, --no-progress.

    With ``resumable`` the defaults are left as None, to tell a flag the user gave
    from one they did not (a resumed run refuses changed settings by name).
    """
    group = parser.add_argument_group("training")
    group.add_argument("--steps", type=steps, default=None if resumable else default_steps,
                       help=f"optimizer steps, at most {MAX_STEPS:,} (default {default_steps})")
    group.add_argument("--lr", type=positive_number, default=None if resumable else lr,
                       help=f"peak learning rate (default {lr})")
    group.add_argument("--batch-size", type=positive_int, default=None if resumable else batch_size,
                       help=f"sequences per step (default {batch_size})")
    group.add_argument("--seed", type=seed, default=None if resumable else 0,
                       help="seed of the weights and batches, >= 0 (default 0)")
    group.add_argument("--threads", type=non_negative_int, default=1,
                       help="cores to compute on, at most the cores there are: the fast track "
                            "splits its work over them, BLAS runs one thread per call (default 1, "
                            "fastest on a shared machine; 0: leave BLAS as configured)")
    group.add_argument("--track", choices=("fast", "plain"), default="fast",
                       help="fast (default): the fast twins; plain: the maths as the tNN files "
                            "write it, so a print you add there shows")
    group.add_argument("--plot", metavar="DIR", default=None,
                       help="write loss.png and attention_*.png there (needs matplotlib)")
    group.add_argument("--no-progress", action="store_true", help="no progress bar")


def model_config(args, vocab_size, max_len):
    """The DecoderConfig the options ask for, checked against the data's needs."""
    if args.vocab_size is not None and args.vocab_size < vocab_size:
        raise UsageError(f"--vocab-size: the model's vocabulary of {args.vocab_size} is too small "
                         f"for the data's {vocab_size} tokens (its characters plus 4 specials)")
    if args.max_len is not None and args.max_len < max_len:
        raise UsageError(f"--max-len: {args.max_len} positions are too few for sequences of "
                         f"{max_len} tokens")
    maker = DecoderConfig.llama if args.arch == "llama" else DecoderConfig.gpt2
    try:
        chosen = {"positions": args.positions} if getattr(args, "positions", None) else {}
        return maker(vocab_size=args.vocab_size or vocab_size, d_model=args.d_model,
                     n_heads=args.heads, n_layers=args.layers, max_len=args.max_len or max_len, **chosen)
    except ValueError as error:
        if args.d_model % args.heads:
            raise UsageError(f"--heads: the width --d-model {args.d_model} must be divisible by "
                             f"the number of heads, got {args.heads}") from None
        raise UsageError(str(error)) from None


# -- memory ------------------------------------------------------------------------------------
def parameter_count(config):
    """How many numbers the model described by ``config`` holds (counted, not allocated)."""
    return decoder_parameters(config)


def training_bytes(config, batch_size, seq_len, dtype=np.float32):
    """About how much memory training takes: weights, gradients and AdamW's two buffers,
    plus what a forward keeps for the backward (the caches) and the logits."""
    size = np.dtype(dtype).itemsize
    hidden = config.ffn_hidden or 4 * config.d_model
    tokens = batch_size * seq_len
    per_token = config.n_layers * (16 * config.d_model + 3 * hidden + 2 * config.n_heads * seq_len)
    return size * (4 * parameter_count(config) + tokens * (per_token + 3 * config.vocab_size))


def available_bytes():
    """Memory this process can still take (MemAvailable, or a container's limit), or None."""
    return available_memory()


def check_memory(config, batch_size, seq_len, available=None):
    """A UsageError when training this model would need more memory than there is."""
    available = available_bytes() if available is None else available
    need = training_bytes(config, batch_size, seq_len)
    if available is not None and need > available:
        raise UsageError(f"--d-model/--layers/--vocab-size/--batch-size: the model "
                         f"({parameter_count(config):,} parameters) and its training need about "
                         f"{_gigabytes(need)} of memory, but {_gigabytes(available)} are free; "
                         f"choose smaller sizes")


def _gigabytes(n):
    return f"{n / 2 ** 30:,.1f} GiB" if n >= 2 ** 28 else f"{n / 2 ** 20:,.0f} MiB"

