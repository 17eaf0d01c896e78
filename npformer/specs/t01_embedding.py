"""Token vectors and positions (``t01_embedding.py``), as the engines know them.

The lookup table as a component (ids read more than once), its facts, the gradient-check cases
of the embedding modules, and exercise 01. Mistakes: ``t01_embedding.json``.
"""
from __future__ import annotations

import numpy as np

from ..t01_embedding import Embedding, Embeddings, LearnedPositions, SinusoidalPositions
from ..t08_norm import LayerNorm
from ..t10_model import DecoderConfig, DecoderLM
from . import claims
from .draw import Example, arrays, ids, normal, size
from .facts import close, upstream
from .case_inputs import shape
from .registry import Spec, lookup

spec = Spec("t01_embedding.py")


# -- the lookup as a component, its weights an argument ---------------------------------------------
def embedding_forward(ids, table):
    """ids [B, N], table [V, d] -> (table rows [B, N, d], cache)."""
    layer = lookup("t01_embedding.Embedding")(table.shape[0], table.shape[1], np.random.default_rng(0),
                                              dtype=table.dtype)
    layer.weight.data[...] = table
    out, cache = layer.forward(ids)
    return out, (layer, cache)


def embedding_backward(d_out, cache):
    """-> (None, d_table): ids get no gradient; a row read twice receives both."""
    layer, inner = cache
    layer.backward(d_out, inner)
    return None, layer.weight.grad


@spec.component("embedding", "a lookup table (ids read more than once)",
                "embedding_forward(ids, table) -> (table[ids], cache)", (embedding_forward, embedding_backward),
                "(None, d_table)", ("t01_embedding.Embedding.forward", "t01_embedding.Embedding.backward"))
def embedding_inputs(draw):
    """ids [B, N] in [0, V) (small V, so ids repeat) and a table [V, d]."""
    B, N, V, d = draw(size(1, 2)), draw(size(1, 4)), draw(size(1, 4)), draw(size(1, 3))
    return Example(("ids", "table"), (draw(ids((B, N), V)), draw(arrays((V, d)))))


def scaled_embedding(said):
    """The lookup under ``said`` {"scale": "sqrt(d)"}: rows times sqrt(d), as "Attention is all
    you need" and Gemma scale their embeddings."""
    def scaled_forward(ids, table):
        out, cache = embedding_forward(ids, table)
        scale = np.sqrt(table.shape[1])
        return out * scale, (cache, scale)

    def scaled_backward(d_out, cache):
        inner, scale = cache
        return embedding_backward(d_out * scale, inner)
    return scaled_forward, scaled_backward


spec.conventions("embedding", {"scale": ("sqrt(d)",)}, scaled_embedding)


def _scale_embeddings(module, config):
    module.embed.scale = float(np.sqrt(config.d_model))


spec.module_convention({"embeddings": "times sqrt(d)"}, lambda kind, config: kind == "decoder",
                       tweak=_scale_embeddings)


@spec.corners("embedding")
def embedding_corners(rng):
    return [Example(("ids", "table"), (np.array([[3, 3, 1], [0, 3, 1]]), normal(rng, 5, 2)))]


@spec.prop("embedding", "an id read twice receives both gradients; ids never read receive none",
           needs_backward=True)
def embedding_rows_collect_their_reads(subject, example):
    ids, table = example.args
    G = upstream(ids.shape + (table.shape[1],))
    d_table = subject.gradients(example.args, {}, G)[-1]
    expected = np.zeros(table.shape)
    for position, row in np.ndenumerate(ids):
        expected[row] += G[position]
    close("d_table", d_table, expected)


# -- gradient-check cases ----------------------------------------------------------------------------
@spec.case("Embedding")
def embedding_case(rng, size):
    B, N, d, H = shape(size)
    ids = rng.integers(0, 5, (B, N))
    ids[0, :2] = 3                           # a repeated id accumulates
    return Embedding(7, d, rng), (ids,), {}


@spec.case("Embedding (padding row)")
def embedding_padding_row_case(rng, size):
    # The padding row's lookups send nothing back (torch's padding_idx), which no finite
    # difference can confirm: the upstream is zero where the ids read that row, so its true
    # gradient is zero too, and the check holds every other row to the full gradient.
    B, N, d, H = shape(size)
    ids = rng.integers(0, 7, (B, N))
    ids[0, :2] = 3                           # the padding row, read twice
    ids[-1, -1] = 2                          # its neighbours must still learn
    upstream_ = normal(rng, B, N, d) * (ids != 3)[..., None]
    return Embedding(7, d, rng, padding_idx=3), (ids,), {"upstream": upstream_}


@spec.case("LearnedPositions")
def learned_positions_case(rng, size):
    B, N, d, H = shape(size)
    return LearnedPositions(N + 2, d, rng), (np.arange(N),), {}


@spec.case("Embeddings")
def embeddings_case(rng, size):
    B, N, d, H = shape(size)
    tokens = Embedding(7, d, rng)
    positions = LearnedPositions(N + 2, d, rng)
    segments = Embedding(3, d, rng) if size != 0 else None
    norm = LayerNorm(d) if size == 2 else None
    embed = Embeddings(tokens, positions, segments, norm, scale=(1.0, 2.0, 0.5)[size])
    options = {"positions": np.arange(N) if size != 1 else rng.integers(0, N + 2, (B, N))}
    if segments is not None:
        options["segments"] = rng.integers(0, 3, (B, N))
    return embed, (rng.integers(0, 7, (B, N)),), options


@spec.case("Embeddings (sinusoidal)")
def embeddings_sinusoidal_case(rng, size):
    B, N, d, H = shape(size)
    d = d + 1                                   # an odd width: one cosine column fewer than sines
    embed = Embeddings(Embedding(7, d, rng), SinusoidalPositions(N + 2, d))
    return embed, (rng.integers(0, 7, (B, N)),), {"positions": np.arange(2, 2 + N)}


@spec.case("DecoderLM (tied, padding row)")
def decoder_tied_padding_row_case(rng, size):
    # the token table is read by the lookup and by the head; its padding row is frozen for the
    # lookup only, so it still receives the head's share (the ids never read it: finite
    # differences could not follow the frozen lookup)
    B, N, d, H = shape(size)
    config = DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=9, pad_token_id=0)
    return DecoderLM(config, rng), (rng.integers(1, 9, (B, N)),), {}


# -- the exercise --------------------------------------------------------------------------------------
spec.exercise(1, "embedding", "token and position lookups",
              "tutorial part 2 §2, from token ids to vectors; §3, why positions are needed",
              backward=("t01_embedding.py:Embedding.backward", "t01_embedding.py:Embeddings.backward"),
              forward=("t01_embedding.py:Embedding.forward", "t01_embedding.py:sinusoid_table"),
              checks=(("Embedding", (0, 1)), ("Embedding (padding row)", (0,)), ("LearnedPositions", (0,)),
                      ("Embeddings", (0, 1, 2)), ("Embeddings (sinusoidal)", (0,)),
                      ("DecoderLM (tied, padding row)", (1,))), components=("embedding",))


@spec.claim("embedding", "positions shared by the whole batch receive the sum over the batch")
def shared_positions_sum_over_the_batch(L, R):
    g = claims.rng()
    tokens = L.t01_embedding.Embedding(7, 4, g, dtype=np.float64)
    positions = L.t01_embedding.LearnedPositions(6, 4, g, dtype=np.float64)
    embed = L.t01_embedding.Embeddings(tokens, positions)
    _, cache = embed.forward(g.integers(0, 7, (3, 5)))
    d_out = g.standard_normal((3, 5, 4))
    embed.backward(d_out, cache)
    claims.close("position table gradient", positions.weight.grad[:5], d_out.sum(axis=0))
