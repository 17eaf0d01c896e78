"""The size a config describes, counted before anything is built, is exactly what the built
model holds: a loader compares it with the weight file and refuses a checkpoint it does not
fit, so a count one norm's beta too high refuses every model of that kind."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npformer.checkpoints.budget import parameter_count
from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.t15_encoder import Encoder, EncoderConfig
from npformer.t17_seq2seq import EncoderDecoder, Seq2SeqConfig

POSITIONS = ("learned", "sinusoidal", "rope", "none")
FFNS = ("relu", "gelu", "gelu_tanh", "swiglu")
NORMS = ("layernorm", "rmsnorm")
DTYPES = (np.float32, np.float64)


@st.composite
def widths(draw):
    """d_model, n_heads and n_kv_heads that divide: MHA, GQA (kv a divisor of H) and MQA."""
    n_heads = draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([2, 4]))
    n_kv_heads = draw(st.sampled_from([None] + [k for k in (1, 2, 4) if n_heads % k == 0]))
    return dict(d_model=n_heads * head_dim, n_heads=n_heads, n_kv_heads=n_kv_heads)


def shared(draw):
    """The fields every model kind shares."""
    return dict(**draw(widths()), positions=draw(st.sampled_from(POSITIONS)),
                norm=draw(st.sampled_from(NORMS)), ffn=draw(st.sampled_from(FFNS)),
                ffn_hidden=draw(st.sampled_from([None, 3, 12])), prenorm=draw(st.booleans()),
                attn_bias=draw(st.booleans()), ffn_bias=draw(st.booleans()),
                vocab_size=draw(st.integers(3, 20)), max_len=draw(st.integers(2, 9)))


@st.composite
def decoder_configs(draw):
    recipe = draw(st.sampled_from([DecoderConfig, DecoderConfig.gpt2, DecoderConfig.llama,
                                   DecoderConfig.mixtral]))
    fields = dict(**shared(draw), n_layers=draw(st.integers(1, 3)),
                  tie_embeddings=draw(st.booleans()),
                  attention=draw(st.sampled_from(["plain", "flash"])))
    experts = draw(st.sampled_from([0, 1, 3]) if recipe is not DecoderConfig.mixtral
                   else st.sampled_from([2, 4, 8]))
    fields.update(n_experts=experts, top_k=min(2, experts) if experts else 2)
    if draw(st.booleans()):
        fields["window"] = draw(st.integers(1, 4))
    return recipe(**fields)


@st.composite
def encoder_configs(draw):
    recipe = draw(st.sampled_from([EncoderConfig, EncoderConfig.bert]))
    return recipe(**shared(draw), n_layers=draw(st.integers(1, 3)),
                  type_vocab_size=draw(st.integers(0, 3)), embed_norm=draw(st.booleans()),
                  final_norm=draw(st.sampled_from([None, True, False])), pooler=draw(st.booleans()))


@st.composite
def seq2seq_configs(draw):
    recipe = draw(st.sampled_from([Seq2SeqConfig, Seq2SeqConfig.bart]))
    fields = shared(draw)
    share = draw(st.booleans())
    src_vocab = None if share else draw(st.sampled_from([None, fields["vocab_size"] + 5]))
    return recipe(**fields, src_vocab_size=src_vocab, share_embeddings=share,
                  n_encoder_layers=draw(st.integers(1, 2)), n_decoder_layers=draw(st.integers(1, 2)),
                  embed_norm=draw(st.booleans()), final_norm=draw(st.sampled_from([None, True, False])),
                  tie_head=draw(st.booleans()), logits_bias=draw(st.booleans()))


BUILDERS = {DecoderConfig: DecoderLM, EncoderConfig: Encoder, Seq2SeqConfig: EncoderDecoder}


@settings(max_examples=60)
@given(config=st.one_of(decoder_configs(), encoder_configs(), seq2seq_configs()),
       dtype=st.sampled_from(DTYPES))
def test_the_count_of_a_config_is_what_its_model_holds(config, dtype):
    model = BUILDERS[type(config)](config, np.random.default_rng(0), dtype)
    assert parameter_count(config) == model.num_parameters()
    # what a loader compares with the weight file: the bytes of the distinct arrays saved
    assert parameter_count(config) * np.dtype(dtype).itemsize == \
        sum(array.nbytes for array in model.state_dict().values())


@pytest.mark.parametrize("kind, expected", [
    # vocabulary 15, d 64, 2 layers, 4 heads, SwiGLU of width 256, RMSNorm, RoPE, untied:
    # tokens 15*64 = 960; a layer: Q/K/V 64*192 = 12,288, Wo 64*64 = 4,096,
    # gate/up/down 3*64*256 = 49,152, two RMSNorm gammas 2*64 = 128: 65,664;
    # 2 layers 131,328; the final norm 64; the head 960. 960 + 131,328 + 64 + 960 = 133,312.
    ("llama", 133_312),
    # GPT-2 at the same size, learned positions for 12: tokens 960, positions 12*64 = 768;
    # a layer: Q/K/V 12,288 + 192, Wo 4,096 + 64, up/down 2*64*256 + 256 + 64 = 33,088,
    # two LayerNorms 4*64 = 256: 49,984; 2 layers 99,968; final norm 128; tied head 0.
    # 960 + 768 + 99,968 + 128 = 101,824.
    ("gpt2", 101_824),
])
def test_the_count_by_hand(kind, expected):
    recipe = DecoderConfig.llama if kind == "llama" else DecoderConfig.gpt2
    config = recipe(vocab_size=15, d_model=64, n_heads=4, n_layers=2, max_len=12)
    assert parameter_count(config) == expected
