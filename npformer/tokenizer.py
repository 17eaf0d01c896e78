"""Tokenizers: text <-> integer ids, the model's only view of language.

- ``CharTokenizer``: one id per character seen in a corpus (Chinese text works
  character by character), after four special tokens.
- ``ByteTokenizer``: the 256 byte values of UTF-8, then three special tokens;
  it covers every string, at the price of 1 to 4 ids per character.

Special tokens: ``<pad>`` fills short sequences of a batch, ``<bos>`` opens a
sequence, ``<eos>`` ends one (generation stops there), and for the char-level
tokenizer ``<unk>`` stands for a character outside the vocabulary.

Unknown characters (char-level): ``encode(text)`` raises ``ValueError`` naming
them (the default, so nothing is silently lost); ``encode(text, unknown="unk")``
maps each to ``<unk>``, which decodes to U+FFFD. Special tokens are written and
read only as ids: the text "<eos>" is five ordinary characters.
"""
from __future__ import annotations

import json

from .core.fileio import write_json

SPECIALS = ("<pad>", "<bos>", "<eos>")
UNK = "<unk>"
REPLACEMENT = "\ufffd"


class Tokenizer:
    """Shared part: special ids, decoding options and JSON save/load."""

    kind = ""
    specials: tuple = SPECIALS

    def special_id(self, token):
        """The id of a special token such as "<eos>"."""
        raise NotImplementedError  # pragma: no cover

    @property
    def pad_id(self):
        """The id of <pad>."""
        return self.special_id("<pad>")

    @property
    def bos_id(self):
        """The id of <bos>."""
        return self.special_id("<bos>")

    @property
    def eos_id(self):
        """The id of <eos>."""
        return self.special_id("<eos>")

    def _with_specials(self, ids, bos, eos):
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def to_dict(self):
        """A JSON-ready dict that ``tokenizer_from_dict`` reads back."""
        raise NotImplementedError  # pragma: no cover

    def save(self, path):
        """Write the tokenizer as JSON, atomically (temporary file, then rename)."""
        write_json(path, self.to_dict())

    @staticmethod
    def load(path):
        """Read a tokenizer written by ``save`` (either kind)."""
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(f"tokenizer file {path}: not valid JSON ({error})") from None
        return tokenizer_from_dict(data, str(path))


class CharTokenizer(Tokenizer):
    """One id per distinct character: ids 0-3 are <pad> <bos> <eos> <unk>, then the
    corpus characters in sorted (code point) order, so the same corpus always gives
    the same ids."""

    kind = "char"
    specials = SPECIALS + (UNK,)

    def __init__(self, chars):
        chars = list(chars)
        if len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise ValueError("chars: expected distinct single characters")
        self.chars = chars
        self.id_of = {c: i + len(self.specials) for i, c in enumerate(chars)}
        self._special_ids = {tok: i for i, tok in enumerate(self.specials)}

    @classmethod
    def from_corpus(cls, texts):
        """Build the vocabulary from a string or an iterable of strings."""
        if isinstance(texts, str):
            texts = [texts]
        chars = set()
        for text in texts:
            chars.update(text)
        if not chars:
            raise ValueError("texts: expected a non-empty corpus, got no characters")
        return cls(sorted(chars))

    @property
    def vocab_size(self):
        """How many ids there are, special tokens included."""
        return len(self.specials) + len(self.chars)

    def special_id(self, token):
        """The id of a special token such as "<eos>"."""
        return self._special_ids[token]

    @property
    def unk_id(self):
        """The id of <unk>."""
        return self.special_id(UNK)

    def unknown_chars(self, text):
        """The characters of ``text`` outside the vocabulary, in order of appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.id_of))

    def encode(self, text, bos=False, eos=False, unknown="error"):
        """text -> list of ids. ``unknown``: "error" (ValueError) or "unk" (-> <unk>)."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        if unknown == "error":
            missing = self.unknown_chars(text)
            if missing:
                shown = "".join(missing[:10])
                raise ValueError(f"text: characters not in the vocabulary: {shown!r} "
                                 f"({len(missing)} distinct)")
            ids = [self.id_of[c] for c in text]
        elif unknown == "unk":
            ids = [self.id_of.get(c, self.unk_id) for c in text]
        else:
            raise ValueError(f"unknown: expected 'error' or 'unk', got {unknown!r}")
        return self._with_specials(ids, bos, eos)

    def decode(self, ids, skip_special=True):
        """ids -> text; specials are dropped (or shown as "<eos>" etc.), <unk> becomes U+FFFD."""
        n_special = len(self.specials)
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"ids: expected ids in [0, {self.vocab_size}), got {i}")
            if i == self.unk_id:
                out.append(REPLACEMENT)
            elif i < n_special:
                if not skip_special:
                    out.append(self.specials[i])
            else:
                out.append(self.chars[i - n_special])
        return "".join(out)

    def to_dict(self):
        """A JSON-ready dict that ``tokenizer_from_dict`` reads back."""
        return {"kind": self.kind, "specials": list(self.specials), "chars": "".join(self.chars)}


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes: ids 0-255 are the byte values, 256-258 are <pad> <bos> <eos>.

    Every string without lone surrogates encodes. ``decode`` turns byte
    sequences that are not valid UTF-8 (e.g. a character cut in half by a
    length limit) into U+FFFD instead of failing.
    """

    kind = "byte"

    @property
    def vocab_size(self):
        """How many ids there are, special tokens included."""
        return 256 + len(self.specials)

    def special_id(self, token):
        """The id of a special token such as "<eos>"."""
        return 256 + self.specials.index(token)

    def encode(self, text, bos=False, eos=False):
        """The UTF-8 bytes of ``text`` as ids 0-255, with <bos>/<eos> ids if asked."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"text: cannot be encoded as UTF-8 ({error.reason} at "
                             f"position {error.start})") from None
        return self._with_specials(list(data), bos, eos)

    def decode(self, ids, skip_special=True):
        """Text from ids; invalid UTF-8 becomes U+FFFD; specials are skipped unless asked."""
        out, run = [], bytearray()
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"ids: expected ids in [0, {self.vocab_size}), got {i}")
            if i < 256:
                run.append(i)
                continue
            out.append(run.decode("utf-8", errors="replace"))
            run = bytearray()
            if not skip_special:
                out.append(self.specials[i - 256])
        out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)

    def to_dict(self):
        """A JSON-ready dict that ``tokenizer_from_dict`` reads back."""
        return {"kind": self.kind, "specials": list(self.specials)}


def tokenizer_from_dict(data, source="tokenizer"):
    """Rebuild a tokenizer from ``to_dict()`` output, validating it."""
    if not isinstance(data, dict) or data.get("kind") not in ("char", "byte"):
        raise ValueError(f"{source}: not an npformer tokenizer (expected kind 'char' or 'byte')")
    if data["kind"] == "byte":
        if tuple(data.get("specials", ())) != SPECIALS:
            raise ValueError(f"{source}: unexpected special tokens {data.get('specials')}")
        return ByteTokenizer()
    if tuple(data.get("specials", ())) != CharTokenizer.specials or not isinstance(data.get("chars"), str):
        raise ValueError(f"{source}: a char tokenizer needs specials {list(CharTokenizer.specials)} "
                         f"and a 'chars' string")
    return CharTokenizer(list(data["chars"]))
