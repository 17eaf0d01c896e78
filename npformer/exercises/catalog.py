"""The exercises, in the order the tutorial teaches them.

Each exercise names the function bodies a learner writes (``"file.py:qualname"``): its
backward bodies by default, its forward bodies too with ``--forward``. ``builds_on``
lists the exercises whose code it runs; ``checks`` the gradient-check cases
(``npformer.testing.cases.CASES``) and sizes it is graded on. Its property claims live in
``npformer.exercises.claims``. Numbers are fixed: an exercise keeps its number in every
workspace, even when some are left out.

The tutorial: part 1 follows one sentence through a Transformer, from attention to the
whole computation (its sections named in English here); part 2 is the overview of what a
Transformer computes (sections 1 to 16).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    """One exercise: what to write, where, what it builds on and how it is graded."""

    number: int
    name: str
    title: str                  # what the learner builds, in a few words
    section: str                # where the tutorial explains it
    backward: tuple = ()        # "file.py:qualname" bodies stubbed by default
    forward: tuple = ()         # bodies stubbed only with --forward
    builds_on: tuple = ()       # names of the exercises whose code it runs
    checks: tuple = ()          # (case name, sizes) pairs of npformer.testing.cases.CASES

    @property
    def label(self):
        """"05 attention": how reports name it."""
        return f"{self.number:02d} {self.name}"

    def functions(self, forward=False):
        """The "file.py:qualname" bodies a workspace asks for (backward, plus forward if asked)."""
        return self.backward + (self.forward if forward else ())

    def files(self, forward=False):
        """The workspace files holding this exercise's bodies, in order of first mention."""
        return tuple(dict.fromkeys(spec.split(":")[0] for spec in self.functions(forward)))


PART1 = "tutorial part 1"
PART2 = "tutorial part 2"

EXERCISES = (
    Exercise(1, "softmax", "softmax",
             f"{PART1}, attention by hand; {PART2} §6, how attention is computed",
             backward=("t03_softmax.py:softmax_backward",),
             forward=("t03_softmax.py:softmax_forward",),
             checks=(("softmax", (0, 1, 2)),)),
    Exercise(2, "activations", "ReLU, GELU, tanh-GELU and SiLU",
             f"{PART1}, why attention needs an FFN after it; {PART2} §10, what the MLP does",
             backward=("t06_activations.py:relu_backward", "t06_activations.py:gelu_backward",
                       "t06_activations.py:gelu_tanh_backward", "t06_activations.py:silu_backward"),
             forward=("t06_activations.py:relu_forward", "t06_activations.py:gelu_forward",
                      "t06_activations.py:gelu_tanh_forward", "t06_activations.py:silu_forward"),
             checks=(("relu", (0, 1)), ("gelu", (0, 1)), ("gelu_tanh", (0, 1)), ("silu", (0, 1)))),
    Exercise(3, "linear", "the linear layer",
             f"{PART1}, Q, K and V from one input; {PART2} §5, query, key and value",
             backward=("t02_linear.py:linear_backward", "t02_linear.py:Linear.backward"),
             forward=("t02_linear.py:linear_forward",),
             checks=(("linear", (0, 1, 2)), ("Linear", (0, 1)))),
    Exercise(4, "embedding", "token and position lookups",
             f"{PART2} §2, from token ids to vectors; §3, why positions are needed",
             backward=("t01_embedding.py:Embedding.backward", "t01_embedding.py:Embeddings.backward"),
             forward=("t01_embedding.py:Embedding.forward", "t01_embedding.py:sinusoid_table"),
             checks=(("Embedding", (0, 1)), ("LearnedPositions", (0,)), ("Embeddings", (0, 1)))),
    Exercise(5, "attention", "scaled dot-product attention",
             f"{PART1}, attention by hand and the mask that stops peeking; {PART2} §6, §7, §9",
             backward=("t04_attention.py:attention_backward",),
             forward=("t04_attention.py:may_read", "t04_attention.py:attention_forward"),
             builds_on=("softmax",),
             checks=(("attention", (0, 1, 2)),)),
    Exercise(6, "multi-head", "multi-head attention",
             f"{PART1}, why several heads are not one computation repeated; {PART2} §8, multi-head attention",
             backward=("t04_attention.py:MultiHeadAttention.backward",),
             forward=("t04_attention.py:MultiHeadAttention.split_heads",
                      "t04_attention.py:MultiHeadAttention.merge_heads"),
             builds_on=("linear", "attention"),
             checks=(("MultiHeadAttention", (0, 1)),)),
    Exercise(7, "rope", "rotary position embedding (RoPE)",
             f"{PART1}, how positions enter the matching; {PART2} §3, why positions are needed",
             backward=("t05_rope.py:Rotary.backward",),
             forward=("t05_rope.py:Rotary.angles", "t05_rope.py:rotate"),
             checks=(("Rotary", (0, 1, 2)), ("MultiHeadAttention", (2,)))),
    Exercise(8, "ffn", "the feed-forward network and SwiGLU",
             f"{PART1}, why attention needs an FFN after it; {PART2} §10, what the MLP does",
             backward=("t07_ffn.py:FFN.backward", "t07_ffn.py:swiglu_gate_backward", "t07_ffn.py:SwiGLU.backward"),
             forward=("t07_ffn.py:FFN.forward", "t07_ffn.py:swiglu_gate_forward", "t07_ffn.py:SwiGLU.forward"),
             builds_on=("activations", "linear"),
             checks=(("FFN", (0, 1, 2)), ("swiglu_gate", (0, 1)), ("SwiGLU", (0, 1)))),
    Exercise(9, "norm", "LayerNorm and RMSNorm",
             f"{PART1}, FFN, residuals and normalisation; {PART2} §12, LayerNorm and RMSNorm",
             backward=("t08_norm.py:layernorm_backward", "t08_norm.py:rmsnorm_backward",
                       "t08_norm.py:LayerNorm.backward", "t08_norm.py:RMSNorm.backward"),
             forward=("t08_norm.py:layernorm_forward", "t08_norm.py:rmsnorm_forward"),
             checks=(("layernorm", (0, 1)), ("rmsnorm", (0, 1)), ("LayerNorm", (0, 1)),
                     ("RMSNorm", (0, 1)))),
    Exercise(10, "block", "Pre-Norm and Post-Norm blocks (residuals)",
             f"{PART1}, FFN, residuals and normalisation; {PART2} §11, residual connections",
             backward=("t09_block.py:PreNormBlock.backward", "t09_block.py:PostNormBlock.backward"),
             forward=("t09_block.py:PreNormBlock.forward", "t09_block.py:PostNormBlock.forward"),
             builds_on=("multi-head", "ffn", "norm"),
             checks=(("PreNormBlock", (0, 1, 2)), ("PostNormBlock", (0, 1)))),
    Exercise(11, "model", "the decoder-only model (tied head)",
             f"{PART1}, from the last layer to next-token scores; {PART2} §13, what logits are",
             backward=("t10_model.py:TiedHead.backward", "t10_model.py:DecoderLM.backward"),
             forward=("t10_model.py:TiedHead.forward",),
             builds_on=("embedding", "block", "rope"),
             checks=(("TiedHead", (0, 1)), ("DecoderLM", (0, 1, 2)))),
    Exercise(12, "loss", "log-softmax and cross-entropy",
             f"{PART1}, from the last layer to next-token scores; {PART2} §13, what logits are",
             backward=("t11_loss.py:log_softmax_backward", "t11_loss.py:cross_entropy_backward"),
             forward=("t11_loss.py:log_softmax_forward", "t11_loss.py:cross_entropy_forward"),
             checks=(("log_softmax", (0, 1)), ("cross_entropy", (0, 1, 2)))),
    Exercise(13, "optim", "the AdamW update",
             "beyond the tutorial: training (worked example 17, first training steps)",
             backward=("training/optim.py:adamw_update",)),
    Exercise(14, "kv-cache", "the KV cache",
             f"{PART2} §15, why a KV cache speeds up generation",
             forward=("t13_kv_cache.py:LayerKV.write",),
             builds_on=("model",)),
    Exercise(15, "moe", "Mixture of Experts (routing, load balancing)",
             f"{PART1}, GQA and MoE",
             backward=("t14_moe.py:MoE.backward",),
             forward=("t14_moe.py:MoE.forward",),
             builds_on=("softmax", "ffn"),
             checks=(("MoE", (0, 1, 2)),)),
    Exercise(16, "encoder", "the encoder-only backbone and sentence vectors",
             f"{PART1}, GQA and MoE (encoder-only reads both ways)",
             backward=("t15_encoder.py:mean_pool_backward", "t15_encoder.py:l2_normalize_backward",
                       "t15_encoder.py:Encoder.backward"),
             forward=("t15_encoder.py:mean_pool_forward", "t15_encoder.py:l2_normalize_forward"),
             builds_on=("embedding", "block"),
             checks=(("mean_pool", (0, 1)), ("l2_normalize", (0, 1)), ("Encoder", (0, 1)))),
    Exercise(17, "seq2seq", "cross-attention and the encoder-decoder",
             f"{PART1}, GQA and MoE (encoder-decoder, cross-attention)",
             backward=("t16_cross_attention.py:CrossAttention.backward", "t17_seq2seq.py:EncoderDecoderBlock.backward",
                       "t17_seq2seq.py:EncoderDecoder.decode_backward"),
             forward=("t16_cross_attention.py:CrossAttention.forward",),
             builds_on=("encoder", "model"),
             checks=(("CrossAttention", (0, 1, 2)), ("EncoderDecoderBlock", (0, 1)),
                     ("EncoderDecoder", (0, 2)))),
    Exercise(18, "flash", "blockwise (flash) attention",
             f"{PART2} §16, why longer contexts cost more",
             backward=("t18_flash_attention.py:flash_attention_backward",),
             forward=("t18_flash_attention.py:flash_attention_forward",),
             builds_on=("attention",),
             checks=(("flash_attention", (0, 1, 2)),)),
    Exercise(19, "train", "your components learn the reverse task (>= 99%)",
             "beyond the tutorial: training (worked example 17, first training steps)",
             builds_on=("activations", "linear", "embedding", "multi-head", "ffn", "norm", "block",
                        "model", "loss", "optim")),
)

BY_NAME = {exercise.name: exercise for exercise in EXERCISES}


def find(name):
    """The exercise called ``name`` ("attention") or numbered ``name`` ("5", "05")."""
    text = str(name).strip()
    if text.isdigit():
        for exercise in EXERCISES:
            if exercise.number == int(text):
                return exercise
    if text in BY_NAME:
        return BY_NAME[text]
    raise ValueError(f"exercise: expected a name or number of {', '.join(e.label for e in EXERCISES)}; "
                     f"got {name!r}")


def available(forward=False):
    """The exercises a workspace can hold: those with bodies to write, and the training task."""
    return [e for e in EXERCISES if e.functions(forward) or not (e.backward or e.forward)]


def select(start=None, only=None, forward=False):
    """The exercises ``npformer exercises`` writes: all, from ``start`` on, or ``only`` these."""
    if start is not None and only:
        raise ValueError("--start, --only: give one of them, not both")
    pool = available(forward)
    if only:
        chosen = [find(name) for name in only]
        for exercise in chosen:
            if exercise not in pool:
                raise ValueError(f"--only: {exercise.label} has only forward bodies to write; add --forward")
        return sorted(set(chosen), key=lambda e: e.number)
    if start is not None:
        first = find(start)
        if first not in pool:
            raise ValueError(f"--start: {first.label} has only forward bodies to write; add --forward")
        return [e for e in pool if e.number >= first.number]
    return pool
