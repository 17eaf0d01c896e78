"""Constructors and public functions refuse sizes and arguments they cannot use, naming the
argument, what was expected and what was given, before building anything (numpy's own
words, "negative dimensions are not allowed", name nothing; a zero width built a layer
that fails later, far from the mistake)."""
import numpy as np
import pytest

import npformer as nf
from npformer.t01_embedding import LearnedPositions, SinusoidalPositions, sinusoid_table
from npformer.t13_kv_cache import KVCache

REFUSED = {
    # widths and counts: positive integers, the argument named
    "LayerNorm(0)": (lambda: nf.LayerNorm(0), ValueError, r"^d: expected a positive integer, got 0$"),
    "LayerNorm(-3)": (lambda: nf.LayerNorm(-3), ValueError, r"^d: expected a positive integer, got -3$"),
    "LayerNorm(2.5)": (lambda: nf.LayerNorm(2.5), ValueError, r"^d: .* got 2\.5$"),
    "LayerNorm(4, eps=-1e-5)": (lambda: nf.LayerNorm(4, eps=-1e-5), ValueError,
                                r"^eps: expected a finite number >= 0, got -1e-05$"),
    "RMSNorm(True)": (lambda: nf.RMSNorm(True), ValueError, r"^d: expected a positive integer, got True$"),
    "RMSNorm(4, eps=nan)": (lambda: nf.RMSNorm(4, eps=float("nan")), ValueError, r"^eps: "),
    "Linear(0, 5)": (lambda: nf.Linear(0, 5), ValueError, r"^d_in: expected a positive integer, got 0$"),
    "Linear(5, -1)": (lambda: nf.Linear(5, -1), ValueError, r"^d_out: expected a positive integer, got -1$"),
    "Linear(4, 4, std=-1)": (lambda: nf.Linear(4, 4, std=-1.0), ValueError, r"^std: expected a finite number >= 0, got -1"),
    "Embedding(0, 4)": (lambda: nf.Embedding(0, 4), ValueError, r"^vocab_size: expected a positive integer, got 0$"),
    "Embedding(4, -1)": (lambda: nf.Embedding(4, -1), ValueError, r"^d: expected a positive integer, got -1$"),
    "LearnedPositions(0, 4)": (lambda: LearnedPositions(0, 4), ValueError, r"^max_len: expected a positive integer, got 0$"),
    "SinusoidalPositions(4, 0)": (lambda: SinusoidalPositions(4, 0), ValueError, r"^d: expected a positive integer, got 0$"),
    "sinusoid_table(-1, 4)": (lambda: sinusoid_table(-1, 4), ValueError, r"^max_len: "),
    "sinusoid_table(4, 4, base=0)": (lambda: sinusoid_table(4, 4, base=0), ValueError, r"^base: expected a finite number > 0"),
    "FFN(0)": (lambda: nf.FFN(0), ValueError, r"^d: expected a positive integer, got 0$"),
    "FFN(4, hidden=0)": (lambda: nf.FFN(4, hidden=0), ValueError, r"^hidden: expected a positive integer, got 0$"),
    "FFN(4, mult=0)": (lambda: nf.FFN(4, mult=0), ValueError, r"^mult: expected a positive integer, got 0$"),
    "SwiGLU(4, hidden=-2)": (lambda: nf.SwiGLU(4, hidden=-2), ValueError, r"^hidden: expected a positive integer, got -2$"),
    "SwiGLU(0)": (lambda: nf.SwiGLU(0), ValueError, r"^d: "),
    "MultiHeadAttention(0, 2)": (lambda: nf.MultiHeadAttention(0, 2), ValueError, r"^d: expected a positive integer, got 0$"),
    "CrossAttention(0, 2)": (lambda: nf.CrossAttention(0, 2), ValueError, r"^d: expected a positive integer, got 0$"),
    "CrossAttention(4, 2, d_memory=0)": (lambda: nf.CrossAttention(4, 2, d_memory=0), ValueError, r"^d_memory: "),
    "Rotary(0)": (lambda: nf.Rotary(0), ValueError, r"^head_dim: expected a positive integer, got 0$"),
    "Rotary(4, base=0)": (lambda: nf.Rotary(4, base=0), ValueError, r"^base: expected a finite number > 0, got 0$"),
    "Rotary(4, fraction=1.5)": (lambda: nf.Rotary(4, fraction=1.5), ValueError, r"^fraction: expected a number in \(0, 1\]"),
    "MoE(0, 2)": (lambda: nf.MoE(0, 2), ValueError, r"^d: expected a positive integer, got 0$"),
    "MoE(4, 2, hidden=0)": (lambda: nf.MoE(4, 2, hidden=0), ValueError, r"^hidden: "),
    "KVCache(0, 1, 1, 4, 2)": (lambda: KVCache(0, 1, 1, 4, 2), ValueError, r"^n_layers: expected a positive integer, got 0$"),
    "KVCache(1, 1, 1, -4, 2)": (lambda: KVCache(1, 1, 1, -4, 2), ValueError, r"^capacity: "),
    "causal_mask(0)": (lambda: nf.causal_mask(0), ValueError, r"^n: expected a positive integer, got 0$"),
    "causal_mask(3, 2)": (lambda: nf.causal_mask(3, 2), ValueError, r"^m: expected an integer >= n=3 .* got 2$"),
    # configs: every field a model would build from
    "DecoderConfig(ffn_hidden=0)": (lambda: nf.DecoderConfig(ffn_hidden=0), ValueError,
                                    r"^ffn_hidden: expected a positive integer or None \(4 \* d_model\), got 0$"),
    "DecoderConfig(rope_theta=0)": (lambda: nf.DecoderConfig(positions="rope", rope_theta=0), ValueError, r"^rope_theta: "),
    "DecoderConfig(rope_fraction=2)": (lambda: nf.DecoderConfig(rope_fraction=2), ValueError, r"^rope_fraction: "),
    "DecoderConfig(init_std=-1)": (lambda: nf.DecoderConfig(init_std=-1), ValueError, r"^init_std: "),
    "EncoderConfig(ffn_hidden=-1)": (lambda: nf.EncoderConfig(ffn_hidden=-1), ValueError, r"^ffn_hidden: "),
    "Seq2SeqConfig(src_vocab_size=0)": (lambda: nf.Seq2SeqConfig(src_vocab_size=0, share_embeddings=False),
                                        ValueError, r"^src_vocab_size: expected a positive integer, got 0$"),
    "DecoderLM('x')": (lambda: nf.DecoderLM("x"), TypeError, r"^config: expected a DecoderConfig or None, got str$"),
    "Encoder(DecoderConfig())": (lambda: nf.Encoder(nf.DecoderConfig()), TypeError, r"^config: expected an EncoderConfig"),
    "EncoderDecoder(EncoderConfig())": (lambda: nf.EncoderDecoder(nf.EncoderConfig()), TypeError, r"^config: expected a Seq2SeqConfig"),
    "TrainConfig(weight_decay=-1)": (lambda: nf.TrainConfig(weight_decay=-1), ValueError, r"^weight_decay: "),
    "TrainConfig(clip=0)": (lambda: nf.TrainConfig(clip=0), ValueError, r"^clip: expected a finite number > 0"),
    "TrainConfig(betas=(2, 0))": (lambda: nf.TrainConfig(betas=(2, 0)), ValueError, r"^betas: expected two numbers in \[0, 1\)"),
    "TrainConfig(warmup=-1)": (lambda: nf.TrainConfig(warmup=-1), ValueError, r"^warmup: expected an integer >= 0 or None"),
    "TrainConfig(min_lr=-1)": (lambda: nf.TrainConfig(min_lr=-1), ValueError, r"^min_lr: "),
    "TrainConfig(eval_every=-1)": (lambda: nf.TrainConfig(eval_every=-1), ValueError, r"^eval_every: "),
    # the checkers' entry points, refusing what they cannot check before drawing anything
    "gradcheck('hello', x)": (lambda: nf.gradcheck("hello", np.ones(3)), TypeError,
                              r"^target: expected a Module or a \(forward, backward\) pair of functions, got str 'hello'$"),
    "gradcheck((f,), x)": (lambda: nf.gradcheck((np.exp,), np.ones(3)), TypeError, r"^target: "),
}


@pytest.mark.parametrize("call", list(REFUSED))
def test_refused_naming_the_argument(call):
    make, error, pattern = REFUSED[call]
    with pytest.raises(error, match=pattern):
        make()


def test_the_smallest_sizes_are_still_accepted():
    """The refusals stop at what cannot work: width 1, one head, one position, one expert."""
    nf.LayerNorm(1), nf.RMSNorm(1), nf.Linear(1, 1), nf.Embedding(1, 1), nf.FFN(1, hidden=1)
    nf.MultiHeadAttention(1, 1), nf.MoE(1, 1, top_k=1), KVCache(1, 1, 1, 1, 1), nf.Rotary(2)
    assert nf.causal_mask(1).tolist() == [[True]]
    assert nf.causal_mask(1, 3).tolist() == [[True, True, True]]      # the last of three reads all
    nf.DecoderConfig(vocab_size=1, d_model=1, n_heads=1, max_len=1, ffn_hidden=1, init_std=0.0)
