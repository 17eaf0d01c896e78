"""Claims of what is built from the components: blocks, models, loss, AdamW, caches, MoE,
encoders, encoder-decoders and blockwise attention."""
from __future__ import annotations

import numpy as np

from .registry import ClaimFailed, claim, close, expects, raised, rng, upstream_at, zero


def _silence(*linears):
    """Zero the weights and biases of output projections: the sub-layer then outputs 0."""
    for linear in linears:
        linear.weight.data[...] = 0
        if linear.bias is not None:
            linear.bias.data[...] = 0


# -- block ---------------------------------------------------------------------------------

@claim("block", "a residual carries the gradient: with silent sub-layers a Pre-Norm block has d_x = d_out")
def _(L, R):
    g = rng()
    block = L.t09_block.build_block(L.t09_block.BlockConfig(d_model=8, n_heads=2), g, np.float64)
    _silence(block.attn.out, block.ffn.down)
    out, cache = block.forward(g.standard_normal((2, 4, 8)))
    G = g.standard_normal(out.shape)
    close("d_x", block.backward(G, cache), G, 1e-12)


@claim("block", "causal: the gradient from position 1 reaches no input after it (Pre- and Post-Norm)")
def _(L, R):
    g = rng()
    for prenorm in (True, False):
        block = L.t09_block.build_block(L.t09_block.BlockConfig(d_model=8, n_heads=2, prenorm=prenorm), g,
                                    np.float64)
        out, cache = block.forward(g.standard_normal((2, 4, 8)))
        zero("d_x after position 1", block.backward(upstream_at(out.shape, (slice(None), 1), g), cache)[:, 2:])


# -- model -----------------------------------------------------------------------------------
def _decoder(L, g, **overrides):
    config = L.t10_model.DecoderConfig(**{**dict(vocab_size=13, d_model=8, n_heads=2, max_len=8), **overrides})
    return L.t10_model.DecoderLM(config, g, np.float64)


@claim("model", "causal: the logits at positions 0..2 send no gradient to the position rows after 2")
def _(L, R):
    g = rng()
    model = _decoder(L, g, n_layers=2)
    logits, cache = model.forward(g.integers(0, 13, (2, 6)))
    model.backward(upstream_at(logits.shape, (slice(None), slice(0, 3)), g), cache)
    zero("positions.weight.grad after row 2", model.positions.weight.grad[3:])


@claim("model", "a tied head and the token table are one Parameter: it receives the lookup's and "
                "the head's gradient")
def _(L, R):
    g = rng()
    tied, untied = _decoder(L, g, tie_embeddings=True), _decoder(L, g)
    untied.load_state_dict({**tied.state_dict(), "head.weight": tied.tokens.weight.data.T})
    ids = g.integers(0, 13, (2, 5))
    G = g.standard_normal((2, 5, 13))
    for model in (tied, untied):
        model.backward(G, model.forward(ids)[1])
    close("tokens.weight.grad of the tied model", tied.tokens.weight.grad,
          untied.tokens.weight.grad + untied.head.weight.grad.T)


# -- loss --------------------------------------------------------------------------------------
@claim("kv-cache", "decoding one token at a time through the KV cache gives the full forward's logits")
def _(L, R):
    g = rng()
    model = _decoder(L, g, n_layers=2, n_kv_heads=1)
    ids = g.integers(0, 13, (2, 6))
    full = model.forward(ids)[0]
    cache = model.new_kv_cache(2)
    steps = [model.forward(ids[:, t:t + 1], kv_cache=cache)[0] for t in range(6)]
    close("cached logits", np.concatenate(steps, axis=1), full, 1e-10)


def write_of_another_shape(L):
    """{"raised": what LayerKV.write raised for keys of another shape than the cache's, or None}."""
    cache = L.t13_kv_cache.KVCache(1, 2, 2, 4, 3, np.float64)
    wrong = np.zeros((2, 1, 1, 3))                       # one key/value head where the cache holds two
    return {"raised": raised(lambda: cache.layers[0].write(wrong, wrong))}


def judge_write_of_another_shape(computed):
    """The claim's verdict: the write raised ValueError (or a subclass of it)."""
    expects("ValueError", computed.get("raised", ...),
            "LayerKV.write stored keys of shape (2, 1, 1, 3) in a cache of 2 heads",
            "LayerKV.write of keys of shape (2, 1, 1, 3) in a cache of 2 heads")


@claim("kv-cache", "keys of another shape than the cache was made for are refused with a ValueError")
def refuses_another_shape(L, R):
    return judge_write_of_another_shape(write_of_another_shape(L))


# graded, the two halves run apart: the learner's process reports, the judge decides
refuses_another_shape.compute, refuses_another_shape.judge = write_of_another_shape, judge_write_of_another_shape


@claim("kv-cache", "new keys and values are stored in the cache's own preallocated arrays (KVCache.k, "
                   "KVCache.v), after the ones already cached")
def _(L, R):
    g = rng()
    cache = L.t13_kv_cache.KVCache(1, 2, 2, 4, 3, np.float64)
    k1, v1, k2, v2 = (g.standard_normal((2, 2, n, 3)) for n in (2, 2, 1, 1))
    cache.layers[0].write(k1, v1)
    cache.advance(2)
    cache.layers[0].write(k2, v2)
    close("KVCache.k[0] after writing 2 then 1 positions", cache.k[0, :, :, :3], np.concatenate([k1, k2], axis=2))
    close("KVCache.v[0] after writing 2 then 1 positions", cache.v[0, :, :, :3], np.concatenate([v1, v2], axis=2))


@claim("kv-cache", "with a sliding window of 2, a prompt of 3 then one token at a time through the KV "
                   "cache gives the full forward's logits")
def _(L, R):
    g = rng()
    model = _decoder(L, g, n_layers=2, n_kv_heads=1, window=2)
    ids = g.integers(0, 13, (2, 6))
    full = model.forward(ids)[0]
    cache = model.new_kv_cache(2)
    steps = [model.forward(ids[:, :3], kv_cache=cache)[0]]           # three new queries at once
    steps += [model.forward(ids[:, t:t + 1], kv_cache=cache)[0] for t in range(3, 6)]
    close("cached logits", np.concatenate(steps, axis=1), full, 1e-10)


# -- MoE ------------------------------------------------------------------------------------------
@claim("moe", "an expert no token chose receives no gradient")
def _(L, R):
    g = rng()
    moe = L.t14_moe.MoE(8, 6, top_k=1, expert="gelu", rng=g, dtype=np.float64)
    out, cache = moe.forward(g.standard_normal((1, 2, 8)))
    moe.backward(g.standard_normal(out.shape), cache)
    for e, call in enumerate(cache.calls):
        if call is None:
            for name, p in moe.experts[e].named_parameters():
                zero(f"experts.{e}.{name}.grad", p.grad)


@claim("moe", "k = E identical experts act as one FFN: its input gradient; the router gets none (aux aside)")
def _(L, R):
    g = rng()
    moe = L.t14_moe.MoE(8, 3, top_k=3, expert="gelu", bias=True, rng=g, dtype=np.float64)
    for expert in moe.experts[1:]:
        expert.load_state_dict(moe.experts[0].state_dict())
    x, G = g.standard_normal((2, 3, 8)), g.standard_normal((2, 3, 8))
    out, cache = moe.forward(x)
    d_x = moe.backward(G, cache, d_aux=0.0)
    single = moe.experts[0].astype(np.float64)
    close("d_x", d_x, single.backward(G, single.forward(x)[1]))
    close("router.weight.grad", moe.router.weight.grad, 0.0)


# -- encoder and encoder-decoder ----------------------------------------------------------------------
@claim("encoder", "mean pooling: padded positions receive exactly zero gradient")
def _(L, R):
    g = rng()
    key_mask = np.array([[True, True, False], [True, True, True]])
    _, cache = L.t15_encoder.mean_pool_forward(g.standard_normal((2, 3, 4)), key_mask)
    zero("the gradient of the padded position", L.t15_encoder.mean_pool_backward(
        g.standard_normal((2, 4)), cache)[0, 2])


@claim("encoder", "L2 normalisation: the gradient has no component along the output (length changes nothing)")
def _(L, R):
    g = rng()
    y, cache = L.t15_encoder.l2_normalize_forward(g.standard_normal((3, 5)))
    d_x = L.t15_encoder.l2_normalize_backward(g.standard_normal((3, 5)), cache)
    close("d_x . y", np.sum(d_x * y, axis=-1), 0.0, 1e-12)


@claim("encoder", "L2 normalisation: a vector shorter than eps is only divided by eps, so its "
                   "gradient is d_out / eps (no projection)")
def _(L, R):
    g = rng()
    x = g.standard_normal((2, 4))
    x[0] = x[0] * (1e-13 / np.linalg.norm(x[0]))      # shorter than eps = 1e-12
    _, cache = L.t15_encoder.l2_normalize_forward(x)
    d_out = g.standard_normal((2, 4))
    d_x = L.t15_encoder.l2_normalize_backward(d_out, cache)
    close("the gradient of the short vector", d_x[0], d_out[0] / 1e-12, 1e-9)


def position_gradient(L):
    """{"position_gradient": the position table's gradient after a backward from the state at
    position 0 alone}."""
    g = rng()
    encoder = L.t15_encoder.Encoder(L.t15_encoder.EncoderConfig(vocab_size=11, max_len=6), g, np.float64)
    states, cache = encoder.forward(g.integers(0, 11, (1, 5)))
    encoder.backward(upstream_at(states.shape, (0, 0), g), cache)
    return {"position_gradient": np.asarray(encoder.positions.weight.grad)}


def judge_position_gradient(computed):
    """The claim's verdict: each of the 5 positions' rows received some gradient."""
    grad = computed.get("position_gradient")
    if not isinstance(grad, np.ndarray) or grad.ndim != 2 or grad.shape[0] < 5:
        raise ClaimFailed("the claim's run did not report the position table's gradient")
    rows = np.abs(grad[:5]).sum(axis=-1)
    if not (rows > 0).all():
        raise ClaimFailed(f"position rows {np.flatnonzero(~(rows > 0)).tolist()} received no gradient")


@claim("encoder", "an encoder reads both ways: the state at position 0 sends gradient to every "
                  "position's row of the position table")
def reads_both_ways(L, R):
    return judge_position_gradient(position_gradient(L))


reads_both_ways.compute, reads_both_ways.judge = position_gradient, judge_position_gradient


@claim("seq2seq", "cross-attention: padded source positions get exactly zero memory gradient")
def _(L, R):
    g = rng()
    cross = L.t17_seq2seq.CrossAttention(8, 2, rng=g, dtype=np.float64)
    mask = np.ones((2, 1, 1, 4), bool)
    mask[0, ..., -1] = False
    out, cache = cross.forward(g.standard_normal((2, 3, 8)), g.standard_normal((2, 4, 8)), mask)
    zero("d_memory at the padded source position", cross.backward(g.standard_normal(out.shape), cache)[1][0, -1])


@claim("seq2seq", "with cross-attention silenced, the encoder receives no gradient at all")
def _(L, R):
    g = rng()
    model = L.t17_seq2seq.EncoderDecoder(L.t17_seq2seq.Seq2SeqConfig(vocab_size=13, n_decoder_layers=2,
                                                             share_embeddings=False), g, np.float64)
    for block in model.blocks:
        _silence(block.cross_attn.out)
    logits, cache = model.forward(g.integers(0, 13, (2, 4)), g.integers(0, 13, (2, 3)))
    model.backward(g.standard_normal(logits.shape), cache)
    for name, p in model.encoder.named_parameters():
        zero(f"encoder.{name}.grad", p.grad)


# -- blockwise attention -------------------------------------------------------------------------------
@claim("flash", "blockwise backward equals the whole-table backward for blocks of 1, 2 and all 6 keys")
def _(L, R):
    g = rng()
    q, k, v = g.standard_normal((2, 4, 6, 3)), g.standard_normal((2, 2, 6, 3)), g.standard_normal((2, 2, 6, 3))
    G = g.standard_normal((2, 4, 6, 3))
    expected = R.t04_attention.grouped_attention_backward(
        G, R.t04_attention.grouped_attention_forward(q, k, v, causal=True)[1])
    for block_size in (1, 2, 6):
        _, cache = L.t18_flash_attention.flash_attention_forward(q, k, v, causal=True, block_size=block_size)
        for name, mine, right in zip(("d_q", "d_k", "d_v"),
                                     L.t18_flash_attention.flash_attention_backward(G, cache), expected):
            close(f"{name} with blocks of {block_size}", mine, right, 1e-10)


@claim("flash", "a query that can read nothing gets zero gradient, not NaN")
def _(L, R):
    g = rng()
    q, k, v = g.standard_normal((1, 1, 3, 2)), g.standard_normal((1, 1, 3, 2)), g.standard_normal((1, 1, 3, 2))
    mask = np.ones((1, 1, 3, 3), bool)
    mask[..., 0, :] = False
    _, cache = L.t18_flash_attention.flash_attention_forward(q, k, v, mask, block_size=2)
    zero("d_q of the query with nothing to read",
         L.t18_flash_attention.flash_attention_backward(g.standard_normal((1, 1, 3, 2)), cache)[0][..., 0, :])
