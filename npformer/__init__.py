"""npformer: a Transformer in NumPy, every component with a forward and a hand-written backward.

The files t01 ... t18 follow the tutorial, one concept each, in the order it teaches them:
token vectors and positions, the linear layer (Q/K/V), softmax, attention (masks, multi-head,
grouped-query), RoPE, activations, the FFN, norms, the block, the decoder, the loss (which
the tutorial leaves to its next article), generation, the KV cache, Mixture of Experts, the
encoder, cross-attention, the encoder-decoder and blockwise attention. Two files go beyond
the tutorial: ``t19_optim`` (SGD and AdamW) and ``t21_alibi`` (ALiBi, positions as a bias on
the scores); ``tokenizer`` turns text into ids and back. ``gpt.py`` is the whole decoder on
one screen.

The sub-packages hold the machinery: ``core`` (the protocol, input checks, the track switch),
``fast`` (the fast twins), ``training``, ``checkpoints``, ``interop`` (Hugging Face),
``testing`` (gradient checks and conformance), ``exercises``, ``runtime`` (settings of the
whole process) and ``cli`` (the ``npformer`` command).
"""
from .core.module import Cache, Module, Parameter
from .core.track import current_track, track, use_track
from .t01_embedding import (Embedding, Embeddings, LearnedPositions, SinusoidalPositions,
                            sinusoid_table)
from .t02_linear import Linear, linear_backward, linear_forward
from .t03_softmax import softmax, softmax_backward, softmax_forward
from .t04_attention import (DotProductAttention, MultiHeadAttention, attention_backward,
                            attention_forward, causal_mask, grouped_attention_backward,
                            grouped_attention_forward, may_read, padding_mask,
                            scaled_dot_product_attention, sliding_window_mask)
from .t05_rope import Rotary
from .t06_activations import (gelu_backward, gelu_forward, gelu_tanh_backward, gelu_tanh_forward,
                              relu_backward, relu_forward, silu_backward, silu_forward,
                              tanh_backward, tanh_forward)
from .t07_ffn import FFN, SwiGLU, swiglu_gate_backward, swiglu_gate_forward
from .t08_norm import (LayerNorm, RMSNorm, layernorm_backward, layernorm_forward,
                       rmsnorm_backward, rmsnorm_forward)
from .t09_block import BlockConfig, PostNormBlock, PreNormBlock, build_block
from .t10_model import DecoderConfig, DecoderLM, TiedHead
from .t11_loss import (IGNORE_INDEX, cross_entropy, cross_entropy_backward, cross_entropy_forward,
                       log_softmax_backward, log_softmax_forward)
from .t12_generate import Generation, generate, generate_text, next_token_probs
from .t13_kv_cache import KVCache
from .t14_moe import MoE, MoECounts, active_parameters
from .t15_encoder import (Encoder, EncoderConfig, Pooler, l2_normalize_backward,
                          l2_normalize_forward, mean_pool_backward, mean_pool_forward)
from .t16_cross_attention import CrossAttention
from .t17_seq2seq import EncoderDecoder, EncoderDecoderBlock, Seq2SeqConfig
from .t18_flash_attention import (BlockwiseAttention, flash_attention_backward,
                                  flash_attention_forward)
from .t21_alibi import ALiBiAttention, alibi_backward, alibi_forward, alibi_slopes
from .testing.gradcheck import GradcheckError, GradcheckReport, assert_gradcheck, gradcheck
from .checkpoints.checkpoint import CheckpointError, CheckpointSaveError, load_checkpoint, save_checkpoint
from .training.loop import TrainConfig, TrainingDiverged, train
from .t19_optim import SGD, AdamW, adamw_update, clip_grad_norm, warmup_cosine
from .tokenizer import ByteTokenizer, CharTokenizer
from . import fast  # noqa: F401  (registers the fast twins, which the fast track runs when chosen)

__version__ = "0.1.0"

# The stateless forward/backward pairs, by name.
FUNCTION_PAIRS = {
    "softmax": (softmax_forward, softmax_backward),
    "log_softmax": (log_softmax_forward, log_softmax_backward),
    "relu": (relu_forward, relu_backward),
    "gelu": (gelu_forward, gelu_backward),
    "gelu_tanh": (gelu_tanh_forward, gelu_tanh_backward),
    "silu": (silu_forward, silu_backward),
    "tanh": (tanh_forward, tanh_backward),
}

# What ``from npformer import *`` gives and what help(npformer) lists: every name imported
# above (the sub-modules stay reachable as attributes, e.g. ``npformer.t04_attention``).
__all__ = [
    "Cache", "Module", "Parameter", "current_track", "track", "use_track", "Embedding",
    "Embeddings", "LearnedPositions", "SinusoidalPositions", "sinusoid_table", "Linear",
    "linear_backward", "linear_forward", "softmax", "softmax_backward", "softmax_forward",
    "DotProductAttention", "MultiHeadAttention", "attention_backward", "attention_forward",
    "causal_mask", "grouped_attention_backward", "grouped_attention_forward", "may_read",
    "padding_mask", "scaled_dot_product_attention", "sliding_window_mask", "Rotary",
    "gelu_backward", "gelu_forward", "gelu_tanh_backward", "gelu_tanh_forward", "relu_backward",
    "relu_forward", "silu_backward", "silu_forward", "tanh_backward", "tanh_forward", "FFN",
    "SwiGLU", "swiglu_gate_backward", "swiglu_gate_forward", "LayerNorm", "RMSNorm",
    "layernorm_backward", "layernorm_forward", "rmsnorm_backward", "rmsnorm_forward",
    "BlockConfig", "PostNormBlock", "PreNormBlock", "build_block", "DecoderConfig", "DecoderLM",
    "TiedHead", "IGNORE_INDEX", "cross_entropy", "cross_entropy_backward",
    "cross_entropy_forward", "log_softmax_backward", "log_softmax_forward", "Generation",
    "generate", "generate_text", "next_token_probs", "KVCache", "MoE", "MoECounts",
    "active_parameters", "Encoder", "EncoderConfig", "Pooler", "l2_normalize_backward",
    "l2_normalize_forward", "mean_pool_backward", "mean_pool_forward", "CrossAttention",
    "EncoderDecoder", "EncoderDecoderBlock", "Seq2SeqConfig", "BlockwiseAttention",
    "flash_attention_backward", "flash_attention_forward", "ALiBiAttention", "alibi_backward",
    "alibi_forward", "alibi_slopes", "GradcheckError", "GradcheckReport",
    "assert_gradcheck", "gradcheck", "CheckpointError", "CheckpointSaveError",
    "load_checkpoint", "save_checkpoint", "TrainConfig", "TrainingDiverged", "train", "SGD",
    "AdamW", "adamw_update", "clip_grad_norm", "warmup_cosine", "ByteTokenizer",
    "CharTokenizer", "FUNCTION_PAIRS"
]
