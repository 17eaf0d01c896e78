"""The component protocol: parameters, gradient accumulation, caches, state dicts, dtypes."""
import numpy as np
import pytest

from npformer import Embedding, Linear, Parameter
from npformer.t11_loss import cross_entropy
from npformer.t10_model import DecoderConfig, DecoderLM


def test_parameter_needs_floats_and_zero_grad_resets():
    p = Parameter(np.ones(3, np.float32))
    p.grad += 2
    p.zero_grad()
    assert (p.grad == 0).all() and p.grad.dtype == np.float32
    with pytest.raises(TypeError, match="Parameter data: expected float32 or float64"):
        Parameter(np.ones(3, int))


def test_parameter_names_and_count_of_the_tiny_decoder():
    model = DecoderLM()
    names = [n for n, _ in model.named_parameters()]
    assert names[:3] == ["tokens.weight", "positions.weight", "blocks.0.norm1.gamma"]
    assert "blocks.0.attn.qkv.weight" in names and names[-1] == "head.weight"
    V, d, N = 50, 8, 16
    expected = V * d + N * d + 2 * (2 * d) + d * 3 * d + d * d + (d * 4 * d + 4 * d) \
        + (4 * d * d + d) + 2 * d + d * V
    assert model.num_parameters() == expected == 1784


def test_backward_adds_into_grad_and_a_layer_can_run_twice_before_backward():
    rng = np.random.default_rng(0)
    layer = Linear(3, 2, rng=rng).astype(np.float64)
    x1, x2 = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    g1, g2 = rng.standard_normal((4, 2)), rng.standard_normal((5, 2))
    _, c1 = layer.forward(x1)
    _, c2 = layer.forward(x2)       # second forward before any backward
    layer.backward(g2, c2)
    layer.backward(g1, c1)
    np.testing.assert_allclose(layer.weight.grad, x1.T @ g1 + x2.T @ g2, rtol=1e-12)
    np.testing.assert_allclose(layer.bias.grad, g1.sum(0) + g2.sum(0), rtol=1e-12)


def test_embedding_repeated_ids_accumulate():
    rng = np.random.default_rng(0)
    emb = Embedding(5, 3, rng).astype(np.float64)
    ids = np.array([[1, 4, 1, 1]])
    d_out = rng.standard_normal((1, 4, 3))
    _, cache = emb.forward(ids)
    emb.backward(d_out, cache)
    expected = np.zeros((5, 3))
    for position, token in enumerate(ids[0]):
        expected[token] += d_out[0, position]
    np.testing.assert_allclose(emb.weight.grad, expected, rtol=1e-12)


def test_cache_nbytes_counts_what_backward_keeps():
    layer = Linear(3, 2, rng=np.random.default_rng(0))
    x = np.zeros((10, 3), np.float32)
    _, cache = layer.forward(x)
    assert cache.nbytes == x.nbytes == 120
    _, model_cache = DecoderLM().forward(np.array([[1, 2, 3]]))
    assert model_cache.nbytes > 0 and model_cache.blocks[0].attn.attn.weights.nbytes == 2 * 9 * 4


def test_state_dict_round_trip_and_errors():
    a, b = DecoderLM(rng=np.random.default_rng(1)), DecoderLM(rng=np.random.default_rng(2))
    ids = np.array([[1, 2, 3]])
    assert not np.allclose(a(ids), b(ids))
    state = a.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    b.load_state_dict(state)
    np.testing.assert_array_equal(a(ids), b(ids))
    state["tokens.weight"] = state["tokens.weight"][:10]
    before = b.state_dict()
    with pytest.raises(ValueError, match=r"'tokens.weight' expected shape \(50, 8\), got \(10, 8\)"):
        b.load_state_dict(state)
    assert all(np.array_equal(before[k], v) for k, v in b.state_dict().items())   # nothing changed
    with pytest.raises(ValueError, match=r"missing keys \['head.weight'\]"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "head.weight"})
    with pytest.raises(ValueError, match=r"unexpected keys \['extra'\]"):
        b.load_state_dict({**a.state_dict(), "extra": np.zeros(1)})


def test_astype_returns_a_converted_copy_and_keeps_ties():
    model = DecoderLM(DecoderConfig.gpt2())
    double = model.astype(np.float64)
    assert model.dtype == np.float32 and double.dtype == np.float64
    assert double.head.weight is double.tokens.weight
    ids = np.array([[4, 5, 6]])
    np.testing.assert_allclose(double(ids), model(ids), rtol=1e-4, atol=1e-6)
    with pytest.raises(TypeError, match="astype: expected float32 or float64"):
        model.astype(np.int32)


def test_cross_entropy_matches_the_formula_and_ignores_padding():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 3, 5))
    targets = np.array([[1, 4, -100], [0, -100, 2]])
    loss, d_logits = cross_entropy(logits, targets)
    terms = [-np.log(np.exp(logits[b, t, targets[b, t]]) / np.exp(logits[b, t]).sum())
             for b in range(2) for t in range(3) if targets[b, t] != -100]
    np.testing.assert_allclose(loss, np.mean(terms), rtol=1e-12)
    assert (d_logits[0, 2] == 0).all() and (d_logits[1, 1] == 0).all()
    np.testing.assert_allclose(d_logits.sum(-1), 0, atol=1e-15)    # softmax - onehot sums to 0
    with pytest.raises(ValueError, match="targets: expected ids in"):
        cross_entropy(logits, np.full((2, 3), 5))
    with pytest.raises(ValueError, match="targets: expected shape"):
        cross_entropy(logits, np.zeros((2, 2), int))


# -- one rule for rng: None is the seeded default np.random.default_rng(0) --------------------
def _every_public_module():
    """{name: a function building it with ``rng`` left out}, for every public Module class."""
    import npformer as nf
    ln, ffn = (lambda: nf.LayerNorm(8)), (lambda: nf.FFN(8))
    return {
        "Embedding": lambda: nf.Embedding(11, 8), "LearnedPositions": lambda: nf.LearnedPositions(6, 8),
        "SinusoidalPositions": lambda: nf.SinusoidalPositions(6, 8),
        "Embeddings": lambda: nf.Embeddings(nf.Embedding(11, 8)),
        "Linear": lambda: nf.Linear(4, 3), "MultiHeadAttention": lambda: nf.MultiHeadAttention(8, 2),
        "Rotary": lambda: nf.Rotary(4), "FFN": ffn, "SwiGLU": lambda: nf.SwiGLU(8),
        "LayerNorm": ln, "RMSNorm": lambda: nf.RMSNorm(8),
        "PreNormBlock": lambda: nf.PreNormBlock(nf.MultiHeadAttention(8, 2), ffn(), ln(), ln()),
        "PostNormBlock": lambda: nf.PostNormBlock(nf.MultiHeadAttention(8, 2), ffn(), ln(), ln()),
        "DecoderLM": lambda: nf.DecoderLM(), "TiedHead": lambda: nf.TiedHead(nf.Embedding(11, 8)),
        "MoE": lambda: nf.MoE(8, 4), "Encoder": lambda: nf.Encoder(), "Pooler": lambda: nf.Pooler(8),
        "CrossAttention": lambda: nf.CrossAttention(8, 2),
        "EncoderDecoderBlock": lambda: nf.EncoderDecoderBlock(
            nf.MultiHeadAttention(8, 2), nf.CrossAttention(8, 2), ffn(), ln(), ln(), ln()),
        "EncoderDecoder": lambda: nf.EncoderDecoder(),
    }


def test_every_public_module_builds_without_an_rng():
    import inspect
    import npformer as nf
    from npformer.core.module import Module
    public = {name for name in dir(nf) if inspect.isclass(getattr(nf, name))
              and issubclass(getattr(nf, name), Module) and getattr(nf, name) is not Module}
    builders = _every_public_module()
    assert public == set(builders), "a public Module without a builder here: " \
        f"{sorted(public - set(builders))}"
    for name, build in builders.items():
        first, again = build().state_dict(), build().state_dict()
        for key in first:                                  # rng=None is seeded: the same weights
            np.testing.assert_array_equal(first[key], again[key], err_msg=f"{name}.{key}")


@pytest.mark.parametrize("name", ["Embedding", "Linear", "MultiHeadAttention", "FFN", "SwiGLU",
                                  "MoE", "CrossAttention", "Pooler", "DecoderLM", "Encoder",
                                  "EncoderDecoder"])
def test_rng_none_is_default_rng_0_shared_by_the_parts(name):
    import npformer as nf
    args = {"Embedding": (11, 8), "Linear": (4, 3), "MultiHeadAttention": (8, 2), "FFN": (8,),
            "SwiGLU": (8,), "MoE": (8, 4), "CrossAttention": (8, 2), "Pooler": (8,)}.get(name, ())
    cls = getattr(nf, name)
    omitted = cls(*args).state_dict()
    seeded = cls(*args, rng=np.random.default_rng(0)).state_dict()
    assert omitted.keys() == seeded.keys()
    for key in omitted:
        np.testing.assert_array_equal(omitted[key], seeded[key], err_msg=key)
    drawn = [w for w in omitted.values() if w.ndim == 2]
    for i, a in enumerate(drawn):                          # one stream: no two parts drew alike
        for b in drawn[i + 1:]:
            n = min(a.size, b.size)
            assert not np.array_equal(a.ravel()[:n], b.ravel()[:n])
    with pytest.raises(TypeError, match="rng: expected a numpy.random.Generator or None, got int"):
        cls(*args, rng=0)
