"""Tokenizers: round trips, special tokens, unknown characters, JSON save/load."""
import json

import pytest
from hypothesis import given, strategies as st

from npformer.tokenizer import ByteTokenizer, CharTokenizer, Tokenizer

CORPUS = "退货运费谁出？商家承担，买家承担。abc 123"


@given(st.text())
def test_byte_round_trip_any_string(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))          # the ids ARE the UTF-8 bytes
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode(text, bos=True, eos=True)) == text


@given(st.text(alphabet=sorted(set(CORPUS))))
def test_char_round_trip_over_the_corpus_alphabet(text):
    tok = CharTokenizer.from_corpus(CORPUS)
    ids = tok.encode(text)
    assert len(ids) == len(text)                      # one id per character, Chinese included
    assert tok.decode(ids) == text


def test_char_ids_are_sorted_after_specials():
    tok = CharTokenizer.from_corpus(["ba", "c"])
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.encode("abc") == [4, 5, 6] and tok.vocab_size == 7
    assert tok.encode("ab", bos=True, eos=True) == [1, 4, 5, 2]


def test_specials_decode():
    tok = CharTokenizer.from_corpus("ab")
    ids = tok.encode("ab", bos=True, eos=True) + [tok.pad_id]
    assert tok.decode(ids) == "ab"
    assert tok.decode(ids, skip_special=False) == "<bos>ab<eos><pad>"
    byte = ByteTokenizer()
    assert byte.vocab_size == 259 and (byte.pad_id, byte.bos_id, byte.eos_id) == (256, 257, 258)
    assert byte.decode([byte.bos_id, 104, 105, byte.eos_id], skip_special=False) == "<bos>hi<eos>"


def test_unknown_characters_error_or_unk():
    tok = CharTokenizer.from_corpus("退货")
    with pytest.raises(ValueError, match="not in the vocabulary: '运费'"):
        tok.encode("退运费货")
    ids = tok.encode("退运货", unknown="unk")
    assert ids[1] == tok.unk_id
    assert tok.decode(ids) == "退\ufffd货"
    assert tok.unknown_chars("运退费运") == ["运", "费"]


def test_byte_decode_of_a_cut_character_is_replaced():
    tok = ByteTokenizer()
    ids = tok.encode("费")[:2]                         # 3 UTF-8 bytes, cut after 2
    assert tok.decode(ids) == "\ufffd"
    with pytest.raises(ValueError, match="UTF-8"):
        tok.encode("\ud800")                           # a lone surrogate has no UTF-8 form


def test_decode_rejects_out_of_range():
    with pytest.raises(ValueError, match="ids"):
        CharTokenizer.from_corpus("a").decode([99])
    with pytest.raises(ValueError, match="ids"):
        ByteTokenizer().decode([259])


@pytest.mark.parametrize("tok", [CharTokenizer.from_corpus(CORPUS), ByteTokenizer()])
def test_save_load_json(tmp_path, tok):
    path = tmp_path / "tok.json"
    tok.save(path)
    json.loads(path.read_text(encoding="utf-8"))       # plain JSON
    again = Tokenizer.load(path)
    assert type(again) is type(tok) and again.vocab_size == tok.vocab_size
    assert again.encode("退货运费") == tok.encode("退货运费")


def test_load_rejects_foreign_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not an npformer tokenizer"):
        Tokenizer.load(path)
    path.write_text('{"kind": "char"')
    with pytest.raises(ValueError, match="not valid JSON"):
        Tokenizer.load(path)


def test_empty_corpus_is_an_error():
    with pytest.raises(ValueError, match="texts"):
        CharTokenizer.from_corpus("")
