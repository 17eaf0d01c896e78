"""npformer: a Transformer in NumPy, every component with a forward and a hand-written backward.

Read the files in the order the tutorial teaches them:
functional (softmax, activations) -> linear -> embedding -> attention -> rope
-> ffn -> norm -> block -> model -> loss; gradcheck verifies every backward.
"""
from .attention import (DotProductAttention, MultiHeadAttention, attention_backward,
                        attention_forward, causal_mask, may_read, padding_mask,
                        scaled_dot_product_attention, sliding_window_mask)
from .block import BlockConfig, PostNormBlock, PreNormBlock, build_block
from .embedding import Embedding, Embeddings, LearnedPositions, SinusoidalPositions, sinusoid_table
from .ffn import FFN, SwiGLU, swiglu_gate_backward, swiglu_gate_forward
from .functional import (FUNCTION_PAIRS, gelu_backward, gelu_forward, gelu_tanh_backward,
                         gelu_tanh_forward, log_softmax_backward, log_softmax_forward,
                         relu_backward, relu_forward, silu_backward, silu_forward, softmax,
                         softmax_backward, softmax_forward, tanh_backward, tanh_forward)
from .gradcheck import GradcheckError, GradcheckReport, assert_gradcheck, gradcheck
from .kv_cache import KVCache
from .linear import Linear, linear_backward, linear_forward
from .loss import IGNORE_INDEX, cross_entropy, cross_entropy_backward, cross_entropy_forward
from .model import DecoderConfig, DecoderLM, TiedHead
from .module import Cache, Module, Parameter
from .norm import (LayerNorm, RMSNorm, layernorm_backward, layernorm_forward, rmsnorm_backward,
                   rmsnorm_forward)
from .rope import Rotary
from .track import current_track, track, use_track

__version__ = "0.1.0"

# variants: MoE
from .moe import MoE, MoECounts, active_parameters  # noqa: E402
# backbones: encoder-only, encoder-decoder
from .encoder import (Encoder, EncoderConfig, Pooler, l2_normalize_backward,  # noqa: E402
                      l2_normalize_forward, mean_pool_backward, mean_pool_forward)
from .seq2seq import CrossAttention, EncoderDecoder, EncoderDecoderBlock, Seq2SeqConfig  # noqa: E402
# training: optimizers, tokenizers, data, training, generation, checkpoints
# (the functions train.train and generate.generate are not re-exported: they would hide
#  the modules npformer.train and npformer.generate)
from .checkpoint import CheckpointError, CheckpointSaveError, load_checkpoint, save_checkpoint  # noqa: E402,E501
from .generate import Generation, generate_text, next_token_probs  # noqa: E402
from .optim import SGD, AdamW, adamw_update, clip_grad_norm, warmup_cosine  # noqa: E402
from .tokenizer import ByteTokenizer, CharTokenizer  # noqa: E402
from .train import TrainConfig, TrainingDiverged  # noqa: E402
# long context: blockwise (flash) attention
from .flash_attention import (BlockwiseAttention, flash_attention_backward,  # noqa: E402
                              flash_attention_forward)
# the fast track: importing it registers every fast twin with npformer.track
from . import fast  # noqa: E402,F401
