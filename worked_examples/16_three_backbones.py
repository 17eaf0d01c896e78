"""Three backbones: encoder-only reads both ways, decoder-only reads backwards, encoder-decoder cross-reads.

The same blocks, different visibility. An encoder lets every position read
every position (a representation of the whole input). A decoder-only model
reads only itself and earlier positions (generation). An encoder-decoder
encodes the source once; its causal decoder then reads the encoder output
through cross-attention, with Q from the target side (the sentence being
written) and K, V from the source side (the sentence being read).
"""
import numpy as np

from npformer import (DecoderConfig, DecoderLM, Encoder, EncoderConfig, EncoderDecoder,
                      Seq2SeqConfig)

IDS = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])          # the tutorial's ids
SOURCE = np.array([[4, 9, 21, 33, 2, 11]])              # a 6-token source ("English side")
TARGET = np.array([[1, 14, 27, 8]])                      # a 4-token target prefix being written


def readable(weights):
    """How many positions each query row of head 0 reads (weight > 0)."""
    return (weights[0, 0] > 0).sum(axis=-1).tolist()


def run(out=print):
    rng = np.random.default_rng(0)
    out("1. Encoder-only (BERT-style), the tutorial's 8 ids:")
    states, enc_cache = Encoder(EncoderConfig(), rng).forward(IDS)
    enc_rows = readable(enc_cache.attention(0))
    out(f"   states {list(states.shape)}; positions read by each row: {enc_rows}")

    out("2. Decoder-only, the same ids:")
    logits, dec_cache = DecoderLM(DecoderConfig(), rng).forward(IDS)
    dec_rows = readable(dec_cache.attention(0))
    out(f"   logits {list(logits.shape)}; positions read by each row: {dec_rows}")

    out(f"3. Encoder-decoder: source {SOURCE[0].tolist()}, target prefix {TARGET[0].tolist()}")
    model = EncoderDecoder(Seq2SeqConfig(), rng).astype(np.float64)
    s2s_logits, cache = model.forward(SOURCE, TARGET)
    block = cache.decoder.blocks[0]
    self_rows = readable(block.attn.weights)
    cross = cache.decoder.cross_attention(0)                      # [B, H, N_target, M_source]
    cross_rows = readable(cross)
    out(f"   logits {list(s2s_logits.shape)}; decoder self-attention rows read {self_rows} "
        f"target positions")
    out(f"   cross-attention: Q from the target stream {list(block.cross_attn.q.x.shape)}, K and V "
        f"from the encoder output {list(block.cross_attn.kv.x.shape)}")
    out(f"   cross weights {list(cross.shape)}: each target row reads {cross_rows} source positions")

    changed_source = SOURCE.copy()
    changed_source[0, -1] = 40
    first_target_moves = float(np.abs(model(changed_source, TARGET)[0, 0] - s2s_logits[0, 0]).max())
    changed_target = TARGET.copy()
    changed_target[0, -1] = 40
    earlier_rows_move = float(np.abs(model(SOURCE, changed_target)[0, :-1] - s2s_logits[0, :-1]).max())
    out(f"   change the LAST source token: the FIRST target position's logits move by "
        f"{first_target_moves:.1e}")
    out(f"   change the last target token: earlier target positions move by {earlier_rows_move:.1e}")
    return {"encoder_rows": enc_rows, "decoder_rows": dec_rows, "seq2seq_logits_shape": s2s_logits.shape,
            "self_rows": self_rows, "cross_shape": cross.shape, "cross_rows": cross_rows,
            "q_side_shape": block.cross_attn.q.x.shape, "kv_side_shape": block.cross_attn.kv.x.shape,
            "source_change_effect": first_target_moves, "target_change_effect": earlier_rows_move}


if __name__ == "__main__":
    run()
