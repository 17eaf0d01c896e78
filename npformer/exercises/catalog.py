"""The exercises, in the order the tutorial teaches them.

Each exercise names the function bodies a learner writes (``"file.py:qualname"``, the file
a path under npformer/): its backward bodies by default, its forward bodies too with
``--forward``. It is graded alone, with npformer's own code for everything else: on the
``components`` of ``npformer.testing`` (drawn inputs, properties, catalogued mistakes) and
on the gradient-check ``checks`` (``npformer.testing.cases.CASES``, at the sizes given);
the claims about whole models live in ``npformer.exercises.claims``. ``builds_on`` lists
the exercises whose code the last exercise, training, runs together. The exercise for
``tNN_x.py`` is numbered NN (there is no 12: generation, t12, has nothing to write; the
optimizer and training, outside the tNN files, come last). An exercise keeps its number in
every workspace, even when some are left out.

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
    builds_on: tuple = ()       # the exercises whose code the training task runs with it
    checks: tuple = ()          # (case name, sizes) pairs of npformer.testing.cases.CASES
    components: tuple = ()      # npformer.testing components checked on drawn inputs

    @property
    def label(self):
        """"04 attention": how reports name it."""
        return f"{self.number:02d} {self.name}"

    def functions(self, forward=False):
        """The "file.py:qualname" bodies a workspace asks for (backward, plus forward if asked)."""
        return self.backward + (self.forward if forward else ())

    def paths(self, forward=False):
        """The functions as paths under npformer ("t03_softmax.softmax_backward")."""
        return tuple(module_path(spec) for spec in self.functions(forward))

    def files(self, forward=False):
        """The workspace files holding this exercise's bodies, in order of first mention."""
        return tuple(dict.fromkeys(spec.split(":")[0] for spec in self.functions(forward)))


def module_path(spec):
    """ "training/optim.py:adamw_update" -> "training.optim.adamw_update"."""
    file, qualname = spec.split(":")
    return f"{file[:-3].replace('/', '.')}.{qualname}"


PART1 = "tutorial part 1"
PART2 = "tutorial part 2"

EXERCISES = (
    Exercise(1, "embedding", "token and position lookups",
             f"{PART2} §2, from token ids to vectors; §3, why positions are needed",
             backward=("t01_embedding.py:Embedding.backward", "t01_embedding.py:Embeddings.backward"),
             forward=("t01_embedding.py:Embedding.forward", "t01_embedding.py:sinusoid_table"),
             checks=(("Embedding", (0, 1)), ("Embedding (padding row)", (0,)), ("LearnedPositions", (0,)),
                     ("Embeddings", (0, 1, 2)), ("Embeddings (sinusoidal)", (0,)),
                     ("DecoderLM (tied, padding row)", (1,))), components=("embedding",)),
    Exercise(2, "linear", "the linear layer",
             f"{PART1}, Q, K and V from one input; {PART2} §5, query, key and value",
             backward=("t02_linear.py:linear_backward", "t02_linear.py:Linear.backward"),
             forward=("t02_linear.py:linear_forward",),
             checks=(("Linear", (0, 1)),), components=("linear",)),
    Exercise(3, "softmax", "softmax",
             f"{PART1}, attention by hand; {PART2} §6, how attention is computed",
             backward=("t03_softmax.py:softmax_backward",),
             forward=("t03_softmax.py:softmax_forward",),
             components=("softmax",)),
    Exercise(4, "attention", "scaled dot-product and multi-head attention",
             f"{PART1}, attention by hand, the mask that stops peeking, and why several heads are not one "
             f"computation repeated; {PART2} §6, §7, §8, §9",
             backward=("t04_attention.py:attention_backward", "t04_attention.py:MultiHeadAttention.backward"),
             forward=("t04_attention.py:may_read", "t04_attention.py:attention_forward",
                      "t04_attention.py:MultiHeadAttention.split_heads",
                      "t04_attention.py:MultiHeadAttention.merge_heads"),
             checks=(("MultiHeadAttention", (0, 1, 2)),), components=("attention", "multi_head_attention")),
    Exercise(5, "rope", "rotary position embedding (RoPE)",
             f"{PART1}, how positions enter the matching; {PART2} §3, why positions are needed",
             backward=("t05_rope.py:Rotary.backward",),
             forward=("t05_rope.py:Rotary.angles", "t05_rope.py:rotate"),
             checks=(("Rotary", (0, 1, 2)), ("Rotary (three quarters)", (0,)), ("MultiHeadAttention", (2,))),
             components=("rope",)),
    Exercise(6, "activations", "ReLU, GELU, tanh-GELU and SiLU",
             f"{PART1}, why attention needs an FFN after it; {PART2} §10, what the MLP does",
             backward=("t06_activations.py:relu_backward", "t06_activations.py:gelu_backward",
                       "t06_activations.py:gelu_tanh_backward", "t06_activations.py:silu_backward"),
             forward=("t06_activations.py:relu_forward", "t06_activations.py:gelu_forward",
                      "t06_activations.py:gelu_tanh_forward", "t06_activations.py:silu_forward"),
             components=("relu", "gelu", "gelu_tanh", "silu")),
    Exercise(7, "ffn", "the feed-forward network and SwiGLU",
             f"{PART1}, why attention needs an FFN after it; {PART2} §10, what the MLP does",
             backward=("t07_ffn.py:FFN.backward", "t07_ffn.py:swiglu_gate_backward", "t07_ffn.py:SwiGLU.backward"),
             forward=("t07_ffn.py:FFN.forward", "t07_ffn.py:swiglu_gate_forward", "t07_ffn.py:SwiGLU.forward"),
             checks=(("FFN", (0, 1, 2)), ("swiglu_gate", (0, 1)), ("SwiGLU", (0, 1))),
             components=("swiglu",)),
    Exercise(8, "norm", "LayerNorm and RMSNorm",
             f"{PART1}, FFN, residuals and normalisation; {PART2} §12, LayerNorm and RMSNorm",
             backward=("t08_norm.py:layernorm_backward", "t08_norm.py:rmsnorm_backward",
                       "t08_norm.py:LayerNorm.backward", "t08_norm.py:RMSNorm.backward"),
             forward=("t08_norm.py:layernorm_forward", "t08_norm.py:rmsnorm_forward"),
             checks=(("LayerNorm", (0, 1)), ("RMSNorm", (0, 1))), components=("layernorm", "rmsnorm")),
    Exercise(9, "block", "Pre-Norm and Post-Norm blocks (residuals)",
             f"{PART1}, FFN, residuals and normalisation; {PART2} §11, residual connections",
             backward=("t09_block.py:PreNormBlock.backward", "t09_block.py:PostNormBlock.backward"),
             forward=("t09_block.py:PreNormBlock.forward", "t09_block.py:PostNormBlock.forward"),
             checks=(("PreNormBlock", (0, 1, 2)), ("PostNormBlock", (0, 1, 2)),
                     ("DecoderLM (Mixtral, pooled)", (1,))), components=("prenorm_block", "postnorm_block")),
    Exercise(10, "model", "the decoder-only model (tied head)",
             f"{PART1}, from the last layer to next-token scores; {PART2} §13, what logits are",
             backward=("t10_model.py:TiedHead.backward", "t10_model.py:DecoderLM.backward"),
             forward=("t10_model.py:TiedHead.forward",),
             checks=(("TiedHead", (0, 1)), ("DecoderLM", (0, 1, 2)), ("DecoderLM (Mixtral, pooled)", (1,))),
             components=("decoder_lm",)),
    Exercise(11, "loss", "log-softmax and cross-entropy",
             "beyond the tutorial: the loss (its logits and softmax sections lead up to it; worked example 17)",
             backward=("t11_loss.py:log_softmax_backward", "t11_loss.py:cross_entropy_backward"),
             forward=("t11_loss.py:log_softmax_forward", "t11_loss.py:cross_entropy_forward"),
             checks=(("cross_entropy", (0,)),), components=("log_softmax", "cross_entropy")),
    Exercise(13, "kv-cache", "the KV cache and grouped-query attention",
             f"{PART2} §15, why a KV cache speeds up generation; {PART1}, GQA and MoE",
             backward=("t04_attention.py:grouped_attention_backward",),
             forward=("t13_kv_cache.py:LayerKV.write", "t13_kv_cache.py:LayerKV.extend",
                      "t04_attention.py:grouped_attention_forward"),
             checks=(("grouped_attention", (0, 1, 2)),), components=("grouped_attention", "kv_decode")),
    Exercise(14, "moe", "Mixture of Experts (routing, load balancing)",
             f"{PART1}, GQA and MoE",
             backward=("t14_moe.py:MoE.backward",),
             forward=("t14_moe.py:MoE.forward",),
             checks=(("MoE", (0, 1, 2)), ("DecoderLM (Mixtral, pooled)", (0,))), components=("moe",)),
    Exercise(15, "encoder", "the encoder-only backbone and sentence vectors",
             f"{PART1}, GQA and MoE (encoder-only reads both ways)",
             backward=("t15_encoder.py:mean_pool_backward", "t15_encoder.py:l2_normalize_backward",
                       "t15_encoder.py:Encoder.backward"),
             forward=("t15_encoder.py:mean_pool_forward", "t15_encoder.py:l2_normalize_forward"),
             checks=(("mean_pool", (0, 1)), ("l2_normalize", (0, 1)), ("Encoder", (0, 1))),
             components=("l2_normalize",)),
    Exercise(16, "cross-attention", "cross-attention (the decoder reads the encoder)",
             f"{PART1}, GQA and MoE (encoder-decoder, cross-attention)",
             backward=("t16_cross_attention.py:CrossAttention.backward",),
             forward=("t16_cross_attention.py:CrossAttention.forward",),
             checks=(("CrossAttention", (0, 1, 2)),)),
    Exercise(17, "seq2seq", "the encoder-decoder block and model",
             f"{PART1}, GQA and MoE (encoder-decoder, cross-attention)",
             backward=("t17_seq2seq.py:EncoderDecoderBlock.backward", "t17_seq2seq.py:EncoderDecoder.decode_backward"),
             checks=(("EncoderDecoderBlock", (0, 1)), ("EncoderDecoder", (0, 2))),
             components=("seq2seq_block", "seq2seq_decoder")),
    Exercise(18, "flash", "blockwise (flash) attention",
             "beyond the tutorial: blockwise attention (part 2 §16 says why long contexts cost more)",
             backward=("t18_flash_attention.py:flash_attention_backward",),
             forward=("t18_flash_attention.py:flash_attention_forward",),
             checks=(("flash_attention", (0, 1, 2)),), components=("flash_attention",)),
    Exercise(19, "optim", "the AdamW update",
             "beyond the tutorial: training (worked example 17, first training steps)",
             backward=("training/optim.py:adamw_update",), components=("adamw",)),
    Exercise(20, "train", "your components learn the reverse task (>= 99%)",
             "beyond the tutorial: training (worked example 17, first training steps)",
             builds_on=("embedding", "linear", "softmax", "attention", "activations", "ffn", "norm", "block",
                        "model", "loss", "optim")),
)

BY_NAME = {exercise.name: exercise for exercise in EXERCISES}
# names an earlier numbering used, so that a workspace or a held-out set written then still loads
FORMER_NAMES = {"multi-head": "attention"}


def find(name):
    """The exercise called ``name`` ("attention") or numbered ``name`` ("4", "04")."""
    text = str(name).strip()
    if text.isdigit():
        for exercise in EXERCISES:
            if exercise.number == int(text):
                return exercise
    if text in BY_NAME:
        return BY_NAME[text]
    if text in FORMER_NAMES:
        return BY_NAME[FORMER_NAMES[text]]
    raise ValueError(f"exercise: expected a name or number of {', '.join(e.label for e in EXERCISES)}; "
                     f"got {name!r}")


def holding(spec):
    """The exercise whose bodies include ``spec`` ("t03_softmax.py:softmax_backward"): where a
    mistake in that function belongs, whatever the exercises are called or numbered."""
    for exercise in EXERCISES:
        if spec in exercise.backward + exercise.forward:
            return exercise
    raise ValueError(f"spec: expected one of the exercises' functions (\"file.py:qualname\"); got {spec!r}")


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
